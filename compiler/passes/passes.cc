#include "passes/passes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "hexir/format/prelude.h"
#include "ir/constant_data.h"

namespace hexir::compiler {

// ---- constants ----------------------------------------------------------------

namespace {

// Whether every element of `c` equals its first one (bytewise), reading the
// bytes a chunk at a time and stopping at the first difference. Sets
// `pattern` to that element.
Result<bool> all_elements_equal(const Constant& c, std::vector<uint8_t>* pattern) {
  const size_t element = dtype_size(c.type.dtype);
  if (c.byte_size == 0 || c.byte_size % element != 0) return false;
  ConstantReader reader(c);
  uint64_t position = 0;
  // A small first piece: most weights differ within their first elements.
  size_t piece_size = 4096;
  while (reader.remaining() > 0) {
    HEXIR_ASSIGN_OR_RETURN(std::span<const uint8_t> piece, reader.next(piece_size));
    piece_size = kConstantChunkSize;
    if (position == 0) pattern->assign(piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(element));
    for (size_t i = 0; i < piece.size(); ++i)
      if (piece[i] != (*pattern)[(position + i) % element]) return false;
    position += piece.size();
  }
  return true;
}

}  // namespace

Status detect_splats(const Module& module, ConstantPlan& plan) {
  plan.fills.assign(module.constants.size(), std::nullopt);
  for (size_t i = 0; i < module.constants.size(); ++i) {
    const Constant& c = module.constants[i];
    const uint64_t element = dtype_size(c.type.dtype);
    if (const auto* fill = std::get_if<FillPattern>(&c.source)) {
      plan.fills[i] = Fill{fill->element, c.byte_size / element};
      continue;
    }
    std::vector<uint8_t> pattern;
    HEXIR_ASSIGN_OR_RETURN(bool splat, all_elements_equal(c, &pattern));
    if (splat) plan.fills[i] = Fill{std::move(pattern), c.byte_size / element};
  }
  return ok_status();
}

Status dedupe_constants(const Module& module, ConstantPlan& plan) {
  std::vector<bool> used(module.constants.size(), false);
  for (const Function& fn : module.functions)
    for (const Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) used[static_cast<size_t>(v.constant)] = true;
  if (plan.fills.size() != module.constants.size()) plan.fills.assign(module.constants.size(), std::nullopt);

  // Key on everything that makes two constants interchangeable except the
  // bytes themselves, which are hashed (weights can be large) and compared
  // in full on a hash match. The name is not part of it: the first name wins.
  using Key = std::tuple<DType, std::vector<int64_t>, bool, std::vector<uint8_t>, uint64_t, uint64_t>;
  std::map<Key, std::vector<int>> candidates;  // key -> indices into plan.stored
  plan.stored.clear();
  plan.stored_index.assign(module.constants.size(), -1);
  for (size_t i = 0; i < module.constants.size(); ++i) {
    if (!used[i]) continue;
    const Constant& c = module.constants[i];
    const std::optional<Fill>& fill = plan.fills[i];
    uint64_t hash = 0;
    if (!fill) {
      StreamingChecksum64 checksum;
      HEXIR_RETURN_IF_ERROR(for_each_chunk(c, [&](std::span<const uint8_t> piece) {
        checksum.update(piece);
        return ok_status();
      }));
      hash = checksum.finish();
    }
    Key key{c.type.dtype,           c.type.dims,
            fill.has_value(),       fill ? fill->pattern : std::vector<uint8_t>(),
            fill ? fill->count : 0, hash};
    std::vector<int>& same_key = candidates[key];
    int match = -1;
    for (int k : same_key) {
      // Fills with one key are equal; data is compared byte for byte.
      bool equal = fill.has_value();
      if (!equal) {
        const Constant& kept =
            module.constants[static_cast<size_t>(plan.stored[static_cast<size_t>(k)].constant)];
        HEXIR_ASSIGN_OR_RETURN(equal, same_bytes(kept, c));
      }
      if (equal) {
        match = k;
        break;
      }
    }
    if (match < 0) {
      match = static_cast<int>(plan.stored.size());
      same_key.push_back(match);
      StoredConstant stored;
      stored.constant = static_cast<int>(i);
      stored.fill = fill;
      plan.stored.push_back(std::move(stored));
    }
    plan.stored_index[i] = match;
  }
  return ok_status();
}

bool module_has_rodata(const ConstantPlan& plan) {
  return std::any_of(plan.stored.begin(), plan.stored.end(), [](const StoredConstant& c) { return !c.fill; });
}

uint64_t pack_constants(const Module& module, ConstantPlan& plan) {
  // Device constants in one section, streamed ones in another.
  uint64_t end[2] = {0, 0};
  for (StoredConstant& c : plan.stored) {
    if (c.fill) continue;
    uint64_t& section_end = end[c.streamed ? 1 : 0];
    const uint64_t offset =
        (section_end + format::kConstantAlignment - 1) / format::kConstantAlignment * format::kConstantAlignment;
    c.rodata_offset = offset;
    section_end = offset + module.constants[static_cast<size_t>(c.constant)].byte_size;
  }
  plan.rodata_size = end[0];
  plan.streamed_rodata_size = end[1];
  return end[0];
}

uint64_t device_constant_bytes(const Module& module, const ConstantPlan& plan) {
  uint64_t bytes = 0;
  for (const StoredConstant& c : plan.stored)
    if (!c.streamed) bytes += module.constants[static_cast<size_t>(c.constant)].byte_size;
  return bytes;
}

// ---- storage ------------------------------------------------------------------

namespace {

int find_root(std::vector<int>& parent, int v) {
  while (parent[static_cast<size_t>(v)] != v) {
    parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
    v = parent[static_cast<size_t>(v)];
  }
  return v;
}

// Per value id: the index of the argument whose value it is, or -1.
std::vector<int> arguments_by_value(const Function& fn, const FunctionPlan& plan) {
  std::vector<int> argument(plan.values.size(), -1);
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const size_t v = static_cast<size_t>(fn.arguments[a].value);
    if (v < argument.size() && argument[v] < 0) argument[v] = static_cast<int>(a);
  }
  return argument;
}

// An if's yielded values written straight into its results: per graph value,
// the result it is, or -1. Legal when the value is written by an op directly
// in that branch (not a nested region) and yielded once there.
std::vector<int> branch_yields(const Function& fn, const std::vector<int>& innermost) {
  std::vector<int> merged(fn.values.size(), -1);
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& node = fn.nodes[n];
    if (node.kind != NodeKind::kIfElse && node.kind != NodeKind::kIfEnd) continue;
    const Node& begin = fn.nodes[static_cast<size_t>(node.params[0])];
    const Node& end = fn.nodes[static_cast<size_t>(begin.params[1])];
    // The branch this node closes is opened by the kIfBegin (then) or the kIfElse (else).
    const int opener = node.kind == NodeKind::kIfElse ? static_cast<int>(node.params[0]) : static_cast<int>(begin.params[0]);
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int y = node.inputs[j];
      const Value& yv = fn.values[static_cast<size_t>(y)];
      if (yv.kind != ValueKind::kResult || yv.node < 0 || innermost[static_cast<size_t>(yv.node)] != opener) continue;
      const Node& writer = fn.nodes[static_cast<size_t>(yv.node)];
      if (writer.kind != NodeKind::kOp || ops::op_def(writer.op).is_view) continue;
      if (std::count(node.inputs.begin(), node.inputs.end(), y) != 1) continue;
      merged[static_cast<size_t>(y)] = end.results[j];
    }
  }
  return merged;
}

