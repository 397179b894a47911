// softmax, log_softmax, hardmax, layernorm, the reductions, argmax / argmin,
// top_k and cumsum, with the semantics of
// hal/cpu/normalization.cc and layout.cc: one block per row (or output
// element), sums in double. Every element of a row is read before the
// barrier that precedes any write of it, so an output aliasing the input is safe.
#include "common.cuh"

using hexir::hal::cuda::HardmaxParams;
using hexir::hal::cuda::TopKParams;

using hexir::hal::cuda::kRowBlockMax;

extern "C" __global__ void hexir_softmax(SoftmaxParams p) {
  __shared__ float scratch_f[kRowBlockMax];
  __shared__ double scratch_d[kRowBlockMax];
  const hexir::ops::SoftmaxPlan& q = p.plan;
  const int64_t rows = q.outer * q.inner;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / q.inner) * q.length * q.inner + row % q.inner;
    const float* in = p.in + base;
    float* out = p.out + base;
    float max_value = hexir_kernels::negative_infinity();
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x)
      max_value = fmaxf(max_value, in[j * q.inner]);
    max_value = hexir_kernels::block_reduce(max_value, scratch_f, hexir_kernels::MaxOp());
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x) {
      const float e = expf(in[j * q.inner] - max_value);
      out[j * q.inner] = e;
      sum += e;
    }
    sum = hexir_kernels::block_reduce(sum, scratch_d, hexir_kernels::SumOp());
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x) out[j * q.inner] *= scale;
  }
}

// attention: one block per (batch, query) row. Each thread scores keys
// j, j + blockDim.x, ... into the row's scratch; the block's max and sum;
// then each thread sums the weighted value rows of its columns. Keys past
// the count are never read.
extern "C" __global__ void hexir_attention(hexir::hal::cuda::AttentionParams p) {
  __shared__ float scratch_f[kRowBlockMax];
  __shared__ double scratch_d[kRowBlockMax];
  const hexir::ops::AttentionPlan& a = p.plan;
  const int64_t rows = a.batch_count * a.m;
  const int64_t n = hexir::ops::attention_keys(a, *p.count);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* out = p.out + r * a.e;
    if (n == 0) {  // softmax over no key: NaN
      for (int64_t c = threadIdx.x; c < a.e; c += blockDim.x) out[c] = __int_as_float(0x7fc00000);
      continue;
    }
    int64_t qo, ko, vo;
    hexir::ops::attention_batch_offsets(a, r / a.m, &qo, &ko, &vo);
    const float* q = p.q + qo + (r % a.m) * a.q_row;
    float* w = p.scratch + r * a.t;
    float max_value = hexir_kernels::negative_infinity();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float* kj = p.k + ko + j * a.k_row;
      float dot = 0.0f;
      for (int64_t i = 0; i < a.d; ++i) dot += q[i] * kj[i];
      w[j] = dot * a.scale;
      max_value = fmaxf(max_value, w[j]);
    }
    max_value = hexir_kernels::block_reduce(max_value, scratch_f, hexir_kernels::MaxOp());
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float e = expf(w[j] - max_value);
      w[j] = e;
      sum += e;
    }
    sum = hexir_kernels::block_reduce(sum, scratch_d, hexir_kernels::SumOp());  // its barriers publish w
    const float scale = static_cast<float>(1.0 / sum);
    for (int64_t c = threadIdx.x; c < a.e; c += blockDim.x) {
      const float* vc = p.v + vo + c;
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j) acc += w[j] * vc[j * a.v_row];
      out[c] = acc * scale;
    }
  }
}

extern "C" __global__ void hexir_layernorm(LayernormParams p) {
  __shared__ double scratch[kRowBlockMax];
  const hexir::ops::LayernormPlan& q = p.plan;
  for (int64_t r = blockIdx.x; r < q.rows; r += gridDim.x) {
    const float* in = p.in + r * q.width;
    float* out = p.out + r * q.width;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) sum += in[j];
    sum = hexir_kernels::block_reduce(sum, scratch, hexir_kernels::SumOp());
    const double mean = sum / static_cast<double>(q.width);
    double square_sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) {
      const double d = in[j] - mean;
      square_sum += d * d;
    }
    square_sum = hexir_kernels::block_reduce(square_sum, scratch, hexir_kernels::SumOp());
    const double variance = square_sum / static_cast<double>(q.width);
    const float inv_std = static_cast<float>(1.0 / sqrt(variance + q.epsilon));
    const float mean_f = static_cast<float>(mean);
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x)
      out[j] = (in[j] - mean_f) * inv_std * p.gamma[j] + p.beta[j];
  }
}

