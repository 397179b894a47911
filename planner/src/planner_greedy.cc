#include "planner_greedy.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <thread>
#include <tuple>
#include <utility>

namespace hexir::planner::internal {
namespace {

// Work units charged per skyline queue step (see kWorkPerMs).
constexpr uint64_t kSkylineStepWork = 200;

using Span = std::pair<uint64_t, uint64_t>;  // [begin, end) in memory
using Spans = std::vector<Span>;             // sorted, disjoint, not touching

// Adds [a, b) to a coalesced span list; counts the spans it moves in `work`.
void add_span(Spans& spans, uint64_t a, uint64_t b, uint64_t& work) {
  // First span that ends at or after a (touching spans merge).
  auto first = std::lower_bound(spans.begin(), spans.end(), a,
                                [](const Span& s, uint64_t value) { return s.second < value; });
  work += 1 + static_cast<uint64_t>(spans.end() - first);
  auto last = first;
  while (last != spans.end() && last->first <= b) {
    a = std::min(a, last->first);
    b = std::max(b, last->second);
    ++last;
  }
  if (first == last) {
    spans.insert(first, {a, b});
  } else {
    *first = {a, b};
    spans.erase(first + 1, last);
  }
}

// Which memory is taken during a window of time, answered without looking at
// every placed buffer: a segment tree over time slots where each placed
// buffer is recorded (as a memory span) at the O(log T) nodes that cover its
// live range exactly (`own`), and every node also keeps the union of all
// spans recorded in its subtree (`below`). Spans are coalesced, so a densely
// packed region costs one span however many buffers fill it. The memory in
// use during [lo, hi) is the union of `below` of the nodes covering the window
// and `own` of their ancestors: O(log T) lists. work() counts the spans merged
// and moved, what queries and insertions cost beyond O(log T).
class OccupancyIndex {
 public:
  explicit OccupancyIndex(int32_t slots) {
    leaves_ = 1;
    int32_t depth = 0;
    while (leaves_ < slots) {
      leaves_ *= 2;
      ++depth;
    }
    own_.resize(2 * static_cast<size_t>(leaves_));
    below_.resize(2 * static_cast<size_t>(leaves_));
    block_depth_ = std::max(0, depth - kBlockDepthBelow);
    block_shift_ = depth - block_depth_;
    modified_.assign(size_t{1} << block_depth_, 0);
    cache_.resize(size_t{1} << block_depth_);
    cached_at_.assign(size_t{1} << block_depth_, 0);
  }

  void insert(int32_t lo, int32_t hi, uint64_t begin, uint64_t end) {
    ++clock_;
    insert(1, 0, leaves_, lo, hi, begin, end);
  }
  uint64_t work() const { return work_; }

  // The union of memory taken during [lo, hi), sorted and coalesced. Valid
  // until the next call.
  const Spans& query(int32_t lo, int32_t hi) {
    lists_.clear();
    ++work_;
    const int32_t block = lo >> block_shift_;
    if (((hi - 1) >> block_shift_) != block) {
      collect(1, 0, leaves_, lo, hi);
      return unite_all(nullptr);
    }
    // Within one block (most buffers are short): the spans of every buffer
    // covering the whole block come from one cached list.
    const size_t node = (size_t{1} << block_depth_) + static_cast<size_t>(block);
    const int32_t first = block << block_shift_;
    collect(node, first, first + (int32_t{1} << block_shift_), lo, hi);
    return unite_all(&covering(node));
  }

 private:
  // Index blocks are subtrees this many levels above the leaves.
  static constexpr int32_t kBlockDepthBelow = 5;

  // The union of own_ over the strict ancestors of block node `node`, rebuilt
  // when one of them changed since it was last built.
  const Spans& covering(size_t node) {
    const size_t block = node - (size_t{1} << block_depth_);
    uint64_t newest = 0;
    for (size_t n = node / 2; n >= 1; n /= 2) newest = std::max(newest, modified_[n]);
    if (cached_at_[block] != 0 && cached_at_[block] >= newest) return cache_[block];
    std::vector<const Spans*> saved;
    saved.swap(lists_);
    for (size_t n = node / 2; n >= 1; n /= 2)
      if (!own_[n].empty()) lists_.push_back(&own_[n]);
    cache_[block] = unite_all(nullptr);
    lists_.swap(saved);
    cached_at_[block] = clock_;
    return cache_[block];
  }

