#include "passes/fusion.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <set>
#include <unordered_set>

#include "ir/constant_data.h"
#include "passes/donation.h"

#include <optional>
#include <vector>

namespace hexir::compiler {
namespace {

using ops::OpId;

// Whether the node already carries an epilogue (or a bias, for matmul).
bool has_epilogue(const Node& node) {
  // conv2d's channels-last word may follow its own words without an epilogue.
  const size_t own = ops::epilogue_offset(node.op) + (node.op == ops::OpId::kConv2d && ops::conv2d_channels_last(node.params) ? 1 : 0);
  return node.params.size() > own;
}

}  // namespace

Node op_node(ops::OpId op, std::vector<int> inputs, int result, std::vector<int64_t> params, const Location& loc) {
  Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.results = {result};
  node.params = std::move(params);
  node.loc = loc;
  return node;
}

int add_constant(Module& module, const std::string& base_name, TensorType type, ConstantSource source) {
  std::string name = base_name;
  for (int suffix = 1; std::any_of(module.constants.begin(), module.constants.end(),
                                   [&](const Constant& c) { return c.name == name; });
       ++suffix)
    name = base_name + "." + std::to_string(suffix);
  Constant c;
  c.name = std::move(name);
  c.byte_size = *byte_size(type);
  c.type = std::move(type);
  c.source = std::move(source);
  module.constants.push_back(std::move(c));
  return static_cast<int>(module.constants.size()) - 1;
}

int use_constant(Function& fn, const Module& module, int constant) {
  const Constant& c = module.constants[static_cast<size_t>(constant)];
  Value v;
  v.name = c.name;
  v.type = c.type;
  v.byte_size = c.byte_size;
  v.kind = ValueKind::kConstant;
  v.constant = constant;
  fn.values.push_back(std::move(v));
  return static_cast<int>(fn.values.size()) - 1;
}

ValueUses value_uses(const Function& fn) {
  ValueUses u{std::vector<int>(fn.values.size(), 0), std::vector<int>(fn.values.size(), -1)};
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    for (int in : fn.nodes[n].inputs) ++u.readers[static_cast<size_t>(in)];
    for (int r : fn.nodes[n].results) u.writer[static_cast<size_t>(r)] = static_cast<int>(n);
  }
  for (int out : fn.outputs) u.readers[static_cast<size_t>(out)] += 2;
  return u;
}

void renumber_nodes(Function& fn, size_t original_count, const std::vector<int64_t>& new_index) {
  for (Node& node : fn.nodes) {
    if (node.kind == NodeKind::kOp) continue;
    for (size_t p = node.kind == NodeKind::kLoopBegin ? 1 : 0; p < node.params.size(); ++p)
      if (node.params[p] >= 0 && static_cast<size_t>(node.params[p]) < original_count)
        node.params[p] = new_index[static_cast<size_t>(node.params[p])];
  }
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    for (size_t r = 0; r < fn.nodes[n].results.size(); ++r) {
      Value& value = fn.values[static_cast<size_t>(fn.nodes[n].results[r])];
      value.node = static_cast<int>(n);
      value.result = static_cast<int>(r);
    }
}

void drop(Function& fn, const std::vector<bool>& node_dropped, std::vector<bool> value_dropped) {
  const size_t value_count = fn.values.size();
  std::vector<bool> read(value_count, false);
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    if (!node_dropped[n])
      for (int v : fn.nodes[n].inputs) read[static_cast<size_t>(v)] = true;
  for (int v : fn.outputs) read[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < value_count; ++v)
    if (fn.values[v].kind == ValueKind::kConstant && !read[v]) value_dropped[v] = true;
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
  // Loop markers name each other by node index (graph.h NodeKind).
  std::vector<int64_t> node_id(fn.nodes.size(), -1);
  for (size_t n = 0, kept = 0; n < fn.nodes.size(); ++n)
    if (!node_dropped[n]) node_id[n] = static_cast<int64_t>(kept++);
  for (Node& node : nodes) {
    for (int& v : node.inputs) remap(v);
    for (int& v : node.results) remap(v);
    // Every parameter of a region marker is a node index, but a loop's step (params[0]).
    if (node.kind == NodeKind::kOp) continue;
    for (size_t p = node.kind == NodeKind::kLoopBegin ? 1 : 0; p < node.params.size(); ++p)
      if (node.params[p] >= 0 && static_cast<size_t>(node.params[p]) < node_id.size())
        node.params[p] = node_id[static_cast<size_t>(node.params[p])];
  }
  for (Argument& arg : fn.arguments) remap(arg.value);
  for (int& v : fn.outputs) remap(v);
  for (Value& value : values)  // a bounded value names its extent
    if (value.extent >= 0) remap(value.extent);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t r = 0; r < nodes[n].results.size(); ++r) {
      Value& value = values[static_cast<size_t>(nodes[n].results[r])];
      value.node = static_cast<int>(n);
      value.result = static_cast<int>(r);
    }
  fn.values = std::move(values);
  fn.nodes = std::move(nodes);
}

namespace {

// Per value: how often it is read (a return counts twice: never fused away)
// and by which node, for "exactly one node reads it once".
// A read by a region marker or by a node in another loop body or branch (or
// outside it) counts twice too: a rewrite never moves work into or out of a
// loop or a branch.
struct Readers {
  std::vector<int> reads, reader;
  std::vector<int> region;  // per node: the loop body or branch holding it (its opening node), -1 at the top
  explicit Readers(const Function& fn)
      : reads(fn.values.size(), 0), reader(fn.values.size(), -1), region(innermost_regions(fn)) {
    for (size_t n = 0; n < fn.nodes.size(); ++n)
      for (int in : fn.nodes[n].inputs) {
        const Value& value = fn.values[static_cast<size_t>(in)];
        const bool apart = fn.nodes[n].kind != NodeKind::kOp ||
                           (value.kind == ValueKind::kResult && value.node >= 0 &&
                            (fn.nodes[static_cast<size_t>(value.node)].kind != NodeKind::kOp ||
                             region[static_cast<size_t>(value.node)] != region[n]));
        reads[static_cast<size_t>(in)] += apart ? 2 : 1;
        reader[static_cast<size_t>(in)] = static_cast<int>(n);
      }
    for (int out : fn.outputs) reads[static_cast<size_t>(out)] += 2;
  }
  int sole(int v) const { return reads[static_cast<size_t>(v)] == 1 ? reader[static_cast<size_t>(v)] : -1; }
};

}  // namespace

namespace {

// The value of a one-element f32 constant (any rank), or nullopt.
std::optional<float> scalar_constant(const Module& module, const Function& fn, int v);

// fuse_epilogues of one function (fuse_function): the rewrites as steps
// over the nodes, marking what goes; drop() then removes it.
class EpilogueFusion {
 public:
  // `module`: null, or the module whose constants the affine epilogue reads.
  EpilogueFusion(const Module* module, Function& fn)
      : module_(module),
        fn_(fn),
        readers_(fn),
        node_dropped_(fn.nodes.size(), false),
        value_dropped_(fn.values.size(), false) {}

  // Returns the number of nodes removed.
  size_t run() {
    fold_transposes_into_matmuls();
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      Node& node = fn_.nodes[n];
      const bool elementwise = node.op == OpId::kAdd || node.op == OpId::kMul;
      if (node_dropped_[n] || (node.op != OpId::kConv2d && node.op != OpId::kMatmul && !elementwise) ||
          has_epilogue(node) || node.results.size() != 1 ||
          fn_.values[static_cast<size_t>(node.results[0])].type.dtype != DType::kF32)
        continue;
      fuse_matmul_bias(n);
      fuse_conv_residual(n);
      // Then an activation, or (add, mul) an affine epilogue.
      const int j = sole_reader(node.results[0]);
      if (j < 0) continue;
      const Node& act = fn_.nodes[static_cast<size_t>(j)];
      if (act.inputs.size() == 1 && act.results.size() == 1) {
        fuse_activation(n, j);
        continue;
      }
      if (elementwise && module_ != nullptr) fuse_affine(n);
    }
    fold_result_copies();
    if (removed_ > 0) drop(fn_, node_dropped_, value_dropped_);
    return removed_;
  }

