#include "passes/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>

#include "hexir/base/half.h"
#include "hexir/ops/plans.h"
#include "ir/constant_data.h"
#include "passes/fusion.h"

namespace hexir::compiler {
namespace {

// The module constants (int8 or packed int4 rows, scales) made for one
// source weight, and how it was stored.
struct Quantized {
  int weight = -1, scale = -1;
  WeightFormat format;
};

std::optional<std::vector<float>> floats_of(const Constant& c) {
  const Result<std::vector<uint8_t>> bytes = constant_bytes(c);
  if (!bytes.ok()) return std::nullopt;
  std::vector<float> out(bytes->size() / 4);
  std::memcpy(out.data(), bytes->data(), out.size() * 4);
  return out;
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Weight b (row-major [k, n], or [n, k] when transposed) as rows [n, k] in
// `format` (int8, or int4 when the rows split into its groups; otherwise
// int8) and their scales; the report's error. Nothing for a weight with a
// NaN or infinite value, or an int4 scale past f16's range.
Quantized quantize(Module& module, int source, bool transposed, WeightFormat format,
                   std::vector<CompressedWeight>& report) {
  const Constant c = module.constants[static_cast<size_t>(source)];  // a copy: add_constant grows the list
  const std::optional<std::vector<float>> w = floats_of(c);
  if (!w) return {};
  const int64_t rows = transposed ? c.type.dims[0] : c.type.dims[1];
  const int64_t cols = transposed ? c.type.dims[1] : c.type.dims[0];
  auto at = [&](int64_t n, int64_t k) { return (*w)[static_cast<size_t>(transposed ? n * cols + k : k * rows + n)]; };
  if (format.kind == WeightFormat::Kind::kInt4 && (cols % format.group != 0 || format.group % ops::kInt4Block != 0))
    format = WeightFormat{WeightFormat::Kind::kInt8};
  const bool int4 = format.kind == WeightFormat::Kind::kInt4;
  // Per row (int8) or per group of a row (int4): the scale s, w ~ q * s.
  const int64_t group = int4 ? format.group : cols, groups = cols / group;
  std::vector<uint8_t> q(static_cast<size_t>(int4 ? rows * cols / 2 : rows * cols));
  std::vector<float> scale(int4 ? 0 : static_cast<size_t>(rows));
  std::vector<uint16_t> half_scale(int4 ? static_cast<size_t>(rows * groups) : 0);
  double largest = 0.0, worst = 0.0;
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      // The value of largest magnitude, with its sign: int4 maps it to -8
      // (one level more than a symmetric -7..7), int8 to +-127.
      float amax = 0.0f, extreme = 0.0f;
      for (int64_t k = g * group; k < (g + 1) * group; ++k) {
        const float x = at(n, k);
        if (!std::isfinite(x)) return {};  // a NaN or infinite weight: keep the f32 one
        if (std::fabs(x) > amax) amax = std::fabs(x), extreme = x;
      }
      largest = std::max<double>(largest, amax);
      float s = 0.0f;
      if (int4) {
        const uint16_t bits = float_to_half_bits(extreme / -8.0f);
        s = half_bits_to_float(bits);  // the scale the kernel reads: quantize against it
        if (!std::isfinite(s)) return {};
        half_scale[static_cast<size_t>(n * groups + g)] = bits;
      } else {
        s = amax > 0.0f ? amax / 127.0f : 1.0f;
        scale[static_cast<size_t>(n)] = s;
      }
      for (int64_t k = g * group; k < (g + 1) * group; ++k) {
        const float x = at(n, k);
        float v = 0.0f;
        if (int4) {
          v = s != 0.0f ? std::clamp(std::round(x / s), -8.0f, 7.0f) : 0.0f;
          // The block layout of op.h: byte t % 16 of block t / 32, the block's first 16 in the low nibbles.
          uint8_t& byte = q[static_cast<size_t>(n * cols / 2 + k / ops::kInt4Block * 16 + k % 16)];
          byte |= static_cast<uint8_t>(static_cast<int>(v) + 8) << (k % ops::kInt4Block < 16 ? 0 : 4);
        } else {
          v = std::clamp(std::round(x / s), -127.0f, 127.0f);
          q[static_cast<size_t>(n * cols + k)] = static_cast<uint8_t>(static_cast<int8_t>(v));
        }
        worst = std::max<double>(worst, std::fabs(double{x} - double{v * s}));
      }
    }
  }
  Quantized out;
  out.format = format;
  const uint64_t stored = q.size() + (int4 ? half_scale.size() * 2 : scale.size() * 4);
  if (int4) {
    out.weight = add_constant(module, c.name + ".int4", TensorType{DType::kU8, {rows, cols / 2}}, InlineBytes{std::move(q)});
    out.scale = add_constant(module, c.name + ".scale", TensorType{DType::kF16, {rows, groups}},
                             InlineBytes{bytes_of(half_scale)});
  } else {
    out.weight = add_constant(module, c.name + ".int8", TensorType{DType::kI8, {rows, cols}}, InlineBytes{std::move(q)});
    out.scale = add_constant(module, c.name + ".scale", TensorType{DType::kF32, {rows}}, InlineBytes{bytes_of(scale)});
  }
  report.push_back({c.name, format, rows, cols, c.byte_size, stored, largest > 0.0 ? worst / largest : 0.0});
  return out;
}

// Glob match: '*' any run of characters, everything else itself.
bool name_matches(std::string_view pattern, std::string_view name) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == name;
  if (name.substr(0, star) != pattern.substr(0, star)) return false;
  const std::string_view rest = pattern.substr(star + 1);
  for (size_t at = star; at <= name.size(); ++at)
    if (name_matches(rest, name.substr(at))) return true;
  return false;
}

}  // namespace

