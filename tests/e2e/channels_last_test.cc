// Channels-last convolutions (docs/layout.md) end to end: a conv2d written
// with channels_last = 1 gives ops::conv2d_channels_last_element's sums on
// the cpu (dense, grouped, depthwise, strided, dilated, padded, more input
// channels than one block, with bias and epilogue); a graph compiled with
// CompileOptions::channels_last runs to the NCHW graph's results within
// rounding, at 1 and 2 threads and under every plan, with its conversions
// only at the region's edges.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/ops/plans.h"
#include "hexir/vm.h"
#include "loaded.h"
#include "sanitizers.h"

namespace hexir::testing {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> out(n);
  for (float& v : out) v = dist(rng);
  return out;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s;
}

// A `const @name : f32[dims] = dense [...]` line of random values.
std::string dense_constant(const std::string& name, const std::vector<int64_t>& dims, uint32_t seed,
                           std::vector<float>* values = nullptr) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  const std::vector<float> v = random_floats(n, seed);
  if (values) *values = v;
  std::ostringstream s;
  s.precision(9);
  s << "const @" << name << " : f32[" << dims_text(dims) << "] = dense [";
  for (size_t i = 0; i < n; ++i) s << (i ? ", " : "") << v[i];
  s << "]\n";
  return s.str();
}

struct Outputs {
  std::vector<std::vector<float>> values;
  std::vector<std::string> ops;  // the instructions' operators, in order
};

Outputs run(const std::vector<uint8_t>& compiled, const std::vector<std::vector<float>>& inputs, int threads,
            bool pack_weights = true) {
  auto loaded = load_compiled(compiled, threads, pack_weights);
  const vm::Module* module = loaded->module.get();
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = module->function(0);
  REQUIRE(sig.inputs.size() == inputs.size());
  std::vector<vm::TensorRef> refs;
  for (size_t i = 0; i < inputs.size(); ++i)
    refs.push_back({const_cast<float*>(inputs[i].data()), inputs[i].size() * 4, sig.inputs[i].type});
  Status status = context->invoke(sig.name, refs);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  Outputs out;
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    std::vector<float> v(sig.outputs[j].byte_size / 4);
    REQUIRE(context->read_output(0, j, std::span(reinterpret_cast<uint8_t*>(v.data()), v.size() * 4)).ok());
    out.values.push_back(std::move(v));
  }
  for (const vm::InstructionInfo& info : module->instructions(0)) out.ops.push_back(info.op);
  return out;
}