// Loop-carried values written in place: per graph value, the carried value
// it is (substituted for it in the program), or -1. A yielded value y takes
// the carried value a's place when y has a's dtype and size, the op writing y
// runs directly in the loop's body (not in a nested loop) and y is yielded
// only there and a nowhere else; so does each value before y in an in-place
// chain (y = f(c1) in place on c1, c1 = g(c2) in place on c2, ...: nothing
// reads c_k after its successor's writer), back to a link that runs in place
// on a itself or to a fresh write, with nothing reading a after that link.
// The yield's copy is then the writes themselves: the decoder's chain of
// update_slice on its KV cache runs in the cache's own buffer.
std::vector<int> carried_updates(const Function& fn) {
  std::vector<int> merged(fn.values.size(), -1);
  const std::vector<int> innermost = innermost_regions(fn);
  // Per value: the last node reading it or a view of it (views: the root's reads).
  std::vector<int> view_root(fn.values.size());
  for (size_t v = 0; v < fn.values.size(); ++v) view_root[v] = static_cast<int>(v);
  std::vector<int> last_reader(fn.values.size(), -1);
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& node = fn.nodes[n];
    if (node.kind == NodeKind::kOp && ops::op_def(node.op).is_view)
      view_root[static_cast<size_t>(node.results[0])] = view_root[static_cast<size_t>(node.inputs[0])];
    for (int in : node.inputs) last_reader[static_cast<size_t>(view_root[static_cast<size_t>(in)])] = static_cast<int>(n);
  }
  for (size_t e = 0; e < fn.nodes.size(); ++e) {
    const Node& end = fn.nodes[e];
    if (end.kind != NodeKind::kLoopEnd) continue;
    const int b = static_cast<int>(end.params[0]);
    const Node& begin = fn.nodes[static_cast<size_t>(b)];
    std::vector<bool> yielded(fn.values.size(), false);
    for (int y : end.inputs) yielded[static_cast<size_t>(y)] = true;
    for (size_t j = 0; j < end.inputs.size(); ++j) {
      const int y = end.inputs[j], a = begin.results[j + 1];
      const Value& av = fn.values[static_cast<size_t>(a)];
      bool elsewhere = false;
      for (size_t k = 0; k < end.inputs.size(); ++k)
        if (k != j && (end.inputs[k] == y || end.inputs[k] == a)) elsewhere = true;
      if (elsewhere || merged[static_cast<size_t>(y)] >= 0) continue;
      // A value of this loop's own body, of a's type, written by an op.
      auto in_body = [&](int v) {
        const Value& value = fn.values[static_cast<size_t>(v)];
        if (value.kind != ValueKind::kResult || value.node <= b || static_cast<size_t>(value.node) >= e) return false;
        const Node& writer = fn.nodes[static_cast<size_t>(value.node)];
        return writer.kind == NodeKind::kOp && innermost[static_cast<size_t>(value.node)] == b &&
               !ops::op_def(writer.op).is_view && value.type == av.type && value.byte_size == av.byte_size &&
               merged[static_cast<size_t>(v)] < 0;
      };
      // Whether the writer of `v` reads `c` only at operands it may run in place on.
      auto runs_in_place_on = [&](int v, int c, bool* reads) {
        const Value& value = fn.values[static_cast<size_t>(v)];
        const Node& writer = fn.nodes[static_cast<size_t>(value.node)];
        const ops::OpDef& def = ops::op_def(writer.op);
        bool legal = true;
        *reads = false;
        for (size_t i = 0; i < writer.inputs.size(); ++i) {
          if (writer.inputs[i] != c) continue;
          *reads = true;
          if (i >= 32 || !((def.in_place_inputs >> i) & 1u)) legal = false;
        }
        return !*reads || (legal && def.may_run_in_place && value.result == 0);
      };
      if (!in_body(y)) continue;
      // The chain y <- c1 <- c2 ... back to a write of a (in place) or a
      // fresh write: each link's writer runs in place on the previous value,
      // which nothing reads after it. All of it then lives in a's slot.
      std::vector<int> chain = {y};
      bool ok = false;
      for (int cur = y;;) {
        const int w = fn.values[static_cast<size_t>(cur)].node;
        bool reads_a = false;
        if (!runs_in_place_on(cur, a, &reads_a)) break;
        if (reads_a) {
          ok = last_reader[static_cast<size_t>(a)] <= w;
          break;
        }
        int next = -1;
        for (int c : fn.nodes[static_cast<size_t>(w)].inputs) {
          bool reads_c = false;
          if (c == cur || !in_body(c) || yielded[static_cast<size_t>(c)] || last_reader[static_cast<size_t>(c)] != w ||
              !runs_in_place_on(cur, c, &reads_c))
            continue;
          next = c;
          break;
        }
        if (next < 0) {  // a fresh write: a must be dead by then
          ok = last_reader[static_cast<size_t>(a)] <= w;
          break;
        }
        chain.push_back(next);
        cur = next;
      }
      if (!ok) continue;
      for (int v : chain) merged[static_cast<size_t>(v)] = a;
    }
  }
  return merged;
}

// Carried values that live in a donated input's buffer (a KV cache updated
// in place by the loop): per graph value, the argument value it is, or -1.
// Legal when the loop is not inside another loop, the carried value's initial
// value is a donated argument that nothing else reads (nor a view of it, nor
// a return), and the loop's result for it is returned (the donation's output,
// of the argument's type). The initial copy then disappears and the caller's
// buffer is the carried value throughout.
std::vector<int> carried_in_donated_inputs(const Function& fn) {
  std::vector<int> merged(fn.values.size(), -1);
  std::vector<int> readers(fn.values.size(), 0), root(fn.values.size());
  for (size_t v = 0; v < fn.values.size(); ++v) root[v] = static_cast<int>(v);
  for (const Node& node : fn.nodes) {
    if (node.kind == NodeKind::kOp && ops::op_def(node.op).is_view)
      root[static_cast<size_t>(node.results[0])] = root[static_cast<size_t>(node.inputs[0])];
    for (int in : node.inputs) ++readers[static_cast<size_t>(root[static_cast<size_t>(in)])];
  }
  std::vector<int> returned(fn.values.size(), 0);
  for (int out : fn.outputs) ++returned[static_cast<size_t>(out)];
  int depth = 0;
  for (const Node& node : fn.nodes) {
    if (node.kind == NodeKind::kLoopEnd) --depth;
    if (node.kind != NodeKind::kLoopBegin) continue;
    if (depth++ > 0) continue;
    const Node& end = fn.nodes[static_cast<size_t>(node.params[1])];
    for (size_t j = 2; j < node.inputs.size(); ++j) {
      const int x = node.inputs[j], a = node.results[j - 1], r = end.results[j - 2];
      const Value& xv = fn.values[static_cast<size_t>(x)];
      if (xv.kind != ValueKind::kInput || !fn.arguments[static_cast<size_t>(xv.input_index)].donate) continue;
      if (readers[static_cast<size_t>(x)] != 1 || returned[static_cast<size_t>(x)] != 0) continue;
      if (returned[static_cast<size_t>(r)] == 0 || end.inputs[j - 2] == a) continue;
      merged[static_cast<size_t>(a)] = x;
    }
  }
  return merged;
}

// Strided views (docs/views.md): which view-able nodes become views and
// which materialize their view with a copy, and where every view lies in the
// value it views.
struct StridedViews {
  enum Kind : uint8_t { kAsBefore, kView, kMaterialize };
  std::vector<uint8_t> node;            // per node
  std::vector<int> root;                // per graph value: the value whose storage it views (itself if none)
  std::vector<ops::ViewLayout> layout;  // per graph value: where it lies in root
  // kMaterialize nodes: the layout in root[input] of the view their copy reads.
  std::vector<ops::ViewLayout> source;
};

