#include "passes/quantized.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "hexir/ops/plans.h"
#include "ir/constant_data.h"
#include "passes/fusion.h"
#include "passes/layout.h"

namespace hexir::compiler {
namespace {

using ops::OpId;


bool one_element(const TensorType& t) {
  return std::all_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d == 1; });
}

std::optional<std::vector<uint8_t>> bytes_of(const Module& module, const Value& v) {
  if (v.kind != ValueKind::kConstant) return std::nullopt;
  Result<std::vector<uint8_t>> bytes = constant_bytes(module.constants[static_cast<size_t>(v.constant)]);
  if (!bytes.ok()) return std::nullopt;
  return std::move(*bytes);
}

// A constant f32 value's elements, each finite (and positive when asked).
std::optional<std::vector<float>> floats_of(const Module& module, const Value& v, bool positive) {
  if (v.type.dtype != DType::kF32) return std::nullopt;
  const std::optional<std::vector<uint8_t>> bytes = bytes_of(module, v);
  if (!bytes || bytes->size() % 4 != 0) return std::nullopt;
  std::vector<float> out(bytes->size() / 4);
  std::memcpy(out.data(), bytes->data(), bytes->size());
  for (float f : out)
    if (!std::isfinite(f) || (positive && !(f > 0.0f))) return std::nullopt;
  return out;
}

// A one-element constant u8 zero point.
// A one-element constant zero point of `dtype` (u8 or i8), as an int32.
std::optional<int32_t> zero_point_of(const Module& module, const Value& v, DType dtype) {
  if (v.type.dtype != dtype || !one_element(v.type)) return std::nullopt;
  const std::optional<std::vector<uint8_t>> bytes = bytes_of(module, v);
  if (!bytes || bytes->size() != 1) return std::nullopt;
  return dtype == DType::kI8 ? int32_t{static_cast<int8_t>((*bytes)[0])} : int32_t{(*bytes)[0]};
}
std::optional<int32_t> u8_zero_of(const Module& module, const Value& v) {
  return zero_point_of(module, v, DType::kU8);
}

// One quantized convolution found: what the rewrite needs.
struct Match {
  size_t quantize = 0;  // the quantize_linear node (the rewrite takes its place)
  std::vector<size_t> gone;  // conv2d and the activation
  size_t dequantize_x = 0, dequantize_w = 0;
  int xq = -1;
  // A matmul (x [.., M, K] times w [K, N], or [N, K] when transposed): a
  // 1x1 convolution over M pixels of K channels, x and y reshaped, not moved.
  bool matmul = false, transposed = false;
  // An add of two dequantized u8 values (dequantize_x's and dequantize_b's): quantized_add.
  bool add = false;
  // A max_pool of a dequantized u8 value (`quantize` is the max_pool): the pool on the u8 values,
  // then the dequantize.
  bool pool = false;
  // A reshape, transpose or concat between dequantizes and a quantize of one scale and zero point:
  // the op on the u8 values (`gone` is the op; `moved` its dequantizes).
  bool move = false;
  std::vector<size_t> moved;
  size_t dequantize_b = 0;
  int bq = -1;
  float sb = 0;
  int32_t zb = 0;
  int64_t groups = 1;
  float sx = 0, sy = 0;
  int32_t zx = 0, zy = 0, lo = 0, hi = 255;
  std::vector<float> sw;  // per output channel
  std::optional<std::vector<float>> bias;
};

class IntegerKernels {
 public:
  IntegerKernels(Module& module, Function& fn)
      : module_(module), fn_(fn), uses_(value_uses(fn)), region_(innermost_regions(fn)) {}