std::vector<uint8_t> compile(const std::string& source, compiler::CompileOptions options = {}) {
  auto bytes = compiler::compile_source(source, "channels_last.hxir", "/nonexistent", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, k, kh, kw;
  int64_t stride, pad, dilation, groups;
  bool bias;
  const char* activation;  // "" for none
  bool residual = false;   // a residual input added after the bias (needs the bias)
  int winograd = 0;        // the output tile: 2 (winograd = 1: ops::conv2d_winograd_element<2>'s sums), 4
                           // (winograd = 4: ops::conv2d_winograd_element<4>'s)
};

#if defined(HEXIR_CROSS_BUILD) || HEXIR_TEST_ASAN
constexpr size_t kReferenceStride = 13;
#else
constexpr size_t kReferenceStride = 1;
#endif

TEST_CASE("channels-last conv2d: the cpu kernel gives the element function's sums") {
  // The register tiles sum each channel block's window as an FMA chain (AVX-512, AVX2, NEON): bit-identical
  // there; the portable GEMM tile (1x1s, stems) rounds each product, so elsewhere within rounding.
  // HEXIR_MAX_CPU_ISA=portable (hal/cpu/cpu_isa.h) caps the kernels to the portable tile.
  const char* cap = std::getenv("HEXIR_MAX_CPU_ISA");
#if defined(__x86_64__) && defined(__GNUC__)
  const bool fma_tiles = __builtin_cpu_supports("fma");
#elif defined(__aarch64__)
  const bool fma_tiles = true;  // NEON's tile (fmla), in every ARMv8-A core
#else
  const bool fma_tiles = false;  // no FMA tile: the portable one runs
#endif
  const bool exact = fma_tiles && !(cap && std::string_view(cap) == "portable");
  const ConvCase cases[] = {
      {"3x3 pad 1", 1, 8, 9, 11, 16, 3, 3, 1, 1, 1, 1, true, "relu"},
      {"3x3 stride 2, 35 out channels", 2, 12, 10, 9, 35, 3, 3, 2, 1, 1, 1, true, ""},
      {"dilated 3x3", 1, 8, 12, 12, 8, 3, 3, 1, 2, 2, 1, false, "hard_swish"},
      {"5x5 no pad, wide", 1, 16, 8, 40, 24, 5, 5, 1, 0, 1, 1, true, "sigmoid"},
      {"1x1", 1, 24, 7, 7, 40, 1, 1, 1, 0, 1, 1, true, ""},
      // 1x1 at stride 1 without padding: one GEMM per image (prepared), finish in its tile
      {"1x1 relu, two images, 24 out channels", 2, 16, 9, 13, 24, 1, 1, 1, 0, 1, 1, true, "relu"},
      {"1x1 sigmoid, no bias", 1, 32, 5, 6, 8, 1, 1, 1, 0, 1, 1, false, "sigmoid"},
      {"1x1 stride 2 (the per-row path)", 1, 8, 9, 9, 16, 1, 1, 2, 0, 1, 1, true, "clip"},
      {"grouped 3x3", 1, 16, 8, 8, 24, 3, 3, 1, 1, 1, 2, true, "relu"},
      // Narrow groups as many in as out (computed across the output channels):
      // 2, 4, 8, 16 channels, output channels past whole vectors, borders, strides.
      {"groups of 8 (regnet), 104 channels", 1, 104, 9, 13, 104, 3, 3, 1, 1, 1, 13, true, "relu"},
      {"groups of 4, stride 2", 1, 24, 11, 10, 24, 3, 3, 2, 1, 1, 6, false, ""},
      {"groups of 2, dilated", 1, 12, 10, 12, 12, 3, 3, 1, 2, 2, 6, true, "sigmoid"},
      {"groups of 16, two images", 2, 48, 6, 9, 48, 3, 3, 1, 1, 1, 3, true, "hard_swish"},
      // Rows wide enough for the blocks of interior pixels (AVX-512: 12 broadcast, 8 shuffled, then 4;
      // AVX2: 6 and 4), a partial last vector, few rows split over the vectors at 2 threads.
      {"groups of 16, 40 wide, residual", 1, 64, 5, 40, 64, 3, 3, 1, 1, 1, 4, true, "relu", true},
      {"groups of 8, 31 wide, stride 2", 1, 40, 7, 61, 40, 3, 3, 2, 1, 1, 5, true, ""},
      {"groups of 4, 29 wide, 20 channels", 1, 20, 6, 29, 20, 3, 3, 1, 1, 1, 5, true, "clip"},
      {"groups of 2, 26 wide, 6 channels", 1, 6, 5, 26, 6, 3, 3, 1, 1, 1, 3, false, ""},
      {"groups of 16, 400 channels on a 7x7 map", 1, 400, 7, 7, 400, 3, 3, 1, 1, 1, 25, true, "relu", true},
      // Short rows or few vectors: the edge pixels as blocks reading zeros outside the input.
      {"groups of 16, 400 channels, stride 2 to a 7x7 map", 1, 400, 14, 14, 400, 3, 3, 2, 1, 1, 25, true, "relu"},
      {"groups of 4, 3 wide (one edge block of 3 pixels)", 1, 24, 4, 3, 24, 3, 3, 1, 1, 1, 6, true, ""},
      {"groups of 8, 5 wide, dilated, 24 channels", 1, 24, 6, 5, 24, 3, 3, 1, 2, 2, 3, false, "clip"},
      {"300 input channels (two blocks)", 1, 300, 4, 5, 17, 3, 3, 1, 1, 1, 1, true, ""},
      // The interior pixels' window in registers (AVX-512, up to 96 channels): blocks of 6 and the rest
      // per tap, a partial strip, edges of a strided dilated window, groups; past 96 channels per tap.
      {"3x3 64 -> 40 on 23-wide rows", 1, 64, 5, 23, 40, 3, 3, 1, 1, 1, 1, true, "relu"},
      {"3x3 48 -> 64 with a residual, 20 wide", 2, 48, 4, 20, 64, 3, 3, 1, 1, 1, 1, true, "clip", true},
      {"3x3 96 -> 40 stride 2 with a residual", 1, 96, 9, 27, 40, 3, 3, 2, 1, 1, 1, true, "", true},
      {"3x3 128 -> 32 (per tap) with a residual", 1, 128, 4, 9, 32, 3, 3, 1, 1, 1, 1, true, "relu", true},
      {"3x3 stride 2 dilated 2, 300 channels, 19 wide", 1, 300, 6, 19, 33, 3, 3, 2, 2, 2, 1, false, ""},
      {"3x3 stride 2 dilated 2, 72 channels, 31 wide", 1, 72, 7, 31, 33, 3, 3, 2, 2, 2, 1, true, "clip"},
      {"1x7 pad 3, 48 -> 64 (inception's factorized window)", 1, 48, 4, 17, 64, 1, 7, 1, 3, 1, 1, true, "relu"},
      {"grouped 3x3 2 x 40 -> 2 x 36, 14 wide", 1, 80, 5, 14, 72, 3, 3, 1, 1, 1, 2, true, ""},
      {"1x1 stride 2, 300 channels (two blocks), 15 wide", 1, 300, 5, 15, 24, 1, 1, 2, 0, 1, 1, true, ""},
      // 1x1 at a stride without padding: the pixels read gathered in chunks, one GEMM per chunk.
      {"1x1 stride 2, two images, residual", 2, 40, 14, 13, 64, 1, 1, 2, 0, 1, 1, true, "relu", true},
      {"1x1 stride 2, 300 channels, 17 x 15 (three gathered chunks, two K blocks)", 1, 300, 17, 15, 48, 1, 1, 2, 0, 1,
       1, true, "", true},
      {"1x1 stride 3, 700 channels (past a gathered chunk: the per-row path)", 1, 700, 7, 8, 16, 1, 1, 3, 0, 1, 1,
       true, "clip"},
      // 109 pixels of 300 channels: 4 chunks of at most 27 (of 28 had the chunks been balanced by floats).
      {"1x1 stride 2, 300 channels, 1 x 217 (chunks balanced within the buffer)", 1, 300, 1, 217, 16, 1, 1, 2, 0, 1,
       1, true, ""},
      // Few input channels (ops::conv2d_channels_last_patch): each pixel's window gathered, one chain.
      {"stem 7x7 stride 2, 3 channels, 64 out", 1, 3, 23, 29, 64, 7, 7, 2, 3, 1, 1, true, "relu"},
      {"stem 3x3 stride 2, 3 channels, two images", 2, 3, 17, 15, 32, 3, 3, 2, 1, 1, 1, false, "clip"},
      {"5x5, 4 channels, 20 out, sigmoid", 1, 4, 9, 21, 20, 5, 5, 1, 2, 1, 1, true, "sigmoid"},
      {"dilated 3x3, 1 channel", 1, 1, 12, 12, 16, 3, 3, 1, 2, 2, 1, true, ""},
      {"3x3, 16 channels (squeezenet's expand)", 1, 16, 13, 11, 64, 3, 3, 1, 1, 1, 1, true, "relu"},
      {"3x3, 31 channels, 70 out (a 279-float patch)", 1, 31, 7, 9, 70, 3, 3, 1, 1, 1, 1, false, ""},
      // The window's rows read where a padded copy lies (GemmTile::run_segments): rows wider than a band.
      {"3x3, 30 channels, 200 wide (bands), residual", 1, 30, 4, 200, 40, 3, 3, 1, 1, 1, 1, true, "relu", true},
      {"stem 7x7 stride 2, 420 wide (two bands), two images", 2, 3, 9, 420, 24, 7, 7, 2, 3, 1, 1, true, ""},
      {"depthwise 3x3", 1, 24, 10, 10, 24, 3, 3, 1, 1, 1, 24, true, "relu"},
      {"depthwise 5x5 stride 2", 1, 40, 13, 11, 40, 5, 5, 2, 2, 1, 40, false, ""},
      {"depthwise dilated", 2, 20, 9, 9, 20, 3, 3, 1, 2, 2, 20, true, "clip"},
      // Interior blocks of 8 and of 4 pixels (each input pixel loaded once per tap row), edges one at a
      // time; channel tails (half and quarter vectors, single channels); the residual and the
      // activation in registers, or the activation over the stored row (sigmoid).
      {"depthwise 3x3, 23 wide, 76 channels, residual", 1, 76, 6, 23, 76, 3, 3, 1, 1, 1, 76, true, "hard_swish", true},
      {"depthwise 3x3 stride 2, 29 wide, 36 channels", 1, 36, 7, 29, 36, 3, 3, 2, 1, 1, 36, true, "relu"},
      {"depthwise 5x5, 19 wide, 21 channels", 1, 21, 8, 19, 21, 5, 5, 1, 2, 1, 21, true, "sigmoid"},
      {"depthwise 5x5 stride 2, 37 wide, residual", 1, 48, 5, 37, 48, 5, 5, 2, 2, 1, 48, true, "clip", true},
      {"depthwise 7x7, 30 wide (the plan's width)", 1, 16, 9, 30, 16, 7, 7, 1, 3, 1, 16, false, "relu"},
      // Few rows at 2 threads: a row's channel chunks (depthwise) or strips (dense) split among tasks.
      {"depthwise 3x3, 200 channels on a 5x5 map", 1, 200, 5, 5, 200, 3, 3, 1, 1, 1, 200, true, "relu"},
      // Past kSerialMacs (the 5x5 map above runs on one thread): 2 parts of a row's channels at 2 threads,
      // the residual in registers, the activation over each part's stored columns.
      {"depthwise 5x5, 200 channels on a 7x7 map, residual, sigmoid", 1, 200, 7, 7, 200, 5, 5, 1, 2, 1, 200, true,
       "sigmoid", true},
      {"3x3, 64 -> 100 on a 4x4 map", 1, 64, 4, 4, 100, 3, 3, 1, 1, 1, 1, true, "sigmoid"},
      // A group's weights past 512 KiB: strip-major tasks (a strip over a block of rows).
      {"strip-major 3x3 288 -> 80, two images", 2, 288, 5, 6, 80, 3, 3, 1, 1, 1, 1, true, "relu"},
      {"strip-major 1x1 1040 -> 136 (past one GEMM K block)", 1, 1040, 3, 7, 136, 1, 1, 1, 0, 1, 1, false, "clip"},
      // 1x1 deeper than a K block: one GEMM over the image's pixels where the GEMM reads A in place
      // (AVX2, NEON, portable), rows of 7 pixels tiled across; per output row on AVX-512.
      {"1x1 520 -> 40 on a 7x7 map, residual", 1, 520, 7, 7, 40, 1, 1, 1, 0, 1, 1, true, "relu", true},
      {"1x1 300 -> 36, two images", 2, 300, 5, 9, 36, 1, 1, 1, 0, 1, 1, true, "hard_swish"},
      {"strip-major grouped 3x3, 2 groups of 256 -> 72, stride 2", 1, 512, 7, 7, 144, 3, 3, 2, 1, 1, 2, true, ""},
      // One chain over the window (tap columns outside as zeros): a task's rows of one, two or three
      // sets of tap rows as ranges of pixels; more taps than one call takes (the chain resumed from the
      // output, or from a later block's sums).
      {"5x5 pad 2 on a 6x5 map, 40 channels", 1, 40, 6, 5, 24, 5, 5, 1, 2, 1, 1, true, "relu", true},
      {"9x9 pad 4, 40 channels (81 taps)", 1, 40, 10, 11, 20, 9, 9, 1, 4, 1, 1, true, "clip"},
      {"9x9 pad 4, 300 channels (two blocks, 81 taps)", 1, 300, 9, 9, 16, 9, 9, 1, 4, 1, 1, true, "", true},
      // Winograd F(2x2, 3x3): odd maps (tiles past the edge), part strips, channels past whole vectors,
      // activations in the tile and after it, more channels than one pass of unprepared weights packs
      // (the chain resumed), many tiles at 2 threads, pad 0, few channels.
      {"winograd 64 -> 64, 9 x 11, relu", 1, 64, 9, 11, 64, 3, 3, 1, 1, 1, 1, true, "relu", false, 2},
      {"winograd 40 -> 40 on 7 x 5, residual, sigmoid", 1, 40, 7, 5, 40, 3, 3, 1, 1, 1, 1, true, "sigmoid", true, 2},
      {"winograd 33 -> 16 pad 0, two images, clip", 2, 33, 8, 9, 16, 3, 3, 1, 0, 1, 1, true, "clip", false, 2},
      {"winograd 600 -> 20 on 4 x 5 (resumed chains)", 1, 600, 4, 5, 20, 3, 3, 1, 1, 1, 1, true, "", true, 2},
      {"winograd 32 -> 48 on 20 x 18, hard_swish", 1, 32, 20, 18, 48, 3, 3, 1, 1, 1, 1, true, "hard_swish", false, 2},
      {"winograd 3 -> 8 (no patch path)", 1, 3, 6, 6, 8, 3, 3, 1, 1, 1, 1, false, "", false, 2},
      // Past ~320 channels at 1 thread: V over passes of 64 channels, M for groups of strips (2 groups).
      {"winograd 340 -> 112 on 20 x 20 (channel passes, strip groups)", 1, 340, 20, 20, 112, 3, 3, 1, 1, 1, 1, true,
       "relu", true, 2},
      // F(4x4, 3x3): the same edges with 4x4 tiles (maps not a multiple of 4, pad 0), one pass and channel
      // passes (past ~160 channels), part strips.
      {"winograd4 64 -> 64, 9 x 11, relu", 1, 64, 9, 11, 64, 3, 3, 1, 1, 1, 1, true, "relu", false, 4},
      {"winograd4 40 -> 40 on 7 x 5, residual, sigmoid", 1, 40, 7, 5, 40, 3, 3, 1, 1, 1, 1, true, "sigmoid", true, 4},
      {"winograd4 33 -> 16 pad 0, two images, clip", 2, 33, 10, 9, 16, 3, 3, 1, 0, 1, 1, true, "clip", false, 4},
      {"winograd4 32 -> 48 on 22 x 18, hard_swish", 1, 32, 22, 18, 48, 3, 3, 1, 1, 1, 1, true, "hard_swish", false, 4},
      {"winograd4 200 -> 72 on 14 x 14 (channel passes)", 1, 200, 14, 14, 72, 3, 3, 1, 1, 1, 1, true, "relu", true, 4},
      {"winograd4 3 -> 8 (no patch path)", 1, 3, 6, 6, 8, 3, 3, 1, 1, 1, 1, false, "", false, 4},
  };
  for (const ConvCase& c : cases) {
    INFO(std::string(c.name));
    const int64_t cg = c.c / c.groups;
    std::vector<float> w, bias;
    std::string source = "module @conv\n" + dense_constant("w", {c.k, cg, c.kh, c.kw}, 7, &w);
    if (c.bias) source += dense_constant("b", {c.k}, 11, &bias);
    const int64_t oh = (c.h + 2 * c.pad - c.dilation * (c.kh - 1) - 1) / c.stride + 1;
    const int64_t ow = (c.w + 2 * c.pad - c.dilation * (c.kw - 1) - 1) / c.stride + 1;
    std::string attrs = "strides = [" + std::to_string(c.stride) + ", " + std::to_string(c.stride) + "], pads = [" +
                        std::to_string(c.pad) + ", " + std::to_string(c.pad) + ", " + std::to_string(c.pad) + ", " +
                        std::to_string(c.pad) + "], dilations = [" + std::to_string(c.dilation) + ", " +
                        std::to_string(c.dilation) + "], groups = " + std::to_string(c.groups) +
                        ", channels_last = 1";
    if (c.winograd) attrs += c.winograd == 4 ? ", winograd = 4" : ", winograd = 1";
    if (*c.activation) attrs += ", activation = \"" + std::string(c.activation) + "\"";
    const std::string out_type = "f32[" + dims_text({c.n, oh, ow, c.k}) + "]";
    source += "func @main(%x: f32[" + dims_text({c.n, c.h, c.w, c.c}) + "]" +
              (c.residual ? ", %r: " + out_type : "") + ") -> (" + out_type + ") {\n  %y = call @conv2d(%x, @w" +
              (c.bias ? ", @b" : "") + (c.residual ? ", %r" : "") + ") {" + attrs + "} : " + out_type +
              "\n  return %y\n}\n";
    const std::vector<float> x = random_floats(static_cast<size_t>(c.n * c.h * c.w * c.c), 3);
    const std::vector<float> r = c.residual ? random_floats(static_cast<size_t>(c.n * oh * ow * c.k), 4)
                                            : std::vector<float>{};
    ops::Conv2dPlan p{};
    p.n = c.n, p.c = c.c, p.h = c.h, p.w = c.w, p.k = c.k, p.oh = oh, p.ow = ow, p.kh = c.kh, p.kw = c.kw;
    p.stride_h = p.stride_w = c.stride, p.pad_top = p.pad_left = c.pad, p.dilation_h = p.dilation_w = c.dilation;
    p.groups = c.groups, p.c_per_group = cg, p.k_per_group = c.k / c.groups, p.channels_last = 1;
    p.winograd = c.winograd;
    compiler::CompileOptions options;
    options.winograd = false;  // the conv2d as written
    const std::vector<uint8_t> compiled = compile(source, options);
    // The reference once per case (the Winograd element function recomputes its tile's 16 sums per element).
    // Under ASan and qemu, where it runs 10-50x slower (the 340-channel case: minutes), at every
    // kReferenceStride-th output of the Winograd cases: a prime to their output channel counts, so each
    // column and channel is still checked somewhere; the kernel still computes (and ASan checks) them all.
    const size_t step = c.winograd ? kReferenceStride : 1;
    std::vector<float> wants(static_cast<size_t>(c.n * oh * ow * c.k));
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
          for (int64_t k = 0; k < c.k; ++k) {
            const size_t at = static_cast<size_t>(((n * oh + oy) * ow + ox) * c.k + k);
            if (at % step != 0) continue;
            float want = ops::conv2d_channels_last_element(p, x.data() + n * c.h * c.w * c.c, w.data(), k, oy, ox);
            if (c.bias) want += bias[static_cast<size_t>(k)];
            if (c.residual) want += r[at];
            if (*c.activation) {
              ops::Epilogue e{};
              const std::string a = c.activation;
              e.activation = static_cast<int32_t>(a == "relu"         ? ops::Activation::kRelu
                                                  : a == "hard_swish" ? ops::Activation::kHardSwish
                                                  : a == "sigmoid"    ? ops::Activation::kSigmoid
                                                                      : ops::Activation::kClip);
              e.a = -INFINITY, e.b = INFINITY;
              want = ops::apply_epilogue(e, want);
            }
            wants[at] = want;
          }
    for (int threads : {1, 2})
      for (bool packed : {true, false}) {  // weights prepared, or packed per row
        INFO(threads << " threads, weights " << std::string(packed ? "prepared" : "packed per row"));
        const Outputs got = c.residual ? run(compiled, {x, r}, threads, packed) : run(compiled, {x}, threads, packed);
        REQUIRE(got.values.size() == 1);
        size_t mismatches = 0;
        double worst = 0;
        for (size_t i = 0; i < wants.size(); i += step) {
          const float have = got.values[0][i], want = wants[i];
          if (exact ? std::memcmp(&have, &want, 4) != 0 : std::fabs(have - want) > 1e-5f * (1 + std::fabs(want)))
            ++mismatches;
          worst = std::max(worst, static_cast<double>(std::fabs(have - want)));
        }
        INFO("largest difference " << worst);
        CHECK(mismatches == 0);
      }
  }
}

// Two dense 3x3 convolutions with a depthwise block, a residual add and a
// per-channel scale between them, a max pool after the second, and results
// returned from inside the region and after it.
std::string region_graph() {
  std::string s = "module @region\n";
  s += dense_constant("w1", {16, 8, 3, 3}, 1) + dense_constant("b1", {16}, 2);
  s += dense_constant("wd", {16, 1, 3, 3}, 3) + dense_constant("wp", {16, 16, 1, 1}, 4);
  s += dense_constant("bp", {16}, 5) + dense_constant("scale", {1, 16, 1, 1}, 6);
  s += dense_constant("w3", {8, 16, 3, 3}, 7) + dense_constant("wg", {16, 8, 3, 3}, 8);
  s += R"(func @main(%x: f32[1,8,12,12]) -> (f32[1,16,12,12], f32[1,8,6,6], f32[1,16,12,12]) {
  %c1 = call @conv2d(%x, @w1, @b1) {pads = [1, 1, 1, 1]} : f32[1,16,12,12]
  %r1 = call @relu(%c1) : f32[1,16,12,12]
  %d = call @conv2d(%r1, @wd) {pads = [1, 1, 1, 1], groups = 16} : f32[1,16,12,12]
  %p = call @conv2d(%d, @wp, @bp) : f32[1,16,12,12]
  %s = call @add(%p, %r1) : f32[1,16,12,12]
  %m = call @mul(%s, @scale) : f32[1,16,12,12]
  %g = call @conv2d(%m, @wg) {pads = [1, 1, 1, 1], groups = 2} : f32[1,16,12,12]
  %c3 = call @conv2d(%g, @w3) {pads = [2, 2, 2, 2], dilations = [2, 2]} : f32[1,8,12,12]
  %pool = call @max_pool(%c3) {kernel_shape = [2, 2], strides = [2, 2]} : f32[1,8,6,6]
  return %s, %pool, %g
}
)";
  return s;
}