  // The union of lists_ (and of `last`, merged in at the end so that the long
  // list is copied once). The result may live in pool_.
  const Spans& unite_all(const Spans* last) {
    if (lists_.empty()) {
      if (last) return *last;
      pool_[0].clear();
      return pool_[0];
    }
    // Pairwise unions, level by level: each span takes part in log2(lists) merges.
    if (pool_.size() < lists_.size() + 1)
      pool_.resize(lists_.size() + 1);  // never during the merges: lists_ points into it
    size_t used = 0;
    while (lists_.size() > 1) {
      size_t out = 0;
      for (size_t i = 0; i + 1 < lists_.size(); i += 2) {
        Spans& target = pool_[used++];
        work_ += lists_[i]->size() + lists_[i + 1]->size();
        unite(*lists_[i], *lists_[i + 1], target);
        lists_[out++] = &target;
      }
      if (lists_.size() % 2) lists_[out++] = lists_.back();
      lists_.resize(out);
    }
    if (!last || last->empty()) return *lists_[0];
    Spans& target = pool_[used];
    work_ += lists_[0]->size() + last->size();
    unite(*lists_[0], *last, target);
    return target;
  }

  void insert(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi, uint64_t begin, uint64_t end) {
    add_span(below_[node], begin, end, work_);
    if (lo <= l && r <= hi) {
      add_span(own_[node], begin, end, work_);
      if (node < modified_.size()) modified_[node] = clock_;  // above the blocks: caches below are stale
      return;
    }
    int32_t mid = l + (r - l) / 2;
    if (lo < mid) insert(2 * node, l, mid, lo, hi, begin, end);
    if (hi > mid) insert(2 * node + 1, mid, r, lo, hi, begin, end);
  }

  void collect(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi) {
    if (lo <= l && r <= hi) {
      if (!below_[node].empty()) lists_.push_back(&below_[node]);
      return;
    }
    if (below_[node].empty()) return;  // nothing placed under this node at all
    if (!own_[node].empty()) lists_.push_back(&own_[node]);
    int32_t mid = l + (r - l) / 2;
    if (lo < mid) collect(2 * node, l, mid, lo, hi);
    if (hi > mid) collect(2 * node + 1, mid, r, lo, hi);
  }

  // out = a | b, coalesced.
  static void unite(const Spans& a, const Spans& b, Spans& out) {
    out.clear();
    out.reserve(a.size() + b.size());
    size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
      const Span& s = (j == b.size() || (i < a.size() && a[i].first < b[j].first)) ? a[i++] : b[j++];
      if (!out.empty() && s.first <= out.back().second) {
        out.back().second = std::max(out.back().second, s.second);
      } else {
        out.push_back(s);
      }
    }
  }

  int32_t leaves_ = 1;
  std::vector<Spans> own_, below_;
  std::vector<const Spans*> lists_;
  std::vector<Spans> pool_ = std::vector<Spans>(1);
  int32_t block_depth_ = 0, block_shift_ = 0;
  uint64_t clock_ = 0;
  std::vector<uint64_t> modified_;  // per node above the blocks: clock_ of its last own_ change
  std::vector<Spans> cache_;        // per block: see covering()
  std::vector<uint64_t> cached_at_;
  uint64_t work_ = 0;
};

// Range "raise to at least" and range max over time slots: the top of
// everything placed that a window meets, for placements on top.
class TopTree {
 public:
  explicit TopTree(int32_t slots) {
    leaves_ = 1;
    while (leaves_ < slots) leaves_ *= 2;
    max_.assign(2 * static_cast<size_t>(leaves_), 0);
    raised_.assign(2 * static_cast<size_t>(leaves_), 0);
  }
  uint64_t max(int32_t lo, int32_t hi) const { return max(1, 0, leaves_, lo, hi); }
  void raise(int32_t lo, int32_t hi, uint64_t value) { raise(1, 0, leaves_, lo, hi, value); }

