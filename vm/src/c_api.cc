// hexir/hexir.h over the C++ API of hexir/vm.h: every call forwards to it, so
// checks and messages are the C++ API's own. What lives here: the
// reference-counted handles, status objects, and the prebuilt argument
// lists that keep hexir_context_invoke free of allocation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/generator.h"
#include "hexir/hexir.h"
#include "hexir/vm.h"
#include "vm_impl.h"

struct hexir_status_s {
  hexir_status_code_t code;
  char message[1];  // NUL-terminated, allocated to its length
};

namespace {

using hexir::Status;
using hexir::StatusCode;

// What a status becomes when its message cannot be allocated: static, never freed.
hexir_status_s kOutOfMemory = {HEXIR_STATUS_RESOURCE_EXHAUSTED, {0}};

hexir_status_t* make_status(hexir_status_code_t code, const std::string& message) {
  void* memory = std::malloc(offsetof(hexir_status_s, message) + message.size() + 1);
  if (!memory) return &kOutOfMemory;
  auto* status = static_cast<hexir_status_s*>(memory);
  status->code = code;
  std::memcpy(status->message, message.c_str(), message.size() + 1);
  return status;
}

static_assert(HEXIR_STATUS_INTERNAL == static_cast<int>(StatusCode::kInternal) &&
                  HEXIR_STATUS_CANCELLED == static_cast<int>(StatusCode::kCancelled) &&
                  HEXIR_STATUS_DEADLINE_EXCEEDED == static_cast<int>(StatusCode::kDeadlineExceeded),
              "the C status codes are the C++ ones");

hexir_status_t* to_c(const Status& status) {
  if (status.ok()) return nullptr;
  return make_status(static_cast<hexir_status_code_t>(status.code()), status.message());
}

hexir_status_t* invalid(const std::string& message) { return make_status(HEXIR_STATUS_INVALID_ARGUMENT, message); }

// std::bad_alloc from the C++ API's own bookkeeping (vectors, strings) must
// not cross a C boundary.
template <typename F>
hexir_status_t* guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_status(HEXIR_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  } catch (...) {
    return make_status(HEXIR_STATUS_INTERNAL, "unexpected C++ exception");
  }
}

// Intrusive reference count shared by every handle.
struct RefCounted {
  std::atomic<int> refs{1};
};

template <typename T>
T* retain(T* handle) {
  handle->refs.fetch_add(1, std::memory_order_relaxed);
  return handle;
}

template <typename T>
void release(T* handle) {
  if (handle && handle->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete handle;
}

hexir::vm::LoadOptions to_cpp(const hexir_load_options_t* options) {
  hexir::vm::LoadOptions o;
  if (!options) return o;
  o.verify_data_checksum = options->verify_data_checksum != 0;
  o.copy_weights = options->copy_weights != 0;
  o.max_decompressed_bytes = options->max_decompressed_bytes;
  o.max_fill_bytes = options->max_fill_bytes;
  o.max_arena_bytes = options->max_arena_bytes;
  return o;
}

hexir_status_t* check_options_size(uint32_t struct_size, size_t expected, const char* what) {
  if (struct_size != expected)
    return invalid(std::string(what) + ".struct_size is " + std::to_string(struct_size) + ", this library's is " +
                   std::to_string(expected) + " (call " + what + "_init, or rebuild against this header)");
  return nullptr;
}

}  // namespace

struct hexir_device_s : RefCounted {
  std::unique_ptr<hexir::hal::Device> device;
  std::string name;
};

struct hexir_buffer_s : RefCounted {
  hexir_buffer_s(hexir_device_s* d, hexir::hal::Buffer b) : device(d), buffer(b) {}
  ~hexir_buffer_s() {
    device->device->release(buffer);
    release(device);
  }
  hexir_device_s* device;
  hexir::hal::Buffer buffer;
};

struct hexir_module_s : RefCounted {
  explicit hexir_module_s(hexir::vm::Module m) : module(std::move(m)) {}
  hexir::vm::Module module;
};

struct hexir_program_s : RefCounted {
  hexir_program_s(hexir::vm::Program p, hexir_module_s* m, hexir_device_s* d)
      : module(m), device(d), program(std::move(p)) {}
  ~hexir_program_s() {
    // The C++ Program first: it borrows the device.
    program.reset();
    release(module);
    release(device);
  }
  hexir_module_s* module;
  hexir_device_s* device;
  std::optional<hexir::vm::Program> program;
};