  size_t run() {
    std::vector<Match> matches;
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (std::optional<Match> m = match(n)) matches.push_back(std::move(*m));
    if (matches.empty()) return 0;
    const size_t original = fn_.nodes.size();
    std::vector<std::vector<Node>> replacement(original);
    std::vector<bool> gone(original, false);
    size_t rewritten = 0;
    for (const Match& m : matches) {
      std::optional<std::vector<Node>> nodes = rewrite(m);
      if (!nodes) continue;
      replacement[m.quantize] = std::move(*nodes);
      for (size_t g : m.gone) gone[g] = true;
      ++rewritten;
    }
    if (rewritten == 0) return 0;
    // Rebuild the node list: each quantize_linear replaced by its nodes in
    // place (everything they read is written before the convolution).
    std::vector<Node> old = std::move(fn_.nodes);
    fn_.nodes.clear();
    std::vector<int64_t> new_index(original, -1);
    std::vector<bool> dropped;
    for (size_t n = 0; n < original; ++n) {
      if (!replacement[n].empty()) {
        for (Node& node : replacement[n]) {
          fn_.nodes.push_back(std::move(node));
          dropped.push_back(false);
        }
        new_index[n] = static_cast<int64_t>(fn_.nodes.size()) - 1;
        continue;
      }
      new_index[n] = static_cast<int64_t>(fn_.nodes.size());
      fn_.nodes.push_back(std::move(old[n]));
      dropped.push_back(gone[n]);
    }
    renumber_nodes(fn_, original, new_index);
    // The dequantized inputs no one reads any more (every reader fused).
    std::vector<int> reads(fn_.values.size(), 0);
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (!dropped[n])
        for (int v : fn_.nodes[n].inputs) ++reads[static_cast<size_t>(v)];
    for (int v : fn_.outputs) ++reads[static_cast<size_t>(v)];
    for (const Match& m : matches) {
      std::vector<size_t> dequantizes = m.moved;
      if (!m.move) dequantizes = {m.dequantize_x, m.add ? m.dequantize_b : m.pool ? m.dequantize_x : m.dequantize_w};
      for (size_t dq : dequantizes) {
        const size_t at = static_cast<size_t>(new_index[dq]);
        if (reads[static_cast<size_t>(fn_.nodes[at].results[0])] == 0) dropped[at] = true;
      }
    }
    std::vector<bool> value_dropped(fn_.values.size(), false);
    for (size_t n = 0; n < fn_.nodes.size(); ++n)
      if (dropped[n])
        for (int v : fn_.nodes[n].results) value_dropped[static_cast<size_t>(v)] = true;
    drop(fn_, dropped, std::move(value_dropped));
    return rewritten;
  }

 private:
  const Value& value(int v) const { return fn_.values[static_cast<size_t>(v)]; }

  // The top-level op node writing v, read by one node only (or by any
  // number with `shared`), of operator `op`; nullopt otherwise.
  std::optional<size_t> writer(int v, OpId op, bool shared = false) const {
    const int w = uses_.writer[static_cast<size_t>(v)];
    if (w < 0 || (!shared && uses_.readers[static_cast<size_t>(v)] != 1) || region_[static_cast<size_t>(w)] >= 0)
      return std::nullopt;
    const Node& node = fn_.nodes[static_cast<size_t>(w)];
    if (node.kind != NodeKind::kOp || node.op != op) return std::nullopt;
    return static_cast<size_t>(w);
  }