 private:
  // max_: the largest value anywhere in the node's range; raised_: a value
  // every slot of the range was raised to (not pushed down).
  uint64_t max(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi) const {
    if (lo <= l && r <= hi) return max_[node];
    uint64_t result = raised_[node];
    int32_t mid = l + (r - l) / 2;
    if (lo < mid) result = std::max(result, max(2 * node, l, mid, lo, hi));
    if (hi > mid) result = std::max(result, max(2 * node + 1, mid, r, lo, hi));
    return result;
  }
  void raise(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi, uint64_t value) {
    max_[node] = std::max(max_[node], value);
    if (lo <= l && r <= hi) {
      raised_[node] = std::max(raised_[node], value);
      return;
    }
    int32_t mid = l + (r - l) / 2;
    if (lo < mid) raise(2 * node, l, mid, lo, hi, value);
    if (hi > mid) raise(2 * node + 1, mid, r, lo, hi, value);
  }
  int32_t leaves_ = 1;
  std::vector<uint64_t> max_, raised_;
};

// Range max and range "raise to" over time slots (for the skyline).
class SkylineTree {
 public:
  explicit SkylineTree(int32_t slots) {
    leaves_ = 1;
    while (leaves_ < slots) leaves_ *= 2;
    max_.assign(2 * static_cast<size_t>(leaves_), 0);
    set_.assign(2 * static_cast<size_t>(leaves_), 0);
  }
  uint64_t max(int32_t lo, int32_t hi) const { return max(1, 0, leaves_, lo, hi); }
  // Every slot in [lo, hi) becomes `value` (callers only ever raise).
  void assign(int32_t lo, int32_t hi, uint64_t value) { assign(1, 0, leaves_, lo, hi, value); }

 private:
  static constexpr uint64_t kNone = 0;
  uint64_t max(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi) const {
    if (lo <= l && r <= hi) return max_[node];
    if (set_[node] != kNone) return set_[node];  // uniform below
    int32_t mid = l + (r - l) / 2;
    uint64_t result = 0;
    if (lo < mid) result = std::max(result, max(2 * node, l, mid, lo, hi));
    if (hi > mid) result = std::max(result, max(2 * node + 1, mid, r, lo, hi));
    return result;
  }
  void push(size_t node) {
    if (set_[node] == kNone) return;
    for (size_t child : {2 * node, 2 * node + 1}) max_[child] = set_[child] = set_[node];
    set_[node] = kNone;
  }
  void assign(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi, uint64_t value) {
    if (lo <= l && r <= hi) {
      max_[node] = set_[node] = value;
      return;
    }
    push(node);
    int32_t mid = l + (r - l) / 2;
    if (lo < mid) assign(2 * node, l, mid, lo, hi, value);
    if (hi > mid) assign(2 * node + 1, mid, r, lo, hi, value);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }
  int32_t leaves_ = 1;
  std::vector<uint64_t> max_, set_;  // set_: pending uniform value (0: none; values placed are > 0)
};

// Max of the live profile over each buffer's window.
std::vector<uint64_t> window_breadth(const Problem& problem) {
  std::vector<uint64_t> profile = live_profile(problem);
  size_t n = 1;
  while (n < profile.size()) n *= 2;
  std::vector<uint64_t> tree(2 * n, 0);
  for (size_t i = 0; i < profile.size(); ++i) tree[n + i] = profile[i];
  for (size_t i = n - 1; i >= 1; --i) tree[i] = std::max(tree[2 * i], tree[2 * i + 1]);
  std::vector<uint64_t> breadth(problem.count());
  for (size_t b = 0; b < problem.count(); ++b) {
    uint64_t best = 0;
    for (size_t l = n + problem.lo[b], r = n + problem.hi[b]; l < r; l /= 2, r /= 2) {
      if (l & 1) best = std::max(best, tree[l++]);
      if (r & 1) best = std::max(best, tree[--r]);
    }
    breadth[b] = best;
  }
  return breadth;
}

// Sum of the sizes of the buffers each buffer meets (itself included).
std::vector<unsigned __int128> conflict_sum(const Problem& problem) {
  size_t slots = static_cast<size_t>(problem.slots);
  std::vector<unsigned __int128> ends_by(slots + 1, 0), starts_from(slots + 2, 0), total_v(1, 0);
  unsigned __int128 total = 0;
  for (size_t b = 0; b < problem.count(); ++b) {
    total += problem.size[b];
    ends_by[problem.hi[b]] += problem.size[b];
    starts_from[problem.lo[b]] += problem.size[b];
  }
  for (size_t t = 1; t <= slots; ++t) ends_by[t] += ends_by[t - 1];           // sum with hi <= t
  for (size_t t = slots + 1; t-- > 0;) starts_from[t] += starts_from[t + 1];  // sum with lo >= t
  std::vector<unsigned __int128> result(problem.count());
  for (size_t b = 0; b < problem.count(); ++b)
    result[b] = total - ends_by[problem.lo[b]] - starts_from[problem.hi[b]];
  return result;
}

}  // namespace

