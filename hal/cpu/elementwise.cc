// Elementwise kernels: binary ops with numpy broadcasting and unary maps.
//
// Every loop reads element i of each input before writing element i of the
// output and never revisits it, so an output that shares storage with an
// input of the same shape (the in-place pass) is safe.
#include <cmath>

#include "kernel_util.h"

namespace hexir::hal::cpu::internal {
namespace {

// Runs op over one inner run of n elements; the strides are 0 (broadcast) or 1.
template <typename Op>
inline void binary_run(const float* a, int64_t sa, const float* b, int64_t sb, float* out, int64_t n) {
  // Separate loops for the stride patterns so each one vectorizes.
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(a[i * sa], b[i * sb]);
  }
}

// Element strides of `t` viewed as a tensor of `out_rank` dims with numpy's
// right alignment; broadcast (size-1 or missing) dims get stride 0.
inline void broadcast_strides(const TensorArg& t, uint32_t out_rank, int64_t* strides) {
  int64_t stride = 1;
  for (uint32_t i = out_rank; i-- > 0;) {
    const int64_t t_axis = static_cast<int64_t>(i) - static_cast<int64_t>(out_rank - t.rank);
    if (t_axis >= 0 && t.dims[t_axis] != 1) {
      strides[i] = stride;
      stride *= t.dims[t_axis];
    } else {
      strides[i] = 0;
    }
  }
}

template <typename Op>
Status binary(const DispatchArgs& args, const char* name) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 2, 2, /*f32_only=*/true));
  const TensorArg& a = args.operands[0];
  const TensorArg& b = args.operands[1];
  const TensorArg& out = args.operands[2];
  const int64_t n = element_count(out);
  if (n == 0) return ok_status();
  const float* pa = f32_in(a);
  const float* pb = f32_in(b);
  float* po = f32_out(out);
  const int64_t na = element_count(a);
  const int64_t nb = element_count(b);
  // Fast paths: same element count means the same shape up to leading 1s.
  if (na == n && nb == n) {
    binary_run<Op>(pa, 1, pb, 1, po, n);
    return ok_status();
  }
  if (na == n && nb == 1) {
    binary_run<Op>(pa, 1, pb, 0, po, n);
    return ok_status();
  }
  if (na == 1 && nb == n) {
    binary_run<Op>(pa, 0, pb, 1, po, n);
    return ok_status();
  }

  // General case: strides per output dim, then merge neighbouring dims whose
  // strides line up so the inner run is as long as possible.
  const uint32_t rank = out.rank;
  int64_t sa[kMaxRank], sb[kMaxRank];
  broadcast_strides(a, rank, sa);
  broadcast_strides(b, rank, sb);
  int64_t dims[kMaxRank], stride_a[kMaxRank], stride_b[kMaxRank];
  uint32_t merged = 0;
  for (uint32_t i = 0; i < rank; ++i) {
    const int64_t d = out.dims[i];
    if (d == 1) continue;
    if (merged > 0 && stride_a[merged - 1] == sa[i] * d && stride_b[merged - 1] == sb[i] * d) {
      dims[merged - 1] *= d;
      stride_a[merged - 1] = sa[i];
      stride_b[merged - 1] = sb[i];
      continue;
    }
    dims[merged] = d;
    stride_a[merged] = sa[i];
    stride_b[merged] = sb[i];
    ++merged;
  }
  if (merged == 0) {  // every dim is 1
    po[0] = Op::apply(pa[0], pb[0]);
    return ok_status();
  }
  const uint32_t outer_rank = merged - 1;
  const int64_t inner = dims[outer_rank];
  int64_t index[kMaxRank] = {};
  do {
    int64_t offset_a = 0, offset_b = 0;
    for (uint32_t i = 0; i < outer_rank; ++i) {
      offset_a += index[i] * stride_a[i];
      offset_b += index[i] * stride_b[i];
    }
    binary_run<Op>(pa + offset_a, stride_a[outer_rank], pb + offset_b, stride_b[outer_rank], po, inner);
    po += inner;
  } while (next_index(index, dims, outer_rank));
  return ok_status();
}