 private:
  int sole_reader(int v) const { return readers_.sole(v); }

  // Node `n` takes over node `j`'s result; `j` and `n`'s old result go.
  void absorb(size_t n, int j) {
    Node& node = fn_.nodes[n];
    value_dropped_[static_cast<size_t>(node.results[0])] = true;
    node.results = fn_.nodes[static_cast<size_t>(j)].results;
    node_dropped_[static_cast<size_t>(j)] = true;
    ++removed_;
  }

  // A transpose of the last two dims that only a matmul reads, as its b:
  // the matmul reads the transpose's input as b stored [n, k] (transpose_b)
  // and the copy goes (attention's K^T; a constant too large to fold, which
  // the CPU then reads in place or packs once at prepare).
  void fold_transposes_into_matmuls() {
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      Node& node = fn_.nodes[n];
      if (node.kind != NodeKind::kOp || node.op != OpId::kMatmul || node.inputs.size() < 2 ||
          node.inputs[0] == node.inputs[1] || !(node.params.empty() || node.params[0] == 0))
        continue;
      const int b = node.inputs[1];
      const Value& bv = fn_.values[static_cast<size_t>(b)];
      if (bv.kind != ValueKind::kResult || bv.node < 0 || sole_reader(b) != static_cast<int>(n)) continue;
      const Node& t = fn_.nodes[static_cast<size_t>(bv.node)];
      const size_t rank = bv.type.rank();
      if (t.kind != NodeKind::kOp || t.op != OpId::kTranspose || rank < 2 || t.params.size() != rank) continue;
      bool swaps_last_two = t.params[rank - 1] == static_cast<int64_t>(rank - 2) &&
                            t.params[rank - 2] == static_cast<int64_t>(rank - 1);
      for (size_t d = 0; swaps_last_two && d + 2 < rank; ++d)
        swaps_last_two = t.params[d] == static_cast<int64_t>(d);
      if (!swaps_last_two) continue;
      node.inputs[1] = t.inputs[0];
      if (node.params.empty()) node.params.push_back(1);
      node.params[0] = 1;
      node_dropped_[static_cast<size_t>(bv.node)] = true;
      value_dropped_[static_cast<size_t>(b)] = true;
      ++removed_;
    }
  }

  // matmul + add(constant f32[n]): the bias (b needs its columns: rank >= 2).
  void fuse_matmul_bias(size_t n) {
    Node& node = fn_.nodes[n];
    if (node.op != OpId::kMatmul || node.inputs.size() != 2 ||
        fn_.values[static_cast<size_t>(node.inputs[1])].type.rank() < 2)
      return;
    const int v = node.results[0];
    const int j = sole_reader(v);
    if (j < 0 || fn_.nodes[static_cast<size_t>(j)].op != OpId::kAdd) return;
    const Node& add = fn_.nodes[static_cast<size_t>(j)];
    const int other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    const Value& bias = fn_.values[static_cast<size_t>(other)];
    const TensorType& result = fn_.values[static_cast<size_t>(v)].type;
    const TensorType column_bias{DType::kF32, {result.dims.empty() ? 0 : result.dims.back()}};
    if (other != v && bias.kind == ValueKind::kConstant && bias.type == column_bias &&
        fn_.values[static_cast<size_t>(add.results[0])].type == result) {
      node.inputs.push_back(other);
      absorb(n, j);
    }
  }

  // conv2d (with its bias) + add(result, r) of the result's type: r becomes
  // its residual, added after the bias (same bits: one add either way). r
  // must be there before the conv2d runs, where the fused node stays.
  void fuse_conv_residual(size_t n) {
    Node& node = fn_.nodes[n];
    if (node.op != OpId::kConv2d || node.inputs.size() != 3) return;
    const int v = node.results[0];
    const int j = sole_reader(v);
    if (j < 0 || fn_.nodes[static_cast<size_t>(j)].op != OpId::kAdd ||
        !fn_.nodes[static_cast<size_t>(j)].params.empty())
      return;
    const Node& add = fn_.nodes[static_cast<size_t>(j)];
    const int other = add.inputs[0] == v ? add.inputs[1] : add.inputs[0];
    const Value& r = fn_.values[static_cast<size_t>(other)];
    const TensorType& result = fn_.values[static_cast<size_t>(v)].type;
    const bool before = r.kind != ValueKind::kResult || (r.node >= 0 && r.node < static_cast<int>(n));
    if (other != v && before && r.type == result &&
        fn_.values[static_cast<size_t>(add.results[0])].type == result &&
        readers_.region[static_cast<size_t>(j)] == readers_.region[n]) {
      node.inputs.push_back(other);
      absorb(n, j);
    }
  }

  // Node n takes the unary node j that alone reads its result as its
  // activation, when ops::epilogue_words accepts it.
  void fuse_activation(size_t n, int j) {
    Node& node = fn_.nodes[n];
    const Node& act = fn_.nodes[static_cast<size_t>(j)];
    if (std::optional<std::vector<int64_t>> words = ops::epilogue_words(act.op, act.params)) {
      // An add or a mul has no words yet; a conv2d has its nine, a matmul its
      // transpose_b (0 when it had none).
      // The words go before a channels-last conv2d's layout word.
      const size_t at = ops::epilogue_offset(node.op);
      node.params.resize(std::max(node.params.size(), at), 0);
      node.params.insert(node.params.begin() + static_cast<std::ptrdiff_t>(at), words->begin(), words->end());
      absorb(n, j);
    }
  }

  // add, mul: then x * a (a mul by a one-element constant), then + b (an
  // add of one): the affine epilogue. The missing step is exact: * 1, + -0.
  void fuse_affine(size_t n) {
    Node& node = fn_.nodes[n];
    float scale = 1.0f, shift = -0.0f;
    int steps = 0;
    for (OpId want : {OpId::kMul, OpId::kAdd}) {
      const int cur = node.results[0];
      const int k = sole_reader(cur);
      if (k < 0) break;
      const Node& next = fn_.nodes[static_cast<size_t>(k)];
      if (next.op != want || next.inputs.size() != 2 || next.results.size() != 1 || !next.params.empty() ||
          !(fn_.values[static_cast<size_t>(next.results[0])].type ==
            fn_.values[static_cast<size_t>(cur)].type))
        continue;
      const int other = next.inputs[0] == cur ? next.inputs[1] : next.inputs[0];
      if (other == cur) continue;
      const std::optional<float> c = scalar_constant(*module_, fn_, other);
      if (!c || !std::isfinite(*c)) continue;
      (want == OpId::kMul ? scale : shift) = *c;
      absorb(n, k);
      ++steps;
    }
    if (steps > 0) {
      const std::vector<int64_t> words{static_cast<int64_t>(ops::Activation::kAffine),
                                       std::bit_cast<int64_t>(static_cast<double>(scale)),
                                       std::bit_cast<int64_t>(static_cast<double>(shift))};
      node.params.insert(node.params.end(), words.begin(), words.end());
    }
  }

  // A copy of a result that nothing else reads (the ONNX front end names an
  // output this way: an Identity, an output renamed): its producer writes the
  // copy's value instead, and the copy goes. Not a view's copy (the view
  // shares storage the copy must not) nor a multi-result producer's.
  void fold_result_copies() {
    std::vector<int> producer(fn_.values.size(), -1);  // after the rewrites above
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (!node_dropped_[n])
        for (int r : fn_.nodes[n].results) producer[static_cast<size_t>(r)] = static_cast<int>(n);
    for (size_t j = 0; j < fn_.nodes.size(); ++j) {
      const Node& copy = fn_.nodes[j];
      if (node_dropped_[j] || copy.kind != NodeKind::kOp || copy.op != OpId::kCopy ||
          copy.inputs.size() != 1 || copy.results.size() != 1)
        continue;
      const int v = copy.inputs[0];
      const int n = producer[static_cast<size_t>(v)];
      if (n < 0 || fn_.values[static_cast<size_t>(v)].kind != ValueKind::kResult ||
          sole_reader(v) != static_cast<int>(j))
        continue;
      const Node& from = fn_.nodes[static_cast<size_t>(n)];
      if (from.kind != NodeKind::kOp || from.results.size() != 1 || ops::op_def(from.op).is_view ||
          !(fn_.values[static_cast<size_t>(copy.results[0])].type == fn_.values[static_cast<size_t>(v)].type))
        continue;
      absorb(static_cast<size_t>(n), static_cast<int>(j));
      producer[static_cast<size_t>(copy.results[0])] = n;
    }
  }

  const Module* module_;
  Function& fn_;
  const Readers readers_;
  std::vector<bool> node_dropped_, value_dropped_;
  size_t removed_ = 0;
};