struct hexir_context_s : RefCounted {
  hexir_context_s(hexir::vm::Context c, hexir_program_s* p) : program(p), context(std::move(c)) {}
  ~hexir_context_s() {
    context.reset();
    release(program);
  }
  hexir_program_s* program;
  std::optional<hexir::vm::Context> context;
  // Per function, built at create: the C++ argument lists with the declared
  // types, into which invoke writes only data and byte_size.
  std::vector<std::vector<hexir::vm::TensorRef>> inputs;
  std::vector<std::vector<hexir::vm::TensorRef>> outputs;
};

// The definitions take C linkage from their declarations in hexir.h.

uint32_t hexir_abi_version(void) { return HEXIR_ABI_VERSION; }
const char* hexir_version_string(void) { return HEXIR_VERSION_STRING; }

hexir_status_code_t hexir_status_code(const hexir_status_t* status) {
  return status ? status->code : HEXIR_STATUS_OK;
}
const char* hexir_status_message(const hexir_status_t* status) { return status ? status->message : ""; }
const char* hexir_status_code_name(hexir_status_code_t code) {
  if (code < HEXIR_STATUS_OK || code > HEXIR_STATUS_DEADLINE_EXCEEDED) return "UNKNOWN";
  return hexir::status_code_name(static_cast<StatusCode>(code));
}
void hexir_status_free(hexir_status_t* status) {
  if (status && status != &kOutOfMemory) std::free(status);
}

namespace {
// A C caller may pass any int as a hexir_dtype_t; in C++ reading an enum
// outside its values is undefined, so its bytes are read as an int.
int raw_dtype(const hexir_dtype_t& dtype) {
  int raw = 0;
  static_assert(sizeof raw == sizeof dtype);
  std::memcpy(&raw, &dtype, sizeof raw);
  return raw;
}
bool valid_dtype(const hexir_dtype_t& dtype) {
  const int raw = raw_dtype(dtype);
  return raw >= 0 && raw < hexir::kDTypeCount;
}
}  // namespace

const char* hexir_dtype_name(hexir_dtype_t dtype) {
  if (!valid_dtype(dtype)) return "?";
  return hexir::dtype_name(static_cast<hexir::DType>(dtype));
}
uint32_t hexir_dtype_size(hexir_dtype_t dtype) {
  if (!valid_dtype(dtype)) return 0;
  return hexir::dtype_size(static_cast<hexir::DType>(dtype));
}

void hexir_device_options_init(hexir_device_options_t* options) {
  if (!options) return;
  options->struct_size = sizeof(hexir_device_options_t);
  options->threads = 0;
  options->ordinal = -1;
}

hexir_status_t* hexir_device_create(const char* name, const hexir_device_options_t* options,
                                    hexir_device_t** out_device) {
  if (!out_device) return invalid("hexir_device_create: out_device is NULL");
  *out_device = nullptr;
  if (!name) return invalid("hexir_device_create: name is NULL");
  return guarded([&]() -> hexir_status_t* {
    std::string full(name);
    hexir::hal::DeviceOptions cpp_options;
    if (options) {
      if (hexir_status_t* s =
              check_options_size(options->struct_size, sizeof(hexir_device_options_t), "hexir_device_options"))
        return s;
      if (options->threads < 0)
        return invalid("hexir_device_create: threads is " + std::to_string(options->threads) +
                       " (0: one per core, or a positive count)");
      cpp_options.threads = options->threads;
      if (options->ordinal >= 0) {
        const std::string base = full.substr(0, full.find('?'));
        const std::string query = full.substr(base.size());
        if (base != "cuda" && base != "cuda-managed")
          return invalid("hexir_device_create: ordinal " + std::to_string(options->ordinal) + " given for '" + full +
                         "' (an ordinal is for 'cuda' and 'cuda-managed' without one in the name)");
        full = base + ":" + std::to_string(options->ordinal) + query;
      } else if (options->ordinal != -1) {
        return invalid("hexir_device_create: ordinal is " + std::to_string(options->ordinal) +
                       " (-1: the name's, or a device index)");
      }
    }
    auto device = hexir::hal::create_device(full, cpp_options);
    if (!device.ok()) return to_c(device.status());
    auto* handle = new hexir_device_s();
    handle->device = std::move(device).value();
    handle->name = std::string(handle->device->name());
    *out_device = handle;
    return nullptr;
  });
}

