// An offset-plan validator written independently of the planner's own
// check_buffer_plan, shared by the planner tests and the serializer's
// function-plan tests.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "hexir/planner/arena_planner.h"

namespace hexir::planner {

// Independent validator: sort by start, keep the buffers still live, and
// compare each newcomer with every one of them (O(overlapping pairs)). Returns
// an empty string when the plan is valid.
// With `exact_size`, the arena must also be exactly the aligned top of the
// highest buffer (what plan_arena promises; check_buffer_plan only needs <=).
inline std::string validate(const std::vector<PlanBuffer>& buffers, const BufferPlan& plan,
                            uint64_t alignment, bool exact_size = true) {
  if (plan.offsets.size() != buffers.size()) return "wrong number of offsets";
  if (alignment && plan.size % alignment != 0) return "arena size not aligned";
  uint64_t top = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (alignment && plan.offsets[i] % alignment != 0) return "offset " + std::to_string(i) + " not aligned";
    if (buffers[i].size == 0 || buffers[i].upper <= buffers[i].lower) continue;
    if (plan.offsets[i] > plan.size || plan.size - plan.offsets[i] < buffers[i].size)
      return "buffer " + std::to_string(i) + " ends past the arena";
    top = std::max(top, plan.offsets[i] + buffers[i].size);
    order.push_back(i);
  }
  if (exact_size && alignment && (top + alignment - 1) / alignment * alignment != plan.size)
    return "arena size " + std::to_string(plan.size) + " is not the aligned top " + std::to_string(top);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].lower < buffers[b].lower; });
  std::vector<size_t> live;
  for (size_t i : order) {
    std::erase_if(live, [&](size_t j) { return buffers[j].upper <= buffers[i].lower; });
    for (size_t j : live) {
      bool apart = plan.offsets[i] + buffers[i].size <= plan.offsets[j] ||
                   plan.offsets[j] + buffers[j].size <= plan.offsets[i];
      if (!apart) return "buffers " + std::to_string(j) + " and " + std::to_string(i) + " overlap";
    }
    live.push_back(i);
  }
  return "";
}

}  // namespace hexir::planner
