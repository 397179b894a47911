#include "planner_search.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <numeric>
#include <tuple>

#include "planner_greedy.h"

namespace hexir::planner::internal {
namespace {

constexpr uint64_t kUnplaced = UINT64_MAX;

// The search is exact but exponential; it is only tried on partitions small
// enough for its O(buffers + slots) work per node and its overlap lists.
constexpr size_t kSearchMaxBuffers = 4000;
constexpr size_t kSearchMaxOverlaps = 4'000'000;

// A group of buffers no other buffer meets in time: slots [first, last) that
// no buffer outside the group touches. Planned on its own.
struct Partition {
  std::vector<uint32_t> buffers;
  int32_t first = 0, last = 0;
};

std::vector<Partition> split_at_cut_lines(const Problem& p) {
  std::vector<uint32_t> by_start(p.count());
  std::iota(by_start.begin(), by_start.end(), 0u);
  std::sort(by_start.begin(), by_start.end(),
            [&](uint32_t a, uint32_t b) { return p.lo[a] != p.lo[b] ? p.lo[a] < p.lo[b] : a < b; });
  std::vector<Partition> parts;
  int32_t reach = -1;
  for (uint32_t b : by_start) {
    if (parts.empty() || p.lo[b] >= reach) {
      parts.emplace_back();
      parts.back().first = p.lo[b];
      reach = p.hi[b];
    }
    reach = std::max(reach, p.hi[b]);
    parts.back().buffers.push_back(b);
    parts.back().last = reach;
  }
  return parts;
}

enum class Outcome { kFound, kNotFound, kAborted };

// MiniMalloc's search (Moffitt, ASPLOS 2023), written from the paper's
// description: does a plan with every buffer below `capacity` exist?
//  - canonical placements only: buffers are placed in non-decreasing offset
//    order, each at its lowest offset given those already placed (the top of
//    the placed buffers it meets); any plan can be pushed down into that form;
//  - dominance: a buffer is never placed at or above the top some other
//    unplaced buffer could reach there (that would leave a needless gap);
//  - pruning: in every slot, the unplaced buffers must still fit between the
//    lowest offset any of them can take there and the capacity;
//  - candidate order: lowest offset first, ties by a static preorder, and the
//    search is restarted with other preorders and doubling node limits.
class CanonicalSearch {
 public:
  CanonicalSearch(const Problem& problem, const Partition& part) : p_(problem), part_(part) {
    const size_t m = part.buffers.size();
    if (m > kSearchMaxBuffers) {
      too_big_ = true;
      return;
    }
    slots_ = part.last - part.first;
    size_.resize(m);
    duration_.resize(m);
    lo_.resize(m);
    hi_.resize(m);
    // Sections, as MiniMalloc sweeps them: only the slots just before some
    // buffer ends. Their live sets are the maximal ones, so they carry every
    // per-slot bound that matters, in fewer (at most `m`) places.
    std::vector<int32_t> sections_before(static_cast<size_t>(slots_) + 1, 0);
    std::vector<char> is_section(static_cast<size_t>(slots_), 0);
    for (uint32_t b : part.buffers) is_section[p_.hi[b] - 1 - part.first] = 1;
    for (int32_t t = 0; t < slots_; ++t) sections_before[t + 1] = sections_before[t] + is_section[t];
    for (size_t i = 0; i < m; ++i) {
      uint32_t b = part.buffers[i];
      size_[i] = p_.size[b];
      duration_[i] = p_.duration[b];
      lo_[i] = sections_before[p_.lo[b] - part.first];
      hi_[i] = sections_before[p_.hi[b] - part.first];
    }
    slots_ = sections_before[slots_];
    // Members of each slot and the overlap lists (CSR).
    std::vector<uint32_t> count(static_cast<size_t>(slots_) + 1, 0);
    for (size_t i = 0; i < m; ++i)
      for (int32_t s = lo_[i]; s < hi_[i]; ++s) ++count[s + 1];
    for (int32_t s = 0; s < slots_; ++s) count[s + 1] += count[s];
    slot_start_ = count;
    slot_members_.resize(count[slots_]);
    for (size_t i = 0; i < m; ++i)
      for (int32_t s = lo_[i]; s < hi_[i]; ++s) slot_members_[count[s]++] = static_cast<uint32_t>(i);

    std::vector<uint32_t> order(m);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return lo_[a] != lo_[b] ? lo_[a] < lo_[b] : a < b; });
    std::vector<std::vector<uint32_t>> lists(m);
    std::vector<uint32_t> active;
    size_t pairs = 0;
    for (uint32_t i : order) {
      std::erase_if(active, [&](uint32_t j) { return hi_[j] <= lo_[i]; });
      for (uint32_t j : active) {
        lists[i].push_back(j);
        lists[j].push_back(i);
        if (++pairs > kSearchMaxOverlaps) {
          too_big_ = true;
          return;
        }
      }
      active.push_back(i);
    }
    overlap_start_.assign(m + 1, 0);
    for (size_t i = 0; i < m; ++i) overlap_start_[i + 1] = overlap_start_[i] + lists[i].size();
    overlaps_.reserve(overlap_start_[m]);
    for (size_t i = 0; i < m; ++i) overlaps_.insert(overlaps_.end(), lists[i].begin(), lists[i].end());