const char* hexir_device_name(const hexir_device_t* device) { return device ? device->name.c_str() : ""; }
void hexir_device_release(hexir_device_t* device) { release(device); }

hexir_status_t* hexir_buffer_allocate(hexir_device_t* device, uint64_t size, hexir_buffer_t** out_buffer) {
  if (!out_buffer) return invalid("hexir_buffer_allocate: out_buffer is NULL");
  *out_buffer = nullptr;
  if (!device) return invalid("hexir_buffer_allocate: device is NULL");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::hal::Buffer> buffer = device->device->allocate(
        size, hexir::hal::MemoryType::kDeviceLocal, hexir::hal::BufferUsage::kExternal, 64);
    if (!buffer.ok()) return to_c(buffer.status().annotate("hexir_buffer_allocate"));
    *out_buffer = new hexir_buffer_s(retain(device), *buffer);
    return nullptr;
  });
}

void hexir_buffer_release(hexir_buffer_t* buffer) { release(buffer); }

void* hexir_buffer_data(const hexir_buffer_t* buffer) {
  if (!buffer || buffer->buffer.size == 0) return nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(buffer->buffer.device_ptr));
}

uint64_t hexir_buffer_size(const hexir_buffer_t* buffer) { return buffer ? buffer->buffer.size : 0; }

namespace {

hexir_status_t* check_copy(const char* what, const hexir_buffer_t* buffer, uint64_t offset, const void* host,
                           uint64_t size) {
  if (!buffer) return invalid(std::string(what) + ": buffer is NULL");
  if (!host && size > 0) return invalid(std::string(what) + ": host is NULL");
  uint64_t end = 0;
  if (__builtin_add_overflow(offset, size, &end) || end > buffer->buffer.size)
    return invalid(std::string(what) + ": bytes [" + std::to_string(offset) + ", +" + std::to_string(size) +
                   ") are outside the " + std::to_string(buffer->buffer.size) + "-byte buffer");
  return nullptr;
}

}  // namespace

hexir_status_t* hexir_buffer_write(hexir_buffer_t* buffer, uint64_t offset, const void* host, uint64_t size) {
  if (hexir_status_t* s = check_copy("hexir_buffer_write", buffer, offset, host, size)) return s;
  if (size == 0) return nullptr;
  return guarded([&]() -> hexir_status_t* {
    return to_c(buffer->device->device->write(buffer->buffer, offset, host, size));
  });
}

hexir_status_t* hexir_buffer_read(const hexir_buffer_t* buffer, uint64_t offset, void* host, uint64_t size) {
  if (hexir_status_t* s = check_copy("hexir_buffer_read", buffer, offset, host, size)) return s;
  if (size == 0) return nullptr;
  return guarded([&]() -> hexir_status_t* {
    return to_c(buffer->device->device->read(buffer->buffer, offset, host, size));
  });
}

void hexir_load_options_init(hexir_load_options_t* options) {
  if (!options) return;
  const hexir::vm::LoadOptions defaults;
  options->struct_size = sizeof(hexir_load_options_t);
  options->verify_data_checksum = defaults.verify_data_checksum ? 1 : 0;
  options->copy_weights = defaults.copy_weights ? 1 : 0;
  options->max_decompressed_bytes = defaults.max_decompressed_bytes;
  options->max_fill_bytes = defaults.max_fill_bytes;
  options->max_arena_bytes = defaults.max_arena_bytes;
}

namespace {

template <typename Load>
hexir_status_t* load_module(const char* what, const hexir_load_options_t* options, hexir_module_t** out_module,
                            Load&& load) {
  if (!out_module) return invalid(std::string(what) + ": out_module is NULL");
  *out_module = nullptr;
  if (options)
    if (hexir_status_t* s = check_options_size(options->struct_size, sizeof(hexir_load_options_t), "hexir_load_options"))
      return s;
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::vm::Module> module = load(to_cpp(options));
    if (!module.ok()) return to_c(module.status());
    *out_module = new hexir_module_s(std::move(module).value());
    return nullptr;
  });
}

}  // namespace

hexir_status_t* hexir_module_load_file(const char* path, const hexir_load_options_t* options,
                                       hexir_module_t** out_module) {
  if (!path) return invalid("hexir_module_load_file: path is NULL");
  return load_module("hexir_module_load_file", options, out_module,
                     [&](const hexir::vm::LoadOptions& o) { return hexir::vm::Module::load_file(path, o); });
}

