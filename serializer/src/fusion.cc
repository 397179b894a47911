#include "fusion.h"

#include <cmath>
#include <cstring>

#include "constant_data.h"

#include <optional>
#include <vector>

namespace hexir::serializer {
namespace {

using ops::OpId;

// Whether the node already carries an epilogue (or a bias, for matmul).
bool has_epilogue(const Node& node) { return node.params.size() > ops::epilogue_offset(node.op); }

// Removes the dropped nodes and values and renumbers what is left, in the
// same order (ids in nodes, arguments, outputs; each result's node and index).
void drop(Function& fn, const std::vector<bool>& node_dropped, const std::vector<bool>& value_dropped) {
  const size_t value_count = fn.values.size();
  std::vector<int> value_id(value_count, -1);
  std::vector<Value> values;
  values.reserve(value_count);
  for (size_t v = 0; v < value_count; ++v)
    if (!value_dropped[v]) {
      value_id[v] = static_cast<int>(values.size());
      values.push_back(std::move(fn.values[v]));
    }
  std::vector<Node> nodes;
  nodes.reserve(fn.nodes.size());
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    if (!node_dropped[n]) nodes.push_back(std::move(fn.nodes[n]));
  auto remap = [&](int& v) { v = value_id[static_cast<size_t>(v)]; };
  for (Node& node : nodes) {
    for (int& v : node.inputs) remap(v);
    for (int& v : node.results) remap(v);
  }
  for (Argument& arg : fn.arguments) remap(arg.value);
  for (int& v : fn.outputs) remap(v);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t r = 0; r < nodes[n].results.size(); ++r) {
      Value& value = values[static_cast<size_t>(nodes[n].results[r])];
      value.node = static_cast<int>(n);
      value.result = static_cast<int>(r);
    }
  fn.values = std::move(values);
  fn.nodes = std::move(nodes);
}

// Per value: how often it is read (a return counts twice: never fused away)
// and by which node, for "exactly one node reads it once".
struct Readers {
  std::vector<int> reads, reader;
  explicit Readers(const Function& fn) : reads(fn.values.size(), 0), reader(fn.values.size(), -1) {
    for (size_t n = 0; n < fn.nodes.size(); ++n)
      for (int in : fn.nodes[n].inputs) {
        ++reads[static_cast<size_t>(in)];
        reader[static_cast<size_t>(in)] = static_cast<int>(n);
      }
    for (int out : fn.outputs) reads[static_cast<size_t>(out)] += 2;
  }
  int sole(int v) const { return reads[static_cast<size_t>(v)] == 1 ? reader[static_cast<size_t>(v)] : -1; }
};

}  // namespace

size_t fuse_epilogues(Function& fn) {
  const size_t value_count = fn.values.size();
  const Readers readers(fn);
  auto sole_reader = [&](int v) { return readers.sole(v); };
  std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(value_count, false);
  size_t removed = 0;
  // Node `n` takes over node `j`'s result; `j` and `n`'s old result go.
  auto absorb = [&](size_t n, int j) {
    Node& node = fn.nodes[n];
    value_dropped[static_cast<size_t>(node.results[0])] = true;
    node.results = fn.nodes[static_cast<size_t>(j)].results;
    node_dropped[static_cast<size_t>(j)] = true;
    ++removed;
  };
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    Node& node = fn.nodes[n];
    if (node_dropped[n] || (node.op != OpId::kConv2d && node.op != OpId::kMatmul && node.op != OpId::kAdd) ||
        has_epilogue(node) || node.results.size() != 1 || fn.values[static_cast<size_t>(node.results[0])].type.dtype != DType::kF32)
      continue;
    // matmul + add(constant f32[n]): the bias (b needs its columns: rank >= 2).
    if (node.op == OpId::kMatmul && node.inputs.size() == 2 &&
        fn.values[static_cast<size_t>(node.inputs[1])].type.rank() >= 2) {
      const int v = node.results[0];
      const int j = sole_reader(v);
      if (j >= 0 && fn.nodes[static_cast<size_t>(j)].op == OpId::kAdd) {
        const Node& add = fn.nodes[static_cast<size_t>(j)];
        const int other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
        const Value& bias = fn.values[static_cast<size_t>(other)];
        const TensorType& result = fn.values[static_cast<size_t>(v)].type;
        const TensorType column_bias{DType::kF32, {result.dims.empty() ? 0 : result.dims.back()}};
        if (other != v && bias.kind == ValueKind::kConstant && bias.type == column_bias &&
            fn.values[static_cast<size_t>(add.results[0])].type == result) {
          node.inputs.push_back(other);
          absorb(n, j);
        }
      }
    }
    // Then an activation.
    const int v = node.results[0];
    const int j = sole_reader(v);
    if (j < 0) continue;
    const Node& act = fn.nodes[static_cast<size_t>(j)];
    if (act.inputs.size() != 1 || act.results.size() != 1) continue;
    if (std::optional<std::vector<int64_t>> words = ops::epilogue_words(act.op, act.params)) {
      // A matmul without a bias or an add has no words yet; a conv2d has its nine.
      node.params.insert(node.params.end(), words->begin(), words->end());
      absorb(n, j);
    }
  }
  if (removed > 0) drop(fn, node_dropped, value_dropped);
  return removed;
}