    // Static keys for the preorders.
    live_.assign(static_cast<size_t>(slots_), 0);
    for (size_t i = 0; i < m; ++i)
      for (int32_t s = lo_[i]; s < hi_[i]; ++s) live_[s] += size_[i];
    total_key_.resize(m);
  }

  bool too_big() const { return too_big_; }
  static constexpr int kPreorders = 3;

  // Searches with preorder `which` (0..kPreorders-1) at `capacity`, visiting at
  // most `node_limit` nodes. On kFound, offsets() holds the plan (partition
  // order, units).
  Outcome run(uint64_t capacity, int which, uint64_t node_limit, WorkBudget& budget) {
    const size_t m = size_.size();
    capacity_ = capacity;
    budget_ = &budget;
    nodes_left_ = node_limit;
    rank_.assign(m, 0);
    std::vector<uint32_t> pre(m);
    std::iota(pre.begin(), pre.end(), 0u);
    which_ = which;
    for (size_t i = 0; i < m; ++i) {
      uint64_t total = 0;
      for (int32_t s = lo_[i]; s < hi_[i]; ++s) total = std::max(total, live_[s]);
      total_key_[i] = total;
    }
    preorder(pre);
    for (uint32_t r = 0; r < m; ++r) rank_[pre[r]] = r;

    offset_.assign(m, kUnplaced);
    min_offset_.assign(m, 0);
    floor_.assign(static_cast<size_t>(slots_), 0);
    witness_.resize(static_cast<size_t>(slots_));
    for (int32_t s = 0; s < slots_; ++s) witness_[s] = slot_members_[slot_start_[s]];  // any member will do
    total_.assign(static_cast<size_t>(slots_), 0);
    for (size_t i = 0; i < m; ++i)
      for (int32_t s = lo_[i]; s < hi_[i]; ++s) total_[s] += size_[i];
    for (int32_t s = 0; s < slots_; ++s)
      if (total_[s] > capacity_) return Outcome::kNotFound;
    cuts_.assign(static_cast<size_t>(std::max(slots_ - 1, 0)), 0);
    for (size_t i = 0; i < m; ++i)
      for (int32_t s = lo_[i]; s + 1 < hi_[i]; ++s) ++cuts_[s];
    solution_.assign(m, 0);
    unplaced_ = pre;  // the current (sub)partition, roughly in (min offset, rank) order
    return search(0, 0, 0, slots_);
  }

  const std::vector<uint64_t>& offsets() const { return solution_; }

 private:
  // Sorts `buffers` by the current preorder (first = placed first on ties),
  // using total_key_ for T.
  void preorder(std::vector<uint32_t>& buffers) const {
    using U128 = unsigned __int128;
    // MiniMalloc's preorders, by their letters: W width (lifetime), A area
    // (size x lifetime), T total (largest live sum over the lifetime).
    auto width = [&](uint32_t i) { return static_cast<U128>(duration_[i]); };
    auto area = [&](uint32_t i) { return static_cast<U128>(size_[i]) * static_cast<U128>(duration_[i]); };
    auto total = [&](uint32_t i) { return static_cast<U128>(total_key_[i]); };
    auto key = [&](uint32_t i) {
      switch (which_) {
        case 0:
          return std::make_tuple(width(i), area(i), total(i));  // WAT
        case 1:
          return std::make_tuple(total(i), area(i), width(i));  // TAW
        default:
          return std::make_tuple(total(i), width(i), area(i));  // TWA
      }
    };
    std::sort(buffers.begin(), buffers.end(), [&](uint32_t a, uint32_t b) {
      auto ka = key(a), kb = key(b);
      if (ka != kb) return ka > kb;
      return a < b;
    });
  }