bool whole_root(const Function& fn, const StridedViews& views, int v) {
  const size_t i = static_cast<size_t>(v);
  const ops::ViewLayout& l = views.layout[i];
  return l.offset == 0 && !l.strided() &&
         fn.values[i].byte_size == fn.values[static_cast<size_t>(views.root[i])].byte_size;
}

// The stride of a layout's innermost dim that is not 1 (1 when row-major or
// all dims are 1): a view whose inner stride is neither 1 nor 0 is permuted,
// its kernels walk its base across rows.
int64_t inner_stride(const std::vector<int64_t>& dims, const ops::ViewLayout& layout) {
  if (!layout.strided()) return 1;
  for (size_t d = dims.size(); d-- > 0;)
    if (dims[d] != 1) return layout.strides[d];
  return 1;
}

bool permuted_view(const Function& fn, const StridedViews& views, size_t v) {
  const int64_t s = inner_stride(fn.values[v].type.dims, views.layout[v]);
  return views.root[v] != static_cast<int>(v) && s != 0 && s != 1;
}

// The cost rule (docs/views.md): each kernel reading a permuted view walks
// its base across rows (x^T: down the columns, a row's length apart), a
// cache miss per element once the base does not fit in cache. One such
// kernel costs no more than the copy would (which walks it the same way
// once); two or more cost a column walk each where the copy costs one and
// lets them read row-major. So a permuted view (inner stride not 0 or 1)
// whose base is larger than kPermutedViewCacheBytes and that is read by
// more than one kernel (directly, or through views of it that are permuted
// too; a copy materializing a view of it counts as one) is materialized.
// Slices with inner stride 1 and expands (stride 0) never are: their
// kernels read whole cache lines in order. Where a permuted view's readers
// all lie behind one permuted view of it that qualifies itself, that view
// is copied instead (it is never larger, and chains copy the last step).
// Marks the views in `materialize`; returns whether it marked any.
bool materialize_costly_permuted_views(const Function& fn, const StridedViews& views,
                                       const std::vector<std::vector<std::pair<int, size_t>>>& readers,
                                       std::vector<bool>& materialize) {
  const size_t value_count = fn.values.size();
  // Kernels (nodes) reading each permuted view, its permuted views' included.
  // A view's node comes after the node of what it views, so one pass over
  // the nodes from the back sees every child before its parent.
  std::vector<std::set<int>> kernels(value_count);
  std::vector<bool> candidate(value_count, false);
  std::vector<int> behind(value_count, -1);  // the one permuted view all of v's kernels read through
  for (size_t n = fn.nodes.size(); n-- > 0;) {
    if (views.node[n] != StridedViews::kView) continue;
    const size_t v = static_cast<size_t>(fn.nodes[n].results[0]);
    if (!permuted_view(fn, views, v) || materialize[v]) continue;
    int children = 0, direct = 0, child = -1;
    for (const auto& [n, operand] : readers[v]) {
      const Node& reader = fn.nodes[static_cast<size_t>(n)];
      if (views.node[static_cast<size_t>(n)] == StridedViews::kView) {
        const size_t r = static_cast<size_t>(reader.results[0]);
        if (!permuted_view(fn, views, r) || kernels[r].empty()) continue;
        kernels[v].insert(kernels[r].begin(), kernels[r].end());
        ++children;
        child = static_cast<int>(r);
      } else if (kernels[v].insert(n).second) {
        ++direct;
      }
    }
    const size_t base = static_cast<size_t>(views.root[v]);
    candidate[v] = kernels[v].size() > 1 && fn.values[base].byte_size > kPermutedViewCacheBytes;
    if (children == 1 && direct == 0) behind[v] = child;
  }
  bool marked = false;
  for (size_t v = 0; v < value_count; ++v) {
    if (!candidate[v]) continue;
    if (behind[v] >= 0 && candidate[static_cast<size_t>(behind[v])]) continue;
    materialize[v] = marked = true;
  }
  return marked;
}

StridedViews plan_strided_views(const Function& fn) {
  const size_t value_count = fn.values.size();
  StridedViews views;
  const std::vector<int> innermost = innermost_regions(fn);
  std::vector<std::vector<std::pair<int, size_t>>> readers(value_count);  // (node, operand)
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    for (size_t i = 0; i < fn.nodes[n].inputs.size(); ++i)
      readers[static_cast<size_t>(fn.nodes[n].inputs[i])].emplace_back(static_cast<int>(n), i);
  std::vector<int> returned(value_count, 0);
  for (int out : fn.outputs) ++returned[static_cast<size_t>(out)];
  // Values that must be row-major values of their own; only grows, so the
  // loop ends (each round materializes at least one more or stops).
  std::vector<bool> materialize(value_count, false);
  for (;;) {
    views.node.assign(fn.nodes.size(), StridedViews::kAsBefore);
    views.root.resize(value_count);
    views.layout.assign(value_count, {});
    views.source.assign(fn.nodes.size(), {});
    for (size_t v = 0; v < value_count; ++v) views.root[v] = static_cast<int>(v);
    bool grown = false;
    for (size_t n = 0; n < fn.nodes.size(); ++n) {
      const Node& node = fn.nodes[n];
      if (node.kind != NodeKind::kOp || !ops::can_be_view(node.op)) continue;
      const size_t x = static_cast<size_t>(node.inputs[0]), r = static_cast<size_t>(node.results[0]);
      const TensorType& xt = fn.values[x].type;
      const TensorType& rt = fn.values[r].type;
      const bool top_level = innermost[n] < 0;
      if (!top_level) {
        // Computed (or reshaped) inside a loop or an if: of a row-major
        // value that fills its root, materialized at the top level once
        // rather than on every pass.
        if (!whole_root(fn, views, static_cast<int>(x)) && !materialize[x]) materialize[x] = grown = true;
        if (node.op == ops::OpId::kReshape) {
          views.root[r] = views.root[x];
          views.layout[r] = {views.layout[x].offset, {}};
        }
        continue;
      }
      std::optional<ops::ViewLayout> layout = ops::result_view_layout(node.op, xt, views.layout[x], node.params, rt);
      if (node.op == ops::OpId::kReshape && !views.layout[x].strided()) {  // a view already
        views.root[r] = views.root[x];
        views.layout[r] = {views.layout[x].offset, {}};
        if (materialize[r] && !whole_root(fn, views, static_cast<int>(r))) {
          views.node[n] = StridedViews::kMaterialize;
          views.source[n] = views.layout[r];
          views.root[r] = static_cast<int>(r);
          views.layout[r] = {};
        }
        continue;
      }
      if (!layout) {
        // Computed by the operator's own kernel, which reads x row-major.
        if (views.layout[x].strided() && !materialize[x]) materialize[x] = grown = true;
        continue;
      }
      if (materialize[r]) {
        views.node[n] = StridedViews::kMaterialize;
        views.source[n] = *layout;
        continue;
      }
      views.node[n] = StridedViews::kView;
      views.root[r] = views.root[x];
      views.layout[r] = std::move(*layout);
    }
    // A view some reader cannot read where it lies is materialized.
    for (size_t v = 0; v < value_count; ++v) {
      if (views.root[v] == static_cast<int>(v) || materialize[v] || whole_root(fn, views, static_cast<int>(v)))
        continue;
      bool needed = returned[v] > 0;
      for (const auto& [n, operand] : readers[v]) {
        const Node& reader = fn.nodes[static_cast<size_t>(n)];
        if (reader.kind != NodeKind::kOp || innermost[static_cast<size_t>(n)] >= 0) {
          needed = true;
        } else if (views.layout[v].strided() && !ops::can_be_view(reader.op) &&
                   !ops::accepts_strided_layout(reader.op, operand, fn.values[v].type.dims, views.layout[v].strides)) {
          needed = true;
        }
      }
      if (needed) materialize[v] = grown = true;
    }
    // The cost rule, on layouts that no longer change: a permuted view of a
    // base too large for cache, read by several kernels, is copied once.
    if (!grown) grown = materialize_costly_permuted_views(fn, views, readers, materialize);
    if (!grown) return views;
  }
}

}  // namespace

