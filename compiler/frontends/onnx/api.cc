// The ONNX front end's API that every build has (hexir/compiler/onnx.h): the
// type names and the option parsers, and, built without ONNX, the stubs
// that say so. With ONNX, importer.cc and the family files do the rest.
#include <charconv>
#include <cstdlib>

#include "frontends/onnx/types.h"
#include "hexir/compiler/onnx.h"

namespace hexir::compiler {

using namespace onnx_import;  // the type codes

bool onnx_supported() { return HEXIR_HAVE_ONNX != 0; }

std::optional<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case kFloat:
      return DType::kF32;
    case kFloat16:
      return DType::kF16;
    case kBFloat16:
      return DType::kBF16;
    case kInt32:
      return DType::kI32;
    case kInt64:
      return DType::kI64;
    case kInt8:
      return DType::kI8;
    case kUint8:
      return DType::kU8;
    case kBool:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t data_type) {
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",   "UINT16",    "INT16",
                                       "INT32",     "INT64",  "STRING", "BOOL",   "FLOAT16",   "DOUBLE",
                                       "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  if (data_type >= 0 && data_type < static_cast<int32_t>(std::size(kNames))) return kNames[data_type];
  return "type " + std::to_string(data_type);
}

Status parse_input_shape_option(std::string_view text, OnnxImportOptions& options) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0)
    return invalid_argument("--input-shape expects NAME=D0xD1x... (e.g. x=1x3x224x224), got '" +
                            std::string(text) + "'");
  const std::string name(text.substr(0, eq));
  const std::string_view spec = text.substr(eq + 1);
  std::vector<int64_t> dims;
  if (!spec.empty() && spec != "scalar") {
    size_t pos = 0;
    while (true) {
      const size_t x = spec.find('x', pos);
      const std::string_view part = spec.substr(pos, x == std::string_view::npos ? spec.npos : x - pos);
      int64_t d = -1;
      auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), d);
      if (part.empty() || ec != std::errc() || end != part.data() + part.size() || d < 0)
        return invalid_argument("--input-shape " + name + ": '" + std::string(spec) +
                                "' is not a shape like 1x3x224x224 (non-negative integers joined by 'x')");
      dims.push_back(d);
      if (x == std::string_view::npos) break;
      pos = x + 1;
    }
  }
  if (!options.input_shapes.emplace(name, std::move(dims)).second)
    return invalid_argument("--input-shape for '" + name + "' is given twice");
  return ok_status();
}

Status parse_bind_option(std::string_view text, OnnxImportOptions& options) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return invalid_argument("--bind expects NAME=VALUE (e.g. seq_len=128), got '" + std::string(text) + "'");
  const std::string name(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  double v = 0;
  if (value == "true" || value == "false") {
    v = value == "true" ? 1 : 0;
  } else {
    char* end = nullptr;
    v = std::strtod(value.c_str(), &end);
    if (end != value.c_str() + value.size())
      return invalid_argument("--bind " + name + ": '" + value + "' is not a number");
  }
  if (!options.binds.emplace(name, v).second)
    return invalid_argument("--bind for '" + name + "' is given twice");
  return ok_status();
}

Status parse_dim_bound_option(std::string_view text, OnnxImportOptions& options) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    return invalid_argument("--dim-bound expects NAME=N (e.g. boxes=300), got '" + std::string(text) + "'");
  const std::string name(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  int64_t n = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0)
    return invalid_argument("--dim-bound " + name + ": '" + value + "' is not a count (an integer >= 0)");
  if (!options.dim_bounds.emplace(name, n).second)
    return invalid_argument("--dim-bound for '" + name + "' is given twice");
  return ok_status();
}

#if !HEXIR_HAVE_ONNX

namespace {
Status no_onnx(const std::string& what) {
  return unimplemented(what +
                       ": hexir was built without ONNX support (install libonnx-dev libprotobuf-dev "
                       "protobuf-compiler and reconfigure with meson -Donnx=enabled)");
}
}  // namespace

Result<Module> import_onnx(const std::filesystem::path& path, const OnnxImportOptions&) {
  return no_onnx("cannot import '" + path.string() + "'");
}
Result<OnnxTensor> tensor_from_proto(const onnx::TensorProto&, const std::filesystem::path&) {
  return no_onnx("cannot read an ONNX tensor");
}
Result<OnnxTensor> read_onnx_tensor_file(const std::filesystem::path& path) {
  return no_onnx("cannot read '" + path.string() + "'");
}

#endif  // !HEXIR_HAVE_ONNX

}  // namespace hexir::compiler