// Largest |got - want| over want's scale: other sum orders, within float rounding.
void check_within_rounding(const Outputs& got, const Outputs& want) {
  REQUIRE(got.values.size() == want.values.size());
  for (size_t j = 0; j < want.values.size(); ++j) {
    INFO("output " << j);
    REQUIRE(got.values[j].size() == want.values[j].size());
    double worst = 0, scale = 1;
    for (size_t i = 0; i < want.values[j].size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(got.values[j][i]) - want.values[j][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want.values[j][i])));
    }
    INFO("largest difference " << worst << " at scale " << scale);
    CHECK(worst < 1e-6 * scale);
  }
}

size_t conversions(const Outputs& o) {
  size_t n = 0;
  for (const std::string& op : o.ops) n += op == "transpose" || op == "copy";
  return n;
}

TEST_CASE("channels-last: a graph compiled channels-last gives the NCHW graph's results, converting at its edges") {
  const std::string source = region_graph();
  const std::vector<float> x = random_floats(8 * 12 * 12, 9);
  constexpr compiler::PlanStrategy kPlans[] = {compiler::PlanStrategy::kArena, compiler::PlanStrategy::kNaive,
                                                 compiler::PlanStrategy::kFreeAtLastUse};
  for (compiler::PlanStrategy plan : kPlans) {
    compiler::CompileOptions nchw_options, nhwc_options;
    nchw_options.plan = nhwc_options.plan = plan;
    nchw_options.channels_last = false;
    nhwc_options.channels_last = true;
    const std::vector<uint8_t> nchw = compile(source, nchw_options), nhwc = compile(source, nhwc_options);
    for (int threads : {1, 2}) {
      INFO("plan " << static_cast<int>(plan) << " at " << threads << " threads");
      const Outputs want = run(nchw, {x}, threads), got = run(nhwc, {x}, threads);
      check_within_rounding(got, want);  // other sum orders, four convolutions deep
      // One conversion into the region (x), and out of it: the returned %s,
      // %g and %pool; nothing between the convolutions and the pool.
      CHECK(conversions(got) == 4);
      CHECK(conversions(want) == 0);
    }
  }
}