uint64_t copied_bytes(const Function& fn, const FunctionPlan& plan) {
  uint64_t bytes = 0;
  for (const Instruction& inst : plan.program) {
    if (inst.control != Control::kNone || inst.outputs.empty()) continue;
    if (inst.op == ops::OpId::kTranspose || inst.op == ops::OpId::kSlice || inst.op == ops::OpId::kExpand ||
        inst.op == ops::OpId::kCopy)
      for (int out : inst.outputs) bytes += value_at(fn, plan, out).byte_size;
  }
  return bytes;
}

void assign_storage(const Function& fn, FunctionPlan& plan, bool strided_views) {
  plan = FunctionPlan();
  const int graph_values = static_cast<int>(fn.values.size());
  std::vector<int> merged = carried_updates(fn);
  const std::vector<int> in_input = carried_in_donated_inputs(fn);
  const std::vector<int> in_result = branch_yields(fn, innermost_regions(fn));
  for (int v = 0; v < graph_values; ++v) {
    if (in_input[static_cast<size_t>(v)] >= 0) merged[static_cast<size_t>(v)] = in_input[static_cast<size_t>(v)];
    if (in_result[static_cast<size_t>(v)] >= 0) merged[static_cast<size_t>(v)] = in_result[static_cast<size_t>(v)];
  }
  // The value whose slot `v` uses: a yielded value its carried value's, a
  // carried value its donated input's (chains of at most two).
  auto subst = [&](int v) {
    while (v < graph_values && merged[static_cast<size_t>(v)] >= 0) v = merged[static_cast<size_t>(v)];
    return v;
  };
  // Union-find over storage: a view joins its input's set, a loop's result
  // its carried value's, an in-place update its carried value's. The
  // representative chosen is always the set's written value (the producer,
  // input, constant or carried value).
  std::vector<int> parent(static_cast<size_t>(graph_values));
  for (int v = 0; v < graph_values; ++v) parent[static_cast<size_t>(v)] = v;
  for (int v = 0; v < graph_values; ++v)
    if (merged[static_cast<size_t>(v)] >= 0) parent[static_cast<size_t>(v)] = subst(v);
  // Values the plan adds: ids after the graph's (plan.added).
  auto add_value = [&](std::string name, TensorType type, uint64_t bytes) {
    Value value;
    value.name = std::move(name);
    value.type = std::move(type);
    value.byte_size = bytes;
    value.kind = ValueKind::kResult;
    const int id = graph_values + static_cast<int>(plan.added.size());
    plan.added.push_back(std::move(value));
    parent.push_back(id);
    return id;
  };
  auto copy = [&](int from, int to) {
    Instruction inst;
    inst.op = ops::OpId::kCopy;
    inst.inputs = {from};
    inst.outputs = {to};
    plan.program.push_back(std::move(inst));
  };
  const StridedViews views = strided_views ? plan_strided_views(fn) : StridedViews{};
  std::vector<std::pair<int, int>> materialized;  // (the view a copy reads, its node)
  std::vector<int64_t> loop_begin_at;  // open loops: program index of their kLoopBegin
  std::vector<int64_t> branch_at;      // open ifs: program index of their kBranchIfZero, then of their kJump
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& node = fn.nodes[n];
    if (node.kind == NodeKind::kIfBegin) {
      Instruction inst;
      inst.control = Control::kBranchIfZero;
      inst.node = static_cast<int>(n);
      inst.inputs = {subst(node.inputs[0])};
      branch_at.push_back(static_cast<int64_t>(plan.program.size()));
      plan.program.push_back(std::move(inst));
      continue;
    }
    if (node.kind == NodeKind::kIfElse || node.kind == NodeKind::kIfEnd) {
      // The branch's yields: copies into the if's results (none for values
      // written there already).
      const Node& begin = fn.nodes[static_cast<size_t>(node.params[0])];
      const Node& end = fn.nodes[static_cast<size_t>(begin.params[1])];
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int to = subst(end.results[j]);
        if (find_root(parent, subst(node.inputs[j])) != find_root(parent, to)) copy(subst(node.inputs[j]), to);
      }
      const int64_t at = branch_at.back();
      if (node.kind == NodeKind::kIfElse) {
        Instruction jump;
        jump.control = Control::kJump;
        jump.node = static_cast<int>(n);
        branch_at.back() = static_cast<int64_t>(plan.program.size());
        plan.program.push_back(std::move(jump));
        plan.program[static_cast<size_t>(at)].target = static_cast<int64_t>(plan.program.size());
      } else {
        plan.program[static_cast<size_t>(at)].target = static_cast<int64_t>(plan.program.size());
        branch_at.pop_back();
      }
      continue;
    }
    if (node.kind == NodeKind::kLoopBegin) {
      // The carried values take their initial values (copies); the counter
      // is the induction variable's value.
      for (size_t j = 2; j < node.inputs.size(); ++j)
        if (subst(node.results[j - 1]) != node.inputs[j]) copy(node.inputs[j], subst(node.results[j - 1]));
      Instruction inst;
      inst.control = Control::kLoopBegin;
      inst.node = static_cast<int>(n);
      inst.inputs = {node.inputs[0], node.inputs[1]};
      inst.outputs = {node.results[0]};
      loop_begin_at.push_back(static_cast<int64_t>(plan.program.size()));
      plan.program.push_back(std::move(inst));
      continue;
    }
    if (node.kind == NodeKind::kLoopEnd) {
      const Node& begin = fn.nodes[static_cast<size_t>(node.params[0])];
      // The yield: each carried value takes its next value. A yielded value
      // that is another carried value of this loop (a swap) is first copied
      // aside, so no copy reads a value an earlier one overwrote.
      std::vector<int> sources(node.inputs.size());
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int y = subst(node.inputs[j]);
        int y_root = find_root(parent, y);
        sources[j] = y;
        for (size_t k = 0; k < node.inputs.size(); ++k) {
          if (k == j || find_root(parent, begin.results[k + 1]) != y_root) continue;
          const Value& yv = fn.values[static_cast<size_t>(node.inputs[j])];
          const int aside = add_value(yv.name + ".yield" + std::to_string(j), yv.type, yv.byte_size);
          copy(y, aside);
          sources[j] = aside;
          break;
        }
      }
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int a = subst(begin.results[j + 1]);
        if (find_root(parent, sources[j]) != find_root(parent, a)) copy(sources[j], a);
        parent[static_cast<size_t>(node.results[j])] = find_root(parent, a);  // the result is the carried value
      }
      const int64_t head = loop_begin_at.back();
      loop_begin_at.pop_back();
      Instruction next;
      next.control = Control::kLoopNext;
      next.node = static_cast<int>(n);
      next.inputs = {begin.inputs[1], begin.results[0]};
      next.outputs = {begin.results[0]};
      next.target = head + 1;
      next.step = begin.params[0];
      plan.program[static_cast<size_t>(head)].target = static_cast<int64_t>(plan.program.size()) + 1;
      plan.loops.emplace_back(head, static_cast<int64_t>(plan.program.size()));
      plan.program.push_back(std::move(next));
      continue;
    }
    if (node.kind == NodeKind::kFail) {
      Instruction inst;
      inst.control = Control::kFail;
      inst.node = static_cast<int>(n);
      inst.message = node.message;
      plan.program.push_back(std::move(inst));
      continue;
    }
    if (node.kind == NodeKind::kOp && strided_views && views.node[n] != StridedViews::kAsBefore) {
      const int result = node.results[0];
      const int base = find_root(parent, subst(node.inputs[0]));
      if (views.node[n] == StridedViews::kView) {
        parent[static_cast<size_t>(result)] = base;
        continue;
      }
      // Materialized: one copy from a view of the base into the result.
      const Value& rv = fn.values[static_cast<size_t>(result)];
      const int view = add_value(rv.name + ".view", rv.type, rv.byte_size);
      parent[static_cast<size_t>(view)] = base;
      materialized.emplace_back(view, static_cast<int>(n));
      copy(view, subst(result));
      continue;
    }
    if (ops::op_def(node.op).is_view) {
      parent[static_cast<size_t>(node.results[0])] = find_root(parent, subst(node.inputs[0]));
      continue;
    }
    Instruction inst;
    inst.op = node.op;
    inst.node = static_cast<int>(n);
    for (int in : node.inputs) inst.inputs.push_back(subst(in));
    for (int out : node.results) inst.outputs.push_back(subst(out));
    if (inst.outputs != node.results) {  // writes a carried value in place
      inst.writes_carried = true;
      for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
        if (inst.inputs[i] == inst.outputs[0]) inst.alias_mask |= 1u << i;
    }
    plan.program.push_back(std::move(inst));
  }
  const int all_values = graph_values + static_cast<int>(plan.added.size());
  plan.values.resize(static_cast<size_t>(all_values));
  for (int v = 0; v < all_values; ++v)
    plan.values[static_cast<size_t>(v)].storage_root = find_root(parent, v);
  for (int v = 0; v < all_values; ++v) {
    ValuePlan& p = plan.values[static_cast<size_t>(v)];
    if (p.storage_root != v) continue;
    const Value& value = value_at(fn, plan, v);
    switch (value.kind) {
      case ValueKind::kInput:
        p.storage = Storage::kInput;
        p.storage_index = static_cast<uint32_t>(value.input_index);
        break;
      case ValueKind::kConstant:
        p.storage = Storage::kConstant;
        p.storage_index = static_cast<uint32_t>(value.constant);
        break;
      case ValueKind::kResult:
        p.storage = Storage::kArena;
        break;
    }
  }

  // Outputs: bind the root when it can be written straight into the caller's
  // buffer, else copy.
  plan.outputs.assign(fn.outputs.size(), -1);
  plan.donated_to.assign(fn.arguments.size(), -1);
  std::set<int> bound_roots;
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    const int returned = fn.outputs[i];
    const int root = plan.values[static_cast<size_t>(returned)].storage_root;
    // A loop's result carried in its donated input's buffer: that buffer is
    // the output (the donation is decided here, not below).
    if (const Value& r = value_at(fn, plan, root);
        r.kind == ValueKind::kInput && returned != root && bound_roots.count(root) == 0 &&
        value_at(fn, plan, returned).kind == ValueKind::kResult &&
        std::find(in_input.begin(), in_input.end(), root) != in_input.end() && r.type == fn.result_types[i]) {
      bound_roots.insert(root);
      plan.donated_to[static_cast<size_t>(r.input_index)] = static_cast<int>(i);
      plan.outputs[i] = returned;
      continue;
    }
    const bool needs_copy = value_at(fn, plan, root).kind != ValueKind::kResult || bound_roots.count(root) > 0;
    if (!needs_copy) {
      bound_roots.insert(root);
      plan.values[static_cast<size_t>(root)].storage = Storage::kOutput;
      plan.values[static_cast<size_t>(root)].storage_index = static_cast<uint32_t>(i);
      plan.outputs[i] = returned;
      continue;
    }
    const Value& source = fn.values[static_cast<size_t>(returned)];
    Value copy;
    copy.name = source.name + ".out" + std::to_string(i);
    copy.type = source.type;
    copy.byte_size = source.byte_size;
    copy.kind = ValueKind::kResult;
    copy.loc = source.loc;
    const int copy_id = value_count(fn, plan);
    plan.added.push_back(std::move(copy));
    ValuePlan copy_plan;
    copy_plan.storage_root = copy_id;
    copy_plan.storage = Storage::kOutput;
    copy_plan.storage_index = static_cast<uint32_t>(i);
    plan.values.push_back(copy_plan);
    Instruction inst;
    inst.op = ops::OpId::kCopy;
    inst.inputs = {returned};
    inst.outputs = {copy_id};
    plan.program.push_back(std::move(inst));
    plan.outputs[i] = copy_id;
  }

  // Views take their root's storage.
  for (ValuePlan& p : plan.values) {
    const ValuePlan& root = plan.values[static_cast<size_t>(p.storage_root)];
    p.storage = root.storage;
    p.storage_index = root.storage_index;
  }
  // Where each view lies in its root (offsets and strides are relative to
  // the graph value viewed, which shares its storage root's buffer from its start).
  plan.copied_bytes = copied_bytes(fn, plan);
  plan.copied_bytes_without_views = plan.copied_bytes;
  if (strided_views) {
    auto place = [&](int v, const ops::ViewLayout& layout) {
      ValuePlan& p = plan.values[static_cast<size_t>(v)];
      if (p.storage_root == v) return;
      p.view_offset = layout.offset;
      p.view_strides = layout.strides;
      p.partial_view = layout.offset != 0 || layout.strided() ||
                       value_at(fn, plan, v).byte_size != value_at(fn, plan, p.storage_root).byte_size;
    };
    for (int v = 0; v < graph_values; ++v) place(v, views.layout[static_cast<size_t>(v)]);
    for (const auto& [view, node] : materialized) {
      place(view, views.source[static_cast<size_t>(node)]);
      plan.copied_bytes_without_views -= value_at(fn, plan, view).byte_size;
    }
    for (size_t n = 0; n < fn.nodes.size(); ++n)
      if (views.node[n] != StridedViews::kAsBefore && fn.nodes[n].op != ops::OpId::kReshape)
        plan.copied_bytes_without_views += fn.values[static_cast<size_t>(fn.nodes[n].results[0])].byte_size;
  }

  // Each donated input takes the first output of its type not taken yet:
  // outputs queued per type, so N donations cost O(N log N), not O(N^2).
  using TypeKey = std::pair<DType, std::vector<int64_t>>;
  std::map<TypeKey, std::vector<int>> free_outputs;  // per type: output indices, last one first
  const size_t result_count = std::min(fn.result_types.size(), fn.outputs.size());
  std::vector<bool> taken(result_count, false);
  for (int j : plan.donated_to)
    if (j >= 0 && static_cast<size_t>(j) < result_count) taken[static_cast<size_t>(j)] = true;
  for (size_t j = result_count; j-- > 0;)
    if (!taken[j]) free_outputs[{fn.result_types[j].dtype, fn.result_types[j].dims}].push_back(static_cast<int>(j));
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (!arg.donate || plan.donated_to[a] >= 0) continue;
    const TensorType& type = fn.values[static_cast<size_t>(arg.value)].type;
    auto it = free_outputs.find(TypeKey{type.dtype, type.dims});
    if (it == free_outputs.end() || it->second.empty()) continue;
    plan.donated_to[a] = it->second.back();
    it->second.pop_back();
  }
}

