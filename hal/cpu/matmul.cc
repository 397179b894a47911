// numpy.matmul for f32 (one GEMM per batch element, batch geometry from the
// MatmulPlan), conv2d (a GEMM packing its patches straight from the image, the
// bias as its epilogue; depthwise in spatial.cc) and the 2-D pools.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "hexir/base/half.h"
#include "kernel_util.h"
#include "lanes.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_CONV_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define HEXIR_CONV_NEON 1
#endif

namespace hexir::hal::cpu::internal {

namespace {

// B stored as its transpose, [n, k] with rows `ld` apart.
struct TransposedB {
  const float* b;
  int64_t ld;
};

// PackB (kernel_util.h) for a transposed B: B[k0:k0+kc, j0:j0+nr] read from
// the rows j0.. of the [n, k] storage, kc rows of `width` floats, zero beyond nr.
void pack_transposed_b(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width,
                       float* out) {
  const TransposedB& t = *static_cast<const TransposedB*>(context);
  for (int64_t j = 0; j < nr; ++j) {
    const float* row = t.b + (j0 + j) * t.ld + k0;
    for (int64_t k = 0; k < kc; ++k) out[k * width + j] = row[k];
  }
  for (int64_t k = 0; k < kc; ++k)
    for (int64_t j = nr; j < width; ++j) out[k * width + j] = 0.0f;
}

}  // namespace

// One batch element of a matmul: its offsets from the batch number (the
// batch dims' digits), then the few-rows dot products or the GEMM.
struct MatmulBatches {
  const ops::MatmulPlan* plan;
  const Dispatch* dispatch;
  KernelContext inner;  // the kernels' threads: the context's, or none when the batches share them
};

void matmul_batch(const MatmulBatches& job, int64_t batch) {
  const ops::MatmulPlan& p = *job.plan;
  const Dispatch& d = *job.dispatch;
  int64_t a_offset = 0, b_offset = 0, rest = batch;
  for (int32_t i = p.batch_rank; i-- > 0;) {
    const int64_t digit = rest % p.batch_dims[i];
    rest /= p.batch_dims[i];
    a_offset += digit * p.a_stride[i];
    b_offset += digit * p.b_stride[i];
  }
  const float* pa = input(d, 0) + a_offset;
  const float* pb = input(d, 1) + b_offset;
  float* pc = output(d, 0) + batch * p.m * p.n;
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  const ops::Epilogue* epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  if (p.b_transposed && p.m <= kFewRows) {  // B's rows are C's columns: dot products, B where it lies
    gemm_dot_rows(job.inner, DotRowsGemm{p.m, p.n, p.k, pa, p.lda, pb, p.ldb, pc, p.n, bias, epilogue});
    return;
  }
  GemmArgs args{p.m, p.n, p.k, pa, p.lda, pb, p.ldb, pc, p.n};
  args.col_bias = bias;
  args.epilogue = epilogue;
  args.packed_b = static_cast<const float*>(d.prepared);  // one B for every batch element
  TransposedB transposed{pb, p.ldb};
  if (p.b_transposed) {  // B stored [n, k]: its strips are packed from columns
    args.pack_b = pack_transposed_b;
    args.pack_context = &transposed;
  }
  gemm(job.inner, args);
}

void matmul_batch_task(void* context, int64_t batch) {
  matmul_batch(*static_cast<const MatmulBatches*>(context), batch);
}

// The kernels share the pool among a batch element's rows and columns when
// one element is worth it (1 MFLOP, their own threshold); below that, many
// small elements (a decode step's attention: a 1 x 1024 x 64 product per
// head) are shared out among the threads whole. The same bits either way.
constexpr double kBatchParallelFlops = 1e6;

Status matmul(const KernelContext& context, const Dispatch& d) {
  const ops::MatmulPlan& p = plan_of<ops::MatmulPlan>(d);
  if (p.batch_count == 0 || p.m == 0 || p.n == 0) return ok_status();
  const double flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
  ThreadPool* pool = pool_of(context);
  if (pool && pool->size() > 1 && p.batch_count > 1 && flops < kBatchParallelFlops &&
      flops * static_cast<double>(p.batch_count) >= kBatchParallelFlops) {
    MatmulBatches job{&p, &d, KernelContext{}};
    parallel_for(context, p.batch_count, matmul_batch_task, &job);
    return ok_status();
  }
  const MatmulBatches job{&p, &d, context};
  for (int64_t batch = 0; batch < p.batch_count; ++batch) matmul_batch(job, batch);
  return ok_status();
}

namespace {

// N int8 weights widened to floats: one load, sign-extend, convert (GCC 12
// turns __builtin_convertvector from int8 lanes into a scalar loop, so the
// x86 widths name the instructions).
// N int8 weights widened to floats (portable lanes; the x86 kernels below
// name their instructions: GCC 12 turns __builtin_convertvector from int8
// lanes into a scalar loop).
template <int N>
HEXIR_LANES lanes::F32<N> load_i8(const int8_t* p) {
  lanes::F32<N> out;
  for (int i = 0; i < N; ++i) out[i] = static_cast<float>(p[i]);
  return out;
}

#if defined(HEXIR_CONV_X86)
// QuantizedDotRows for AVX-512 and AVX2 (sign-extend, convert, FMA).
template <int R>
[[gnu::target("avx512f")]] void quantized_rows_avx512(const float* a, int64_t k, const int8_t* w, int64_t n0,
                                                      int64_t n1, const float* scale, const float* bias, float* c,
                                                      int64_t n) {
  for (int64_t j = n0; j < n1; ++j) {
    const int8_t* wj = w + j * k;
    __m512 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      const __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + i))));
      const __m512 w1 =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + i + 16))));
      for (int r = 0; r < R; ++r) {
        acc[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * k + i), w0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * k + i + 16), w1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
      for (int64_t t = i; t < k; ++t) sum += a[r * k + t] * static_cast<float>(wj[t]);
      c[r * n + j] = sum * scale[j] + (bias ? bias[j] : 0.0f);
    }
  }
}
template <int R>
[[gnu::target("avx2,fma")]] void quantized_rows_avx2(const float* a, int64_t k, const int8_t* w, int64_t n0,
                                                     int64_t n1, const float* scale, const float* bias, float* c,
                                                     int64_t n) {
  for (int64_t j = n0; j < n1; ++j) {
    const int8_t* wj = w + j * k;
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wj + i))));
      const __m256 w1 =
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wj + i + 8))));
      for (int r = 0; r < R; ++r) {
        acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * k + i), w0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * k + i + 8), w1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      float lanes_of[8];
      _mm256_storeu_ps(lanes_of, _mm256_add_ps(acc[r][0], acc[r][1]));
      float sum = 0.0f;
      for (float v : lanes_of) sum += v;
      for (int64_t t = i; t < k; ++t) sum += a[r * k + t] * static_cast<float>(wj[t]);
      c[r * n + j] = sum * scale[j] + (bias ? bias[j] : 0.0f);
    }
  }
}

template <int R>
void quantized_rows_x86(const float* a, int64_t k, const int8_t* w, int64_t n0, int64_t n1, const float* scale,
                        const float* bias, float* c, int64_t n) {
  if (isa_avx512())
    quantized_rows_avx512<R>(a, k, w, n0, n1, scale, bias, c, n);
  else
    quantized_rows_avx2<R>(a, k, w, n0, n1, scale, bias, c, n);
}
#endif

