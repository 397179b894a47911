// hexir-run FILE.hxe [--device cpu] [--function main] [--input NAME=FILE.npy ...]
//           [--output-dir DIR] [--iterations N] [--stats-json FILE] [--seed S]
//           [--max-tensor-bytes N] [--threads N] [--max-loop-iterations N] [--profile]
//           [--copy-weights] [--verify-data-checksum] [--max-decompressed-bytes N] [--max-fill-bytes N]
//           [--max-arena-bytes N]
// hexir-run --list-devices
// Loads, prepares and runs one function (--function; without it 'main', the
// only function, or the one the --input files' names and shapes fit); inputs
// not given are deterministic random values. Results go to DIR/NAME.npy, each
// output's name escaped (cli::output_file_name).
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli.h"
#include "hexir/base/npy.h"
#include "hexir/vm.h"
#include "json.h"

namespace hexir {
namespace {

// 2^32: about 3 minutes of a loop whose body is one small add (37 ns an
// iteration), far beyond any real model's loops.
constexpr uint64_t kDefaultMaxLoopIterations = uint64_t{1} << 32;

struct Options {
  std::string path;
  std::string device = "cpu";
  std::string function;
  std::map<std::string, std::string> inputs;  // argument name -> .npy path
  std::string output_dir;
  uint64_t iterations = 1;
  std::string stats_json;
  uint64_t seed = 0;
  // The largest input or output the tool holds in host memory (generated,
  // read from .npy or read back): sizes come from an untrusted file.
  uint64_t max_tensor_bytes = kDefaultMaxNpyBytes;
  uint32_t threads = 0;  // cpu: per context, 0: the cores available
  // Per invoke, all loops together; 0: no limit. On by default: a loop's trip
  // count is data (an input, a constant), and 2^62 iterations run for ever.
  uint64_t max_loop_iterations = kDefaultMaxLoopIterations;
  vm::LoadOptions load;  // --copy-weights, --verify-data-checksum, the --max-* load limits
  bool profile = false;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exponent = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent <= 0) {  // subnormal or zero (inputs here are in [-1, 1])
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    return static_cast<uint16_t>(sign | (mantissa >> (14 - exponent)));
  }
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13));
}