hexir_status_t* hexir_module_load_buffer(const void* data, size_t size, const hexir_load_options_t* options,
                                         hexir_module_t** out_module) {
  if (!data && size > 0) return invalid("hexir_module_load_buffer: data is NULL");
  return load_module("hexir_module_load_buffer", options, out_module, [&](const hexir::vm::LoadOptions& o) {
    return hexir::vm::Module::load_buffer({static_cast<const uint8_t*>(data), size}, o);
  });
}

hexir_status_t* hexir_module_load_fd(int fd, const hexir_load_options_t* options, hexir_module_t** out_module) {
  return load_module("hexir_module_load_fd", options, out_module, [&](const hexir::vm::LoadOptions& o) {
    return hexir::vm::Module::load_fd(fd, "file descriptor " + std::to_string(fd), o);
  });
}

void hexir_module_release(hexir_module_t* module) { release(module); }

const char* hexir_module_name(const hexir_module_t* module) { return module ? module->module.name().c_str() : ""; }
size_t hexir_module_function_count(const hexir_module_t* module) {
  return module ? module->module.function_count() : 0;
}
const char* hexir_module_function_name(const hexir_module_t* module, size_t function) {
  if (!module || function >= module->module.function_count()) return nullptr;
  return module->module.function(function).name.c_str();
}

hexir_status_t* hexir_module_find_function(const hexir_module_t* module, const char* name, size_t* out_function) {
  if (!module || !name || !out_function) return invalid("hexir_module_find_function: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<size_t> index = module->module.find_function(name);
    if (!index.ok()) return to_c(index.status());
    *out_function = *index;
    return nullptr;
  });
}

hexir_status_t* hexir_module_find_function_for_shapes(const hexir_module_t* module,
                                                      const hexir_tensor_t* inputs, size_t input_count,
                                                      size_t* out_function) {
  if (!module || !out_function || (input_count > 0 && !inputs))
    return invalid("hexir_module_find_function_for_shapes: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    std::vector<hexir::TensorType> types(input_count);
    for (size_t i = 0; i < input_count; ++i) {
      if (!valid_dtype(inputs[i].dtype))
        return invalid("hexir_module_find_function_for_shapes: input " + std::to_string(i) + " has dtype " +
                       std::to_string(raw_dtype(inputs[i].dtype)) + ", not a hexir_dtype_t");
      if (!inputs[i].dims && inputs[i].rank > 0)
        return invalid("hexir_module_find_function_for_shapes: input " + std::to_string(i) + " has rank " +
                       std::to_string(inputs[i].rank) + " and NULL dims");
      types[i].dtype = static_cast<hexir::DType>(inputs[i].dtype);
      if (inputs[i].rank > 0) types[i].dims.assign(inputs[i].dims, inputs[i].dims + inputs[i].rank);
    }
    hexir::Result<size_t> index = module->module.find_function_for(std::span<const hexir::TensorType>(types));
    if (!index.ok()) return to_c(index.status());
    *out_function = *index;
    return nullptr;
  });
}

size_t hexir_module_input_count(const hexir_module_t* module, size_t function) {
  return module ? module->module.function(function).inputs.size() : 0;
}
size_t hexir_module_output_count(const hexir_module_t* module, size_t function) {
  return module ? module->module.function(function).outputs.size() : 0;
}

namespace {

void fill_info(const hexir::vm::TensorSignature& sig, hexir_tensor_info_t* out) {
  out->name = sig.name.c_str();
  out->dtype = static_cast<hexir_dtype_t>(sig.type.dtype);
  out->rank = static_cast<uint32_t>(sig.type.dims.size());
  out->dims = sig.type.dims.data();
  out->byte_size = sig.byte_size;
  out->donated_to = sig.donated_to;
}

hexir_status_t* tensor_info(const hexir_module_t* module, size_t function, size_t index, bool input,
                            hexir_tensor_info_t* out_info) {
  const char* what = input ? "hexir_module_input_info" : "hexir_module_output_info";
  if (!module || !out_info) return invalid(std::string(what) + ": a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    if (function >= module->module.function_count())
      return invalid(std::string(what) + ": function index " + std::to_string(function) + " out of range (the module has " +
                     std::to_string(module->module.function_count()) + ")");
    const hexir::vm::FunctionSignature& sig = module->module.function(function);
    const auto& list = input ? sig.inputs : sig.outputs;
    if (index >= list.size())
      return invalid(std::string(what) + ": " + (input ? "input" : "output") + " index " + std::to_string(index) +
                     " out of range ('" + sig.name + "' has " + std::to_string(list.size()) + ")");
    fill_info(list[index], out_info);
    return nullptr;
  });
}

}  // namespace

