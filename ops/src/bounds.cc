// Bounded dims (docs/design-notes.md): which results of an operator carry a
// bounded dim, and whose run-time extent it is. One rule for every operator,
// so the builder, the verifier and the plans agree; an operator this rule
// does not list is refused a bounded operand with a message naming it.
#include <algorithm>

#include "util.h"

namespace hexir::ops {
namespace internal {
namespace {

// Operators computed element by element over broadcast operands: a bounded
// dim goes to the same dim of the result (right-aligned), and computing
// over the padding is harmless (the producers zero it).
bool is_broadcast_map(OpId op) {
  if (elementwise_map_arity(op) != 0) return true;
  switch (op) {
    case OpId::kCast:
    case OpId::kCopy:
    case OpId::kWhere:
    case OpId::kMod:
    case OpId::kNot:
    case OpId::kAnd:
    case OpId::kOr:
    case OpId::kXor:
    case OpId::kLessOrEqual:
    case OpId::kGreaterOrEqual:
      return true;
    default:
      return false;
  }
}

// The operators that make a bounded dim: their count is the last result.
bool makes_bound(OpId op) {
  return op == OpId::kNonZero || op == OpId::kNonMaxSuppression || op == OpId::kCompress;
}

struct Bound {
  int dim = -1;  // the result's bounded dim, -1: none
  ExtentSource source;
};

Status refuse(OpId id, size_t input, const TensorType& type, const char* why) {
  return invalid_argument(prefix(id) + "operand " + std::to_string(input) + " (" + type.to_string() +
                          ") has a bounded dim " + std::to_string(type.bounded) + ": " + why);
}

// Input i's bounded dim lands in dim `dim` of the result (or the rule refuses it).
void pass(Bound& b, int dim, size_t input) {
  b.dim = dim;
  b.source.inputs.push_back(static_cast<int>(input));
}

// The rule: per result, its bounded dim and source; an error for operands
// whose bounded dim this operator would mix data across.
Result<std::vector<Bound>> bound_rule(OpId id, std::span<const TensorType> in, std::span<const int64_t> params,
                                      std::span<const TensorType> out) {
  std::vector<Bound> bounds(out.size());
  if (makes_bound(id)) {
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].has_bound())
        return refuse(id, i, in[i], "its padding would be read as data (not supported yet)");
    bounds[0].dim = id == OpId::kNonZero ? 1 : id == OpId::kNonMaxSuppression ? 0 : out[0].bounded;
    bounds[0].source.result = static_cast<int>(out.size()) - 1;
    return bounds;
  }
  if (id == OpId::kBound) {  // its extent is its operand 1
    if (in[0].has_bound()) return refuse(id, 0, in[0], "it is bounded already (unbound it first)");
    bounds[0].dim = params.empty() ? -1 : static_cast<int>(params[0]);
    bounds[0].source.operand = 1;
    return bounds;
  }
  bool any = false;
  for (const TensorType& t : in) any = any || t.has_bound();
  if (!any) return bounds;
  if (out.empty()) return bounds;
  Bound& b = bounds[0];
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorType& t = in[i];
    if (!t.has_bound()) continue;
    const int d = t.bounded;
    if (id == OpId::kUnbound) {
      continue;  // the stored elements as a plain value
    } else if (id == OpId::kSplit && !params.empty() && params[0] != d) {
      for (Bound& each : bounds) pass(each, d, i);  // every part keeps the other dims' bound
      continue;
    } else if (id == OpId::kCompact && i == 0) {
      pass(b, d, i);
    } else if (id == OpId::kCompact) {
      return refuse(id, i, t, "an extent has no bounded dim");
    } else if (is_broadcast_map(id)) {
      const int r = static_cast<int>(out[0].rank()) - static_cast<int>(t.rank()) + d;
      if (out[0].dims[static_cast<size_t>(r)] != t.dims[static_cast<size_t>(d)])
        return refuse(id, i, t, "it would be broadcast");
      if (b.dim >= 0 && b.dim != r) return refuse(id, i, t, "the operands' bounded dims differ");
      pass(b, r, i);
    } else if (id == OpId::kTranspose) {
      for (size_t k = 0; k < params.size(); ++k)
        if (params[k] == d) pass(b, static_cast<int>(k), i);
    } else if (id == OpId::kReshape) {
      // The dim keeps its size and the elements before it: row-major order is kept.
      const int64_t before = dims_product(t.dims, 0, static_cast<size_t>(d));
      int found = -1;
      int64_t p = 1;
      for (size_t k = 0; k < out[0].rank() && found < 0; ++k) {
        if (p == before && out[0].dims[k] == t.dims[static_cast<size_t>(d)]) found = static_cast<int>(k);
        p *= out[0].dims[k];
      }
      if (found < 0) return refuse(id, i, t, "the reshape does not keep it as a dim of its own");
      pass(b, found, i);
    } else if (id == OpId::kSlice) {
      const size_t w = static_cast<size_t>(d) * 3;
      if (w + 2 >= params.size() || params[w] != 0 || params[w + 1] != 1 ||
          params[w + 2] != t.dims[static_cast<size_t>(d)])
        return refuse(id, i, t, "a slice may not cut the bounded dim");
      pass(b, d, i);
    } else if (id == OpId::kConcat) {
      if (!params.empty() && params[0] == d) return refuse(id, i, t, "concat along the bounded dim");
      if (b.dim >= 0 && b.dim != d) return refuse(id, i, t, "the operands' bounded dims differ");
      pass(b, d, i);
    } else if (id == OpId::kGather && i == 1) {  // indices: their dims replace the axis
      const int axis = params.empty() ? 0 : static_cast<int>(params[0]);
      if (b.dim >= 0) return refuse(id, i, t, "data and indices are both bounded");
      pass(b, axis + d, i);
    } else if (id == OpId::kGather && i == 0) {
      const int axis = params.empty() ? 0 : static_cast<int>(params[0]);
      if (d == axis) continue;  // indices within the actual extent read real rows, the result is exact
      if (b.dim >= 0) return refuse(id, i, t, "data and indices are both bounded");
      pass(b, d < axis ? d : d + static_cast<int>(in[1].rank()) - 1, i);
    } else if (id == OpId::kGatherND && i == 1) {  // a bounded count of index tuples: as many results
      const int batch_dims = params.empty() ? 0 : static_cast<int>(params[0]);
      if (d < batch_dims || d + 1 >= static_cast<int>(t.rank()))
        return refuse(id, i, t, "a bounded batch or tuple dim");
      pass(b, d, i);
    } else {
      return refuse(id, i, t, "this operator would mix data across it (not supported on bounded dims yet)");
    }
  }
  if (b.dim >= 0 && out.size() > 1 && id != OpId::kSplit)
    return refuse(id, 0, in[0], "an operator of several results");
  return bounds;
}

}  // namespace