TEST_CASE("channels-last: 1x1 and depthwise convolutions start a region where it pays, stems stay NCHW") {
  compiler::CompileOptions nhwc, nchw;
  nchw.channels_last = false;
  SUBCASE("a 1x1 and a depthwise of 10 x 10 alone: fewer flops than their two conversions' bytes pay for") {
    std::string s = "module @plain\n";
    s += dense_constant("wp", {16, 8, 1, 1}, 1) + dense_constant("wd", {16, 1, 3, 3}, 2);
    s += dense_constant("stem", {8, 3, 3, 3}, 3);
    s += R"(func @main(%x: f32[1,8,10,10], %img: f32[1,3,10,10]) -> (f32[1,16,10,10], f32[1,8,10,10]) {
  %p = call @conv2d(%x, @wp) : f32[1,16,10,10]
  %d = call @conv2d(%p, @wd) {pads = [1, 1, 1, 1], groups = 16} : f32[1,16,10,10]
  %s = call @conv2d(%img, @stem) {pads = [1, 1, 1, 1]} : f32[1,8,10,10]
  return %d, %s
}
)";
    const std::vector<std::vector<float>> inputs{random_floats(800, 1), random_floats(300, 2)};
    const Outputs got = run(compile(s, nhwc), inputs, 1);
    CHECK(conversions(got) == 0);
    check_within_rounding(got, run(compile(s, nchw), inputs, 1));
  }
  SUBCASE("a 1x1 and two inverted residual blocks of 16 x 16: one conversion in, one out") {
    std::string s = "module @blocks\n";
    s += dense_constant("w0", {64, 64, 1, 1}, 6);
    s += dense_constant("e1", {128, 64, 1, 1}, 1) + dense_constant("d1", {128, 1, 3, 3}, 2);
    s += dense_constant("p1", {64, 128, 1, 1}, 3) + dense_constant("d2", {64, 1, 3, 3}, 4);
    s += dense_constant("p2", {64, 64, 1, 1}, 5);
    s += R"(func @main(%x0: f32[1,64,16,16]) -> (f32[1,64,16,16]) {
  %x = call @conv2d(%x0, @w0) {activation = "relu"} : f32[1,64,16,16]
  %a = call @conv2d(%x, @e1) {activation = "relu"} : f32[1,128,16,16]
  %b = call @conv2d(%a, @d1) {pads = [1, 1, 1, 1], groups = 128} : f32[1,128,16,16]
  %c = call @conv2d(%b, @p1) : f32[1,64,16,16]
  %r = call @add(%c, %x) : f32[1,64,16,16]
  %d = call @conv2d(%r, @d2) {pads = [1, 1, 1, 1], groups = 64} : f32[1,64,16,16]
  %e = call @conv2d(%d, @p2) : f32[1,64,16,16]
  return %e
}
)";
    const std::vector<float> x = random_floats(64 * 256, 3);
    for (int threads : {1, 2}) {
      INFO(threads << " threads");
      const Outputs got = run(compile(s, nhwc), {x}, threads);
      CHECK(conversions(got) == 2);
      check_within_rounding(got, run(compile(s, nchw), {x}, threads));
    }
  }
}