hexir_status_t* hexir_module_input_info(const hexir_module_t* module, size_t function, size_t index,
                                        hexir_tensor_info_t* out_info) {
  return tensor_info(module, function, index, true, out_info);
}
hexir_status_t* hexir_module_output_info(const hexir_module_t* module, size_t function, size_t index,
                                         hexir_tensor_info_t* out_info) {
  return tensor_info(module, function, index, false, out_info);
}

int32_t hexir_module_output_bounded_dim(const hexir_module_t* module, size_t function, size_t index) {
  if (!module || function >= module->module.function_count()) return -1;
  const hexir::vm::FunctionSignature& sig = module->module.function(function);
  return index < sig.outputs.size() ? sig.outputs[index].type.bounded : -1;
}

void hexir_module_memory(const hexir_module_t* module, hexir_module_memory_t* out) {
  if (!out) return;
  *out = hexir_module_memory_t{};
  if (!module) return;
  out->arena_bytes = module->module.arena_bytes();
  out->lower_bound_bytes = module->module.lower_bound_bytes();
  out->workspace_bytes = module->module.workspace_bytes();
  out->constant_bytes = module->module.constant_bytes();
  out->context_bytes = module->module.context_bytes();
}

void hexir_module_host_memory(const hexir_module_t* module, hexir_module_host_memory_t* out) {
  if (!out) return;
  *out = hexir_module_host_memory_t{};
  if (!module) return;
  out->host_arena_bytes = module->module.host_arena_bytes();
  out->host_lower_bound_bytes = module->module.host_lower_bound_bytes();
  out->streamed_constant_bytes = module->module.streamed_constant_bytes();
}

hexir_status_t* hexir_program_prepare(hexir_module_t* module, hexir_device_t* device, hexir_program_t** out_program) {
  if (!out_program) return invalid("hexir_program_prepare: out_program is NULL");
  *out_program = nullptr;
  if (!module) return invalid("hexir_program_prepare: module is NULL");
  if (!device) return invalid("hexir_program_prepare: device is NULL");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::vm::Program> program = hexir::vm::Program::prepare(module->module, *device->device);
    if (!program.ok()) return to_c(program.status());
    *out_program = new hexir_program_s(std::move(program).value(), retain(module), retain(device));
    return nullptr;
  });
}

const hexir_module_t* hexir_program_module(const hexir_program_t* program) {
  return program ? program->module : nullptr;
}
void hexir_program_release(hexir_program_t* program) { release(program); }
uint64_t hexir_program_prepared_bytes(const hexir_program_t* program) {
  return program ? program->program->prepared_bytes() : 0;
}

hexir_status_t* hexir_context_create(hexir_program_t* program, hexir_context_t** out_context) {
  if (!out_context) return invalid("hexir_context_create: out_context is NULL");
  *out_context = nullptr;
  if (!program) return invalid("hexir_context_create: program is NULL");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::vm::Context> context = hexir::vm::Context::create(*program->program);
    if (!context.ok()) return to_c(context.status());
    auto* handle = new hexir_context_s(std::move(context).value(), retain(program));
    const hexir::vm::Module& module = program->module->module;
    handle->inputs.resize(module.function_count());
    handle->outputs.resize(module.function_count());
    for (size_t f = 0; f < module.function_count(); ++f) {
      for (const hexir::vm::TensorSignature& s : module.function(f).inputs)
        handle->inputs[f].push_back({nullptr, 0, s.type});
      for (const hexir::vm::TensorSignature& s : module.function(f).outputs)
        handle->outputs[f].push_back({nullptr, 0, s.type});
    }
    *out_context = handle;
    return nullptr;
  });
}

void hexir_context_release(hexir_context_t* context) { release(context); }

uint64_t hexir_context_device_bytes(const hexir_context_t* context) {
  return context ? context->context->device_bytes() : 0;
}

