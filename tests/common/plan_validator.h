// An offset-plan validator written independently of the planner's own
// check_buffer_plan, shared by the planner tests and the serializer's
// function-plan tests.
#pragma once

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <queue>
#include <string>
#include <vector>

#include "hexir/planner/arena_planner.h"

namespace hexir::planner {

// Independent validator: sort by start and keep the buffers still live in an
// ordered map by offset; as the live ones never overlap (the first overlap
// ends the check), a newcomer is compared with its two neighbours in that map
// only (O(n log n): the 30,000-row hostile case has millions of live pairs).
// Returns an empty string when the plan is valid.
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
  using Expiry = std::pair<int64_t, size_t>;  // (upper, buffer)
  std::priority_queue<Expiry, std::vector<Expiry>, std::greater<>> expiries;
  std::map<uint64_t, size_t> live;  // offset -> buffer
  for (size_t i : order) {
    while (!expiries.empty() && expiries.top().first <= buffers[i].lower) {
      live.erase(plan.offsets[expiries.top().second]);
      expiries.pop();
    }
    const uint64_t begin = plan.offsets[i], end = begin + buffers[i].size;
    auto next = live.lower_bound(begin);
    if (next != live.end() && next->first < end)
      return "buffers " + std::to_string(next->second) + " and " + std::to_string(i) + " overlap";
    if (next != live.begin()) {
      const size_t j = std::prev(next)->second;
      if (plan.offsets[j] + buffers[j].size > begin)
        return "buffers " + std::to_string(j) + " and " + std::to_string(i) + " overlap";
    }
    live.emplace(begin, i);
    expiries.emplace(buffers[i].upper, i);
  }
  return "";
}

}  // namespace hexir::planner