#if defined(HEXIR_CONV_NEON)
// 16 int8 weights as 4 float vectors: two widenings (vmovl), then convert
// (the portable load_i8 is a scalar loop of byte loads).
inline void widen_s8x16(int8x16_t b, float32x4_t (&w)[4]) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
  w[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  w[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
  w[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  w[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

// The lanes of four accumulators, summed in one fixed order.
inline float lane_sum(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
  return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
}

// QuantizedDotRows for NEON: 16 weights per step, one fmla per row and vector.
template <int R>
void quantized_rows_neon(const float* a, int64_t k, const int8_t* w, int64_t n0, int64_t n1, const float* scale,
                         const float* bias, float* c, int64_t n) {
  for (int64_t j = n0; j < n1; ++j) {
    const int8_t* wj = w + j * k;
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      float32x4_t wv[4];
      widen_s8x16(vld1q_s8(wj + i), wv);
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < 4; ++v) acc[r][v] = vfmaq_f32(acc[r][v], vld1q_f32(a + r * k + i + 4 * v), wv[v]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {  // unrolled: an indexed acc[r] lived on the stack, stored every step
      float sum = lane_sum(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
      for (int64_t t = i; t < k; ++t) sum += a[r * k + t] * static_cast<float>(wj[t]);
      c[r * n + j] = sum * scale[j] + (bias ? bias[j] : 0.0f);
    }
  }
}
#endif

// R rows of a (k floats each) against weight rows [n0, n1) of w [n, k]
// int8: per output a float dot in two lane sets, summed in order, times
// the row's scale, plus its bias.
struct QuantizedDotRows {
  template <int N, int R>
  static HEXIR_LANES void rows(const float* a, int64_t k, const int8_t* w, int64_t n0, int64_t n1, const float* scale,
                               const float* bias, float* c, int64_t n) {
    for (int64_t j = n0; j < n1; ++j) {
      const int8_t* wj = w + j * k;
      lanes::F32<N> acc[R][2] = {};
      int64_t i = 0;
      for (; i + 2 * N <= k; i += 2 * N) {
        const lanes::F32<N> w0 = load_i8<N>(wj + i), w1 = load_i8<N>(wj + i + N);
        for (int r = 0; r < R; ++r) {
          acc[r][0] += lanes::load<N>(a + r * k + i) * w0;
          acc[r][1] += lanes::load<N>(a + r * k + i + N) * w1;
        }
      }
      for (int r = 0; r < R; ++r) {
        float lanes_of[N];
        lanes::store<N>(lanes_of, acc[r][0] + acc[r][1]);
        float sum = 0.0f;
        for (int l = 0; l < N; ++l) sum += lanes_of[l];
        for (int64_t t = i; t < k; ++t) sum += a[r * k + t] * static_cast<float>(wj[t]);
        c[r * n + j] = sum * scale[j] + (bias ? bias[j] : 0.0f);
      }
    }
  }
  template <int N>
  static HEXIR_LANES void run(const float* a, int64_t m, int64_t k, const int8_t* w, int64_t n0, int64_t n1,
                              const float* scale, const float* bias, float* c, int64_t n) {
    switch (m) {
      case 1: rows<N, 1>(a, k, w, n0, n1, scale, bias, c, n); break;
      case 2: rows<N, 2>(a, k, w, n0, n1, scale, bias, c, n); break;
      case 3: rows<N, 3>(a, k, w, n0, n1, scale, bias, c, n); break;
      default: rows<N, 4>(a, k, w, n0, n1, scale, bias, c, n); break;
    }
  }
};

// The GEMM's B strips from int8 rows [n, k], dequantized as they are packed.
struct QuantizedB {
  const int8_t* w;
  const float* scale;
  int64_t k;
};
void pack_quantized_b(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width, float* out) {
  const QuantizedB& q = *static_cast<const QuantizedB*>(context);
  for (int64_t j = 0; j < nr; ++j) {
    const int8_t* row = q.w + (j0 + j) * q.k + k0;
    const float s = q.scale[j0 + j];
    for (int64_t t = 0; t < kc; ++t) out[t * width + j] = static_cast<float>(row[t]) * s;
  }
  for (int64_t t = 0; t < kc; ++t)
    for (int64_t j = nr; j < width; ++j) out[t * width + j] = 0.0f;
}

}  // namespace

// A few rows (a decode step): the int8 rows read where they lie, shared out
// among the threads by columns. More rows: the GEMM, its B strips
// dequantized while packed (no f32 copy of the weights anywhere).
Status quantized_matmul(const KernelContext& context, const Dispatch& d) {
  const ops::QuantizedMatmulPlan& p = plan_of<ops::QuantizedMatmulPlan>(d);
  if (p.m == 0 || p.n == 0) return ok_status();
  const float* a = input(d, 0);
  const int8_t* w = input<int8_t>(d, 1);
  const float* scale = input(d, 2);
  const float* bias = p.has_bias ? input(d, 3) : nullptr;
  float* c = output(d, 0);
  if (p.m <= kFewRows) {
    parallel_ranges(context, p.n, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, p.k)),
                    [&](int64_t n0, int64_t n1) {
#if defined(HEXIR_CONV_X86)
                      if (isa_avx2()) {
                        switch (p.m) {
                          case 1: quantized_rows_x86<1>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          case 2: quantized_rows_x86<2>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          case 3: quantized_rows_x86<3>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          default: quantized_rows_x86<4>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                        }
                      }
#endif
#if defined(HEXIR_CONV_NEON)
                      if (isa_neon()) {
                        switch (p.m) {
                          case 1: quantized_rows_neon<1>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          case 2: quantized_rows_neon<2>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          case 3: quantized_rows_neon<3>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                          default: quantized_rows_neon<4>(a, p.k, w, n0, n1, scale, bias, c, p.n); return;
                        }
                      }
#endif
                      run_lanes4<QuantizedDotRows>(a, p.m, p.k, w, n0, n1, scale, bias, c, p.n);
                    });
    return ok_status();
  }
  const QuantizedB q{w, scale, p.k};
  GemmArgs args{p.m, p.n, p.k, a, p.k, nullptr, 0, c, p.n};
  args.pack_b = pack_quantized_b;
  args.pack_context = &q;
  args.col_bias = bias;
  gemm(context, args);
  return ok_status();
}

namespace {

// int4_matmul's weights: rows of k / 2 packed bytes, a f16 scale per group.
struct Int4Weights {
  const uint8_t* w;
  const uint16_t* scale;  // f16 bits, [n, k / group]
  int64_t k, group;
  const uint8_t* row(int64_t j) const { return w + j * (k / 2); }
  float scale_of(int64_t j, int64_t t) const { return half_bits_to_float(scale[j * (k / group) + t / group]); }
};

#if defined(HEXIR_CONV_X86)
// Int4DotRows for AVX-512 and AVX2 (a software f16 conversion per group
// cost as much as the group's arithmetic: F16C's instead).
// J output columns at once: 2 J independent FMA chains per row of a (one
// row's two chains alone wait on the FMA latency).
template <int R, int J>
[[gnu::target("avx512f,f16c")]] void int4_columns_avx512(const float* a, const Int4Weights& q, int64_t j0,
                                                         const float* bias, float* c, int64_t n) {
  const int64_t k = q.k, groups = k / q.group;
  const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 acc[J][R][2];
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r) acc[jj][r][0] = acc[jj][r][1] = _mm512_setzero_ps();
  alignas(64) float scales[J][16];
  for (int64_t g = 0; g < groups; ++g) {
    // The scales 16 groups at a time (one conversion), then a broadcast operand of the multiply.
    if (g % 16 == 0) {
      for (int jj = 0; jj < J; ++jj) {
        const uint16_t* s = q.scale + (j0 + jj) * groups + g;
        if (g + 16 <= groups)
          _mm512_store_ps(scales[jj], _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s))));
        else
          for (int64_t t = 0; t < groups - g; ++t) scales[jj][t] = _cvtsh_ss(s[t]);
      }
    }
    __m512 table[J];
    for (int jj = 0; jj < J; ++jj) table[jj] = _mm512_mul_ps(levels, _mm512_set1_ps(scales[jj][g % 16]));
    for (int64_t i = g * q.group; i < (g + 1) * q.group; i += ops::kInt4Block) {
      for (int jj = 0; jj < J; ++jj) {
        // A block's 16 bytes as 16 lanes: the low nibble indexes the table
        // as it is, the high one after a shift (vpermps reads 4 index bits).
        const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q.row(j0 + jj) + i / 2)));
        const __m512 w0 = _mm512_permutexvar_ps(bytes, table[jj]);
        const __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table[jj]);
        for (int r = 0; r < R; ++r) {
          acc[jj][r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * k + i), w0, acc[jj][r][0]);
          acc[jj][r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(a + r * k + i + 16), w1, acc[jj][r][1]);
        }
      }
    }
  }
  for (int jj = 0; jj < J; ++jj)
    for (int r = 0; r < R; ++r)
      c[r * n + j0 + jj] = _mm512_reduce_add_ps(_mm512_add_ps(acc[jj][r][0], acc[jj][r][1])) +
                           (bias ? bias[j0 + jj] : 0.0f);
}
// AVX-512: each group's 16 levels (-8..7) times its scale are a table, and
// a block's 32 weights two permutes of it by their nibbles (vpermps reads an
// index's low 4 bits: the high nibble needs only a shift): no conversion or
// multiply per weight. The f16 scale by F16C, once per group.
template <int R>
void int4_rows_avx512(const float* a, const Int4Weights& q, int64_t n0, int64_t n1, const float* bias, float* c,
                      int64_t n) {
  int64_t j = n0;
  for (; j + 2 <= n1; j += 2) int4_columns_avx512<R, 2>(a, q, j, bias, c, n);
  if (j < n1) int4_columns_avx512<R, 1>(a, q, j, bias, c, n);
}
// AVX2 (8-entry permutes): nibbles - 8 widened, converted and scaled.
template <int R>
[[gnu::target("avx2,fma,f16c")]] void int4_rows_avx2(const float* a, const Int4Weights& q, int64_t n0, int64_t n1,
                                                     const float* bias, float* c, int64_t n) {
  const int64_t k = q.k, groups = k / q.group;
  const __m128i low = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t j = n0; j < n1; ++j) {
    const uint8_t* wj = q.row(j);
    const uint16_t* sj = q.scale + j * groups;
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const __m256 s = _mm256_set1_ps(_cvtsh_ss(sj[g]));
      for (int64_t i = g * q.group; i < (g + 1) * q.group; i += ops::kInt4Block) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + i / 2));
        const __m128i halves_of[2] = {_mm_sub_epi8(_mm_and_si128(bytes, low), eight),
                                      _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), eight)};
        for (int h = 0; h < 2; ++h) {
          const __m256 w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(halves_of[h])), s);
          const __m256 w1 =
              _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(halves_of[h], 8))), s);
          for (int r = 0; r < R; ++r) {
            acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * k + i + 16 * h), w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(a + r * k + i + 16 * h + 8), w1, acc[r][1]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      float lanes_of[8];
      _mm256_storeu_ps(lanes_of, _mm256_add_ps(acc[r][0], acc[r][1]));
      float sum = 0.0f;
      for (float v : lanes_of) sum += v;
      c[r * n + j] = sum + (bias ? bias[j] : 0.0f);
    }
  }
}

template <int R>
void int4_rows_x86(const float* a, const Int4Weights& q, int64_t n0, int64_t n1, const float* bias, float* c,
                   int64_t n) {
  if (isa_avx512())
    int4_rows_avx512<R>(a, q, n0, n1, bias, c, n);
  else
    int4_rows_avx2<R>(a, q, n0, n1, bias, c, n);
}
#endif

#if defined(HEXIR_CONV_NEON)
// Int4DotRows for NEON: a block's 16 bytes split into low and high nibbles
// (weights 0..15 and 16..31), offset by -8, widened, converted, scaled by
// the group's scale, then one fmla per row and vector.
template <int R>
void int4_rows_neon(const float* a, const Int4Weights& q, int64_t n0, int64_t n1, const float* bias, float* c,
                    int64_t n) {
  const int64_t k = q.k;
  const uint8x16_t low = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  for (int64_t j = n0; j < n1; ++j) {
    const uint8_t* wj = q.row(j);
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < 4; ++v) acc[r][v] = vdupq_n_f32(0.0f);
    for (int64_t g = 0; g < k; g += q.group) {
      const float s = q.scale_of(j, g);
      for (int64_t i = g; i < g + q.group; i += ops::kInt4Block) {
        const uint8x16_t bytes = vld1q_u8(wj + i / 2);
        const int8x16_t halves[2] = {vsubq_s8(vreinterpretq_s8_u8(vandq_u8(bytes, low)), eight),
                                     vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4)), eight)};
        for (int h = 0; h < 2; ++h) {
          float32x4_t wv[4];
          widen_s8x16(halves[h], wv);
          for (int v = 0; v < 4; ++v) wv[v] = vmulq_n_f32(wv[v], s);
          for (int r = 0; r < R; ++r)
            for (int v = 0; v < 4; ++v)
              acc[r][v] = vfmaq_f32(acc[r][v], vld1q_f32(a + r * k + i + 16 * h + 4 * v), wv[v]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)  // unrolled, as in quantized_rows_neon
      c[r * n + j] = lane_sum(acc[r][0], acc[r][1], acc[r][2], acc[r][3]) + (bias ? bias[j] : 0.0f);
  }
}
#endif

// R rows of a against int4 weight rows [n0, n1): each block's 32 weights
// decoded (int4_weight_of) and scaled, then a float dot in lanes.
struct Int4DotRows {
  template <int N, int R>
  static HEXIR_LANES void rows(const float* a, const Int4Weights& q, int64_t n0, int64_t n1, const float* bias,
                               float* c, int64_t n) {
    static_assert(ops::kInt4Block % N == 0);
    const int64_t k = q.k;
    for (int64_t j = n0; j < n1; ++j) {
      const uint8_t* wj = q.row(j);
      lanes::F32<N> acc[R] = {};
      for (int64_t i = 0; i < k; i += N) {
        const float s = q.scale_of(j, i);
        lanes::F32<N> w;
        for (int l = 0; l < N; ++l) w[l] = static_cast<float>(ops::int4_weight_of(wj, i + l)) * s;
        for (int r = 0; r < R; ++r) acc[r] += lanes::load<N>(a + r * k + i) * w;
      }
      for (int r = 0; r < R; ++r) {
        float lanes_of[N];
        lanes::store<N>(lanes_of, acc[r]);
        float sum = 0.0f;
        for (int l = 0; l < N; ++l) sum += lanes_of[l];
        c[r * n + j] = sum + (bias ? bias[j] : 0.0f);
      }
    }
  }
  template <int N>
  static HEXIR_LANES void run(const float* a, int64_t m, const Int4Weights& q, int64_t n0, int64_t n1,
                              const float* bias, float* c, int64_t n) {
    switch (m) {
      case 1: rows<N, 1>(a, q, n0, n1, bias, c, n); break;
      case 2: rows<N, 2>(a, q, n0, n1, bias, c, n); break;
      case 3: rows<N, 3>(a, q, n0, n1, bias, c, n); break;
      default: rows<N, 4>(a, q, n0, n1, bias, c, n); break;
    }
  }
};

