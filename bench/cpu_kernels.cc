// GFLOP/s of the CPU matmul, conv2d (dense and depthwise), conv_transpose and
// resize kernels on the shapes of the real models and of a BERT-base layer, at
// 1 and at 2 threads, through the cpu device's queue (its own thread pool),
// against the machine's peak. resize counts one operation per output element.
// Then the activations (sigmoid, silu, tanh, gelu in both forms) over 1M
// floats, and a matmul with and without a fused sigmoid / tanh epilogue, at
// 1 thread: ns per element (median wall, least CPU time). Then the
// reductions, softmax, log_softmax, argmax/argmin and hardmax over a
// 1024x1024 matrix along each axis at 1 thread, next to a plain loop.
//
//   build/bench/cpu_kernels [--runs N] [--filter TEXT]
//
// Each kernel runs as the VM runs it: matmul and conv2d with their weights
// (input 1) prepared once (packed for the GEMM, cpu::find_cpu_prepare), as
// Program::prepare does for constant weights; "per call" times the same
// kernel without them (everything packed on every call). Wall times are
// medians; "1 thread CPU ms" is the least CPU time of the calling thread
// over the runs (it does all the work at 1 thread), which a machine shared
// with other processes disturbs far less than the wall clock.
//
// Peak per core = clock x FMA units (2 assumed) x 2 flops x f32 lanes of the
// widest vector path the GEMM uses; the clock is /proc/cpuinfo's "cpu MHz".
#include <algorithm>
#include <bit>
#include <type_traits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "hexir/hal/cpu_kernels.h"
#include "hexir/hal/device.h"
#include "hexir/ops/op.h"
#include "hexir/ops/plans.h"

namespace {

using hexir::DType;
using hexir::TensorType;
using hexir::ops::OpId;

struct Shape {
  const char* name;
  OpId op;
  std::vector<TensorType> inputs;
  std::vector<int64_t> params;  // conv2d: strides, pads (t, l, b, r), dilations, groups
  double flops;
};

TensorType f32(std::vector<int64_t> dims) { return {DType::kF32, std::move(dims)}; }

Shape matmul(const char* name, int64_t m, int64_t k, int64_t n) {
  return {name, OpId::kMatmul, {f32({m, k}), f32({k, n})}, {}, 2.0 * m * k * n};
}

Shape conv(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks, int64_t stride,
           int64_t groups) {
  const int64_t pad = ks / 2;
  const int64_t oh = (h + 2 * pad - ks) / stride + 1, ow = (w + 2 * pad - ks) / stride + 1;
  return {name,
          OpId::kConv2d,
          {f32({1, c, h, w}), f32({k, c / groups, ks, ks})},
          {stride, stride, pad, pad, pad, pad, 1, 1, groups},
          2.0 * k * (c / groups) * ks * ks * oh * ow};
}

// A patch embedding: a ks x ks window at stride ks, no padding (ViT's, Swin's and ConvNeXt's stems).
Shape patchify(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks) {
  const int64_t oh = h / ks, ow = w / ks;
  return {name,
          OpId::kConv2d,
          {f32({1, c, h, w}), f32({k, c, ks, ks})},
          {ks, ks, 0, 0, 0, 0, 1, 1, 1},
          2.0 * k * c * ks * ks * oh * ow};
}

// The same convolution with a bias, a residual and relu fused (BlazeFace's
// blocks: conv, add, relu).
Shape conv_residual_relu(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks, int64_t stride) {
  Shape s = conv(name, c, h, w, k, ks, stride, 1);
  const int64_t pad = ks / 2;
  s.inputs.push_back(f32({k}));
  s.inputs.push_back(f32({1, k, (h + 2 * pad - ks) / stride + 1, (w + 2 * pad - ks) / stride + 1}));
  s.params.insert(s.params.end(), {static_cast<int64_t>(hexir::ops::Activation::kRelu), 0, 0});
  return s;
}

// The same convolution channels-last (x [1, h, w, c]; docs/layout.md).
Shape conv_nhwc(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks, int64_t stride,
                int64_t groups) {
  Shape s = conv(name, c, h, w, k, ks, stride, groups);
  s.inputs[0] = f32({1, h, w, c});
  s.params.push_back(1);
  return s;
}

// The same 3x3 at stride 1 by Winograd's F(2x2, 3x3) (layout word 2; its
// GFLOP/s counts the direct window's flops, so it compares with the row above).
Shape conv_winograd(const char* name, int64_t c, int64_t h, int64_t w, int64_t k) {
  Shape s = conv_nhwc(name, c, h, w, k, 3, 1, 1);
  s.params.back() = 2;
  return s;
}

// ConvTranspose with pads 0: x [1, c, h, w], weights [c, k, ks, ks].
Shape conv_transpose(const char* name, int64_t c, int64_t h, int64_t w, int64_t k, int64_t ks,
                     int64_t stride) {
  return {name,
          OpId::kConvTranspose,
          {f32({1, c, h, w}), f32({c, k, ks, ks})},
          {stride, stride, 0, 0, 0, 0, 1, 1, 1, 0, 0},
          2.0 * c * k * ks * ks * h * w};
}

// A unary activation over n floats (params: the operator's).
Shape activation(const char* name, OpId op, int64_t n, std::vector<int64_t> params = {}) {
  return {name, op, {f32({n})}, std::move(params), static_cast<double>(n)};
}

// matmul m x k * k x n with a fused epilogue (ops::epilogue_words of `act`).
Shape matmul_with(const char* name, int64_t m, int64_t k, int64_t n, OpId act) {
  std::vector<int64_t> params = {0};  // transpose_b
  const std::optional<std::vector<int64_t>> words = hexir::ops::epilogue_words(act, {});
  params.insert(params.end(), words->begin(), words->end());
  return {name, OpId::kMatmul, {f32({m, k}), f32({k, n})}, std::move(params), 2.0 * m * k * n};
}

// mode 0 nearest (round_prefer_floor), 1 linear; half_pixel coordinates.
Shape resize(const char* name, int64_t c, int64_t h, int64_t w, int64_t factor, int64_t mode) {
  return {name,
          OpId::kResize,
          {f32({1, c, h, w})},
          {mode, 0, 0, h * factor, w * factor},
          static_cast<double>(c * h * w * factor * factor)};
}

double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

double clock_ghz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str()) / 1000.0;
  return 0.0;
}