  std::optional<Match> match(size_t n) const {
    if (std::optional<Match> pool = match_pool(n)) return pool;
    const Node& q = fn_.nodes[n];
    if (q.kind != NodeKind::kOp || q.op != OpId::kQuantizeLinear || region_[n] >= 0 || q.results.size() != 1)
      return std::nullopt;
    Match m;
    m.quantize = n;
    const std::optional<std::vector<float>> sy = floats_of(module_, value(q.inputs[1]), true);
    const std::optional<int32_t> zy = u8_zero_of(module_, value(q.inputs[2]));
    if (!sy || sy->size() != 1 || !zy) return std::nullopt;
    m.sy = (*sy)[0], m.zy = *zy;
    // An activation between the convolution and the quantize: a clamp of the quantized value.
    int y = q.inputs[0];
    const int w = uses_.writer[static_cast<size_t>(y)];
    if (w >= 0 && fn_.nodes[static_cast<size_t>(w)].kind == NodeKind::kOp &&
        (fn_.nodes[static_cast<size_t>(w)].op == OpId::kRelu || fn_.nodes[static_cast<size_t>(w)].op == OpId::kClip)) {
      const std::optional<size_t> act = writer(y, fn_.nodes[static_cast<size_t>(w)].op);
      if (!act) return std::nullopt;
      const Node& a = fn_.nodes[*act];
      double low = 0.0, high = INFINITY;
      if (a.op == OpId::kClip) {
        if (a.params.size() != 2) return std::nullopt;
        low = std::bit_cast<double>(a.params[0]), high = std::bit_cast<double>(a.params[1]);
        if (std::isnan(low) || std::isnan(high) || low > high) return std::nullopt;
      }
      m.lo = ops::quantize_of(static_cast<float>(low), m.sy, m.zy, 0, 255);
      m.hi = std::isinf(high) ? 255 : ops::quantize_of(static_cast<float>(high), m.sy, m.zy, 0, 255);
      if (std::isinf(low)) m.lo = 0;
      m.gone.push_back(*act);
      y = a.inputs[0];
    }
    if (m.gone.empty())
      if (std::optional<Match> moved = match_move(m, y)) return moved;
    if (std::optional<Match> added = match_add(m, y)) return added;
    // A matmul's bias: an add of a constant [N] (the fusions, which would make it matmul's input, run later).
    std::optional<int> bias_value;
    if (const std::optional<size_t> add = writer(y, OpId::kAdd)) {
      const Node& a = fn_.nodes[*add];
      for (int i : {0, 1})
        if (value(a.inputs[static_cast<size_t>(i)]).kind == ValueKind::kConstant &&
            uses_.writer[static_cast<size_t>(a.inputs[static_cast<size_t>(1 - i)])] >= 0 &&
            fn_.nodes[static_cast<size_t>(uses_.writer[static_cast<size_t>(a.inputs[static_cast<size_t>(1 - i)])])].op ==
                OpId::kMatmul) {
          bias_value = a.inputs[static_cast<size_t>(i)];
          m.gone.push_back(*add);
          y = a.inputs[static_cast<size_t>(1 - i)];
          break;
        }
    }
    std::optional<size_t> op_at = writer(y, OpId::kConv2d);
    if (!op_at && (op_at = writer(y, OpId::kMatmul))) m.matmul = true;
    if (!op_at || (bias_value && !m.matmul) || (!m.matmul && value(q.results[0]).type.rank() != 4)) return std::nullopt;
    const Node& op = fn_.nodes[*op_at];
    if (m.matmul) {
      if (op.inputs.size() != 2 || op.params.size() > 1) return std::nullopt;  // no bias input or epilogue yet
      m.transposed = op.params.size() == 1 && op.params[0] == 1;
    } else if (op.params.size() != 9 || op.inputs.size() > 3) {
      return std::nullopt;  // no epilogue, layout or residual
    }
    m.gone.push_back(*op_at);
    m.groups = m.matmul ? 1 : op.params[8];
    const std::optional<size_t> dqx = writer(op.inputs[0], OpId::kDequantizeLinear, true);
    // The weights' dequantize may have other readers (tied weights: each reader's group fuses, the
    // packed weights shared).
    const std::optional<size_t> dqw = writer(op.inputs[1], OpId::kDequantizeLinear, true);
    if (!dqx || !dqw) return std::nullopt;
    const Node& dx = fn_.nodes[*dqx];
    const Node& dw = fn_.nodes[*dqw];
    m.dequantize_x = *dqx, m.dequantize_w = *dqw;
    m.xq = dx.inputs[0];
    const std::optional<std::vector<float>> sx = floats_of(module_, value(dx.inputs[1]), true);
    const std::optional<int32_t> zx = u8_zero_of(module_, value(dx.inputs[2]));
    const TensorType& x_type = value(m.xq).type;
    if (x_type.dtype != DType::kU8 || (m.matmul ? x_type.rank() < 2 : x_type.rank() != 4) || !sx || sx->size() != 1 ||
        !zx)
      return std::nullopt;
    m.sx = (*sx)[0], m.zx = *zx;
    const Value& wq = value(dw.inputs[0]);
    if (wq.kind != ValueKind::kConstant || wq.type.dtype != DType::kI8 || wq.type.rank() != (m.matmul ? 2 : 4))
      return std::nullopt;
    // The output channels: a convolution's dim 0, a matmul's N; per-channel scales along it.
    const int64_t channel_axis = m.matmul && !m.transposed ? 1 : 0;
    const int64_t k = wq.type.dims[static_cast<size_t>(channel_axis)];
    std::optional<std::vector<float>> sw = floats_of(module_, value(dw.inputs[1]), true);
    if (!sw ||
        (sw->size() != 1 && (static_cast<int64_t>(sw->size()) != k || dw.params.empty() || dw.params[0] != channel_axis)))
      return std::nullopt;
    if (sw->size() == 1) sw->assign(static_cast<size_t>(k), (*sw)[0]);
    m.sw = std::move(*sw);
    const std::optional<std::vector<uint8_t>> zw = bytes_of(module_, value(dw.inputs[2]));
    if (!zw || value(dw.inputs[2]).type.dtype != DType::kI8 ||
        std::any_of(zw->begin(), zw->end(), [](uint8_t b) { return b != 0; }))
      return std::nullopt;
    if (!bias_value && op.inputs.size() == 3) bias_value = op.inputs[2];
    if (bias_value) {
      m.bias = floats_of(module_, value(*bias_value), false);
      if (!m.bias || static_cast<int64_t>(m.bias->size()) != k || value(*bias_value).type.dims.back() != k)
        return std::nullopt;
    }
    return m;
  }