// x * sigmoid(x), the sigmoid read by that mul alone (how torch exports
// SiLU / Swish; EfficientNet has 49): one silu, one pass over the map where
// the sigmoid and the mul made two and read x twice (EfficientNet-B0 17.1 ->
// 16.4 ms). After the epilogue fusion, so the silu stays an operator of
// its own: as a convolution's epilogue it ran per register tile and per
// depthwise block, rows of 7 to 32 (18.2 -> 19.5 ms). The mul's node becomes
// the silu; the sigmoid goes.
size_t fold_silu(Function& fn) {
  const Readers readers(fn);
  std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
  size_t removed = 0;
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    Node& mul = fn.nodes[n];
    if (mul.kind != NodeKind::kOp || mul.op != OpId::kMul || !mul.params.empty() || mul.inputs.size() != 2 ||
        mul.results.size() != 1)
      continue;
    for (int side = 0; side < 2; ++side) {
      const int s = mul.inputs[static_cast<size_t>(side)], x = mul.inputs[static_cast<size_t>(1 - side)];
      const Value& sv = fn.values[static_cast<size_t>(s)];
      if (sv.kind != ValueKind::kResult || sv.node < 0 || readers.sole(s) != static_cast<int>(n)) continue;
      const Node& sig = fn.nodes[static_cast<size_t>(sv.node)];
      if (sig.kind != NodeKind::kOp || sig.op != OpId::kSigmoid || sig.inputs.size() != 1 || sig.inputs[0] != x ||
          !sig.params.empty() || readers.region[static_cast<size_t>(sv.node)] != readers.region[n])
        continue;
      const TensorType& type = fn.values[static_cast<size_t>(x)].type;
      if (type.dtype != DType::kF32 || !(type == sv.type) ||
          !(type == fn.values[static_cast<size_t>(mul.results[0])].type))
        continue;
      mul.op = OpId::kSilu;
      mul.inputs = {x};
      node_dropped[static_cast<size_t>(sv.node)] = true;
      value_dropped[static_cast<size_t>(s)] = true;
      ++removed;
      break;
    }
  }
  if (removed > 0) drop(fn, node_dropped, value_dropped);
  return removed;
}

// A pad of zeros around the spatial dims read only by an average pool
// without pads of its own: the pool's pads, counted (count_include_pad = 1
// divides every window by its full size, as the explicit zeros did). How
// torch exports avg_pool2d(padding=p) (Inception-v3's nine): the pad was a
// pass over the map and, being NCHW, cut the channels-last region around it
// (two conversions each: 47 copies per invoke).
size_t fold_pad_into_average_pool(Function& fn) {
  constexpr int64_t kPadConstantMode = 0;  // ops' pad mode words: constant, reflect, edge, wrap
  const Readers readers(fn);
  std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
  size_t removed = 0;
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    Node& pool = fn.nodes[n];
    // [kh, kw, sh, sw, pad t, l, b, r, dh, dw, ceil_mode, count_include_pad]
    if (pool.kind != NodeKind::kOp || pool.op != OpId::kAveragePool || pool.params.size() != 12 ||
        pool.inputs.size() != 1 || pool.results.size() != 1)
      continue;
    if (pool.params[4] != 0 || pool.params[5] != 0 || pool.params[6] != 0 || pool.params[7] != 0 ||
        pool.params[10] != 0)
      continue;
    const int v = pool.inputs[0];
    const Value& padded = fn.values[static_cast<size_t>(v)];
    if (padded.kind != ValueKind::kResult || padded.node < 0 || readers.sole(v) != static_cast<int>(n) ||
        readers.region[static_cast<size_t>(padded.node)] != readers.region[n])
      continue;
    const Node& pad = fn.nodes[static_cast<size_t>(padded.node)];
    // [mode, value word, begin x 4, end x 4]; the value word 0: +0.0
    if (pad.kind != NodeKind::kOp || pad.op != OpId::kPad || pad.inputs.size() != 1 || pad.params.size() != 10 ||
        pad.params[0] != kPadConstantMode || pad.params[1] != 0 || padded.type.dtype != DType::kF32 ||
        padded.type.rank() != 4)
      continue;
    const std::vector<int64_t>& q = pad.params;
    if (q[2] != 0 || q[3] != 0 || q[6] != 0 || q[7] != 0 || q[4] < 0 || q[5] < 0 || q[8] < 0 || q[9] < 0) continue;
    pool.inputs = {pad.inputs[0]};
    pool.params[4] = q[4], pool.params[5] = q[5], pool.params[6] = q[8], pool.params[7] = q[9];
    pool.params[11] = 1;
    node_dropped[static_cast<size_t>(padded.node)] = true;
    value_dropped[static_cast<size_t>(v)] = true;
    ++removed;
  }
  if (removed > 0) drop(fn, node_dropped, value_dropped);
  return removed;
}

// fuse_epilogues of one function; with the module, add and mul also take a
// following mul by and add of one-element constants as an affine epilogue.
// Then x * sigmoid(x) as silu, and zero pads into the average pools after them.
size_t fuse_function(const Module* module, Function& fn) {
  const size_t fused = EpilogueFusion(module, fn).run();
  return fused + fold_silu(fn) + fold_pad_into_average_pool(fn);
}

}  // namespace

size_t fuse_epilogues(Function& fn) { return fuse_function(nullptr, fn); }