namespace {

// The value of a one-element f32 constant (any rank), or nullopt.
std::optional<float> scalar_constant(const Module& module, const Function& fn, int v) {
  const Value& value = fn.values[static_cast<size_t>(v)];
  if (value.kind != ValueKind::kConstant || value.type.dtype != DType::kF32 || value.byte_size != 4)
    return std::nullopt;
  std::vector<uint8_t> bytes;
  const Status read = for_each_chunk(module.constants[static_cast<size_t>(value.constant)],
                                     [&](std::span<const uint8_t> chunk) {
                                       bytes.insert(bytes.end(), chunk.begin(), chunk.end());
                                       return ok_status();
                                     });
  if (!read.ok() || bytes.size() != 4) return std::nullopt;
  float f;
  std::memcpy(&f, bytes.data(), 4);
  return f;
}

bool near(std::optional<float> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

}  // namespace

size_t recognize_exported_gelu(Module& module) {
  size_t found = 0;
  for (Function& fn : module.functions) {
    size_t found_here = 0;
    const Readers readers(fn);
    std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
    auto node_of = [&](int v) -> const Node* {
      const Value& value = fn.values[static_cast<size_t>(v)];
      return value.kind == ValueKind::kResult && value.node >= 0 ? &fn.nodes[static_cast<size_t>(value.node)]
                                                                 : nullptr;
    };
    // For a binary node with a scalar constant on one side: the other operand.
    auto other_than_scalar = [&](const Node& node, double want) -> int {
      if (node.inputs.size() != 2) return -1;
      if (near(scalar_constant(module, fn, node.inputs[1]), want)) return node.inputs[0];
      if (node.op != OpId::kDiv && near(scalar_constant(module, fn, node.inputs[0]), want)) return node.inputs[1];
      return -1;
    };
    for (size_t n = 0; n < fn.nodes.size(); ++n) {
      const Node& erf = fn.nodes[n];
      if (erf.op != OpId::kErf || node_dropped[n]) continue;
      // t = x / sqrt(2) (or x * 1/sqrt(2)), read only by the erf.
      const int t = erf.inputs[0];
      const Node* scale = node_of(t);
      if (!scale || readers.sole(t) != static_cast<int>(n)) continue;
      const int x = scale->op == OpId::kDiv   ? other_than_scalar(*scale, std::sqrt(2.0))
                    : scale->op == OpId::kMul ? other_than_scalar(*scale, std::sqrt(0.5))
                                              : -1;
      if (x < 0) continue;
      const TensorType& type = fn.values[static_cast<size_t>(x)].type;
      // a = erf + 1.
      const int e = erf.results[0];
      const int add_node = readers.sole(e);
      if (add_node < 0 || fn.nodes[static_cast<size_t>(add_node)].op != OpId::kAdd) continue;
      const Node& add = fn.nodes[static_cast<size_t>(add_node)];
      if (other_than_scalar(add, 1.0) != e) continue;
      // Then x * a * 0.5 in either order: (x * a) * 0.5, or (x * 0.5) * a.
      const int a = add.results[0];
      const int mul1_node = readers.sole(a);
      if (mul1_node < 0 || fn.nodes[static_cast<size_t>(mul1_node)].op != OpId::kMul) continue;
      const Node& mul1 = fn.nodes[static_cast<size_t>(mul1_node)];
      const int partner = mul1.inputs[0] == a ? mul1.inputs[1] : mul1.inputs[0];
      std::vector<int> nodes{static_cast<int>(fn.nodes.size()), static_cast<int>(n), add_node, mul1_node};
      int result = -1;
      if (partner == x) {  // (x * a) * 0.5
        const int m = mul1.results[0];
        const int mul2_node = readers.sole(m);
        if (mul2_node < 0 || fn.nodes[static_cast<size_t>(mul2_node)].op != OpId::kMul) continue;
        const Node& mul2 = fn.nodes[static_cast<size_t>(mul2_node)];
        if (other_than_scalar(mul2, 0.5) != m) continue;
        nodes.push_back(mul2_node);
        result = mul2.results[0];
      } else {  // (x * 0.5) * a: the half is read only here
        const Node* half = node_of(partner);
        if (!half || half->op != OpId::kMul || readers.sole(partner) != mul1_node ||
            other_than_scalar(*half, 0.5) != x)
          continue;
        nodes.push_back(fn.values[static_cast<size_t>(partner)].node);
        result = mul1.results[0];
      }
      if (!(fn.values[static_cast<size_t>(result)].type == type)) continue;
      nodes[0] = fn.values[static_cast<size_t>(t)].node;  // the scale node
      bool taken = false;  // by a GELU found before (patterns never share nodes, but be sure)
      for (int k : nodes) taken |= node_dropped[static_cast<size_t>(k)];
      if (taken || fn.nodes[static_cast<size_t>(nodes[0])].op == OpId::kGelu) continue;
      // The scale node becomes gelu(x) writing the result; the others go.
      Node& gelu = fn.nodes[static_cast<size_t>(nodes[0])];
      for (size_t k = 1; k < nodes.size(); ++k) node_dropped[static_cast<size_t>(nodes[k])] = true;
      for (size_t k = 0; k < nodes.size(); ++k)
        for (int r : fn.nodes[static_cast<size_t>(nodes[k])].results)
          if (r != result) value_dropped[static_cast<size_t>(r)] = true;
      gelu.op = OpId::kGelu;
      gelu.inputs = {x};
      gelu.params = {0};
      gelu.results = {result};
      ++found_here;
    }
    if (found_here > 0) drop(fn, node_dropped, value_dropped);
    found += found_here;
  }
  return found;
}

size_t fuse_epilogues(Module& module) {
  size_t removed = 0;
  for (Function& fn : module.functions) removed += fuse_epilogues(fn);
  return removed;
}

}  // namespace hexir::serializer
