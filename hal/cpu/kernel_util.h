// Shared helpers and entry points of the builtin CPU kernels. Internal to
// hal/cpu; the public surface is cpu::find_cpu_kernel().
//
// A kernel reads its geometry from the plan its operator computed at prepare
// (ops/plans.h) and its operands from the dispatch's pointers. It does not
// validate: the verifier proved the shapes and the plan rule sized everything.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu_isa.h"
#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/hal/cpu_kernels.h"
#include "hexir/hal/device.h"
#include "hexir/ops/op.h"
#include "hexir/ops/plans.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace hexir::hal::cpu::internal {

using ops::kMaxRank;

template <typename Plan>
inline const Plan& plan_of(const Dispatch& d) {
  return *static_cast<const Plan*>(d.plan);
}
template <typename T = float>
inline const T* input(const Dispatch& d, uint32_t i) {
  return static_cast<const T*>(d.operands[i]);
}
template <typename T = float>
inline T* output(const Dispatch& d, uint32_t j) {
  return static_cast<T*>(d.operands[d.input_count + j]);
}

// Advances a row-major multi-index `index` over `dims` (rank entries) and
// returns false after the last one. Dims of size 0 never reach here.
inline bool next_index(int64_t* index, const int64_t* dims, int32_t rank) {
  for (int32_t i = rank; i-- > 0;) {
    if (++index[i] < dims[i]) return true;
    index[i] = 0;
  }
  return false;
}

// C[m,n] = A[m,k] * B[k,n] (+ row_bias[i] on row i), row-major with leading
// dimensions (gemm.cc). Split over the context's thread pool; every element
// is summed in the same order whatever the thread count.
// B may be produced while packing instead of read: pack_b writes rows
// [k0, k0 + kc) and columns [j0, j0 + nr) of B as kc rows of `width` floats,
// zero past nr (conv2d packs its patches straight from the image).
using PackB = void (*)(const void* context, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t width,
                       float* out);
struct GemmArgs {
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;  // unused with pack_b
  int64_t ldb;
  float* c;
  int64_t ldc;
  const float* row_bias = nullptr;  // optional
  PackB pack_b = nullptr;
  const void* pack_context = nullptr;
  const float* col_bias = nullptr;             // optional: + col_bias[j] on column j
  const ops::Epilogue* epilogue = nullptr;     // optional: the fused activation, after the biases
  // Optional, prepared once (gemm_pack_a / gemm_pack_b, e.g. at Program::prepare
  // for constant weights): A or B already in the register tile's order, so the
  // call packs nothing for that operand. Same sums, same bits as unpacked.
  const float* packed_a = nullptr;
  const float* packed_b = nullptr;  // replaces b / pack_b
  // Optional: + residual[i * ldr + j] on C[i][j], after the biases and before
  // the epilogue's activation (conv2d's fused residual add).
  const float* residual = nullptr;
  int64_t ldr = 0;
};
void gemm(const KernelContext& context, const GemmArgs& args);
// A fused epilogue's activation over a rows x cols block with leading dimension ld (in place).
void apply_epilogue(const ops::Epilogue& e, float* c, int64_t ld, int64_t rows, int64_t cols);
// c[i * ld + j] += r[i * ldr + j] over a rows x cols block: conv2d's residual,
// added after the bias and before the activation on every path.
void add_residual(float* c, int64_t ld, const float* r, int64_t ldr, int64_t rows, int64_t cols);
// The prepared layouts of the running CPU's path (the same process runs the
// GEMM that reads them): floats needed, and the packing of an m x k A or a
// k x n B with its leading dimension into `out`.
int64_t gemm_packed_a_floats(int64_t m, int64_t k);
void gemm_pack_a(const float* a, int64_t lda, int64_t m, int64_t k, float* out);
int64_t gemm_packed_b_floats(int64_t k, int64_t n);
void gemm_pack_b(const float* b, int64_t ldb, int64_t k, int64_t n, float* out);
// The GEMM's K block: a prepared B holds strips of kc rows per block of K.
int64_t gemm_k_block();
// Whether the GEMM reads A in place in its full tile height (AVX2, NEON,
// portable; AVX-512 packs A into taller panels than it reads in place): then
// a tall A is best given to one GEMM call, its rows tiled across any row
// structure the caller has.
bool gemm_reads_a_in_place();
// Contiguous operands, no bias, on the calling thread.
void gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C);

