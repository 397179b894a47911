#include "planner_problem.h"

#include <algorithm>

namespace hexir::planner::internal {

Problem make_problem(std::span<const PlanBuffer> buffers, uint64_t alignment) {
  Problem p;
  p.limit = kArenaLimit / alignment;
  std::vector<int64_t> times;
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const PlanBuffer& b = buffers[i];
    if (b.size == 0 || b.upper <= b.lower) continue;
    p.original.push_back(i);
    p.size.push_back(b.size / alignment + (b.size % alignment != 0));
    p.duration.push_back(static_cast<uint64_t>(b.upper) - static_cast<uint64_t>(b.lower));
    times.push_back(b.lower);
    times.push_back(b.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  auto slot = [&](int64_t t) {
    return static_cast<int32_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  for (uint32_t i : p.original) {
    p.lo.push_back(slot(buffers[i].lower));
    p.hi.push_back(slot(buffers[i].upper));
  }
  p.slots = times.empty() ? 0 : static_cast<int32_t>(times.size()) - 1;
  std::vector<uint64_t> profile = live_profile(p);
  for (uint64_t live : profile) p.lower_bound = std::max(p.lower_bound, live);
  return p;
}

std::vector<uint64_t> live_profile(const Problem& p) {
  // Exact in 128 bits (a few huge buffers can sum past 2^64), saturated to 64.
  std::vector<unsigned __int128> starts(static_cast<size_t>(p.slots) + 1, 0), ends(starts.size(), 0);
  for (size_t b = 0; b < p.count(); ++b) {
    starts[p.lo[b]] += p.size[b];
    ends[p.hi[b]] += p.size[b];
  }
  std::vector<uint64_t> profile(static_cast<size_t>(p.slots), 0);
  unsigned __int128 live = 0;
  for (size_t t = 0; t < profile.size(); ++t) {
    live = live + starts[t] - ends[t];
    profile[t] = live > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(live);
  }
  return profile;
}

uint64_t peak_of(const Problem& p, const std::vector<uint64_t>& offsets) {
  uint64_t peak = 0;
  for (size_t b = 0; b < p.count(); ++b) peak = std::max(peak, offsets[b] + p.size[b]);
  return peak;
}

}  // namespace hexir::planner::internal
