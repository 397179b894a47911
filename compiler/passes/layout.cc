#include "passes/layout.h"

#include <algorithm>
#include <optional>

#include "passes/fusion.h"

namespace hexir::compiler {
namespace {

using ops::OpId;

// Below this many input channels per group a convolution stays NCHW (its taps
// would each give the register tile a few multiply-adds), but a stem the
// kernel computes over its window's patch (rewrite_conv).
constexpr int64_t kMinChannelsPerGroup = 8;

std::vector<int64_t> to_nhwc(const std::vector<int64_t>& d) { return {d[0], d[2], d[3], d[1]}; }

// A type of rank 4 or less as rank 4, leading 1s added (numpy broadcasting's alignment).
std::vector<int64_t> rank4_dims(const TensorType& t) {
  std::vector<int64_t> dims(4 - t.rank(), 1);
  dims.insert(dims.end(), t.dims.begin(), t.dims.end());
  return dims;
}

// Its non-unit dims in the same order in NCHW and NHWC (the same bytes either way).
bool order_free(const TensorType& t) {
  if (t.rank() > 4) return false;
  const std::vector<int64_t> dims = rank4_dims(t);
  int64_t last = -1;
  for (int d = 0; d < 4; ++d) {  // in NHWC order: the NCHW dim kToNhwc[d]
    if (dims[static_cast<size_t>(kToNhwc[d])] == 1) continue;
    if (kToNhwc[d] < last) return false;
    last = kToNhwc[d];
  }
  return true;
}

bool is_f32_rank4(const TensorType& t) { return t.dtype == DType::kF32 && t.rank() == 4; }

// A map's operand or result dtype: f32, or the 8-bit values a per-tensor
// quantize_linear / dequantize_linear reads or writes.
bool is_map_rank4(const TensorType& t) {
  return t.rank() == 4 && (t.dtype == DType::kF32 || t.dtype == DType::kU8 || t.dtype == DType::kI8);
}

bool has_perm(const Node& node, const int64_t (&perm)[4]) {
  return node.op == OpId::kTranspose && node.inputs.size() == 1 && node.params.size() == 4 &&
         std::equal(node.params.begin(), node.params.end(), perm);
}

// A reduction's words [keepdims, axes...] for its input channels-last, and
// the dims it then gives; nullopt unless those dims hold the NCHW result's
// elements in the same order (the kept non-unit dims keep their order: a
// global pool's [N,C,1,1] is [N,1,1,C] channels-last, the same bytes).
struct ReduceNhwc {
  std::vector<int64_t> params, dims;
};
std::optional<ReduceNhwc> reduce_nhwc(const Node& node, const TensorType& x) {
  if (!is_f32_rank4(x) || node.params.empty() || node.inputs.size() != 1 || node.results.size() != 1)
    return std::nullopt;
  bool reduced[4] = {node.params.size() == 1, node.params.size() == 1, node.params.size() == 1,
                     node.params.size() == 1};  // no axes: all
  for (size_t i = 1; i < node.params.size(); ++i) {
    if (node.params[i] < 0 || node.params[i] > 3) return std::nullopt;
    reduced[node.params[i]] = true;
  }
  ReduceNhwc r;
  r.params.push_back(node.params[0]);
  std::vector<int64_t> nchw_kept, nhwc_kept;  // the non-unit kept dims, by NCHW axis
  for (int d = 0; d < 4; ++d) {               // NHWC position d holds NCHW axis kToNhwc[d]
    const int64_t axis = kToNhwc[d];
    if (reduced[axis]) r.params.push_back(d);
    if (!reduced[axis] || node.params[0] == 1) r.dims.push_back(reduced[axis] ? 1 : x.dims[axis]);
    if (!reduced[axis] && x.dims[axis] != 1) nhwc_kept.push_back(axis);
    if (!reduced[d] && x.dims[d] != 1) nchw_kept.push_back(d);
  }
  if (node.params.size() == 1) r.params.resize(1);
  if (nchw_kept != nhwc_kept) return std::nullopt;
  return r;
}

class ChannelsLast {
  // A per-tensor quantize_linear or dequantize_linear (one scale, one zero
  // point): an elementwise map of its first operand; quantized_add (of two
  // operands of one shape) too.
  bool quantized_map(const Node& node) const {
    if (node.kind == NodeKind::kOp && node.op == OpId::kQuantizedAdd) return true;
    if (node.kind != NodeKind::kOp || (node.op != OpId::kQuantizeLinear && node.op != OpId::kDequantizeLinear) ||
        node.inputs.size() != 3)
      return false;
    for (int i : {1, 2}) {
      const std::vector<int64_t>& dims = fn_.values[static_cast<size_t>(node.inputs[i])].type.dims;
      if (!std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; })) return false;
    }
    return true;
  }