// C = A x B for a few rows of A (m <= kFewRows) against a prepared B
// (gemm_pack_b): a matmul of one to four tokens (an LSTM step, a decoder's
// GEMV) or, transposed, a convolution with a few output pixels and many
// channels (silero-vad's 1-D convolutions, 1 to 3 pixels wide). The
// register tile would hold one or two rows of accumulators there, their
// FMA chains' latency, not the FMA units, its bound (and a convolution's
// tile held 3 of its 16 or 32 columns); this kernel keeps several of B's
// strips in registers at once. The same sums in the same order as gemm's
// tiles (K blocks of gemm_k_block() summed from zero, each added to the
// ones before), then the same finish: the same bits. Element (i, j) of C
// at c[i * c_row + j * c_col], of the residual at residual[i * r_row + j *
// r_col], of A at a[i * a_row + k * a_k].
inline constexpr int64_t kFewRows = 4;
struct FewRowsGemm {
  int64_t m, n, k;
  const float* a;
  int64_t a_row, a_k;
  const float* packed_b;
  float* c;
  int64_t c_row, c_col;
  const float* row_bias = nullptr;  // optional: + row_bias[i]
  const float* col_bias = nullptr;  // optional: + col_bias[j]
  const float* residual = nullptr;  // optional: after the biases
  int64_t r_row = 0, r_col = 0;
  const ops::Epilogue* epilogue = nullptr;  // optional: the activation, last
  // 0: packed_b is packed (strips of kc x NR). Else packed_b is a row-major
  // B [k, n] with rows ldb apart, read where it lies.
  int64_t ldb = 0;
};
void gemm_few_rows(const KernelContext& context, const FewRowsGemm& args);
// C = A x B^T for a few rows of A (m <= kFewRows) with B stored [n, k]:
// C(i, j) is the dot product of row i of A with row j of B, both contiguous,
// B read where it lies. A fully connected layer's weights as ONNX stores them
// (Gemm transB = 1) are read from the mapping, never packed or copied (alexnet's
// 144 MiB layer was transposed every invoke); attention's q K^T at decode.
// Then + col_bias[j] and the activation. Rows i of A at a + i * lda, of C at
// c + i * ldc.
struct DotRowsGemm {
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  const float* col_bias = nullptr;          // optional
  const ops::Epilogue* epilogue = nullptr;  // optional: the activation, last
};
void gemm_dot_rows(const KernelContext& context, const DotRowsGemm& args);
// What a register tile adds and applies once its sums are final (after its
// last K block), in this order on every element: the row's bias, the column's
// bias, the residual, then relu, clip, hard_sigmoid or hard_swish (the others run over the
// stored tile: apply_epilogue). Pointers at the tile's first row / column /
// corner, or null. The same float operations wherever they run (in registers
// on AVX-512 and on AVX2's full tiles, over the stored tile otherwise), so
// the same bits.
struct TileFinish {
  const float* row_bias = nullptr;
  const float* col_bias = nullptr;
  const float* residual = nullptr;
  int64_t ldr = 0;
  ops::Activation activation = ops::Activation::kNone;  // kNone or one tile_finish_applies to
  float lo = 0, hi = 0;  // kClip: its bounds; kHardSigmoid: alpha, beta
};
// The activations a TileFinish applies itself.
inline bool tile_finish_applies(ops::Activation a) {
  return a == ops::Activation::kRelu || a == ops::Activation::kClip || a == ops::Activation::kHardSigmoid ||
         a == ops::Activation::kHardSwish;
}