const char* order_name(Order order) {
  switch (order) {
    case Order::kSize:
      return "size";
    case Order::kDuration:
      return "duration";
    case Order::kArea:
      return "area";
    case Order::kBreadth:
      return "breadth";
    case Order::kConflict:
      return "conflict";
    case Order::kStart:
      return "start";
  }
  return "?";
}

std::vector<uint32_t> make_order(const Problem& p, Order order) {
  std::vector<uint32_t> idx(p.count());
  std::iota(idx.begin(), idx.end(), 0u);
  auto by = [&](auto key) {
    std::sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) {
      auto ka = key(a), kb = key(b);
      if (ka != kb) return ka > kb;
      return a < b;
    });
  };
  using U128 = unsigned __int128;
  switch (order) {
    case Order::kSize:
      by([&](uint32_t i) {
        return std::make_tuple(p.size[i], p.duration[i], -static_cast<int64_t>(p.lo[i]));
      });
      break;
    case Order::kDuration:
      by([&](uint32_t i) { return std::make_pair(p.duration[i], p.size[i]); });
      break;
    case Order::kArea:
      by([&](uint32_t i) {
        return std::make_pair(static_cast<U128>(p.size[i]) * static_cast<U128>(p.duration[i]), p.size[i]);
      });
      break;
    case Order::kBreadth: {
      std::vector<uint64_t> breadth = window_breadth(p);
      by([&](uint32_t i) { return std::make_tuple(breadth[i], p.size[i], p.duration[i]); });
      break;
    }
    case Order::kConflict: {
      std::vector<U128> conflict = conflict_sum(p);
      by([&](uint32_t i) { return std::make_pair(conflict[i], p.size[i]); });
      break;
    }
    case Order::kStart:
      by([&](uint32_t i) {
        return std::make_tuple(-static_cast<int64_t>(p.lo[i]), p.size[i], p.duration[i]);
      });
      break;
  }
  return idx;
}

namespace {
uint64_t n_log_n_work(size_t buffers) {
  uint64_t log = 0;
  while ((uint64_t{1} << log) < buffers + 1) ++log;
  return kGreedyWorkPerBuffer * static_cast<uint64_t>(buffers) * log;
}
}  // namespace

uint64_t greedy_work_allowance(size_t buffers) { return kGreedyWorkFloor + n_log_n_work(buffers); }
uint64_t greedy_phase_allowance(size_t buffers) { return kGreedyPhaseFloor + n_log_n_work(buffers); }

std::vector<uint64_t> place_in_order(const Problem& problem, const std::vector<uint32_t>& order, Fit fit,
                                     PlacementStats* stats, uint64_t work_allowance) {
  if (work_allowance == 0) work_allowance = greedy_work_allowance(problem.count());
  PlacementStats local;
  PlacementStats& s = stats ? *stats : local;
  s = PlacementStats{};
  std::vector<uint64_t> offsets(problem.count(), 0);
  OccupancyIndex index(problem.slots);
  TopTree tops(1);
  bool on_top = false;
  for (size_t placed = 0; placed < order.size(); ++placed) {
    const uint32_t b = order[placed];
    uint64_t size = problem.size[b];
    if (!on_top && index.work() >= work_allowance) {
      // Out of allowance: the index is left behind; what remains goes on top
      // of what is placed, kept as range maxima from here on.
      on_top = true;
      s.capped = true;
      s.work = index.work();
      index = OccupancyIndex(1);
      tops = TopTree(problem.slots);
      for (size_t p = 0; p < placed; ++p)
        tops.raise(problem.lo[order[p]], problem.hi[order[p]], offsets[order[p]] + problem.size[order[p]]);
    }
    if (on_top) {
      const uint64_t top = tops.max(problem.lo[b], problem.hi[b]);
      if (top > problem.limit - size) return {};
      offsets[b] = top;
      tops.raise(problem.lo[b], problem.hi[b], top + size);
      continue;
    }
    const Spans& taken = index.query(problem.lo[b], problem.hi[b]);
    uint64_t best = 0, best_gap = 0, cursor = 0;
    bool found = false;
    for (const Span& s : taken) {
      uint64_t gap = s.first - cursor;
      if (gap >= size && (!found || gap < best_gap)) {
        found = true;
        best = cursor;
        best_gap = gap;
        if (fit == Fit::kFirst || gap == size) break;
      }
      cursor = s.second;
    }
    if (!found) best = cursor;                   // on top (taken is sorted, so cursor is the highest end)
    if (best > problem.limit - size) return {};  // past 2^62 bytes: no plan
    offsets[b] = best;
    index.insert(problem.lo[b], problem.hi[b], best, best + size);
  }
  if (!on_top) s.work = index.work();
  return offsets;
}

