// f16 and bf16 operands through the f32 kernels (widen.h, ops/widen.h).
//
// The copies are whole operands in the planned workspace (not per-block
// tiles): every f32 kernel, whatever its access pattern (broadcast, windows,
// GEMM panels, reductions across rows), then runs unchanged, with f32
// accumulation, and its results are rounded to half once.
#include "widen.h"

#include <algorithm>
#include <vector>

#include "hexir/base/half.h"
#include "hexir/ops/widen.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

using ops::WidenOperand;
using ops::WidenPlan;

// Conversions run in ranges of at least this many elements per thread.
constexpr int64_t kMinConvertRange = 1 << 15;

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// bf16 is f32's top half: widening is a shift, narrowing rounds to nearest even.
void bf16_to_floats(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
}
void floats_to_bf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bfloat16_bits(in[i]);
}

void f16_to_floats_portable(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = half_bits_to_float(in[i]);
}
void floats_to_f16_portable(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_half_bits(in[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
// F16C: 8 lanes, the same bits as half.h (nearest even, overflow to inf, NaN quiet).
[[gnu::target("avx2,f16c")]] void f16_to_floats_f16c(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  f16_to_floats_portable(in + i, out + i, n - i);
}
[[gnu::target("avx2,f16c")]] void floats_to_f16_f16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  floats_to_f16_portable(in + i, out + i, n - i);
}
#endif

void to_floats(DType dtype, const uint16_t* in, float* out, int64_t n) {
  if (dtype == DType::kBF16) return bf16_to_floats(in, out, n);
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa_avx2()) return f16_to_floats_f16c(in, out, n);
#endif
  f16_to_floats_portable(in, out, n);
}

void to_halves(DType dtype, const float* in, uint16_t* out, int64_t n) {
  if (dtype == DType::kBF16) return floats_to_bf16(in, out, n);
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa_avx2()) return floats_to_f16_f16c(in, out, n);
#endif
  floats_to_f16_portable(in, out, n);
}

const WidenPlan& widen_plan(const Dispatch& d) { return *static_cast<const WidenPlan*>(d.plan); }

uint32_t prepared_replaces(KernelFn f32_kernel) {
  const KernelPrepare* prepare = find_cpu_prepare(f32_kernel);
  return prepare ? prepare->replaces : 0;
}

// A flat elementwise map (a unary map, or a binary one whose operands are
// the result's size or one element: BinaryPlan modes 0-2): converted tile by
// tile on the stack, so the f32 copies stay in L1 and cost no memory traffic.
// The f32 kernel runs on each tile with its plan's n cut to the tile.
constexpr int64_t kTile = 1024;

bool flat_map(const WidenPlan& w) {
  if (w.map_arity == 1) return static_cast<const ops::UnaryPlan*>(ops::widen_inner_plan(w))->rank == 0;
  if (w.map_arity == 2) return static_cast<const ops::BinaryPlan*>(ops::widen_inner_plan(w))->mode <= 2;
  return false;
}

void run_tiles(KernelFn f32_kernel, const Dispatch& d, const WidenPlan& w, int64_t begin, int64_t end) {
  const WidenOperand& result = w.operands[w.map_arity];
  const auto out_dtype = static_cast<DType>(result.dtype);
  const size_t out_size = dtype_size(out_dtype);  // half, or a comparison's bool
  alignas(64) float tiles[3][kTile];
  // The plan of one tile: the f32 plan with its element count cut.
  ops::UnaryPlan unary{};
  ops::BinaryPlan binary{};
  if (w.map_arity == 1) unary = *static_cast<const ops::UnaryPlan*>(ops::widen_inner_plan(w));
  else binary = *static_cast<const ops::BinaryPlan*>(ops::widen_inner_plan(w));
  void* operands[3];
  Dispatch tile = d;
  tile.plan = w.map_arity == 1 ? static_cast<const void*>(&unary) : static_cast<const void*>(&binary);
  tile.operands = operands;
  tile.workspace = nullptr;
  tile.workspace_size = 0;
  for (int64_t i = begin; i < end; i += kTile) {
    const int64_t n = std::min(kTile, end - i);
    for (int k = 0; k < w.map_arity; ++k) {
      // Binary modes 1 and 2: operand b (mode 1) or a (mode 2) is one element, read whole.
      const bool single = w.map_arity == 2 && binary.mode == (k == 0 ? 2 : 1);
      const auto* in = static_cast<const uint16_t*>(d.operands[k]) + (single ? 0 : i);
      to_floats(static_cast<DType>(w.operands[k].dtype), in, tiles[k], single ? 1 : n);
      operands[k] = tiles[k];
    }
    uint8_t* out = static_cast<uint8_t*>(d.operands[w.map_arity]) + static_cast<size_t>(i) * out_size;
    operands[w.map_arity] = result.staged ? static_cast<void*>(tiles[2]) : static_cast<void*>(out);
    unary.n = binary.n = n;
    (void)f32_kernel(KernelContext{}, tile);  // the f32 maps never fail
    if (result.staged) to_halves(out_dtype, tiles[2], reinterpret_cast<uint16_t*>(out), n);
  }
}

}  // namespace

