#include "passes/remat.h"

#include <algorithm>
#include <map>
#include <vector>

#include "hexir/ops/cost.h"
#include "passes/in_place.h"
#include "passes/liveness.h"
#include "passes/storage.h"

namespace hexir::compiler {

namespace {

bool has_control_flow(const FunctionPlan& plan) {
  return std::any_of(plan.program.begin(), plan.program.end(),
                     [](const Instruction& inst) { return is_branching(inst.control); });
}

uint64_t instruction_flops(const Function& fn, const FunctionPlan& plan, const Instruction& inst) {
  std::vector<TensorType> in, out;
  for (int v : inst.inputs) in.push_back(value_at(fn, plan, v).type);
  for (int v : inst.outputs) out.push_back(value_at(fn, plan, v).type);
  return ops::flop_estimate(inst.op, in, out, params_of(fn, inst));
}

// Why the instruction writing a value cannot be copied to recompute it (empty: it can).
const char* not_recomputable(const Instruction& inst) {
  if (is_transfer(inst.control)) return "a copy prefetched from host memory";
  if (inst.control != Control::kNone) return "written by a control instruction";
  if (inst.writes_carried) return "written in place of a loop-carried value";
  if (inst.node < 0) return "written by a copy the compiler added";
  if (inst.outputs.size() != 1) return "written by an instruction with several results";
  if (ops::op_def(inst.op).is_view) return "a view";
  return nullptr;
}

// One way to lower the peak: recompute `value` before program index `at`,
// its inputs that are dead there recomputed too (chain) or kept alive.
struct Candidate {
  int value = -1;
  int64_t at = -1;
  bool chain = false;
  // With chain: an input dead at `at` of which an earlier copy (the original
  // or a recomputation) is written before `at` is read from that copy, whose
  // life grows to `at`, instead of being computed once more. Two moved
  // projections reading one recomputed layer norm then share it.
  bool reuse = false;
};

uint64_t flops_recomputed(const Function& fn, const FunctionPlan& plan) {
  uint64_t total = 0;
  for (const Instruction& inst : plan.program)
    if (inst.recomputed) total += instruction_flops(fn, plan, inst);
  return total;
}

// Drops the values the plan added that nothing refers to any more (no
// instruction, output, view or recomputation names them), renumbering the rest.
void drop_unused_added(const Function& fn, FunctionPlan& p) {
  const size_t graph_values = fn.values.size(), total = p.values.size();
  std::vector<bool> used(total, false);
  for (const Instruction& inst : p.program) {
    for (int v : inst.inputs) used[static_cast<size_t>(v)] = true;
    for (int v : inst.outputs) used[static_cast<size_t>(v)] = true;
  }
  for (int v : p.outputs)
    if (v >= 0) used[static_cast<size_t>(v)] = true;
  for (size_t v = 0; v < total; ++v) {
    if (!used[v]) continue;
    used[static_cast<size_t>(p.values[v].storage_root)] = true;
    if (p.values[v].recomputes >= 0) used[static_cast<size_t>(p.values[v].recomputes)] = true;
    if (p.values[v].copy_of >= 0) used[static_cast<size_t>(p.values[v].copy_of)] = true;
  }
  std::vector<int> renumber(total, -1);
  int next = static_cast<int>(graph_values);
  for (size_t v = 0; v < total; ++v)
    if (v < graph_values) renumber[v] = static_cast<int>(v);
    else if (used[v]) renumber[v] = next++;
  if (static_cast<size_t>(next) == total) return;
  auto map = [&](int& v) {
    if (v >= 0) v = renumber[static_cast<size_t>(v)];
  };
  for (Instruction& inst : p.program) {
    for (int& v : inst.inputs) map(v);
    for (int& v : inst.outputs) map(v);
  }
  for (int& v : p.outputs) map(v);
  std::vector<Value> added;
  std::vector<ValuePlan> values;
  for (size_t v = 0; v < total; ++v) {
    if (renumber[v] < 0) continue;
    ValuePlan vp = p.values[v];
    map(vp.storage_root);
    map(vp.recomputes);
    map(vp.copy_of);
    map(vp.buffer_prev);
    values.push_back(vp);
    if (v >= graph_values) added.push_back(std::move(p.added[v - graph_values]));
  }
  p.values = std::move(values);
  p.added = std::move(added);
}

// After the reads of `value` after the peak moved to its recomputation, the
// instruction first writing it may be read by nobody (the value was only
// used after the peak: the "recomputation" is a move), and so may the inputs
// that only it read. Such a writer is removed, and the first remaining
// recomputation of the value becomes its computation: it writes the value
// itself (its id and name), no longer marked; later recomputations keep
// naming it. A dead recomputation is simply removed.
void remove_dead_originals(const Function& fn, FunctionPlan& p, int value) {
  std::vector<int> work = {value};
  while (!work.empty()) {
    const int v = work.back();
    work.pop_back();
    const Reads reads = reads_of(p);
    const int root = p.values[static_cast<size_t>(v)].storage_root;
    const ValuePlan& vp = p.values[static_cast<size_t>(root)];
    const int64_t def = reads.def[static_cast<size_t>(root)];
    if (vp.storage != Storage::kArena || !reads.at[static_cast<size_t>(root)].empty() || def < 0) continue;
    if (value_at(fn, p, root).kind != ValueKind::kResult) continue;
    const Instruction writer = p.program[static_cast<size_t>(def)];
    if (not_recomputable(writer)) continue;
    const bool original = vp.recomputes < 0;
    auto first_recomputation = [&]() -> int64_t {
      for (size_t k = 0; k < p.program.size(); ++k) {
        const Instruction& inst = p.program[k];
        if (inst.recomputed && p.values[static_cast<size_t>(inst.outputs[0])].recomputes == root)
          return static_cast<int64_t>(k);
      }
      return -1;
    };
    if (original && first_recomputation() < 0) continue;  // nothing would compute it
    p.program.erase(p.program.begin() + def);
    if (original) {
      Instruction& first = p.program[static_cast<size_t>(first_recomputation())];
      const int copy = first.outputs[0];
      first.recomputed = false;
      p.values[static_cast<size_t>(copy)].recomputes = -1;
      for (Instruction& inst : p.program) {
        for (int& in : inst.inputs)
          if (in == copy) in = root;
        for (int& out : inst.outputs)
          if (out == copy) out = root;
      }
      // Views of the copy view the value (the same type, so the same view).
      for (size_t w = 0; w < p.values.size(); ++w)
        if (static_cast<int>(w) != copy && p.values[w].storage_root == copy) p.values[w].storage_root = root;
    }
    for (int in : writer.inputs) work.push_back(in);
  }
  drop_unused_added(fn, p);
}

// Applies a candidate to a copy of `plan`; returns the FLOPs it adds.
struct Applied {
  FunctionPlan plan;
  uint64_t flops = 0;
  int instructions = 0;
  int reused = 0;  // inputs read from an earlier copy (Candidate::reuse)
};

Applied apply(const Function& fn, const FunctionPlan& base, const Reads& reads, const Candidate& c,
              int max_chain) {
  Applied out{base, 0, 0, 0};
  FunctionPlan& p = out.plan;
  std::vector<Instruction> inserted;
  std::map<int, int> remade;  // value id (a root or a view of one) -> its recomputed counterpart
  auto root_of = [&](int v) { return p.values[static_cast<size_t>(v)].storage_root; };
  auto add_value = [&](int from, int root_or_self) {
    Value value = value_at(fn, p, from);
    const int original = p.values[static_cast<size_t>(root_of(from))].recomputes >= 0
                             ? p.values[static_cast<size_t>(root_of(from))].recomputes
                             : root_of(from);
    const std::string base_name = value_at(fn, p, original).name;
    int n = 1;
    for (const ValuePlan& vp : p.values)
      if (vp.recomputes == original) ++n;
    value.name = (from == root_of(from) ? base_name : value.name) + ".remat" + std::to_string(n);
    value.kind = ValueKind::kResult;
    value.node = -1;
    value.input_index = -1;
    value.constant = -1;
    const int id = value_count(fn, p);
    p.added.push_back(std::move(value));
    ValuePlan vp;
    vp.storage = Storage::kArena;
    vp.storage_root = root_or_self < 0 ? id : root_or_self;
    if (root_or_self < 0) vp.recomputes = original;
    p.values.push_back(vp);
    return id;
  };
  // A value is live at `c.at` anyway when it is not arena (inputs, constants,
  // outputs keep their contents) or something reads it from there on.
  auto live_there = [&](int v) {
    const int root = root_of(v);
    if (p.values[static_cast<size_t>(root)].storage != Storage::kArena) return true;
    const std::vector<int64_t>& at = reads.at[static_cast<size_t>(root)];
    return !at.empty() && at.back() >= c.at;
  };
  // The latest copy of the same value as `root` written before `c.at`; -1: none.
  auto earlier_copy = [&](int root) {
    const int original = p.values[static_cast<size_t>(root)].recomputes >= 0
                             ? p.values[static_cast<size_t>(root)].recomputes
                             : root;
    int found = -1;
    for (size_t w = 0; w < reads.def.size(); ++w) {
      const ValuePlan& wp = base.values[w];
      if (static_cast<int>(w) == root || wp.storage_root != static_cast<int>(w) || wp.storage != Storage::kArena)
        continue;
      if (static_cast<int>(w) != original && wp.recomputes != original) continue;
      const int64_t def = reads.def[w];
      if (def >= 0 && def < c.at && (found < 0 || def > reads.def[static_cast<size_t>(found)]))
        found = static_cast<int>(w);
    }
    return found;
  };
  int budget = max_chain;
  auto remake = [&](auto&& self, int v, bool force) -> int {
    if (auto it = remade.find(v); it != remade.end()) return it->second;
    const int root = root_of(v);
    if (!force && (live_there(v) || !c.chain || budget <= 0)) return v;
    if (!force && c.reuse && v == root)
      if (const int copy = earlier_copy(root); copy >= 0) {
        ++out.reused;
        return copy;
      }
    const int64_t def = reads.def[static_cast<size_t>(root)];
    if (def < 0) return v;
    const Instruction& writer = base.program[static_cast<size_t>(def)];
    if (!force && not_recomputable(writer)) return v;
    int new_root = -1;
    if (auto it = remade.find(root); it != remade.end()) {
      new_root = it->second;
    } else {
      --budget;
      Instruction inst = writer;
      inst.alias_mask = 0;
      inst.recomputed = true;
      for (int& in : inst.inputs) in = self(self, in, false);
      new_root = add_value(root, -1);
      inst.outputs = {new_root};
      ++out.instructions;
      inserted.push_back(std::move(inst));
      remade[root] = new_root;
    }
    if (v == root) return new_root;
    const int view = add_value(v, new_root);
    remade[v] = view;
    return view;
  };
  remake(remake, c.value, true);
  // Later reads of the value (or a view of it) read the recomputation.
  const int64_t n_inserted = static_cast<int64_t>(inserted.size());
  p.program.insert(p.program.begin() + c.at, inserted.begin(), inserted.end());
  for (size_t k = static_cast<size_t>(c.at + n_inserted); k < p.program.size(); ++k)
    for (int& in : p.program[k].inputs)
      if (root_of(in) == c.value) in = remake(remake, in, true);
  remove_dead_originals(fn, p, c.value);
  out.flops = flops_recomputed(fn, p) - std::min(flops_recomputed(fn, base), flops_recomputed(fn, p));
  return out;
}

struct Trial {
  LivePeak peak;
  FunctionPlan finished;
};

Trial measure(const Function& fn, const FunctionPlan& plan, bool in_place) {
  Trial t;
  t.finished = finish_storage(fn, plan, in_place);
  t.peak = live_peak(fn, t.finished);
  return t;
}

bool lower(const LivePeak& a, const LivePeak& b) {
  return a.bytes < b.bytes || (a.bytes == b.bytes && a.count < b.count);
}

// Candidates at the peak instant `at`: arena values written before it, read
// after it, not read there.
std::vector<int> values_across(const Function& fn, const FunctionPlan& plan, const Reads& reads, int64_t at) {
  std::vector<int> out;
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& vp = plan.values[v];
    if (vp.storage_root != static_cast<int>(v) || vp.storage != Storage::kArena) continue;
    if (value_at(fn, plan, static_cast<int>(v)).kind != ValueKind::kResult) continue;
    const int64_t def = reads.def[v];
    const std::vector<int64_t>& r = reads.at[v];
    if (def < 0 || def >= at || r.empty() || r.back() <= at) continue;
    if (std::binary_search(r.begin(), r.end(), at)) continue;
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

Reads reads_of(const FunctionPlan& plan) {
  Reads r;
  r.at.assign(plan.values.size(), {});
  r.through_view.assign(plan.values.size(), false);
  r.def.assign(plan.values.size(), -1);
  for (size_t k = 0; k < plan.program.size(); ++k) {
    const Instruction& inst = plan.program[k];
    for (int v : inst.inputs) {
      const size_t root = static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root);
      if (root != static_cast<size_t>(v)) r.through_view[root] = true;
      std::vector<int64_t>& list = r.at[root];
      if (list.empty() || list.back() != static_cast<int64_t>(k)) list.push_back(static_cast<int64_t>(k));
    }
    for (int v : inst.outputs) {
      const size_t root = static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root);
      if (r.def[root] < 0) r.def[root] = static_cast<int64_t>(k);
    }
  }
  return r;
}

FunctionPlan finish_storage(const Function& fn, FunctionPlan plan, bool in_place) {
  assign_in_place(fn, plan, in_place);
  place_donations(fn, plan, in_place);
  record_last_uses(fn, plan);
  record_workspaces(fn, plan);
  return plan;
}

std::vector<uint64_t> live_profile(const Function& fn, const FunctionPlan& finished) {
  const size_t n = finished.program.size();
  std::vector<int64_t> delta(n + 2, 0);
  for (const LiveRange& r : compute_live_ranges(fn, finished)) {
    const int64_t lo = std::clamp<int64_t>(r.buffer.lower, 0, static_cast<int64_t>(n));
    const int64_t hi = std::clamp<int64_t>(r.buffer.upper, lo, static_cast<int64_t>(n) + 1);
    delta[static_cast<size_t>(lo)] += static_cast<int64_t>(r.buffer.size);
    delta[static_cast<size_t>(hi)] -= static_cast<int64_t>(r.buffer.size);
  }
  for (size_t k = 0; k < n; ++k) {
    delta[k] += static_cast<int64_t>(finished.program[k].workspace_size);
    delta[k + 1] -= static_cast<int64_t>(finished.program[k].workspace_size);
  }
  std::vector<uint64_t> profile(n + 1);
  int64_t live = 0;
  for (size_t k = 0; k <= n; ++k) {
    live += delta[k];
    profile[k] = static_cast<uint64_t>(std::max<int64_t>(live, 0));
  }
  return profile;
}

LivePeak live_peak(const Function& fn, const FunctionPlan& finished) {
  LivePeak peak;
  const std::vector<uint64_t> profile = live_profile(fn, finished);
  for (size_t k = 0; k < profile.size(); ++k) {
    if (peak.at < 0 || profile[k] > peak.bytes) {
      peak = {profile[k], static_cast<int64_t>(k), 1};
    } else if (profile[k] == peak.bytes) {
      ++peak.count;
    }
  }
  return peak;
}

RematResult rematerialize(const Function& fn, FunctionPlan& plan, uint64_t target, const RematOptions& options) {
  RematResult result;
  Trial current = measure(fn, plan, options.in_place);
  result.before = result.after = current.peak;
  if (has_control_flow(plan)) {
    result.control_flow = true;
    return result;
  }
  for (int step = 0; step < options.max_steps && current.peak.bytes > target; ++step) {
    const Reads reads = reads_of(plan);
    const int64_t at = current.peak.at;
    const std::vector<uint64_t> profile = live_profile(fn, current.finished);
    // The pick: one that lowers the peak's height, by bytes saved per FLOP;
    // else one that only removes instants at that height, the lowest result.
    bool found = false, best_reduces = false;
    double best_score = 0;
    LivePeak best_peak;
    Applied best;
    for (int v : values_across(fn, plan, reads, at)) {
      const Instruction& writer = plan.program[static_cast<size_t>(reads.def[static_cast<size_t>(v)])];
      if (not_recomputable(writer)) continue;
      const std::vector<int64_t>& r = reads.at[static_cast<size_t>(v)];
      const int64_t next = *std::upper_bound(r.begin(), r.end(), at);
      // Where the recomputation goes: just before that read (XLA's choice),
      // or at the lowest point of the profile between the peak and it (a
      // recomputation right before its reader may land on the next large
      // value, when another peak precedes the read).
      int64_t valley = next;
      for (int64_t k = next; k > at; --k)
        if (profile[static_cast<size_t>(k)] < profile[static_cast<size_t>(valley)]) valley = k;
      // Each place, with the value's inputs kept alive, recomputed, or read
      // from an earlier copy where one exists.
      std::vector<Candidate> ways;
      for (const int64_t place : valley != next ? std::vector<int64_t>{next, valley} : std::vector<int64_t>{next})
        for (const auto& [chain, reuse] : {std::pair{false, false}, {true, false}, {true, true}})
          ways.push_back({v, place, chain, reuse});
      for (const Candidate& way : ways) {
        Applied applied = apply(fn, plan, reads, way, options.max_chain);
        if (way.chain && !way.reuse && applied.instructions <= 1) continue;  // the same as without
        if (way.reuse && applied.reused == 0) continue;                        // the same as recomputing
        const LivePeak peak = measure(fn, applied.plan, options.in_place).peak;
        if (!lower(peak, current.peak)) continue;
        const bool reduces = peak.bytes < current.peak.bytes;
        const double score = reduces ? static_cast<double>(current.peak.bytes - peak.bytes) /
                                           static_cast<double>(std::max<uint64_t>(applied.flops, 1))
                                     : 0.0;
        const bool better = !found || (reduces != best_reduces ? reduces
                                       : reduces             ? score > best_score
                                                             : lower(peak, best_peak));
        if (!better) continue;
        found = true;
        best_reduces = reduces;
        best_score = score;
        best_peak = peak;
        best = std::move(applied);
      }
    }
    if (!found) break;
    plan = std::move(best.plan);
    result.instructions += best.instructions;
    result.flops += best.flops;
    current = measure(fn, plan, options.in_place);
  }
  result.after = current.peak;
  return result;
}

std::string explain_peak(const Function& fn, const FunctionPlan& plan, bool in_place) {
  const Trial t = measure(fn, plan, in_place);
  const int64_t at = t.peak.at;
  const FunctionPlan& fin = t.finished;
  std::string out = "@" + fn.name + " peaks at " + std::to_string(t.peak.bytes) + " live bytes";
  if (at < 0 || static_cast<size_t>(at) >= fin.program.size()) return out;
  const Instruction& inst = fin.program[static_cast<size_t>(at)];
  out += " at instruction " + std::to_string(at) + " (" + ops::op_def(inst.op).name;
  if (!inst.outputs.empty()) out += " writing %" + value_at(fn, fin, inst.outputs[0]).name;
  out += ")";
  if (has_control_flow(plan)) out += "; rematerialization does not reach into functions with loops or ifs";
  if (inst.workspace_size > 0) out += "; its scratch takes " + std::to_string(inst.workspace_size) + " bytes";
  // The largest buffers live there, each with why it stays.
  std::vector<LiveRange> live;
  for (const LiveRange& r : compute_live_ranges(fn, fin))
    if (r.buffer.lower <= at && r.buffer.upper > at) live.push_back(r);
  std::sort(live.begin(), live.end(),
            [](const LiveRange& a, const LiveRange& b) { return a.buffer.size > b.buffer.size; });
  const Reads reads = reads_of(plan);
  BufferHeads heads(fin);
  out += "; live there:";
  for (size_t i = 0; i < live.size() && i < 6; ++i) {
    const int head = live[i].root;
    out += std::string(i == 0 ? " " : ", ") + "%" + value_at(fn, fin, head).name + " (" +
           std::to_string(live[i].buffer.size) + " bytes, ";
    bool read_here = false, written_here = false;
    for (int v : inst.inputs)
      if (heads.head(v) == head) read_here = true;
    for (int v : inst.outputs)
      if (heads.head(v) == head) written_here = true;
    const int64_t def = reads.def[static_cast<size_t>(head)];
    const char* why = nullptr;
    if (written_here) {
      why = "written here";
    } else if (read_here) {
      why = "read here";
    } else if (def >= 0 && not_recomputable(plan.program[static_cast<size_t>(def)])) {
      why = not_recomputable(plan.program[static_cast<size_t>(def)]);
    } else {
      why = "neither recomputing nor offloading it lowers the peak";
    }
    out += std::string(why) + ")";
  }
  if (live.size() > 6) out += " and " + std::to_string(live.size() - 6) + " more";
  return out;
}

RecomputeCount count_recomputations(const Function& fn, const FunctionPlan& plan) {
  RecomputeCount count;
  for (const Instruction& inst : plan.program) {
    if (!inst.recomputed) continue;
    ++count.instructions;
    count.flops += instruction_flops(fn, plan, inst);
  }
  return count;
}

}  // namespace hexir::compiler