namespace {

std::optional<float> scalar_constant(const Module& module, const Function& fn, int v) {
  const Value& value = fn.values[static_cast<size_t>(v)];
  if (value.kind != ValueKind::kConstant || value.type.dtype != DType::kF32 || value.byte_size != 4)
    return std::nullopt;
  const Result<std::vector<uint8_t>> bytes = constant_bytes(module.constants[static_cast<size_t>(value.constant)]);
  if (!bytes.ok() || bytes->size() != 4) return std::nullopt;
  float f;
  std::memcpy(&f, bytes->data(), 4);
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

size_t recognize_exported_hard_swish(Module& module) {
  size_t found = 0;
  for (Function& fn : module.functions) {
    size_t found_here = 0;
    const Readers readers(fn);
    std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
    auto node_of = [&](int v) -> int {
      const Value& value = fn.values[static_cast<size_t>(v)];
      return value.kind == ValueKind::kResult ? value.node : -1;
    };
    // For a binary node with a scalar constant on one side (the right one for div): the other operand.
    auto other_than_scalar = [&](const Node& node, double want) -> int {
      if (node.inputs.size() != 2) return -1;
      if (near(scalar_constant(module, fn, node.inputs[1]), want)) return node.inputs[0];
      if (node.op != OpId::kDiv && near(scalar_constant(module, fn, node.inputs[0]), want)) return node.inputs[1];
      return -1;
    };
    // v / 6 or v * (1/6), read only where it is: the result, or -1.
    auto sixth_of = [&](int v) -> int {
      const int r = readers.sole(v);
      if (r < 0) return -1;
      const Node& node = fn.nodes[static_cast<size_t>(r)];
      const int other = node.op == OpId::kDiv   ? other_than_scalar(node, 6.0)
                        : node.op == OpId::kMul ? other_than_scalar(node, 1.0 / 6.0)
                                                : -1;
      return other == v ? node.results[0] : -1;
    };
    for (size_t n = 0; n < fn.nodes.size(); ++n) {
      const Node& clip = fn.nodes[n];
      if (clip.op != OpId::kClip || node_dropped[n] || clip.params.size() != 2 ||
          std::bit_cast<double>(clip.params[0]) != 0.0 || std::bit_cast<double>(clip.params[1]) != 6.0)
        continue;
      // a = x + 3, read only by the clip.
      const int a = clip.inputs[0];
      const int add_node = node_of(a);
      if (add_node < 0 || readers.sole(a) != static_cast<int>(n) ||
          fn.nodes[static_cast<size_t>(add_node)].op != OpId::kAdd)
        continue;
      const int x = other_than_scalar(fn.nodes[static_cast<size_t>(add_node)], 3.0);
      if (x < 0 || fn.values[static_cast<size_t>(x)].type.dtype != DType::kF32) continue;
      const TensorType& type = fn.values[static_cast<size_t>(x)].type;
      const int c = clip.results[0];
      const int c_reader = readers.sole(c);
      if (c_reader < 0) continue;
      std::vector<int> nodes{add_node, static_cast<int>(n), c_reader};
      OpId op = OpId::kHardSwish;
      int result = -1;
      const Node& next = fn.nodes[static_cast<size_t>(c_reader)];
      if (next.op == OpId::kMul && next.inputs.size() == 2 &&
          ((next.inputs[0] == x && next.inputs[1] == c) || (next.inputs[0] == c && next.inputs[1] == x))) {
        // (x * c) / 6
        result = sixth_of(next.results[0]);
        if (result < 0) continue;
        nodes.push_back(fn.values[static_cast<size_t>(result)].node);
      } else {
        // h = c / 6: the hard sigmoid; x * h is the hard swish.
        const int h = sixth_of(c);
        if (h < 0) continue;
        result = h;
        const int m = readers.sole(h);
        const Node* mul = m >= 0 ? &fn.nodes[static_cast<size_t>(m)] : nullptr;
        if (mul && mul->op == OpId::kMul && mul->inputs.size() == 2 &&
            ((mul->inputs[0] == x && mul->inputs[1] == h) || (mul->inputs[0] == h && mul->inputs[1] == x))) {
          result = mul->results[0];
          nodes.push_back(m);
        } else {
          op = OpId::kHardSigmoid;
        }
      }
      if (!(fn.values[static_cast<size_t>(result)].type == type)) continue;
      bool taken = false;
      for (int k : nodes) taken |= node_dropped[static_cast<size_t>(k)];
      if (taken) continue;
      // The add becomes the operator writing the result; the others go.
      for (size_t k = 1; k < nodes.size(); ++k) node_dropped[static_cast<size_t>(nodes[k])] = true;
      for (int k : nodes)
        for (int r : fn.nodes[static_cast<size_t>(k)].results)
          if (r != result) value_dropped[static_cast<size_t>(r)] = true;
      Node& node = fn.nodes[static_cast<size_t>(add_node)];
      node.op = op;
      node.inputs = {x};
      node.params.clear();
      if (op == OpId::kHardSigmoid)
        node.params = {std::bit_cast<int64_t>(static_cast<double>(1.0f / 6.0f)), std::bit_cast<int64_t>(0.5)};
      node.results = {result};
      ++found_here;
    }
    if (found_here > 0) drop(fn, node_dropped, value_dropped);
    found += found_here;
  }
  return found;
}

namespace {

// Weights bigger than this are never rewritten (a fold holds one copy).
constexpr uint64_t kMaxFoldedBytes = uint64_t{64} << 20;

// All of a constant's elements as floats (f32, at most kMaxFoldedBytes), or nullopt.
std::optional<std::vector<float>> constant_floats(const Module& module, const Value& value) {
  if (value.kind != ValueKind::kConstant || value.type.dtype != DType::kF32) return std::nullopt;
  const Constant& constant = module.constants[static_cast<size_t>(value.constant)];
  Result<uint64_t> bytes = byte_size(constant.type);
  if (!bytes.ok() || *bytes != constant.byte_size || *bytes > kMaxFoldedBytes || !(constant.type == value.type))
    return std::nullopt;
  const Result<std::vector<uint8_t>> read = constant_bytes(constant);
  if (!read.ok()) return std::nullopt;
  std::vector<float> out(*bytes / 4);
  std::memcpy(out.data(), read->data(), *bytes);
  return out;
}

void set_floats(Constant& constant, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  constant.byte_size = bytes.size();
  constant.source = InlineBytes{std::move(bytes)};
}

// The `channels` factors of a constant that broadcasts along axis 1 of a
// rank-4 result only ([], [1], [K,1,1], [1,K,1,1], ...), every one finite; nullopt otherwise.
std::optional<std::vector<float>> channel_factors(const Module& module, const Value& value, int64_t channels) {
  const std::vector<int64_t>& d = value.type.dims;
  if (d.size() > 4) return std::nullopt;
  std::vector<int64_t> dims(4 - d.size(), 1);
  dims.insert(dims.end(), d.begin(), d.end());
  if (dims[0] != 1 || dims[2] != 1 || dims[3] != 1 || (dims[1] != 1 && dims[1] != channels)) return std::nullopt;
  std::optional<std::vector<float>> f = constant_floats(module, value);
  if (!f || f->empty()) return std::nullopt;
  for (float v : *f)
    if (!std::isfinite(v)) return std::nullopt;
  if (f->size() == 1) f->assign(static_cast<size_t>(channels), (*f)[0]);
  return f;
}

// What the folds share across a module's functions, computed once (per
// function, a module of 40,000 functions scanned every function 40,000
// times): how many values use each constant, and the constants' names.
class ModuleConstants {
 public:
  explicit ModuleConstants(const Module& module) : module_(module), uses_(module.constants.size(), 0) {
    for (const Function& fn : module.functions) count_uses(fn, 1);
  }

  int uses(int constant) const { return uses_[static_cast<size_t>(constant)]; }
  // Adds (sign 1) or removes (-1) the constant uses of `fn`'s values.
  void count_uses(const Function& fn, int sign) {
    values_visited_ += fn.values.size();
    for (const Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) uses_[static_cast<size_t>(v.constant)] += sign;
  }
  // A new constant's name: `base`, or `base.N` when taken; then taken.
  std::string unique_name(const std::string& base) {
    if (names_.empty())
      for (const Constant& c : module_.constants) names_.insert(c.name);
    std::string name = base;
    for (int i = 1; names_.count(name); ++i) name = base + "." + std::to_string(i);
    names_.insert(name);
    return name;
  }
  // A constant added for one value of the function being folded.
  void push_constant() { uses_.push_back(1); }
  uint64_t values_visited() const { return values_visited_; }

 private:
  const Module& module_;
  std::vector<int> uses_;
  std::unordered_set<std::string> names_;  // filled on first use
  uint64_t values_visited_ = 0;
};

// The rewrites of one function that change a convolution's constants:
// fold_channel_affine's (after) and fold_input_affine's (before).
class ConvFolder {
 public:
  ConvFolder(Module& module, Function& fn, ModuleConstants& constants)
      : module_(module),
        fn_(fn),
        readers_(fn),
        constants_(constants),
        node_dropped_(fn.nodes.size(), false),
        value_dropped_(fn.values.size(), false) {}

  size_t after() {
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      if (!foldable_conv(n)) continue;
      while (fold_after(n)) {
      }
    }
    return finish();
  }

  size_t before() {
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (foldable_conv(n)) fold_before(n);
    return finish();
  }

  size_t affine_as_conv() {
    for (size_t n = 0; n < fn_.nodes.size(); ++n) mul_add_as_conv(n);
    return finish();
  }

  // Rewrites constants and params in place: no node is dropped.
  size_t trim_taps() {
    size_t trimmed = 0;
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (trim_dead_taps(n)) ++trimmed;
    return trimmed;
  }

 private:
  Value& value(int v) { return fn_.values[static_cast<size_t>(v)]; }
  int reads(int v) const { return readers_.reads[static_cast<size_t>(v)]; }
  int sole(int v) const { return readers_.sole(v); }

  // A value of a constant that this one read is all the module reads of it.
  bool owned_constant(int v) const {
    const Value& val = fn_.values[static_cast<size_t>(v)];
    return val.kind == ValueKind::kConstant && reads(v) == 1 && constants_.uses(val.constant) == 1;
  }

  // A conv2d without an epilogue, f32, whose weights (and bias) are constants it alone reads.
  bool foldable_conv(size_t n) {
    const Node& node = fn_.nodes[n];
    if (node_dropped_[n] || node.op != OpId::kConv2d || has_epilogue(node) || node.results.size() != 1 ||
        ops::conv2d_channels_last(node.params))  // the folds read channels at dim 1
      return false;
    const Value& out = fn_.values[static_cast<size_t>(node.results[0])];
    if (out.type.dtype != DType::kF32 || out.type.rank() != 4) return false;
    for (size_t i = 1; i < node.inputs.size(); ++i)
      if (!owned_constant(node.inputs[i])) return false;
    return true;
  }

  // The other operand of binary `node` when one of them is `v`.
  static int other_operand(const Node& node, int v) {
    if (node.inputs.size() != 2) return -1;
    if (node.inputs[0] == v) return node.inputs[1];
    if (node.inputs[1] == v) return node.inputs[0];
    return -1;
  }

  // One read of value `v` is gone (drop removes a constant use nobody reads).
  void release(int v) { --readers_.reads[static_cast<size_t>(v)]; }

  // conv2d `n` followed by a mul or an add of per-output-channel constants.
  bool fold_after(size_t n) {
    Node& conv = fn_.nodes[n];
    const int v = conv.results[0];
    const int j = sole(v);
    if (j < 0) return false;
    const Node& next = fn_.nodes[static_cast<size_t>(j)];
    if ((next.op != OpId::kMul && next.op != OpId::kAdd) || next.results.size() != 1) return false;
    const int c = other_operand(next, v);
    if (c < 0 || c == v || !(value(next.results[0]).type == value(v).type)) return false;
    const int64_t channels = value(v).type.dims[1];
    std::optional<std::vector<float>> f = channel_factors(module_, value(c), channels);
    if (!f) return false;
    const Value& w_value = value(conv.inputs[1]);
    std::optional<std::vector<float>> w = constant_floats(module_, w_value);
    if (!w) return false;
    const bool has_bias = conv.inputs.size() == 3;
    std::optional<std::vector<float>> bias;
    if (has_bias) {
      bias = constant_floats(module_, value(conv.inputs[2]));
      if (!bias || bias->size() != static_cast<size_t>(channels)) return false;
    }
    if (next.op == OpId::kMul) {
      const size_t per_channel = w->size() / static_cast<size_t>(channels);
      for (size_t k = 0; k < static_cast<size_t>(channels); ++k)
        for (size_t i = 0; i < per_channel; ++i) (*w)[k * per_channel + i] *= (*f)[k];
      set_floats(module_.constants[static_cast<size_t>(w_value.constant)], *w);
      if (has_bias) {
        for (size_t k = 0; k < bias->size(); ++k) (*bias)[k] *= (*f)[k];
        set_floats(module_.constants[static_cast<size_t>(value(conv.inputs[2]).constant)], *bias);
      }
    } else if (has_bias) {
      for (size_t k = 0; k < bias->size(); ++k) (*bias)[k] += (*f)[k];
      set_floats(module_.constants[static_cast<size_t>(value(conv.inputs[2]).constant)], *bias);
    } else {
      add_bias(n, value(c).name, *f);
    }
    release(c);
    absorb(n, j);
    return true;
  }

  // A new bias constant for conv2d `n` and its value in this function.
  void add_bias(size_t n, std::string base, const std::vector<float>& values) {
    add_input_constant(n, base + ".bias", {static_cast<int64_t>(values.size())}, values);
  }

  // A new f32 constant of `dims` (a unique name from `name`), read by node
  // `n` as its next input.
  void add_input_constant(size_t n, const std::string& name, std::vector<int64_t> dims, const std::vector<float>& values) {
    Constant constant;
    constant.name = constants_.unique_name(name);
    constant.type = TensorType{DType::kF32, std::move(dims)};
    constant.loc = fn_.nodes[n].loc;
    set_floats(constant, values);
    Value v;
    v.name = constant.name;
    v.type = constant.type;
    v.byte_size = constant.byte_size;
    v.kind = ValueKind::kConstant;
    v.constant = static_cast<int>(module_.constants.size());
    v.loc = constant.loc;
    module_.constants.push_back(std::move(constant));
    constants_.push_constant();
    const int id = static_cast<int>(fn_.values.size());
    fn_.values.push_back(std::move(v));
    readers_.reads.push_back(1);
    readers_.reader.push_back(static_cast<int>(n));
    value_dropped_.push_back(false);
    fn_.nodes[n].inputs.push_back(id);
  }

  // conv2d `n` without padding whose input is x * s + t (a mul, an add, or
  // the mul then the add), s and t per input channel.
  void fold_before(size_t n) {
    const std::vector<int64_t>& p = fn_.nodes[n].params;
    if (p[2] != 0 || p[3] != 0 || p[4] != 0 || p[5] != 0) return;
    const int in = fn_.nodes[n].inputs[0];
    if (sole(in) != static_cast<int>(n)) return;
    const TensorType& in_type = value(in).type;
    if (in_type.dtype != DType::kF32 || in_type.rank() != 4) return;
    const int64_t channels = in_type.dims[1];
    // The chain, last node first: up to an add, then a mul.
    std::vector<int> chain;  // node ids
    std::vector<int> factors;  // their constant operands
    int cur = in;
    for (OpId want : {OpId::kAdd, OpId::kMul}) {
      const Value& cv = value(cur);
      if (cv.kind != ValueKind::kResult || cv.node < 0) break;
      const Node& node = fn_.nodes[static_cast<size_t>(cv.node)];
      if (node.op != want || node.inputs.size() != 2 || node.results.size() != 1) continue;
      if (!chain.empty() && sole(cur) != chain.back()) break;
      int c = -1, x = -1;
      for (int side : {0, 1}) {
        const Value& operand = value(node.inputs[static_cast<size_t>(side)]);
        if (operand.kind == ValueKind::kConstant && channel_factors(module_, operand, channels)) {
          c = node.inputs[static_cast<size_t>(side)];
          x = node.inputs[static_cast<size_t>(1 - side)];
          break;
        }
      }
      if (c < 0 || !(value(x).type == in_type)) break;
      chain.push_back(cv.node);
      factors.push_back(c);
      cur = x;
    }
    if (chain.empty()) return;
    const Node& conv_node = fn_.nodes[n];
    const Value& w_value = value(conv_node.inputs[1]);
    std::optional<std::vector<float>> w = constant_floats(module_, w_value);
    if (!w) return;
    const int64_t K = w_value.type.dims[0], Cg = w_value.type.dims[1];
    const int64_t taps = w_value.type.dims[2] * w_value.type.dims[3];
    const int64_t groups = p[8];
    const int64_t k_per_group = K / groups;
    std::vector<float> scale(static_cast<size_t>(channels), 1.0f), shift(static_cast<size_t>(channels), 0.0f);
    for (size_t i = 0; i < chain.size(); ++i) {
      const std::vector<float> f = *channel_factors(module_, value(factors[i]), channels);
      (fn_.nodes[static_cast<size_t>(chain[i])].op == OpId::kMul ? scale : shift) = f;
    }
    const bool shifts = std::any_of(shift.begin(), shift.end(), [](float t) { return t != 0.0f; });
    std::vector<float> bias(static_cast<size_t>(K), 0.0f);
    if (conv_node.inputs.size() == 3) {
      std::optional<std::vector<float>> b = constant_floats(module_, value(conv_node.inputs[2]));
      if (!b || b->size() != static_cast<size_t>(K)) return;
      bias = *b;
    }
    for (int64_t k = 0; k < K; ++k) {
      const int64_t c0 = (k / k_per_group) * Cg;
      double sum = 0;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t t = 0; t < taps; ++t) {
          float& wt = (*w)[static_cast<size_t>((k * Cg + c) * taps + t)];
          sum += static_cast<double>(wt) * shift[static_cast<size_t>(c0 + c)];
          wt *= scale[static_cast<size_t>(c0 + c)];
        }
      bias[static_cast<size_t>(k)] = static_cast<float>(bias[static_cast<size_t>(k)] + sum);
    }
    set_floats(module_.constants[static_cast<size_t>(w_value.constant)], *w);
    if (conv_node.inputs.size() == 3)
      set_floats(module_.constants[static_cast<size_t>(value(conv_node.inputs[2]).constant)], bias);
    else if (shifts)
      add_bias(n, value(factors[0]).name, bias);
    // The conv reads x; the chain's nodes and results go.
    for (size_t i = 0; i < chain.size(); ++i) {
      node_dropped_[static_cast<size_t>(chain[i])] = true;
      value_dropped_[static_cast<size_t>(fn_.nodes[static_cast<size_t>(chain[i])].results[0])] = true;
      release(factors[i]);
      ++removed_;
    }
    fn_.nodes[n].inputs[0] = cur;
    readers_.reader[static_cast<size_t>(cur)] = static_cast<int>(n);
  }

  // The taps [first, last] of one window axis that some output reads inside
  // the input (in, out long; stride, pad before, dilation, kernel taps);
  // nullopt when none does.
  static std::optional<std::pair<int64_t, int64_t>> live_taps(int64_t in, int64_t out, int64_t stride, int64_t pad,
                                                              int64_t dilation, int64_t taps) {
    std::optional<std::pair<int64_t, int64_t>> live;
    for (int64_t t = 0; t < taps; ++t) {
      // Output o reads input o * stride - pad + t * dilation: inside for some o in [0, out)?
      const int64_t first = t * dilation - pad, last = (out - 1) * stride + first;
      if (last < 0 || first >= in) continue;
      // Some o with 0 <= o * stride + first < in: the smallest o reaching 0.
      const int64_t o = first >= 0 ? 0 : (-first + stride - 1) / stride;
      if (o >= out || o * stride + first >= in) continue;
      if (!live) live = std::pair<int64_t, int64_t>{t, t};
      live->second = t;
    }
    return live;
  }

  // conv2d `n` (NCHW, its weights a constant it alone reads) whose window
  // has rows or columns at its edges that no output reads inside the input
  // (DeepLabV3's atrous 3x3s at dilation 24 and 36 on a 20 x 20 map: only
  // the centre tap is ever inside): the weights cut to the live taps and the
  // pads moved with them, the same windows over the same input. The dropped
  // taps' products were zeros (padding): the sums are the same bits but for
  // the sign of an exact zero.
  bool trim_dead_taps(size_t n) {
    Node& conv = fn_.nodes[n];
    if (node_dropped_[n] || conv.kind != NodeKind::kOp || conv.op != OpId::kConv2d || conv.results.size() != 1 ||
        ops::conv2d_channels_last(conv.params) || conv.params.size() < 9 || conv.inputs.size() < 2)
      return false;
    const TensorType& x = value(conv.inputs[0]).type;
    const TensorType& y = value(conv.results[0]).type;
    const Value& w_value = value(conv.inputs[1]);
    if (x.dtype != DType::kF32 || x.rank() != 4 || x.has_bound() || y.rank() != 4 || y.has_bound() ||
        w_value.type.dtype != DType::kF32 || w_value.type.rank() != 4 || !owned_constant(conv.inputs[1]))
      return false;
    std::vector<int64_t>& p = conv.params;
    const int64_t KH = w_value.type.dims[2], KW = w_value.type.dims[3];
    const auto rows = live_taps(x.dims[2], y.dims[2], p[0], p[2], p[6], KH);
    const auto cols = live_taps(x.dims[3], y.dims[3], p[1], p[3], p[7], KW);
    if (!rows || !cols) return false;  // no tap inside: left as it is
    const auto [r0, r1] = *rows;
    const auto [c0, c1] = *cols;
    if (r0 == 0 && r1 == KH - 1 && c0 == 0 && c1 == KW - 1) return false;
    // New pads: the first live tap reads where it did; the output size stays.
    const int64_t top = p[2] - r0 * p[6], bottom = p[4] - (KH - 1 - r1) * p[6];
    const int64_t left = p[3] - c0 * p[7], right = p[5] - (KW - 1 - c1) * p[7];
    if (top < 0 || bottom < 0 || left < 0 || right < 0) return false;
    std::optional<std::vector<float>> w = constant_floats(module_, w_value);
    if (!w) return false;
    const int64_t outer = w_value.type.dims[0] * w_value.type.dims[1], kh = r1 - r0 + 1, kw = c1 - c0 + 1;
    std::vector<float> cut(static_cast<size_t>(outer * kh * kw));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t c = 0; c < kw; ++c)
          cut[static_cast<size_t>((o * kh + r) * kw + c)] =
              (*w)[static_cast<size_t>((o * KH + r0 + r) * KW + c0 + c)];
    Constant& constant = module_.constants[static_cast<size_t>(w_value.constant)];
    constant.type.dims[2] = kh;
    constant.type.dims[3] = kw;
    set_floats(constant, cut);
    Value& wv = value(conv.inputs[1]);
    wv.type = constant.type;
    wv.byte_size = constant.byte_size;
    p[2] = top;
    p[3] = left;
    p[4] = bottom;
    p[5] = right;
    return true;
  }