// Weights [k0, k0 + kc) of int4 row j as floats (k0 and kc whole blocks).
#if defined(HEXIR_CONV_X86)
[[gnu::target("avx512f,f16c")]] void decode_int4_avx512(const Int4Weights& q, int64_t j, int64_t k0, int64_t kc,
                                                        float* out) {
  const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const uint8_t* row = q.row(j);
  const uint16_t* scale = q.scale + j * (q.k / q.group);
  for (int64_t t = 0; t < kc; t += ops::kInt4Block) {
    const int64_t i = k0 + t;
    const __m512 table = _mm512_mul_ps(levels, _mm512_set1_ps(_cvtsh_ss(scale[i / q.group])));
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i / 2)));
    _mm512_storeu_ps(out + t, _mm512_permutexvar_ps(bytes, table));
    _mm512_storeu_ps(out + t + 16, _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table));
  }
}
#endif
void decode_int4(const Int4Weights& q, int64_t j, int64_t k0, int64_t kc, float* out) {
#if defined(HEXIR_CONV_X86)
  if (isa_avx512()) return decode_int4_avx512(q, j, k0, kc, out);
#endif
  const uint8_t* row = q.row(j);
  float s = 0.0f;
  for (int64_t t = 0; t < kc; ++t) {
    if (t == 0 || (k0 + t) % q.group == 0) s = q.scale_of(j, k0 + t);  // once per group
    out[t] = static_cast<float>(ops::int4_weight_of(row, k0 + t)) * s;
  }
}

// The GEMM's B strips from int4 rows, dequantized as they are packed: each
// row's kc weights decoded into a buffer, then laid across the strip.
void pack_int4_b(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width, float* out) {
  const Int4Weights& q = *static_cast<const Int4Weights*>(context);
  constexpr int64_t kMaxKc = 256;  // the GEMM's K block (gemm.cc's kKc)
  alignas(64) float decoded[kMaxKc];
  for (int64_t j = 0; j < nr; ++j) {
    for (int64_t t0 = 0; t0 < kc; t0 += kMaxKc) {
      const int64_t count = std::min(kMaxKc, kc - t0);
      decode_int4(q, j0 + j, k0 + t0, count, decoded);
      for (int64_t t = 0; t < count; ++t) out[(t0 + t) * width + j] = decoded[t];
    }
  }
  for (int64_t t = 0; t < kc; ++t)
    for (int64_t j = nr; j < width; ++j) out[t * width + j] = 0.0f;
}

}  // namespace

// As quantized_matmul: a few rows read the packed rows where they lie, more
// go through the GEMM with B decoded while packed.
Status int4_matmul(const KernelContext& context, const Dispatch& d) {
  const ops::Int4MatmulPlan& p = plan_of<ops::Int4MatmulPlan>(d);
  if (p.m == 0 || p.n == 0) return ok_status();
  const float* a = input(d, 0);
  const Int4Weights q{input<uint8_t>(d, 1), input<uint16_t>(d, 2), p.k, p.group};
  const float* bias = p.has_bias ? input(d, 3) : nullptr;
  float* c = output(d, 0);
  if (p.m <= kFewRows) {
    parallel_ranges(context, p.n, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, p.k)),
                    [&](int64_t n0, int64_t n1) {
#if defined(HEXIR_CONV_X86)
                      if (isa_avx2()) {
                        switch (p.m) {
                          case 1: int4_rows_x86<1>(a, q, n0, n1, bias, c, p.n); return;
                          case 2: int4_rows_x86<2>(a, q, n0, n1, bias, c, p.n); return;
                          case 3: int4_rows_x86<3>(a, q, n0, n1, bias, c, p.n); return;
                          default: int4_rows_x86<4>(a, q, n0, n1, bias, c, p.n); return;
                        }
                      }
#endif
#if defined(HEXIR_CONV_NEON)
                      if (isa_neon()) {
                        switch (p.m) {
                          case 1: int4_rows_neon<1>(a, q, n0, n1, bias, c, p.n); return;
                          case 2: int4_rows_neon<2>(a, q, n0, n1, bias, c, p.n); return;
                          case 3: int4_rows_neon<3>(a, q, n0, n1, bias, c, p.n); return;
                          default: int4_rows_neon<4>(a, q, n0, n1, bias, c, p.n); return;
                        }
                      }
#endif
                      run_lanes4<Int4DotRows>(a, p.m, q, n0, n1, bias, c, p.n);
                    });
    return ok_status();
  }
  GemmArgs args{p.m, p.n, p.k, a, p.k, nullptr, 0, c, p.n};
  args.pack_b = pack_int4_b;
  args.pack_context = &q;
  args.col_bias = bias;
  gemm(context, args);
  return ok_status();
}

// Each row decoded as int4_matmul's GEMM decodes B; rows shared out among the threads.
Status dequantize_int4(const KernelContext& context, const Dispatch& d) {
  const ops::DequantizeInt4Plan& p = plan_of<ops::DequantizeInt4Plan>(d);
  const Int4Weights q{input<uint8_t>(d, 0), input<uint16_t>(d, 1), p.k, p.group};
  float* out = output(d, 0);
  parallel_ranges(context, p.rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, p.k)),
                  [&](int64_t r0, int64_t r1) {
                    for (int64_t r = r0; r < r1; ++r) decode_int4(q, r, 0, p.k, out + r * p.k);
                  });
  return ok_status();
}

namespace {

// Few-channel stems computed directly (below), not through the GEMM.
bool stem_direct(const ops::Conv2dPlan& p);

// A few output pixels (silero-vad's 1-D convolutions: 1 to 3): the
// few-rows GEMM, transposed (its rows the pixels, its columns the output
// channels), the weights prepared as its B. Through the tiles, a pixel was
// a column of C: 3 of a tile's 32, 3 to 5 times the time.
bool conv2d_few_pixels(const ops::Conv2dPlan& p) { return p.oh * p.ow > 0 && p.oh * p.ow <= kFewRows; }

// One B for every batch element (every batch stride of B is 0).
bool matmul_b_shared(const ops::MatmulPlan& p) {
  for (int32_t i = 0; i < p.batch_rank; ++i)
    if (p.b_stride[i] != 0 && p.batch_dims[i] > 1) return false;
  return true;
}

}  // namespace

uint64_t matmul_prepared_bytes(const Dispatch& d) {
  const ops::MatmulPlan& p = plan_of<ops::MatmulPlan>(d);
  // A constant B stored [n, k] against a few rows is read in place (gemm_dot_rows).
  if (d.operands[1] == nullptr || p.batch_count == 0 || p.m == 0 || p.n == 0 || p.k == 0 || !matmul_b_shared(p) ||
      (p.b_transposed && p.m <= kFewRows))
    return 0;
  return static_cast<uint64_t>(gemm_packed_b_floats(p.k, p.n)) * sizeof(float);
}

void matmul_prepare(const Dispatch& d, void* out) {
  const ops::MatmulPlan& p = plan_of<ops::MatmulPlan>(d);
  if (!p.b_transposed) return gemm_pack_b(input(d, 1), p.ldb, p.k, p.n, static_cast<float*>(out));
  // B stored [n, k]: transposed once here (prepare may allocate), then packed.
  const float* b = input(d, 1);
  std::vector<float> rows(static_cast<size_t>(p.k * p.n));
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t k = 0; k < p.k; ++k) rows[static_cast<size_t>(k * p.n + j)] = b[j * p.ldb + k];
  gemm_pack_b(rows.data(), p.n, p.k, p.n, static_cast<float*>(out));
}

// B packed reads B's geometry only: a prefill's 32 rows and a decode's 1
// against the same weights share one packed copy.
uint32_t matmul_prepare_key(const Dispatch& d, uint64_t* words) {
  const ops::MatmulPlan& p = plan_of<ops::MatmulPlan>(d);
  words[0] = static_cast<uint64_t>(p.k);
  words[1] = static_cast<uint64_t>(p.n);
  words[2] = static_cast<uint64_t>(p.ldb);
  words[3] = static_cast<uint64_t>(p.b_transposed);
  return 4;
}

namespace {

// A stem's weights tap-major ([c, ky, kx][k]: a tap's channels adjacent, as
// the stem kernels broadcast them).
void stem_weights_tap_major(const ops::Conv2dPlan& p, const float* w, float* out) {
  const int64_t patch = p.c * p.kh * p.kw;
  for (int64_t k = 0; k < p.k; ++k)
    for (int64_t t = 0; t < patch; ++t) out[t * p.k + k] = w[k * patch + t];
}

}  // namespace

uint64_t conv2d_prepared_bytes(const Dispatch& d) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  if (p.channels_last) return conv2d_channels_last_prepared_bytes(d);
  if (d.operands[1] == nullptr || ops::conv2d_is_depthwise(p) || p.k_per_group == 0) return 0;
  if (stem_direct(p)) return static_cast<uint64_t>(p.k * p.c * p.kh * p.kw) * sizeof(float);
  const int64_t patch = p.c_per_group * p.kh * p.kw;
  if (patch == 0) return 0;
  const int64_t group_floats = conv2d_few_pixels(p) ? gemm_packed_b_floats(patch, p.k_per_group)
                                                    : gemm_packed_a_floats(p.k_per_group, patch);
  return static_cast<uint64_t>(p.groups * group_floats) * sizeof(float);
}

// The packing chosen (it depends on the image for the stem and few-pixel
// forms) and the weights' geometry, which fix what conv2d_prepare writes.
uint32_t conv2d_prepare_key(const Dispatch& d, uint64_t* words) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  uint64_t form = 0;
  if (p.winograd)
    form = p.winograd == 4 ? 5 : 4;  // U: 16 floats a weight's 9 (F(2x2, 3x3)), 36 (F(4x4, 3x3))
  else if (p.channels_last)
    form = 1;
  else if (stem_direct(p))
    form = 2;
  else if (conv2d_few_pixels(p))
    form = 3;
  words[0] = form;
  words[1] = static_cast<uint64_t>(p.k);
  words[2] = static_cast<uint64_t>(p.c);
  words[3] = static_cast<uint64_t>(p.kh);
  words[4] = static_cast<uint64_t>(p.kw);
  words[5] = static_cast<uint64_t>(p.groups);
  return 6;
}

// Each group's weights [k_per_group, patch] as the GEMM's A, group after
// group; with few pixels, transposed as the few-rows GEMM's B; a stem's
// tap-major.
void conv2d_prepare(const Dispatch& d, void* out) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  if (p.channels_last) return conv2d_channels_last_prepare(d, out);
  const int64_t patch = p.c_per_group * p.kh * p.kw;
  const float* w = input(d, 1);
  if (stem_direct(p)) return stem_weights_tap_major(p, w, static_cast<float*>(out));
  if (conv2d_few_pixels(p)) {
    const int64_t group_floats = gemm_packed_b_floats(patch, p.k_per_group);
    std::vector<float> transposed(static_cast<size_t>(patch * p.k_per_group));  // prepare may allocate
    for (int64_t g = 0; g < p.groups; ++g) {
      for (int64_t o = 0; o < p.k_per_group; ++o)
        for (int64_t r = 0; r < patch; ++r)
          transposed[r * p.k_per_group + o] = w[(g * p.k_per_group + o) * patch + r];
      gemm_pack_b(transposed.data(), p.k_per_group, patch, p.k_per_group, static_cast<float*>(out) + g * group_floats);
    }
    return;
  }
  const int64_t group_floats = gemm_packed_a_floats(p.k_per_group, patch);
  for (int64_t g = 0; g < p.groups; ++g)
    gemm_pack_a(w + g * p.k_per_group * patch, patch, p.k_per_group, patch, static_cast<float*>(out) + g * group_floats);
}