 public:
  // `barred`: original conv2d nodes that may not start a region (ones whose
  // region did not pay for its conversions on a first run).
  ChannelsLast(Function& fn, std::vector<bool> barred)
      : barred_(std::move(barred)),
        fn_(fn),
        original_(fn.nodes),
        region_(innermost_regions(fn)),
        readers_(fn.values.size()) {
    for (size_t n = 0; n < fn.nodes.size(); ++n)
      for (int v : fn.nodes[n].inputs) readers_[static_cast<size_t>(v)].push_back(static_cast<int>(n));
    returned_.assign(fn.values.size(), false);
    for (int v : fn.outputs) returned_[static_cast<size_t>(v)] = true;
    nhwc_.assign(fn.values.size(), -1);
    channels_last_value_.assign(fn.values.size(), false);
  }

  size_t run() {
    const size_t original = original_.size();
    fn_.nodes.clear();
    std::vector<int64_t> new_index(original, -1);
    std::vector<int> renamed(fn_.values.size(), -1);  // an entry transpose of a channels-last value: that value
    for (size_t n = 0; n < original; ++n) {
      Node node = original_[n];
      original_index_ = n;
      for (int& v : node.inputs)
        if (static_cast<size_t>(v) < renamed.size() && renamed[static_cast<size_t>(v)] >= 0)
          v = renamed[static_cast<size_t>(v)];
      const bool top = region_[n] < 0 && node.kind == NodeKind::kOp;
      bool done = false;
      // The conversions an earlier rewrite put around a channels-last
      // operator (passes/quantized.h): its exit transpose is one of ours, an
      // entry transpose of a value already channels-last is that value.
      if (top && has_perm(node, kToNhwc) && nhwc_[static_cast<size_t>(node.inputs[0])] >= 0 &&
          !returned_[static_cast<size_t>(node.results[0])]) {
        renamed[static_cast<size_t>(node.results[0])] = nhwc_[static_cast<size_t>(node.inputs[0])];
        orphans_.push_back(node.results[0]);
        continue;  // new_index[n] stays -1: nothing refers to it
      }
      if (top && has_perm(node, kToNchw)) {
        new_index[n] = static_cast<int64_t>(fn_.nodes.size());
        fn_.nodes.push_back(std::move(node));
        created_.push_back(fn_.nodes.size() - 1);
        const Node& exit = fn_.nodes.back();
        nhwc_[static_cast<size_t>(exit.results[0])] = exit.inputs[0];
        channels_last_value_[static_cast<size_t>(exit.inputs[0])] = true;
        continue;
      }
      if (top && node.op == OpId::kConv2d) done = rewrite_conv(node, &new_index[n]);
      else if (top && (ops::elementwise_map_arity(node.op) > 0 || quantized_map(node)))
        done = rewrite_map(node, &new_index[n]);
      else if (top && ops::is_reduction(node.op))
        done = rewrite_reduce(node, &new_index[n]);
      else if (top && node.op == OpId::kConcat)
        done = rewrite_concat(node, &new_index[n]);
      else if (top && (node.op == OpId::kMaxPool || node.op == OpId::kAveragePool))
        done = rewrite_pool(node, &new_index[n]);
      if (!done) {
        new_index[n] = static_cast<int64_t>(fn_.nodes.size());
        fn_.nodes.push_back(std::move(node));
      }
      changed_ |= done;
    }
    if (converted_ == 0 && !changed_ && orphans_.empty()) return 0;  // every node went back unchanged
    find_unpaid_regions(new_index);
    renumber_nodes(fn_, original, new_index);  // region markers name each other by node index
    drop_unread_conversions();
    return converted_;
  }