  // Operand `side` of binary node `node` when it is a constant of `channels`
  // finite elements broadcasting along dim 1 of the rank-4 result ([C,1,1],
  // [1,C,1,1]; one element is the scalar affine epilogue's); its floats.
  std::optional<std::vector<float>> per_channel(const Node& node, int side, int64_t channels) {
    const Value& c = value(node.inputs[static_cast<size_t>(side)]);
    int64_t count = 1;
    for (int64_t d : c.type.dims) count *= d;
    if (c.kind != ValueKind::kConstant || count != channels || channels < 2) return std::nullopt;
    return channel_factors(module_, c, channels);
  }

  // mul `n` of x by per-channel constants whose result only an add of
  // per-channel constants reads: one depthwise 1x1 conv2d (weights s, bias t).
  void mul_add_as_conv(size_t n) {
    const Node& mul = fn_.nodes[n];
    if (node_dropped_[n] || mul.op != OpId::kMul || mul.inputs.size() != 2 || mul.results.size() != 1 ||
        has_epilogue(mul))
      return;
    const int product = mul.results[0];
    const TensorType& type = value(product).type;
    if (type.dtype != DType::kF32 || type.rank() != 4 || type.has_bound()) return;
    const int64_t channels = type.dims[1];
    int side = -1;
    std::optional<std::vector<float>> scale;
    for (int i : {1, 0})
      if (side < 0 && (scale = per_channel(mul, i, channels))) side = i;
    if (side < 0) return;
    const int x = mul.inputs[static_cast<size_t>(1 - side)], s = mul.inputs[static_cast<size_t>(side)];
    if (!(value(x).type == type)) return;
    const int j = sole(product);
    if (j < 0) return;
    const Node& add = fn_.nodes[static_cast<size_t>(j)];
    if (add.op != OpId::kAdd || add.inputs.size() != 2 || add.results.size() != 1 || has_epilogue(add) ||
        !(value(add.results[0]).type == type))
      return;
    const int t_side = add.inputs[0] == product ? 1 : 0;
    if (add.inputs[static_cast<size_t>(1 - t_side)] != product) return;
    std::optional<std::vector<float>> shift = per_channel(add, t_side, channels);
    if (!shift) return;
    const int t = add.inputs[static_cast<size_t>(t_side)];
    const std::string base = value(s).name;
    release(s);
    release(t);
    Node& conv = fn_.nodes[n];
    conv.op = OpId::kConv2d;
    conv.inputs = {x};
    conv.params = {1, 1, 0, 0, 0, 0, 1, 1, channels};
    add_weights(n, base, *scale);
    add_bias(n, value(t).name, *shift);
    absorb(n, j);
  }