  struct OffsetChange {
    uint32_t buffer;
    uint64_t min_offset;
  };
  struct FloorChange {
    int32_t slot;
    uint64_t floor;
  };

  // Places the buffers of unplaced_ (a group no other unplaced buffer meets,
  // within slots [first, last)).
  Outcome search(uint64_t last_offset, uint32_t last_rank, int32_t first, int32_t last) {
    if (nodes_left_ == 0 || budget_->exhausted()) return Outcome::kAborted;
    --nodes_left_;
    // Candidates: the unplaced buffers by (lowest offset, rank).
    std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> candidates;
    candidates.reserve(unplaced_.size());
    for (uint32_t i : unplaced_)
      if (offset_[i] == kUnplaced) candidates.push_back({min_offset_[i], rank_[i], i});
    if (candidates.empty()) return leaf();
    std::sort(candidates.begin(), candidates.end());
    budget_->used += 8 + candidates.size() * (4 + static_cast<uint64_t>(std::bit_width(candidates.size())));
    uint64_t min_height = UINT64_MAX;
    for (const auto& [o, r, i] : candidates) min_height = std::min(min_height, o + size_[i]);

    std::vector<uint32_t> saved_unplaced;
    for (const auto& [o, r, i] : candidates) {
      if (o >= min_height) break;  // dominance (sorted by offset: all further too)
      if (o < last_offset || (o == last_offset && r < last_rank)) continue;  // canonical order
      if (o + size_[i] > capacity_) continue;
      size_t offset_mark = offset_log_.size(), floor_mark = floor_log_.size();
      bool hatless = place(i, o);
      Outcome outcome = Outcome::kNotFound;
      if (feasible(o, first, last)) {
        // Children see only the still-unplaced buffers, already in order.
        if (saved_unplaced.empty()) {
          saved_unplaced.reserve(candidates.size());
          for (const auto& c : candidates) saved_unplaced.push_back(std::get<2>(c));
        }
        std::swap(unplaced_, saved_unplaced);
        outcome = cut_points_.empty() ? search(o, r, first, last) : decompose(first, last);
        std::swap(unplaced_, saved_unplaced);
      }
      unplace(i, offset_mark, floor_mark);
      if (outcome != Outcome::kNotFound) return outcome;
      // Nothing unplaced meets this buffer, so it constrains no one: if the
      // rest fails with it placed here, it fails with any other choice too
      // (MiniMalloc's "hatless" pruning).
      if (hatless) break;
    }
    return Outcome::kNotFound;
  }