void halves_to_floats(const KernelContext& context, DType dtype, const uint16_t* in, float* out, int64_t n) {
  parallel_ranges(context, n, kMinConvertRange,
                  [&](int64_t b, int64_t e) { to_floats(dtype, in + b, out + b, e - b); });
}

void floats_to_halves(const KernelContext& context, DType dtype, const float* in, uint16_t* out, int64_t n) {
  parallel_ranges(context, n, kMinConvertRange,
                  [&](int64_t b, int64_t e) { to_halves(dtype, in + b, out + b, e - b); });
}

Status run_widened(KernelFn f32_kernel, const KernelContext& context, const Dispatch& d) {
  const WidenPlan& w = widen_plan(d);
  if (flat_map(w)) {
    const int64_t n = w.operands[w.map_arity].count;
    parallel_ranges(context, n, kMinConvertRange,
                    [&](int64_t begin, int64_t end) { run_tiles(f32_kernel, d, w, begin, end); });
    return ok_status();
  }
  const uint32_t count = d.input_count + d.output_count;
  auto* workspace = static_cast<uint8_t*>(d.workspace);
  // A prepared kernel no longer reads the inputs its prepare step replaced (the weights).
  const uint32_t replaced = d.prepared ? prepared_replaces(f32_kernel) : 0;
  void* operands[ops::kMaxWidenOperands];
  for (uint32_t i = 0; i < count; ++i) {
    const WidenOperand& o = w.operands[i];
    operands[i] = d.operands[i];
    if (!o.staged) continue;
    auto* staged = reinterpret_cast<float*>(workspace + o.offset);
    if (i < d.input_count && !((replaced >> i) & 1u))
      halves_to_floats(context, static_cast<DType>(o.dtype), static_cast<const uint16_t*>(d.operands[i]), staged,
                       o.count);
    if (i >= d.input_count || !((replaced >> i) & 1u)) operands[i] = staged;
  }
  Dispatch inner = d;
  inner.plan = ops::widen_inner_plan(w);
  inner.operands = operands;
  inner.workspace = workspace + w.staging_bytes;
  inner.workspace_size = w.inner_workspace;
  HEXIR_RETURN_IF_ERROR(f32_kernel(context, inner));
  for (uint32_t i = d.input_count; i < count; ++i) {
    const WidenOperand& o = w.operands[i];
    if (o.staged)
      floats_to_halves(context, static_cast<DType>(o.dtype), static_cast<const float*>(operands[i]),
                       static_cast<uint16_t*>(d.operands[i]), o.count);
  }
  return ok_status();
}

uint64_t widened_prepared_bytes(KernelFn f32_kernel, const Dispatch& constants) {
  const KernelPrepare* prepare = find_cpu_prepare(f32_kernel);
  if (prepare == nullptr) return 0;
  Dispatch inner = constants;  // the bytes depend on the plan and which operands are constants
  inner.plan = ops::widen_inner_plan(widen_plan(constants));
  return prepare->bytes(inner);
}

// The f32 kernel's key on the f32 plan (the halves' conversion reads only
// the constant, whose dtype and element count the f32 plan's geometry fixes).
uint32_t widened_prepare_key(KernelFn f32_kernel, const Dispatch& constants, uint64_t* words) {
  const KernelPrepare* prepare = find_cpu_prepare(f32_kernel);
  Dispatch inner = constants;
  inner.plan = ops::widen_inner_plan(widen_plan(constants));
  return prepare->key(inner, words);
}

void widened_prepare(KernelFn f32_kernel, const Dispatch& constants, void* out) {
  const KernelPrepare* prepare = find_cpu_prepare(f32_kernel);
  const WidenPlan& w = widen_plan(constants);
  // Once per program: the constant half operands as f32 for the f32 packing
  // (a temporary; the packed panels it leaves are f32).
  std::vector<std::vector<float>> copies(constants.input_count);
  void* operands[ops::kMaxWidenOperands];
  const uint32_t count = constants.input_count + constants.output_count;
  const KernelContext serial{};
  for (uint32_t i = 0; i < count; ++i) {
    operands[i] = constants.operands[i];
    const WidenOperand& o = w.operands[i];
    if (i >= constants.input_count || !o.staged || constants.operands[i] == nullptr) continue;
    copies[i].resize(static_cast<size_t>(o.count));
    halves_to_floats(serial, static_cast<DType>(o.dtype), static_cast<const uint16_t*>(constants.operands[i]),
                     copies[i].data(), o.count);
    operands[i] = copies[i].data();
  }
  Dispatch inner = constants;
  inner.plan = ops::widen_inner_plan(w);
  inner.operands = operands;
  prepare->fill(inner, out);
}

}  // namespace hexir::hal::cpu::internal