// group_norm: one block per (batch, group) row, layernorm's two passes in
// double, then each element with its channel's scale and bias (the cpu's order).
extern "C" __global__ void hexir_group_norm(GroupNormParams p) {
  __shared__ double scratch[kRowBlockMax];
  const hexir::ops::GroupNormPlan& q = p.plan;
  const int64_t channels_per_group = q.width / q.spatial;
  for (int64_t r = blockIdx.x; r < q.rows; r += gridDim.x) {
    const float* in = p.in + r * q.width;
    float* out = p.out + r * q.width;
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) sum += in[j];
    sum = hexir_kernels::block_reduce(sum, scratch, hexir_kernels::SumOp());
    const double mean = sum / static_cast<double>(q.width);
    double square_sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) {
      const double d = in[j] - mean;
      square_sum += d * d;
    }
    square_sum = hexir_kernels::block_reduce(square_sum, scratch, hexir_kernels::SumOp());
    const double inv_std = 1.0 / sqrt(square_sum / static_cast<double>(q.width) + q.epsilon);
    const float mean_f = static_cast<float>(mean);
    const double missed = mean - static_cast<double>(mean_f);  // into the shift, as on the cpu
    const int64_t first_channel = (r % q.groups) * channels_per_group;
    for (int64_t j = threadIdx.x; j < q.width; j += blockDim.x) {
      const int64_t c = first_channel + j / q.spatial;
      const double gain = inv_std * p.scale[c];
      const float shift = static_cast<float>(p.bias[c] - missed * gain);
      out[j] = (in[j] - mean_f) * static_cast<float>(gain) + shift;
    }
  }
}

namespace hexir_kernels {

// The smaller, NaN if either is NaN (reduce_min).
struct NanMinOp {
  __device__ double operator()(double a, double b) const {
    return (a != a) ? a : ((b != b || b < a) ? b : a);
  }
};
struct ProdOp {
  __device__ double operator()(double a, double b) const { return a * b; }
};

// The offset of reduced element r (row-major over the reduced dims) from base.
__device__ __forceinline__ int64_t reduced_offset(const hexir::ops::ReducePlan& q, int64_t base, int64_t r) {
  for (int d = q.red_rank - 1; d >= 0; --d) {
    base += (r % q.red_dims[d]) * q.red_stride[d];
    r /= q.red_dims[d];
  }
  return base;
}

__device__ __forceinline__ int64_t kept_offset(const hexir::ops::ReducePlan& q, int64_t o) {
  int64_t base = 0;
  for (int d = q.kept_rank - 1; d >= 0; --d) {
    base += (o % q.kept_dims[d]) * q.kept_stride[d];
    o /= q.kept_dims[d];
  }
  return base;
}

// One float output: each thread combines its share in double, then the block.
__device__ float reduce_float(const hexir::ops::ReducePlan& q, const float* in, int64_t base,
                              double* scratch) {
  using hexir::ops::ReduceKind;
  const double inf = static_cast<double>(-negative_infinity());
  switch (q.kind) {
    case ReduceKind::kMax:
    case ReduceKind::kMin:
    case ReduceKind::kLogSumExp: {
      const bool min = q.kind == ReduceKind::kMin;
      double m = min ? inf : -inf;
      for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x) {
        const double v = in[reduced_offset(q, base, r)];
        m = min ? NanMinOp()(m, v) : NanMaxOp()(m, v);
      }
      m = min ? block_reduce(m, scratch, NanMinOp()) : block_reduce(m, scratch, NanMaxOp());
      if (q.kind != ReduceKind::kLogSumExp || !(m > -inf && m < inf)) return static_cast<float>(m);
      double sum = 0.0;  // log(sum(exp(x))) as max + log(sum(exp(x - max)))
      for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x)
        sum += exp(static_cast<double>(in[reduced_offset(q, base, r)]) - m);
      sum = block_reduce(sum, scratch, SumOp());
      return static_cast<float>(m + log(sum));
    }
    case ReduceKind::kProd: {
      double product = 1.0;
      for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x)
        product *= in[reduced_offset(q, base, r)];
      return static_cast<float>(block_reduce(product, scratch, ProdOp()));
    }
    default:
      break;
  }
  double sum = 0.0;
  for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x) {
    const double v = in[reduced_offset(q, base, r)];
    if (q.kind == ReduceKind::kL1)
      sum += fabs(v);
    else if (q.kind == ReduceKind::kSumSquare || q.kind == ReduceKind::kL2)
      sum += v * v;
    else
      sum += v;
  }
  sum = block_reduce(sum, scratch, SumOp());
  switch (q.kind) {
    case ReduceKind::kMean:  // numpy: the mean over zero elements is NaN (0/0)
      return static_cast<float>(sum / static_cast<double>(q.red_count));
    case ReduceKind::kL2:
      return static_cast<float>(sqrt(sum));
    case ReduceKind::kLogSum:
      return static_cast<float>(log(sum));
    default:
      return static_cast<float>(sum);
  }
}