int buffer_head(const FunctionPlan& plan, int value) {
  int v = plan.values[static_cast<size_t>(value)].storage_root;
  // Each link goes to a value written earlier, so the walk ends.
  while (plan.values[static_cast<size_t>(v)].buffer_prev >= 0)
    v = plan.values[static_cast<size_t>(plan.values[static_cast<size_t>(v)].buffer_prev)].storage_root;
  return v;
}

BufferHeads::BufferHeads(const FunctionPlan& plan) : up_(plan.values.size()) {
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& value = plan.values[v];
    const int root = value.storage_root;
    if (root != static_cast<int>(v)) {
      up_[v] = root;
    } else if (value.buffer_prev >= 0) {
      up_[v] = plan.values[static_cast<size_t>(value.buffer_prev)].storage_root;
    } else {
      up_[v] = root;
    }
  }
}

int BufferHeads::head(int value) {
  size_t v = static_cast<size_t>(value);
  // Path halving: every other value on the way skips to its grandparent.
  // Links go to values written earlier, so the walk ends.
  while (up_[v] != static_cast<int>(v)) {
    up_[v] = up_[static_cast<size_t>(up_[v])];
    v = static_cast<size_t>(up_[v]);
  }
  return static_cast<int>(v);
}

void BufferHeads::link(int value, int onto) { up_[static_cast<size_t>(head(value))] = head(onto); }