  // Returns true when no unplaced buffer meets i ("hatless").
  bool place(uint32_t i, uint64_t o) {
    offset_[i] = o;
    // Boundaries no unplaced buffer crosses any more split what is left.
    cut_points_.clear();
    for (int32_t s = lo_[i]; s + 1 < hi_[i]; ++s)
      if (--cuts_[s] == 0) cut_points_.push_back(s + 1);
    const uint64_t top = o + size_[i];
    affected_.clear();
    bool hatless = true;
    for (size_t k = overlap_start_[i]; k < overlap_start_[i + 1]; ++k) {
      uint32_t j = overlaps_[k];
      if (offset_[j] != kUnplaced) continue;
      hatless = false;
      if (min_offset_[j] >= top) continue;
      offset_log_.push_back({j, min_offset_[j]});
      min_offset_[j] = top;
      affected_.push_back(j);
    }
    for (int32_t s = lo_[i]; s < hi_[i]; ++s) {
      floor_log_.push_back({s, floor_[s]});
      floor_[s] = std::max(floor_[s], top);
      total_[s] -= size_[i];
    }
    budget_->used += 2 + (overlap_start_[i + 1] - overlap_start_[i]) + static_cast<uint64_t>(hi_[i] - lo_[i]);
    // A slot's floor is at least the lowest offset any unplaced buffer in it
    // can take. Only slots of buffers that rose can change: visit the union
    // of their ranges once each.
    ranges_.clear();
    for (uint32_t j : affected_) ranges_.push_back({lo_[j], hi_[j]});
    std::sort(ranges_.begin(), ranges_.end());
    budget_->used += ranges_.size() * 4;
    int32_t done = 0;
    for (const auto& [a, b] : ranges_) {
      for (int32_t s = std::max(a, done); s < b; ++s) {
        // A remembered unplaced member at or below the floor proves the floor
        // cannot rise (a hint only: checked each time, never undone).
        uint32_t w = witness_[s];
        if (offset_[w] == kUnplaced && min_offset_[w] <= floor_[s]) continue;
        uint64_t lowest = UINT64_MAX;
        for (uint32_t k = slot_start_[s]; k < slot_start_[s + 1]; ++k) {
          uint32_t member = slot_members_[k];
          if (offset_[member] == kUnplaced && min_offset_[member] < lowest) {
            lowest = min_offset_[member];
            witness_[s] = member;
          }
        }
        budget_->used += slot_start_[s + 1] - slot_start_[s];
        if (lowest != UINT64_MAX && lowest > floor_[s]) {
          floor_log_.push_back({s, floor_[s]});
          floor_[s] = lowest;
        }
      }
      budget_->used += static_cast<uint64_t>(std::max(b - std::max(a, done), 0));
      done = std::max(done, b);
    }
    return hatless;
  }

  // Everything of the current group is placed: keep the placements of this path.
  Outcome leaf() {
    for (size_t i = 0; i < offset_.size(); ++i)
      if (offset_[i] != kUnplaced) solution_[i] = offset_[i];
    budget_->used += offset_.size();
    return Outcome::kFound;
  }

  // The unplaced buffers (in unplaced_) fall apart at cut_points_ into groups
  // that cannot affect each other: each is searched on its own, from scratch
  // (its own canonical order); all must succeed.
  Outcome decompose(int32_t first, int32_t last) {
    std::vector<int32_t> cuts = cut_points_;
    std::sort(cuts.begin(), cuts.end());
    cuts.push_back(last);
    std::vector<uint32_t> all;
    for (uint32_t i : unplaced_)
      if (offset_[i] == kUnplaced) all.push_back(i);
    if (all.empty()) return leaf();
    // Each buffer lies between two consecutive cut points: bucket by start.
    std::sort(all.begin(), all.end(),
              [&](uint32_t a, uint32_t b) { return lo_[a] != lo_[b] ? lo_[a] < lo_[b] : a < b; });
    budget_->used += all.size() * 4 + cuts.size();
    std::vector<uint32_t> group, saved;
    size_t next = 0;
    int32_t begin = first;
    for (int32_t end : cuts) {
      group.clear();
      while (next < all.size() && lo_[all[next]] < end) group.push_back(all[next++]);
      int32_t group_first = begin;
      begin = end;
      if (group.empty()) continue;
      // A fresh preorder for the group, its T from what is still unplaced
      // (as MiniMalloc's sub-solves do); the old ranks come back afterwards.
      // Range maxima of total_ over [group_first, end): a sparse table.
      const size_t length = static_cast<size_t>(end - group_first);
      std::vector<std::vector<uint64_t>> table(
          1, std::vector<uint64_t>(total_.begin() + group_first, total_.begin() + end));
      for (size_t width = 2; width <= length; width *= 2) {
        const std::vector<uint64_t>& prev = table.back();
        std::vector<uint64_t> next(length - width + 1);
        for (size_t k = 0; k < next.size(); ++k) next[k] = std::max(prev[k], prev[k + width / 2]);
        table.push_back(std::move(next));
      }
      budget_->used += length * table.size();
      std::vector<std::tuple<uint32_t, uint64_t, uint32_t>> old;  // (buffer, total key, rank)
      old.reserve(group.size());
      for (uint32_t i : group) {
        size_t a = static_cast<size_t>(lo_[i] - group_first), b = static_cast<size_t>(hi_[i] - group_first);
        size_t level = static_cast<size_t>(std::bit_width(b - a)) - 1;
        uint64_t total = std::max(table[level][a], table[level][b - (size_t{1} << level)]);
        old.push_back({i, total_key_[i], rank_[i]});
        total_key_[i] = total;
      }
      budget_->used += group.size() * 4;
      preorder(group);
      for (uint32_t r = 0; r < group.size(); ++r) rank_[group[r]] = r;
      saved.swap(unplaced_);
      unplaced_ = group;
      Outcome outcome = search(0, 0, group_first, end);
      unplaced_.swap(saved);
      for (const auto& [i, key, rank] : old) {
        total_key_[i] = key;
        rank_[i] = rank;
      }
      if (outcome != Outcome::kFound) return outcome;
    }
    return Outcome::kFound;
  }