  // Per original node: a conv2d whose region did not pay (run's verdict).
  const std::vector<bool>& unpaid() const { return unpaid_; }

 private:
  // A new result value (its node is set once the nodes are final).
  int add_value(const Value& like, std::vector<int64_t> dims, const std::string& suffix) {
    Value v;
    v.name = like.name + suffix;
    v.type = TensorType{like.type.dtype, std::move(dims)};
    v.byte_size = like.byte_size;  // the same elements in another order or shape
    v.kind = ValueKind::kResult;
    v.loc = like.loc;
    fn_.values.push_back(std::move(v));
    nhwc_.push_back(-1);
    returned_.push_back(false);
    channels_last_value_.push_back(true);
    return static_cast<int>(fn_.values.size()) - 1;
  }

  int emit(OpId op, std::vector<int> inputs, std::vector<int> results, std::vector<int64_t> params,
           const Location& loc) {
    Node node;
    node.op = op;
    node.inputs = std::move(inputs);
    node.results = std::move(results);
    node.params = std::move(params);
    node.loc = loc;
    fn_.nodes.push_back(std::move(node));
    return static_cast<int>(fn_.nodes.size()) - 1;
  }

  // The channels-last form of NCHW value v: the value a moved exit transpose
  // came from, or a new entry transpose of v.
  int nhwc_of(int v, const Location& loc) {
    if (nhwc_[static_cast<size_t>(v)] >= 0) return nhwc_[static_cast<size_t>(v)];
    const Value& value = fn_.values[static_cast<size_t>(v)];
    const int t = add_value(value, to_nhwc(value.type.dims), ".nhwc");
    emit(OpId::kTranspose, {v}, {t}, std::vector<int64_t>(kToNhwc, kToNhwc + 4), loc);
    created_.push_back(fn_.nodes.size() - 1);
    return t;
  }

  // The exit transpose: channels-last value t back into `result`, the NCHW value readers keep reading.
  void exit_to(int t, int result, const Location& loc) {
    emit(OpId::kTranspose, {t}, {result}, std::vector<int64_t>(kToNchw, kToNchw + 4), loc);
    created_.push_back(fn_.nodes.size() - 1);
    nhwc_[static_cast<size_t>(result)] = t;
  }

  // Every reader of v can take it channels-last (a conv2d or an elementwise map at the top level) and it is not returned.
  bool readers_take_nhwc(int v) const {
    if (returned_[static_cast<size_t>(v)]) return false;
    for (int n : readers_[static_cast<size_t>(v)]) {
      const Node& reader = original_node(n);
      if (region_[static_cast<size_t>(n)] >= 0 || reader.kind != NodeKind::kOp) return false;
      if (ops::is_reduction(reader.op)) {
        if (!reduce_nhwc(reader, fn_.values[static_cast<size_t>(v)].type)) return false;
        continue;
      }
      if (reader.op == OpId::kConcat) {
        if (!concat_takes_nhwc(reader)) return false;
        continue;
      }
      if (reader.op == OpId::kMaxPool || reader.op == OpId::kAveragePool) {
        if (!pool_takes_nhwc(reader)) return false;
        continue;
      }
      if (has_perm(reader, kToNhwc)) continue;  // an entry transpose: it becomes the channels-last value
      if (reader.op != OpId::kConv2d && ops::elementwise_map_arity(reader.op) == 0 && !quantized_map(reader))
        return false;
      // A conv2d takes x and its residual channels-last, not its weights or bias.
      if (reader.op == OpId::kConv2d && reader.inputs[0] != v && (reader.inputs.size() < 4 || reader.inputs[3] != v))
        return false;
    }
    return true;
  }

  const Node& original_node(int n) const { return original_[static_cast<size_t>(n)]; }

