// ONNX conformance: every node test of Debian's libonnx-testdata
// (data/node/<test>/model.onnx + test_data_set_*/input_N.pb, output_N.pb)
// imported, compiled, run on the cpu through the VM and compared with its
// expected outputs (1e-4 absolute and relative; integers and bools exactly).
//
// A test is skipped, with its reason, when its operator is not supported by
// the importer or it uses a dtype Hexir has no kernel for; any other failure of
// a test is a failure. The runner prints one line per test and the summary
//   [onnx-node] tests: N | P passed | F failed | S skipped
// which scripts/test.sh counts in the suite's "N passed, N failed" line.
//
// The folder is $HEXIR_ONNX_NODE_TESTS when set, else Debian's; absent: the
// whole runner skips saying why.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hexir/base/half.h"
#include "hexir/compiler/compiler.h"
#include "hexir/compiler/onnx.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;
using hexir::DType;
using hexir::Status;
using hexir::compiler::OnnxTensor;

namespace {

fs::path node_tests_dir() {
  const char* env = std::getenv("HEXIR_ONNX_NODE_TESTS");
  return env && *env ? fs::path(env) : fs::path("/usr/share/libonnx-testdata/data/node");
}

enum class Outcome { kPassed, kFailed, kSkipped };

struct Verdict {
  Outcome outcome = Outcome::kPassed;
  std::string why;
};

Verdict fail(std::string why) { return {Outcome::kFailed, std::move(why)}; }
Verdict skip(std::string why) { return {Outcome::kSkipped, std::move(why)}; }

struct NamedTensor {
  std::string name;
  OnnxTensor tensor;
};

hexir::Result<NamedTensor> read_tensor(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto proto;
  if (!in || !proto.ParseFromIstream(&in)) return hexir::data_loss("cannot parse " + path.string());
  HEXIR_ASSIGN_OR_RETURN(OnnxTensor tensor, hexir::compiler::tensor_from_proto(proto, path.parent_path()));
  return NamedTensor{proto.name(), std::move(tensor)};
}

// The first operator of the model's graph (node tests have one, or a small
// expanded function), and its input names.
struct ModelInfo {
  std::string op_type;
  std::vector<std::string> inputs;  // graph inputs that are not initializers, in order
  std::vector<std::string> outputs;
};

hexir::Result<ModelInfo> read_model_info(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in)) return hexir::data_loss("cannot parse " + path.string());
  ModelInfo info;
  if (model.graph().node_size() > 0) info.op_type = model.graph().node(0).op_type();
  std::vector<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.push_back(t.name());
  for (const auto& i : model.graph().input())
    if (std::find(initializers.begin(), initializers.end(), i.name()) == initializers.end())
      info.inputs.push_back(i.name());
  for (const auto& o : model.graph().output()) info.outputs.push_back(o.name());
  return info;
}

