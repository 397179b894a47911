// Strided views (docs/views.md): which operands read one, and the layout of
// a transpose, slice, expand or reshape result as a view of its input's base.
#include <algorithm>

#include "util.h"

namespace hexir::ops {

int elementwise_map_arity(OpId op) {
  switch (op) {
    case OpId::kRelu:
    case OpId::kGelu:
    case OpId::kSilu:
    case OpId::kSigmoid:
    case OpId::kTanh:
    case OpId::kExp:
    case OpId::kSqrt:
    case OpId::kRsqrt:
    case OpId::kNeg:
    case OpId::kLeakyRelu:
    case OpId::kClip:
    case OpId::kHardSigmoid:
    case OpId::kHardSwish:
    case OpId::kErf:
    case OpId::kLog:
    case OpId::kAbs:
    case OpId::kReciprocal:
    case OpId::kSoftplus:
    case OpId::kSign:
    case OpId::kCeil:
    case OpId::kFloor:
    case OpId::kRound:
    case OpId::kSin:
    case OpId::kCos:
    case OpId::kTan:
    case OpId::kAsin:
    case OpId::kAcos:
    case OpId::kAtan:
    case OpId::kSinh:
    case OpId::kCosh:
    case OpId::kAsinh:
    case OpId::kAcosh:
    case OpId::kAtanh:
    case OpId::kIsInf:
    case OpId::kIsNaN:
    case OpId::kElu:
    case OpId::kSelu:
    case OpId::kCelu:
    case OpId::kMish:
    case OpId::kSoftsign:
    case OpId::kThresholdedRelu:
    case OpId::kShrink:
      return 1;
    case OpId::kAdd:
    case OpId::kSub:
    case OpId::kMul:
    case OpId::kDiv:
    case OpId::kMaximum:
    case OpId::kMinimum:
    case OpId::kPow:
    case OpId::kEqual:
    case OpId::kLess:
    case OpId::kGreater:
    case OpId::kMod:
    case OpId::kLessOrEqual:
    case OpId::kGreaterOrEqual:
    case OpId::kAnd:
    case OpId::kOr:
    case OpId::kXor:
    case OpId::kPRelu:
      return 2;
    default:
      return 0;
  }
}

bool is_reduction(OpId op) {
  switch (op) {
    case OpId::kReduceSum:
    case OpId::kReduceMean:
    case OpId::kReduceMax:
    case OpId::kReduceMin:
    case OpId::kReduceProd:
    case OpId::kReduceL1:
    case OpId::kReduceL2:
    case OpId::kReduceLogSumExp:
    case OpId::kReduceSumSquare:
    case OpId::kReduceLogSum:
      return true;
    default:
      return false;
  }
}

bool accepts_strided_input(OpId op, size_t input) {
  // The reductions walk any strides (ReducePlan), copy gathers (CopyPlan).
  if (is_reduction(op) || op == OpId::kCopy) return input == 0;
  // Unary maps: UnaryPlan rank > 0, the strided walk; binary maps: the
  // general broadcast walk (BinaryPlan mode 3) takes any strides.
  return input < static_cast<size_t>(elementwise_map_arity(op));
}

bool accepts_strided_layout(OpId op, size_t input, std::span<const int64_t> dims,
                            std::span<const int64_t> strides) {
  if (accepts_strided_input(op, input)) return true;
  const bool rows = (op == OpId::kMatmul && input <= 1) || (op == OpId::kAttention && input <= 2);
  if (!rows || dims.size() < 2 || strides.size() != dims.size()) return false;
  const size_t rank = dims.size();
  if (strides[rank - 1] != 1 && dims[rank - 1] > 1) return false;
  if (strides[rank - 2] < dims[rank - 1] && dims[rank - 2] > 1) return false;
  for (int64_t s : strides)
    if (s < 0) return false;
  return true;
}

bool can_be_view(OpId op) {
  return op == OpId::kTranspose || op == OpId::kSlice || op == OpId::kExpand || op == OpId::kReshape;
}

void canonicalize_view(std::span<const int64_t> dims, ViewLayout& layout) {
  if (!layout.strided()) return;
  int64_t expected = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1 && layout.strides[d] != expected) return;
    expected *= dims[d];
  }
  layout.strides.clear();
}