  bool rewrite_conv(Node& node, int64_t* index) {
    const Value& x = fn_.values[static_cast<size_t>(node.inputs[0])];
    const Value& w = fn_.values[static_cast<size_t>(node.inputs[1])];
    if (node.results.size() != 1 || ops::conv2d_channels_last(node.params) || !is_f32_rank4(x.type) ||
        w.type.rank() != 4)
      return false;
    const int64_t groups = node.params.size() > 8 ? node.params[8] : 1;
    const int64_t c = x.type.dims[1], k = w.type.dims[0];
    const bool depthwise = groups == c && groups == k;
    const int y = node.results[0];
    // Every convolution starts or extends a channels-last region but a stem's
    // (few input channels per group: its taps would each give the register
    // tile a few multiply-adds), which only extends one: channels-last the
    // 1x1 GEMMs put the pixels in rows and the channels in columns, the
    // depthwise kernel keeps a vector of channels per tap, and the reductions,
    // concats and maps between them follow (docs/layout.md).
    // A stem whose window the kernel gathers into one patch
    // (ops::conv2d_channels_last_patch) starts one too: its image's few
    // planes interleave cheaply, and the patch's one pass beat the NCHW stem
    // (ResNet's 7x7: 1.5x), which also left its many channels to convert.
    const bool patch = groups == 1 && c < ops::kConvPatchChannels && w.type.dims[2] * w.type.dims[3] > 1 &&
                       c * w.type.dims[2] * w.type.dims[3] <= ops::kConvPatchFloats;
    const bool narrow = !depthwise && !patch && w.type.dims[1] < kMinChannelsPerGroup;
    const bool starts = nhwc_[static_cast<size_t>(node.inputs[0])] < 0;
    if (starts && (narrow || (!barred_.empty() && barred_[original_index_]))) return false;
    const Value result = fn_.values[static_cast<size_t>(y)];  // a copy: adding values moves them
    const int xt = nhwc_of(node.inputs[0], node.loc);
    const int yt = add_value(result, to_nhwc(result.type.dims), ".nhwc");
    std::vector<int64_t> params = node.params;
    params.push_back(1);
    std::vector<int> inputs = node.inputs;
    inputs[0] = xt;
    if (inputs.size() == 4) inputs[3] = nhwc_of(node.inputs[3], node.loc);  // the residual
    *index = emit(OpId::kConv2d, std::move(inputs), {yt}, std::move(params), node.loc);
    exit_to(yt, y, node.loc);
    ++converted_;
    return true;
  }

