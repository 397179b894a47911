// Bounded dynamic shapes (docs/design-notes.md): nonzero,
// non_max_suppression and compress in one thread each (their output order is
// a running count), zeroing their result past the extent and writing the
// extent; compact moves the rows of a padded bounded value in parallel.
#include "common.cuh"

using hexir::hal::cuda::BoundParams;
using hexir::hal::cuda::CompactParams;
using hexir::hal::cuda::CompressParams;
using hexir::hal::cuda::NmsParams;
using hexir::hal::cuda::NonZeroParams;

extern "C" __global__ void hexir_nonzero(NonZeroParams p) {
  const hexir::ops::NonZeroPlan& q = p.plan;
  const uint8_t* x = static_cast<const uint8_t*>(p.x);
  int64_t index[hexir::ops::kMaxRank] = {};
  int64_t n = 0;
  for (int64_t i = 0; i < q.count; ++i) {
    bool nonzero = false;
    for (int64_t b = 0; b < q.element_size; ++b) {
      uint8_t byte = x[i * q.element_size + b];
      if (q.float_sign && b == q.element_size - 1) byte &= 0x7f;  // -0.0 is zero
      nonzero = nonzero || byte != 0;
    }
    if (nonzero && n < q.bound) {  // past a given bound: clamped (the cpu fails the invoke)
      for (int64_t r = 0; r < q.rank; ++r) p.out[r * q.bound + n] = index[r];
      ++n;
    }
    for (int64_t r = q.rank - 1; r >= 0; --r) {
      if (++index[r] < q.dims[r]) break;
      index[r] = 0;
    }
  }
  for (int64_t r = 0; r < q.rank; ++r)
    for (int64_t j = n; j < q.bound; ++j) p.out[r * q.bound + j] = 0;
  *p.count = n;
}

// Per batch and class: the best remaining candidate each step (descending
// score, ties to the lower index: the cpu kernel's stable sort), kept unless
// a kept box overlaps it; a taken candidate's score is not re-read, so
// `taken` marks are the kept and suppressed boxes both, in the scratch.
extern "C" __global__ void hexir_nms(NmsParams p) {
  const hexir::ops::NmsPlan& q = p.plan;
  int64_t max_out = *p.max_output;
  max_out = max_out < 0 ? 0 : (max_out > q.per_class ? q.per_class : max_out);
  const float iou = *p.iou_threshold, threshold = *p.score_threshold;
  int64_t* kept = p.scratch;
  int64_t* taken = p.scratch + q.boxes;  // 0/1 per box
  int64_t n = 0;
  for (int64_t b = 0; b < q.batches; ++b) {
    const float* bb = p.boxes + b * q.boxes * 4;
    for (int64_t c = 0; c < q.classes; ++c) {
      const float* sc = p.scores + (b * q.classes + c) * q.boxes;
      for (int64_t i = 0; i < q.boxes; ++i) taken[i] = !(sc[i] > threshold);
      int64_t count = 0;
      while (count < max_out && n < q.rows) {  // past a given bound: clamped
        int64_t best = -1;
        for (int64_t i = 0; i < q.boxes; ++i)
          if (!taken[i] && (best < 0 || sc[i] > sc[best])) best = i;
        if (best < 0) break;
        taken[best] = 1;
        bool keep = true;
        for (int64_t s = 0; s < count && keep; ++s)
          keep = !hexir::ops::nms_suppresses(bb + kept[s] * 4, bb + best * 4, q.center_point_box, iou);
        if (!keep) continue;
        kept[count++] = best;
        p.out[n * 3] = b, p.out[n * 3 + 1] = c, p.out[n * 3 + 2] = best;
        ++n;
      }
    }
  }
  for (int64_t j = n * 3; j < q.rows * 3; ++j) p.out[j] = 0;
  *p.count = n;
}

extern "C" __global__ void hexir_compress(CompressParams p) {
  const hexir::ops::CompressPlan& q = p.plan;
  const uint8_t* x = static_cast<const uint8_t*>(p.x);
  uint8_t* y = static_cast<uint8_t*>(p.out);
  int64_t n = 0;
  for (int64_t j = 0; j < q.cond_len; ++j) n += p.cond[j] != 0;
  n = n < q.bound ? n : q.bound;  // past a given bound: clamped (the cpu fails the invoke)
  for (int64_t o = 0; o < q.outer; ++o) {
    uint8_t* row = y + o * q.bound * q.inner_bytes;
    for (int64_t j = 0, taken = 0; j < q.cond_len && taken < n; ++j) {
      if (!p.cond[j]) continue;
      ++taken;
      const uint8_t* src = x + (o * q.axis_dim + j) * q.inner_bytes;
      for (int64_t k = 0; k < q.inner_bytes; ++k) row[k] = src[k];
      row += q.inner_bytes;
    }
    for (int64_t k = 0; k < (q.bound - n) * q.inner_bytes; ++k) row[k] = 0;
  }
  *p.count = n;
}

// One thread per byte of the bound: the compacted rows (n * inner_bytes
// each) first, zeros after them.
extern "C" __global__ void hexir_compact(CompactParams p) {
  const hexir::ops::CompactPlan& q = p.plan;
  int64_t n = *p.count;
  n = n < 0 ? 0 : (n > q.bound ? q.bound : n);  // an extent is data
  const int64_t row = n * q.inner_bytes;
  const uint8_t* x = static_cast<const uint8_t*>(p.x);
  uint8_t* y = static_cast<uint8_t*>(p.out);
  const int64_t stride = hexir_kernels::global_stride();
  const int64_t used = q.outer * row;
  for (int64_t i = hexir_kernels::global_index(); i < q.outer * q.bound * q.inner_bytes; i += stride)
    y[i] = i < used ? x[i / row * q.bound * q.inner_bytes + i % row] : 0;
}

// One thread per byte of the bound: x's byte below the extent, else zero.
extern "C" __global__ void hexir_bound(BoundParams p) {
  const hexir::ops::CompactPlan& q = p.plan;
  int64_t n = *p.n;
  n = n < 0 ? 0 : (n > q.bound ? q.bound : n);  // the cpu fails the invoke; CUDA clamps
  const int64_t slab = q.bound * q.inner_bytes, used = n * q.inner_bytes;
  const uint8_t* x = static_cast<const uint8_t*>(p.x);
  uint8_t* y = static_cast<uint8_t*>(p.out);
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < q.outer * slab; i += stride) y[i] = i % slab < used ? x[i] : 0;
}
