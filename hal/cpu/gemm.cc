// The f32 GEMM behind matmul and conv2d: C = A * B (+ a bias per row of C).
//
// Goto-style, without packing A: per task, a strip of NR columns of B (KC
// deep) is packed contiguously on the stack, then an MR x NR register tile
// sweeps the task's rows, reading A in place (MR broadcasts per k). K is cut
// in KC blocks; the first writes C, the others add to it. Tasks own disjoint
// (row block, column group) tiles of C, so every element is summed in the
// same order whatever the thread count: results depend only on the ISA path
// chosen for the machine (AVX-512, AVX2+FMA or the portable loop).
#include <algorithm>
#include <cstring>

#include "kernel_util.h"
#include "thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_GEMM_X86 1
#endif

namespace hexir::hal::cpu::internal {
namespace {

constexpr int64_t kKc = 256;       // K block: a packed strip is kKc x NR floats
constexpr int64_t kMaxNr = 32;     // the widest strip (AVX-512: two zmm)
// Rows per task at most (a multiple of every MR): each packed strip of B is
// used by that many rows, read from A in place (192 x 256 floats of A: 192 KiB,
// in L2), so B is packed ceil(M / 192) times per call.
constexpr int64_t kRowBlock = 192;

// One micro-kernel: C[0:mr, 0:nr] (=, or += when `accumulate`) A[0:mr, 0:kc] * Bp
// where Bp is kc rows of NR packed floats. mr <= MR, nr <= NR.
using MicroKernel = void (*)(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, const float* Bp,
                             float* C, int64_t ldc, bool accumulate);

struct GemmPath {
  int64_t mr, nr;
  MicroKernel kernel;
};

// Writes the first `nr` lanes of an accumulated tile row.
inline void store_row(const float* acc, int64_t nr, float* c, bool accumulate) {
  if (accumulate)
    for (int64_t j = 0; j < nr; ++j) c[j] += acc[j];
  else
    std::memcpy(c, acc, static_cast<size_t>(nr) * sizeof(float));
}

// Portable: 4 x 16, a loop GCC vectorizes for whatever the build targets.
void micro_generic(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda, const float* Bp, float* C,
                   int64_t ldc, bool accumulate) {
  constexpr int64_t MR = 4, NR = 16;
  float acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const float* b = Bp + k * NR;
    for (int64_t i = 0; i < MR; ++i) {
      const float a = i < mr ? A[i * lda + k] : 0.0f;
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += a * b[j];
    }
  }
  for (int64_t i = 0; i < mr; ++i) store_row(acc[i], nr, C + i * ldc, accumulate);
}

#ifdef HEXIR_GEMM_X86
// AVX2 + FMA: 6 x 16 (12 ymm accumulators, 2 for B, 1 broadcast).
template <int64_t MR>
[[gnu::target("avx2,fma")]] void micro_avx2_rows(int64_t nr, int64_t kc, const float* A, int64_t lda,
                                                 const float* Bp, float* C, int64_t ldc, bool accumulate) {
  __m256 c0[MR], c1[MR];
  for (int64_t i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(Bp + k * 16);
    const __m256 b1 = _mm256_load_ps(Bp + k * 16 + 8);
    for (int64_t i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(A + i * lda + k);
      c0[i] = _mm256_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(a, b1, c1[i]);
    }
  }
  for (int64_t i = 0; i < MR; ++i) {
    float* c = C + i * ldc;
    if (nr == 16) {
      if (accumulate) {
        c0[i] = _mm256_add_ps(_mm256_loadu_ps(c), c0[i]);
        c1[i] = _mm256_add_ps(_mm256_loadu_ps(c + 8), c1[i]);
      }
      _mm256_storeu_ps(c, c0[i]);
      _mm256_storeu_ps(c + 8, c1[i]);
    } else {
      alignas(32) float row[16];
      _mm256_store_ps(row, c0[i]);
      _mm256_store_ps(row + 8, c1[i]);
      store_row(row, nr, c, accumulate);
    }
  }
}

[[gnu::target("avx2,fma")]] void micro_avx2(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                            const float* Bp, float* C, int64_t ldc, bool accumulate) {
  switch (mr) {
    case 6: return micro_avx2_rows<6>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 5: return micro_avx2_rows<5>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 4: return micro_avx2_rows<4>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 3: return micro_avx2_rows<3>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 2: return micro_avx2_rows<2>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    default: return micro_avx2_rows<1>(nr, kc, A, lda, Bp, C, ldc, accumulate);
  }
}

// AVX-512: 8 x 32 (16 zmm accumulators, 2 for B, 1 broadcast); partial
// columns through masked loads and stores.
template <int64_t MR>
[[gnu::target("avx512f")]] void micro_avx512_rows(int64_t nr, int64_t kc, const float* A, int64_t lda,
                                                  const float* Bp, float* C, int64_t ldc, bool accumulate) {
  __m512 c0[MR], c1[MR];
  for (int64_t i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(Bp + k * 32);
    const __m512 b1 = _mm512_load_ps(Bp + k * 32 + 16);
    for (int64_t i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(A[i * lda + k]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr <= 16 ? __mmask16(0) : __mmask16((1u << (nr - 16)) - 1);
  for (int64_t i = 0; i < MR; ++i) {
    float* c = C + i * ldc;
    if (accumulate) {
      c0[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), c0[i]);
      c1[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), c1[i]);
    }
    _mm512_mask_storeu_ps(c, m0, c0[i]);
    _mm512_mask_storeu_ps(c + 16, m1, c1[i]);
  }
}

[[gnu::target("avx512f")]] void micro_avx512(int64_t mr, int64_t nr, int64_t kc, const float* A, int64_t lda,
                                             const float* Bp, float* C, int64_t ldc, bool accumulate) {
  switch (mr) {
    case 8: return micro_avx512_rows<8>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 7: return micro_avx512_rows<7>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 6: return micro_avx512_rows<6>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 5: return micro_avx512_rows<5>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 4: return micro_avx512_rows<4>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 3: return micro_avx512_rows<3>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    case 2: return micro_avx512_rows<2>(nr, kc, A, lda, Bp, C, ldc, accumulate);
    default: return micro_avx512_rows<1>(nr, kc, A, lda, Bp, C, ldc, accumulate);
  }
}
#endif

// The widest path this CPU runs (a plain check per call: an ifunc resolver
// runs before sanitizer runtimes start and crashes under TSan).
GemmPath select_path() {
#ifdef HEXIR_GEMM_X86
  if (__builtin_cpu_supports("avx512f")) return {8, 32, micro_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {6, 16, micro_avx2};
#endif
  return {4, 16, micro_generic};
}

// Packs B[k0:k0+kc, j0:j0+nr] as kc rows of NR floats, zero beyond nr.
void pack_strip(const float* B, int64_t ldb, int64_t k0, int64_t kc, int64_t j0, int64_t nr, int64_t NR,
                float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* src = B + (k0 + k) * ldb + j0;
    float* dst = out + k * NR;
    std::memcpy(dst, src, static_cast<size_t>(nr) * sizeof(float));
    for (int64_t j = nr; j < NR; ++j) dst[j] = 0.0f;
  }
}

struct GemmJob {
  const GemmArgs* args;
  GemmPath path;
  int64_t row_blocks;     // tasks are row_blocks x column_groups
  int64_t row_block;      // rows per block (a multiple of 24, at most kRowBlock)
  int64_t group_strips;   // strips of NR columns per column group
};

void gemm_task(void* context, int64_t task) {
  const GemmJob& job = *static_cast<const GemmJob*>(context);
  const GemmArgs& g = *job.args;
  const int64_t MR = job.path.mr, NR = job.path.nr;
  const int64_t rb = task % job.row_blocks, cg = task / job.row_blocks;
  const int64_t i0 = rb * job.row_block, i1 = std::min(g.m, i0 + job.row_block);
  const int64_t j_begin = cg * job.group_strips * NR;
  const int64_t j_end = std::min(g.n, j_begin + job.group_strips * NR);
  alignas(64) float strip[kKc * kMaxNr];
  if (g.k == 0) {
    for (int64_t i = i0; i < i1; ++i) std::fill(g.c + i * g.ldc + j_begin, g.c + i * g.ldc + j_end, 0.0f);
  }
  for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
    const int64_t kc = std::min(kKc, g.k - k0);
    for (int64_t j0 = j_begin; j0 < j_end; j0 += NR) {
      const int64_t nr = std::min(NR, j_end - j0);
      if (g.pack_b)
        g.pack_b(g.pack_context, k0, kc, j0, nr, NR, strip);
      else
        pack_strip(g.b, g.ldb, k0, kc, j0, nr, NR, strip);
      for (int64_t i = i0; i < i1; i += MR) {
        const int64_t mr = std::min(MR, i1 - i);
        job.path.kernel(mr, nr, kc, g.a + i * g.lda + k0, g.lda, strip, g.c + i * g.ldc + j0, g.ldc, k0 > 0);
      }
    }
  }
  if (g.row_bias)
    for (int64_t i = i0; i < i1; ++i) {
      const float b = g.row_bias[i];
      float* row = g.c + i * g.ldc;
      for (int64_t j = j_begin; j < j_end; ++j) row[j] += b;
    }
  if (g.col_bias)
    for (int64_t i = i0; i < i1; ++i) {
      float* row = g.c + i * g.ldc;
      for (int64_t j = j_begin; j < j_end; ++j) row[j] += g.col_bias[j];
    }
  // The epilogue on the task's own tile, while it is still in cache.
  if (g.epilogue) apply_epilogue(*g.epilogue, g.c + i0 * g.ldc + j_begin, g.ldc, i1 - i0, j_end - j_begin);
}

template <typename Map>
void map_block(float* c, int64_t ld, int64_t rows, int64_t cols, Map map) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ld;
    for (int64_t j = 0; j < cols; ++j) row[j] = map(row[j]);
  }
}

}  // namespace