namespace {

// Implicit im2col: the patch matrix of one group of one image, row (c, ky, kx)
// and column (oy, ox), zero where the window reaches into the padding, is
// produced strip by strip as the GEMM packs it; it never exists whole.
struct PatchSource {
  const ops::Conv2dPlan* p;
  const float* image;  // the group's first channel
};

// Called once per (K block, NR strip): the strip's output columns are cut
// into runs along output rows once, then every patch row (c, ky, kx), walked
// with counters instead of divisions, copies the in-row part of each run and
// zeros the rest. For convolutions with few output channels (a short M) this
// packing, not the micro-kernel, is most of the work.
void pack_patches(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width, float* out) {
  const PatchSource& src = *static_cast<const PatchSource*>(context);
  const ops::Conv2dPlan& p = *src.p;
  struct Run {
    int64_t j, length, oy, first_ix;  // first_ix: the input column of the run's first output at kx = 0
  };
  Run runs[64];  // nr <= 32 columns: at most 32 runs
  int64_t run_count = 0;
  {
    int64_t oy = j0 / p.ow, ox = j0 % p.ow;
    for (int64_t j = 0; j < nr; ++oy, ox = 0) {
      const int64_t length = std::min(nr - j, p.ow - ox);
      runs[run_count++] = {j, length, oy, ox * p.stride_w - p.pad_left};
      j += length;
    }
  }
  const int64_t taps = p.kh * p.kw;
  int64_t c = k0 / taps, ky = (k0 % taps) / p.kw, kx = k0 % p.kw;
  for (int64_t r = 0; r < kc; ++r) {
    const float* plane = src.image + c * p.h * p.w;
    float* dst = out + r * width;
    const int64_t shift = kx * p.dilation_w;
    for (int64_t q = 0; q < run_count; ++q) {
      const Run& run = runs[q];
      float* out_run = dst + run.j;
      const int64_t iy = run.oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        for (int64_t t = 0; t < run.length; ++t) out_run[t] = 0.0f;
        continue;
      }
      // The part of the run whose taps land inside the row: t in [lo, hi).
      const float* in = plane + iy * p.w;
      const int64_t first = run.first_ix + shift;
      int64_t lo, hi;
      if (p.stride_w == 1) {
        lo = std::clamp<int64_t>(-first, 0, run.length);
        hi = std::clamp<int64_t>(p.w - first, lo, run.length);
      } else {
        lo = std::clamp<int64_t>(first >= 0 ? 0 : (-first + p.stride_w - 1) / p.stride_w, 0, run.length);
        hi = std::clamp<int64_t>(first > p.w - 1 ? 0 : (p.w - 1 - first) / p.stride_w + 1, lo, run.length);
      }
      for (int64_t t = 0; t < lo; ++t) out_run[t] = 0.0f;
      if (p.stride_w == 1) {
        const float* row = in + (first + lo);  // in the row: first + lo >= 0
        for (int64_t t = 0; t < hi - lo; ++t) out_run[lo + t] = row[t];
      } else {
        const float* row = in + (first + lo * p.stride_w);
        for (int64_t t = 0; t < hi - lo; ++t) out_run[lo + t] = row[t * p.stride_w];
      }
      for (int64_t t = hi; t < run.length; ++t) out_run[t] = 0.0f;
    }
    for (int64_t j = nr; j < width; ++j) dst[j] = 0.0f;
    if (++kx == p.kw) {
      kx = 0;
      if (++ky == p.kh) {
        ky = 0;
        ++c;
      }
    }
  }
}

}  // namespace

namespace {

// A stem: few input channels (an image's 3), so K = c * kh * kw is short and
// the GEMM's patch packing costs more than its multiply. Computed directly
// instead: the input rows an output row reads are first copied into a stack
// buffer split into stride_w phases, zero where the window reaches into the
// padding (stem_fill), so each tap of a vector of output columns is one plain
// load; then tiles of output channels x columns, per tap a load per vector
// and a broadcast weight per channel (tap-major, so adjacent) for each FMA.
// Output channels a multiple of 8. The taps are summed in (c, ky, kx) order
// from zero, each by one FMA, then the bias and the epilogue: the GEMM's
// order and rounding for K <= its K block (256), so the same bits as the
// GEMM path. AVX-512: 8 channels x 48 or 32 columns (24 or 16
// accumulators); AVX2: 4 channels x 24 or 16 columns (below).
constexpr int64_t kStemMaxPatch = 256;
constexpr int64_t kStemMaxKw = 11;
constexpr int64_t kStemMaxWeights = 8192;  // k x patch, tap-major on the stack (32 KiB)

constexpr int64_t kStemBufferFloats = 8192;  // the rows in phases, on the stack (32 KiB)

// The tile's columns: three vectors (AVX-512 48, AVX2 24) but where a row
// would end in one vector's tile (a third of the rate), else two. With the
// row's tap offsets hoisted out of the tile (StemRow), 24 ran 0.94x the time
// of 16 on the 3x3/2 stem's rows of 112 and 0.91x on rows of 160 (AVX2,
// alternated); BlazeFace-256's rows of 128 (16 past 5 x 24 + 8) keep 16.
int64_t stem_columns(const ops::Conv2dPlan& p) {
  const int64_t lanes = isa_avx512() ? 16 : 8;
  return p.ow % (3 * lanes) != lanes ? 3 * lanes : 2 * lanes;
}

// Floats per phase of a buffer row: the columns of every tile (the last one
// rounded up) plus the window's reach.
int64_t stem_phase(const ops::Conv2dPlan& p) {
  const int64_t tile = stem_columns(p);
  const int64_t columns = (p.ow + tile - 1) / tile * tile;
  return columns + (p.kw - 1) / p.stride_w + 1;
}
[[maybe_unused]] bool stem_buffer_fits(const ops::Conv2dPlan& p) {  // x86's stems only
  return p.c * p.kh * p.stride_w * stem_phase(p) <= kStemBufferFloats;
}

bool stem_direct(const ops::Conv2dPlan& p) {
#ifdef HEXIR_CONV_X86
  return p.groups == 1 && p.c <= 4 && p.c * p.kh * p.kw <= kStemMaxPatch && p.kw <= kStemMaxKw && p.k >= 1 &&
         p.k % 8 == 0 && p.k * p.c * p.kh * p.kw <= kStemMaxWeights &&
         (p.stride_w == 1 || p.stride_w == 2) && p.dilation_w == 1 && p.ow >= 16 &&
         isa_avx2() && stem_buffer_fits(p);
#else
  (void)p;
  return false;
#endif
}

struct StemJob {
  const ops::Conv2dPlan* p;
  const float* x;
  const float* w;
  const float* bias;
  float* out;
  const ops::Epilogue* epilogue;
  const float* residual;  // or null
  ops::Activation activation;  // the epilogue's when tile_finish_applies (in registers), else kNone
};

// What every tile of a row reads the buffer by, computed once a row: tap kx
// at col[kx] in a buffer row, rows row_pitch apart (per tile, its divisions
// by the run-time stride and phase were as long as a 3x3 stem tile's 27
// taps: the 3 -> 32 stem at 224 x 224 ran at 40 % of the FMA peak).
struct StemRow {
  int64_t col[kStemMaxKw];
  int64_t row_pitch;
};

#ifdef HEXIR_CONV_X86
// KB = 8 output channels (k0 ..) x 16 * NV output columns (ox0 ..) of output
// row oy, from the buffer of its rows in phases (stem_fill).
template <int NV>
[[gnu::target("avx512f")]] void stem_tile_avx512(const StemJob& job, const StemRow& sr, const float* buf, int64_t k0,
                                                 int64_t oy, int64_t ox0) {
  constexpr int KB = 8;
  const ops::Conv2dPlan& p = *job.p;
  const int64_t plane = p.oh * p.ow;
  const int64_t* const col = sr.col;
  __m512 acc[KB][NV];
#pragma GCC unroll 8
  for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[kb][v] = _mm512_setzero_ps();
  const float* tap_w = job.w + k0;  // tap t's weights: KB floats at t * k
  for (int64_t r = 0; r < p.c * p.kh; ++r) {
    const float* row = buf + r * sr.row_pitch + ox0;
    for (int64_t kx = 0; kx < p.kw; ++kx, tap_w += p.k) {
      const float* at = row + col[kx];
      __m512 x[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) x[v] = _mm512_loadu_ps(at + 16 * v);
#pragma GCC unroll 8
      for (int kb = 0; kb < KB; ++kb) {
        const __m512 w = _mm512_set1_ps(tap_w[kb]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = _mm512_fmadd_ps(w, x[v], acc[kb][v]);
      }
    }
  }
  // The bias, the residual and the activation before the one store.
  const int64_t at = k0 * plane + oy * p.ow + ox0;
  const __m512 lo = _mm512_set1_ps(job.p->epilogue.a), hi = _mm512_set1_ps(job.p->epilogue.b);
  const float* const bias = job.bias;
  const float* const residual = job.residual;
  float* const out = job.out + at;
  const ops::Activation activation = job.activation;
  if (ox0 + 16 * NV <= p.ow) {
    // A whole tile, stage by stage with the job's fields in registers (as
    // AVX2's). The same steps per element.
    if (bias)
#pragma GCC unroll 8
      for (int kb = 0; kb < KB; ++kb) {
        const __m512 b = _mm512_set1_ps(bias[k0 + kb]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = _mm512_add_ps(acc[kb][v], b);
      }
    if (residual)
#pragma GCC unroll 8
      for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v)
          acc[kb][v] = _mm512_add_ps(acc[kb][v], _mm512_loadu_ps(residual + at + kb * plane + 16 * v));
    if (activation != ops::Activation::kNone)
#pragma GCC unroll 8
      for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = tile_activation(activation, acc[kb][v], lo, hi);
#pragma GCC unroll 8
    for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + kb * plane + 16 * v, acc[kb][v]);
    return;
  }
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int64_t n = std::min<int64_t>(16, p.ow - ox0 - 16 * v);
    if (n <= 0) break;
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
#pragma GCC unroll 8
    for (int kb = 0; kb < KB; ++kb) {
      __m512 y = acc[kb][v];
      if (bias) y = _mm512_add_ps(y, _mm512_set1_ps(bias[k0 + kb]));
      if (residual) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, residual + at + kb * plane + 16 * v));
      y = tile_activation(activation, y, lo, hi);
      _mm512_mask_storeu_ps(out + kb * plane + 16 * v, m, y);
    }
  }
}

// dst[i] = src[2 * i] for i in [lo, hi), 8 at a time; returns where it stopped.
[[gnu::target("avx2")]] int64_t even_columns_avx2(const float* src, int64_t lo, int64_t hi, float* dst) {
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    __m256 even, odd;
    deinterleave8(_mm256_loadu_ps(src + 2 * i), _mm256_loadu_ps(src + 2 * i + 8), even, odd);
    _mm256_storeu_ps(dst + i, even);
  }
  return i;
}