namespace {

// The caller's tensor has the declared dtype and shape (dims NULL: declared).
bool matches(const hexir_tensor_t& t, const hexir::TensorType& type) {
  if (raw_dtype(t.dtype) != static_cast<int>(type.dtype)) return false;
  if (!t.dims) return true;
  if (t.rank != type.dims.size()) return false;
  for (uint32_t d = 0; d < t.rank; ++d)
    if (t.dims[d] != type.dims[d]) return false;
  return true;
}

// Fast path: the prebuilt lists take the caller's pointers, nothing allocated.
bool bind(const hexir_tensor_t* tensors, size_t count, std::vector<hexir::vm::TensorRef>& refs) {
  if (count != refs.size()) return false;
  for (size_t i = 0; i < count; ++i)
    if (!matches(tensors[i], refs[i].type)) return false;
  for (size_t i = 0; i < count; ++i) {
    refs[i].data = tensors[i].data;
    refs[i].byte_size = tensors[i].byte_size;
  }
  return true;
}

// Slow path, for a call the C++ API will refuse: the caller's own types, so
// its message names what was passed. `declared`: the function's arguments of
// this kind (empty for a function index out of range). The caller's dims are
// read only when its rank is the declared one: `rank` may be anything, and
// dims hold rank values only if it is right. An argument past the declared
// count (refused by count) keeps no dims.
hexir_status_t* as_given(const char* kind, const hexir_tensor_t* tensors, size_t count,
                         const std::vector<hexir::vm::TensorSignature>& declared, const std::string& function,
                         std::vector<hexir::vm::TensorRef>& refs) {
  for (size_t i = 0; i < count; ++i) {
    const hexir_tensor_t& t = tensors[i];
    if (!valid_dtype(t.dtype))
      return invalid(std::string("hexir_context_invoke: ") + kind + " " + std::to_string(i) + " has dtype " +
                     std::to_string(raw_dtype(t.dtype)) + ", not a hexir_dtype_t");
    hexir::vm::TensorRef ref{t.data, t.byte_size, {static_cast<hexir::DType>(t.dtype), {}}};
    if (i < declared.size()) {
      const hexir::TensorType& type = declared[i].type;
      // Named as the C++ API does: inputs by name, outputs by position.
      const bool by_name = !declared[i].name.empty() && std::string_view(kind) == "input";
      if (t.dims && t.rank != type.dims.size())
        return invalid(std::string("hexir_context_invoke: ") + kind + " " +
                       (by_name ? "'" + declared[i].name + "'" : std::to_string(i)) +
                       " of function '" + function + "': expected " + type.to_string() + " (rank " +
                       std::to_string(type.dims.size()) + "), got rank " + std::to_string(t.rank));
      if (t.dims)
        ref.type.dims.assign(t.dims, t.dims + t.rank);
      else
        ref.type.dims = type.dims;
    }
    refs.push_back(std::move(ref));
  }
  return nullptr;
}

}  // namespace

// The context is held (one atomic operation) before the prebuilt lists are
// written: a second thread on the same context is refused before it touches them.
hexir_status_t* hexir_context_invoke(hexir_context_t* context, size_t function, const hexir_tensor_t* inputs,
                                     size_t input_count, const hexir_tensor_t* outputs, size_t output_count) {
  if (!context) return invalid("hexir_context_invoke: context is NULL");
  if ((input_count > 0 && !inputs) || (output_count > 0 && !outputs))
    return invalid("hexir_context_invoke: a NULL argument list with a nonzero count");
  hexir::vm::ContextImpl& impl = context->context->impl();
  hexir::vm::ContextHold hold(impl);
  if (!hold.held()) return to_c(hexir::vm::ContextImpl::busy("hexir_context_invoke"));
  return guarded([&]() -> hexir_status_t* {
    if (function < context->inputs.size()) {
      auto& in = context->inputs[function];
      auto& out = context->outputs[function];
      if (bind(inputs, input_count, in) && (output_count == 0 || bind(outputs, output_count, out)))
        return to_c(impl.invoke(
            function, in,
            output_count == 0 ? std::span<const hexir::vm::TensorRef>() : std::span<const hexir::vm::TensorRef>(out)));
    }
    static const hexir::vm::FunctionSignature kNone;
    const hexir::vm::Module& module = context->program->module->module;
    const hexir::vm::FunctionSignature& sig = function < module.function_count() ? module.function(function) : kNone;
    std::vector<hexir::vm::TensorRef> in, out;
    if (hexir_status_t* s = as_given("input", inputs, input_count, sig.inputs, sig.name, in)) return s;
    if (hexir_status_t* s = as_given("output", outputs, output_count, sig.outputs, sig.name, out)) return s;
    return to_c(impl.invoke(function, in, out));
  });
}