namespace {

// Values and nodes added to a function by the rewrites below.
struct FunctionEdit {
  Function& fn;
  std::set<std::string> names;

  explicit FunctionEdit(Function& f) : fn(f) {
    for (const Value& v : fn.values) names.insert(v.name);
  }
  int add_value(const std::string& base, TensorType type, const Location& loc) {
    std::string name = base;
    for (int suffix = 1; names.count(name); ++suffix) name = base + "." + std::to_string(suffix);
    names.insert(name);
    Value v;
    v.name = name;
    v.byte_size = *byte_size(type);
    v.type = std::move(type);
    v.kind = ValueKind::kResult;
    v.loc = loc;
    fn.values.push_back(std::move(v));
    return static_cast<int>(fn.values.size()) - 1;
  }
};


}  // namespace

std::vector<CompressedWeight> compress_weights(Module& module, const WeightFormat& weights,
                                               std::span<const WeightOverride> overrides) {
  std::vector<CompressedWeight> report;
  // By format, content and orientation: the functions of several exports
  // (--function) each hold their own constant of one weight (the file
  // stores it once); quantized once, not per function. The hash finds it,
  // same_bytes confirms.
  std::map<std::tuple<std::string, bool, uint64_t, uint64_t>, std::vector<std::pair<int, Quantized>>> made;
  auto format_of = [&](int constant) {
    WeightFormat format = weights;
    for (const WeightOverride& o : overrides)
      if (name_matches(o.pattern, module.constants[static_cast<size_t>(constant)].name)) format = o.format;
    return format;
  };
  std::map<int, uint64_t> hashes;
  auto hash_of = [&](int constant) -> std::optional<uint64_t> {
    if (auto it = hashes.find(constant); it != hashes.end()) return it->second;
    uint64_t h = 14695981039346656037ull;
    const Status read = for_each_chunk(module.constants[static_cast<size_t>(constant)], [&](std::span<const uint8_t> c) {
      for (uint8_t byte : c) h = (h ^ byte) * 1099511628211ull;
      return ok_status();
    });
    if (!read.ok()) return std::nullopt;
    return hashes[constant] = h;
  };
  // The rows in `format` and scales of f32 constant `source` (rows: its
  // columns as a matmul's b reads them, or its own rows when `transposed`),
  // or nullopt.
  auto quantized_of = [&](int source, bool transposed, WeightFormat format) -> std::optional<Quantized> {
    if (format.kind == WeightFormat::Kind::kAsGiven) return std::nullopt;
    const std::optional<uint64_t> hash = hash_of(source);
    if (!hash) return std::nullopt;
    std::vector<std::pair<int, Quantized>>& same_hash = made[std::make_tuple(
        format.to_string(), transposed, module.constants[static_cast<size_t>(source)].byte_size, *hash)];
    for (const auto& [seen, quantized] : same_hash) {
      const Result<bool> same = seen == source ? Result<bool>(true)
                                               : same_bytes(module.constants[static_cast<size_t>(seen)],
                                                            module.constants[static_cast<size_t>(source)]);
      if (same.ok() && *same) return quantized.weight < 0 ? std::nullopt : std::optional<Quantized>(quantized);
    }
    const Quantized q = quantize(module, source, transposed, format, report);
    same_hash.emplace_back(source, q);
    return q.weight < 0 ? std::nullopt : std::optional<Quantized>(q);
  };
  auto large_f32_matrix = [](const Value& v) {
    return v.kind == ValueKind::kConstant && v.type.dtype == DType::kF32 && v.type.rank() == 2 &&
           !v.type.has_bound() && v.type.dims[0] * v.type.dims[1] >= kMinCompressedElements;
  };
  for (Function& fn : module.functions) {
    FunctionEdit edit(fn);
    std::vector<Node> original = std::move(fn.nodes);
    fn.nodes.clear();
    std::vector<int64_t> new_index(original.size(), -1);
    bool changed = false;
    for (size_t n = 0; n < original.size(); ++n) {
      Node node = original[n];
      const bool op = node.kind == NodeKind::kOp && node.results.size() == 1;
      // matmul(a, b) -> quantized_matmul(a, w, scale).
      if (op && node.op == ops::OpId::kMatmul && node.inputs.size() == 2 && node.params.size() <= 1 &&
          large_f32_matrix(fn.values[static_cast<size_t>(node.inputs[1])]) &&
          fn.values[static_cast<size_t>(node.inputs[0])].type.dtype == DType::kF32 &&
          fn.values[static_cast<size_t>(node.inputs[0])].type.rank() >= 1) {
        const bool transposed = node.params.size() == 1 && node.params[0] == 1;
        const int source = fn.values[static_cast<size_t>(node.inputs[1])].constant;
        if (const std::optional<Quantized> q = quantized_of(source, transposed, format_of(source))) {
          const int w = use_constant(fn, module, q->weight), s = use_constant(fn, module, q->scale);
          const std::vector<TensorType> types = {fn.values[static_cast<size_t>(node.inputs[0])].type,
                                                 fn.values[static_cast<size_t>(w)].type,
                                                 fn.values[static_cast<size_t>(s)].type};
          const ops::OpId op_id = q->format.kind == WeightFormat::Kind::kInt4 ? ops::OpId::kInt4Matmul
                                                                              : ops::OpId::kQuantizedMatmul;
          const Result<TensorType> result = ops::infer_result_type(op_id, types, {});
          if (result.ok() && *result == fn.values[static_cast<size_t>(node.results[0])].type) {
            node.op = op_id;
            node.inputs = {node.inputs[0], w, s};
            node.params.clear();
            changed = true;
          }
        }
      }
      // gather(table, ids) {axis 0} (an embedding; often the head's tied
      // weight) -> the int8 rows and their scales gathered, dequantized.
      if (op && node.op == ops::OpId::kGather && node.params == std::vector<int64_t>{0} &&
          large_f32_matrix(fn.values[static_cast<size_t>(node.inputs[0])])) {
        const int source = fn.values[static_cast<size_t>(node.inputs[0])].constant;
        const std::optional<Quantized> q = quantized_of(source, true, format_of(source));
        if (q && q->format.kind == WeightFormat::Kind::kInt4) {
          // The packed rows and their scales gathered, then decoded.
          const Location loc = node.loc;
          const int result = node.results[0];
          std::vector<int64_t> dims = fn.values[static_cast<size_t>(result)].type.dims;
          const std::string base = fn.values[static_cast<size_t>(result)].name;
          const int w = use_constant(fn, module, q->weight), s = use_constant(fn, module, q->scale);
          const int64_t d = dims.back();
          dims.back() = d / 2;
          const int picked = edit.add_value(base + ".int4", TensorType{DType::kU8, dims}, loc);
          dims.back() = d / q->format.group;
          const int scales = edit.add_value(base + ".scales", TensorType{DType::kF16, dims}, loc);
          fn.nodes.push_back(op_node(ops::OpId::kGather, {w, node.inputs[1]}, picked, {0}, loc));
          fn.nodes.push_back(op_node(ops::OpId::kGather, {s, node.inputs[1]}, scales, {0}, loc));
          node = op_node(ops::OpId::kDequantizeInt4, {picked, scales}, result, {}, loc);
          changed = true;
        } else if (q) {
          const Location loc = node.loc;
          const int ids = node.inputs[1], result = node.results[0];
          const TensorType out = fn.values[static_cast<size_t>(result)].type;
          const std::string base = fn.values[static_cast<size_t>(result)].name;
          const int64_t d = out.dims.back();
          int64_t rows = 1;
          for (size_t i = 0; i + 1 < out.dims.size(); ++i) rows *= out.dims[i];
          std::vector<int64_t> row_dims(out.dims.begin(), out.dims.end() - 1);
          const int w = use_constant(fn, module, q->weight), s = use_constant(fn, module, q->scale);
          const int picked = edit.add_value(base + ".int8", TensorType{DType::kI8, out.dims}, loc);
          const int picked_rows = edit.add_value(base + ".int8_rows", TensorType{DType::kI8, {rows, d}}, loc);
          const int scales = edit.add_value(base + ".scales", TensorType{DType::kF32, row_dims}, loc);
          const int scale_rows = edit.add_value(base + ".scale_rows", TensorType{DType::kF32, {rows}}, loc);
          const int zeros = use_constant(fn, module, add_constant(module, base + ".zero", TensorType{DType::kI8, {rows}}, FillPattern{{0}}));
          const int wide = edit.add_value(base + ".f32_rows", TensorType{DType::kF32, {rows, d}}, loc);
          fn.nodes.push_back(op_node(ops::OpId::kGather, {w, ids}, picked, {0}, loc));
          fn.nodes.push_back(op_node(ops::OpId::kReshape, {picked}, picked_rows, {rows, d}, loc));
          fn.nodes.push_back(op_node(ops::OpId::kGather, {s, ids}, scales, {0}, loc));
          fn.nodes.push_back(op_node(ops::OpId::kReshape, {scales}, scale_rows, {rows}, loc));
          fn.nodes.push_back(op_node(ops::OpId::kDequantizeLinear, {picked_rows, scale_rows, zeros}, wide, {0}, loc));
          node = op_node(ops::OpId::kReshape, {wide}, result, out.dims, loc);
          changed = true;
        }
      }
      fn.nodes.push_back(std::move(node));
      new_index[n] = static_cast<int64_t>(fn.nodes.size()) - 1;
    }
    if (!changed) {
      fn.nodes = std::move(original);
      continue;
    }
    renumber_nodes(fn, original.size(), new_index);
    // The f32 weights' uses go where no node reads them (never stored then).
    drop(fn, std::vector<bool>(fn.nodes.size(), false), std::vector<bool>(fn.values.size(), false));
  }
  return report;
}