Uses compute_uses(const FunctionPlan& plan) {
  Uses uses;
  uses.last_read.assign(plan.values.size(), -1);
  uses.def.assign(plan.values.size(), -1);
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction& inst = plan.program[i];
    for (int input : inst.inputs)
      uses.last_read[static_cast<size_t>(plan.values[static_cast<size_t>(input)].storage_root)] =
          static_cast<int64_t>(i);
    for (int output : inst.outputs) {
      const size_t root = static_cast<size_t>(plan.values[static_cast<size_t>(output)].storage_root);
      if (uses.def[root] < 0) uses.def[root] = static_cast<int64_t>(i);
    }
  }
  if (plan.loops.empty()) return uses;
  // Loops: a value written before a loop and read or written again inside it
  // is live around the back edge, so to the loop's kLoopNext (inner loops
  // first: an outer loop then sees the extended use).
  std::vector<int64_t> last_access(plan.values.size(), -1);
  for (size_t i = 0; i < plan.program.size(); ++i) {
    for (int v : plan.program[i].inputs)
      last_access[static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root)] = static_cast<int64_t>(i);
    for (int v : plan.program[i].outputs)
      last_access[static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root)] = static_cast<int64_t>(i);
  }
  for (const auto& [begin, next] : plan.loops)
    for (size_t v = 0; v < plan.values.size(); ++v) {
      const int64_t def = uses.def[v];
      if (def < 0 || def >= begin) continue;
      if (std::max(uses.last_read[v], last_access[v]) < begin) continue;
      if (uses.last_read[v] < next) uses.last_read[v] = next;
      last_access[v] = std::max(last_access[v], next);
    }
  return uses;
}

namespace {

// Whether `inst` reads root `c` through a view with an offset, strides or
// fewer bytes (docs/views.md): writing its result into c's buffer would
// overwrite elements the kernel has yet to read.
bool reads_partial_view(const FunctionPlan& plan, const Instruction& inst, int c) {
  for (int input : inst.inputs) {
    const ValuePlan& p = plan.values[static_cast<size_t>(input)];
    if (p.storage_root == c && p.partial_view) return true;
  }
  return false;
}

}  // namespace

void assign_in_place(const Function& fn, FunctionPlan& plan, bool arena_values) {
  const Uses uses = compute_uses(plan);
  BufferHeads heads(plan);
  const std::vector<int> argument = arguments_by_value(fn, plan);
  for (size_t k = 0; k < plan.program.size(); ++k) {
    Instruction& inst = plan.program[k];
    if (inst.control != Control::kNone || inst.writes_carried) continue;  // alias bits fixed by assign_storage
    inst.alias_mask = 0;
    if (!ops::op_def(inst.op).may_run_in_place || inst.outputs.empty()) continue;
    // Only output 0 ever runs in place.
    const int out = plan.values[static_cast<size_t>(inst.outputs[0])].storage_root;
    ValuePlan& result = plan.values[static_cast<size_t>(out)];
    const Value& result_value = value_at(fn, plan, out);
    if (result.buffer_prev >= 0) continue;
    // An arena result may reuse an arena buffer; a result bound to output j
    // only the donated input whose donated_to is j.
    int target_output = -1;
    if (result.storage == Storage::kOutput) {
      target_output = static_cast<int>(result.storage_index);
    } else if (result.storage != Storage::kArena || !arena_values) {
      continue;
    }
    int best = -1;
    uint64_t best_freed = 0;
    const uint32_t allowed = ops::op_def(inst.op).in_place_inputs;
    for (size_t operand = 0; operand < inst.inputs.size(); ++operand) {
      if (operand >= 32 || !((allowed >> operand) & 1u)) continue;  // the operator reads it while writing
      const int c = plan.values[static_cast<size_t>(inst.inputs[operand])].storage_root;
      const ValuePlan& candidate = plan.values[static_cast<size_t>(c)];
      const Value& candidate_value = value_at(fn, plan, c);
      if (uses.last_read[static_cast<size_t>(c)] != static_cast<int64_t>(k)) continue;  // still read later
      if (reads_partial_view(plan, inst, c)) continue;  // its elements move while the result is written
      if (candidate_value.byte_size != result_value.byte_size ||
          candidate_value.type.dtype != result_value.type.dtype)
        continue;
      const int head = heads.head(c);
      bool legal = false;
      if (target_output < 0) {
        // Transient buffers only: never a constant, an input or an output.
        legal = value_at(fn, plan, head).kind == ValueKind::kResult &&
                plan.values[static_cast<size_t>(head)].storage == Storage::kArena &&
                candidate.storage == Storage::kArena;
      } else if (candidate_value.kind == ValueKind::kInput && candidate.buffer_prev < 0) {
        const int a = argument[static_cast<size_t>(c)];
        legal = a >= 0 && fn.arguments[static_cast<size_t>(a)].donate &&
                plan.donated_to[static_cast<size_t>(a)] == target_output;
      }
      if (!legal) continue;
      // Every candidate has the result's byte size, so each frees as much;
      // the first in operand order wins a tie.
      const uint64_t freed = candidate_value.byte_size;
      if (best < 0 || freed > best_freed) {
        best = c;
        best_freed = freed;
      }
    }
    if (best < 0) continue;
    result.buffer_prev = best;
    heads.link(out, best);
    for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
      if (plan.values[static_cast<size_t>(inst.inputs[i])].storage_root == best) inst.alias_mask |= 1u << i;
  }
}