// Deterministic values per (seed, input index): floats uniform in [-1, 1],
// integers in [-8, 8], u8 in [0, 255], bool 0/1.
Result<std::vector<uint8_t>> random_tensor(const TensorType& type, uint64_t byte_size, uint64_t seed,
                                           size_t index) {
  std::mt19937_64 rng(seed * 1000003u + index);
  std::vector<uint8_t> data;
  try {
    data.resize(byte_size);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("cannot allocate " + std::to_string(byte_size) + " bytes for a random " +
                              type.to_string());
  }
  const uint64_t count = byte_size / dtype_size(type.dtype);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(-8, 8);
  for (uint64_t i = 0; i < count; ++i) {
    uint8_t* p = data.data() + i * dtype_size(type.dtype);
    switch (type.dtype) {
      case DType::kF32: {
        float v = unit(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kF16: {
        uint16_t h = float_to_half(unit(rng));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBF16: {
        float v = unit(rng);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kI32: {
        int32_t v = small(rng);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kI64: {
        int64_t v = small(rng);
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kI8:
        *p = static_cast<uint8_t>(static_cast<int8_t>(small(rng)));
        break;
      case DType::kU8:
        *p = static_cast<uint8_t>(rng() & 0xff);
        break;
      case DType::kBool:
        *p = static_cast<uint8_t>(rng() & 1);
        break;
    }
  }
  return data;
}

// --profile: per-instruction times (the VM's, summed over the profiled
// invokes) as milliseconds per invoke, summed by operator.
struct Profile {
  struct Row {
    std::string what;  // operator, or "#k op %result type" for one instruction
    uint64_t count = 0;
    double ms = 0;  // per invoke
  };
  std::vector<Row> operators;      // slowest first
  std::vector<Row> instructions;   // slowest first, all of them (the printout shows kSlowest)
  double total_ms = 0;             // per invoke, all instructions
  static constexpr size_t kSlowest = 15;
};

Profile make_profile(const std::vector<vm::InstructionInfo>& info, std::span<const uint64_t> ns,
                     uint64_t invokes) {
  Profile p;
  std::map<std::string, Profile::Row> by_op;
  for (size_t k = 0; k < info.size() && k < ns.size(); ++k) {
    const double ms = static_cast<double>(ns[k]) / 1e6 / static_cast<double>(invokes);
    Profile::Row& op = by_op[info[k].op];
    op.what = info[k].op;
    ++op.count;
    op.ms += ms;
    p.total_ms += ms;
    p.instructions.push_back({"#" + std::to_string(k) + " " + info[k].op + " %" + info[k].result + " " +
                                  info[k].type.to_string(),
                              1, ms});
  }
  for (auto& [name, row] : by_op) p.operators.push_back(row);
  auto slowest = [](const Profile::Row& a, const Profile::Row& b) { return a.ms > b.ms; };
  std::stable_sort(p.operators.begin(), p.operators.end(), slowest);
  std::stable_sort(p.instructions.begin(), p.instructions.end(), slowest);
  return p;
}

void print_profile(const Profile& p, double median_ms) {
  std::printf("profile: %.3f ms per invoke summed over instructions (each waited for; the unprofiled median "
              "is %.3f ms)\n",
              p.total_ms, median_ms);
  std::printf("  %-24s %7s %12s %7s\n", "operator", "count", "ms/invoke", "share");
  for (const Profile::Row& r : p.operators)
    std::printf("  %-24s %7" PRIu64 " %12.4f %6.1f%%\n", r.what.c_str(), r.count, r.ms,
                p.total_ms > 0 ? 100.0 * r.ms / p.total_ms : 0.0);
  std::printf("  slowest instructions:\n");
  for (const Profile::Row& r : std::span(p.instructions).first(std::min(p.instructions.size(), Profile::kSlowest)))
    std::printf("  %12.4f ms %6.1f%%  %s\n", r.ms, p.total_ms > 0 ? 100.0 * r.ms / p.total_ms : 0.0,
                r.what.c_str());
}

void write_profile(cli::JsonWriter& j, const Profile& p) {
  j.begin_object("profile");
  j.field("ms_per_invoke", p.total_ms, 4);
  j.begin_array("operators");
  for (const Profile::Row& r : p.operators) {
    j.begin_object();
    j.field("op", r.what);
    j.field("count", r.count);
    j.field("ms_per_invoke", r.ms, 4);
    j.end_object();
  }
  j.end_array();
  j.begin_array("instructions");  // slowest first, every one
  for (const Profile::Row& r : p.instructions) {
    j.begin_object();
    j.field("instruction", r.what);
    j.field("ms_per_invoke", r.ms, 4);
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

// Every device create_device could open here, or why CUDA is unavailable.
int list_devices() {
  for (const hal::DeviceDescription& d : hal::list_devices())
    std::printf("%-16s %s%s\n", d.name.c_str(), d.available ? "" : "unavailable: ", d.details.c_str());
  return 0;
}

const std::string kUsage = std::string(
    "usage: hexir-run FILE.hxe [--device cpu] [--function main] [--input NAME=FILE.npy ...]\n"
    "                 [--output-dir DIR] [--iterations N] [--stats-json FILE] [--seed S]\n"
    "                 [--max-tensor-bytes N] [--threads N] [--max-loop-iterations N] [--profile]\n"
    "                 [--copy-weights] [--verify-data-checksum] [--max-decompressed-bytes N]\n"
    "                 [--max-fill-bytes N] [--max-arena-bytes N]\n"
    "       hexir-run --list-devices\n"
    "  --function NAME       default: 'main', the only function, or the one the --input files fit\n"
    "                        (by name, dtype and shape; without --input files, the first)\n"
    "  --max-tensor-bytes N  largest input or output held in host memory (default 4 GiB)\n"
    "  --max-loop-iterations N  loop iterations one invoke may run, summed over its loops (default\n"
    "                        2^32 = 4294967296; 0: no limit); an invoke past it stops with an error\n"
    "  --copy-weights        read the whole file into memory instead of mapping it: the run no longer\n"
    "                        depends on the file (it may be rewritten or removed meanwhile)\n"
    "  --verify-data-checksum  checksum the data sections too at load (O(weights))\n"
    "  --threads N           cpu: threads per context, the calling one included (default: the cores "
    "available)\n"
    "  --profile             after the timed iterations, as many again one instruction at a time:\n"
    "                        time per operator and the slowest instructions (also in --stats-json)\n") +
    cli::kLoadLimitsUsage;

// " (--max-fill-bytes N raises it)" after a load refused at a limit
// ("... the limit LoadOptions.max_fill_bytes = ..."): its flag here.
std::string load_limit_hint(const Status& status) {
  const std::string& message = status.message();
  const size_t at = message.find("LoadOptions.max_");
  if (status.code() != StatusCode::kResourceExhausted || at == std::string::npos) return {};
  std::string flag = "--";
  for (size_t i = at + 12; i < message.size() && message[i] != ' '; ++i) flag += message[i] == '_' ? '-' : message[i];
  return " (" + flag + " N raises it)";
}

// Fills `o`; an exit code when the tool stops here (--help, --list-devices, a usage error).
std::optional<int> parse_args(cli::Args& args, Options& o) {
  while (args.next()) {
    if (args.flag("--list-devices")) return list_devices();
    if (args.flag("--profile")) {
      o.profile = true;
      continue;
    }
    if (args.flag("--copy-weights")) {
      o.load.copy_weights = true;
      continue;
    }
    if (args.flag("--verify-data-checksum")) {
      o.load.verify_data_checksum = true;
      continue;
    }
    if (args.load_limit(&o.load)) continue;
    if (args.value("--device", &o.device) || args.value("--function", &o.function) ||
        args.value("--output-dir", &o.output_dir) || args.value("--stats-json", &o.stats_json) ||
        args.number("--iterations", &o.iterations, uint64_t{1}) || args.number("--seed", &o.seed) ||
        args.number("--max-tensor-bytes", &o.max_tensor_bytes) ||
        args.number("--threads", &o.threads, uint32_t{1}, uint32_t{1024}) ||
        args.number("--max-loop-iterations", &o.max_loop_iterations))
      continue;
    std::string input;  // NAME=FILE.npy
    if (!args.value("--input", &input)) {
      args.input(&o.path);
    } else if (!input.empty()) {  // (empty: no value, already reported)
      const size_t eq = input.find('=');
      std::string name = input.substr(0, eq);
      if (!name.empty() && name[0] == '%') name.erase(0, 1);
      if (eq == std::string::npos || name.empty())
        args.usage_error("--input expects NAME=FILE.npy, got '" + input + "'");
      else if (!o.inputs.emplace(name, input.substr(eq + 1)).second)
        args.usage_error("input '" + name + "' given twice");
    }
  }
  if (std::optional<int> rc = args.stop()) return rc;
  if (o.path.empty()) return args.usage_error("no input file");
  return std::nullopt;
}

int run(int argc, char** argv) {
  Options o;
  cli::Args args("hexir-run", kUsage, argc, argv);
  if (std::optional<int> rc = parse_args(args, o)) return *rc;

  const auto load_start = Clock::now();
  Result<vm::Module> module = vm::Module::load_file(o.path, o.load);
  const double load_ms = ms_since(load_start);
  if (!module.ok()) return args.fail(module.status().message() + load_limit_hint(module.status()));

  // --function, else 'main', else the only function, else the one that the
  // --input files fit (their names and the types in their headers), else
  // (no --input) the first.
  size_t function = 0;
  if (!o.function.empty()) {
    Result<size_t> found = module->find_function(o.function);
    if (!found.ok()) return args.fail(found.status().message());
    function = *found;
  } else if (Result<size_t> main = module->find_function("main"); main.ok()) {
    function = *main;
  } else if (module->function_count() == 0) {
    return args.fail(o.path + ": the module has no functions");
  } else if (module->function_count() > 1 && !o.inputs.empty()) {
    std::vector<vm::NamedTensorType> given;
    for (const auto& [name, file] : o.inputs) {
      Result<NpyHeader> header = read_npy_header(file);
      if (!header.ok()) return args.fail(header.status().message());
      given.push_back({name, header->type});
    }
    Result<size_t> found = module->find_function_for(given);
    if (!found.ok())
      return args.fail("choosing the function by the --input files: " + found.status().message() +
                       "\n(--function NAME picks one)");
    function = *found;
  }
  const vm::FunctionSignature& sig = module->function(function);
  // Every host copy is sized by the file: refuse what is over the limit
  // before preparing anything.
  auto over_limit = [&](const char* kind, const std::string& name, const vm::TensorSignature& t) {
    return args.fail(std::string(kind) + " " + name + " of function '" + sig.name + "' is " +
                     t.type.to_string() + " (" + std::to_string(t.byte_size) +
                     " bytes), more than --max-tensor-bytes " + std::to_string(o.max_tensor_bytes));
  };
  for (const vm::TensorSignature& in : sig.inputs)
    if (in.byte_size > o.max_tensor_bytes) return over_limit("input", "'" + in.name + "'", in);
  for (size_t j = 0; j < sig.outputs.size(); ++j)
    if (sig.outputs[j].byte_size > o.max_tensor_bytes)
      return over_limit("output", std::to_string(j), sig.outputs[j]);

  for (const auto& [name, file] : o.inputs) {
    bool known = false;
    for (const vm::TensorSignature& in : sig.inputs) known |= in.name == name;
    if (!known) {
      std::string names;
      for (const vm::TensorSignature& in : sig.inputs) names += (names.empty() ? "'" : ", '") + in.name + "'";
      return args.fail("function '" + sig.name + "' has no input '" + name +
                       "' (its inputs: " + (names.empty() ? std::string("none") : names) + ")");
    }
  }

  Result<std::unique_ptr<hal::Device>> device =
      hal::create_device(o.device, {.threads = static_cast<int>(o.threads)});
  if (!device.ok()) return args.fail(device.status().message());
  hal::Device& dev = **device;

  const hal::DeviceCounters before_prepare = dev.counters();
  const auto prepare_start = Clock::now();
  Result<vm::Program> program = vm::Program::prepare(*module, dev);
  const double prepare_ms = ms_since(prepare_start);
  if (!program.ok()) return args.fail(program.status().message());
  const hal::DeviceCounters after_prepare = dev.counters();

  Result<vm::Context> context = vm::Context::create(*program);
  if (!context.ok()) return args.fail(context.status().message());
  if (o.max_loop_iterations > 0) {
    Status limited = context->set_max_loop_iterations(o.max_loop_iterations);
    if (!limited.ok()) return args.fail(limited.message());
  }

  // Host copies of every input, then device buffers the kernels can address.
  std::vector<std::vector<uint8_t>> host_inputs(sig.inputs.size());
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const vm::TensorSignature& in = sig.inputs[i];
    auto given = o.inputs.find(in.name);
    if (given == o.inputs.end()) {
      Result<std::vector<uint8_t>> random = random_tensor(in.type, in.byte_size, o.seed, i);
      if (!random.ok()) return args.fail(random.status().message());
      host_inputs[i] = std::move(random).value();
      continue;
    }
    Result<NpyArray> array = read_npy(given->second, o.max_tensor_bytes);
    if (!array.ok()) return args.fail(array.status().message());
    if (!(array->type == in.type))
      return args.fail("input '" + in.name + "' of function '" + sig.name + "': expected " +
                       in.type.to_string() + ", got " + array->type.to_string() + " from " + given->second);
    host_inputs[i] = std::move(array->data);
  }
  std::vector<hal::Buffer> input_buffers(sig.inputs.size());
  std::vector<vm::TensorRef> input_refs(sig.inputs.size());
  auto release_inputs = [&] {
    for (hal::Buffer& b : input_buffers)
      if (b.size > 0) dev.release(b);
  };
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    input_refs[i].type = sig.inputs[i].type;
    input_refs[i].byte_size = sig.inputs[i].byte_size;
    if (sig.inputs[i].byte_size == 0) continue;
    Result<hal::Buffer> buffer =
        dev.allocate(sig.inputs[i].byte_size, hal::MemoryType::kDeviceLocal, hal::BufferUsage::kExternal);
    if (!buffer.ok()) {
      release_inputs();
      return args.fail(buffer.status().message());
    }
    input_buffers[i] = *buffer;
    input_refs[i].data = reinterpret_cast<void*>(static_cast<uintptr_t>(buffer->device_ptr));
  }
  auto upload_inputs = [&](bool donated_only) -> Status {
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      if (input_buffers[i].size == 0 || (donated_only && sig.inputs[i].donated_to < 0)) continue;
      HEXIR_RETURN_IF_ERROR(dev.write(input_buffers[i], 0, host_inputs[i].data(), host_inputs[i].size()));
    }
    return ok_status();
  };
  if (Status s = upload_inputs(false); !s.ok()) {
    release_inputs();
    return args.fail(s.message());
  }

  // Device counters are read around each invoke only, so the tool's own
  // re-uploads of donated inputs between iterations are not counted.
  std::vector<double> times;
  uint64_t invoke_allocations = 0, invoke_uploads = 0;
  auto run_iterations = [&](bool first_uploaded) -> Status {
    for (uint64_t it = 0; it < o.iterations; ++it) {
      if (it > 0 || !first_uploaded) HEXIR_RETURN_IF_ERROR(upload_inputs(true));
      const hal::DeviceCounters before = dev.counters();
      const auto start = Clock::now();
      Status status = context->invoke(function, input_refs);
      times.push_back(ms_since(start));
      const hal::DeviceCounters after = dev.counters();
      invoke_allocations += after.allocations - before.allocations;
      invoke_uploads += after.uploads - before.uploads;
      HEXIR_RETURN_IF_ERROR(status);
    }
    return ok_status();
  };
  if (Status s = run_iterations(true); !s.ok()) {
    release_inputs();
    return args.fail(s.message());
  }
  const std::vector<double> unprofiled_times = times;
  // --profile: the same number of invokes again, one instruction at a time.
  if (o.profile) {
    Status s = context->set_profiling(true);
    if (s.ok()) s = run_iterations(false);
    if (!s.ok()) {
      release_inputs();
      return args.fail(s.message());
    }
  }
  times = unprofiled_times;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                          : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;

  // Results: from the context's buffers, or from the donated input that holds one.
  std::vector<std::vector<uint8_t>> results(sig.outputs.size());
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    try {
      results[j].resize(sig.outputs[j].byte_size);
    } catch (const std::bad_alloc&) {
      release_inputs();
      return args.fail("cannot allocate " + std::to_string(sig.outputs[j].byte_size) + " bytes for output " +
                       std::to_string(j));
    }
    Status s = context->read_output(function, j, results[j]);
    if (!s.ok() && s.code() == StatusCode::kFailedPrecondition) {
      for (size_t i = 0; i < sig.inputs.size(); ++i)
        if (sig.inputs[i].donated_to == static_cast<int>(j) && input_buffers[i].size > 0)
          s = dev.read(input_buffers[i], 0, results[j].data(), results[j].size());
    }
    if (!s.ok()) {
      release_inputs();
      return args.fail("reading output " + std::to_string(j) + ": " + s.message());
    }
  }
  release_inputs();
  // Each result's actual type: a bounded dim at the extent the last invoke produced.
  std::vector<TensorType> actual(sig.outputs.size());
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    Result<TensorType> type = context->output_type(function, j);
    if (!type.ok()) return args.fail(type.status().message());
    actual[j] = *type;
    actual[j].bounded = -1;
    const Result<uint64_t> bytes = byte_size(actual[j]);
    results[j].resize(bytes.ok() ? static_cast<size_t>(*bytes) : 0);
  }

  // DIR/NAME.npy; an output repeating an earlier one's name by its index (the compiler makes names
  // unique; a file made elsewhere need not).
  std::vector<std::string> output_paths(results.size());
  for (size_t j = 0; j < results.size() && !o.output_dir.empty(); ++j) {
    const bool repeated = std::any_of(sig.outputs.begin(), sig.outputs.begin() + j,
                                      [&](const vm::TensorSignature& s) { return s.name == sig.outputs[j].name; });
    output_paths[j] = (std::filesystem::path(o.output_dir) /
                       cli::output_file_name(repeated ? std::string() : sig.outputs[j].name, j))
                          .string();
  }
  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return args.fail("cannot create '" + o.output_dir + "': " + ec.message());
    for (size_t j = 0; j < results.size(); ++j)
      if (Status s = write_npy(output_paths[j], actual[j], results[j]); !s.ok()) return args.fail(s.message());
  }

  std::printf("function %s: %" PRIu64 " iteration%s, median invoke %.3f ms (load %.3f ms, prepare %.3f ms, first invoke %.3f ms)\n",
              sig.name.c_str(), o.iterations, o.iterations == 1 ? "" : "s", median, load_ms, prepare_ms, times.front());
  for (size_t j = 0; j < sig.outputs.size(); ++j)
    std::printf("  output %zu: %s%s%s\n", j, actual[j].to_string().c_str(),
                sig.outputs[j].type.has_bound() ? (" (bound " + sig.outputs[j].type.to_string() + ")").c_str() : "",
                o.output_dir.empty() ? "" : (" -> " + output_paths[j]).c_str());

  const Profile profile = o.profile ? make_profile(module->instructions(function),
                                                  context->instruction_nanoseconds(function), o.iterations)
                                    : Profile{};
  if (o.profile) print_profile(profile, median);

  if (!o.stats_json.empty()) {
    const vm::PhaseStats& prepare = program->prepare_stats();
    const uint64_t prepare_allocations =
        std::max(prepare.device_allocations, after_prepare.allocations - before_prepare.allocations);
    const uint64_t prepare_uploads =
        std::max(prepare.uploads, after_prepare.uploads - before_prepare.uploads);
    const vm::PhaseStats& invoke = context->invoke_stats();
    // One JSON writer for every tool (tools/json.h): names of any length and content stay valid JSON.
    cli::JsonWriter j;
    j.begin_object();
    j.field("file", o.path);
    j.field("function", sig.name);
    j.field("device", std::string(dev.name()));
    j.field("arena_bytes", module->arena_bytes());
    j.field("constant_bytes", module->constant_bytes());
    // Of those, the streamed weights: host memory, prefetched into the arena before each read.
    j.field("streamed_constant_bytes", module->streamed_constant_bytes());
    j.field("lower_bound_bytes", module->lower_bound_bytes());
    // The host memory space (offloaded values): allocated by the context apart from its device memory.
    j.field("host_arena_bytes", module->host_arena_bytes());
    j.field("context_device_bytes", context->device_bytes());
    j.field("context_host_bytes", context->host_bytes());
    j.field("load_ms", load_ms);
    j.begin_object("prepare");
    j.field("ms", prepare_ms);
    j.field("device_allocations", prepare_allocations);
    j.field("uploads", prepare_uploads);
    // Device memory prepare took: fills, uploaded or copied constants (none
    // on the cpu, which uses RODATA from the mapping), anything prepared for kernels.
    j.field("bytes", after_prepare.bytes_allocated - before_prepare.bytes_allocated);
    // Of those, what kernels derived from constants (the cpu's packed weights), once per weight and packing.
    j.field("prepared_bytes", program->prepared_bytes());
    j.end_object();
    j.begin_object("invoke");
    j.field("count", context->invoke_count());
    // The VM's own count and the device's (each catches what the other might miss).
    j.field("device_allocations", std::max(invoke.device_allocations, invoke_allocations));
    j.field("uploads", std::max(invoke.uploads, invoke_uploads));
    j.field("dispatches", invoke.dispatches);
    j.field("peak_live_bytes", invoke.peak_live_bytes);
    j.field("ms_median", median, 4);
    j.field("ms_first", times.front(), 4);  // the first invoke: what prepare left undone shows here
    j.end_object();
    if (o.profile) write_profile(j, profile);
    j.end_object();
    const std::string text = j.text() + "\n";
    if (Status s = cli::write_file(o.stats_json, text); !s.ok()) return args.fail(s.message());
  }
  return 0;
}

}  // namespace
}  // namespace hexir

int main(int argc, char** argv) {
  // Sizes are checked against limits first; this is the last line of defence.
  try {
    return hexir::run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("hexir-run: out of memory\n", stderr);
    return hexir::cli::kExitFailure;
  }
}