TEST_CASE("channels-last: reductions and channel concats inside a region read it in place") {
  // A squeeze-and-excitation block (global mean, 1x1s, sigmoid, scale), a
  // concat of two branches along the channels, a 1x1 after it and a global
  // mean as the head (keepdims 0): one conversion, the input's.
  std::string s = "module @se\n";
  s += dense_constant("w1", {16, 8, 3, 3}, 1) + dense_constant("f1", {4, 16, 1, 1}, 2);
  s += dense_constant("f2", {16, 4, 1, 1}, 3) + dense_constant("wb", {8, 16, 1, 1}, 4);
  s += dense_constant("wc", {12, 24, 1, 1}, 5);
  s += R"(func @main(%x: f32[1,8,9,9]) -> (f32[1,12]) {
  %c = call @conv2d(%x, @w1) {pads = [1, 1, 1, 1]} : f32[1,16,9,9]
  %a = call @relu(%c) : f32[1,16,9,9]
  %m = call @reduce_mean(%a) {axes = [2, 3], keepdims = 1} : f32[1,16,1,1]
  %e = call @conv2d(%m, @f1) : f32[1,4,1,1]
  %er = call @relu(%e) : f32[1,4,1,1]
  %g = call @conv2d(%er, @f2) : f32[1,16,1,1]
  %gs = call @sigmoid(%g) : f32[1,16,1,1]
  %se = call @mul(%a, %gs) : f32[1,16,9,9]
  %b = call @conv2d(%se, @wb) : f32[1,8,9,9]
  %cat = call @concat(%se, %b) {axis = 1} : f32[1,24,9,9]
  %h = call @conv2d(%cat, @wc) : f32[1,12,9,9]
  %y = call @reduce_mean(%h) {axes = [2, 3], keepdims = 0} : f32[1,12]
  return %y
}
)";
  compiler::CompileOptions nhwc, nchw;
  nchw.channels_last = false;
  const std::vector<float> x = random_floats(8 * 81, 7);
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    const Outputs got = run(compile(s, nhwc), {x}, threads), want = run(compile(s, nchw), {x}, threads);
    CHECK(conversions(got) == 1);
    check_within_rounding(got, want);
  }
}