  void unplace(uint32_t i, size_t offset_mark, size_t floor_mark) {
    while (floor_log_.size() > floor_mark) {
      floor_[floor_log_.back().slot] = floor_log_.back().floor;
      floor_log_.pop_back();
    }
    while (offset_log_.size() > offset_mark) {
      min_offset_[offset_log_.back().buffer] = offset_log_.back().min_offset;
      offset_log_.pop_back();
    }
    for (int32_t s = lo_[i]; s < hi_[i]; ++s) total_[s] += size_[i];
    for (int32_t s = lo_[i]; s + 1 < hi_[i]; ++s) ++cuts_[s];
    offset_[i] = kUnplaced;
  }

  // Every slot can still hold its unplaced buffers above max(offset, floor).
  bool feasible(uint64_t offset, int32_t first, int32_t last) {
    budget_->used += static_cast<uint64_t>(last - first);
    for (int32_t s = first; s < last; ++s) {
      if (total_[s] == 0) continue;
      if (std::max(offset, floor_[s]) + total_[s] > capacity_) return false;
    }
    return true;
  }

  const Problem& p_;
  const Partition& part_;
  int32_t slots_ = 0;
  bool too_big_ = false;
  std::vector<uint64_t> size_;
  std::vector<uint64_t> duration_;
  std::vector<int32_t> lo_, hi_;
  std::vector<uint32_t> slot_start_, slot_members_;
  std::vector<size_t> overlap_start_;
  std::vector<uint32_t> overlaps_;
  std::vector<uint64_t> live_, total_key_;
  int which_ = 0;

  uint64_t capacity_ = 0, nodes_left_ = 0;
  WorkBudget* budget_ = nullptr;
  std::vector<uint32_t> rank_, unplaced_, affected_, cuts_;
  std::vector<int32_t> cut_points_;
  std::vector<uint32_t> witness_;
  std::vector<std::pair<int32_t, int32_t>> ranges_;
  std::vector<uint64_t> offset_, min_offset_, floor_, total_, solution_;
  std::vector<OffsetChange> offset_log_;
  std::vector<FloorChange> floor_log_;
};

// Round robin over the preorders with doubling node limits (as MiniMalloc
// does), until found or `work` more units are spent.
bool solve_partition(CanonicalSearch& search, size_t buffers, uint64_t capacity, uint64_t work,
                     WorkBudget& budget) {
  WorkBudget local{std::min(budget.left(), work), 0};
  uint64_t node_limit = std::max<uint64_t>(buffers, 16);
  bool found = false;
  while (!found && !local.exhausted()) {
    node_limit *= 2;
    for (int which = 0; which < CanonicalSearch::kPreorders && !found && !local.exhausted(); ++which) {
      Outcome outcome = search.run(capacity, which, node_limit, local);
      if (outcome == Outcome::kFound) found = true;
      if (outcome == Outcome::kNotFound) {  // proven: no plan at this capacity
        budget.used += local.used;
        return false;
      }
    }
  }
  budget.used += local.used;
  return found;
}

}  // namespace