namespace {

// The int8 values of constant value v, or nullopt.
std::optional<std::vector<uint8_t>> int8_constant(const Module& module, const Value& v) {
  if (v.kind != ValueKind::kConstant || v.type.dtype != DType::kI8) return std::nullopt;
  Result<std::vector<uint8_t>> bytes = constant_bytes(module.constants[static_cast<size_t>(v.constant)]);
  if (!bytes.ok()) return std::nullopt;
  return std::move(*bytes);
}

// The module constant holding int8 matrix value w ([K, N], or [N, K] when
// `transposed`) as rows [N, K]: w's own constant when transposed, else a
// transposed copy named NAME.rows; -1 when w's values cannot be read.
int int8_rows_constant(Module& module, const Value& w, bool transposed) {
  if (transposed) return w.constant;
  const std::optional<std::vector<uint8_t>> values = int8_constant(module, w);
  if (!values) return -1;
  const int64_t k = w.type.dims[0], n = w.type.dims[1];
  std::vector<uint8_t> rows(values->size());
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) rows[static_cast<size_t>(c * k + r)] = (*values)[static_cast<size_t>(r * n + c)];
  return add_constant(module, module.constants[static_cast<size_t>(w.constant)].name + ".rows",
                      TensorType{DType::kI8, {n, k}}, InlineBytes{std::move(rows)});
}


}  // namespace