// Integer reductions in 64 bits: sums and products wrap (unsigned), max and
// min compare the signed values; truncated to T (hal/cpu/normalization.cc).
struct IntReduceOp {
  hexir::ops::ReduceKind kind;
  __device__ uint64_t operator()(uint64_t a, uint64_t b) const {
    using hexir::ops::ReduceKind;
    const int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
    switch (kind) {
      case ReduceKind::kMax:
        return sb > sa ? b : a;
      case ReduceKind::kMin:
        return sb < sa ? b : a;
      case ReduceKind::kProd:
        return a * b;
      default:
        return a + b;
    }
  }
};

template <typename T>
__device__ void reduce_integer(const ReduceParams& p, uint64_t* scratch) {
  using hexir::ops::ReduceKind;
  const hexir::ops::ReducePlan& q = p.plan;
  const T* in = static_cast<const T*>(p.in);
  T* out = static_cast<T*>(p.out);
  const IntReduceOp op{q.kind};
  const T lowest = static_cast<T>(uint64_t{1} << (sizeof(T) * 8 - 1));  // two's complement
  uint64_t start = 0;
  if (q.kind == ReduceKind::kProd) start = 1;
  if (q.kind == ReduceKind::kMax) start = static_cast<uint64_t>(static_cast<int64_t>(lowest));
  if (q.kind == ReduceKind::kMin)
    start = static_cast<uint64_t>(static_cast<int64_t>(static_cast<T>(~lowest)));
  for (int64_t o = blockIdx.x; o < q.out_count; o += gridDim.x) {
    const int64_t base = kept_offset(q, o);
    uint64_t acc = start;
    for (int64_t r = threadIdx.x; r < q.red_count; r += blockDim.x) {
      uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(in[reduced_offset(q, base, r)]));
      if (q.kind == ReduceKind::kL1 && static_cast<int64_t>(v) < 0) v = 0 - v;
      if (q.kind == ReduceKind::kSumSquare) v *= v;
      acc = op(acc, v);
    }
    acc = block_reduce(acc, scratch, op);
    if (threadIdx.x == 0) out[o] = static_cast<T>(acc);
  }
}

template <typename T>
__device__ void argmax_rows(const ArgmaxParams& p) {
  const hexir::ops::ArgmaxPlan& q = p.plan;
  const T* x = static_cast<const T*>(p.x);
  const int64_t n = q.outer * q.inner;
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < n; i += stride) {
    const int64_t o = i / q.inner, c = i % q.inner;
    p.out[i] =
        hexir::ops::argmax_of(x + o * q.length * q.inner + c, q.length, q.inner, q.select_last, q.smallest);
  }
}

// top_k of one row: the k best so far kept sorted in the outputs (insertion;
// ops::topk_before's order), so no scratch.
template <typename T>
__device__ void top_k_rows(const TopKParams& p) {
  const hexir::ops::TopKPlan& q = p.plan;
  const T* x = static_cast<const T*>(p.x);
  T* values = static_cast<T*>(p.values);
  const int64_t n = q.outer * q.inner;
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < n; i += stride) {
    const int64_t o = i / q.inner, c = i % q.inner;
    const T* row = x + o * q.length * q.inner + c;
    T* v_out = values + o * q.k * q.inner + c;
    int64_t* i_out = p.indices + o * q.k * q.inner + c;
    int64_t count = 0;
    for (int64_t j = 0; j < q.length; ++j) {
      const T v = row[j * q.inner];
      if (count == q.k && !hexir::ops::topk_before(v, j, v_out[(count - 1) * q.inner],
                                                   i_out[(count - 1) * q.inner], q.largest))
        continue;
      int64_t at = count < q.k ? count++ : count - 1;  // the slot freed (the last one dropped when full)
      while (at > 0 &&
             hexir::ops::topk_before(v, j, v_out[(at - 1) * q.inner], i_out[(at - 1) * q.inner], q.largest)) {
        v_out[at * q.inner] = v_out[(at - 1) * q.inner];
        i_out[at * q.inner] = i_out[(at - 1) * q.inner];
        --at;
      }
      v_out[at * q.inner] = v;
      i_out[at * q.inner] = j;
    }
  }
}

}  // namespace hexir_kernels

extern "C" __global__ void hexir_reduce(ReduceParams p) {
  __shared__ double scratch[kRowBlockMax];
  const hexir::ops::ReducePlan& q = p.plan;
  const float* in = static_cast<const float*>(p.in);
  float* out = static_cast<float*>(p.out);
  for (int64_t o = blockIdx.x; o < q.out_count; o += gridDim.x) {
    const float r = hexir_kernels::reduce_float(q, in, hexir_kernels::kept_offset(q, o), scratch);
    if (threadIdx.x == 0) out[o] = r;
  }
}