std::string improve(const Problem& problem, std::vector<uint64_t>& offsets, uint64_t& peak,
                    WorkBudget& budget) {
  std::string improved;
  // Bottom-up (skyline) placements: often far better than the gap-filling
  // greedy ones, but slower, so they are paid from the budget.
  for (Order order :
       {Order::kSize, Order::kArea, Order::kBreadth, Order::kConflict, Order::kDuration, Order::kStart}) {
    if (peak <= problem.lower_bound || budget.exhausted()) break;
    std::vector<uint32_t> sequence = make_order(problem, order);
    std::vector<uint32_t> rank(problem.count());
    for (uint32_t i = 0; i < sequence.size(); ++i) rank[sequence[i]] = i;
    std::vector<uint64_t> candidate = place_skyline(problem, rank, &budget);
    if (candidate.size() != problem.count()) continue;
    uint64_t candidate_peak = peak_of(problem, candidate);
    if (candidate_peak < peak) {
      peak = candidate_peak;
      offsets = std::move(candidate);
      improved = std::string(order_name(order)) + "-skyline";
    }
  }

  // Exact search per partition under capacity targets: the lower bound
  // first, then bisection between it and the best plan so far.
  if (peak <= problem.lower_bound || budget.exhausted()) return improved;
  std::vector<Partition> parts = split_at_cut_lines(problem);
  std::vector<std::unique_ptr<CanonicalSearch>> searches(parts.size());
  auto part_peak = [&](const Partition& part, const std::vector<uint64_t>& plan) {
    uint64_t top = 0;
    for (uint32_t b : part.buffers) top = std::max(top, plan[b] + problem.size[b]);
    return top;
  };
  // Tries every partition above `capacity`; on success updates offsets/peak.
  auto attempt = [&](uint64_t capacity, uint64_t work) {
    std::vector<uint64_t> trial = offsets;
    std::vector<size_t> todo;
    for (size_t k = 0; k < parts.size(); ++k)
      if (part_peak(parts[k], offsets) > capacity) todo.push_back(k);
    // Largest first: fail fast. Each partition may use what the previous
    // ones left of this attempt's work.
    std::stable_sort(todo.begin(), todo.end(),
                     [&](size_t a, size_t b) { return parts[a].buffers.size() > parts[b].buffers.size(); });
    for (size_t t = 0; t < todo.size(); ++t) {
      const size_t k = todo[t];
      if (!searches[k]) searches[k] = std::make_unique<CanonicalSearch>(problem, parts[k]);
      CanonicalSearch& search = *searches[k];
      if (search.too_big()) return false;
      uint64_t before = budget.used;
      if (!solve_partition(search, parts[k].buffers.size(), capacity, work, budget)) return false;
      work -= std::min(work, budget.used - before);
      for (size_t i = 0; i < parts[k].buffers.size(); ++i) trial[parts[k].buffers[i]] = search.offsets()[i];
    }
    uint64_t trial_peak = peak_of(problem, trial);
    if (trial_peak >= peak) return false;
    offsets = std::move(trial);
    peak = trial_peak;
    improved = "canonical-search";
    return true;
  };

  // Canonical plans put every buffer on top of others (or at 0), so every
  // peak is a sum of sizes: a multiple of their gcd. Targets are too.
  uint64_t grain = 0;
  for (uint64_t size : problem.size) grain = std::gcd(grain, size);
  auto round_up = [&](uint64_t value) { return (value + grain - 1) / grain * grain; };
  // Looking for a plan with peak in [lo, hi], both multiples of grain.
  uint64_t lo = round_up(problem.lower_bound), hi = (peak - 1) / grain * grain;
  bool first = true;
  while (lo <= hi && hi >= grain && peak > problem.lower_bound && !budget.exhausted()) {
    uint64_t target = first ? lo : lo + (hi - lo) / grain / 2 * grain;
    // The lower bound gets 40 % of the budget (it is the answer for most
    // instances); each bisection step an equal share of what is left.
    uint64_t steps = 1;
    for (uint64_t range = (hi - lo) / grain + 1; range > 1; range /= 2) ++steps;
    uint64_t work = first ? budget.left() / 5 * 2 : budget.left() / steps;
    if (work == 0) work = budget.left();
    bool found = attempt(target, work);
    if (found) {
      hi = (peak - 1) / grain * grain;
    } else {
      lo = target + grain;
    }
    first = false;
  }
  return improved;
}

}  // namespace hexir::planner::internal