// Residual adds after every kind of convolution kernel: the few-channel stem,
// depthwise and 1x1 (NCHW), a dense 3x3 (32 channels: its interior pixels
// through the AVX-512 window tile) and a depthwise one channels-last.
std::string residual_graph() {
  std::string s = "module @residual\n";
  s += dense_constant("stem", {32, 3, 3, 3}, 1) + dense_constant("bs", {32}, 2);
  s += dense_constant("wd", {32, 1, 3, 3}, 3) + dense_constant("bd", {32}, 4);
  s += dense_constant("wp", {32, 32, 1, 1}, 5) + dense_constant("bp", {32}, 6);
  s += dense_constant("w3", {32, 32, 3, 3}, 7) + dense_constant("b3", {32}, 8);
  s += dense_constant("wd2", {32, 1, 3, 3}, 9) + dense_constant("bd2", {32}, 10);
  s += dense_constant("w4", {8, 32, 3, 3}, 11);
  s += R"(func @main(%x: f32[1,3,20,20], %r0: f32[1,32,20,20]) -> (f32[1,8,20,20]) {
  %s = call @conv2d(%x, @stem, @bs) {pads = [1, 1, 1, 1]} : f32[1,32,20,20]
  %sa = call @add(%s, %r0) : f32[1,32,20,20]
  %a = call @relu(%sa) : f32[1,32,20,20]
  %d = call @conv2d(%a, @wd, @bd) {pads = [1, 1, 1, 1], groups = 32} : f32[1,32,20,20]
  %e = call @add(%a, %d) : f32[1,32,20,20]
  %p = call @conv2d(%e, @wp, @bp) : f32[1,32,20,20]
  %pe = call @add(%p, %e) : f32[1,32,20,20]
  %q = call @conv2d(%pe, @w3, @b3) {pads = [1, 1, 1, 1]} : f32[1,32,20,20]
  %qe = call @add(%q, %pe) : f32[1,32,20,20]
  %dq = call @conv2d(%qe, @wd2, @bd2) {pads = [1, 1, 1, 1], groups = 32} : f32[1,32,20,20]
  %dqe = call @add(%dq, %qe) : f32[1,32,20,20]
  %dd = call @relu(%dqe) : f32[1,32,20,20]
  %out = call @conv2d(%dd, @w4) {pads = [1, 1, 1, 1]} : f32[1,8,20,20]
  return %out
}
)";
  return s;
}

