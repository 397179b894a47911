#include "passes/views.h"

#include <set>

#include "hexir/ops/widen.h"

namespace hexir::compiler {

namespace {

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

}  // namespace

StridedViews plan_strided_views(const Function& fn, const std::vector<int>& innermost) {
  const size_t value_count = fn.values.size();
  StridedViews views;
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
      std::optional<ops::ViewLayout> layout =
          ops::result_view_layout(node.op, xt, views.layout[x], node.params, rt);
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
      if (views.root[v] == static_cast<int>(v) || materialize[v] ||
          whole_root(fn, views, static_cast<int>(v)))
        continue;
      bool needed = returned[v] > 0;
      for (const auto& [n, operand] : readers[v]) {
        const Node& reader = fn.nodes[static_cast<size_t>(n)];
        if (reader.kind != NodeKind::kOp || innermost[static_cast<size_t>(n)] >= 0) {
          needed = true;
        } else if (views.layout[v].strided() && !ops::can_be_view(reader.op) &&
                   (!ops::accepts_strided_layout(reader.op, operand, fn.values[v].type.dims,
                                                 views.layout[v].strides) ||
                    // half operands are staged to f32 row-major (ops/widen.h)
                    (ops::is_half(fn.values[v].type.dtype) && ops::widens_halves(reader.op)))) {
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

}  // namespace hexir::compiler
