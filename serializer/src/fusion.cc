#include "fusion.h"

#include <optional>
#include <vector>

namespace hexir::serializer {
namespace {

using ops::OpId;

// Whether the node already carries an epilogue (or a bias, for matmul).
bool has_epilogue(const Node& node) { return node.params.size() > ops::epilogue_offset(node.op); }

}  // namespace

size_t fuse_epilogues(Function& fn) {
  const size_t value_count = fn.values.size();
  // Per value: how often it is read (a return counts as a read) and by which
  // node, when exactly one node reads it once.
  std::vector<int> reads(value_count, 0), reader(value_count, -1);
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    for (int in : fn.nodes[n].inputs) {
      ++reads[static_cast<size_t>(in)];
      reader[static_cast<size_t>(in)] = static_cast<int>(n);
    }
  for (int out : fn.outputs) reads[static_cast<size_t>(out)] += 2;  // never fused away
  auto sole_reader = [&](int v) { return reads[static_cast<size_t>(v)] == 1 ? reader[static_cast<size_t>(v)] : -1; };

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
    if (node_dropped[n] || (node.op != OpId::kConv2d && node.op != OpId::kMatmul) || has_epilogue(node) ||
        node.results.size() != 1)
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
      // A matmul without a bias has no words yet; a conv2d has its nine.
      node.params.insert(node.params.end(), words->begin(), words->end());
      absorb(n, j);
    }
  }
  if (removed == 0) return 0;

  // Renumber what is left, in the same order.
  std::vector<int> value_id(value_count, -1);
  std::vector<Value> values;
  values.reserve(value_count);
  for (size_t v = 0; v < value_count; ++v)
    if (!value_dropped[v]) {
      value_id[v] = static_cast<int>(values.size());
      values.push_back(std::move(fn.values[v]));
    }
  std::vector<Node> nodes;
  nodes.reserve(fn.nodes.size() - removed);
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    if (!node_dropped[n]) nodes.push_back(std::move(fn.nodes[n]));
  auto remap = [&](int& v) { v = value_id[static_cast<size_t>(v)]; };
  for (Node& node : nodes) {
    for (int& v : node.inputs) remap(v);
    for (int& v : node.results) remap(v);
  }
  for (Argument& arg : fn.arguments) remap(arg.value);
  for (int& v : fn.outputs) remap(v);
  for (Value& value : values)
    if (value.kind == ValueKind::kResult && value.node >= 0) value.node = -1;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t r = 0; r < nodes[n].results.size(); ++r) {
      Value& value = values[static_cast<size_t>(nodes[n].results[r])];
      value.node = static_cast<int>(n);
      value.result = static_cast<int>(r);
    }
  fn.values = std::move(values);
  fn.nodes = std::move(nodes);
  return removed;
}

size_t fuse_epilogues(Module& module) {
  size_t removed = 0;
  for (Function& fn : module.functions) removed += fuse_epilogues(fn);
  return removed;
}

}  // namespace hexir::serializer