TEST_CASE("residual: a conv2d's fused residual add gives the unfused bits on every kernel path, both layouts") {
  const std::string source = residual_graph();
  const std::vector<std::vector<float>> inputs = {random_floats(3 * 400, 1), random_floats(32 * 400, 2)};
  compiler::CompileOptions fused, plain, fused_nhwc;
  fused.channels_last = plain.channels_last = false;
  plain.fuse_epilogues = false;
  const std::vector<uint8_t> fused_file = compile(source, fused), plain_file = compile(source, plain);
  // Channels-last fused: the dense 3x3 and the depthwise after it take their residuals channels-last.
  const std::vector<uint8_t> nhwc_file = compile(source, fused_nhwc);
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    const Outputs want = run(plain_file, inputs, threads), got = run(fused_file, inputs, threads);
    CHECK(got.values == want.values);
    const Outputs nhwc = run(nhwc_file, inputs, threads);
    for (const Outputs* o : {&got, &nhwc}) {
      size_t adds = 0;
      for (const std::string& op : o->ops) adds += op == "add";
      CHECK(adds == 0);  // all five taken by their convolutions
    }
    REQUIRE(nhwc.values.size() == 1);
    double worst = 0, scale = 1;
    for (size_t i = 0; i < want.values[0].size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(nhwc.values[0][i]) - want.values[0][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want.values[0][i])));
    }
    INFO("channels-last: largest difference " << worst << " at scale " << scale);
    // The dense 3x3s on 20 x 20 run by Winograd's F(4x4, 3x3) there, whose transforms round at the inputs'
    // magnitude (2e-6 of the scale here; the window's sums were within 1e-6).
    CHECK(worst < 1e-5 * scale);
  }
}