extern "C" __global__ void hexir_reduce_i32(ReduceParams p) {
  __shared__ uint64_t scratch[kRowBlockMax];
  hexir_kernels::reduce_integer<int32_t>(p, scratch);
}
extern "C" __global__ void hexir_reduce_i64(ReduceParams p) {
  __shared__ uint64_t scratch[kRowBlockMax];
  hexir_kernels::reduce_integer<int64_t>(p, scratch);
}

// argmax, argmin: one thread per output element, its column of the axis in order.
extern "C" __global__ void hexir_argmax(ArgmaxParams p) { hexir_kernels::argmax_rows<float>(p); }
extern "C" __global__ void hexir_argmax_i32(ArgmaxParams p) { hexir_kernels::argmax_rows<int32_t>(p); }
extern "C" __global__ void hexir_argmax_i64(ArgmaxParams p) { hexir_kernels::argmax_rows<int64_t>(p); }

extern "C" __global__ void hexir_hardmax(HardmaxParams p) {
  const hexir::ops::ArgmaxPlan& q = p.plan;
  const int64_t n = q.outer * q.inner;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < n; i += stride) {
    const int64_t base = (i / q.inner) * q.length * q.inner + i % q.inner;
    const int64_t best = hexir::ops::argmax_of(p.x + base, q.length, q.inner, 0);
    for (int64_t j = 0; j < q.length; ++j) p.out[base + j * q.inner] = j == best ? 1.0f : 0.0f;
  }
}

// log_softmax: one block per row, as softmax; the sum of exp(x - max) in
// double, then (x - max) - log(sum) (NaN throughout when the row holds a NaN
// or +inf, or only -inf: the NaN-ignoring max lets exp(NaN) reach the sum).
extern "C" __global__ void hexir_log_softmax(SoftmaxParams p) {
  __shared__ float scratch_f[kRowBlockMax];
  __shared__ double scratch_d[kRowBlockMax];
  const hexir::ops::SoftmaxPlan& q = p.plan;
  const int64_t rows = q.outer * q.inner;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / q.inner) * q.length * q.inner + row % q.inner;
    const float* in = p.in + base;
    float* out = p.out + base;
    float max_value = hexir_kernels::negative_infinity();
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x)
      max_value = fmaxf(max_value, in[j * q.inner]);
    max_value = hexir_kernels::block_reduce(max_value, scratch_f, hexir_kernels::MaxOp());
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x)
      sum += exp(static_cast<double>(in[j * q.inner] - max_value));
    sum = hexir_kernels::block_reduce(sum, scratch_d, hexir_kernels::SumOp());
    const float shift = static_cast<float>(log(sum));
    for (int64_t j = threadIdx.x; j < q.length; j += blockDim.x)
      out[j * q.inner] = (in[j * q.inner] - max_value) - shift;
  }
}

extern "C" __global__ void hexir_top_k(TopKParams p) { hexir_kernels::top_k_rows<float>(p); }
extern "C" __global__ void hexir_top_k_i32(TopKParams p) { hexir_kernels::top_k_rows<int32_t>(p); }
extern "C" __global__ void hexir_top_k_i64(TopKParams p) { hexir_kernels::top_k_rows<int64_t>(p); }

// cumsum: one thread per line along the axis, in the cpu kernel's order
// (each result the previous one plus one element; ops::scatter_add).
namespace hexir_kernels {
template <typename T>
__device__ void cumsum(const CumSumParams& p) {
  const hexir::ops::CumSumPlan& q = p.plan;
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  const int64_t lines = q.outer * q.inner;
  const int64_t step = q.reverse ? -q.inner : q.inner;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t line = hexir_kernels::global_index(); line < lines; line += stride) {
    const int64_t first =
        (line / q.inner) * q.length * q.inner + line % q.inner + (q.reverse ? (q.length - 1) * q.inner : 0);
    T sum = T(0);
    for (int64_t k = 0; k < q.length; ++k) {
      const int64_t at = first + k * step;
      if (q.exclusive) {
        out[at] = sum;
        sum = hexir::ops::scatter_add(sum, x[at]);
      } else {
        sum = k == 0 ? x[at] : hexir::ops::scatter_add(sum, x[at]);
        out[at] = sum;
      }
    }
  }
}
}  // namespace hexir_kernels

extern "C" __global__ void hexir_cumsum_f32(CumSumParams p) { hexir_kernels::cumsum<float>(p); }
extern "C" __global__ void hexir_cumsum_i32(CumSumParams p) { hexir_kernels::cumsum<int32_t>(p); }
extern "C" __global__ void hexir_cumsum_i64(CumSumParams p) { hexir_kernels::cumsum<int64_t>(p); }