// AVX2: the input rows an output row reads are first copied into a stack
// buffer split into stride_w phases, zero where the window reaches into the
// padding (as the depthwise kernel's), so each tap of 8 output columns is one
// plain load: no masks, no shuffles. Tiles of 4 output channels x 24 or 16
// columns (stem_columns; 12 or 8 accumulators: per tap 3 or 2 loads, 4
// broadcasts, 12 or 8 FMAs), the same sums in the same order (zeros
// included) as the GEMM.
// Buffer row (c, ky) for output row oy: phase q, index i holds input column
// q + stride_w * i - pad_left of input row oy * stride_h - pad_top + ky * dilation_h.
void stem_fill(const ops::Conv2dPlan& p, const float* image, int64_t oy, float* buf) {
  const int64_t phase = stem_phase(p);
  for (int64_t c = 0; c < p.c; ++c)
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      float* row = buf + (c * p.kh + ky) * p.stride_w * phase;
      const int64_t iy = oy * p.stride_h - p.pad_top + ky * p.dilation_h;
      if (iy < 0 || iy >= p.h) {
        std::fill(row, row + p.stride_w * phase, 0.0f);
        continue;
      }
      const float* in = image + (c * p.h + iy) * p.w;
      for (int64_t q = 0; q < p.stride_w; ++q) {
        // Indices whose column lies in the row: [lo, hi); zeros around them.
        const int64_t first = q - p.pad_left;  // column of index 0
        const int64_t lo = std::clamp<int64_t>((-first + p.stride_w - 1) / p.stride_w, 0, phase);
        const int64_t hi = std::clamp<int64_t>((p.w - first + p.stride_w - 1) / p.stride_w, lo, phase);
        float* dst = row + q * phase;
        std::fill(dst, dst + lo, 0.0f);
        const float* src = in + first;
        if (p.stride_w == 1) {
          std::copy(src + lo, src + hi, dst + lo);
        } else {
          int64_t i = lo;
          // 8 at a time while the 16 floats read stay in the row (one at a time was 14 % of the 3x3/2 stem's time).
          if (hi - lo >= 8) i = even_columns_avx2(src, lo, std::min(hi, (p.w - first) / 2), dst);
          for (; i < hi; ++i) dst[i] = src[2 * i];
        }
        std::fill(dst + hi, dst + phase, 0.0f);
      }
    }
}

[[gnu::target("avx2,fma")]] inline __m256i lane_mask8(uint32_t bits) {
  const __m256i lane = _mm256_set_epi32(128, 64, 32, 16, 8, 4, 2, 1);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), lane), lane);
}

// Output channels k0 .. k0 + 4, columns ox0 .. ox0 + 8 * NV of output row oy
// (NV = 3 but for a row's last columns: BlazeFace's rows of 64 and 128 end
// in 16 and 8, which a 24-wide tile computed a third and two thirds in vain).
template <int NV>
[[gnu::target("avx2,fma")]] void stem_tile_avx2(const StemJob& job, const StemRow& sr, const float* buf, int64_t k0,
                                                int64_t oy, int64_t ox0) {
  constexpr int KB = 4;
  const ops::Conv2dPlan& p = *job.p;
  const int64_t plane = p.oh * p.ow;
  const int64_t* const col = sr.col;
  __m256 acc[KB][NV];
#pragma GCC unroll 4
  for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[kb][v] = _mm256_setzero_ps();
  const float* tap_w = job.w + k0;  // tap t's weights: KB floats at t * k
  for (int64_t r = 0; r < p.c * p.kh; ++r) {
    const float* row = buf + r * sr.row_pitch + ox0;
    for (int64_t kx = 0; kx < p.kw; ++kx, tap_w += p.k) {
      const float* at = row + col[kx];
      __m256 x[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) x[v] = _mm256_loadu_ps(at + 8 * v);
#pragma GCC unroll 4
      for (int kb = 0; kb < KB; ++kb) {
        const __m256 w = _mm256_broadcast_ss(tap_w + kb);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = _mm256_fmadd_ps(w, x[v], acc[kb][v]);
      }
    }
  }
  // The bias, the residual and the activation before the one store; plain
  // loads and stores for whole vectors (masked ones are many times slower on
  // AMD's cores), masked for a row's last columns.
  const int64_t at = k0 * plane + oy * p.ow + ox0;
  const __m256 lo = _mm256_set1_ps(job.p->epilogue.a), hi = _mm256_set1_ps(job.p->epilogue.b);
  if (ox0 + 8 * NV <= p.ow) {
    // A whole tile, stage by stage with the job's fields in registers (the
    // stores could alias the job as far as the compiler knows; the stem ran
    // 2-6 % faster, alternated in one process). The same steps per element.
    const float* const bias = job.bias;
    const float* const residual = job.residual;
    float* const out = job.out + at;
    const ops::Activation activation = job.activation;
    if (bias)
#pragma GCC unroll 4
      for (int kb = 0; kb < KB; ++kb) {
        const __m256 b = _mm256_broadcast_ss(bias + k0 + kb);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = _mm256_add_ps(acc[kb][v], b);
      }
    if (residual)
#pragma GCC unroll 4
      for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v)
          acc[kb][v] = _mm256_add_ps(acc[kb][v], _mm256_loadu_ps(residual + at + kb * plane + 8 * v));
    if (activation != ops::Activation::kNone)
#pragma GCC unroll 4
      for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[kb][v] = tile_activation(activation, acc[kb][v], lo, hi);
#pragma GCC unroll 4
    for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) _mm256_storeu_ps(out + kb * plane + 8 * v, acc[kb][v]);
    return;
  }
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int64_t n = std::min<int64_t>(8, p.ow - ox0 - 8 * v);
    if (n <= 0) break;
    const bool whole = n == 8;
    const __m256i store = lane_mask8((1u << n) - 1);
#pragma GCC unroll 4
    for (int kb = 0; kb < KB; ++kb) {
      __m256 y = acc[kb][v];
      if (job.bias) y = _mm256_add_ps(y, _mm256_set1_ps(job.bias[k0 + kb]));
      float* out = job.out + at + kb * plane + 8 * v;
      if (job.residual) {
        const float* res = job.residual + at + kb * plane + 8 * v;
        y = _mm256_add_ps(y, whole ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, store));
      }
      y = tile_activation(job.activation, y, lo, hi);
      if (whole)
        _mm256_storeu_ps(out, y);
      else
        _mm256_maskstore_ps(out, store, y);
    }
  }
}

// One output row (task: image * oh + oy) of every channel, then its epilogue.
void stem_row(void* context, int64_t task) {
  const StemJob& job = *static_cast<const StemJob*>(context);
  const ops::Conv2dPlan& p = *job.p;
  const int64_t n = task / p.oh, oy = task % p.oh;
  const float* image = job.x + n * p.c * p.h * p.w;
  StemJob image_job = job;
  image_job.out = job.out + n * p.k * p.oh * p.ow;
  if (job.residual) image_job.residual = job.residual + n * p.k * p.oh * p.ow;
  alignas(64) float buf[kStemBufferFloats];
  stem_fill(p, image, oy, buf);
  const int64_t tile = stem_columns(p), phase = stem_phase(p);
  StemRow sr;
  sr.row_pitch = p.stride_w * phase;
  for (int64_t kx = 0; kx < p.kw; ++kx) sr.col[kx] = (kx % p.stride_w) * phase + kx / p.stride_w;
  if (isa_avx512()) {  // tiles of 8 x 48 or 8 x 32
    for (int64_t k0 = 0; k0 < p.k; k0 += 8)
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += tile) {
        const int64_t left = p.ow - ox0;
        if (left > 32 && tile == 48)
          stem_tile_avx512<3>(image_job, sr, buf, k0, oy, ox0);
        else if (left > 16)
          stem_tile_avx512<2>(image_job, sr, buf, k0, oy, ox0);
        else
          stem_tile_avx512<1>(image_job, sr, buf, k0, oy, ox0);
      }
  } else {  // AVX2: tiles of 4 x 24 or 4 x 16
    for (int64_t k0 = 0; k0 < p.k; k0 += 4)
      for (int64_t ox0 = 0; ox0 < p.ow; ox0 += tile) {
        const int64_t left = p.ow - ox0;
        if (left > 16 && tile == 24)
          stem_tile_avx2<3>(image_job, sr, buf, k0, oy, ox0);
        else if (left > 8)
          stem_tile_avx2<2>(image_job, sr, buf, k0, oy, ox0);
        else
          stem_tile_avx2<1>(image_job, sr, buf, k0, oy, ox0);
      }
  }
  // Channels as rows p.oh * p.ow apart: an activation tile_finish_applies does not cover, on this output row.
  if (job.epilogue) apply_epilogue(*job.epilogue, image_job.out + oy * p.ow, p.oh * p.ow, p.k, p.ow);
}
#endif

Status conv2d_stem(const KernelContext& context, const Dispatch& d) {
#ifdef HEXIR_CONV_X86
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  // The weights tap-major: prepared, or here on the stack (a direct call).
  alignas(64) float transposed[kStemMaxWeights];
  const float* taps = static_cast<const float*>(d.prepared);
  if (taps == nullptr) {
    stem_weights_tap_major(p, input(d, 1), transposed);
    taps = transposed;
  }
  const auto activation = static_cast<ops::Activation>(p.epilogue.activation);
  const bool in_registers = tile_finish_applies(activation);
  StemJob job{&p,
              input(d, 0),
              taps,
              p.has_bias ? input(d, 2) : nullptr,
              output(d, 0),
              p.epilogue.activation != 0 && !in_registers ? &p.epilogue : nullptr,
              p.has_residual ? input(d, 3) : nullptr,
              in_registers ? activation : ops::Activation::kNone};
  parallel_for(context, p.n * p.oh, stem_row, &job);
#else
  (void)context, (void)d;
#endif
  return ok_status();
}

}  // namespace

// Per image and group: out[k_g, oh*ow] = W[k_g, c_g*kh*kw] x col[c_g*kh*kw, oh*ow],
// then the bias and the fused activation. Each output sums its products in
// (c, ky, kx) order.
Status conv2d(const KernelContext& context, const Dispatch& d) {
  const ops::Conv2dPlan& p = plan_of<ops::Conv2dPlan>(d);
  if (p.channels_last) return conv2d_channels_last(context, d);
  if (ops::conv2d_is_depthwise(p)) return depthwise_conv2d(context, d);
  if (stem_direct(p)) return conv2d_stem(context, d);
  const ops::Epilogue* epilogue = p.epilogue.activation != 0 ? &p.epilogue : nullptr;
  const float* x = input(d, 0);
  const float* w = input(d, 1);
  const float* bias = p.has_bias ? input(d, 2) : nullptr;
  float* out = output(d, 0);
  const int64_t spatial = p.oh * p.ow;
  const int64_t patch = p.c_per_group * p.kh * p.kw;
  if (d.prepared && conv2d_few_pixels(p)) {
    // The patches [patch, spatial] in place (a plain 1x1) or gathered into
    // the pool's scratch; without room the tiles below, from the weights in
    // place (the same sums, the same bits).
    ThreadPool* pool = pool_of(context);
    float* scratch = pool ? pool->scratch(0) : nullptr;
    const bool in_place = ops::conv2d_is_plain_gemm(p);
    if (in_place || (scratch && patch * spatial <= kScratchFloatsPerParticipant)) {
      const int64_t group_floats = gemm_packed_b_floats(patch, p.k_per_group);
      for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t g = 0; g < p.groups; ++g) {
          const float* image = x + (n * p.c + g * p.c_per_group) * p.h * p.w;
          const int64_t first = (n * p.k + g * p.k_per_group) * spatial;  // the group's first output plane
          const float* patches = image;
          if (!in_place) {
            const PatchSource source{&p, image};
            pack_patches(&source, 0, patch, 0, spatial, spatial, scratch);
            patches = scratch;
          }
          FewRowsGemm few{spatial, p.k_per_group, patch, patches, 1, spatial,
                          static_cast<const float*>(d.prepared) + g * group_floats, out + first, 1, spatial};
          few.col_bias = bias ? bias + g * p.k_per_group : nullptr;
          if (p.has_residual) {
            few.residual = input(d, 3) + first;
            few.r_row = 1;
            few.r_col = spatial;
          }
          few.epilogue = epilogue;
          gemm_few_rows(context, few);
        }
      }
      return ok_status();
    }
  }
  const auto* packed = conv2d_few_pixels(p) ? nullptr : static_cast<const float*>(d.prepared);
  const int64_t group_floats = packed ? gemm_packed_a_floats(p.k_per_group, patch) : 0;
  for (int64_t n = 0; n < p.n; ++n) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const float* image = x + (n * p.c + g * p.c_per_group) * p.h * p.w;
      float* result = out + (n * p.k + g * p.k_per_group) * spatial;
      GemmArgs args{p.k_per_group, spatial, patch, w + g * p.k_per_group * patch, patch,
                    image,  // 1x1, stride 1, no padding: the image is the patch matrix
                    spatial, result, spatial, bias ? bias + g * p.k_per_group : nullptr};
      args.epilogue = epilogue;
      if (p.has_residual) {
        args.residual = input(d, 3) + (n * p.k + g * p.k_per_group) * spatial;
        args.ldr = spatial;
      }
      if (packed) args.packed_a = packed + g * group_floats;
      const PatchSource source{&p, image};
      if (!ops::conv2d_is_plain_gemm(p)) {
        args.pack_b = pack_patches;
        args.pack_context = &source;
      }
      gemm(context, args);
    }
  }
  return ok_status();
}

