// Offset assignment for the arena, independent of the IR: buffers with a
// half-open live range [lower, upper) in instruction indices and a byte size
// go in, offsets come out. Two buffers whose ranges intersect never share
// bytes; every offset is a multiple of the alignment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hexir/base/status.h"

namespace hexir::serializer {

struct PlanBuffer {
  uint64_t size = 0;
  int64_t lower = 0;  // first instruction that writes it
  int64_t upper = 0;  // one past the last instruction that reads it
};

struct BufferPlan {
  std::vector<uint64_t> offsets;  // one per buffer, in input order
  uint64_t size = 0;              // arena bytes, a multiple of the alignment
  std::string heuristic;          // which placement produced it
};

inline bool live_ranges_intersect(const PlanBuffer& a, const PlanBuffer& b) {
  return a.lower < b.upper && b.lower < a.upper;
}

// Largest sum of sizes live at one instant (ignoring alignment): no plan can
// be smaller. Zero for no buffers.
uint64_t live_lower_bound(std::span<const PlanBuffer> buffers);

// The baseline: buffers laid end to end in input order, nothing reused.
// `alignment` must be a power of two.
Result<BufferPlan> plan_naive(std::span<const PlanBuffer> buffers, uint64_t alignment);

// Largest buffer first; each goes into the smallest gap left by the
// already-placed buffers that are live at the same time (best fit), or above
// them all when no gap fits.
Result<BufferPlan> plan_greedy_by_size(std::span<const PlanBuffer> buffers, uint64_t alignment);

// Checks a plan independently of how it was made: alignment, and no two
// buffers live at the same time share a byte. Returns the first conflict.
Status check_buffer_plan(std::span<const PlanBuffer> buffers, const BufferPlan& plan, uint64_t alignment);

}  // namespace hexir::serializer