  // An operand of a map moved below its exit transpose: channels-last through
  // a moved transpose, as it is when all its dims are 1, or else (order_free)
  // a reshape, a view (a per-channel [1,C,1,1] or [C,1,1]).
  int map_operand(int v, const Location& loc) {
    if (nhwc_[static_cast<size_t>(v)] >= 0) return nhwc_[static_cast<size_t>(v)];
    const Value& value = fn_.values[static_cast<size_t>(v)];
    const std::vector<int64_t> dims = rank4_dims(value.type);
    if (std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; })) return v;
    const int r = add_value(value, to_nhwc(dims), ".nhwc");
    emit(OpId::kReshape, {v}, {r}, to_nhwc(dims), loc);
    return r;
  }

  bool rewrite_map(Node& node, int64_t* index) {
    if (node.results.size() != 1) return false;
    const int r = node.results[0];
    const Value result = fn_.values[static_cast<size_t>(r)];  // a copy: adding values moves them
    const bool quantize = quantized_map(node);
    if (!(quantize ? is_map_rank4(result.type) : is_f32_rank4(result.type)) || !readers_take_nhwc(r)) return false;
    // The operands mapped (not a quantize's scale and zero point).
    const size_t tensors = !quantize ? node.inputs.size() : node.op == OpId::kQuantizedAdd ? 2 : 1;
    bool any = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const int v = node.inputs[i];
      any |= nhwc_[static_cast<size_t>(v)] >= 0;
      if (quantize ? i < tensors && !is_map_rank4(fn_.values[static_cast<size_t>(v)].type)
                   : fn_.values[static_cast<size_t>(v)].type.dtype != DType::kF32)
        return false;
    }
    if (!any) return false;
    // Check every operand before emitting any reshape.
    for (int v : node.inputs)
      if (nhwc_[static_cast<size_t>(v)] < 0 && !order_free(fn_.values[static_cast<size_t>(v)].type)) return false;
    std::vector<int> inputs;
    for (int v : node.inputs) inputs.push_back(map_operand(v, node.loc));
    const int rt = add_value(result, to_nhwc(result.type.dims), ".nhwc");
    *index = emit(node.op, std::move(inputs), {rt}, node.params, node.loc);
    exit_to(rt, r, node.loc);
    return true;
  }

  // A reduction of a channels-last value (a global average pool, a
  // squeeze-and-excitation's mean) reads it in place: its result is the
  // NCHW one, reshaped where keepdims leaves unit dims in other places.
  bool rewrite_reduce(Node& node, int64_t* index) {
    const int x = node.inputs.empty() ? -1 : node.inputs[0];
    if (x < 0 || nhwc_[static_cast<size_t>(x)] < 0) return false;
    const std::optional<ReduceNhwc> r = reduce_nhwc(node, fn_.values[static_cast<size_t>(x)].type);
    if (!r) return false;
    const int y = node.results[0];
    const Value result = fn_.values[static_cast<size_t>(y)];  // a copy: adding values moves them
    if (r->dims == result.type.dims) {
      *index = emit(node.op, {nhwc_[static_cast<size_t>(x)]}, {y}, r->params, node.loc);
      return true;
    }
    const int yt = add_value(result, r->dims, ".nhwc");
    *index = emit(node.op, {nhwc_[static_cast<size_t>(x)]}, {yt}, r->params, node.loc);
    emit(OpId::kReshape, {yt}, {y}, result.type.dims, node.loc);
    return true;
  }

  // A concat along the channels (inception's and densenet's) whose operands
  // and readers take channels-last: along the last dim.
  bool concat_takes_nhwc(const Node& node) const {
    if (node.results.size() != 1 || node.params.size() != 1 || node.params[0] != 1) return false;
    for (int v : node.inputs)
      if (!is_f32_rank4(fn_.values[static_cast<size_t>(v)].type)) return false;
    return true;
  }

  bool rewrite_concat(Node& node, int64_t* index) {
    if (!concat_takes_nhwc(node)) return false;
    const int y = node.results[0];
    bool any = false;
    for (int v : node.inputs) any |= nhwc_[static_cast<size_t>(v)] >= 0;
    if (!any || !readers_take_nhwc(y)) return false;
    const Value result = fn_.values[static_cast<size_t>(y)];  // a copy: adding values moves them
    std::vector<int> inputs;
    for (int v : node.inputs) inputs.push_back(nhwc_of(v, node.loc));
    const int yt = add_value(result, to_nhwc(result.type.dims), ".nhwc");
    *index = emit(OpId::kConcat, std::move(inputs), {yt}, {3}, node.loc);
    exit_to(yt, y, node.loc);
    return true;
  }

  bool pool_takes_nhwc(const Node& node) const {
    const TensorType& x = fn_.values[static_cast<size_t>(node.inputs[0])].type;
    // A max pool of u8 too (a QDQ model's, compiler/passes/quantized.cc).
    return node.results.size() == 1 && !ops::pool2d_channels_last(node.params) &&
           (is_f32_rank4(x) || (node.op == OpId::kMaxPool && x.rank() == 4 && x.dtype == DType::kU8));
  }

  // A pool of a channels-last value stays channels-last (its kernel keeps a
  // vector of channels per tap).
  bool rewrite_pool(Node& node, int64_t* index) {
    const int x = node.inputs[0];
    if (!pool_takes_nhwc(node) || nhwc_[static_cast<size_t>(x)] < 0) return false;
    const int y = node.results[0];
    const Value result = fn_.values[static_cast<size_t>(y)];  // a copy: adding values moves them
    const int yt = add_value(result, to_nhwc(result.type.dims), ".nhwc");
    std::vector<int64_t> params = node.params;
    params.push_back(1);
    *index = emit(node.op, {nhwc_[static_cast<size_t>(x)]}, {yt}, std::move(params), node.loc);
    exit_to(yt, y, node.loc);
    return true;
  }

  // A region of 1x1 and depthwise convolutions (and what follows them) is
  // kept only where its convolutions' work is large against the bytes its
  // conversions move. The bound: a conversion copied ~7.5 GB/s (shufflenet's
  // 5.6 MB of copies in 0.74 ms) and channels-last saves ~10 % of a
  // convolution's ~70 GFLOP/s, so a region pays from ~100 flops per
  // converted byte. A shufflenet branch between two channel shuffles (1x1,
  // depthwise, 1x1 at 28 x 28: 15) lost more to its transposes than its
  // convolutions gained; a whole mobilenet, converted once in and once out,
  // gains. Regions with a dense window are kept as they always were. Marks
  // the convolutions of the others in unpaid_ (the caller reruns the pass
  // with them barred from starting a region).
  void find_unpaid_regions(const std::vector<int64_t>& new_index) {
    constexpr double kMinFlopsPerConversionByte = 100;
    const size_t values = fn_.values.size();
    std::vector<int> parent(values);
    for (size_t v = 0; v < values; ++v) parent[v] = static_cast<int>(v);
    auto find = [&](int v) {
      while (parent[static_cast<size_t>(v)] != v)
        v = parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
      return v;
    };
    auto is_nhwc = [&](int v) { return channels_last_value_[static_cast<size_t>(v)]; };
    std::vector<int> reads(values, 0);
    for (const Node& node : fn_.nodes)
      for (int v : node.inputs) ++reads[static_cast<size_t>(v)];
    for (int v : fn_.outputs) ++reads[static_cast<size_t>(v)];
    std::vector<double> flops(values, 0), bytes(values, 0);
    std::vector<bool> dense(values, false);
    std::vector<int> original_of(fn_.nodes.size(), -1);
    for (size_t n = 0; n < new_index.size(); ++n)
      if (new_index[n] >= 0) original_of[static_cast<size_t>(new_index[n])] = static_cast<int>(n);
    for (const Node& node : fn_.nodes) {  // union every node's channels-last operands and results
      int root = -1;
      for (const std::vector<int>* list : {&node.inputs, &node.results})
        for (int v : *list) {
          if (!is_nhwc(v)) continue;
          if (root < 0)
            root = find(v);
          else
            parent[static_cast<size_t>(find(v))] = root;
        }
    }
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      const Node& node = fn_.nodes[n];
      if (node.kind != NodeKind::kOp) continue;
      if (node.op == OpId::kTranspose && node.inputs.size() == 1 && node.results.size() == 1) {
        const int in = node.inputs[0], out = node.results[0];
        if (is_nhwc(out) && !is_nhwc(in))
          bytes[static_cast<size_t>(find(out))] += fn_.values[static_cast<size_t>(in)].byte_size;  // an entry
        if (is_nhwc(in) && !is_nhwc(out) && reads[static_cast<size_t>(out)] > 0)
          bytes[static_cast<size_t>(find(in))] +=
              fn_.values[static_cast<size_t>(out)].byte_size;  // a live exit
      } else if (node.op == OpId::kConv2d && ops::conv2d_channels_last(node.params)) {
        const TensorType& w = fn_.values[static_cast<size_t>(node.inputs[1])].type;
        const size_t r = static_cast<size_t>(find(node.results[0]));
        double outputs = 1;
        for (int64_t d : fn_.values[static_cast<size_t>(node.results[0])].type.dims)
          outputs *= static_cast<double>(d);
        flops[r] += 2.0 * outputs * static_cast<double>(w.dims[1] * w.dims[2] * w.dims[3]);
        const int64_t c = fn_.values[static_cast<size_t>(node.inputs[0])].type.dims[3];
        const int64_t groups = node.params.size() > 8 ? node.params[8] : 1;
        if (!(groups == c && groups == w.dims[0]) && w.dims[2] * w.dims[3] > 1 &&
            w.dims[1] >= kMinChannelsPerGroup)
          dense[r] = true;
      }
    }
    unpaid_.assign(original_.size(), false);
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      const Node& node = fn_.nodes[n];
      if (node.kind != NodeKind::kOp || node.op != OpId::kConv2d || !ops::conv2d_channels_last(node.params) ||
          original_of[n] < 0)
        continue;
      const size_t r = static_cast<size_t>(find(node.results[0]));
      if (!dense[r] && flops[r] < kMinFlopsPerConversionByte * bytes[r])
        unpaid_[static_cast<size_t>(original_of[n])] = true;
    }
  }

  // The transposes this pass added that nothing reads: an exit transpose
  // every reader of which moved below it.
  void drop_unread_conversions() {
    std::vector<int> reads(fn_.values.size(), 0);
    for (const Node& node : fn_.nodes)
      for (int v : node.inputs) ++reads[static_cast<size_t>(v)];
    for (int v : fn_.outputs) ++reads[static_cast<size_t>(v)];
    std::vector<bool> node_dropped(fn_.nodes.size(), false), value_dropped(fn_.values.size(), false);
    bool any = !orphans_.empty();
    for (int v : orphans_) value_dropped[static_cast<size_t>(v)] = true;
    for (size_t n : created_) {
      const int v = fn_.nodes[n].results[0];
      if (reads[static_cast<size_t>(v)] != 0) continue;
      node_dropped[n] = value_dropped[static_cast<size_t>(v)] = any = true;
    }
    if (any) drop(fn_, node_dropped, std::move(value_dropped));
  }

  std::vector<bool> barred_;  // per original node (empty: none)
  Function& fn_;
  const std::vector<Node> original_;  // the nodes before the rewrite: region_ and readers_ index them
  std::vector<int> region_;
  std::vector<std::vector<int>> readers_;  // per original value: the original nodes reading it
  std::vector<bool> returned_;
  std::vector<int> nhwc_;  // per value: the channels-last value it is the exit transpose of, or -1
  std::vector<size_t> created_;  // the transposes added (indices into fn_.nodes)
  size_t converted_ = 0;
  std::vector<bool> channels_last_value_;  // per value: one this pass added (a channels-last form)
  std::vector<bool> unpaid_;
  std::vector<int> orphans_;  // results of entry transposes left out (their readers read the channels-last value)
  bool changed_ = false;      // a node other than a conv2d was rewritten
  size_t original_index_ = 0;  // the original node being rewritten
};

}  // namespace