// max_pool / average_pool: per output element, only the taps inside the
// input (ops::pool_tap_range), so the work is bounded by the input, not by
// the kernel size; the count_include_pad divisor is counted the same way.
// Columns whose window lies wholly inside the input (all but the borders)
// skip the range arithmetic; planes are split over the pool. Each output
// takes its taps in (ky, kx) order on every path.
namespace {

struct PoolJob {
  const ops::Pool2dPlan* p;
  const float* x;
  float* out;
  int64_t ox_begin, ox_end;  // columns whose window is inside the input
};

// NaN sticks: nothing compares greater than it, and a later NaN replaces it.
inline float max_step(float m, float v) { return (v > m || v != v) ? v : m; }

// Max over a KH x KW window with unit dilation, for the interior columns
// [begin, end) of one output row whose rows are all inside: the taps in (ky, kx)
// order as the general loop takes them, unrolled.
template <int KH, int KW>
void max_pool_interior(const float* top, int64_t w, int64_t stride, int64_t x_offset, int64_t begin, int64_t end,
                       float* out) {
  for (int64_t ox = begin; ox < end; ++ox) {
    const float* window = top + ox * stride + x_offset;
    float m = -std::numeric_limits<float>::infinity();
    for (int ky = 0; ky < KH; ++ky)
      for (int kx = 0; kx < KW; ++kx) m = max_step(m, window[ky * w + kx]);
    out[ox] = m;
  }
}

#ifdef HEXIR_CONV_X86
// max_step on 8 lanes.
[[gnu::target("avx2")]] inline __m256 max_step8(__m256 m, __m256 v) {
  const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, m, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_ps(m, v, take);
}

// 8 taps of one kernel position for 8 outputs `stride` (1 or 2) apart.
template <int64_t kStride>
[[gnu::target("avx2")]] inline __m256 taps8(const float* at) {
  if constexpr (kStride == 1) {
    return _mm256_loadu_ps(at);
  } else {
    __m256 even, odd;
    deinterleave8(_mm256_loadu_ps(at), _mm256_loadu_ps(at + 8), even, odd);
    return even;
  }
}

// The interior columns [begin, end) of one output row whose window rows are
// all inside (unit dilation), 8 outputs per step: each kernel position, in
// (ky, kx) order, is one load (stride 1) or one deinterleaved pair (stride
// 2) for all 8; the same taps in the same order as the scalar loop, so the
// same bits. Returns where it stopped (the last < 8 columns are the
// caller's). A stride-2 step reads up to 15 floats past its last tap's row
// position: only while that stays inside the row.
template <bool kMax, int64_t kStride>
[[gnu::target("avx2")]] int64_t pool_interior_avx2(const float* top, int64_t w, int64_t kh, int64_t kw,
                                                   int64_t x_offset, int64_t begin, int64_t end, float* out) {
  int64_t ox = begin;
  const double count = static_cast<double>(kh * kw);
  for (; ox + 8 <= end; ox += 8) {
    const int64_t x0 = ox * kStride + x_offset;
    if (kStride == 2 && x0 + kw + 15 > w) break;
    if constexpr (kMax) {
      __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx) m = max_step8(m, taps8<kStride>(top + ky * w + x0 + kx));
      _mm256_storeu_ps(out + ox, m);
    } else {  // double sums, as the scalar loop's
      __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
      for (int64_t ky = 0; ky < kh; ++ky)
        for (int64_t kx = 0; kx < kw; ++kx) {
          const __m256 v = taps8<kStride>(top + ky * w + x0 + kx);
          lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
          hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
        }
      const __m256d d = _mm256_set1_pd(count);
      const __m128 a = _mm256_cvtpd_ps(_mm256_div_pd(lo, d)), b = _mm256_cvtpd_ps(_mm256_div_pd(hi, d));
      _mm256_storeu_ps(out + ox, _mm256_set_m128(b, a));
    }
  }
  return ox;
}
#endif

#ifdef HEXIR_CONV_X86
// A max pool (unit dilation, stride 1 or 2) of a small plane: the plane
// copied into a buffer with -inf where the windows reach past it (pads,
// ceil mode), then every output row 8 outputs a step, no borders. A -inf
// tap never changes max_step's result, so the same bits. googlenet's 3x3
// stride-1 pools of 14 x 14 and 28 x 28 planes were more border than
// interior (18 % of its time). Without a NaN in the plane (checked while
// copying it), max_step(m, v) is maxps(v, m) (v > m ? v : m, signed zeros
// alike): one instruction a tap where max_step took four; and at stride 2
// the buffer holds each row's even columns, then its odd ones, so that a
// tap of 8 outputs is one load, not a deinterleaved pair (ShuffleNet's
// 3x3/2 pool of 24 x 112 x 112 ran at 3x onnxruntime's time). Returns
// false when the buffer would not fit or the plane holds a NaN (the
// caller's loop then).
constexpr int64_t kPaddedPoolFloats = 16384;

// 8 outputs of max_pool_padded_plane's buffer from output ox on: tap (ky,
// kx) of output ox is row ky's column ox * stride + kx (at stride 2, even
// columns from 0, odd ones from `half`). KW: the window's width where fixed
// (its taps' offsets constants), else 0 (p.kw).
template <int KW, int64_t kStride>
[[gnu::target("avx2")]] inline void max_pool_step(const ops::Pool2dPlan& p, const float* top, int64_t pitch,
                                                  int64_t half, int64_t ox, float* dst) {
  const int64_t kw = KW != 0 ? KW : p.kw;
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t ky = 0; ky < p.kh; ++ky) {
    const float* r = top + ky * pitch + ox;
#pragma GCC unroll 8
    for (int64_t kx = 0; kx < kw; ++kx)
      m = _mm256_max_ps(_mm256_loadu_ps(kStride == 1 ? r + kx : r + (kx & 1) * half + kx / 2), m);
  }
  _mm256_storeu_ps(dst, m);
}
template <int KW, int64_t kStride>
[[gnu::target("avx2")]] void max_pool_steps(const ops::Pool2dPlan& p, const float* top, int64_t pitch, int64_t half,
                                            float* row) {
  if (p.ow < 8) {  // one step into a row of 8, its first ow kept
    alignas(32) float outputs[8];
    max_pool_step<KW, kStride>(p, top, pitch, half, 0, outputs);
    std::copy(outputs, outputs + p.ow, row);
    return;
  }
  // The last step overlaps the one before (its outputs computed twice, the same bits).
  for (int64_t ox = 0; ox < p.ow; ox += 8) {
    const int64_t at = std::min(ox, p.ow - 8);
    max_pool_step<KW, kStride>(p, top, pitch, half, at, row + at);
  }
}

[[gnu::target("avx2")]] bool max_pool_padded_plane(const ops::Pool2dPlan& p, const float* image, float* out) {
  const int64_t stride = p.stride_w;
  // At least 8 outputs wide (a row shorter than a step is computed whole
  // and its first ow kept): the padded columns the windows read.
  const int64_t ow8 = std::max<int64_t>(p.ow, 8);
  const int64_t bw = (ow8 - 1) * stride + p.kw;
  const int64_t half = (bw + 1) / 2;  // stride 2: a row's even columns, then its odd ones from here
  const int64_t pitch = stride == 2 ? 2 * half : bw;
  const int64_t bh = (p.oh - 1) * p.stride_h + p.kh;
  if (pitch * bh > kPaddedPoolFloats) return false;
  alignas(64) float buf[kPaddedPoolFloats];
  std::fill(buf, buf + pitch * bh, -std::numeric_limits<float>::infinity());
  const int64_t first = std::max<int64_t>(0, -p.pad_left);  // a negative pad crops
  const int64_t last = std::clamp<int64_t>(bw - p.pad_left, first, p.w);
  __m256 nan = _mm256_setzero_ps();
  bool scalar_nan = false;
  for (int64_t iy = 0; iy < p.h; ++iy) {
    const int64_t by = iy + p.pad_top;
    if (by < 0 || by >= bh) continue;
    const float* src = image + iy * p.w;
    float* row = buf + by * pitch;
    int64_t ix = first;
    if (stride == 1) {
      for (; ix + 8 <= last; ix += 8) {
        const __m256 v = _mm256_loadu_ps(src + ix);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm256_storeu_ps(row + ix + p.pad_left, v);
      }
      for (; ix < last; ++ix) scalar_nan |= src[ix] != src[ix], row[ix + p.pad_left] = src[ix];
      continue;
    }
    auto put = [&](int64_t i) {  // column x = i + pad_left of the padded row
      const int64_t x = i + p.pad_left;
      scalar_nan |= src[i] != src[i];
      row[(x & 1) * half + x / 2] = src[i];
    };
    if (ix < last && ((ix + p.pad_left) & 1)) put(ix++);  // from an even column on, 16 at a time
    for (; ix + 16 <= last; ix += 16) {
      const __m256 a = _mm256_loadu_ps(src + ix), b = _mm256_loadu_ps(src + ix + 8);
      nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q)));
      __m256 even, odd;
      deinterleave8(a, b, even, odd);
      const int64_t x2 = (ix + p.pad_left) / 2;
      _mm256_storeu_ps(row + x2, even);
      _mm256_storeu_ps(row + half + x2, odd);
    }
    if (ix + 8 <= last) {  // 8 more: [e0 e1 e2 e3 o0 o1 o2 o3]
      const __m256 a = _mm256_loadu_ps(src + ix);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
      const __m256 eo = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
      const int64_t x2 = (ix + p.pad_left) / 2;
      _mm_storeu_ps(row + x2, _mm256_castps256_ps128(eo));
      _mm_storeu_ps(row + half + x2, _mm256_extractf128_ps(eo, 1));
      ix += 8;
    }
    for (; ix < last; ++ix) put(ix);
  }
  if (scalar_nan || _mm256_movemask_ps(nan) != 0) return false;
  const auto steps = stride == 1 ? (p.kw == 3 ? max_pool_steps<3, 1> : p.kw == 2 ? max_pool_steps<2, 1> : max_pool_steps<0, 1>)
                                 : (p.kw == 3 ? max_pool_steps<3, 2> : p.kw == 2 ? max_pool_steps<2, 2> : max_pool_steps<0, 2>);
  for (int64_t oy = 0; oy < p.oh; ++oy) steps(p, buf + oy * p.stride_h * pitch, pitch, half, out + oy * p.ow);
  return true;
}
#endif

