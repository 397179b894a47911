// The planner's internal view of an offset-assignment problem: only buffers
// that occupy memory (size > 0, non-empty live range), sizes in alignment
// units (an aligned plan of sizes s is exactly a plan of sizes ceil(s / A)
// with offsets multiplied by A), and live ranges on compressed time (the
// distinct lower/upper values, so slot i is the interval between the i-th and
// (i+1)-th of them). Overlap in time and in memory is preserved exactly.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hexir/planner/arena_planner.h"

namespace hexir::planner::internal {

// Offsets and sizes stay below 2^62 bytes so a sum of two never wraps.
constexpr uint64_t kArenaLimit = uint64_t{1} << 62;

struct Problem {
  std::vector<uint64_t> size;      // alignment units, > 0
  std::vector<int32_t> lo, hi;     // compressed slots, lo < hi
  std::vector<uint64_t> duration;  // original upper - lower (exact: the span of two int64 fits 64 unsigned bits)
  std::vector<uint32_t> original;  // index into the caller's buffers
  int32_t slots = 0;               // number of time slots (hi <= slots)
  uint64_t lower_bound = 0;        // max over slots of the live units (saturated)
  uint64_t limit = 0;              // no plan may reach above this many units (2^62 bytes)

  size_t count() const { return size.size(); }
};

// Builds the problem; buffers that occupy nothing are left out (their offset
// is 0). `alignment` is a power of two, every size <= kArenaLimit.
Problem make_problem(std::span<const PlanBuffer> buffers, uint64_t alignment);

// Live units per slot (the profile whose maximum is the lower bound).
std::vector<uint64_t> live_profile(const Problem& problem);

// Max over buffers of offset + size, in units.
uint64_t peak_of(const Problem& problem, const std::vector<uint64_t>& offsets);

// Deterministic work accounting: every search loop adds what it touched;
// when `used` passes `limit` the search stops at the next check.
struct WorkBudget {
  uint64_t limit = 0;
  uint64_t used = 0;
  bool exhausted() const { return used >= limit; }
  uint64_t left() const { return used >= limit ? 0 : limit - used; }
};

// Work units per millisecond of budget: calibrated so that one budget
// millisecond is about one millisecond of search on the reference machine
// (a 2-core x86-64 VM, -O2). Results depend on the budget only through this
// constant, never on the clock.
constexpr uint64_t kWorkPerMs = 1000000;

}  // namespace hexir::planner::internal