// infer_result_types' last step: the bounded dims of the results.
Status mark_bounds(OpId id, std::span<const TensorType> in, std::span<const int64_t> params,
                   std::vector<TensorType>& out) {
  for (TensorType& t : out)
    if (!makes_bound(id) && id != OpId::kBound) t.bounded = -1;
  HEXIR_ASSIGN_OR_RETURN(std::vector<Bound> bounds, bound_rule(id, in, params, out));
  for (size_t r = 0; r < out.size(); ++r) out[r].bounded = bounds[r].dim;
  return ok_status();
}

}  // namespace internal

std::vector<ExtentSource> extent_sources(OpId id, std::span<const TensorType> inputs,
                                         std::span<const int64_t> params, std::span<const TensorType> outputs) {
  Result<std::vector<internal::Bound>> bounds = internal::bound_rule(id, inputs, params, outputs);
  if (!bounds.ok()) return {};
  std::vector<ExtentSource> sources;
  for (internal::Bound& b : *bounds) sources.push_back(std::move(b.source));
  return sources;
}

bool bounded_is_padded(const TensorType& type) {
  if (!type.has_bound()) return false;
  for (int d = 0; d < type.bounded; ++d)
    if (type.dims[static_cast<size_t>(d)] > 1) return true;
  return false;
}

}  // namespace hexir::ops