  // New depthwise 1x1 weights [C, 1, 1, 1] for conv2d `n` (its input 1).
  void add_weights(size_t n, const std::string& base, const std::vector<float>& values) {
    add_input_constant(n, base + ".weights", {static_cast<int64_t>(values.size()), 1, 1, 1}, values);
  }

  // Node `n` takes over node `j`'s result; `j` and `n`'s old result go.
  void absorb(size_t n, int j) {
    Node& node = fn_.nodes[n];
    value_dropped_[static_cast<size_t>(node.results[0])] = true;
    node.results = fn_.nodes[static_cast<size_t>(j)].results;
    node_dropped_[static_cast<size_t>(j)] = true;
    ++removed_;
  }

  size_t finish() {
    if (removed_ == 0) return 0;
    // The function's constant uses as drop leaves them (a new bias counts once).
    constants_.count_uses(fn_, -1);
    drop(fn_, node_dropped_, value_dropped_);
    constants_.count_uses(fn_, 1);
    return removed_;
  }

  Module& module_;
  Function& fn_;
  Readers readers_;
  ModuleConstants& constants_;
  std::vector<bool> node_dropped_, value_dropped_;
  size_t removed_ = 0;
};

}  // namespace

size_t fold_channel_affine(Module& module, uint64_t* values_visited) {
  size_t removed = 0;
  ModuleConstants constants(module);
  for (Function& fn : module.functions) removed += ConvFolder(module, fn, constants).after();
  if (values_visited) *values_visited += constants.values_visited();
  return removed;
}