TEST_CASE("a zero pad then an average pool (torch's avg_pool2d with padding) gives the pad's results, in the region") {
  std::string s = "module @pooled\n";
  s += dense_constant("w", {24, 16, 3, 3}, 1) + dense_constant("w2", {8, 24, 1, 1}, 2);
  s += R"(func @main(%x: f32[1,16,12,11]) -> (f32[1,8,12,11]) {
  %c = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], activation = "relu"} : f32[1,24,12,11]
  %p = call @pad(%c) {mode = "constant", pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[1,24,14,13]
  %a = call @average_pool(%p) {kernel_shape = [3, 3]} : f32[1,24,12,11]
  %y = call @conv2d(%a, @w2) : f32[1,8,12,11]
  return %y
}
)";
  const std::vector<float> x = random_floats(16 * 12 * 11, 5);
  compiler::CompileOptions fused, plain;
  plain.fuse_epilogues = false;
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    const Outputs got = run(compile(s, fused), {x}, threads), want = run(compile(s, plain), {x}, threads);
    CHECK(std::count(got.ops.begin(), got.ops.end(), "pad") == 0);
    CHECK(std::count(want.ops.begin(), want.ops.end(), "pad") == 1);
    CHECK(conversions(got) == 2);  // the image in, the result out: the pool stays in the region
    check_within_rounding(got, want);
  }
}

TEST_CASE("a per-channel mul and add between convolutions (a pre-activation batch norm) runs as a 1x1 depthwise, same bits") {
  // DenseNet's norm1 after a concat: channel_affine_as_conv's depthwise 1x1
  // (the cpu's per-channel scale path, its relu and residual in L1) against
  // the mul, the add and the relu run apart; 37 channels: a vector tail.
  std::string s = "module @affine\n";
  s += dense_constant("w", {21, 16, 3, 3}, 1) + dense_constant("w2", {8, 37, 1, 1}, 2) +
       dense_constant("s", {37, 1, 1}, 3) + dense_constant("t", {1, 37, 1, 1}, 4) +
       dense_constant("dw", {37, 1, 1, 1}, 5) + dense_constant("db", {37}, 6);
  s += R"(func @main(%x: f32[1,16,12,11]) -> (f32[1,8,12,11], f32[1,37,12,11]) {
  %c = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], activation = "relu"} : f32[1,21,12,11]
  %k = call @concat(%c, %x) {axis = 1} : f32[1,37,12,11]
  %m = call @mul(%k, @s) : f32[1,37,12,11]
  %a = call @add(%m, @t) : f32[1,37,12,11]
  %r = call @relu(%a) : f32[1,37,12,11]
  %y = call @conv2d(%r, @w2) : f32[1,8,12,11]
  %d = call @conv2d(%k, @dw, @db) {groups = 37} : f32[1,37,12,11]
  %e = call @add(%d, %r) : f32[1,37,12,11]
  %z = call @clip(%e) {min = -0.25, max = 0.75} : f32[1,37,12,11]
  return %y, %z
}
)";
  std::vector<float> x = random_floats(16 * 12 * 11, 5);
  x[7] = std::numeric_limits<float>::quiet_NaN();  // NaN through the relu and clip lanes
  for (bool channels_last : {true, false})
    for (int threads : {1, 2}) {
      INFO((channels_last ? "channels-last, " : "NCHW, ") << threads << " threads");
      compiler::CompileOptions fused, plain;  // in one layout: the convolutions' sums alike
      fused.channels_last = plain.channels_last = channels_last;
      plain.fuse_epilogues = false;
      const Outputs got = run(compile(s, fused), {x}, threads), want = run(compile(s, plain), {x}, threads);
      CHECK(std::count(got.ops.begin(), got.ops.end(), "mul") == 0);
      CHECK(std::count(got.ops.begin(), got.ops.end(), "add") == 0);
      CHECK(std::count(want.ops.begin(), want.ops.end(), "mul") == 1);
      REQUIRE(got.values.size() == want.values.size());
      for (size_t j = 0; j < want.values.size(); ++j) {
        INFO("output " << j);
        REQUIRE(got.values[j].size() == want.values[j].size());
        size_t differ = 0;
        for (size_t i = 0; i < want.values[j].size(); ++i) {
          const float a = got.values[j][i], b = want.values[j][i];
          if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++differ;
        }
        CHECK(differ == 0);
      }
    }
}

}  // namespace
}  // namespace hexir::testing