// One loop per activation (the switch stays outside the element loop).
void apply_epilogue(const ops::Epilogue& e, float* c, int64_t ld, int64_t rows, int64_t cols) {
  using ops::Activation;
  const float a = e.a, b = e.b;
  switch (static_cast<Activation>(e.activation)) {
    case Activation::kNone: return;
    case Activation::kRelu: return map_block(c, ld, rows, cols, [](float x) { return ops::relu_of(x); });
    case Activation::kGeluErf: return map_block(c, ld, rows, cols, [](float x) { return ops::gelu_erf_of(x); });
    case Activation::kGeluTanh:
      return map_block(c, ld, rows, cols, [](float x) { return ops::gelu_tanh_of(x); });
    case Activation::kSilu: return map_block(c, ld, rows, cols, [](float x) { return ops::silu_of(x); });
    case Activation::kSigmoid: return map_block(c, ld, rows, cols, [](float x) { return ops::sigmoid_of(x); });
    case Activation::kTanh: return map_block(c, ld, rows, cols, [](float x) { return tanhf(x); });
    case Activation::kLeakyRelu:
      return map_block(c, ld, rows, cols, [a](float x) { return ops::leaky_relu_of(x, a); });
    case Activation::kClip: return map_block(c, ld, rows, cols, [a, b](float x) { return ops::clip_of(x, a, b); });
    case Activation::kHardSigmoid:
      for (int64_t i = 0; i < rows; ++i) hard_sigmoid_block(c + i * ld, c + i * ld, cols, a, b);
      return;
    case Activation::kHardSwish:
      for (int64_t i = 0; i < rows; ++i) hard_swish_block(c + i * ld, c + i * ld, cols);
      return;
    case Activation::kCount: return;
  }
}