namespace {

// The donated input `input`'s buffer for the in-place chain ending at
// `result` (straight-line programs): from the chain's first value back, each
// writer runs in place on an input it reads last (an arena result, which
// then joins the chain, or at last `input` itself). A KV cache updated layer
// after layer by update_slice: the copy into the arena before the first
// update and out of it after the last go. Links nothing unless the walk
// reaches `input`.
bool chain_to_donated_input(const Function& fn, FunctionPlan& plan, const Uses& uses, BufferHeads& heads,
                            int result, int input) {
  struct Link {
    int value, onto;
    size_t instruction;
  };
  std::vector<Link> links;
  const Value& want = value_at(fn, plan, result);
  for (int cur = heads.head(result);;) {
    const int64_t w = uses.def[static_cast<size_t>(cur)];
    if (w < 0 || plan.values[static_cast<size_t>(cur)].buffer_prev >= 0) return false;
    const Instruction& inst = plan.program[static_cast<size_t>(w)];
    if (inst.control != Control::kNone || inst.writes_carried || inst.outputs.empty() ||
        plan.values[static_cast<size_t>(inst.outputs[0])].storage_root != cur || !ops::op_def(inst.op).may_run_in_place)
      return false;
    const uint32_t allowed = ops::op_def(inst.op).in_place_inputs;
    int next = -1;
    for (size_t operand = 0; operand < inst.inputs.size() && operand < 32; ++operand) {
      if (!((allowed >> operand) & 1u)) continue;
      const int c = plan.values[static_cast<size_t>(inst.inputs[operand])].storage_root;
      const Value& cv = value_at(fn, plan, c);
      if (uses.last_read[static_cast<size_t>(c)] != w || cv.byte_size != want.byte_size ||
          cv.type.dtype != want.type.dtype || reads_partial_view(plan, inst, c))
        continue;
      if (c == input || (cv.kind == ValueKind::kResult && plan.values[static_cast<size_t>(c)].storage == Storage::kArena)) {
        next = c;
        if (c == input) break;
      }
    }
    if (next < 0) return false;
    links.push_back({cur, next, static_cast<size_t>(w)});
    if (next == input) break;
    cur = heads.head(next);  // written before `w`: the walk ends
  }
  for (const Link& l : links) {
    plan.values[static_cast<size_t>(l.value)].buffer_prev = l.onto;
    heads.link(l.value, l.onto);
    Instruction& inst = plan.program[l.instruction];
    for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
      if (plan.values[static_cast<size_t>(inst.inputs[i])].storage_root == l.onto) inst.alias_mask |= 1u << i;
  }
  return true;
}

}  // namespace

void place_donations(const Function& fn, FunctionPlan& plan, bool in_place_chains) {
  const Uses uses = compute_uses(plan);
  BufferHeads heads(plan);
  bool straight_line = true;
  for (const Instruction& inst : plan.program) straight_line = straight_line && !is_branching(inst.control);
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (!arg.donate || plan.donated_to[a] < 0) continue;
    const size_t j = static_cast<size_t>(plan.donated_to[a]);
    const int result = plan.values[static_cast<size_t>(plan.outputs[j])].storage_root;
    ValuePlan& r = plan.values[static_cast<size_t>(result)];
    if (heads.head(result) == arg.value) continue;  // an in-place chain already ends there
    if (in_place_chains && straight_line && chain_to_donated_input(fn, plan, uses, heads, result, arg.value)) continue;
    // Written straight into the donated buffer: legal when the input (with
    // its views) is read by no instruction from the writer on.
    if (value_at(fn, plan, result).kind == ValueKind::kResult && r.storage == Storage::kOutput &&
        r.buffer_prev < 0 && uses.def[static_cast<size_t>(result)] >= 0 &&
        uses.last_read[static_cast<size_t>(arg.value)] < uses.def[static_cast<size_t>(result)]) {
      r.buffer_prev = arg.value;
      heads.link(result, arg.value);
      continue;
    }
    plan.donated_to[a] = -1;  // no legal way: the input stays read-only
  }
  // Storage follows the buffer's head (views already share their root's).
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& head = plan.values[static_cast<size_t>(heads.head(static_cast<int>(v)))];
    plan.values[v].storage = head.storage;
    plan.values[v].storage_index = head.storage_index;
  }
}

void schedule_for_memory(const Function& fn, FunctionPlan& plan) {
  // Blocks are not reordered across control instructions (yet).
  for (const Instruction& inst : plan.program)
    if (inst.control != Control::kNone) return;
  const size_t n = plan.program.size();
  const size_t value_total = plan.values.size();
  auto root_of = [&](int v) { return plan.values[static_cast<size_t>(v)].storage_root; };
  std::vector<int> producer(value_total, -1);  // per storage root
  for (size_t k = 0; k < n; ++k)
    for (int output : plan.program[k].outputs)
      producer[static_cast<size_t>(root_of(output))] = static_cast<int>(k);
  // Distinct roots each instruction reads, its successors, and readers left per root.
  std::vector<std::vector<int>> reads(n);
  std::vector<std::vector<int>> successors(n);
  std::vector<int> waiting(n, 0);
  std::vector<int> readers_left(value_total, 0);
  std::vector<int64_t> read_by(value_total, -1);  // the last instruction that listed the root
  for (size_t k = 0; k < n; ++k) {
    for (int input : plan.program[k].inputs) {
      const int root = root_of(input);
      if (read_by[static_cast<size_t>(root)] == static_cast<int64_t>(k)) continue;
      read_by[static_cast<size_t>(root)] = static_cast<int64_t>(k);
      reads[k].push_back(root);
      ++readers_left[static_cast<size_t>(root)];
      const int p = producer[static_cast<size_t>(root)];
      if (p >= 0 && p != static_cast<int>(k)) {
        successors[static_cast<size_t>(p)].push_back(static_cast<int>(k));
        ++waiting[k];
      }
    }
  }
  auto arena_bytes = [&](int root) -> int64_t {
    return plan.values[static_cast<size_t>(root)].storage == Storage::kArena
               ? static_cast<int64_t>(value_at(fn, plan, root).byte_size)
               : 0;
  };
  // Per root, the sum of the indices of its readers not yet scheduled: when
  // one reader is left, that sum names it.
  std::vector<int64_t> reader_sum(value_total, 0);
  for (size_t k = 0; k < n; ++k)
    for (int root : reads[k]) reader_sum[static_cast<size_t>(root)] += static_cast<int64_t>(k);
  // The ready instructions by (arena bytes allocated - bytes freed, index):
  // the first is the pick. A ready instruction's key changes only when it
  // becomes the last reader of one of its inputs, so each pick costs
  // O(log n) per input it reads instead of a scan of everything ready.
  std::vector<int64_t> delta(n, 0);
  std::vector<bool> is_ready(n, false);
  std::set<std::pair<int64_t, int>> ready;
  auto make_ready = [&](int k) {
    int64_t d = 0;
    for (int output : plan.program[static_cast<size_t>(k)].outputs) d += arena_bytes(root_of(output));
    for (int root : reads[static_cast<size_t>(k)])
      if (readers_left[static_cast<size_t>(root)] == 1) d -= arena_bytes(root);
    delta[static_cast<size_t>(k)] = d;
    is_ready[static_cast<size_t>(k)] = true;
    ready.insert({d, k});
  };
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) make_ready(static_cast<int>(k));
  std::vector<Instruction> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int k = ready.begin()->second;
    ready.erase(ready.begin());
    is_ready[static_cast<size_t>(k)] = false;
    for (int root : reads[static_cast<size_t>(k)]) {
      const size_t r = static_cast<size_t>(root);
      reader_sum[r] -= k;
      if (--readers_left[r] != 1) continue;
      // The one reader left now frees this root: if it is ready, its key drops.
      const size_t last = static_cast<size_t>(reader_sum[r]);
      if (!is_ready[last]) continue;
      ready.erase({delta[last], static_cast<int>(last)});
      delta[last] -= arena_bytes(root);
      ready.insert({delta[last], static_cast<int>(last)});
    }
    for (int next : successors[static_cast<size_t>(k)])
      if (--waiting[static_cast<size_t>(next)] == 0) make_ready(next);
    order.push_back(plan.program[static_cast<size_t>(k)]);
  }
  plan.program = std::move(order);  // a DAG: every instruction was scheduled
}

