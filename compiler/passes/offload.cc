#include "passes/offload.h"

#include <algorithm>
#include <string>
#include <vector>

#include "passes/liveness.h"

namespace hexir::compiler {

namespace {

bool has_control_flow(const FunctionPlan& plan) {
  return std::any_of(plan.program.begin(), plan.program.end(),
                     [](const Instruction& inst) { return is_branching(inst.control); });
}

struct Trial {
  LivePeak peak;
  std::vector<uint64_t> profile;
};

Trial measure(const Function& fn, const FunctionPlan& plan, bool in_place) {
  const FunctionPlan finished = finish_storage(fn, plan, in_place);
  return {live_peak(fn, finished), live_profile(fn, finished)};
}

bool lower(const LivePeak& a, const LivePeak& b) {
  return a.bytes < b.bytes || (a.bytes == b.bytes && a.count < b.count);
}

// A value the plan adds for a copy of `from` (a host copy or a device copy).
int add_copy(const Function& fn, FunctionPlan& p, int from, Storage storage) {
  const int original = p.values[static_cast<size_t>(from)].copy_of >= 0 ? p.values[static_cast<size_t>(from)].copy_of
                                                                        : from;
  Value value = value_at(fn, p, from);
  int n = 1;
  for (const ValuePlan& vp : p.values)
    if (vp.copy_of == original && vp.storage == storage) ++n;
  value.name = value_at(fn, p, original).name + (storage == Storage::kHost ? ".host" : ".prefetch") +
               std::to_string(n);
  value.kind = ValueKind::kResult;
  value.node = -1;
  value.input_index = -1;
  value.constant = -1;
  const int id = value_count(fn, p);
  p.added.push_back(std::move(value));
  ValuePlan vp;
  vp.storage = storage;
  vp.storage_root = id;
  vp.copy_of = original;
  p.values.push_back(vp);
  return id;
}

Instruction transfer(Control control, int from, int to) {
  Instruction inst;
  inst.control = control;
  inst.op = ops::OpId::kCopy;
  inst.inputs = {from};
  inst.outputs = {to};
  return inst;
}

// Offloads `value` (a device arena root written at `def`): its reads at
// program index `place` and later read a copy prefetched there, from the
// host copy an eviction right after its writer makes (or, when the value is
// itself a prefetched copy, from the host copy that came from).
FunctionPlan apply(const Function& fn, const FunctionPlan& base, int value, int64_t def, int64_t place) {
  FunctionPlan p = base;
  const Instruction& writer = base.program[static_cast<size_t>(def)];
  int host = -1;
  int64_t shift = 0;
  if (writer.control == Control::kPrefetch) {
    host = writer.inputs[0];
  } else {
    host = add_copy(fn, p, value, Storage::kHost);
    p.program.insert(p.program.begin() + def + 1, transfer(Control::kEvict, value, host));
    shift = 1;
  }
  const int device = add_copy(fn, p, value, Storage::kArena);
  const int64_t at = place + shift;
  p.program.insert(p.program.begin() + at, transfer(Control::kPrefetch, host, device));
  for (size_t k = static_cast<size_t>(at) + 1; k < p.program.size(); ++k)
    for (int& in : p.program[k].inputs)
      if (in == value) in = device;
  return p;
}

uint64_t host_peak_of(const Function& fn, const FunctionPlan& plan) {
  const size_t n = plan.program.size();
  std::vector<int64_t> delta(n + 2, 0);
  for (const LiveRange& r : compute_live_ranges(fn, plan, Storage::kHost)) {
    const int64_t lo = std::clamp<int64_t>(r.buffer.lower, 0, static_cast<int64_t>(n));
    const int64_t hi = std::clamp<int64_t>(r.buffer.upper, lo, static_cast<int64_t>(n) + 1);
    delta[static_cast<size_t>(lo)] += static_cast<int64_t>(r.buffer.size);
    delta[static_cast<size_t>(hi)] -= static_cast<int64_t>(r.buffer.size);
  }
  int64_t live = 0, peak = 0;
  for (size_t k = 0; k <= n; ++k) {
    live += delta[k];
    peak = std::max(peak, live);
  }
  return static_cast<uint64_t>(peak);
}

}  // namespace

uint64_t host_live_peak(const Function& fn, const FunctionPlan& plan) { return host_peak_of(fn, plan); }

TransferCount count_transfers(const Function& fn, const FunctionPlan& plan) {
  TransferCount count;
  for (const Instruction& inst : plan.program) {
    if (!is_transfer(inst.control)) continue;
    const uint64_t bytes = value_at(fn, plan, inst.outputs[0]).byte_size;
    if (inst.control == Control::kEvict) {
      ++count.evictions;
      count.bytes_evicted += bytes;
    } else {
      ++count.prefetches;
      count.bytes_prefetched += bytes;
    }
  }
  return count;
}

std::vector<bool> streamable_constants(const Module& module, const std::vector<FunctionPlan>& plans) {
  std::vector<bool> ok(module.constants.size(), true);
  for (size_t f = 0; f < module.functions.size(); ++f) {
    const Function& fn = module.functions[f];
    const FunctionPlan& plan = plans[f];
    // The graph constant a value is a use of, -1 for the others.
    auto constant_of = [&](int v) {
      const size_t i = static_cast<size_t>(v);
      return i < fn.values.size() && fn.values[i].kind == ValueKind::kConstant ? fn.values[i].constant : -1;
    };
    for (size_t v = 0; v < plan.values.size(); ++v) {  // a view of a use (its root is one, it is not)
      const int root = plan.values[v].storage_root;
      if (root >= 0 && root != static_cast<int>(v) && constant_of(root) >= 0 && constant_of(static_cast<int>(v)) < 0)
        ok[static_cast<size_t>(constant_of(root))] = false;
    }
    const bool control_flow = has_control_flow(plan);
    for (const Instruction& inst : plan.program)
      for (int in : inst.inputs)
        if (constant_of(in) >= 0 && (inst.control != Control::kNone || control_flow))
          ok[static_cast<size_t>(constant_of(in))] = false;
    for (int out : plan.outputs)
      if (constant_of(out) >= 0) ok[static_cast<size_t>(constant_of(out))] = false;
  }
  return ok;
}

int stream_weights(const Function& fn, FunctionPlan& plan, const std::vector<bool>& streamed, int ahead) {
  auto is_streamed = [&](int v) {
    const ValuePlan& vp = plan.values[static_cast<size_t>(v)];
    return vp.storage == Storage::kConstant && vp.storage_root == v && vp.storage_index < streamed.size() &&
           streamed[vp.storage_index];
  };
  // The instructions reading a streamed weight, in order.
  std::vector<size_t> readers;
  for (size_t k = 0; k < plan.program.size(); ++k) {
    const Instruction& inst = plan.program[k];
    if (inst.control == Control::kNone && std::any_of(inst.inputs.begin(), inst.inputs.end(), is_streamed))
      readers.push_back(k);
  }
  if (readers.empty()) return 0;
  // Per reader, its copies; they are prefetched before reader i - ahead.
  std::vector<std::vector<Instruction>> before(plan.program.size());
  int added = 0;
  for (size_t i = 0; i < readers.size(); ++i) {
    Instruction& reader = plan.program[readers[i]];
    const size_t place = readers[i >= static_cast<size_t>(ahead) ? i - static_cast<size_t>(ahead) : 0];
    std::vector<std::pair<int, int>> copies;  // weight -> its copy for this reader
    for (int& in : reader.inputs) {
      if (!is_streamed(in)) continue;
      auto it = std::find_if(copies.begin(), copies.end(), [&](const auto& c) { return c.first == in; });
      if (it == copies.end()) {
        const int copy = add_copy(fn, plan, in, Storage::kArena);
        before[place].push_back(transfer(Control::kPrefetch, in, copy));
        copies.emplace_back(in, copy);
        ++added;
        in = copy;
      } else {
        in = it->second;
      }
    }
  }
  std::vector<Instruction> program;
  program.reserve(plan.program.size() + static_cast<size_t>(added));
  for (size_t k = 0; k < plan.program.size(); ++k) {
    for (Instruction& copy : before[k]) program.push_back(std::move(copy));
    program.push_back(std::move(plan.program[k]));
  }
  plan.program = std::move(program);
  return added;
}

OffloadResult offload(const Function& fn, FunctionPlan& plan, uint64_t target, const OffloadOptions& options) {
  OffloadResult result;
  const FunctionPlan original = plan;
  Trial current = measure(fn, plan, options.in_place);
  result.before = result.after = current.peak;
  if (has_control_flow(plan)) {
    result.control_flow = true;
    return result;
  }
  for (int step = 0; step < options.max_steps && current.peak.bytes > target; ++step) {
    const Reads reads = reads_of(plan);
    const int64_t at = current.peak.at;
    bool found = false, best_reduces = false;
    double best_score = 0;
    uint64_t best_moved = 0;
    LivePeak best_peak;
    FunctionPlan best;
    for (size_t v = 0; v < plan.values.size(); ++v) {
      const ValuePlan& vp = plan.values[v];
      if (vp.storage_root != static_cast<int>(v) || vp.storage != Storage::kArena) continue;
      if (value_at(fn, plan, static_cast<int>(v)).kind != ValueKind::kResult) continue;
      const int64_t def = reads.def[v];
      const std::vector<int64_t>& r = reads.at[v];
      // Across the peak, not read there; a view read after it would need a
      // view of the copy (not done: views are never offloaded).
      if (def < 0 || def >= at || r.empty() || r.back() <= at || reads.through_view[v]) continue;
      if (std::binary_search(r.begin(), r.end(), at)) continue;
      const Instruction& writer = plan.program[static_cast<size_t>(def)];
      if (writer.writes_carried) continue;
      const uint64_t bytes = value_at(fn, plan, static_cast<int>(v)).byte_size;
      if (bytes == 0) continue;
      const int64_t next = *std::upper_bound(r.begin(), r.end(), at);
      // Where the prefetch goes: right after the peak (the most time to
      // overlap the copy), the lowest point of the profile before the read,
      // or just before the read (the least device time held).
      int64_t valley = next;
      for (int64_t k = next; k > at; --k)
        if (current.profile[static_cast<size_t>(k)] < current.profile[static_cast<size_t>(valley)]) valley = k;
      std::vector<int64_t> places = {at + 1};
      if (valley != at + 1) places.push_back(valley);
      if (next != valley && next != at + 1) places.push_back(next);
      const uint64_t moved = (writer.control == Control::kPrefetch ? 1 : 2) * bytes;
      for (int64_t place : places) {
        FunctionPlan applied = apply(fn, plan, static_cast<int>(v), def, place);
        if (options.host_budget && host_peak_of(fn, applied) > *options.host_budget) continue;
        const LivePeak peak = measure(fn, applied, options.in_place).peak;
        if (!lower(peak, current.peak)) continue;
        const bool reduces = peak.bytes < current.peak.bytes;
        const double score =
            reduces ? static_cast<double>(current.peak.bytes - peak.bytes) / static_cast<double>(moved) : 0.0;
        // One that only removes instants at the peak's height: the fewest
        // bytes moved (a 64 MiB value is not worth copying twice for that).
        const bool better =
            !found || (reduces != best_reduces ? reduces
                       : reduces             ? score > best_score
                                             : moved < best_moved || (moved == best_moved && lower(peak, best_peak)));
        if (!better) continue;
        found = true;
        best_reduces = reduces;
        best_score = score;
        best_moved = moved;
        best_peak = peak;
        best = std::move(applied);
      }
    }
    if (!found) break;
    plan = std::move(best);
    ++result.values;
    current = measure(fn, plan, options.in_place);
  }
  // Steps that only removed instants at the height and never lowered it
  // moved bytes for nothing: the plan as it came in.
  if (current.peak.bytes >= result.before.bytes && result.values > 0) {
    plan = original;
    result.values = 0;
    current = measure(fn, plan, options.in_place);
  }
  result.after = current.peak;
  return result;
}

}  // namespace hexir::compiler
