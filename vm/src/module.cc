#include <cassert>

#include "hexir/base/mapped_file.h"
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

// Verifies `bytes` into `impl` and fills the summaries the accessors return.
Status finish_load(ModuleImpl& impl, std::span<const uint8_t> bytes, const LoadOptions& options) {
  format::VerifyOptions verify_options;
  verify_options.verify_data_checksum = options.verify_data_checksum;
  HEXIR_ASSIGN_OR_RETURN(impl.verified, format::verify_executable(bytes, verify_options));
  // zstd sections are decompressed once, here; verified.sections then holds raw bytes.
  HEXIR_RETURN_IF_ERROR(format::decompress_sections(impl.verified, impl.owned_sections));
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
  impl.lower_bound_bytes = m.arena()->lower_bound();
  if (m.constants())
    for (const fb::Constant* c : *m.constants())
      impl.constant_bytes = saturating_add(impl.constant_bytes, c->byte_size());
  return ok_status();
}

}  // namespace

ModuleImpl::~ModuleImpl() = default;

Module::Module(std::unique_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

Result<Module> Module::load_file(const std::string& path, const LoadOptions& options) {
  // Private read-only mapping: weights are used in place and can never be written through.
  HEXIR_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  if (file.empty()) return data_loss(path + ": file is empty");

  auto impl = std::make_unique<ModuleImpl>();
  impl->mapping = std::move(file);
  Status status = finish_load(*impl, impl->mapping.bytes(), options);
  if (!status.ok()) return status.annotate(path);
  return Module(std::move(impl));
}

Result<Module> Module::load_buffer(std::span<const uint8_t> bytes, const LoadOptions& options) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % format::kConstantAlignment != 0)
    return invalid_argument("load_buffer: the executable bytes must be 64-byte aligned");
  auto impl = std::make_unique<ModuleImpl>();
  HEXIR_RETURN_IF_ERROR(finish_load(*impl, bytes, options));
  return Module(std::move(impl));
}

const std::string& Module::name() const { return impl_->name; }
size_t Module::function_count() const { return impl_->functions.size(); }
const FunctionSignature& Module::function(size_t index) const {
  assert(index < impl_->functions.size());
  return impl_->functions[index];
}

Result<size_t> Module::find_function(std::string_view name) const {
  for (size_t i = 0; i < impl_->functions.size(); ++i)
    if (impl_->functions[i].name == name) return i;
  std::string names;
  for (const FunctionSignature& f : impl_->functions) names += (names.empty() ? "'" : ", '") + f.name + "'";
  return not_found("no function '" + std::string(name) + "' (the module has " +
                   (names.empty() ? std::string("none") : names) + ")");
}

uint64_t Module::arena_bytes() const { return impl_->arena_bytes; }
uint64_t Module::lower_bound_bytes() const { return impl_->lower_bound_bytes; }
uint64_t Module::constant_bytes() const { return impl_->constant_bytes; }

}  // namespace hexir::vm