std::vector<uint64_t> place_skyline(const Problem& problem, const std::vector<uint32_t>& rank,
                                    WorkBudget* budget) {
  std::vector<uint64_t> offsets(problem.count(), 0);
  SkylineTree skyline(problem.slots);
  using Entry = std::tuple<uint64_t, uint32_t, uint32_t>;  // (lowest offset, rank, buffer)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  for (uint32_t b = 0; b < problem.count(); ++b) queue.push({0, rank[b], b});
  while (!queue.empty()) {
    auto [key, r, b] = queue.top();
    queue.pop();
    if (budget) {
      budget->used += kSkylineStepWork;
      if (budget->exhausted()) return {};
    }
    uint64_t now = skyline.max(problem.lo[b], problem.hi[b]);
    if (now > key) {
      queue.push({now, r, b});
      continue;
    }
    if (now > problem.limit - problem.size[b]) return {};
    offsets[b] = now;
    skyline.assign(problem.lo[b], problem.hi[b], now + problem.size[b]);
  }
  return offsets;
}

std::vector<GreedyResult> run_greedy_heuristics(const Problem& problem, bool* stopped_early,
                                                uint64_t phase_allowance) {
  if (stopped_early) *stopped_early = false;
  if (phase_allowance == 0) phase_allowance = greedy_phase_allowance(problem.count());
  uint64_t phase_work = 0;
  // Likely winners first. They run in rounds of two (two threads on large
  // problems); after a round, a plan at the lower bound ends the phase. The
  // rounds are fixed, so the outcome never depends on timing or core count.
  static constexpr std::pair<Order, Fit> kHeuristics[] = {
      {Order::kSize, Fit::kBest},      {Order::kBreadth, Fit::kBest},   {Order::kArea, Fit::kBest},
      {Order::kConflict, Fit::kBest},  {Order::kDuration, Fit::kBest},  {Order::kStart, Fit::kBest},
      {Order::kSize, Fit::kFirst},     {Order::kArea, Fit::kFirst},     {Order::kBreadth, Fit::kFirst},
      {Order::kConflict, Fit::kFirst}, {Order::kDuration, Fit::kFirst}, {Order::kStart, Fit::kFirst},
  };
  constexpr size_t kCount = sizeof kHeuristics / sizeof kHeuristics[0];
  constexpr size_t kThreadedFrom = 4096;  // buffers; below, a thread costs more than it saves
  std::vector<GreedyResult> slots(kCount);
  auto run = [&](size_t k) {
    auto [order, fit] = kHeuristics[k];
    GreedyResult& r = slots[k];
    r.name = std::string(order_name(order)) + (fit == Fit::kBest ? "-best-fit" : "-first-fit");
    PlacementStats stats;
    r.offsets = place_in_order(problem, make_order(problem, order), fit, &stats);
    r.capped = stats.capped;
    r.work = stats.work;
    r.peak = r.offsets.size() == problem.count() ? peak_of(problem, r.offsets) : UINT64_MAX;
  };
  std::vector<GreedyResult> results;
  for (size_t k = 0; k < kCount; k += 2) {
    if (problem.count() >= kThreadedFrom) {
      std::thread other([&] { run(k + 1); });
      run(k);
      other.join();
    } else {
      run(k);
      run(k + 1);
    }
    bool at_bound = false, capped = false;
    for (size_t j = k; j < k + 2; ++j) {
      capped = capped || slots[j].capped;
      phase_work += slots[j].work;
      if (slots[j].peak == UINT64_MAX) continue;  // did not fit under the limit
      at_bound = at_bound || slots[j].peak <= problem.lower_bound;
      results.push_back(std::move(slots[j]));
    }
    // A heuristic that ran out of its allowance means a hostile problem:
    // more rounds would each cost as much again, and the improvement phase
    // (under its own budget) does better than their on-top tails.
    if (at_bound || capped) break;
    const uint64_t round_work = slots[k].work + slots[k + 1].work;
    if (k + 2 < kCount && phase_work + round_work > phase_allowance) {
      if (stopped_early) *stopped_early = true;
      break;
    }
  }
  return results;
}

}  // namespace hexir::planner::internal
