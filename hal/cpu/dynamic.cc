// Bounded dynamic shapes (docs/design-notes.md): nonzero,
// non_max_suppression and compress write their result up to its actual
// extent, zero the rest of the bound, and write the extent (an int64) to
// their last output; compact lays a padded bounded value out row-major.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernel_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HEXIR_NMS_X86 1
#endif

namespace hexir::hal::cpu::internal {
namespace {

// Whether an element is non-zero: any bit set, but a float's sign bit alone
// (-0.0) is zero.
bool element_nonzero(const uint8_t* e, int64_t size, bool float_sign) {
  for (int64_t b = 0; b < size; ++b) {
    uint8_t byte = e[b];
    if (float_sign && b == size - 1) byte &= 0x7f;  // little-endian: the sign is in the last byte
    if (byte) return true;
  }
  return false;
}

// A count past a bound given at compile time (--dim-bound) fails the invoke.
Status past_bound(const char* op, int64_t count, int64_t bound) {
  return invalid_argument(std::string(op) + ": " + std::to_string(count) + " result rows exceed the bound " +
                          std::to_string(bound) + " the module was compiled with (hexir-compile --dim-bound)");
}

// The boxes a class has kept so far, one array per field, so that a
// candidate is tested against 16 (or 8) of them at once.
struct KeptBoxes {
  float *x0, *y0, *x1, *y1, *area;
  void set(int64_t s, const ops::NmsBox& b) const { x0[s] = b.x0, y0[s] = b.y0, x1[s] = b.x1, y1[s] = b.y1, area[s] = b.area; }
};

// Whether any of the first `count` kept boxes suppresses b: ops::nms_overlaps
// (kept, b) lane by lane, its comparisons kept as written (max/min as its
// ternaries, "not <=" true for NaN), so the same answer.
bool any_overlaps_scalar(const KeptBoxes& k, int64_t from, int64_t count, const ops::NmsBox& b, float threshold) {
  for (int64_t s = from; s < count; ++s)
    if (ops::nms_overlaps(ops::NmsBox{k.x0[s], k.y0[s], k.x1[s], k.y1[s], k.area[s]}, b, threshold)) return true;
  return false;
}

#ifdef HEXIR_NMS_X86
[[gnu::target("avx512f")]] bool any_overlaps_avx512(const KeptBoxes& k, int64_t count, const ops::NmsBox& b,
                                                    float threshold) {
  const __m512 bx0 = _mm512_set1_ps(b.x0), by0 = _mm512_set1_ps(b.y0), bx1 = _mm512_set1_ps(b.x1),
               by1 = _mm512_set1_ps(b.y1), barea = _mm512_set1_ps(b.area), zero = _mm512_setzero_ps(),
               t = _mm512_set1_ps(threshold);
  for (int64_t s = 0; s < count; s += 16) {
    const __mmask16 lanes = count - s >= 16 ? __mmask16(0xffff) : __mmask16((1u << (count - s)) - 1);
    // max_ps(a, b) is (a > b ? a : b) and min_ps(a, b) is (a < b ? a : b), NaN included.
    const __m512 ix0 = _mm512_max_ps(_mm512_maskz_loadu_ps(lanes, k.x0 + s), bx0);
    const __m512 ix1 = _mm512_min_ps(_mm512_maskz_loadu_ps(lanes, k.x1 + s), bx1);
    const __m512 iy0 = _mm512_max_ps(_mm512_maskz_loadu_ps(lanes, k.y0 + s), by0);
    const __m512 iy1 = _mm512_min_ps(_mm512_maskz_loadu_ps(lanes, k.y1 + s), by1);
    const __m512 area = _mm512_maskz_loadu_ps(lanes, k.area + s);
    const __m512 inter = _mm512_mul_ps(_mm512_sub_ps(ix1, ix0), _mm512_sub_ps(iy1, iy0));
    const __m512 uni = _mm512_sub_ps(_mm512_add_ps(area, barea), inter);
    __mmask16 m = _mm512_mask_cmp_ps_mask(lanes, ix1, ix0, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, iy1, iy0, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, inter, zero, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, area, zero, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, barea, zero, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, uni, zero, _CMP_NLE_UQ);
    m = _mm512_mask_cmp_ps_mask(m, _mm512_div_ps(inter, uni), t, _CMP_GT_OQ);
    if (m) return true;
  }
  return false;
}

[[gnu::target("avx2")]] bool any_overlaps_avx2(const KeptBoxes& k, int64_t count, const ops::NmsBox& b,
                                               float threshold) {
  const __m256 bx0 = _mm256_set1_ps(b.x0), by0 = _mm256_set1_ps(b.y0), bx1 = _mm256_set1_ps(b.x1),
               by1 = _mm256_set1_ps(b.y1), barea = _mm256_set1_ps(b.area), zero = _mm256_setzero_ps(),
               t = _mm256_set1_ps(threshold);
  int64_t s = 0;
  for (; s + 8 <= count; s += 8) {
    const __m256 ix0 = _mm256_max_ps(_mm256_loadu_ps(k.x0 + s), bx0);
    const __m256 ix1 = _mm256_min_ps(_mm256_loadu_ps(k.x1 + s), bx1);
    const __m256 iy0 = _mm256_max_ps(_mm256_loadu_ps(k.y0 + s), by0);
    const __m256 iy1 = _mm256_min_ps(_mm256_loadu_ps(k.y1 + s), by1);
    const __m256 area = _mm256_loadu_ps(k.area + s);
    const __m256 inter = _mm256_mul_ps(_mm256_sub_ps(ix1, ix0), _mm256_sub_ps(iy1, iy0));
    const __m256 uni = _mm256_sub_ps(_mm256_add_ps(area, barea), inter);
    __m256 m = _mm256_and_ps(_mm256_cmp_ps(ix1, ix0, _CMP_NLE_UQ), _mm256_cmp_ps(iy1, iy0, _CMP_NLE_UQ));
    m = _mm256_and_ps(m, _mm256_cmp_ps(inter, zero, _CMP_NLE_UQ));
    m = _mm256_and_ps(m, _mm256_cmp_ps(area, zero, _CMP_NLE_UQ));
    m = _mm256_and_ps(m, _mm256_cmp_ps(barea, zero, _CMP_NLE_UQ));
    m = _mm256_and_ps(m, _mm256_cmp_ps(uni, zero, _CMP_NLE_UQ));
    m = _mm256_and_ps(m, _mm256_cmp_ps(_mm256_div_ps(inter, uni), t, _CMP_GT_OQ));
    if (_mm256_movemask_ps(m)) return true;
  }
  return any_overlaps_scalar(k, s, count, b, threshold);
}
#endif

using AnyOverlaps = bool (*)(const KeptBoxes&, int64_t, const ops::NmsBox&, float);
AnyOverlaps any_overlaps_path() {
#ifdef HEXIR_NMS_X86
  if (isa_avx512()) return any_overlaps_avx512;
  if (isa_avx2()) return any_overlaps_avx2;
#endif
  return [](const KeptBoxes& k, int64_t count, const ops::NmsBox& b, float threshold) {
    return any_overlaps_scalar(k, 0, count, b, threshold);
  };
}

}  // namespace

Status nonzero(const KernelContext&, const Dispatch& d) {
  const ops::NonZeroPlan& p = plan_of<ops::NonZeroPlan>(d);
  const uint8_t* x = input<uint8_t>(d, 0);
  int64_t* out = output<int64_t>(d, 0);
  int64_t index[ops::kMaxRank] = {};
  int64_t n = 0;
  for (int64_t i = 0; i < p.count; ++i) {
    if (element_nonzero(x + i * p.element_size, p.element_size, p.float_sign != 0)) {
      if (n == p.bound) return past_bound("nonzero", n + 1, p.bound);
      for (int64_t r = 0; r < p.rank; ++r) out[r * p.bound + n] = index[r];
      ++n;
    }
    for (int64_t r = p.rank; r-- > 0;) {  // the next row-major coordinate
      if (++index[r] < p.dims[r]) break;
      index[r] = 0;
    }
  }
  for (int64_t r = 0; r < p.rank; ++r) std::fill(out + r * p.bound + n, out + (r + 1) * p.bound, int64_t{0});
  *output<int64_t>(d, 1) = n;
  return ok_status();
}

Status non_max_suppression(const KernelContext&, const Dispatch& d) {
  const ops::NmsPlan& p = plan_of<ops::NmsPlan>(d);
  const float* boxes = input(d, 0);
  const float* scores = input(d, 1);
  const int64_t max_out = std::clamp<int64_t>(*input<int64_t>(d, 2), 0, p.per_class);
  const float iou = *input(d, 3);
  const float score_threshold = *input(d, 4);
  int64_t* out = output<int64_t>(d, 0);
  // Scratch: the candidates' box indices, every box's corners and area once
  // per batch (the IoU test reads them), and the kept boxes' in order.
  auto* order = static_cast<int64_t*>(d.workspace);
  auto* corners = reinterpret_cast<ops::NmsBox*>(order + p.boxes);
  auto* kept_fields = reinterpret_cast<float*>(corners + p.boxes);
  const KeptBoxes kept{kept_fields, kept_fields + p.boxes, kept_fields + 2 * p.boxes, kept_fields + 3 * p.boxes,
                       kept_fields + 4 * p.boxes};
  const AnyOverlaps any_overlaps = any_overlaps_path();
  int64_t n = 0;
  for (int64_t b = 0; b < p.batches; ++b) {
    const float* bb = boxes + b * p.boxes * 4;
    for (int64_t i = 0; i < p.boxes; ++i) corners[i] = ops::nms_box(bb + i * 4, p.center_point_box);
    for (int64_t c = 0; c < p.classes; ++c) {
      const float* sc = scores + (b * p.classes + c) * p.boxes;
      int64_t candidates = 0;
      for (int64_t i = 0; i < p.boxes; ++i)
        if (sc[i] > score_threshold) order[candidates++] = i;
      std::stable_sort(order, order + candidates, [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      int64_t count = 0;
      for (int64_t k = 0; k < candidates && count < max_out; ++k) {
        const int64_t i = order[k];
        if (any_overlaps(kept, count, corners[i], iou)) continue;
        if (n == p.rows) return past_bound("non_max_suppression", n + 1, p.rows);
        kept.set(count++, corners[i]);
        out[n * 3] = b, out[n * 3 + 1] = c, out[n * 3 + 2] = i;
        ++n;
      }
    }
  }
  std::fill(out + n * 3, out + p.rows * 3, int64_t{0});
  *output<int64_t>(d, 1) = n;
  return ok_status();
}

Status compress(const KernelContext&, const Dispatch& d) {
  const ops::CompressPlan& p = plan_of<ops::CompressPlan>(d);
  const uint8_t* x = input<uint8_t>(d, 0);
  const uint8_t* cond = input<uint8_t>(d, 1);
  uint8_t* y = output<uint8_t>(d, 0);
  const size_t inner = static_cast<size_t>(p.inner_bytes);
  int64_t n = 0;
  for (int64_t j = 0; j < p.cond_len; ++j) n += cond[j] != 0;
  if (n > p.bound) return past_bound("compress", n, p.bound);
  for (int64_t o = 0; o < p.outer; ++o) {
    uint8_t* row = y + o * p.bound * p.inner_bytes;
    for (int64_t j = 0; j < p.cond_len; ++j)
      if (cond[j]) {
        std::memcpy(row, x + (o * p.axis_dim + j) * p.inner_bytes, inner);
        row += inner;
      }
    std::memset(row, 0, static_cast<size_t>((p.bound - n) * p.inner_bytes));
  }
  *output<int64_t>(d, 1) = n;
  return ok_status();
}

Status compact(const KernelContext&, const Dispatch& d) {
  const ops::CompactPlan& p = plan_of<ops::CompactPlan>(d);
  const uint8_t* x = input<uint8_t>(d, 0);
  const int64_t n = std::clamp<int64_t>(*input<int64_t>(d, 1), 0, p.bound);  // an extent is data
  uint8_t* y = output<uint8_t>(d, 0);
  const size_t row = static_cast<size_t>(n * p.inner_bytes);
  for (int64_t o = 0; o < p.outer; ++o)
    std::memmove(y + o * static_cast<int64_t>(row), x + o * p.bound * p.inner_bytes, row);
  // The rest of the bound's bytes are zeros, like the producers' padding.
  const int64_t used = p.outer * static_cast<int64_t>(row);
  std::memset(y + used, 0, static_cast<size_t>(p.outer * p.bound * p.inner_bytes - used));
  return ok_status();
}

// x with rows from n on zeroed along its bounded dim (in place or into y).
Status bound(const KernelContext&, const Dispatch& d) {
  const ops::CompactPlan& p = plan_of<ops::CompactPlan>(d);
  const int64_t n = *input<int64_t>(d, 1);
  if (n < 0 || n > p.bound)
    return invalid_argument("bound: extent " + std::to_string(n) + " is outside [0, " + std::to_string(p.bound) + "]");
  const uint8_t* x = input<uint8_t>(d, 0);
  uint8_t* y = output<uint8_t>(d, 0);
  const int64_t slab = p.bound * p.inner_bytes, used = n * p.inner_bytes;
  for (int64_t o = 0; o < p.outer; ++o) {
    if (x != y) std::memcpy(y + o * slab, x + o * slab, static_cast<size_t>(used));
    std::memset(y + o * slab + used, 0, static_cast<size_t>(slab - used));
  }
  return ok_status();
}

}  // namespace hexir::hal::cpu::internal