template <bool kMax>
void pool_plane(void* context, int64_t plane) {
  const PoolJob& job = *static_cast<const PoolJob*>(context);
  const ops::Pool2dPlan& p = *job.p;
  const float* image = job.x + plane * p.h * p.w;
  float* out = job.out + plane * p.oh * p.ow;
#ifdef HEXIR_CONV_X86
  if (kMax && p.dilation_h == 1 && p.dilation_w == 1 && (p.stride_w == 1 || p.stride_w == 2) && isa_avx2() &&
      max_pool_padded_plane(p, image, out))
    return;
#endif
  for (int64_t oy = 0; oy < p.oh; ++oy) {
    const int64_t y0 = oy * p.stride_h - p.pad_top;
    int64_t ky0, ky1;
    ops::pool_tap_range(y0, p.dilation_h, p.kh, 0, p.h, &ky0, &ky1);
    int64_t py0 = 0, py1 = 0;
    if (!kMax && p.count_include_pad)
      ops::pool_tap_range(y0, p.dilation_h, p.kh, -p.pad_top, p.h + p.pad_bottom, &py0, &py1);
    // Rows wholly inside, unit dilation: the interior columns vectorized
    // (stride 1 or 2) or, for the common max pools (2x2, 3x3), unrolled;
    // the borders and the rest below.
    const bool rows_inside = ky0 == 0 && ky1 == p.kh && p.dilation_h == 1 && p.dilation_w == 1;
    int64_t skip_begin = 0, skip_end = 0;  // columns done here
    if (rows_inside && job.ox_begin < job.ox_end) {
      const float* top = image + y0 * p.w;
      int64_t done = job.ox_begin;
#ifdef HEXIR_CONV_X86
      if (isa_avx2() && (p.stride_w == 1 || p.stride_w == 2))
        done = (p.stride_w == 1 ? pool_interior_avx2<kMax, 1> : pool_interior_avx2<kMax, 2>)(
            top, p.w, p.kh, p.kw, -p.pad_left, job.ox_begin, job.ox_end, out);
#endif
      if (kMax && p.kh == 2 && p.kw == 2) {
        max_pool_interior<2, 2>(top, p.w, p.stride_w, -p.pad_left, done, job.ox_end, out);
        done = job.ox_end;
      } else if (kMax && p.kh == 3 && p.kw == 3) {
        max_pool_interior<3, 3>(top, p.w, p.stride_w, -p.pad_left, done, job.ox_end, out);
        done = job.ox_end;
      }
      skip_begin = job.ox_begin, skip_end = done;
    }
    for (int64_t ox = 0; ox < p.ow; ++ox, ++out) {
      if (ox == skip_begin && skip_end > skip_begin) {
        out += skip_end - 1 - ox;
        ox = skip_end - 1;
        continue;
      }
      const int64_t x0 = ox * p.stride_w - p.pad_left;
      int64_t kx0 = 0, kx1 = p.kw, px0 = 0, px1 = p.kw;
      if (ox < job.ox_begin || ox >= job.ox_end) {
        ops::pool_tap_range(x0, p.dilation_w, p.kw, 0, p.w, &kx0, &kx1);
        if (!kMax && p.count_include_pad)
          ops::pool_tap_range(x0, p.dilation_w, p.kw, -p.pad_left, p.w + p.pad_right, &px0, &px1);
      }
      if constexpr (kMax) {
        float m = -std::numeric_limits<float>::infinity();
        // Indices, not a row pointer: a plane zero columns wide has no data
        // (a null image), and no pointer may be formed from it.
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t row = (y0 + ky * p.dilation_h) * p.w + x0;  // + kx * dilation_w is inside
          for (int64_t kx = kx0; kx < kx1; ++kx) {
            m = max_step(m, image[row + kx * p.dilation_w]);
          }
        }
        *out = m;
      } else {
        double sum = 0.0;
        for (int64_t ky = ky0; ky < ky1; ++ky) {
          const int64_t row = (y0 + ky * p.dilation_h) * p.w + x0;
          for (int64_t kx = kx0; kx < kx1; ++kx) sum += image[row + kx * p.dilation_w];
        }
        const int64_t count = p.count_include_pad ? (py1 - py0) * (px1 - px0) : (ky1 - ky0) * (kx1 - kx0);
        *out = static_cast<float>(sum / static_cast<double>(count));  // no taps: 0/0, NaN
      }
    }
  }
}

// Channels-last pools: per output pixel the channels in vector lanes, each
// lane taking its window's taps inside the input (ops::pool_tap_range) in
// (ky, kx) order as the NCHW kernel does: max_step per lane, or double sums
// divided by the same count, so the same bits. Rows of output pixels are
// split over the pool.
struct PoolWindow {
  const float* image;          // the image's element (0, 0, 0)
  int64_t row_step, col_step;  // floats between taps: dilation_h * w * c, dilation_w * c
  int64_t first;               // the first tap's offset from image
  int64_t rows, cols;          // taps inside the input
  double count;                // average_pool's divisor
};

template <bool kMax>
void pool_pixel_scalar(const PoolWindow& win, int64_t c_begin, int64_t c_end, float* out) {
  for (int64_t ch = c_begin; ch < c_end; ++ch) {
    const float* at = win.image + win.first + ch;
    if constexpr (kMax) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx) m = max_step(m, at[ky * win.row_step + kx * win.col_step]);
      out[ch] = m;
    } else {
      double sum = 0.0;
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx) sum += at[ky * win.row_step + kx * win.col_step];
      out[ch] = static_cast<float>(sum / win.count);  // no taps: 0/0, NaN
    }
  }
}

#ifdef HEXIR_CONV_X86
// max_pool: 64 channels a step in four independent chains (one vector at a
// time waited on each tap's compare and move: ResNet's 3x3/2 pool of 64
// channels ran at twice onnxruntime's time), the rest 16 a step through
// max_step per lane, the last step masked.
[[gnu::target("avx512f")]] inline __m512 max_step16(__m512 m, __m512 x) {
  const __mmask16 take = _mm512_cmp_ps_mask(x, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(m, take, x);
}
// The 64-channel steps take vmaxps(x, m) (x > m ? x : m: the tap rule for
// every x but a NaN, which it drops) and note whether any tap was a NaN;
// such a step is done again by the scalar rule. Each tap's compare, or and
// move had made the running maxima a 4-5 cycle chain (ResNet's 3x3/2 pool
// after the stem: 0.20 against onnxruntime's 0.13 ms).
[[gnu::target("avx512f")]] void max_pixel_avx512(const PoolWindow& win, int64_t c, float* out) {
  int64_t ch = 0;
  for (; ch + 64 <= c; ch += 64) {
    const float* at = win.image + win.first + ch;
    __m512 m[4];
    __mmask16 nan = 0;
    for (int v = 0; v < 4; ++v) m[v] = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t ky = 0; ky < win.rows; ++ky)
      for (int64_t kx = 0; kx < win.cols; ++kx) {
        const float* tap = at + ky * win.row_step + kx * win.col_step;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m512 x = _mm512_loadu_ps(tap + 16 * v);
          m[v] = _mm512_max_ps(x, m[v]);
          nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        }
      }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(out + ch + 16 * v, m[v]);
    if (nan) pool_pixel_scalar<true>(win, ch, ch + 64, out);
  }
  for (; ch < c; ch += 16) {
    const __mmask16 lanes = c - ch >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (c - ch)) - 1);
    const float* at = win.image + win.first + ch;
    __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int64_t ky = 0; ky < win.rows; ++ky)
      for (int64_t kx = 0; kx < win.cols; ++kx)
        m = max_step16(m, _mm512_maskz_loadu_ps(lanes, at + ky * win.row_step + kx * win.col_step));
    _mm512_mask_storeu_ps(out + ch, lanes, m);
  }
}

// average_pool: 64 channels a step in four independent chains of double sums
// (two __m512d per 16 channels; one chain of 8 waited on each add: Inception's
// 3x3 pools of 192-768 channels at 35 x 35 ran at 4-5x onnxruntime's time),
// then 16 a step, the last one masked; each lane's taps in (ky, kx) order,
// divided by the count in double: the scalar loop's bits.
[[gnu::target("avx512f")]] inline void avg_store16(__m512d lo, __m512d hi, __m512d count, float* out, int64_t n) {
  alignas(64) float v[16];
  _mm256_store_ps(v, _mm512_cvtpd_ps(_mm512_div_pd(lo, count)));
  _mm256_store_ps(v + 8, _mm512_cvtpd_ps(_mm512_div_pd(hi, count)));
  std::memcpy(out, v, static_cast<size_t>(n) * sizeof(float));
}
[[gnu::target("avx512f")]] void avg_pixel_avx512(const PoolWindow& win, int64_t c, float* out) {
  const __m512d count = _mm512_set1_pd(win.count);
  int64_t ch = 0;
  for (; ch + 64 <= c; ch += 64) {
    const float* at = win.image + win.first + ch;
    __m512d lo[4], hi[4];
    for (int v = 0; v < 4; ++v) lo[v] = hi[v] = _mm512_setzero_pd();
    for (int64_t ky = 0; ky < win.rows; ++ky)
      for (int64_t kx = 0; kx < win.cols; ++kx) {
        const float* tap = at + ky * win.row_step + kx * win.col_step;
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          lo[v] = _mm512_add_pd(lo[v], _mm512_cvtps_pd(_mm256_loadu_ps(tap + 16 * v)));
          hi[v] = _mm512_add_pd(hi[v], _mm512_cvtps_pd(_mm256_loadu_ps(tap + 16 * v + 8)));
        }
      }
    for (int v = 0; v < 4; ++v) avg_store16(lo[v], hi[v], count, out + ch + 16 * v, 16);
  }
  for (; ch < c; ch += 16) {
    const int64_t n = std::min<int64_t>(16, c - ch);
    const __mmask16 lanes = n == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
    const float* at = win.image + win.first + ch;
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t ky = 0; ky < win.rows; ++ky)
      for (int64_t kx = 0; kx < win.cols; ++kx) {
        const __m512 x = _mm512_maskz_loadu_ps(lanes, at + ky * win.row_step + kx * win.col_step);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(x)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
      }
    avg_store16(lo, hi, count, out + ch, n);
  }
}

// 8 averages from their double sums of channels 0-3 (lo) and 4-7 (hi).
[[gnu::target("avx2")]] inline void avg_store8(__m256d lo, __m256d hi, __m256d count, float* out) {
  const __m128 a = _mm256_cvtpd_ps(_mm256_div_pd(lo, count)), b = _mm256_cvtpd_ps(_mm256_div_pd(hi, count));
  _mm256_storeu_ps(out, _mm256_set_m128(b, a));
}

