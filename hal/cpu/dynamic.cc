// Bounded dynamic shapes (docs/design-notes.md): nonzero,
// non_max_suppression and compress write their result up to its actual
// extent, zero the rest of the bound, and write the extent (an int64) to
// their last output; compact lays a padded bounded value out row-major.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "kernel_util.h"

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
  // Scratch: the candidates' box indices and the kept ones.
  auto* order = static_cast<int64_t*>(d.workspace);
  int64_t* kept = order + p.boxes;
  int64_t n = 0;
  for (int64_t b = 0; b < p.batches; ++b) {
    const float* bb = boxes + b * p.boxes * 4;
    for (int64_t c = 0; c < p.classes; ++c) {
      const float* sc = scores + (b * p.classes + c) * p.boxes;
      int64_t candidates = 0;
      for (int64_t i = 0; i < p.boxes; ++i)
        if (sc[i] > score_threshold) order[candidates++] = i;
      std::stable_sort(order, order + candidates, [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
      int64_t count = 0;
      for (int64_t k = 0; k < candidates && count < max_out; ++k) {
        const int64_t i = order[k];
        bool keep = true;
        for (int64_t s = 0; s < count && keep; ++s)
          keep = !ops::nms_suppresses(bb + kept[s] * 4, bb + i * 4, p.center_point_box, iou);
        if (!keep) continue;
        if (n == p.rows) return past_bound("non_max_suppression", n + 1, p.rows);
        kept[count++] = i;
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