size_t choose_channels_last(Module& module) {
  size_t converted = 0;
  for (Function& fn : module.functions) {
    const Function before = fn;
    ChannelsLast first(fn, {});
    size_t n = first.run();
    const std::vector<bool>& unpaid = first.unpaid();
    if (std::find(unpaid.begin(), unpaid.end(), true) != unpaid.end()) {
      fn = before;
      n = ChannelsLast(fn, unpaid).run();
    }
    converted += n;
  }
  return converted;
}

size_t choose_winograd(Module& module) {
  size_t chosen = 0;
  for (Function& fn : module.functions)
    for (Node& node : fn.nodes) {
      if (node.kind != NodeKind::kOp || node.op != OpId::kConv2d || !ops::conv2d_channels_last(node.params) ||
          ops::conv2d_winograd(node.params) || node.inputs.size() < 2 || node.results.size() != 1)
        continue;
      const Value& x = fn.values[static_cast<size_t>(node.inputs[0])];
      const Value& w = fn.values[static_cast<size_t>(node.inputs[1])];
      const TensorType& y = fn.values[static_cast<size_t>(node.results[0])].type;
      const std::vector<int64_t>& p = node.params;  // strides, pads, dilations, groups
      if (w.kind != ValueKind::kConstant || !is_f32_rank4(x.type) || !is_f32_rank4(w.type) || y.rank() != 4 ||
          w.type.dims[2] != 3 || w.type.dims[3] != 3 || p[0] != 1 || p[1] != 1 || p[6] != 1 || p[7] != 1 || p[8] != 1)
        continue;
      const int64_t c = x.type.dims[3];
      if (c < 32 || c > 256 || y.dims[1] * y.dims[2] < 100) continue;
      // F(4x4, 3x3) (layout word 3: 36 multiply-adds per channel for 16 outputs, F(2x2, 3x3)'s 64) on
      // maps of 400 pixels or more whose 4x4 tiles cover little more than the 2x2 ones (a 14 x 14
      // map's 16 x 16: its U, 36 / 16 of F(2x2)'s bytes, read for few tiles, was slower in a chain of
      // convolutions; docs/layout.md).
      const int64_t oh = y.dims[1], ow = y.dims[2];
      const int64_t cover4 = (oh + 3) / 4 * 4 * ((ow + 3) / 4 * 4), cover2 = (oh + 1) / 2 * 2 * ((ow + 1) / 2 * 2);
      node.params.back() = oh * ow >= 400 && cover4 * 100 <= cover2 * 115 ? 3 : 2;
      ++chosen;
    }
  return chosen;
}

}  // namespace hexir::compiler