#if defined(__x86_64__) && defined(__GNUC__)
// A TileFinish's activation on 16 lanes, the bits of ops::relu_of / clip_of.
[[gnu::target("avx512f")]] inline __m512 tile_activation(ops::Activation a, __m512 v, __m512 lo, __m512 hi) {
  // relu_of: x > 0 or NaN keeps x, else +0 (not(x <= 0) holds for both).
  if (a == ops::Activation::kRelu)
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NLE_UQ), v);
  // clip_of: (x < lo ? lo : x), then (v > hi ? hi : v); max(lo, x) and
  // min(hi, v) return their second operand when either is NaN.
  if (a == ops::Activation::kClip) return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
  // hard_sigmoid_of (lo, hi: alpha, beta) and hard_swish_of: clamp01 as
  // min(1, t) then max(0, .), the product and the sum rounded apart.
  if (a == ops::Activation::kHardSigmoid)
    return _mm512_max_ps(_mm512_setzero_ps(),
                         _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_mul_ps(lo, v), hi)));
  if (a == ops::Activation::kHardSwish) {
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.0f / 6.0f)), _mm512_set1_ps(0.5f));
    return _mm512_mul_ps(v, _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), t)));
  }
  return v;
}
// The same on 8 lanes (AVX2). Intrinsics, not lanes.h: Clang rejects passing
// a 256-bit vector between an AVX function and one without the feature.
[[gnu::target("avx2,fma")]] inline __m256 tile_activation(ops::Activation a, __m256 v, __m256 lo, __m256 hi) {
  if (a == ops::Activation::kRelu) return _mm256_and_ps(v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NLE_UQ));
  if (a == ops::Activation::kClip) return _mm256_min_ps(hi, _mm256_max_ps(lo, v));
  if (a == ops::Activation::kHardSigmoid)
    return _mm256_max_ps(_mm256_setzero_ps(),
                         _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_mul_ps(lo, v), hi)));
  if (a == ops::Activation::kHardSwish) {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.0f / 6.0f)), _mm256_set1_ps(0.5f));
    return _mm256_mul_ps(v, _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(_mm256_set1_ps(1.0f), t)));
  }
  return v;
}
// The even and the odd floats of 16 (lo, hi): a stride-2 window's left and
// right taps (the depthwise buffer's phases, the 2x2 stride-2 max pool).
// [l0 l2 h0 h2 | l4 l6 h4 h6] -> [l0 l2 l4 l6 h0 h2 h4 h6].
[[gnu::target("avx2")]] inline void deinterleave8(__m256 lo, __m256 hi, __m256& even, __m256& odd) {
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}
// dst[j * dst_stride + i] = src[i * src_stride + j] for i, j < 8 (8 loads,
// 24 shuffles, 8 stores): the layout copies' 4-byte transposes, the GEMM's
// A panels.
[[gnu::target("avx2")]] inline void transpose8x8(const float* src, int64_t src_stride, float* dst,
                                                 int64_t dst_stride) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
    t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
  }
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * dst_stride, t[i]);
}
#endif

// The GEMM's register tile of the running CPU's path, for kernels that drive
// it themselves (conv2d channels-last): C[0:mr, 0:nr] (+)= A[0:mr, 0:kc] * B,
// A read in place (row i at A + i * lda; a_packed false), B kc rows of
// nr_max floats ldb apart; mr <= mr_max, nr <= nr_max. Each element is an
// FMA chain over k from 0 (AVX-512, AVX2, NEON), added to C when accumulating;
// then `finish` when not null.
//
// run_segments (null on the portable path): C[0:mr, 0:nr] = A * B then
// `finish`, A's kc * segments columns in `segments` pieces, piece s of row
// i at A + s * segment_stride + i * lda, B's rows continuing: a window's
// rows of taps read where they lie (conv2d's patch path), one FMA chain over
// the pieces in order, as run's over one piece of kc * segments. mr <=
// mr_segments.
struct GemmTile {
  using Segments = void (*)(int64_t mr, int64_t nr, int64_t segments, int64_t kc, const float* A, int64_t lda,
                            int64_t segment_stride, const float* B, int64_t ldb, float* C, int64_t ldc,
                            const TileFinish* finish);
  int64_t mr_max, nr_max;
  void (*run)(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, bool a_packed, const float* B,
              int64_t ldb, float* C, int64_t ldc, bool accumulate, const TileFinish* finish);
  int64_t mr_segments = 0;
  Segments run_segments = nullptr;
};
GemmTile gemm_tile();