size_t use_dequantized_weights(Module& module) {
  size_t rewritten = 0;
  std::map<std::tuple<int, int, bool>, Quantized> made;  // (int8 constant, scale constant, transposed)
  for (Function& fn : module.functions) {
    // Plain references, not structured bindings: clang 14 (the sanitizer legs) refuses those in lambdas.
    const ValueUses uses = value_uses(fn);
    const std::vector<int>& readers = uses.readers, &writer = uses.writer;
    std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
    for (size_t n = 0; n < fn.nodes.size(); ++n) {
      Node& mm = fn.nodes[n];
      if (mm.kind != NodeKind::kOp || mm.op != ops::OpId::kMatmul || mm.inputs.size() != 2 || mm.params.size() > 1)
        continue;
      const bool transposed = mm.params.size() == 1 && mm.params[0] == 1;
      const int b = mm.inputs[1], dq_node = writer[static_cast<size_t>(b)];
      if (dq_node < 0 || readers[static_cast<size_t>(b)] != 1) continue;
      const Node& dq = fn.nodes[static_cast<size_t>(dq_node)];
      if (dq.kind != NodeKind::kOp || dq.op != ops::OpId::kDequantizeLinear || dq.params.size() != 1) continue;
      const Value& q = fn.values[static_cast<size_t>(dq.inputs[0])];
      const Value& scale = fn.values[static_cast<size_t>(dq.inputs[1])];
      const Value& zero = fn.values[static_cast<size_t>(dq.inputs[2])];
      if (q.type.rank() != 2 || scale.kind != ValueKind::kConstant || fn.values[static_cast<size_t>(mm.inputs[0])].type.dtype != DType::kF32)
        continue;
      // Per output channel: along the columns of b as the matmul reads it (or per tensor).
      const int64_t n_dim = transposed ? 0 : 1, rows = q.type.dims[static_cast<size_t>(n_dim)];
      const bool per_tensor = scale.type.rank() == 0 || (scale.type.rank() == 1 && scale.type.dims[0] == 1);
      if (!per_tensor && dq.params[0] != n_dim) continue;
      const std::optional<std::vector<uint8_t>> zeros = int8_constant(module, zero);
      if (!zeros || std::any_of(zeros->begin(), zeros->end(), [](uint8_t z) { return z != 0; })) continue;
      const auto key = std::make_tuple(q.constant, scale.constant, transposed);
      auto it = made.find(key);
      if (it == made.end()) {
        const Result<std::vector<uint8_t>> s = constant_bytes(module.constants[static_cast<size_t>(scale.constant)]);
        if (!s.ok() || q.kind != ValueKind::kConstant || q.type.dtype != DType::kI8) continue;
        Quantized made_here;
        made_here.weight = int8_rows_constant(module, q, transposed);
        if (made_here.weight < 0) continue;
        std::vector<uint8_t> per_row(static_cast<size_t>(rows) * 4);
        for (int64_t j = 0; j < rows; ++j) std::memcpy(per_row.data() + j * 4, s->data() + (per_tensor ? 0 : j * 4), 4);
        made_here.scale = add_constant(module, module.constants[static_cast<size_t>(scale.constant)].name + ".rows",
                                       TensorType{DType::kF32, {rows}}, InlineBytes{std::move(per_row)});
        it = made.emplace(key, made_here).first;
      }
      const int w = use_constant(fn, module, it->second.weight), sc = use_constant(fn, module, it->second.scale);
      std::vector<TensorType> types = {fn.values[static_cast<size_t>(mm.inputs[0])].type,
                                       fn.values[static_cast<size_t>(w)].type, fn.values[static_cast<size_t>(sc)].type};
      const Result<TensorType> result = ops::infer_result_type(ops::OpId::kQuantizedMatmul, types, {});
      if (!result.ok() || !(*result == fn.values[static_cast<size_t>(mm.results[0])].type)) continue;
      mm.op = ops::OpId::kQuantizedMatmul;
      mm.inputs = {mm.inputs[0], w, sc};
      mm.params.clear();
      node_dropped.resize(fn.nodes.size(), false);
      value_dropped.resize(fn.values.size(), false);
      node_dropped[static_cast<size_t>(dq_node)] = true;
      value_dropped[static_cast<size_t>(b)] = true;
      ++rewritten;
    }
    node_dropped.resize(fn.nodes.size(), false);
    value_dropped.resize(fn.values.size(), false);
    if (std::count(node_dropped.begin(), node_dropped.end(), true) > 0) drop(fn, node_dropped, std::move(value_dropped));
  }
  return rewritten;
}