std::optional<int64_t> view_last_element(std::span<const int64_t> dims, int64_t offset,
                                         std::span<const int64_t> strides) {
  if (offset < 0) return std::nullopt;
  for (int64_t d : dims)
    if (d == 0) return -1;
  if (!strides.empty() && strides.size() != dims.size()) return std::nullopt;
  int64_t last = offset;
  int64_t row_major = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] < 0) return std::nullopt;
    const int64_t stride = strides.empty() ? row_major : strides[d];
    if (stride < 0) return std::nullopt;
    int64_t reach = 0;
    if (__builtin_mul_overflow(dims[d] - 1, stride, &reach) || __builtin_add_overflow(last, reach, &last))
      return std::nullopt;
    if (strides.empty() && __builtin_mul_overflow(row_major, dims[d], &row_major)) return std::nullopt;
  }
  return last;
}

namespace {

// numpy's attempt at a reshape without a copy: each group of old dims that
// multiplies to a group of new dims must be one run of lined-up strides.
std::optional<std::vector<int64_t>> reshape_strides(std::span<const int64_t> old_dims,
                                                    std::span<const int64_t> old_strides,
                                                    std::span<const int64_t> new_dims) {
  std::vector<int64_t> od, os;
  for (size_t i = 0; i < old_dims.size(); ++i)
    if (old_dims[i] != 1) {
      od.push_back(old_dims[i]);
      os.push_back(old_strides[i]);
    }
  std::vector<int64_t> ns(new_dims.size(), 0);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < new_dims.size() && oi < od.size()) {
    int64_t np = new_dims[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= new_dims.size()) return std::nullopt;
        np *= new_dims[nj++];
      } else {
        if (oj >= od.size()) return std::nullopt;
        op *= od[oj++];
      }
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (os[ok] != od[ok + 1] * os[ok + 1]) return std::nullopt;
    ns[nj - 1] = os[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk) ns[nk - 1] = ns[nk] * new_dims[nk];
    ni = nj++;
    oi = oj++;
  }
  return ns;  // trailing size-1 dims keep stride 0 (never stepped)
}

}  // namespace

std::optional<ViewLayout> result_view_layout(OpId op, const TensorType& x, const ViewLayout& x_layout,
                                             std::span<const int64_t> params, const TensorType& result) {
  using internal::count_of;
  if (!can_be_view(op) || count_of(result) == 0 || count_of(x) == 0) return std::nullopt;
  const size_t rank = x.rank();
  std::vector<int64_t> in_strides(rank);
  if (x_layout.strided()) {
    if (x_layout.strides.size() != rank) return std::nullopt;
    in_strides = x_layout.strides;
  } else {
    internal::row_major_strides(x.dims, in_strides.data());
  }
  ViewLayout out;
  out.offset = x_layout.offset;
  switch (op) {
    case OpId::kTranspose:
      if (params.size() != rank) return std::nullopt;
      for (size_t i = 0; i < rank; ++i) out.strides.push_back(in_strides[static_cast<size_t>(params[i])]);
      break;
    case OpId::kSlice:
      if (params.size() != 3 * rank) return std::nullopt;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t start = params[3 * d], step = params[3 * d + 1], size = params[3 * d + 2];
        if (size > 1 && step < 0) return std::nullopt;
        out.offset += start * in_strides[d];  // start < dim: inside the input
        out.strides.push_back(size > 1 ? step * in_strides[d] : 0);
      }
      break;
    case OpId::kExpand: {
      const size_t out_rank = result.rank();
      if (out_rank < rank) return std::nullopt;
      out.strides.assign(out_rank, 0);
      for (size_t d = 0; d < rank; ++d)
        if (x.dims[d] != 1) out.strides[out_rank - rank + d] = in_strides[d];
      break;
    }
    case OpId::kReshape: {
      if (!x_layout.strided()) return out;
      std::optional<std::vector<int64_t>> strides = reshape_strides(x.dims, in_strides, result.dims);
      if (!strides) return std::nullopt;
      out.strides = std::move(*strides);
      break;
    }
    default:
      return std::nullopt;
  }
  canonicalize_view(result.dims, out);
  return out;
}

}  // namespace hexir::ops