void gemm(const KernelContext& context, const GemmArgs& args) {
  if (args.m <= 0 || args.n <= 0) return;
  static_assert(kRowBlock % 24 == 0);  // 24: a multiple of every MR (8, 6, 4)
  GemmJob job{&args, select_path(), 0, 0, 0};
  const int64_t NR = job.path.nr;
  const int64_t strips = (args.n + NR - 1) / NR;
  // Balanced blocks: 256 rows are two of 144 and 112, not 192 and 64.
  job.row_blocks = (args.m + kRowBlock - 1) / kRowBlock;
  job.row_block = ((args.m + job.row_blocks - 1) / job.row_blocks + 23) / 24 * 24;
  job.row_blocks = (args.m + job.row_block - 1) / job.row_block;
  // Enough tasks to balance the pool (about 4 per thread) when there is
  // work to share; one task otherwise. The split never changes a result.
  ThreadPool* pool = pool_of(context);
  const int threads = pool ? pool->size() : 1;
  const double flops = 2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
  int64_t groups = 1;
  if (threads > 1 && flops >= 1e6) {
    const int64_t wanted = 4 * threads;
    groups = std::clamp<int64_t>((wanted + job.row_blocks - 1) / job.row_blocks, 1, strips);
  }
  job.group_strips = (strips + groups - 1) / groups;
  groups = (strips + job.group_strips - 1) / job.group_strips;
  const int64_t tasks = job.row_blocks * groups;
  if (flops < 1e6) {
    for (int64_t t = 0; t < tasks; ++t) gemm_task(&job, t);
    return;
  }
  parallel_for(context, tasks, gemm_task, &job);
}

void gemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C) {
  gemm(KernelContext{}, GemmArgs{M, N, K, A, K, B, N, C, N});
}

}  // namespace hexir::hal::cpu::internal