namespace {

// Every element of constant value v equals `expected` (as v's dtype: f32, or u8/i8 bytes).
bool constant_all(const Module& module, const Value& v, float expected) {
  if (v.kind != ValueKind::kConstant) return false;
  const Result<std::vector<uint8_t>> bytes = constant_bytes(module.constants[static_cast<size_t>(v.constant)]);
  if (!bytes.ok() || bytes->empty()) return false;
  if (v.type.dtype == DType::kF32) {
    for (size_t i = 0; i + 4 <= bytes->size(); i += 4) {
      float x = 0.0f;
      std::memcpy(&x, bytes->data() + i, 4);
      if (x != expected) return false;
    }
    return true;
  }
  return std::all_of(bytes->begin(), bytes->end(), [&](uint8_t b) { return static_cast<float>(b) == expected; });
}

}  // namespace

size_t use_integer_matmul(Module& module) {
  size_t rewritten = 0;
  std::map<std::pair<int, bool>, int> rows_of;  // (int8 constant, transposed) -> its [N, K] rows
  for (Function& fn : module.functions) {
    // Plain references, not structured bindings: clang 14 (the sanitizer legs) refuses those in lambdas.
    const ValueUses uses = value_uses(fn);
    const std::vector<int>& readers = uses.readers, &writer = uses.writer;
    // The op node writing v, read only once (by the node being rewritten), or nullptr.
    auto only_writer = [&](int v, ops::OpId op) -> Node* {
      const int w = writer[static_cast<size_t>(v)];
      if (w < 0 || readers[static_cast<size_t>(v)] != 1) return nullptr;
      Node& node = fn.nodes[static_cast<size_t>(w)];
      return node.kind == NodeKind::kOp && node.op == op ? &node : nullptr;
    };
    std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
    for (size_t n = 0; n < fn.nodes.size(); ++n) {
      Node& cast = fn.nodes[n];
      if (cast.kind != NodeKind::kOp || cast.op != ops::OpId::kCast ||
          fn.values[static_cast<size_t>(cast.results[0])].type.dtype != DType::kI32)
        continue;
      Node* mm = only_writer(cast.inputs[0], ops::OpId::kMatmul);
      if (!mm || mm->inputs.size() != 2 || mm->params.size() > 1) continue;
      const bool transposed = mm->params.size() == 1 && mm->params[0] == 1;
      Node* dq_a = only_writer(mm->inputs[0], ops::OpId::kDequantizeLinear);
      Node* dq_w = only_writer(mm->inputs[1], ops::OpId::kDequantizeLinear);
      if (!dq_a || !dq_w) continue;
      const Value& a = fn.values[static_cast<size_t>(dq_a->inputs[0])];
      const Value& a_zero = fn.values[static_cast<size_t>(dq_a->inputs[2])];
      const Value& w = fn.values[static_cast<size_t>(dq_w->inputs[0])];
      // a: u8 with one zero point, unscaled; w: an int8 constant matrix, unscaled, zero points 0.
      const auto one_element = [](const TensorType& t) {
        return std::all_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d == 1; });
      };
      if (a.type.dtype != DType::kU8 || a.type.rank() < 1 || !one_element(a_zero.type) ||
          !constant_all(module, fn.values[static_cast<size_t>(dq_a->inputs[1])], 1.0f) ||
          w.kind != ValueKind::kConstant || w.type.dtype != DType::kI8 || w.type.rank() != 2 ||
          !constant_all(module, fn.values[static_cast<size_t>(dq_w->inputs[1])], 1.0f) ||
          !constant_all(module, fn.values[static_cast<size_t>(dq_w->inputs[2])], 0.0f))
        continue;
      // Copies: use_constant below may add values (fn.values grows).
      const TensorType a_type = a.type, zero_type = a_zero.type;
      auto it = rows_of.find({w.constant, transposed});
      if (it == rows_of.end()) {
        const int rows = int8_rows_constant(module, w, transposed);
        if (rows < 0) continue;
        it = rows_of.emplace(std::make_pair(w.constant, transposed), rows).first;
      }
      const int w_rows = use_constant(fn, module, it->second);
      const std::vector<TensorType> types = {a_type, fn.values[static_cast<size_t>(w_rows)].type, zero_type};
      const Result<TensorType> result = ops::infer_result_type(ops::OpId::kIntegerMatmul, types, {});
      if (!result.ok() || !(*result == fn.values[static_cast<size_t>(cast.results[0])].type)) continue;
      node_dropped.resize(fn.nodes.size(), false);
      value_dropped.resize(fn.values.size(), false);
      for (Node* gone : {mm, dq_a, dq_w}) {
        node_dropped[static_cast<size_t>(gone - fn.nodes.data())] = true;
        value_dropped[static_cast<size_t>(gone->results[0])] = true;
      }
      Node& replaced = fn.nodes[n];  // fn.nodes did not grow: use_constant adds values only
      replaced.op = ops::OpId::kIntegerMatmul;
      replaced.inputs = {dq_a->inputs[0], w_rows, dq_a->inputs[2]};
      replaced.params.clear();
      ++rewritten;
    }
    node_dropped.resize(fn.nodes.size(), false);
    value_dropped.resize(fn.values.size(), false);
    if (std::count(node_dropped.begin(), node_dropped.end(), true) > 0) drop(fn, node_dropped, std::move(value_dropped));
  }
  return rewritten;
}

}  // namespace hexir::compiler