double element(const OnnxTensor& t, size_t i) {
  const uint8_t* p = t.bytes.data();
  switch (t.type.dtype) {
    case DType::kF32:
      return reinterpret_cast<const float*>(p)[i];
    case DType::kF16:
      return hexir::half_bits_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: {
      const uint32_t bits = uint32_t{reinterpret_cast<const uint16_t*>(p)[i]} << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default:
      return 0;
  }
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

// Compares one output; empty when it matches.
std::string compare(const OnnxTensor& got, const OnnxTensor& want) {
  if (!(got.type == want.type))
    return "output is " + got.type.to_string() + ", expected " + want.type.to_string();
  if (!is_float(want.type.dtype)) return got.bytes == want.bytes ? "" : "integer output differs";
  const size_t n = got.bytes.size() / hexir::dtype_size(want.type.dtype);
  for (size_t i = 0; i < n; ++i) {
    const double g = element(got, i), w = element(want, i);
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::fabs(g - w) <= 1e-4 + 1e-4 * std::fabs(w);
    if (!ok)
      return "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " +
             std::to_string(w);
  }
  return "";
}

// What the importer or the kernels do not cover yet, recognized by its
// message; each becomes a skip with this reason (and shows in the summary).
bool unsupported(const std::string& message, std::string* reason) {
  static const std::pair<const char*, const char*> kKnown[] = {
      {"is not supported by the ONNX importer", "operator not supported"},
      {"operator domain", "operator domain not supported (training / preview ops)"},
      {"subgraphs are supported in If and Loop only", "control flow other than If and Loop (Scan) not supported"},
      {"is supported only on constants", "no kernel for the operator (folded on constants only)"},
      {"is used, but only the first", "extra outputs not supported (training statistics, masks)"},
      {"training_mode must be", "training mode not supported"},
      {"only f32 is supported", "dtype not supported by the operator's kernels"},
      {"only f32, f16 and bf16 are supported", "dtype not supported by the operator's kernels"},
      {"must be f32, i32 or i64", "dtype not supported by the operator's kernels"},
      {"must be f32, f16, bf16, i32 or i64", "dtype not supported by the operator's kernels"},
      {"the exponent is", "mixed-dtype Pow not supported"},
      {"is segmented", "sequence / optional values not supported"},
      {"is too large", "sequence / optional values not supported"},
      {"element type UNDEFINED", "sequence / optional values not supported"},
  };
  // The reason, then the importer's own words (which operator, which dtype),
  // so the summary groups by reason and each line says what is missing.
  for (const auto& [needle, why] : kKnown)
    if (message.find(needle) != std::string::npos) {
      *reason = std::string(why) + ": " + message.substr(0, 160);
      return true;
    }
  for (const char* dtype :
       {"DOUBLE", "UINT16", "UINT32", "UINT64", "INT16", "STRING", "COMPLEX", "FLOAT8", "INT4", "UINT4"})
    if (message.find(dtype) != std::string::npos) {
      *reason = std::string("dtype ") + dtype + " not supported";
      return true;
    }
  return false;
}

Verdict run_test(const fs::path& dir) {
  auto info = read_model_info(dir / "model.onnx");
  if (!info.ok()) return fail(info.status().message());
  const fs::path data = dir / "test_data_set_0";
  std::vector<NamedTensor> inputs, outputs;
  for (int i = 0;; ++i) {
    const fs::path p = data / ("input_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    auto t = read_tensor(p);
    if (!t.ok()) {
      std::string reason;
      if (unsupported(t.status().message(), &reason)) return skip(reason + " (input)");
      return fail(t.status().message());
    }
    if (t->name.empty() && static_cast<size_t>(i) < info->inputs.size()) t->name = info->inputs[i];
    inputs.push_back(std::move(*t));
  }
  for (int i = 0;; ++i) {
    const fs::path p = data / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    auto t = read_tensor(p);
    if (!t.ok()) {
      std::string reason;
      if (unsupported(t.status().message(), &reason)) return skip(reason + " (output)");
      return fail(t.status().message());
    }
    outputs.push_back(std::move(*t));
  }

  // Run-time inputs first; then, for an operator that needs some inputs at
  // import (shapes, axes, sizes, bounds), the integer inputs as constants,
  // then every input but the first, then all (the node then folds at import).
  hexir::compiler::OnnxImportOptions options;
  auto module = hexir::compiler::import_onnx(dir / "model.onnx", options);
  for (int attempt = 1; !module.ok() && attempt <= 3; ++attempt) {
    std::string reason;
    if (unsupported(module.status().message(), &reason)) return skip(reason);
    const size_t before = options.input_values.size();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (attempt == 1 ? !is_float(inputs[i].tensor.type.dtype) : attempt == 3 || i > 0)
        options.input_values[inputs[i].name] = inputs[i].tensor;
    if (options.input_values.size() > before)
      module = hexir::compiler::import_onnx(dir / "model.onnx", options);
  }
  if (!module.ok()) {
    std::string reason;
    if (unsupported(module.status().message(), &reason)) return skip(reason);
    // Every input a constant and still not computable at import: an operand
    // computed inside the graph (test_loop11: Slice bounds from a Loop's iteration count).
    if (module.status().message().find("it is computed at run time") != std::string::npos)
      return skip("a run-time operand where the importer needs a constant");
    return fail("import: " + module.status().message());
  }
  auto bytes = hexir::compiler::compile_module(*module, {}, "model");
  if (!bytes.ok()) return fail("compile: " + bytes.status().message());
  std::vector<uint8_t> storage(bytes->size() + 64);
  uint8_t* aligned = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  std::memcpy(aligned, bytes->data(), bytes->size());
  auto loaded = hexir::vm::Module::load_buffer({aligned, bytes->size()});
  if (!loaded.ok()) return fail("load: " + loaded.status().message());
  auto device = hexir::hal::create_device("cpu");
  if (!device.ok()) return fail(device.status().message());
  auto program = hexir::vm::Program::prepare(*loaded, **device);
  if (!program.ok()) {
    if (program.status().code() == hexir::StatusCode::kUnimplemented)
      return skip("no cpu kernel: " + program.status().message());
    return fail("prepare: " + program.status().message());
  }
  auto context = hexir::vm::Context::create(*program);
  if (!context.ok()) return fail("context: " + context.status().message());
  const hexir::vm::FunctionSignature& sig = loaded->function(0);
  std::vector<hexir::vm::TensorRef> refs;
  for (const auto& in : sig.inputs) {
    auto it =
        std::find_if(inputs.begin(), inputs.end(), [&](const NamedTensor& t) { return t.name == in.name; });
    if (it == inputs.end()) return fail("no test data for input '" + in.name + "'");
    refs.push_back({it->tensor.bytes.data(), it->tensor.bytes.size(), it->tensor.type});
  }
  Status invoked = context->invoke(0, refs);
  if (!invoked.ok()) return fail("invoke: " + invoked.message());
  if (sig.outputs.size() != outputs.size())
    return fail("the executable has " + std::to_string(sig.outputs.size()) + " outputs, the test " +
                std::to_string(outputs.size()));
  for (size_t j = 0; j < outputs.size(); ++j) {
    OnnxTensor got{sig.outputs[j].type, std::vector<uint8_t>(sig.outputs[j].byte_size)};
    Status read = context->read_output(0, j, got.bytes);
    if (!read.ok()) return fail("read output: " + read.message());
    // A bounded result (NonZero, NonMaxSuppression, Compress): its actual shape.
    auto actual = context->output_type(0, j);
    if (!actual.ok()) return fail("output type: " + actual.status().message());
    got.type = *actual;
    got.type.bounded = -1;
    got.bytes.resize(*hexir::byte_size(got.type));
    const std::string diff = compare(got, outputs[j].tensor);
    if (!diff.empty()) return fail("output " + std::to_string(j) + ": " + diff);
  }
  return {};
}

}  // namespace

TEST_CASE("onnx node tests (libonnx-testdata) import, run and match") {
  const fs::path root = node_tests_dir();
  if (!fs::is_directory(root)) {
    MESSAGE("HEXIR_SKIP: ONNX node tests not found at " << root.string()
                                                        << " (apt-get install libonnx-testdata)");
    return;
  }
  std::vector<fs::path> tests;
  for (const auto& entry : fs::directory_iterator(root))
    if (fs::exists(entry.path() / "model.onnx")) tests.push_back(entry.path());
  std::sort(tests.begin(), tests.end());
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  for (const fs::path& dir : tests) {
    const Verdict v = run_test(dir);
    const std::string name = dir.filename().string();
    switch (v.outcome) {
      case Outcome::kPassed:
        ++passed;
        std::printf("[onnx-node] PASS %s\n", name.c_str());
        break;
      case Outcome::kFailed:
        ++failed;
        std::printf("[onnx-node] FAIL %s: %s\n", name.c_str(), v.why.c_str());
        break;
      case Outcome::kSkipped:
        ++skipped;
        ++skip_reasons[v.why.substr(0, v.why.find(':'))];
        std::printf("[onnx-node] SKIP %s: %s\n", name.c_str(), v.why.c_str());
        break;
    }
  }
  for (const auto& [reason, count] : skip_reasons)
    std::printf("[onnx-node] skipped %d: %s\n", count, reason.c_str());
  std::printf("[onnx-node] tests: %d | %d passed | %d failed | %d skipped\n", passed + failed + skipped,
              passed, failed, skipped);
  CHECK(failed == 0);
}