int lanes() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2")) return 8;
#endif
  return 4;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The core's measured FMA peak: 12 independent chains of vector FMAs in
// registers (enough to cover the latency of two FMA pipes), best of 3 x 240M
// FMAs, on the thread's CPU time. The chains start from different values and
// the multiplier is hidden from the optimizer: chains that start equal are
// one chain to GCC, which then times one FMA's latency and reports 12 times
// too much work (this bench said 330 GFLOP/s per core that way; the core
// does about 221). The clock that /proc/cpuinfo states is often the base
// clock, below what the core runs at.
// One body for both widths (a macro: a template cannot carry the target
// attribute its intrinsics need).
#define HEXIR_MEASURED_PEAK(Vec, kLanes, set1, fmadd, storeu)                                 \
  constexpr int kChains = 12;                                                                 \
  constexpr int64_t kIterations = 20'000'000;                                                 \
  double best = 0;                                                                            \
  for (int round = 0; round < 3; ++round) {                                                   \
    Vec c[kChains];                                                                           \
    _Pragma("GCC unroll 16") for (int i = 0; i < kChains; ++i) c[i] =                         \
        set1(1.0f + 0.125f * static_cast<float>(i));                                          \
    Vec a = set1(0.999999f), b = set1(1e-7f);                                                 \
    asm("" : "+x"(a), "+x"(b)); /* not constants: nothing to fold */                          \
    const double start = thread_cpu_ms();                                                     \
    for (int64_t k = 0; k < kIterations; ++k) {                                               \
      _Pragma("GCC unroll 16") for (int i = 0; i < kChains; ++i) c[i] = fmadd(c[i], a, b);    \
    }                                                                                         \
    const double seconds = (thread_cpu_ms() - start) / 1e3;                                  \
    float sum = 0, lanes_out[kLanes];                                                         \
    for (int i = 0; i < kChains; ++i) {                                                       \
      storeu(lanes_out, c[i]);                                                                \
      sum += lanes_out[0];                                                                    \
    }                                                                                         \
    if (sum == 12345.0f) std::printf(" "); /* keep the chains alive */                        \
    best = std::max(best, 2.0 * kLanes * kChains * static_cast<double>(kIterations) / seconds / 1e9); \
  }                                                                                           \
  return best;

[[gnu::target("avx512f")]] double measured_peak_avx512() {
  HEXIR_MEASURED_PEAK(__m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
}
[[gnu::target("avx2,fma")]] double measured_peak_avx2() {
  HEXIR_MEASURED_PEAK(__m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
}
#undef HEXIR_MEASURED_PEAK
#endif

#if defined(__x86_64__) && defined(__GNUC__)
// The core's measured int8 peak: 12 chains of AVX-512 VNNI vpdpbusd (64
// u8 x s8 products and adds each: 128 ops), best of 3 rounds on the thread's
// CPU time; 0 without VNNI.
[[gnu::target("avx512f,avx512bw,avx512vnni")]] double measured_int8_peak_vnni() {
  constexpr int kChains = 12;
  constexpr int64_t kIterations = 20'000'000;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    __m512i c[kChains];
    for (int i = 0; i < kChains; ++i) c[i] = _mm512_set1_epi32(i);
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    asm("" : "+v"(a), "+v"(b));
    const double start = thread_cpu_ms();
    for (int64_t k = 0; k < kIterations; ++k) {
      _Pragma("GCC unroll 16") for (int i = 0; i < kChains; ++i) c[i] = _mm512_dpbusd_epi32(c[i], a, b);
    }
    const double seconds = (thread_cpu_ms() - start) / 1e3;
    int32_t sum = 0;
    for (int i = 0; i < kChains; ++i) sum += _mm512_reduce_add_epi32(c[i]);
    if (sum == 12345) std::printf(" ");
    best = std::max(best, 128.0 * kChains * static_cast<double>(kIterations) / seconds / 1e9);
  }
  return best;
}
#endif

double measured_int8_peak() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) return measured_int8_peak_vnni();
#endif
  return 0.0;
}

double measured_peak() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f")) return measured_peak_avx512();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return measured_peak_avx2();
#endif
  return 0.0;
}

// A reduction (or row operator) over a square f32 matrix along `axis`.
struct Reduction {
  const char* name;
  OpId op;
  int64_t axis;
};