size_t fold_input_affine(Module& module, uint64_t* values_visited) {
  size_t removed = 0;
  ModuleConstants constants(module);
  for (Function& fn : module.functions) removed += ConvFolder(module, fn, constants).before();
  if (values_visited) *values_visited += constants.values_visited();
  return removed;
}

size_t channel_affine_as_conv(Module& module) {
  size_t removed = 0;
  ModuleConstants constants(module);
  for (Function& fn : module.functions) removed += ConvFolder(module, fn, constants).affine_as_conv();
  return removed;
}


namespace {

// fuse_prefix_attention of one function: from each final matmul back through
// softmax, the masking where, the scale and q k^T (fusion.h).
class PrefixAttention {
 public:
  PrefixAttention(const Module& module, Function& fn)
      : module_(module), fn_(fn), readers_(fn), node_dropped_(fn.nodes.size(), false),
        value_dropped_(fn.values.size(), false) {}

  size_t run() {
    size_t found = 0;
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (fn_.nodes[n].kind == NodeKind::kOp && fn_.nodes[n].op == OpId::kMatmul && fuse(n)) ++found;
    if (found == 0) return 0;
    // The masks' comparisons (and nots) no node reads any more.
    for (size_t n = fn_.nodes.size(); n-- > 0;) {
      if (!mask_nodes_.count(n)) continue;
      bool read = false;
      for (int r : fn_.nodes[n].results) read = read || is_read(r);
      if (!read) node_dropped_[n] = true;
    }
    drop(fn_, node_dropped_, std::move(value_dropped_));
    return found;
  }

 private:
  const Value& value(int v) const { return fn_.values[static_cast<size_t>(v)]; }
  // The op node writing v that reads nothing but is read once, by node `by`; -1 otherwise.
  int sole_writer(int v, size_t by, OpId op) const {
    if (readers_.sole(v) != static_cast<int>(by)) return -1;
    const Value& x = value(v);
    if (x.kind != ValueKind::kResult || x.node < 0) return -1;
    const Node& w = fn_.nodes[static_cast<size_t>(x.node)];
    return w.kind == NodeKind::kOp && w.op == op && w.results.size() == 1 ? x.node : -1;
  }
  const Node* writer(int v) const {
    const Value& x = value(v);
    if (x.kind != ValueKind::kResult || x.node < 0) return nullptr;
    const Node& w = fn_.nodes[static_cast<size_t>(x.node)];
    return w.kind == NodeKind::kOp ? &w : nullptr;
  }
  bool is_read(int v) const {
    for (int out : fn_.outputs)
      if (out == v) return true;
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (!node_dropped_[n] && std::find(fn_.nodes[n].inputs.begin(), fn_.nodes[n].inputs.end(), v) !=
                                   fn_.nodes[n].inputs.end())
        return true;
    return false;
  }

  // The keys a mask lets through along the scores' last dim (t long), as
  // `j < position + offset`: cond true where a key is masked away when
  // `masked` (where's fill side), kept otherwise. Through nots, a comparison
  // of a constant iota 0..t-1 and a one-element i64 position.
  bool key_mask(int cond, bool masked, size_t rank, int64_t t, int* position, int64_t* offset) {
    const TensorType& c = value(cond).type;
    if (c.rank() > rank || c.dims.empty() || c.dims.back() != t) return false;
    for (size_t d = 0; d + 1 < c.rank(); ++d)
      if (c.dims[d] != 1) return false;
    const Node* w = writer(cond);
    std::vector<size_t> chain;
    while (w && w->op == OpId::kNot) {
      chain.push_back(static_cast<size_t>(value(cond).node));
      masked = !masked;
      cond = w->inputs[0];
      w = writer(cond);
    }
    if (!w || w->inputs.size() != 2) return false;
    // iota OP position, as "j < position + offset" where true means kept.
    int iota_side = -1;
    for (int side = 0; side < 2; ++side) {
      const Value& x = value(w->inputs[static_cast<size_t>(side)]);
      const std::optional<size_t> axis = constant_iota_axis(module_, x);
      if (x.type.dtype == DType::kI64 && axis && *axis + 1 == x.type.rank() && x.type.dims.back() == t) iota_side = side;
    }
    if (iota_side < 0) return false;
    const int p = w->inputs[static_cast<size_t>(1 - iota_side)];
    const TensorType& pt = value(p).type;
    if (pt.dtype != DType::kI64 || std::any_of(pt.dims.begin(), pt.dims.end(), [](int64_t d) { return d != 1; }))
      return false;
    // Written as iota (op) position: j <= p, j < p, j >= p, j > p.
    OpId op = w->op;
    if (iota_side == 1) {  // position (op) iota: mirror
      if (op == OpId::kLess) op = OpId::kGreater;
      else if (op == OpId::kGreater) op = OpId::kLess;
      else if (op == OpId::kLessOrEqual) op = OpId::kGreaterOrEqual;
      else if (op == OpId::kGreaterOrEqual) op = OpId::kLessOrEqual;
    }
    // Kept: j <= p (offset 1) or j < p (offset 0); true-means-masked flips the comparison.
    if (masked) {
      if (op == OpId::kGreater) op = OpId::kLessOrEqual;
      else if (op == OpId::kGreaterOrEqual) op = OpId::kLess;
      else return false;
    }
    if (op == OpId::kLessOrEqual) *offset = 1;
    else if (op == OpId::kLess) *offset = 0;
    else return false;
    *position = p;
    for (size_t n : chain) mask_nodes_.insert(n);
    mask_nodes_.insert(static_cast<size_t>(value(cond).node));
    return true;
  }