// 8 channels a step; the last c % 8 the scalar loop's.
template <bool kMax>
[[gnu::target("avx2")]] int64_t pool_pixel_avx2(const PoolWindow& win, int64_t c, float* out) {
  int64_t ch = 0;
  if constexpr (kMax) {  // 32 channels a step in four independent chains, as max_pixel_avx512 (vmaxps)
    for (; ch + 32 <= c; ch += 32) {
      const float* at = win.image + win.first + ch;
      __m256 m[4], nan = _mm256_setzero_ps();
      for (int v = 0; v < 4; ++v) m[v] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx) {
          const float* tap = at + ky * win.row_step + kx * win.col_step;
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) {
            const __m256 x = _mm256_loadu_ps(tap + 8 * v);
            m[v] = _mm256_max_ps(x, m[v]);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
          }
        }
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) _mm256_storeu_ps(out + ch + 8 * v, m[v]);
      if (_mm256_movemask_ps(nan)) pool_pixel_scalar<true>(win, ch, ch + 32, out);
    }
  } else {  // 32 channels a step in eight independent chains of double sums, as avg_pixel_avx512
    // (one pair of chains per 8 channels waited on each add: Inception-v3's nine 3x3 pools at
    // 2.7x onnxruntime's time on AVX2)
    const __m256d count = _mm256_set1_pd(win.count);
    for (; ch + 32 <= c; ch += 32) {
      const float* at = win.image + win.first + ch;
      __m256d lo[4], hi[4];
      for (int v = 0; v < 4; ++v) lo[v] = hi[v] = _mm256_setzero_pd();
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx) {
          const float* tap = at + ky * win.row_step + kx * win.col_step;
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) {
            lo[v] = _mm256_add_pd(lo[v], _mm256_cvtps_pd(_mm_loadu_ps(tap + 8 * v)));
            hi[v] = _mm256_add_pd(hi[v], _mm256_cvtps_pd(_mm_loadu_ps(tap + 8 * v + 4)));
          }
        }
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) avg_store8(lo[v], hi[v], count, out + ch + 8 * v);
    }
  }
  for (; ch + 8 <= c; ch += 8) {
    const float* at = win.image + win.first + ch;
    if constexpr (kMax) {
      __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx)
          m = max_step8(m, _mm256_loadu_ps(at + ky * win.row_step + kx * win.col_step));
      _mm256_storeu_ps(out + ch, m);
    } else {
      __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
      for (int64_t ky = 0; ky < win.rows; ++ky)
        for (int64_t kx = 0; kx < win.cols; ++kx) {
          const __m256 v = _mm256_loadu_ps(at + ky * win.row_step + kx * win.col_step);
          lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
          hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
        }
      avg_store8(lo, hi, _mm256_set1_pd(win.count), out + ch);
    }
  }
  return ch;
}
#endif

template <bool kMax>
void pool_nhwc_row(void* context, int64_t row) {  // row: n * oh + oy
  const PoolJob& job = *static_cast<const PoolJob*>(context);
  const ops::Pool2dPlan& p = *job.p;
  const int64_t oy = row % p.oh;
  PoolWindow win{
      job.x + row / p.oh * p.h * p.w * p.c, p.dilation_h * p.w * p.c, p.dilation_w * p.c, 0, 0, 0, 1.0};
  float* out = job.out + row * p.ow * p.c;
  const int64_t y0 = oy * p.stride_h - p.pad_top;
  int64_t ky0, ky1, py0 = 0, py1 = 0;
  ops::pool_tap_range(y0, p.dilation_h, p.kh, 0, p.h, &ky0, &ky1);
  if (!kMax && p.count_include_pad)
    ops::pool_tap_range(y0, p.dilation_h, p.kh, -p.pad_top, p.h + p.pad_bottom, &py0, &py1);
  for (int64_t ox = 0; ox < p.ow; ++ox, out += p.c) {
    const int64_t x0 = ox * p.stride_w - p.pad_left;
    int64_t kx0, kx1, px0 = 0, px1 = 0;
    ops::pool_tap_range(x0, p.dilation_w, p.kw, 0, p.w, &kx0, &kx1);
    if (!kMax && p.count_include_pad)
      ops::pool_tap_range(x0, p.dilation_w, p.kw, -p.pad_left, p.w + p.pad_right, &px0, &px1);
    win.first = ((y0 + ky0 * p.dilation_h) * p.w + x0 + kx0 * p.dilation_w) * p.c;
    win.rows = ky1 - ky0, win.cols = kx1 - kx0;
    win.count = static_cast<double>(p.count_include_pad ? (py1 - py0) * (px1 - px0) : win.rows * win.cols);
    int64_t done = 0;
#ifdef HEXIR_CONV_X86
    if (isa_avx512()) {
      if constexpr (kMax)
        max_pixel_avx512(win, p.c, out);
      else
        avg_pixel_avx512(win, p.c, out);
      continue;
    }
    if (isa_avx2()) done = pool_pixel_avx2<kMax>(win, p.c, out);
#endif
    pool_pixel_scalar<kMax>(win, done, p.c, out);
  }
}

}  // namespace

namespace {

// max_pool of u8 (a QDQ model's pool on its quantized values: the max of
// monotonic dequantized values is the dequantized max, so it moves before
// the dequantize, compiler/passes/quantized.cc). Only the taps inside the
// input count, as in the float kernels (every window has one).
struct PoolU8Job {
  const ops::Pool2dPlan* p;
  const uint8_t* x;
  uint8_t* out;
};

#ifdef HEXIR_CONV_X86
// 64 channels a step, the last step masked.
[[gnu::target("avx512f,avx512bw")]] void max_pixel_u8_avx512(const uint8_t* at, int64_t row_step, int64_t col_step,
                                                             int64_t rows, int64_t cols, int64_t c, uint8_t* out) {
  for (int64_t ch = 0; ch < c; ch += 64) {
    const __mmask64 lanes = c - ch >= 64 ? ~__mmask64{0} : (__mmask64{1} << (c - ch)) - 1;
    __m512i m = _mm512_setzero_si512();
    for (int64_t ky = 0; ky < rows; ++ky)
      for (int64_t kx = 0; kx < cols; ++kx)
        m = _mm512_max_epu8(m, _mm512_maskz_loadu_epi8(lanes, at + ch + ky * row_step + kx * col_step));
    _mm512_mask_storeu_epi8(out + ch, lanes, m);
  }
}

// 32 channels a step; the channels left (c % 32) for the scalar loop.
[[gnu::target("avx2")]] int64_t max_pixel_u8_avx2(const uint8_t* at, int64_t row_step, int64_t col_step,
                                                  int64_t rows, int64_t cols, int64_t c, uint8_t* out) {
  int64_t ch = 0;
  for (; ch + 32 <= c; ch += 32) {
    __m256i m = _mm256_setzero_si256();
    for (int64_t ky = 0; ky < rows; ++ky)
      for (int64_t kx = 0; kx < cols; ++kx)
        m = _mm256_max_epu8(
            m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + ch + ky * row_step + kx * col_step)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + ch), m);
  }
  return ch;
}
#endif

void max_pool_u8_row(void* context, int64_t row) {  // row: n * oh + oy (channels-last) or n * c (a plane)
  const PoolU8Job& job = *static_cast<const PoolU8Job*>(context);
  const ops::Pool2dPlan& p = *job.p;
  const auto window = [&](int64_t oy, int64_t ox, int64_t* first, int64_t* rows, int64_t* cols) {
    const int64_t y0 = oy * p.stride_h - p.pad_top, x0 = ox * p.stride_w - p.pad_left;
    int64_t ky0, ky1, kx0, kx1;
    ops::pool_tap_range(y0, p.dilation_h, p.kh, 0, p.h, &ky0, &ky1);
    ops::pool_tap_range(x0, p.dilation_w, p.kw, 0, p.w, &kx0, &kx1);
    *first = (y0 + ky0 * p.dilation_h) * p.w + x0 + kx0 * p.dilation_w;
    *rows = ky1 - ky0, *cols = kx1 - kx0;
  };
  int64_t first, rows, cols;
  if (!p.channels_last) {
    const uint8_t* plane = job.x + row * p.h * p.w;
    uint8_t* out = job.out + row * p.oh * p.ow;
    for (int64_t oy = 0; oy < p.oh; ++oy)
      for (int64_t ox = 0; ox < p.ow; ++ox) {
        window(oy, ox, &first, &rows, &cols);
        uint8_t m = 0;
        for (int64_t ky = 0; ky < rows; ++ky)
          for (int64_t kx = 0; kx < cols; ++kx)
            m = std::max(m, plane[first + ky * p.dilation_h * p.w + kx * p.dilation_w]);
        *out++ = m;
      }
    return;
  }
  const uint8_t* image = job.x + row / p.oh * p.h * p.w * p.c;
  const int64_t row_step = p.dilation_h * p.w * p.c, col_step = p.dilation_w * p.c;
  uint8_t* out = job.out + row * p.ow * p.c;
  for (int64_t ox = 0; ox < p.ow; ++ox, out += p.c) {
    window(row % p.oh, ox, &first, &rows, &cols);
    const uint8_t* at = image + first * p.c;
    int64_t done = 0;
#ifdef HEXIR_CONV_X86
    if (isa_avx512_bw_vl()) {
      max_pixel_u8_avx512(at, row_step, col_step, rows, cols, p.c, out);
      continue;
    }
    if (isa_avx2()) done = max_pixel_u8_avx2(at, row_step, col_step, rows, cols, p.c, out);
#endif
    // The channels left (all of them on NEON and portable; past the last
    // 32 on AVX2: ShuffleNet's 24 were all here), a tap at a time over the
    // channels: a loop the compiler vectorizes (umax, pmaxub). Per channel
    // over the taps it was scalar: 0.48 ms for ShuffleNet's pool at 56 x 56.
    if (done < p.c) {
      uint8_t* __restrict m = out + done;
      const int64_t left = p.c - done;
      std::memset(m, 0, static_cast<size_t>(left));
      for (int64_t ky = 0; ky < rows; ++ky)
        for (int64_t kx = 0; kx < cols; ++kx) {
          const uint8_t* __restrict tap = at + done + ky * row_step + kx * col_step;
          for (int64_t ch = 0; ch < left; ++ch) m[ch] = std::max(m[ch], tap[ch]);
        }
    }
  }
}

}  // namespace

Status max_pool_u8(const KernelContext& context, const Dispatch& d) {
  const ops::Pool2dPlan& p = plan_of<ops::Pool2dPlan>(d);
  PoolU8Job job{&p, input<uint8_t>(d, 0), output<uint8_t>(d, 0)};
  const int64_t rows = p.channels_last ? p.n * p.oh : p.n * p.c;
  if (static_cast<double>(p.n * p.c * p.oh * p.ow) * static_cast<double>(p.kh * p.kw) < 4e5) {
    for (int64_t row = 0; row < rows; ++row) max_pool_u8_row(&job, row);
  } else {
    parallel_for(context, rows, max_pool_u8_row, &job);
  }
  return ok_status();
}

Status pool2d(const KernelContext& context, const Dispatch& d) {
  const ops::Pool2dPlan& p = plan_of<ops::Pool2dPlan>(d);
  PoolJob job{&p, input(d, 0), output(d, 0), 0, 0};
  if (p.channels_last) {
    ThreadPool::TaskFn fn = p.is_max ? pool_nhwc_row<true> : pool_nhwc_row<false>;
    const int64_t rows = p.n * p.oh;
    if (static_cast<double>(rows) * static_cast<double>(p.ow * p.c * p.kh * p.kw) < 1e5) {
      for (int64_t row = 0; row < rows; ++row) fn(&job, row);
    } else {
      parallel_for(context, rows, fn, &job);
    }
    return ok_status();
  }
  // ox * stride_w - pad_left >= 0 and its last tap <= w - 1.
  job.ox_begin = std::min((p.pad_left + p.stride_w - 1) / p.stride_w, p.ow);
  const int64_t last = p.w - 1 - (p.kw - 1) * p.dilation_w + p.pad_left;  // x0 + pad_left at most this
  job.ox_end = last < 0 ? job.ox_begin : std::clamp(last / p.stride_w + 1, job.ox_begin, p.ow);
  ThreadPool::TaskFn fn = p.is_max ? pool_plane<true> : pool_plane<false>;
  const int64_t planes = p.n * p.c;
  const double work = static_cast<double>(planes) * static_cast<double>(p.oh * p.ow * p.kh * p.kw);
  if (work < 1e5) {
    for (int64_t plane = 0; plane < planes; ++plane) fn(&job, plane);
  } else {
    parallel_for(context, planes, fn, &job);
  }
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