template <typename Op>
Status unary(const DispatchArgs& args, const char* name) {
  HEXIR_RETURN_IF_ERROR(check_operands(args, name, 1, 1, /*f32_only=*/true));
  const int64_t n = element_count(args.operands[1]);
  const float* in = f32_in(args.operands[0]);
  float* out = f32_out(args.operands[1]);
  for (int64_t i = 0; i < n; ++i) out[i] = Op::apply(in[i]);
  return ok_status();
}

struct AddOp { static float apply(float a, float b) { return a + b; } };
struct SubOp { static float apply(float a, float b) { return a - b; } };
struct MulOp { static float apply(float a, float b) { return a * b; } };
struct DivOp { static float apply(float a, float b) { return a / b; } };
// numpy.maximum/minimum propagate NaN from either side (unlike std::fmax).
struct MaximumOp { static float apply(float a, float b) { return (a > b || std::isnan(a)) ? a : b; } };
struct MinimumOp { static float apply(float a, float b) { return (a < b || std::isnan(a)) ? a : b; } };

struct ReluOp { static float apply(float x) { return x > 0.0f ? x : (std::isnan(x) ? x : 0.0f); } };
struct GeluErfOp {
  static float apply(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
};
struct GeluTanhOp {
  static float apply(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
};
struct SigmoidOp { static float apply(float x) { return 1.0f / (1.0f + std::exp(-x)); } };
struct SiluOp { static float apply(float x) { return x / (1.0f + std::exp(-x)); } };
struct TanhOp { static float apply(float x) { return std::tanh(x); } };
struct ExpOp { static float apply(float x) { return std::exp(x); } };
struct SqrtOp { static float apply(float x) { return std::sqrt(x); } };
struct RsqrtOp { static float apply(float x) { return 1.0f / std::sqrt(x); } };
struct NegOp { static float apply(float x) { return -x; } };

}  // namespace

Status add(const DispatchArgs& args) { return binary<AddOp>(args, "add"); }
Status sub(const DispatchArgs& args) { return binary<SubOp>(args, "sub"); }
Status mul(const DispatchArgs& args) { return binary<MulOp>(args, "mul"); }
Status div(const DispatchArgs& args) { return binary<DivOp>(args, "div"); }
Status maximum(const DispatchArgs& args) { return binary<MaximumOp>(args, "maximum"); }
Status minimum(const DispatchArgs& args) { return binary<MinimumOp>(args, "minimum"); }

Status relu(const DispatchArgs& args) { return unary<ReluOp>(args, "relu"); }
Status gelu(const DispatchArgs& args) {
  // params: [approximate]; absent or 0 = erf form, 1 = tanh approximation.
  const bool tanh_form = args.params != nullptr && args.param_count >= 1 && args.params[0] == 1;
  return tanh_form ? unary<GeluTanhOp>(args, "gelu") : unary<GeluErfOp>(args, "gelu");
}
Status silu(const DispatchArgs& args) { return unary<SiluOp>(args, "silu"); }
Status sigmoid(const DispatchArgs& args) { return unary<SigmoidOp>(args, "sigmoid"); }
Status tanh(const DispatchArgs& args) { return unary<TanhOp>(args, "tanh"); }
Status exp(const DispatchArgs& args) { return unary<ExpOp>(args, "exp"); }
Status sqrt(const DispatchArgs& args) { return unary<SqrtOp>(args, "sqrt"); }
Status rsqrt(const DispatchArgs& args) { return unary<RsqrtOp>(args, "rsqrt"); }
Status neg(const DispatchArgs& args) { return unary<NegOp>(args, "neg"); }

}  // namespace hexir::hal::cpu::internal
