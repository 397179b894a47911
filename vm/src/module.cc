#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hexir/base/mapped_file.h"
#include "hexir/format/limits.h"
#include "vm_impl.h"

namespace hexir::vm {
namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

TensorSignature make_signature(const ModuleImpl& impl, const fb::Binding& binding) {
  TensorSignature sig;
  sig.name = binding.name() ? binding.name()->str() : std::string();
  sig.type = impl.verified.slot_types[binding.slot()];
  sig.byte_size = impl.fb().slots()->Get(binding.slot())->byte_size();
  sig.donated_to = binding.donated_to();
  return sig;
}

// The limits of LoadOptions, checked on the verified metadata before any
// allocation they bound (hexir/format/limits.h; hexir-dump applies the same).
// The public header spells the defaults out; they are the format's.
static_assert(LoadOptions{}.max_decompressed_bytes == format::LoadLimits{}.max_decompressed_bytes &&
              LoadOptions{}.max_fill_bytes == format::LoadLimits{}.max_fill_bytes &&
              LoadOptions{}.max_arena_bytes == format::LoadLimits{}.max_arena_bytes);
Status check_limits(const ModuleImpl& impl, const LoadOptions& options) {
  format::LoadLimits limits;
  limits.max_decompressed_bytes = options.max_decompressed_bytes;
  limits.max_fill_bytes = options.max_fill_bytes;
  limits.max_arena_bytes = options.max_arena_bytes;
  return format::check_load_limits(impl.verified, limits);
}

// Verifies `bytes` into `impl` and fills the summaries the accessors return.
Status finish_load(ModuleImpl& impl, std::span<const uint8_t> bytes, const LoadOptions& options) {
  format::VerifyOptions verify_options;
  verify_options.verify_data_checksum = options.verify_data_checksum;
  HEXIR_ASSIGN_OR_RETURN(impl.verified, format::verify_executable(bytes, verify_options));
  HEXIR_RETURN_IF_ERROR(check_limits(impl, options));
  // zstd sections are decompressed once, here; verified.sections then holds raw bytes.
  HEXIR_RETURN_IF_ERROR(
      format::decompress_sections(impl.verified, impl.owned_sections, options.max_decompressed_bytes));
  const fb::Module& m = impl.fb();
  impl.name = m.name() ? m.name()->str() : std::string();
  if (m.functions()) {
    for (const fb::Function* fn : *m.functions()) {
      FunctionSignature sig;
      sig.name = fn->name()->str();
      if (fn->inputs())
        for (const fb::Binding* b : *fn->inputs()) sig.inputs.push_back(make_signature(impl, *b));
      if (fn->outputs())
        for (const fb::Binding* b : *fn->outputs()) sig.outputs.push_back(make_signature(impl, *b));
      impl.functions.push_back(std::move(sig));
    }
  }
  impl.arena_bytes = m.arena()->size();
  const bool dynamic = m.arena()->strategy() == fb::PlanStrategy::FreeAtLastUse;
  impl.workspace_bytes = dynamic ? 0 : m.arena()->workspace_size();
  // What Context::create allocates (context.cc): the arena, the workspace at
  // the next multiple of the alignment in the same allocation, and a buffer
  // per result not computed in a donated input.
  if (impl.workspace_bytes == 0) {
    impl.context_bytes = impl.arena_bytes;
  } else {
    const uint64_t align = std::max<uint64_t>(m.arena()->alignment(), format::kConstantAlignment);
    impl.context_bytes =
        saturating_add(saturating_add(impl.arena_bytes, align - 1) & ~(align - 1), impl.workspace_bytes);
  }
  if (m.functions())
    for (const fb::Function* fn : *m.functions())
      if (fn->outputs())
        for (const fb::Binding* b : *fn->outputs()) {
          const fb::Slot& slot = *m.slots()->Get(b->slot());
          if (slot.storage() != fb::StorageKind::Input)
            impl.context_bytes = saturating_add(impl.context_bytes, slot.byte_size());
        }
  impl.lower_bound_bytes = m.arena()->lower_bound();
  impl.host_arena_bytes = m.arena()->host_size();
  impl.host_lower_bound_bytes = m.arena()->host_lower_bound();
  if (m.constants())
    for (const fb::Constant* c : *m.constants()) {
      impl.constant_bytes = saturating_add(impl.constant_bytes, c->byte_size());
      // Verified: a Rodata constant's section exists.
      if (c->storage() == fb::ConstantStorage::Rodata &&
          m.sections()->Get(c->section())->memory_space() == fb::MemorySpace::Host)
        impl.streamed_constant_bytes = saturating_add(impl.streamed_constant_bytes, c->byte_size());
    }
  return ok_status();
}

// copy_weights: the whole file read (not mapped) into owned, 64-byte aligned
// memory, from the regular file open as `fd` (from offset 0, with pread: the
// descriptor's position is left alone). Exactly the size fstat reported is
// read, and a file that shrinks meanwhile is an error, not a short module.
Result<format::SectionBuffer> read_whole_fd(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return invalid_argument("cannot stat '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument("'" + path + "' is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  HEXIR_ASSIGN_OR_RETURN(format::SectionBuffer buffer, format::SectionBuffer::allocate(size));
  uint64_t done = 0;
  while (done < size) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    const ssize_t n = ::pread(fd, buffer.data() + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return data_loss("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) return data_loss("'" + path + "' shrank while it was read");
    done += static_cast<uint64_t>(n);
  }
  return buffer;
}

// Opened without blocking (a FIFO would hang), then read_whole_fd.
Result<format::SectionBuffer> read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    std::string message = "cannot open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? not_found(std::move(message)) : invalid_argument(std::move(message));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  return read_whole_fd(fd, path);
}

}  // namespace

ModuleImpl::~ModuleImpl() = default;

Module::Module(std::unique_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}
Module::Module(std::shared_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

Result<Module> Module::load_file(const std::string& path, const LoadOptions& options) {
  auto impl = std::make_unique<ModuleImpl>();
  std::span<const uint8_t> bytes;
  if (options.copy_weights) {
    // Nothing of the file is kept: it may change or go once load returns.
    HEXIR_ASSIGN_OR_RETURN(impl->owned_file, read_whole_file(path));
    bytes = impl->owned_file.span();
  } else {
    // Private read-only mapping: weights are used in place and can never be written through.
    HEXIR_ASSIGN_OR_RETURN(impl->mapping, MappedFile::open(path));
    bytes = impl->mapping.bytes();
  }
  if (bytes.empty()) return data_loss(path + ": file is empty");
  Status status = finish_load(*impl, bytes, options);
  if (!status.ok()) return status.annotate(path);
  return Module(std::move(impl));
}

Result<Module> Module::load_fd(int fd, const std::string& what, const LoadOptions& options) {
  auto impl = std::make_unique<ModuleImpl>();
  std::span<const uint8_t> bytes;
  if (options.copy_weights) {
    HEXIR_ASSIGN_OR_RETURN(impl->owned_file, read_whole_fd(fd, what));
    bytes = impl->owned_file.span();
  } else {
    HEXIR_ASSIGN_OR_RETURN(impl->mapping, MappedFile::map_fd(fd, what));
    bytes = impl->mapping.bytes();
  }
  if (bytes.empty()) return data_loss(what + ": file is empty");
  Status status = finish_load(*impl, bytes, options);
  if (!status.ok()) return status.annotate(what);
  return Module(std::move(impl));
}

Result<Module> Module::load_buffer(std::span<const uint8_t> bytes, const LoadOptions& options) {
  auto impl = std::make_unique<ModuleImpl>();
  if (options.copy_weights) {
    HEXIR_ASSIGN_OR_RETURN(impl->owned_file, format::SectionBuffer::allocate(bytes.size()));
    if (!bytes.empty()) std::memcpy(impl->owned_file.data(), bytes.data(), bytes.size());
    bytes = impl->owned_file.span();
  } else if (reinterpret_cast<uintptr_t>(bytes.data()) % format::kConstantAlignment != 0) {
    return invalid_argument("load_buffer: the executable bytes must be 64-byte aligned");
  }
  HEXIR_RETURN_IF_ERROR(finish_load(*impl, bytes, options));
  return Module(std::move(impl));
}

const std::string& Module::name() const { return impl_->name; }
size_t Module::function_count() const { return impl_->functions.size(); }
std::span<const FunctionSignature> Module::functions() const { return impl_->functions; }
const FunctionSignature& Module::function(size_t index) const {
  // Not an assert: a bad index gets a signature with nothing in it (vm.h).
  return index < impl_->functions.size() ? impl_->functions[index] : impl_->no_function;
}

Result<size_t> Module::find_function(std::string_view name) const {
  for (size_t i = 0; i < impl_->functions.size(); ++i)
    if (impl_->functions[i].name == name) return i;
  std::string names;
  for (const FunctionSignature& f : impl_->functions) names += (names.empty() ? "'" : ", '") + f.name + "'";
  return not_found("no function '" + std::string(name) + "' (the module has " +
                   (names.empty() ? std::string("none") : names) + ")");
}

std::string FunctionSignature::to_string() const {
  std::string text = name + "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    text += (i ? ", " : "") + inputs[i].name + ": " + inputs[i].type.to_string() +
            (inputs[i].donated_to >= 0 ? " donate" : "");
  text += ") -> (";
  for (size_t j = 0; j < outputs.size(); ++j) text += (j ? ", " : "") + outputs[j].type.to_string();
  return text + ")";
}

namespace {

// find_function_for's answer: the one match, or an error naming what was
// asked (`asked`) and listing every function's signature.
Result<size_t> one_function(const std::vector<FunctionSignature>& functions, const std::vector<size_t>& fits,
                            const std::string& asked) {
  if (fits.size() == 1) return fits[0];
  std::string list;
  for (const FunctionSignature& f : functions) list += "\n  " + f.to_string();
  if (fits.empty())
    return not_found(
        "no function takes " + asked + " (the module has " +
        (functions.empty() ? std::string("none") : std::to_string(functions.size()) + ":" + list) + ")");
  std::string names;
  for (size_t f : fits) names += (names.empty() ? "'" : ", '") + functions[f].name + "'";
  return invalid_argument(std::to_string(fits.size()) + " functions take " + asked + " (" + names +
                          "); name one (the module has " + std::to_string(functions.size()) + ":" + list +
                          ")");
}

}  // namespace

Result<size_t> Module::find_function_for(std::span<const TensorType> inputs) const {
  std::vector<size_t> fits;
  for (size_t f = 0; f < impl_->functions.size(); ++f) {
    const std::vector<TensorSignature>& declared = impl_->functions[f].inputs;
    bool fit = declared.size() == inputs.size();
    for (size_t i = 0; fit && i < inputs.size(); ++i) fit = declared[i].type.same_layout(inputs[i]);
    if (fit) fits.push_back(f);
  }
  std::string asked = "(";
  for (size_t i = 0; i < inputs.size(); ++i) asked += (i ? ", " : "") + inputs[i].to_string();
  return one_function(impl_->functions, fits, asked + ")");
}

Result<size_t> Module::find_function_for(std::span<const NamedTensorType> inputs) const {
  std::vector<size_t> fits;
  for (size_t f = 0; f < impl_->functions.size(); ++f) {
    bool fit = true;
    for (size_t i = 0; fit && i < inputs.size(); ++i) {
      fit = false;
      for (const TensorSignature& declared : impl_->functions[f].inputs)
        fit = fit || (declared.name == inputs[i].name && declared.type.same_layout(inputs[i].type));
    }
    if (fit) fits.push_back(f);
  }
  std::string asked = "(";
  for (size_t i = 0; i < inputs.size(); ++i)
    asked += (i ? ", " : "") + std::string(inputs[i].name) + ": " + inputs[i].type.to_string();
  return one_function(impl_->functions, fits, asked + ")");
}

std::vector<InstructionInfo> Module::instructions(size_t function) const {
  std::vector<InstructionInfo> list;
  if (function >= impl_->functions.size()) return list;
  const fb::Module& m = impl_->fb();
  const fb::Function& f = *m.functions()->Get(static_cast<flatbuffers::uoffset_t>(function));
  list.reserve(f.instruction_count());
  for (uint32_t k = 0; k < f.instruction_count(); ++k) {
    const fb::Instruction& in = *m.instructions()->Get(f.instruction_begin() + k);
    InstructionInfo info;
    info.op = format::instruction_name(impl_->verified, in);
    if (in.operand_count() > in.input_count()) {  // verified: operands in range
      const uint32_t slot = m.operand_pool()->Get(in.operand_begin() + in.input_count());
      const fb::Slot& s = *m.slots()->Get(slot);
      info.result = s.name() ? s.name()->str() : std::string();
      info.type = impl_->verified.slot_types[slot];
    }
    list.push_back(std::move(info));
  }
  return list;
}

uint64_t Module::arena_bytes() const { return impl_->arena_bytes; }
uint64_t Module::lower_bound_bytes() const { return impl_->lower_bound_bytes; }
uint64_t Module::constant_bytes() const { return impl_->constant_bytes; }
uint64_t Module::streamed_constant_bytes() const { return impl_->streamed_constant_bytes; }
uint64_t Module::workspace_bytes() const { return impl_->workspace_bytes; }
uint64_t Module::context_bytes() const { return impl_->context_bytes; }
uint64_t Module::host_arena_bytes() const { return impl_->host_arena_bytes; }
uint64_t Module::host_lower_bound_bytes() const { return impl_->host_lower_bound_bytes; }

}  // namespace hexir::vm