  // A per-tensor dequantize_linear of a u8 value writing v (other readers allowed): the node,
  // the u8 value, its scale and zero point.
  struct Dequantized {
    size_t node;
    int q;
    float scale;
    int32_t zero;
  };
  std::optional<Dequantized> dequantized_u8(int v) const {
    const std::optional<size_t> at = writer(v, OpId::kDequantizeLinear, true);
    if (!at) return std::nullopt;
    const Node& dq = fn_.nodes[*at];
    const std::optional<std::vector<float>> scale = floats_of(module_, value(dq.inputs[1]), true);
    const std::optional<int32_t> zero = u8_zero_of(module_, value(dq.inputs[2]));
    if (value(dq.inputs[0]).type.dtype != DType::kU8 || !scale || scale->size() != 1 || !zero) return std::nullopt;
    return Dequantized{*at, dq.inputs[0], (*scale)[0], *zero};
  }

  // m (its quantize and activation found) completed for an add of two
  // dequantized u8 values of one shape, y the add's result.
  std::optional<Match> match_add(Match m, int y) const {
    const std::optional<size_t> add = writer(y, OpId::kAdd);
    if (!add) return std::nullopt;
    const Node& a = fn_.nodes[*add];
    if (!a.params.empty() || a.inputs.size() != 2) return std::nullopt;  // no epilogue yet
    const std::optional<Dequantized> x = dequantized_u8(a.inputs[0]), b = dequantized_u8(a.inputs[1]);
    if (!x || !b || !(value(x->q).type == value(b->q).type) || !(value(x->q).type.dims == value(y).type.dims))
      return std::nullopt;
    m.add = true;
    m.gone.push_back(*add);
    m.dequantize_x = x->node, m.xq = x->q, m.sx = x->scale, m.zx = x->zero;
    m.dequantize_b = b->node, m.bq = b->q, m.sb = b->scale, m.zb = b->zero;
    return m;
  }

  // DQ(x u8, per tensor) -> max_pool: the max of dequantized values is the dequantized max (the
  // dequantize is monotonic), exactly, where every window has a tap inside the input (a window of
  // pads only is -inf in float and would be x's 0 in u8): dilation 1 (a pad is less than the
  // kernel, so the first window reaches the input) and the last window starting inside it (ceil
  // mode can start one past it). The dequantize may have other readers.
  std::optional<Match> match_pool(size_t n) const {
    const Node& pool = fn_.nodes[n];
    if (pool.kind != NodeKind::kOp || pool.op != OpId::kMaxPool || region_[n] >= 0 || pool.params.size() != 12 ||
        pool.params[8] != 1 || pool.params[9] != 1)
      return std::nullopt;
    const std::vector<int64_t>& in = value(pool.inputs[0]).type.dims;
    const std::vector<int64_t>& out = value(pool.results[0]).type.dims;
    if (in.size() != 4 || out.size() != 4) return std::nullopt;
    for (int d = 0; d < 2; ++d)  // the last window's first row / column: (o - 1) * stride - pad < extent
      if ((out[2 + d] - 1) * pool.params[2 + d] - pool.params[4 + d] >= in[2 + d]) return std::nullopt;
    const std::optional<Dequantized> x = dequantized_u8(pool.inputs[0]);
    if (!x) return std::nullopt;
    Match m;
    m.pool = true;
    m.quantize = n;
    m.dequantize_x = x->node, m.xq = x->q;
    return m;
  }