  bool fuse(size_t last) {
    const Node& pv = fn_.nodes[last];
    if (pv.inputs.size() != 2 || !pv.params.empty() || pv.results.size() != 1) return false;
    const int s_softmax = sole_writer(pv.inputs[0], last, OpId::kSoftmax);
    if (s_softmax < 0) return false;
    const Node& softmax = fn_.nodes[static_cast<size_t>(s_softmax)];
    const size_t rank = value(softmax.results[0]).type.rank();
    if (rank < 2 || softmax.params.size() != 1 || softmax.params[0] != static_cast<int64_t>(rank) - 1) return false;
    const int s_where = sole_writer(softmax.inputs[0], static_cast<size_t>(s_softmax), OpId::kWhere);
    if (s_where < 0) return false;
    const Node& where = fn_.nodes[static_cast<size_t>(s_where)];
    const int64_t t = value(where.results[0]).type.dims.back();
    // where(masked, -inf, scores) or where(kept, scores, -inf).
    const float inf = std::numeric_limits<float>::infinity();
    int fill_side = -1;
    for (int side = 1; side <= 2; ++side)
      if (scalar_constant(module_, fn_, where.inputs[static_cast<size_t>(side)]) == -inf) fill_side = side;
    if (fill_side < 0) return false;
    const int scores = where.inputs[static_cast<size_t>(3 - fill_side)];
    if (value(scores).type != value(where.results[0]).type) return false;
    int position = -1;
    int64_t offset = 0;
    std::set<size_t> before = mask_nodes_;
    if (!key_mask(where.inputs[0], fill_side == 1, rank, t, &position, &offset)) return false;
    // The scale: a mul by (or div by) a one-element f32 constant, or none.
    double scale = 1.0;
    int product = scores, s_scale = -1;
    for (OpId op : {OpId::kMul, OpId::kDiv}) {
      const int w = sole_writer(scores, static_cast<size_t>(s_where), op);
      if (w < 0) continue;
      const Node& node = fn_.nodes[static_cast<size_t>(w)];
      for (int side = op == OpId::kDiv ? 1 : 0; side < 2 && s_scale < 0; ++side) {
        const std::optional<float> c = scalar_constant(module_, fn_, node.inputs[static_cast<size_t>(side)]);
        if (!c || !std::isfinite(*c) || (op == OpId::kDiv && *c == 0.0f)) continue;
        scale = op == OpId::kDiv ? 1.0 / *c : *c;
        product = node.inputs[static_cast<size_t>(1 - side)];
        s_scale = w;
      }
    }
    const size_t product_reader = static_cast<size_t>(s_scale >= 0 ? s_scale : s_where);
    const int s_qk = sole_writer(product, product_reader, OpId::kMatmul);
    if (s_qk < 0) {
      mask_nodes_ = std::move(before);
      return false;
    }
    const Node& qk = fn_.nodes[static_cast<size_t>(s_qk)];
    // q k^T: k stored [.., T, D] (transpose_b) or transposed by a transpose of its last two dims.
    int k = -1, s_transpose = -1;
    if (qk.inputs.size() == 2 && qk.params.size() == 1 && qk.params[0] == 1) {
      k = qk.inputs[1];
    } else if (qk.inputs.size() == 2 && (qk.params.empty() || (qk.params.size() == 1 && qk.params[0] == 0))) {
      const Node* tr = writer(qk.inputs[1]);
      if (tr && tr->op == OpId::kTranspose && tr->params.size() == rank) {
        bool swaps = tr->params[rank - 1] == static_cast<int64_t>(rank) - 2 &&
                     tr->params[rank - 2] == static_cast<int64_t>(rank) - 1;
        for (size_t d = 0; d + 2 < rank; ++d) swaps = swaps && tr->params[d] == static_cast<int64_t>(d);
        if (swaps) {
          k = tr->inputs[0];
          if (readers_.sole(qk.inputs[1]) == s_qk) s_transpose = value(qk.inputs[1]).node;
        }
      }
    }
    std::vector<int> inputs = {qk.inputs[0], k, pv.inputs[1], position};
    std::vector<int64_t> params = {std::bit_cast<int64_t>(scale), offset};
    std::vector<TensorType> types;
    for (int in : inputs) {
      if (in < 0) {
        mask_nodes_ = std::move(before);
        return false;
      }
      types.push_back(value(in).type);
    }
    const Result<TensorType> result = ops::infer_result_type(OpId::kAttention, types, params);
    if (!result.ok() || !(*result == value(pv.results[0]).type)) {
      mask_nodes_ = std::move(before);
      return false;
    }
    for (int dropped : {s_qk, s_scale, s_where, s_softmax, s_transpose}) {
      if (dropped < 0) continue;
      node_dropped_[static_cast<size_t>(dropped)] = true;
      for (int r : fn_.nodes[static_cast<size_t>(dropped)].results) value_dropped_[static_cast<size_t>(r)] = true;
    }
    Node& fused = fn_.nodes[last];
    fused.op = OpId::kAttention;
    fused.inputs = std::move(inputs);
    fused.params = std::move(params);
    return true;
  }

  const Module& module_;
  Function& fn_;
  const Readers readers_;
  std::vector<bool> node_dropped_, value_dropped_;
  std::set<size_t> mask_nodes_;
};

}  // namespace

size_t fuse_prefix_attention(Module& module) {
  size_t found = 0;
  for (Function& fn : module.functions) found += PrefixAttention(module, fn).run();
  return found;
}

size_t trim_dead_taps(Module& module) {
  size_t trimmed = 0;
  ModuleConstants constants(module);
  for (Function& fn : module.functions) trimmed += ConvFolder(module, fn, constants).trim_taps();
  return trimmed;
}

size_t fuse(Module& module) {
  trim_dead_taps(module);
  size_t removed = fuse_prefix_attention(module);
  removed += fold_channel_affine(module);
  removed += fold_input_affine(module);
  removed += channel_affine_as_conv(module);  // the affines no convolution took
  return removed + fuse_epilogues(module);
}

size_t fuse_epilogues(Module& module) {
  size_t removed = 0;
  for (Function& fn : module.functions) removed += fuse_function(&module, fn);
  return removed;
}

namespace {

size_t fuse_separable_function(Function& fn) {
  const Readers readers(fn);
  std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
  size_t removed = 0;
  auto type = [&](int v) -> const TensorType& { return fn.values[static_cast<size_t>(v)].type; };
  // A conv2d's epilogue words, zeros when it has none.
  auto epilogue = [](const Node& node) {
    const size_t at = ops::epilogue_offset(OpId::kConv2d);
    std::vector<int64_t> words(3, 0);  // [activation, a, b]
    if (node.params.size() >= at + 3) std::copy(node.params.begin() + at, node.params.begin() + at + 3, words.begin());
    return words;
  };
  const size_t conv_words = ops::epilogue_offset(OpId::kConv2d);  // strides .. groups
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& dw = fn.nodes[n];
    if (dw.kind != NodeKind::kOp || dw.op != OpId::kConv2d || dw.inputs.size() > 3 || dw.results.size() != 1 ||
        dw.params.size() < conv_words || ops::conv2d_channels_last(dw.params))
      continue;
    const TensorType& x = type(dw.inputs[0]);
    const TensorType& dw_w = type(dw.inputs[1]);
    if (x.rank() != 4 || x.dtype != DType::kF32 || dw_w.rank() != 4) continue;
    const int64_t c = x.dims[1];
    if (dw.params[conv_words - 1] != c || dw_w.dims[0] != c || dw_w.dims[1] != 1) continue;  // depthwise
    const int v = dw.results[0];
    const int j = readers.sole(v);
    if (j < 0 || readers.region[static_cast<size_t>(j)] != readers.region[n]) continue;
    const Node& pw = fn.nodes[static_cast<size_t>(j)];
    if (pw.kind != NodeKind::kOp || pw.op != OpId::kConv2d || pw.inputs[0] != v ||
        pw.results.size() != 1 || pw.params.size() < conv_words || ops::conv2d_channels_last(pw.params))
      continue;
    static constexpr int64_t kOneByOne[] = {1, 1, 0, 0, 0, 0, 1, 1, 1};
    const TensorType& pw_w = type(pw.inputs[1]);
    if (!std::equal(std::begin(kOneByOne), std::end(kOneByOne), pw.params.begin()) || pw_w.rank() != 4 ||
        pw_w.dims[2] != 1 || pw_w.dims[3] != 1)
      continue;
    std::vector<int64_t> params(dw.params.begin(), dw.params.begin() + static_cast<std::ptrdiff_t>(conv_words));
    for (const Node* stage : {&dw, &pw}) {
      const std::vector<int64_t> words = epilogue(*stage);
      params.insert(params.end(), words.begin(), words.end());
    }
    // (x, dw_w, pw_w, the biases there are, the residual), the biases word last.
    std::vector<int> inputs{dw.inputs[0], dw.inputs[1], pw.inputs[1]};
    inputs.insert(inputs.end(), dw.inputs.begin() + 2, dw.inputs.end());
    inputs.insert(inputs.end(), pw.inputs.begin() + 2, pw.inputs.end());
    params.push_back((dw.inputs.size() == 3 ? 1 : 0) | (pw.inputs.size() >= 3 ? 2 : 0));
    // The operator's rule decides the rest (a depthwise row of at most
    // kSeparableMaxRowFloats, the types).
    std::vector<TensorType> types;
    for (int in : inputs) types.push_back(type(in));
    const Result<TensorType> result = ops::infer_result_type(OpId::kSeparableConv2d, types, params);
    if (!result.ok() || !(*result == type(pw.results[0]))) continue;
    Node& fused = fn.nodes[static_cast<size_t>(j)];  // at the 1x1's place: the residual is there by then
    fused.op = OpId::kSeparableConv2d;
    fused.inputs = std::move(inputs);
    fused.params = std::move(params);
    node_dropped[n] = true;
    value_dropped[static_cast<size_t>(v)] = true;
    ++removed;
  }
  if (removed > 0) drop(fn, node_dropped, std::move(value_dropped));
  return removed;
}

}  // namespace

size_t fuse_separable(Module& module) {
  size_t removed = 0;
  for (Function& fn : module.functions) removed += fuse_separable_function(fn);
  return removed;
}

}  // namespace hexir::compiler