// elementwise.cc
// ops::erf_of / ops::gelu_erf_of over n elements (in may be out), in the
// widest lanes the machine has (lanes.h): the same bits as the scalar functions.
void erf_block(const float* in, float* out, int64_t n);
void gelu_erf_block(const float* in, float* out, int64_t n);
// ops::hard_sigmoid_of / hard_swish_of likewise (branch-free: they mispredicted as branches).
void hard_sigmoid_block(const float* in, float* out, int64_t n, float alpha, float beta);
void hard_swish_block(const float* in, float* out, int64_t n);
// relu_of / leaky_relu_of / clip_of likewise (fused epilogues' passes).
void relu_block(const float* in, float* out, int64_t n);
void leaky_relu_block(const float* in, float* out, int64_t n, float alpha);
void clip_block(const float* in, float* out, int64_t n, float lo, float hi);
// ops::sigmoid_of / silu_of / tanh_of / gelu_tanh_of (their exp and tanh are
// ours, ops/plans.h) likewise: the widest lanes, the same bits.
void sigmoid_block(const float* in, float* out, int64_t n);
void silu_block(const float* in, float* out, int64_t n);
void tanh_block(const float* in, float* out, int64_t n);
void gelu_tanh_block(const float* in, float* out, int64_t n);
Status add(const KernelContext&, const Dispatch&);
Status sub(const KernelContext&, const Dispatch&);
Status mul(const KernelContext&, const Dispatch&);
Status div(const KernelContext&, const Dispatch&);
Status maximum(const KernelContext&, const Dispatch&);
Status minimum(const KernelContext&, const Dispatch&);
Status pow(const KernelContext&, const Dispatch&);
// Operands of T (float, int32_t or int64_t), bool results; instantiated in elementwise.cc.
template <typename T>
Status equal(const KernelContext&, const Dispatch&);
template <typename T>
Status less(const KernelContext&, const Dispatch&);
template <typename T>
Status greater(const KernelContext&, const Dispatch&);
Status logical_not(const KernelContext&, const Dispatch&);
template <typename T>
Status less_or_equal(const KernelContext&, const Dispatch&);
template <typename T>
Status greater_or_equal(const KernelContext&, const Dispatch&);
// Two bool operands (any non-zero byte is true), bool results.
Status logical_and(const KernelContext&, const Dispatch&);
Status logical_or(const KernelContext&, const Dispatch&);
Status logical_xor(const KernelContext&, const Dispatch&);
// mod with fmod = 1 on f32 (C's fmod).
Status fmod(const KernelContext&, const Dispatch&);
// Integer arithmetic on T (int32_t or int64_t) by ops/plans.h's int_*_of
// rules; div and mod fail the invoke on a zero divisor, naming the result
// element. mod reads fmod from the plan's variant; pow is int_pow_of. sign also on float.
template <typename T>
Status int_add(const KernelContext&, const Dispatch&);
template <typename T>
Status int_sub(const KernelContext&, const Dispatch&);
template <typename T>
Status int_mul(const KernelContext&, const Dispatch&);
template <typename T>
Status int_div(const KernelContext&, const Dispatch&);
template <typename T>
Status int_maximum(const KernelContext&, const Dispatch&);
template <typename T>
Status int_minimum(const KernelContext&, const Dispatch&);
template <typename T>
Status int_mod(const KernelContext&, const Dispatch&);
template <typename T>
Status int_pow(const KernelContext&, const Dispatch&);
template <typename T>
Status int_neg(const KernelContext&, const Dispatch&);
template <typename T>
Status int_abs(const KernelContext&, const Dispatch&);
template <typename T>
Status sign(const KernelContext&, const Dispatch&);
Status ceil(const KernelContext&, const Dispatch&);
Status floor(const KernelContext&, const Dispatch&);
Status round(const KernelContext&, const Dispatch&);
Status relu(const KernelContext&, const Dispatch&);
Status gelu(const KernelContext&, const Dispatch&);
Status silu(const KernelContext&, const Dispatch&);
Status sigmoid(const KernelContext&, const Dispatch&);
Status tanh(const KernelContext&, const Dispatch&);
Status exp(const KernelContext&, const Dispatch&);
Status sqrt(const KernelContext&, const Dispatch&);
Status rsqrt(const KernelContext&, const Dispatch&);
Status neg(const KernelContext&, const Dispatch&);
Status leaky_relu(const KernelContext&, const Dispatch&);
Status clip(const KernelContext&, const Dispatch&);
Status hard_sigmoid(const KernelContext&, const Dispatch&);
Status hard_swish(const KernelContext&, const Dispatch&);
Status erf(const KernelContext&, const Dispatch&);
Status log(const KernelContext&, const Dispatch&);
Status abs(const KernelContext&, const Dispatch&);
Status reciprocal(const KernelContext&, const Dispatch&);
Status softplus(const KernelContext&, const Dispatch&);
// sin .. atanh, the ONNX activations elu .. shrink (UnaryPlan a, b: their
// parameters) and is_inf / is_nan (bool results): ops::math_of<F>.
template <ops::MathFn F>
Status math(const KernelContext&, const Dispatch&);
Status prelu(const KernelContext&, const Dispatch&);
Status where(const KernelContext&, const Dispatch&);
// cast<From, To> for every pair of castable dtypes: cast_kernel(from, to).
KernelFn cast_kernel(DType from, DType to);
// matmul.cc
Status matmul(const KernelContext&, const Dispatch&);
Status conv2d(const KernelContext&, const Dispatch&);
// Their prepare steps (KernelPrepare): a constant B of matmul (the same for
// every batch element) and the weights of a dense or grouped conv2d (its A),
// packed for the GEMM.
uint64_t matmul_prepared_bytes(const Dispatch& constants);
void matmul_prepare(const Dispatch& constants, void* out);
uint64_t conv2d_prepared_bytes(const Dispatch& constants);
void conv2d_prepare(const Dispatch& constants, void* out);
// What those read of their plans (KernelPrepare::key): B's geometry, not A's
// rows; the weights' geometry and the packing chosen, not the image's size.
uint32_t matmul_prepare_key(const Dispatch& constants, uint64_t* words);
uint32_t conv2d_prepare_key(const Dispatch& constants, uint64_t* words);
Status pool2d(const KernelContext&, const Dispatch&);  // max_pool, average_pool
Status max_pool_u8(const KernelContext&, const Dispatch&);
// channels_last.cc: conv2d when Conv2dPlan::channels_last, and its prepared
// weights (per tap, strips of the GEMM tile's width; depthwise: block-major [c/16][taps][16]).
Status conv2d_channels_last(const KernelContext&, const Dispatch&);
uint64_t conv2d_channels_last_prepared_bytes(const Dispatch& constants);
void conv2d_channels_last_prepare(const Dispatch& constants, void* out);
// spatial.cc
Status depthwise_conv2d(const KernelContext&, const Dispatch&);  // conv2d when ops::conv2d_is_depthwise
Status separable_conv2d(const KernelContext&, const Dispatch&);
uint64_t separable_conv2d_prepared_bytes(const Dispatch& constants);  // the 1x1's weights, packed
void separable_conv2d_prepare(const Dispatch& constants, void* out);
Status resize(const KernelContext&, const Dispatch&);
Status conv_transpose(const KernelContext&, const Dispatch&);
// Its prepare step: constant weights transposed per group (the GEMM's A; the
// direct loop reads them too, so the weights are replaced).
uint64_t conv_transpose_prepared_bytes(const Dispatch& constants);
void conv_transpose_prepare(const Dispatch& constants, void* out);
// normalization.cc
Status softmax(const KernelContext&, const Dispatch&);
Status attention(const KernelContext&, const Dispatch&);
Status quantized_matmul(const KernelContext&, const Dispatch&);
Status int4_matmul(const KernelContext&, const Dispatch&);
Status dequantize_int4(const KernelContext&, const Dispatch&);
Status integer_matmul(const KernelContext&, const Dispatch&);
Status quantized_conv2d(const KernelContext&, const Dispatch&);  // quantized_conv.cc
Status quantized_add(const KernelContext&, const Dispatch&);
Status lstm_cell(const KernelContext&, const Dispatch&);
// Q: int8_t or uint8_t (quantize), also int32_t (dequantize); instantiated in elementwise.cc.
template <typename Q>
Status quantize_linear(const KernelContext&, const Dispatch&);
template <typename Q>
Status dequantize_linear(const KernelContext&, const Dispatch&);
Status layernorm(const KernelContext&, const Dispatch&);
Status group_norm(const KernelContext&, const Dispatch&);
Status log_softmax(const KernelContext&, const Dispatch&);
Status hardmax(const KernelContext&, const Dispatch&);
// The reductions (every ops::ReduceKind on f32; the integer ones on int32_t, int64_t).
template <typename T>
Status reduce(const KernelContext&, const Dispatch&);
// argmax and argmin, on float, int32_t and int64_t.
template <typename T>
Status argmax(const KernelContext&, const Dispatch&);
template <typename T>
Status top_k(const KernelContext&, const Dispatch&);
template <typename T>
Status cumsum(const KernelContext&, const Dispatch&);  // f32, i32, i64
// layout.cc
Status strided_gather(const KernelContext&, const Dispatch&);  // transpose, slice, expand
Status pad(const KernelContext&, const Dispatch&);
Status concat(const KernelContext&, const Dispatch&);
Status split(const KernelContext&, const Dispatch&);
Status copy(const KernelContext&, const Dispatch&);
Status gather(const KernelContext&, const Dispatch&);
Status dynamic_slice(const KernelContext&, const Dispatch&);
Status update_slice(const KernelContext&, const Dispatch&);
Status scatter(const KernelContext&, const Dispatch&);  // scatter_nd, scatter_elements
Status gather_indexed(const KernelContext&, const Dispatch&);  // gather_elements, gather_nd
// dynamic.cc: bounded dynamic shapes
Status nonzero(const KernelContext&, const Dispatch&);
Status non_max_suppression(const KernelContext&, const Dispatch&);
Status compress(const KernelContext&, const Dispatch&);
Status compact(const KernelContext&, const Dispatch&);
Status bound(const KernelContext&, const Dispatch&);

}  // namespace hexir::hal::cpu::internal