  // m (its quantize found, no activation) completed for DQ(x u8) ... -> reshape | transpose |
  // concat -> Q, every dequantize and the quantize of one scale and zero point: quantize(dequantize(v))
  // is v exactly at one scale (the float error of (v - z) * s / s is far below half a step), so the
  // op moves bytes instead of floats (what onnxruntime's quantizer writes around data movement).
  std::optional<Match> match_move(Match m, int y) const {
    const int w = uses_.writer[static_cast<size_t>(y)];
    if (w < 0) return std::nullopt;
    const OpId op = fn_.nodes[static_cast<size_t>(w)].op;
    if (op != OpId::kReshape && op != OpId::kTranspose && op != OpId::kConcat) return std::nullopt;
    const std::optional<size_t> at = writer(y, op);
    if (!at) return std::nullopt;
    for (int v : fn_.nodes[*at].inputs) {
      const std::optional<Dequantized> x = dequantized_u8(v);
      if (!x || x->scale != m.sy || x->zero != m.zy) return std::nullopt;
      m.moved.push_back(x->node);
    }
    m.move = true;
    m.gone.push_back(*at);
    return m;
  }

  // The op on the u8 values, writing m's quantize's result.
  std::optional<std::vector<Node>> rewrite_move(const Match& m) {
    const Node& q = fn_.nodes[m.quantize];
    Node op = fn_.nodes[m.gone.back()];
    std::vector<TensorType> types;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      op.inputs[i] = fn_.nodes[m.moved[i]].inputs[0];
      types.push_back(value(op.inputs[i]).type);
    }
    const Result<TensorType> result = ops::infer_result_type(op.op, types, op.params);
    if (!result.ok() || !(*result == value(q.results[0]).type)) return std::nullopt;
    op.results = {q.results[0]};
    return std::vector<Node>{std::move(op)};
  }

  // The u8 max_pool and the dequantize of its result replacing m's max_pool.
  std::optional<std::vector<Node>> rewrite_pool(const Match& m) {
    const Node pool = fn_.nodes[m.quantize];  // copies: values grow below
    const Node dq = fn_.nodes[m.dequantize_x];
    const Result<TensorType> result =
        ops::infer_result_type(OpId::kMaxPool, std::vector<TensorType>{value(m.xq).type}, pool.params);
    if (!result.ok()) return std::nullopt;
    const int pooled = add_value(value(pool.results[0]), *result, ".quantized");
    Node dequantize = dq;
    dequantize.inputs[0] = pooled;
    dequantize.results = {pool.results[0]};
    dequantize.loc = pool.loc;
    return std::vector<Node>{op_node(OpId::kMaxPool, {m.xq}, pooled, pool.params, pool.loc), std::move(dequantize)};
  }

  // The quantized_add replacing m's quantize_linear.
  std::optional<std::vector<Node>> rewrite_add(const Match& m) {
    const Node& q = fn_.nodes[m.quantize];
    const std::vector<int64_t> params{m.zx, m.zb, m.zy, m.lo, m.hi, std::bit_cast<int64_t>(double{m.sx}),
                                      std::bit_cast<int64_t>(double{m.sb}), std::bit_cast<int64_t>(double{m.sy})};
    const std::vector<TensorType> types{value(m.xq).type, value(m.bq).type};
    const Result<TensorType> result = ops::infer_result_type(OpId::kQuantizedAdd, types, params);
    if (!result.ok() || !(*result == value(q.results[0]).type)) return std::nullopt;
    return std::vector<Node>{op_node(OpId::kQuantizedAdd, {m.xq, m.bq}, q.results[0], params, q.loc)};
  }

  int add_value(const Value& like, TensorType type, const std::string& suffix) {
    Value v;
    v.name = like.name + suffix;
    v.byte_size = *byte_size(type);
    v.type = std::move(type);
    v.kind = ValueKind::kResult;
    v.loc = like.loc;
    fn_.values.push_back(std::move(v));
    return static_cast<int>(fn_.values.size()) - 1;
  }

  // The nodes replacing m's quantize_linear: nullopt when the operator's
  // rule refuses the operands (a sum past its limit) or a bias does not fit int32.
  std::optional<std::vector<Node>> rewrite(const Match& m) {
    if (m.add) return rewrite_add(m);
    if (m.pool) return rewrite_pool(m);
    if (m.move) return rewrite_move(m);
    const Node q = fn_.nodes[m.quantize];  // copies: values and constants grow below
    const Node op = fn_.nodes[m.gone.back()];
    const Value wq = value(fn_.nodes[m.dequantize_w].inputs[0]);
    const TensorType x_type = value(m.xq).type;
    const std::optional<std::vector<uint8_t>> w_bytes = bytes_of(module_, wq);
    if (!w_bytes) return std::nullopt;
    // A matmul is a 1x1 convolution: k = N output channels of cg = K input channels.
    const std::vector<int64_t>& wd = wq.type.dims;
    const int64_t k = m.matmul ? wd[m.transposed ? 0 : 1] : wd[0];
    const int64_t cg = m.matmul ? wd[m.transposed ? 1 : 0] : wd[1];
    const int64_t kh = m.matmul ? 1 : wd[2], kw = m.matmul ? 1 : wd[3];
    const int64_t c = m.matmul ? cg : x_type.dims[1], groups = m.groups, kg = k / std::max<int64_t>(groups, 1);
    const int64_t taps = kh * kw;
    const bool depthwise = !m.matmul && groups == c && groups == k && cg == 1;
    const int64_t depth = (taps * cg + 3) / 4 * 4;
    const auto w_at = [&](int64_t o, int64_t ci, int64_t t) {
      const int64_t i = !m.matmul ? (o * cg + ci) * taps + t : m.transposed ? o * cg + ci : ci * k + o;
      return static_cast<int8_t>((*w_bytes)[static_cast<size_t>(i)]);
    };
    std::vector<uint8_t> packed;
    TensorType packed_type;
    if (depthwise) {
      packed.resize(static_cast<size_t>(taps * c));
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t o = 0; o < k; ++o) packed[static_cast<size_t>(t * c + o)] = static_cast<uint8_t>(w_at(o, 0, t));
      packed_type = TensorType{DType::kI8, {taps, c}};
    } else {
      const int64_t blocks = (kg + ops::kQuantizedConvBlock - 1) / ops::kQuantizedConvBlock;
      packed.assign(static_cast<size_t>(groups * blocks * depth * ops::kQuantizedConvBlock), 0);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t o = 0; o < kg; ++o)
          for (int64_t t = 0; t < taps; ++t)
            for (int64_t ci = 0; ci < cg; ++ci)
              packed[static_cast<size_t>(ops::quantized_conv2d_weight_index(depth, kg, g, o, t * cg + ci))] =
                  static_cast<uint8_t>(w_at(g * kg + o, ci, t));
      packed_type = TensorType{DType::kI8, {groups, blocks, depth / 4, ops::kQuantizedConvBlock, 4}};
    }
    std::vector<int32_t> bias(static_cast<size_t>(k));
    std::vector<float> multiplier(static_cast<size_t>(k));
    for (int64_t o = 0; o < k; ++o) {
      int64_t sum_w = 0;
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t t = 0; t < taps; ++t) sum_w += w_at(o, ci, t);
      const double scale = double{m.sx} * double{m.sw[static_cast<size_t>(o)]};
      const double b = m.bias ? std::nearbyint(double{(*m.bias)[static_cast<size_t>(o)]} / scale) : 0.0;
      const double total = b - static_cast<double>(m.zx) * static_cast<double>(sum_w);
      if (!(std::fabs(total) < 2147483647.0)) return std::nullopt;
      bias[static_cast<size_t>(o)] = static_cast<int32_t>(total);
      // In float, x's scale times w's then over y's: the order onnxruntime's
      // QLinearConv takes (a multiplier one ulp apart moves a sum lying near
      // half a step to the other side).
      const float mult = m.sx * m.sw[static_cast<size_t>(o)] / m.sy;
      if (!std::isfinite(mult) || !(mult > 0.0f)) return std::nullopt;
      multiplier[static_cast<size_t>(o)] = mult;
    }
    std::vector<int64_t> params{kh, kw, 1, 1, 0, 0, 0, 0, 1, 1, groups, m.zx, m.zy, m.lo, m.hi};
    if (!m.matmul) std::copy(op.params.begin(), op.params.begin() + 8, params.begin() + 2);
    // A convolution's x channels-last; a matmul's rows as one image row of pixels.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < x_type.dims.size(); ++d) rows *= x_type.dims[d];
    if (m.matmul && x_type.dims.back() != cg) return std::nullopt;
    const TensorType x_nhwc{DType::kU8, m.matmul ? std::vector<int64_t>{1, 1, rows, cg}
                                                 : std::vector<int64_t>{x_type.dims[0], x_type.dims[2],
                                                                        x_type.dims[3], x_type.dims[1]}};
    const std::vector<TensorType> types{x_nhwc, packed_type, TensorType{DType::kI32, {k}},
                                        TensorType{DType::kF32, {k}}};
    const Result<TensorType> result = ops::infer_result_type(OpId::kQuantizedConv2d, types, params);
    const TensorType y_type = value(q.results[0]).type;  // a copy: use_constant below grows fn_.values
    const std::vector<int64_t> y_nhwc =
        m.matmul ? std::vector<int64_t>{1, 1, rows, k}
                 : std::vector<int64_t>{y_type.dims[0], y_type.dims[2], y_type.dims[3], y_type.dims[1]};
    if (!result.ok() || result->dims != y_nhwc || (m.matmul && y_type.dims.back() != k)) return std::nullopt;
    const std::string& name = wq.name;
    const auto constant = [&](const std::string& suffix, TensorType type, std::vector<uint8_t> bytes) {
      return use_constant(fn_, module_, add_constant(module_, name + suffix, std::move(type), InlineBytes{std::move(bytes)}));
    };
    std::vector<uint8_t> bias_bytes(bias.size() * 4), mult_bytes(multiplier.size() * 4);
    std::memcpy(bias_bytes.data(), bias.data(), bias_bytes.size());
    std::memcpy(mult_bytes.data(), multiplier.data(), mult_bytes.size());
    const auto key = std::make_tuple(fn_.nodes[m.dequantize_w].inputs[0], m.matmul, m.transposed, groups);
    auto packed_at = packed_.find(key);
    if (packed_at == packed_.end())
      packed_at = packed_.emplace(key, constant(".packed", packed_type, std::move(packed))).first;
    const int w_value = packed_at->second;
    const int bias_value = constant(".bias", TensorType{DType::kI32, {k}}, std::move(bias_bytes));
    const int mult_value = constant(".multiplier", TensorType{DType::kF32, {k}}, std::move(mult_bytes));
    std::vector<Node> nodes;
    // One channels-last copy (or view) of each quantized input, made where it is first read.
    auto it = nhwc_.find({m.xq, m.matmul});
    if (it == nhwc_.end()) {
      const int xt = add_value(value(m.xq), x_nhwc, ".nhwc");
      nodes.push_back(m.matmul ? op_node(OpId::kReshape, {m.xq}, xt, x_nhwc.dims, op.loc)
                               : op_node(OpId::kTranspose, {m.xq}, xt, std::vector<int64_t>(kToNhwc, kToNhwc + 4), op.loc));
      it = nhwc_.emplace(std::make_pair(m.xq, m.matmul), xt).first;
    }
    const int yt = add_value(value(q.results[0]), *result, ".nhwc");
    nodes.push_back(op_node(OpId::kQuantizedConv2d, {it->second, w_value, bias_value, mult_value}, yt, params, op.loc));
    nodes.push_back(m.matmul ? op_node(OpId::kReshape, {yt}, q.results[0], y_type.dims, q.loc)
                             : op_node(OpId::kTranspose, {yt}, q.results[0], std::vector<int64_t>(kToNchw, kToNchw + 4), q.loc));
    return nodes;
  }

  Module& module_;
  Function& fn_;
  const ValueUses uses_;
  const std::vector<int> region_;
  std::map<std::pair<int, bool>, int> nhwc_;  // (quantized input, a matmul's) -> its channels-last form
  std::map<std::tuple<int, bool, bool, int64_t>, int> packed_;  // (int8 weights, matmul, transposed, groups) -> packed
};

}  // namespace

