#include "arena_planner.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace hexir::serializer {
namespace {

// Offsets and sizes stay below 2^62 so sums of two never wrap.
constexpr uint64_t kArenaLimit = uint64_t{1} << 62;

bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

Result<uint64_t> aligned(uint64_t value, uint64_t alignment) {
  if (value > kArenaLimit) return resource_exhausted("arena plan exceeds 2^62 bytes");
  return (value + alignment - 1) & ~(alignment - 1);
}

Status check_inputs(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  if (!is_power_of_two(alignment))
    return invalid_argument("arena alignment " + std::to_string(alignment) + " is not a power of two");
  for (const PlanBuffer& b : buffers) {
    if (b.size > kArenaLimit)
      return resource_exhausted("buffer of " + std::to_string(b.size) + " bytes is too large");
    if (b.upper < b.lower) return invalid_argument("buffer live range ends before it starts");
  }
  return ok_status();
}

Result<uint64_t> plan_extent(std::span<const PlanBuffer> buffers, const std::vector<uint64_t>& offsets,
                             uint64_t alignment) {
  uint64_t end = 0;
  for (size_t i = 0; i < buffers.size(); ++i) end = std::max(end, offsets[i] + buffers[i].size);
  return aligned(end, alignment);
}

}  // namespace

uint64_t live_lower_bound(std::span<const PlanBuffer> buffers) {
  // Sweep: +size at lower, -size at upper; at equal times the ends come
  // first because ranges are half-open.
  std::vector<std::pair<std::pair<int64_t, int>, uint64_t>> sweep;  // ((time, 0 end | 1 start), size)
  sweep.reserve(buffers.size() * 2);
  for (const PlanBuffer& b : buffers) {
    if (b.size == 0 || b.upper <= b.lower) continue;
    sweep.push_back({{b.lower, 1}, b.size});
    sweep.push_back({{b.upper, 0}, b.size});
  }
  std::sort(sweep.begin(), sweep.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t live = 0, peak = 0;
  for (const auto& [key, size] : sweep) {
    if (key.second == 1) {
      live += size;
      peak = std::max(peak, live);
    } else {
      live -= size;
    }
  }
  return peak;
}

Result<BufferPlan> plan_naive(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  HEXIR_RETURN_IF_ERROR(check_inputs(buffers, alignment));
  BufferPlan plan;
  plan.heuristic = "naive";
  uint64_t next = 0;
  for (const PlanBuffer& b : buffers) {
    plan.offsets.push_back(next);
    HEXIR_ASSIGN_OR_RETURN(next, aligned(next + b.size, alignment));
  }
  plan.size = next;
  return plan;
}

Result<BufferPlan> plan_greedy_by_size(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  HEXIR_RETURN_IF_ERROR(check_inputs(buffers, alignment));
  BufferPlan plan;
  plan.heuristic = "greedy-by-size";
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return buffers[a].lower < buffers[b].lower;
  });

  std::vector<size_t> placed;
  std::vector<size_t> neighbours;
  for (size_t index : order) {
    const PlanBuffer& buffer = buffers[index];
    if (buffer.size == 0 || buffer.upper <= buffer.lower) continue;  // occupies nothing
    neighbours.clear();
    for (size_t other : placed)
      if (live_ranges_intersect(buffer, buffers[other])) neighbours.push_back(other);
    std::sort(neighbours.begin(), neighbours.end(),
              [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    bool found = false;
    uint64_t best_offset = 0, best_gap = 0, covered_end = 0;
    for (size_t other : neighbours) {
      HEXIR_ASSIGN_OR_RETURN(uint64_t gap_start, aligned(covered_end, alignment));
      uint64_t other_offset = plan.offsets[other];
      if (other_offset >= gap_start && other_offset - gap_start >= buffer.size) {
        uint64_t gap = other_offset - gap_start;
        if (!found || gap < best_gap) {
          found = true;
          best_gap = gap;
          best_offset = gap_start;
        }
      }
      covered_end = std::max(covered_end, other_offset + buffers[other].size);
    }
    if (!found) {
      HEXIR_ASSIGN_OR_RETURN(best_offset, aligned(covered_end, alignment));
      if (best_offset + buffer.size > kArenaLimit) return resource_exhausted("arena plan exceeds 2^62 bytes");
    }
    plan.offsets[index] = best_offset;
    placed.push_back(index);
  }
  HEXIR_ASSIGN_OR_RETURN(plan.size, plan_extent(buffers, plan.offsets, alignment));
  return plan;
}

Status check_buffer_plan(std::span<const PlanBuffer> buffers, const BufferPlan& plan, uint64_t alignment) {
  if (plan.offsets.size() != buffers.size())
    return internal_error("plan has " + std::to_string(plan.offsets.size()) + " offsets for " +
                          std::to_string(buffers.size()) + " buffers");
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (alignment && plan.offsets[i] % alignment != 0)
      return internal_error("buffer " + std::to_string(i) + " offset " + std::to_string(plan.offsets[i]) +
                            " is not a multiple of " + std::to_string(alignment));
    if (plan.offsets[i] + buffers[i].size > plan.size)
      return internal_error("buffer " + std::to_string(i) + " ends past the arena size " +
                            std::to_string(plan.size));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const PlanBuffer &a = buffers[i], &b = buffers[j];
      if (a.size == 0 || b.size == 0 || !live_ranges_intersect(a, b)) continue;
      if (plan.offsets[i] < plan.offsets[j] + b.size && plan.offsets[j] < plan.offsets[i] + a.size)
        return internal_error("buffers " + std::to_string(i) + " and " + std::to_string(j) +
                              " are live at the same time and overlap in the arena");
    }
  }
  return ok_status();
}

}  // namespace hexir::serializer