hexir_status_t* hexir_context_set_max_loop_iterations(hexir_context_t* context, uint64_t limit) {
  if (!context) return invalid("hexir_context_set_max_loop_iterations: context is NULL");
  return to_c(context->context->set_max_loop_iterations(limit));
}

hexir_status_t* hexir_context_set_deadline(hexir_context_t* context, uint64_t timeout_ns) {
  if (!context) return invalid("hexir_context_set_deadline: context is NULL");
  // Past INT64_MAX ns (292 years) is no limit in practice: kept as the most there is.
  const auto timeout = std::chrono::nanoseconds(
      static_cast<int64_t>(std::min<uint64_t>(timeout_ns, std::numeric_limits<int64_t>::max())));
  return to_c(context->context->set_deadline(timeout));
}

int hexir_context_cancel(hexir_context_t* context) { return context && context->context->cancel() ? 1 : 0; }

hexir_status_t* hexir_context_output(const hexir_context_t* context, size_t function, size_t index,
                                     hexir_tensor_t* out_tensor) {
  if (!context || !out_tensor) return invalid("hexir_context_output: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::vm::TensorRef> ref = context->context->output(function, index);
    if (!ref.ok()) return to_c(ref.status());
    // Dims from the signature (they live as long as the module, not this
    // temporary), or for a bounded result the context's actual ones.
    const hexir::vm::FunctionTable& t = context->context->impl().functions[function];
    const hexir::TensorType& type =
        t.output_extent.empty() ? context->outputs[function][index].type : t.last_output_types[index];
    out_tensor->data = ref->data;
    out_tensor->byte_size = ref->byte_size;
    out_tensor->dtype = static_cast<hexir_dtype_t>(type.dtype);
    out_tensor->rank = static_cast<uint32_t>(type.dims.size());
    out_tensor->dims = type.dims.data();
    return nullptr;
  });
}

hexir_status_t* hexir_context_output_shape(const hexir_context_t* context, size_t function, size_t index,
                                           int64_t* dims, uint32_t capacity, uint32_t* out_rank) {
  if (!context || !out_rank || (!dims && capacity > 0)) return invalid("hexir_context_output_shape: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    hexir::Result<hexir::TensorType> type = context->context->output_type(function, index);
    if (!type.ok()) return to_c(type.status());
    *out_rank = static_cast<uint32_t>(type->rank());
    if (type->rank() > capacity)
      return invalid("hexir_context_output_shape: rank " + std::to_string(type->rank()) + " does not fit " +
                     std::to_string(capacity) + " dims");
    std::copy(type->dims.begin(), type->dims.end(), dims);
    return nullptr;
  });
}

hexir_status_t* hexir_context_read_output(const hexir_context_t* context, size_t function, size_t index, void* host,
                                          uint64_t size) {
  if (!context || (!host && size > 0)) return invalid("hexir_context_read_output: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    return to_c(context->context->read_output(function, index, {static_cast<uint8_t*>(host), static_cast<size_t>(size)}));
  });
}

void hexir_context_stats(const hexir_context_t* context, hexir_context_stats_t* out) {
  if (!out) return;
  *out = hexir_context_stats_t{};
  if (!context) return;
  out->invoke_count = context->context->invoke_count();
  out->create_device_allocations = context->context->create_stats().device_allocations;
  out->invoke_device_allocations = context->context->invoke_stats().device_allocations;
  out->invoke_uploads = context->context->invoke_stats().uploads;
  out->invoke_dispatches = context->context->invoke_stats().dispatches;
}

struct hexir_generator_s : RefCounted {
  hexir_generator_s(hexir::vm::Generator g, hexir_context_s* c) : context(c), generator(std::move(g)) {}
  ~hexir_generator_s() {
    generator.reset();  // borrows the context's
    release(context);
  }
  hexir_context_s* context;
  std::optional<hexir::vm::Generator> generator;
  hexir_token_callback_t callback = nullptr;  // the current generation's, for the trampoline
  void* user = nullptr;
};