namespace {

// int8 activations as u8: a non-output int8 value that a per-tensor quantize_linear writes and only
// per-tensor dequantize_linears read is the same value as u8 with each zero point + 128 (q + 128 =
// round(x / s) + (z + 128), saturated to 0..255 as q was to -128..127; (q + 128) - (z + 128) = q - z),
// so the u8 groups match it. The zero point constants are replaced, nothing else moves.
void int8_activations_as_u8(Module& module, Function& fn) {
  const ValueUses uses = value_uses(fn);
  const std::vector<int> region = innermost_regions(fn);
  std::vector<std::vector<size_t>> readers(fn.values.size());
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    for (int v : fn.nodes[n].inputs) readers[static_cast<size_t>(v)].push_back(n);
  std::vector<bool> output(fn.values.size(), false);
  for (int v : fn.outputs) output[static_cast<size_t>(v)] = true;
  // A one-element int8 constant zero point.
  const auto int8_zero = [&](int v) -> std::optional<int32_t> {
    const Value& z = fn.values[static_cast<size_t>(v)];
    if (z.kind != ValueKind::kConstant) return std::nullopt;
    return zero_point_of(module, z, DType::kI8);
  };
  const auto per_tensor = [&](const Node& node) {
    return node.kind == NodeKind::kOp && node.inputs.size() == 3 && node.results.size() == 1 &&
           region[static_cast<size_t>(&node - fn.nodes.data())] < 0 &&
           one_element(fn.values[static_cast<size_t>(node.inputs[1])].type) && int8_zero(node.inputs[2]);
  };
  std::map<int, int> u8_zero;  // an int8 zero point's value -> its u8 twin
  const auto twin = [&](int v) {
    auto it = u8_zero.find(v);
    if (it != u8_zero.end()) return it->second;
    const std::vector<uint8_t> bytes{static_cast<uint8_t>(*int8_zero(v) + 128)};
    const std::string name = fn.values[static_cast<size_t>(v)].name + ".u8";
    const int u = use_constant(fn, module, add_constant(module, name, TensorType{DType::kU8, {}}, InlineBytes{bytes}));
    return u8_zero.emplace(v, u).first->second;
  };
  const size_t values = fn.values.size();  // twins are added past it
  for (size_t v = 0; v < values; ++v) {
    const Value& value = fn.values[v];
    const int w = uses.writer[v];
    if (value.kind != ValueKind::kResult || value.type.dtype != DType::kI8 || output[v] || w < 0 ||
        readers[v].empty())
      continue;
    const Node& q = fn.nodes[static_cast<size_t>(w)];
    if (q.op != OpId::kQuantizeLinear || !per_tensor(q)) continue;
    const bool all_dequantized = std::all_of(readers[v].begin(), readers[v].end(), [&](size_t r) {
      const Node& dq = fn.nodes[r];
      return dq.op == OpId::kDequantizeLinear && dq.inputs[0] == static_cast<int>(v) && per_tensor(dq);
    });
    if (!all_dequantized) continue;
    fn.nodes[static_cast<size_t>(w)].inputs[2] = twin(q.inputs[2]);
    for (size_t r : readers[v]) fn.nodes[r].inputs[2] = twin(fn.nodes[r].inputs[2]);
    fn.values[v].type.dtype = DType::kU8;
  }
}

}  // namespace

size_t use_integer_kernels(Module& module) {
  size_t rewritten = 0;
  for (Function& fn : module.functions) {
    int8_activations_as_u8(module, fn);
    rewritten += IntegerKernels(module, fn).run();
  }
  return rewritten;
}

}  // namespace hexir::compiler