void record_workspaces(const Function& fn, FunctionPlan& plan) {
  plan.workspace_size = 0;
  std::vector<TensorType> types;
  for (Instruction& inst : plan.program) {
    if (inst.control != Control::kNone) continue;
    types.clear();
    for (int input : inst.inputs) types.push_back(value_at(fn, plan, input).type);
    inst.workspace_size = ops::workspace_bytes(inst.op, types, params_of(fn, inst));
    inst.workspace_offset = 0;
    plan.workspace_size = std::max(plan.workspace_size, inst.workspace_size);
  }
}

void record_last_uses(const Function&, FunctionPlan& plan) {
  const Uses uses = compute_uses(plan);
  for (size_t v = 0; v < plan.values.size(); ++v) {
    ValuePlan& value = plan.values[v];
    value.last_use = -1;
    if (value.storage_root != static_cast<int>(v) || value.storage != Storage::kArena) continue;
    value.last_use = uses.last_read[v] >= 0 ? uses.last_read[v] : uses.def[v];
  }
}

std::vector<LiveRange> compute_live_ranges(const Function& fn, const FunctionPlan& plan, Storage space) {
  const Uses uses = compute_uses(plan);
  std::vector<LiveRange> ranges;
  std::vector<int> range_of(plan.values.size(), -1);  // per buffer head
  BufferHeads heads(plan);
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& value = plan.values[v];
    if (value.storage_root != static_cast<int>(v) || value.storage != space) continue;
    const int head = heads.head(static_cast<int>(v));
    const int64_t def = uses.def[v] < 0 ? 0 : uses.def[v];
    const int64_t end = std::max(def, uses.last_read[v]) + 1;
    if (range_of[static_cast<size_t>(head)] < 0) {
      range_of[static_cast<size_t>(head)] = static_cast<int>(ranges.size());
      LiveRange range;
      range.root = head;
      range.buffer.size = value_at(fn, plan, head).byte_size;
      range.buffer.lower = def;
      range.buffer.upper = end;
      ranges.push_back(range);
      continue;
    }
    PlanBuffer& buffer = ranges[static_cast<size_t>(range_of[static_cast<size_t>(head)])].buffer;
    buffer.lower = std::min(buffer.lower, def);
    buffer.upper = std::max(buffer.upper, end);
  }
  return ranges;
}

Status plan_function_arena(const Function& fn, FunctionPlan& plan, PlanStrategy strategy, uint32_t alignment,
                           std::string* heuristic, uint64_t plan_budget_ms) {
  // Every arena offset is a multiple of the alignment; below an element's
  // size a value could start at an address its loads cannot use (a fault on
  // GPUs, misaligned vector loads on CPUs). Refused, naming the value.
  for (size_t v = 0; v < plan.values.size(); ++v) {
    if (plan.values[v].storage != Storage::kArena && plan.values[v].storage != Storage::kHost) continue;
    const Value& value = value_at(fn, plan, static_cast<int>(v));
    const uint32_t element = dtype_size(value.type.dtype);
    if (alignment >= element || value.byte_size == 0) continue;
    return error_at(value.loc,
                    "arena alignment " + std::to_string(alignment) + " is below the " +
                        std::to_string(element) + "-byte elements of %" + value.name + " (" +
                        value.type.to_string() + ") in @" + fn.name +
                        ": its offset could be misaligned for its type; use an alignment of at least " +
                        std::to_string(element));
  }
  // Kernel scratch holds doubles: it goes into the arena only at offsets
  // that keep them aligned (else the shared workspace, aligned past the arena).
  if (alignment < kScratchAlignment) plan.workspace_in_arena = false;
  std::vector<LiveRange> ranges = compute_live_ranges(fn, plan);
  std::vector<PlanBuffer> buffers;
  buffers.reserve(ranges.size());
  for (const LiveRange& r : ranges) buffers.push_back(r.buffer);
  // Scratch in the arena: one buffer per instruction that needs some, live
  // only while it runs; they follow the value buffers in `buffers`.
  std::vector<size_t> scratch_of;
  if (plan.workspace_in_arena && strategy != PlanStrategy::kFreeAtLastUse) {
    for (size_t k = 0; k < plan.program.size(); ++k) {
      if (plan.program[k].workspace_size == 0) continue;
      scratch_of.push_back(k);
      buffers.push_back(
          {plan.program[k].workspace_size, static_cast<int64_t>(k), static_cast<int64_t>(k) + 1});
    }
  }
  if (strategy == PlanStrategy::kFreeAtLastUse) {
    // No static plan: the VM allocates at run time; offsets stay 0.
    for (ValuePlan& value : plan.values) value.arena_offset = 0;
    plan.arena_size = 0;
    plan.lower_bound = live_lower_bound(buffers);
    if (heuristic) *heuristic = "free-at-last-use";
    return ok_status();
  }
  Result<BufferPlan> placed = strategy == PlanStrategy::kNaive
                                  ? plan_naive(buffers, alignment)
                                  : plan_arena(buffers, {alignment, plan_budget_ms});
  if (!placed.ok()) return placed.status().annotate("planning the arena of @" + fn.name);
  // The planner is checked on every compile: a wrong plan corrupts results silently.
  HEXIR_RETURN_IF_ERROR(check_buffer_plan(buffers, *placed, alignment).annotate("arena plan of @" + fn.name));
  for (size_t i = 0; i < ranges.size(); ++i)
    plan.values[static_cast<size_t>(ranges[i].root)].arena_offset = placed->offsets[i];
  for (size_t j = 0; j < scratch_of.size(); ++j)
    plan.program[scratch_of[j]].workspace_offset = placed->offsets[ranges.size() + j];
  BufferHeads heads(plan);
  for (size_t v = 0; v < plan.values.size(); ++v)
    plan.values[v].arena_offset =
        plan.values[static_cast<size_t>(heads.head(static_cast<int>(v)))].arena_offset;
  plan.arena_size = placed->size;
  plan.lower_bound = live_lower_bound(buffers);
  if (heuristic) *heuristic = placed->heuristic;
  // The host arena (offloaded values): the same planner over its values alone.
  plan.host_arena_size = plan.host_lower_bound = 0;
  const std::vector<LiveRange> host = compute_live_ranges(fn, plan, Storage::kHost);
  if (host.empty()) return ok_status();
  std::vector<PlanBuffer> host_buffers;
  for (const LiveRange& r : host) host_buffers.push_back(r.buffer);
  Result<BufferPlan> host_placed = strategy == PlanStrategy::kNaive
                                       ? plan_naive(host_buffers, alignment)
                                       : plan_arena(host_buffers, {alignment, plan_budget_ms});
  if (!host_placed.ok()) return host_placed.status().annotate("planning the host arena of @" + fn.name);
  HEXIR_RETURN_IF_ERROR(
      check_buffer_plan(host_buffers, *host_placed, alignment).annotate("host arena plan of @" + fn.name));
  for (size_t i = 0; i < host.size(); ++i)
    plan.values[static_cast<size_t>(host[i].root)].arena_offset = host_placed->offsets[i];
  plan.host_arena_size = host_placed->size;
  plan.host_lower_bound = live_lower_bound(host_buffers);
  return ok_status();
}

}  // namespace hexir::compiler