void hexir_generator_options_init(hexir_generator_options_t* options) {
  if (!options) return;
  const hexir::vm::GeneratorOptions defaults;
  *options = hexir_generator_options_t{};
  options->struct_size = sizeof(hexir_generator_options_t);
  options->decode_index = defaults.decode_index;
  options->use_prefill = defaults.prefill ? 1 : 0;
  options->temperature = defaults.sampling.temperature;
  options->top_k = defaults.sampling.top_k;
  options->top_p = defaults.sampling.top_p;
  options->seed = defaults.sampling.seed;
  options->eos_token = defaults.eos_token;
  options->max_new_tokens = defaults.max_new_tokens;
  options->max_positions = defaults.max_positions;
}

hexir_status_t* hexir_generator_create(hexir_context_t* context, const hexir_generator_options_t* options,
                                       hexir_generator_t** out_generator) {
  if (!out_generator) return invalid("hexir_generator_create: out_generator is NULL");
  *out_generator = nullptr;
  if (!context) return invalid("hexir_generator_create: context is NULL");
  if (options)
    if (hexir_status_t* s = check_options_size(options->struct_size, sizeof(hexir_generator_options_t),
                                               "hexir_generator_options"))
      return s;
  return guarded([&]() -> hexir_status_t* {
    hexir::vm::GeneratorOptions o;
    if (options) {
      if (options->decode_function) o.decode = options->decode_function;
      o.decode_index = options->decode_index;
      if (options->input_ids) o.input_ids = options->input_ids;
      if (options->position) o.position = options->position;
      if (options->logits) o.logits = options->logits;
      o.prefill = options->use_prefill != 0;
      o.sampling = {options->temperature, options->top_k, options->top_p, options->seed};
      o.eos_token = options->eos_token;
      o.max_new_tokens = options->max_new_tokens;
      o.max_positions = options->max_positions;
    }
    hexir::Result<hexir::vm::Generator> generator = hexir::vm::Generator::create(*context->context, o);
    if (!generator.ok()) return to_c(generator.status().annotate("hexir_generator_create"));
    *out_generator = new hexir_generator_s(std::move(generator).value(), retain(context));
    return nullptr;
  });
}

void hexir_generator_release(hexir_generator_t* generator) { release(generator); }

hexir_status_t* hexir_generator_generate(hexir_generator_t* generator, const int64_t* prompt,
                                         size_t prompt_length, size_t max_new_tokens, int64_t* out_tokens,
                                         size_t* out_count, hexir_token_callback_t callback, void* user) {
  if (out_count) *out_count = 0;
  if (!generator || !out_count || (prompt_length > 0 && !prompt) || (max_new_tokens > 0 && !out_tokens))
    return invalid("hexir_generator_generate: a NULL argument");
  return guarded([&]() -> hexir_status_t* {
    generator->callback = callback;
    generator->user = user;
    auto trampoline = [](void* self, size_t index, int64_t token, std::span<const float> logits) {
      auto* g = static_cast<hexir_generator_s*>(self);
      return g->callback(g->user, index, token, logits.data(), logits.size()) != 0;
    };
    hexir::Result<size_t> count =
        generator->generator->generate({prompt, prompt_length}, max_new_tokens, {out_tokens, max_new_tokens},
                                       callback ? +trampoline : nullptr, generator);
    if (!count.ok()) return to_c(count.status());
    *out_count = *count;
    return nullptr;
  });
}

hexir_status_t* hexir_generator_set_sampling(hexir_generator_t* generator, float temperature, uint32_t top_k,
                                             float top_p, uint64_t seed) {
  if (!generator) return invalid("hexir_generator_set_sampling: generator is NULL");
  return guarded([&]() -> hexir_status_t* {
    return to_c(generator->generator->set_sampling({temperature, top_k, top_p, seed}));
  });
}

void hexir_generator_stats(const hexir_generator_t* generator, hexir_generation_stats_t* out) {
  if (!out) return;
  *out = hexir_generation_stats_t{};
  if (!generator) return;
  const hexir::vm::GenerationStats& s = generator->generator->stats();
  out->prompt_tokens = s.prompt_tokens;
  out->generated_tokens = s.generated_tokens;
  out->prefill_function = s.prefill_function;
  out->prefill_ns = s.prefill_ns;
  out->decode_ns = s.decode_ns;
  out->tokens_per_second = s.tokens_per_second;
  out->token_ns = s.token_ns.data();
}

size_t hexir_generator_vocab_size(const hexir_generator_t* generator) {
  return generator ? generator->generator->vocab_size() : 0;
}

int64_t hexir_generator_prefill_function(const hexir_generator_t* generator, size_t length) {
  return generator ? generator->generator->prefill_function(length) : -1;
}