// The straightforward loop for the sums and extremes of `r` (median wall ms
// over `runs`), 0 for the others: one output at a time, its elements in order.
double plain_reduction_ms(const Reduction& r, int64_t side, int runs) {
  const bool sum = r.op == OpId::kReduceSum, max = r.op == OpId::kReduceMax, min = r.op == OpId::kReduceMin;
  if (!sum && !max && !min) return 0;
  std::vector<float> x(static_cast<size_t>(side * side)), out(static_cast<size_t>(side));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1601) * 0.01f - 8.0f;
  const int64_t step = r.axis == 1 ? 1 : side, next = r.axis == 1 ? side : 1;
  std::vector<double> times;
  for (int run = 0; run < runs + 2; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t o = 0; o < side; ++o) {
      const float* p = x.data() + o * next;
      if (sum) {
        double acc = 0.0;
        for (int64_t j = 0; j < side; ++j) acc += p[j * step];
        out[static_cast<size_t>(o)] = static_cast<float>(acc);
      } else {
        float m = p[0];
        for (int64_t j = 1; j < side; ++j) m = max ? std::max(m, p[j * step]) : std::min(m, p[j * step]);
        out[static_cast<size_t>(o)] = m;
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (run >= 2) times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    asm volatile("" : : "r"(out.data()) : "memory");
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20;
  const char* filter = nullptr;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--filter") == 0) filter = argv[i + 1];
  }
  const std::vector<Shape> shapes = {
      matmul("BERT-base MLP up 256x768 * 768x3072", 256, 768, 3072),
      matmul("BERT-base MLP down 256x3072 * 3072x768", 256, 3072, 768),
      matmul("BERT-base QKV 256x768 * 768x768", 256, 768, 768),
      matmul("encoder T=128 D=256 MLP 128x256 * 256x1024", 128, 256, 1024),
      // Few rows (gemm_few_rows): a decoder's token, an LSTM step, a
      // convolution with a few output pixels (silero-vad's are 1-D, 1 to 3).
      matmul("decoder GEMV 1x768 * 768x3072", 1, 768, 3072),
      matmul("LSTM step 1x256 * 256x512", 1, 256, 512),
      matmul("4 tokens 4x768 * 768x768", 4, 768, 768),
      conv("3x3 256->256 @ 2x2 (4 output pixels)", 256, 2, 2, 256, 3, 1, 1),
      conv("PP-OCR 3x3 s1 64->64 @ 40x80", 64, 40, 80, 64, 3, 1, 1),
      patchify("ViT-B/32 patch embedding 32x32/32 3->768 @ 224x224", 3, 224, 224, 768, 32),
      patchify("ViT-B/16 patch embedding 16x16/16 3->768 @ 224x224", 3, 224, 224, 768, 16),
      conv("PP-OCR 1x1 128->256 @ 20x40", 128, 20, 40, 256, 1, 1, 1),
      conv("BlazeFace 5x5 depthwise 48 @ 64x64", 48, 64, 64, 48, 5, 1, 48),
      conv("BlazeFace 5x5 depthwise s2 48 @ 64x64", 48, 64, 64, 48, 5, 2, 48),
      conv("PP-OCR 3x3 depthwise 96 @ 40x40", 96, 40, 40, 96, 3, 1, 96),
      conv("MobileNet 3x3 depthwise 32 @ 112x112", 32, 112, 112, 32, 3, 1, 32),
      conv_nhwc("channels-last MobileNet 3x3 depthwise 32 @ 112x112", 32, 112, 112, 32, 3, 1, 32),
      conv("MobileNet 3x3 depthwise s2 96 @ 112x112", 96, 112, 112, 96, 3, 2, 96),
      conv("BlazeFace 1x1 48->96 @ 32x32", 48, 32, 32, 96, 1, 1, 1),
      conv("stem 3x3 s2 3->32 @ 224x224", 3, 224, 224, 32, 3, 2, 1),
      conv_nhwc("channels-last stem 3x3 s2 3->32 @ 224x224", 3, 224, 224, 32, 3, 2, 1),
      conv("BlazeFace-256 stem 5x5 s2 3->24 @ 256x256", 3, 256, 256, 24, 5, 2, 1),
      conv("ResNet stem 7x7 s2 3->64 @ 224x224", 3, 224, 224, 64, 7, 2, 1),
      conv_nhwc("channels-last ResNet stem 7x7 s2 3->64 @ 224x224", 3, 224, 224, 64, 7, 2, 1),
      conv_nhwc("channels-last mnasnet 1x1 32->16 @ 112x112", 32, 112, 112, 16, 1, 1, 1),
      conv_nhwc("channels-last mobilenet_v2 1x1 144->24 @ 56x56", 144, 56, 56, 24, 1, 1, 1),
      conv_nhwc("channels-last mobilenet_v2 1x1 192->32 @ 28x28", 192, 28, 28, 32, 1, 1, 1),
      conv_nhwc("channels-last mnasnet 3x3 depthwise 72 @ 56x56", 72, 56, 56, 72, 3, 1, 72),
      conv_nhwc("channels-last mnasnet 5x5 depthwise 1152 @ 7x7", 1152, 7, 7, 1152, 5, 1, 1152),
      conv("BlazeFace-256 1x1 24->24 @ 128x128", 24, 128, 128, 24, 1, 1, 1),
      conv_residual_relu("BlazeFace-256 1x1 24->24 + residual, relu @ 128x128", 24, 128, 128, 24, 1, 1),
      conv_residual_relu("BlazeFace-256 1x1 24->24 + residual, relu @ 128x126", 24, 128, 126, 24, 1, 1),
      conv("PP-OCRv4 det 3x3 96->24 @ 80x80", 96, 80, 80, 24, 3, 1, 1),
      // The model zoo's (docs/zoo.md): squeezenet's classifier and expand 3x3,
      // mobilenet_v2's expansion and projection of small maps.
      conv("squeezenet classifier 1x1 512->1000 @ 13x13", 512, 13, 13, 1000, 1, 1, 1),
      conv("squeezenet expand 3x3 16->64 @ 55x55", 16, 55, 55, 64, 3, 1, 1),
      conv("mobilenet_v2 1x1 160->960 @ 7x7", 160, 7, 7, 960, 1, 1, 1),
      conv("mobilenet_v2 1x1 960->160 @ 7x7", 960, 7, 7, 160, 1, 1, 1),
      conv("mobilenet_v2 1x1 32->192 @ 28x28", 32, 28, 28, 192, 1, 1, 1),
      conv_nhwc("channels-last squeezenet classifier 1x1 512->1000 @ 13x13", 512, 13, 13, 1000, 1, 1, 1),
      conv_nhwc("channels-last squeezenet expand 3x3 16->64 @ 55x55", 16, 55, 55, 64, 3, 1, 1),
      conv_nhwc("channels-last mobilenet_v2 1x1 160->960 @ 7x7", 160, 7, 7, 960, 1, 1, 1),
      conv_nhwc("channels-last mobilenet_v2 1x1 960->160 @ 7x7", 960, 7, 7, 160, 1, 1, 1),
      conv_nhwc("channels-last MnasNet 1x1 1152->192 @ 7x7", 1152, 7, 7, 192, 1, 1, 1),
      conv_nhwc("channels-last MnasNet 1x1 1152->320 @ 7x7", 1152, 7, 7, 320, 1, 1, 1),
      conv_nhwc("channels-last mobilenet_v2 1x1 32->192 @ 28x28", 32, 28, 28, 192, 1, 1, 1),
      conv("mobilenet_v2 3x3 depthwise 960 @ 7x7", 960, 7, 7, 960, 3, 1, 960),
      conv_nhwc("channels-last mobilenet_v2 3x3 depthwise 960 @ 7x7", 960, 7, 7, 960, 3, 1, 960),
      conv("mobilenet_v2 3x3 depthwise 144 @ 56x56", 144, 56, 56, 144, 3, 1, 144),
      conv_nhwc("channels-last mobilenet_v2 3x3 depthwise 144 @ 56x56", 144, 56, 56, 144, 3, 1, 144),
      conv_nhwc("channels-last PP-OCR 3x3 s1 64->64 @ 40x80", 64, 40, 80, 64, 3, 1, 1),
      conv("DenseNet batch norm as 1x1 depthwise 224 @ 56x56", 224, 56, 56, 224, 1, 1, 224),
      conv_nhwc("channels-last DenseNet batch norm as 1x1 depthwise 224 @ 56x56", 224, 56, 56, 224, 1, 1, 224),
      conv_nhwc("channels-last Inception-v3 3x3 32->64 @ 147x147", 32, 147, 147, 64, 3, 1, 1),
      conv_nhwc("channels-last Inception-v3 3x3 64->96 @ 35x35", 64, 35, 35, 96, 3, 1, 1),
      conv_nhwc("channels-last Inception-v3 3x3 80->192 @ 73x73", 80, 73, 73, 192, 3, 1, 1),
      conv_nhwc("channels-last Inception-v3 3x3 s2 288->384 @ 35x35", 288, 35, 35, 384, 3, 2, 1),
      conv_nhwc("channels-last ResNet-18 3x3 128->128 @ 28x28", 128, 28, 28, 128, 3, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 256->64 @ 56x56", 256, 56, 56, 64, 1, 1, 1),
      conv_nhwc("channels-last ResNet-50 3x3 64->64 @ 56x56", 64, 56, 56, 64, 3, 1, 1),
      conv_nhwc("channels-last ResNet-50 3x3 256->256 @ 14x14", 256, 14, 14, 256, 3, 1, 1),
      conv_nhwc("channels-last ResNet-50 3x3 512->512 @ 7x7", 512, 7, 7, 512, 3, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 512->2048 @ 7x7", 512, 7, 7, 2048, 1, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 2048->512 @ 7x7", 2048, 7, 7, 512, 1, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 1024->256 @ 14x14", 1024, 14, 14, 256, 1, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 256->1024 @ 14x14", 256, 14, 14, 1024, 1, 1, 1),
      conv_nhwc("channels-last ResNet-50 1x1 128->512 @ 28x28", 128, 28, 28, 512, 1, 1, 1),
      conv_nhwc("channels-last PP-OCRv4 det 3x3 96->24 @ 80x80", 96, 80, 80, 24, 3, 1, 1),
      // The same 3x3s by Winograd F(2x2, 3x3) (what hexir-compile chooses for them), and VGG's and DenseNet's.
      conv_nhwc("channels-last VGG-11 3x3 512->512 @ 14x14", 512, 14, 14, 512, 3, 1, 1),
      conv_nhwc("channels-last DenseNet-121 3x3 128->32 @ 28x28", 128, 28, 28, 32, 3, 1, 1),
      conv_winograd("winograd ResNet-18 3x3 128->128 @ 28x28", 128, 28, 28, 128),
      conv_winograd("winograd ResNet-50 3x3 64->64 @ 56x56", 64, 56, 56, 64),
      conv_winograd("winograd ResNet-50 3x3 256->256 @ 14x14", 256, 14, 14, 256),
      conv_winograd("winograd SqueezeNet 1.0 3x3 32->128 @ 54x54", 32, 54, 54, 128),
      conv_winograd("winograd SqueezeNet 1.0 3x3 64->256 @ 27x27", 64, 27, 27, 256),
      conv_winograd("winograd SqueezeNet 1.0 3x3 64->256 @ 13x13", 64, 13, 13, 256),
      conv_winograd("winograd EfficientNetV2 3x3 64->256 @ 28x28", 64, 28, 28, 256),
      conv_winograd("winograd Inception-v3 3x3 64->96 @ 35x35", 64, 35, 35, 96),
      conv_winograd("winograd VGG-11 3x3 512->512 @ 14x14", 512, 14, 14, 512),
      conv_winograd("winograd DenseNet-121 3x3 128->32 @ 28x28", 128, 28, 28, 32),
      // EfficientNetV2-S's fused MBConv 3x3s (24 -> 24 at 112, the expansions 48 -> 192 at 56 and 64 -> 256 at 28).
      // SqueezeNet 1.0's expand 3x3s (fire4 at 54, fire7-9 at 27, fire9 at 13).
      conv_nhwc("channels-last SqueezeNet 1.0 3x3 32->128 @ 54x54", 32, 54, 54, 128, 3, 1, 1),
      conv_nhwc("channels-last SqueezeNet 1.0 3x3 48->192 @ 27x27", 48, 27, 27, 192, 3, 1, 1),
      conv_nhwc("channels-last SqueezeNet 1.0 3x3 64->256 @ 27x27", 64, 27, 27, 256, 3, 1, 1),
      conv_nhwc("channels-last SqueezeNet 1.0 3x3 64->256 @ 13x13", 64, 13, 13, 256, 3, 1, 1),
      conv_nhwc("channels-last EfficientNetV2 3x3 24->24 @ 112x112", 24, 112, 112, 24, 3, 1, 1),
      conv_nhwc("channels-last EfficientNetV2 3x3 48->192 @ 56x56", 48, 56, 56, 192, 3, 1, 1),
      conv_nhwc("channels-last EfficientNetV2 3x3 64->256 @ 28x28", 64, 28, 28, 256, 3, 1, 1),
      // Grouped 3x3s of narrow groups (ResNeXt-50 32x4d's three stages, RegNetX-400MF's strided first),
      // and RegNetX's strided 1x1 projection.
      conv_nhwc("channels-last ResNeXt grouped 3x3 128 (32 x 4) @ 56x56", 128, 56, 56, 128, 3, 1, 32),
      conv_nhwc("channels-last ResNeXt grouped 3x3 256 (32 x 8) @ 28x28", 256, 28, 28, 256, 3, 1, 32),
      conv_nhwc("channels-last ResNeXt grouped 3x3 512 (32 x 16) @ 14x14", 512, 14, 14, 512, 3, 1, 32),
      conv_nhwc("channels-last RegNetX grouped 3x3 s2 32 (2 x 16) @ 112x112", 32, 112, 112, 32, 3, 2, 2),
      conv_nhwc("channels-last RegNetX grouped 3x3 160 (10 x 16) @ 14x14", 160, 14, 14, 160, 3, 1, 10),
      conv_nhwc("channels-last RegNetX grouped 3x3 400 (25 x 16) @ 7x7", 400, 7, 7, 400, 3, 1, 25),
      conv_nhwc("channels-last RegNetX 1x1 s2 160->400 @ 14x14", 160, 14, 14, 400, 1, 2, 1),
      conv_nhwc("channels-last RegNetX 1x1 400->400 @ 7x7", 400, 7, 7, 400, 1, 1, 1),
      conv_nhwc("channels-last PP-OCR 1x1 128->256 @ 20x40", 128, 20, 40, 256, 1, 1, 1),
      conv_nhwc("channels-last BlazeFace 5x5 depthwise 48 @ 64x64", 48, 64, 64, 48, 5, 1, 48),
      conv_nhwc("channels-last PP-OCR 3x3 depthwise 96 @ 40x40", 96, 40, 40, 96, 3, 1, 96),
      conv_transpose("PP-OCRv4 det ConvTranspose 2x2 s2 24->24 @ 80x80", 24, 80, 80, 24, 2, 2),
      conv_transpose("PP-OCRv4 det ConvTranspose 2x2 s2 24->1 @ 160x160", 24, 160, 160, 1, 2, 2),
      conv_transpose("ConvTranspose 4x4 s2 pad 0 64->32 @ 32x32", 64, 32, 32, 32, 4, 2),
      resize("Resize nearest 2x 96 @ 40x40", 96, 40, 40, 2, 0),
      resize("Resize linear 2x 96 @ 40x40", 96, 40, 40, 2, 1),
  };
  const double ghz = clock_ghz();
  const double stated_peak = ghz * 2 * 2 * lanes();
  const double measured = measured_peak();
  const double peak_core = std::max(measured, stated_peak);
  std::printf(
      "clock %.2f GHz (/proc/cpuinfo), %d f32 lanes, 2 FMA units assumed: %.1f GFLOP/s per core; measured FMA "
      "throughput %.1f GFLOP/s per core; %% of peak below is of the larger\n\n",
      ghz, lanes(), stated_peak, measured);
  std::printf(
      "| kernel | GFLOP | 1 thread ms per call | 1 thread ms | GFLOP/s | %% of 1-core peak | 1 thread CPU ms per "
      "call / prepared | %% of peak on CPU time (prepared) | 2 threads ms | GFLOP/s | speedup |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  // Runs `s` (runs + 2 calls, the first two not timed) in modes 0: 1 thread
  // without prepared weights, 1: 1 thread prepared, 2: 2 threads prepared
  // (`modes` of them): median wall ms and least CPU ms of the calling thread.
  auto time_shape = [&](const Shape& s, int modes, double* ms, double* cpu_ms) -> bool {
    auto result = hexir::ops::infer_result_type(s.op, s.inputs, s.params);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, result.status().to_string().c_str());
      return false;
    }
    const std::vector<TensorType> outs{*result};
    auto plan = hexir::ops::plan_op(s.op, s.inputs, outs, s.params);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, plan.status().to_string().c_str());
      return false;
    }
    std::vector<std::vector<float>> data;
    std::vector<void*> operands;
    for (const TensorType& t : s.inputs) {
      data.emplace_back(static_cast<size_t>(*hexir::element_count(t.dims.data(), t.dims.size())));
      for (size_t i = 0; i < data.back().size(); ++i)
        data.back()[i] = static_cast<float>((i * 7919) % 17) * 0.01f;
    }
    if (s.inputs.size() == 1)  // an activation: values across [-8, 8]
      for (size_t i = 0; i < data[0].size(); ++i) data[0][i] = static_cast<float>((i * 7919) % 1601) * 0.01f - 8.0f;
    // The result (two floats per element: room for argmax's i64).
    data.emplace_back(2 *
                      static_cast<size_t>(*hexir::element_count(outs[0].dims.data(), outs[0].dims.size())));
    for (auto& d : data) operands.push_back(d.data());
    std::vector<uint64_t> workspace((hexir::ops::workspace_bytes(s.op, s.inputs, s.params) + 7) / 8);
    hexir::hal::Dispatch dispatch;
    dispatch.kernel = reinterpret_cast<uintptr_t>(
        hexir::hal::cpu::find_cpu_kernel(hexir::ops::kernel_key(s.op, s.inputs, outs)));
    dispatch.plan = plan->words().data();
    dispatch.operands = operands.data();
    dispatch.input_count = static_cast<uint32_t>(s.inputs.size());
    dispatch.output_count = 1;
    dispatch.workspace = workspace.empty() ? nullptr : workspace.data();
    dispatch.workspace_size = workspace.size() * 8;
    // The weights prepared once, as Program::prepare does for a constant.
    std::vector<float> prepared;
    if (const auto* prepare = hexir::hal::cpu::find_cpu_prepare(
            reinterpret_cast<hexir::hal::cpu::KernelFn>(dispatch.kernel))) {
      std::vector<void*> constants(operands.size(), nullptr);
      constants[1] = operands[1];
      hexir::hal::Dispatch c = dispatch;
      c.operands = constants.data();
      const uint64_t bytes = prepare->bytes(c);
      if (bytes > 0) {
        prepared.resize(bytes / sizeof(float) + 16);
        float* aligned = prepared.data() + (16 - (reinterpret_cast<uintptr_t>(prepared.data()) / 4) % 16) % 16;
        prepare->fill(c, aligned);
        dispatch.prepared = aligned;
      }
    }
    const void* with_prepared = dispatch.prepared;
    for (int mode = 0; mode < modes; ++mode) {
      const int threads = mode == 2 ? 2 : 1;
      dispatch.prepared = mode == 0 ? nullptr : with_prepared;
      auto device = hexir::hal::create_device("cpu", {.threads = threads});
      auto queue = (*device)->create_queue();
      std::vector<double> times;
      cpu_ms[mode] = 1e30;
      for (int r = 0; r < runs + 2; ++r) {
        const double c0 = thread_cpu_ms();
        const auto t0 = std::chrono::steady_clock::now();
        hexir::Status st = (*queue)->dispatch(dispatch);
        const auto t1 = std::chrono::steady_clock::now();
        cpu_ms[mode] = std::min(cpu_ms[mode], thread_cpu_ms() - c0);
        if (!st.ok()) {
          std::fprintf(stderr, "%s: %s\n", s.name, st.to_string().c_str());
          return false;
        }
        if (r >= 2) times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      std::sort(times.begin(), times.end());
      ms[mode] = times[times.size() / 2];
    }
    return true;
  };
  for (const Shape& s : shapes) {
    if (filter && std::strstr(s.name, filter) == nullptr) continue;
    double ms[3], cpu_ms[3];
    if (!time_shape(s, 3, ms, cpu_ms)) return 1;
    const double g1 = s.flops / ms[1] / 1e6, g2 = s.flops / ms[2] / 1e6;
    // The least CPU time of the calling thread: what a loaded machine's wall
    // clock hides (the pool's work at 1 thread runs on the caller).
    const double g_cpu = s.flops / cpu_ms[1] / 1e6;
    std::printf("| %s | %.3f | %.3f | %.3f | %.1f | %.0f %% | %.3f / %.3f | %.0f %% | %.3f | %.1f | %.2fx |\n",
                s.name, s.flops / 1e9, ms[0], ms[1], g1, 100.0 * g1 / peak_core, cpu_ms[0], cpu_ms[1],
                100.0 * g_cpu / peak_core, ms[2], g2, ms[1] / ms[2]);
  }

  // The integer GEMM (integer_matmul: u8 x s8 -> exact i32) against the
  // core's measured int8 peak (VNNI vpdpbusd chains): ops = 2 m k n.
  std::vector<Shape> integer_shapes = {
      {"integer_matmul 64x768 * 768x3072", OpId::kIntegerMatmul,
       {{DType::kU8, {64, 768}}, {DType::kI8, {3072, 768}}, {DType::kU8, {}}}, {}, 2.0 * 64 * 768 * 3072},
      {"integer_matmul 256x768 * 768x768", OpId::kIntegerMatmul,
       {{DType::kU8, {256, 768}}, {DType::kI8, {768, 768}}, {DType::kU8, {}}}, {}, 2.0 * 256 * 768 * 768},
      {"integer_matmul 1x768 * 768x3072", OpId::kIntegerMatmul,
       {{DType::kU8, {1, 768}}, {DType::kI8, {3072, 768}}, {DType::kU8, {}}}, {}, 2.0 * 768 * 3072},
  };
  // quantized_conv2d (a QDQ model's integer convolution, channels-last u8): ResNet-50's and
  // MobileNet-V2's shapes; ops = 2 * outputs * taps * channels per group.
  auto qconv = [](const char* name, int64_t c, int64_t hw, int64_t k, int64_t ks, int64_t stride, int64_t groups) {
    const int64_t pad = ks / 2, o = (hw + 2 * pad - ks) / stride + 1, cg = c / groups;
    const bool depthwise = groups == c && groups == k;
    const int64_t depth = (ks * ks * cg + 3) / 4 * 4;
    const TensorType w = depthwise ? TensorType{DType::kI8, {ks * ks, c}}
                                   : TensorType{DType::kI8, {groups, (k / groups + 15) / 16, depth / 4, 16, 4}};
    return Shape{name, OpId::kQuantizedConv2d,
                 {{DType::kU8, {1, hw, hw, c}}, w, {DType::kI32, {k}}, f32({k})},
                 {ks, ks, stride, stride, pad, pad, pad, pad, 1, 1, groups, 128, 0, 0, 255},
                 2.0 * o * o * k * ks * ks * cg};
  };
  integer_shapes.push_back(qconv("quantized_conv2d 7x7/2 3->64 at 224 (stem)", 3, 224, 64, 7, 2, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 3x3 64->64 at 56", 64, 56, 64, 3, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 1x1 256->64 at 56", 256, 56, 64, 1, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 1x1 64->256 at 56", 64, 56, 256, 1, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 3x3 256->256 at 14", 256, 14, 256, 3, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 3x3 512->512 at 7", 512, 7, 512, 3, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 1x1 1024->256 at 14", 1024, 14, 256, 1, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d 1x1 16->96 at 112 (shallow)", 16, 112, 96, 1, 1, 1));
  integer_shapes.push_back(qconv("quantized_conv2d depthwise 3x3 144 at 56", 144, 56, 144, 3, 1, 144));
  integer_shapes.push_back(qconv("quantized_conv2d depthwise 3x3 32 at 112", 32, 112, 32, 3, 1, 32));
  integer_shapes.push_back(qconv("quantized_conv2d depthwise 3x3 192 at 28", 192, 28, 192, 3, 1, 192));
  integer_shapes.push_back(qconv("quantized_conv2d depthwise 3x3 576 at 14", 576, 14, 576, 3, 1, 576));
  integer_shapes.push_back(qconv("quantized_conv2d depthwise 3x3 960 at 7", 960, 7, 960, 3, 1, 960));
  const double int8_peak = measured_int8_peak();
  std::printf("\nmeasured int8 peak (vpdpbusd chains): %.1f GOPS per core%s\n\n", int8_peak,
              int8_peak > 0 ? "" : " (no AVX-512 VNNI)");
  std::printf("| integer kernel | GOP | 1 thread ms | GOPS | %% of int8 peak | 2 threads ms | GOPS |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Shape& s : integer_shapes) {
    if (filter && std::strstr(s.name, filter) == nullptr) continue;
    double ms[3], cpu_ms[3];
    if (!time_shape(s, 3, ms, cpu_ms)) return 1;
    const double g1 = s.flops / ms[1] / 1e6, g2 = s.flops / ms[2] / 1e6;
    std::printf("| %s | %.3f | %.3f | %.1f | %.0f %% | %.3f | %.1f |\n", s.name, s.flops / 1e9, ms[1], g1,
                int8_peak > 0 ? 100.0 * g1 / int8_peak : 0.0, ms[2], g2);
  }

  // Activations at 1 thread: ns per element (the matmuls: per output element).
  constexpr int64_t kElements = 1 << 20;
  const std::vector<Shape> activations = {
      activation("sigmoid 1M", OpId::kSigmoid, kElements),
      activation("silu 1M", OpId::kSilu, kElements),
      activation("tanh 1M", OpId::kTanh, kElements),
      activation("gelu tanh 1M", OpId::kGelu, kElements, {1}),
      activation("gelu erf 1M", OpId::kGelu, kElements, {0}),
      activation("relu 1M", OpId::kRelu, kElements),
      activation("elu 1M", OpId::kElu, kElements, {std::bit_cast<int64_t>(1.0)}),
      activation("selu 1M", OpId::kSelu, kElements,
                 {std::bit_cast<int64_t>(1.6732632423543772), std::bit_cast<int64_t>(1.0507009873554805)}),
      activation("softsign 1M", OpId::kSoftsign, kElements),
      activation("shrink 1M", OpId::kShrink, kElements, {std::bit_cast<int64_t>(0.5), 0}),
      activation("mish 1M", OpId::kMish, kElements),
      activation("sin 1M", OpId::kSin, kElements),
      matmul("matmul 256x256 * 256x1024", 256, 256, 1024),
      matmul_with("matmul 256x256 * 256x1024 + sigmoid", 256, 256, 1024, OpId::kSigmoid),
      matmul_with("matmul 256x256 * 256x1024 + tanh", 256, 256, 1024, OpId::kTanh),
  };
  std::printf("\n| activation, 1 thread | ms | CPU ms | ns per element (CPU) |\n| --- | ---: | ---: | ---: |\n");
  for (const Shape& s : activations) {
    if (filter && std::strstr(s.name, filter) == nullptr) continue;
    double ms[2], cpu_ms[2];
    if (!time_shape(s, 2, ms, cpu_ms)) return 1;
    const double elements = s.op == OpId::kMatmul ? 256.0 * 1024.0 : static_cast<double>(kElements);
    std::printf("| %s | %.3f | %.3f | %.2f |\n", s.name, ms[1], cpu_ms[1], cpu_ms[1] * 1e6 / elements);
  }

  // The straightforward loop the kernels must not lose to: ops::math_of over
  // the same values, one element at a time (the least CPU time of 5).
  std::vector<float> x(kElements), y(kElements);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1601) * 0.01f - 8.0f;
  auto plain = [&](const char* name, auto map) {
    if (filter && std::strstr(name, filter) == nullptr) return;
    double best = 1e300;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = thread_cpu_ms();
      for (size_t i = 0; i < x.size(); ++i) y[i] = map(x[i]);
      best = std::min(best, thread_cpu_ms() - t0);
    }
    std::printf("| %s | - | %.3f | %.2f |\n", name, best, best * 1e6 / static_cast<double>(kElements));
  };
  using hexir::ops::MathFn;
  plain("elu 1M, plain loop", [](float v) { return hexir::ops::math_of<MathFn::kElu>(v, 1.0f, 0.0f); });
  plain("selu 1M, plain loop", [](float v) {
    return hexir::ops::math_of<MathFn::kSelu>(v, 1.67326319217681884765625f, 1.05070102214813232421875f);
  });
  plain("softsign 1M, plain loop", [](float v) { return hexir::ops::math_of<MathFn::kSoftsign>(v, 0.0f, 0.0f); });
  plain("shrink 1M, plain loop", [](float v) { return hexir::ops::math_of<MathFn::kShrink>(v, 0.5f, 0.0f); });
  // The reductions and the row operators at 1 thread: ns per input element,
  // next to a straightforward loop over the same layout (double sums, float
  // compares; -O2 as built) for the reductions it has.
  const std::vector<Reduction> reductions = {
      {"reduce_sum rows 1024x1024 axis 1", OpId::kReduceSum, 1},
      {"reduce_sum 1024x1024 axis 0", OpId::kReduceSum, 0},
      {"reduce_max rows 1024x1024 axis 1", OpId::kReduceMax, 1},
      {"reduce_max 1024x1024 axis 0", OpId::kReduceMax, 0},
      {"reduce_min rows 1024x1024 axis 1", OpId::kReduceMin, 1},
      {"reduce_min 1024x1024 axis 0", OpId::kReduceMin, 0},
      {"reduce_l1 rows 1024x1024 axis 1", OpId::kReduceL1, 1},
      {"reduce_l2 rows 1024x1024 axis 1", OpId::kReduceL2, 1},
      {"reduce_sum_square rows 1024x1024 axis 1", OpId::kReduceSumSquare, 1},
      {"reduce_prod rows 1024x1024 axis 1", OpId::kReduceProd, 1},
      {"reduce_log_sum_exp rows 1024x1024 axis 1", OpId::kReduceLogSumExp, 1},
      {"softmax rows 1024x1024 axis 1", OpId::kSoftmax, 1},
      {"log_softmax rows 1024x1024 axis 1", OpId::kLogSoftmax, 1},
      {"log_softmax 1024x1024 axis 0", OpId::kLogSoftmax, 0},
      {"argmax rows 1024x1024 axis 1", OpId::kArgMax, 1},
      {"argmin rows 1024x1024 axis 1", OpId::kArgMin, 1},
      {"hardmax rows 1024x1024 axis 1", OpId::kHardmax, 1},
  };
  std::printf(
      "\n| reduction, 1 thread | ms | CPU ms | ns per element (CPU) | plain loop ns per element |\n"
      "| --- | ---: | ---: | ---: | ---: |\n");
  for (const Reduction& r : reductions) {
    if (filter && std::strstr(r.name, filter) == nullptr) continue;
    constexpr int64_t kSide = 1024;
    Shape s{r.name, r.op, {f32({kSide, kSide})}, {}, 0.0};
    if (r.op == OpId::kArgMax || r.op == OpId::kArgMin)
      s.params = {r.axis, 0, 0};
    else if (r.op == OpId::kSoftmax || r.op == OpId::kLogSoftmax || r.op == OpId::kHardmax)
      s.params = {r.axis};
    else
      s.params = {0, r.axis};
    double ms[2], cpu_ms[2];
    if (!time_shape(s, 2, ms, cpu_ms)) return 1;
    const double elements = static_cast<double>(kSide * kSide);
    const double plain = plain_reduction_ms(r, kSide, runs);
    if (plain > 0)
      std::printf("| %s | %.3f | %.3f | %.2f | %.2f |\n", r.name, ms[1], cpu_ms[1],
                  cpu_ms[1] * 1e6 / elements, plain * 1e6 / elements);
    else
      std::printf("| %s | %.3f | %.3f | %.2f | |\n", r.name, ms[1], cpu_ms[1], cpu_ms[1] * 1e6 / elements);
  }
  return 0;
}
