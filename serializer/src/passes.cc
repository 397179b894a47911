#include "passes.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "hexir/format/prelude.h"

namespace hexir::serializer {

void detect_splats(Module& module) {
  for (Constant& c : module.constants) {
    if (c.is_fill) continue;
    const size_t element = dtype_size(c.type.dtype);
    if (c.data.empty() || c.data.size() % element != 0) continue;
    bool all_equal = true;
    for (size_t i = element; i < c.data.size() && all_equal; i += element)
      all_equal = std::memcmp(c.data.data(), c.data.data() + i, element) == 0;
    if (!all_equal) continue;
    c.is_fill = true;
    c.fill_pattern.assign(c.data.begin(), c.data.begin() + element);
    c.fill_count = c.data.size() / element;
    c.data.clear();
    c.data.shrink_to_fit();
  }
}

void dedupe_constants(Module& module) {
  std::vector<bool> used(module.constants.size(), false);
  for (const Function& fn : module.functions)
    for (const Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) used[v.constant_index] = true;

  // Key on everything that makes two constants interchangeable except the
  // bytes themselves, which are hashed (weights can be large) and compared
  // in full on a hash match. The name is not part of it: the first name wins.
  using Key = std::tuple<DType, std::vector<int64_t>, bool, std::vector<uint8_t>, uint64_t, uint64_t>;
  auto key_of = [](const Constant& c) {
    return Key{c.type.dtype,   c.type.dims,  c.is_fill,
               c.fill_pattern, c.fill_count, c.is_fill ? 0 : format::checksum64(c.data)};
  };
  std::map<Key, std::vector<int>> candidates;  // key -> indices into `kept`
  std::vector<int> remap(module.constants.size(), -1);
  std::vector<Constant> kept;
  for (size_t i = 0; i < module.constants.size(); ++i) {
    if (!used[i]) continue;
    Constant& c = module.constants[i];
    std::vector<int>& same_key = candidates[key_of(c)];
    for (int k : same_key)
      if (kept[k].data == c.data) remap[i] = k;
    if (remap[i] >= 0) continue;
    remap[i] = static_cast<int>(kept.size());
    same_key.push_back(remap[i]);
    kept.push_back(std::move(c));
  }
  module.constants = std::move(kept);
  for (Function& fn : module.functions)
    for (Value& v : fn.values)
      if (v.kind == ValueKind::kConstant) v.constant_index = remap[v.constant_index];
}

bool module_has_rodata(const Module& module) {
  return std::any_of(module.constants.begin(), module.constants.end(),
                     [](const Constant& c) { return !c.is_fill; });
}

uint64_t pack_constants(Module& module) {
  uint64_t end = 0;
  for (Constant& c : module.constants) {
    if (c.is_fill) continue;
    uint64_t offset =
        (end + format::kConstantAlignment - 1) / format::kConstantAlignment * format::kConstantAlignment;
    c.rodata_offset = offset;
    end = offset + c.byte_size;
  }
  return end;
}

namespace {

int find_root(std::vector<int>& parent, int v) {
  while (parent[v] != v) {
    parent[v] = parent[parent[v]];
    v = parent[v];
  }
  return v;
}

}  // namespace

void assign_storage(Function& fn) {
  const int value_count = static_cast<int>(fn.values.size());
  // Union-find over storage: a view joins its input's set. The representative
  // chosen is always the set's non-view value (the producer, input or constant).
  std::vector<int> parent(value_count);
  for (int v = 0; v < value_count; ++v) parent[v] = v;
  fn.program.clear();
  for (const Instruction& inst : fn.instructions) {
    if (ops::op_def(inst.kernel).is_view) {
      parent[inst.output] = find_root(parent, inst.inputs[0]);
    } else {
      fn.program.push_back(inst);
    }
  }
  for (int v = 0; v < value_count; ++v) {
    Value& value = fn.values[v];
    value.storage_root = find_root(parent, v);
  }
  for (Value& value : fn.values) {
    if (value.storage_root != &value - fn.values.data()) continue;
    switch (value.kind) {
      case ValueKind::kInput:
        value.storage = Storage::kInput;
        value.storage_index = static_cast<uint32_t>(value.input_index);
        break;
      case ValueKind::kConstant:
        value.storage = Storage::kConstant;
        value.storage_index = static_cast<uint32_t>(value.constant_index);
        break;
      case ValueKind::kInstruction:
        value.storage = Storage::kArena;
        break;
    }
  }

  // Outputs: bind the root when it can be written straight into the caller's
  // buffer, else copy.
  fn.outputs.assign(fn.returned.size(), -1);
  std::set<int> bound_roots;
  for (size_t i = 0; i < fn.returned.size(); ++i) {
    int returned = fn.returned[i];
    int root = fn.values[returned].storage_root;
    Value& root_value = fn.values[root];
    bool needs_copy = root_value.kind != ValueKind::kInstruction || bound_roots.count(root) > 0;
    if (!needs_copy) {
      bound_roots.insert(root);
      root_value.storage = Storage::kOutput;
      root_value.storage_index = static_cast<uint32_t>(i);
      fn.outputs[i] = returned;
      continue;
    }
    Value copy;
    copy.name = fn.values[returned].name + ".out" + std::to_string(i);
    copy.type = fn.values[returned].type;
    copy.byte_size = fn.values[returned].byte_size;
    copy.kind = ValueKind::kInstruction;
    copy.loc = fn.values[returned].loc;
    copy.storage = Storage::kOutput;
    copy.storage_index = static_cast<uint32_t>(i);
    int copy_id = static_cast<int>(fn.values.size());
    copy.storage_root = copy_id;
    fn.values.push_back(std::move(copy));
    Instruction inst;
    inst.kernel = ops::OpId::kCopy;
    inst.inputs = {returned};
    inst.output = copy_id;
    inst.loc = fn.values[returned].loc;
    fn.program.push_back(std::move(inst));
    fn.outputs[i] = copy_id;
  }

  // Views take their root's storage.
  for (Value& value : fn.values) {
    const Value& root = fn.values[value.storage_root];
    value.storage = root.storage;
    value.storage_index = root.storage_index;
  }

  std::vector<bool> output_taken(fn.outputs.size(), false);
  for (Argument& arg : fn.arguments) {
    arg.donated_to = -1;
    if (!arg.donate) continue;
    for (size_t j = 0; j < fn.result_types.size(); ++j) {
      if (!output_taken[j] && fn.result_types[j] == fn.values[arg.value].type) {
        output_taken[j] = true;
        arg.donated_to = static_cast<int>(j);
        break;
      }
    }
  }
}

int buffer_head(const Function& fn, int value) {
  int v = fn.values[value].storage_root;
  // Each link goes to a value written earlier, so the walk ends.
  while (fn.values[v].buffer_prev >= 0) v = fn.values[fn.values[v].buffer_prev].storage_root;
  return v;
}

Uses compute_uses(const Function& fn) {
  Uses uses;
  uses.last_read.assign(fn.values.size(), -1);
  uses.def.assign(fn.values.size(), -1);
  for (size_t i = 0; i < fn.program.size(); ++i) {
    const Instruction& inst = fn.program[i];
    for (int input : inst.inputs) uses.last_read[fn.values[input].storage_root] = static_cast<int64_t>(i);
    int root = fn.values[inst.output].storage_root;
    if (uses.def[root] < 0) uses.def[root] = static_cast<int64_t>(i);
  }
  return uses;
}

namespace {

// The argument whose value is `value`, or nullptr.
Argument* argument_of(Function& fn, int value) {
  for (Argument& arg : fn.arguments)
    if (arg.value == value) return &arg;
  return nullptr;
}

}  // namespace

void assign_in_place(Function& fn, bool arena_values) {
  const Uses uses = compute_uses(fn);
  for (size_t k = 0; k < fn.program.size(); ++k) {
    Instruction& inst = fn.program[k];
    inst.alias_mask = 0;
    if (!ops::op_def(inst.kernel).may_run_in_place) continue;
    const int out = fn.values[inst.output].storage_root;
    Value& result = fn.values[out];
    if (result.buffer_prev >= 0) continue;
    // An arena result may reuse an arena buffer; a result bound to output j
    // only the donated input whose donated_to is j.
    int target_output = -1;
    if (result.storage == Storage::kOutput) {
      target_output = static_cast<int>(result.storage_index);
    } else if (result.storage != Storage::kArena || !arena_values) {
      continue;
    }
    int best = -1;
    uint64_t best_freed = 0;
    for (int input : inst.inputs) {
      const int c = fn.values[input].storage_root;
      const Value& candidate = fn.values[c];
      if (uses.last_read[c] != static_cast<int64_t>(k)) continue;  // still read later
      if (candidate.byte_size != result.byte_size || candidate.type.dtype != result.type.dtype) continue;
      const Value& head = fn.values[buffer_head(fn, c)];
      bool legal = false;
      if (target_output < 0) {
        // Transient buffers only: never a constant, an input or an output.
        legal = head.kind == ValueKind::kInstruction && head.storage == Storage::kArena &&
                candidate.storage == Storage::kArena;
      } else if (candidate.kind == ValueKind::kInput && candidate.buffer_prev < 0) {
        const Argument* arg = argument_of(fn, c);
        legal = arg && arg->donate && arg->donated_to == target_output;
      }
      if (!legal) continue;
      // Every candidate has the result's byte size, so each frees as much;
      // the first in operand order wins a tie.
      const uint64_t freed = candidate.byte_size;
      if (best < 0 || freed > best_freed) {
        best = c;
        best_freed = freed;
      }
    }
    if (best < 0) continue;
    result.buffer_prev = best;
    for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
      if (fn.values[inst.inputs[i]].storage_root == best) inst.alias_mask |= 1u << i;
  }
}

void place_donations(Function& fn) {
  const Uses uses = compute_uses(fn);
  for (Argument& arg : fn.arguments) {
    if (!arg.donate || arg.donated_to < 0) continue;
    const int j = arg.donated_to;
    const int result = fn.values[fn.outputs[static_cast<size_t>(j)]].storage_root;
    Value& r = fn.values[result];
    if (buffer_head(fn, result) == arg.value) continue;  // an in-place chain already ends there
    // Written straight into the donated buffer: legal when the input (with
    // its views) is read by no instruction from the writer on.
    if (r.kind == ValueKind::kInstruction && r.storage == Storage::kOutput && r.buffer_prev < 0 &&
        uses.def[result] >= 0 && uses.last_read[arg.value] < uses.def[result]) {
      r.buffer_prev = arg.value;
      continue;
    }
    arg.donated_to = -1;  // no legal way: the input stays read-only
  }
  // Storage follows the buffer's head (views already share their root's).
  for (size_t v = 0; v < fn.values.size(); ++v) {
    const Value& head = fn.values[buffer_head(fn, static_cast<int>(v))];
    fn.values[v].storage = head.storage;
    fn.values[v].storage_index = head.storage_index;
  }
}

void schedule_for_memory(Function& fn) {
  const size_t n = fn.program.size();
  std::vector<int> producer(fn.values.size(), -1);  // per storage root
  for (size_t k = 0; k < n; ++k) producer[fn.values[fn.program[k].output].storage_root] = static_cast<int>(k);
  // Distinct roots each instruction reads, its predecessors, and readers left per root.
  std::vector<std::vector<int>> reads(n);
  std::vector<std::vector<int>> successors(n);
  std::vector<int> waiting(n, 0);
  std::vector<int> readers_left(fn.values.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    for (int input : fn.program[k].inputs) {
      const int root = fn.values[input].storage_root;
      if (std::find(reads[k].begin(), reads[k].end(), root) != reads[k].end()) continue;
      reads[k].push_back(root);
      ++readers_left[root];
      const int p = producer[root];
      if (p >= 0 && p != static_cast<int>(k)) {
        successors[static_cast<size_t>(p)].push_back(static_cast<int>(k));
        ++waiting[k];
      }
    }
  }
  auto arena_bytes = [&](int root) -> int64_t {
    const Value& v = fn.values[root];
    return v.storage == Storage::kArena ? static_cast<int64_t>(v.byte_size) : 0;
  };
  std::vector<int> ready;
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) ready.push_back(static_cast<int>(k));
  std::vector<Instruction> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t pick = 0;
    int64_t best = 0;
    for (size_t r = 0; r < ready.size(); ++r) {
      const int k = ready[r];
      int64_t delta = arena_bytes(fn.values[fn.program[static_cast<size_t>(k)].output].storage_root);
      for (int root : reads[static_cast<size_t>(k)])
        if (readers_left[root] == 1) delta -= arena_bytes(root);
      if (r == 0 || delta < best || (delta == best && k < ready[pick])) {
        pick = r;
        best = delta;
      }
    }
    const int k = ready[pick];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
    for (int root : reads[static_cast<size_t>(k)]) --readers_left[root];
    for (int next : successors[static_cast<size_t>(k)])
      if (--waiting[static_cast<size_t>(next)] == 0) ready.push_back(next);
    order.push_back(fn.program[static_cast<size_t>(k)]);
  }
  fn.program = std::move(order);  // a DAG: every instruction was scheduled
}

void record_workspaces(Function& fn) {
  fn.workspace_size = 0;
  std::vector<TensorType> types;
  for (Instruction& inst : fn.program) {
    types.clear();
    for (int input : inst.inputs) types.push_back(fn.values[input].type);
    inst.workspace_size = ops::workspace_bytes(inst.kernel, types, inst.params);
    inst.workspace_offset = 0;
    fn.workspace_size = std::max(fn.workspace_size, inst.workspace_size);
  }
}

void record_last_uses(Function& fn) {
  const Uses uses = compute_uses(fn);
  for (size_t v = 0; v < fn.values.size(); ++v) {
    Value& value = fn.values[v];
    value.last_use = -1;
    if (value.storage_root != static_cast<int>(v) || value.storage != Storage::kArena) continue;
    value.last_use = uses.last_read[v] >= 0 ? uses.last_read[v] : uses.def[v];
  }
}

std::vector<LiveRange> compute_live_ranges(const Function& fn) {
  const Uses uses = compute_uses(fn);
  std::vector<LiveRange> ranges;
  std::vector<int> range_of(fn.values.size(), -1);  // per buffer head
  for (size_t v = 0; v < fn.values.size(); ++v) {
    const Value& value = fn.values[v];
    if (value.storage_root != static_cast<int>(v) || value.storage != Storage::kArena) continue;
    const int head = buffer_head(fn, static_cast<int>(v));
    const int64_t def = uses.def[v] < 0 ? 0 : uses.def[v];
    const int64_t end = std::max(def, uses.last_read[v]) + 1;
    if (range_of[head] < 0) {
      range_of[head] = static_cast<int>(ranges.size());
      LiveRange range;
      range.root = head;
      range.buffer.size = fn.values[head].byte_size;
      range.buffer.lower = def;
      range.buffer.upper = end;
      ranges.push_back(range);
      continue;
    }
    PlanBuffer& buffer = ranges[static_cast<size_t>(range_of[head])].buffer;
    buffer.lower = std::min(buffer.lower, def);
    buffer.upper = std::max(buffer.upper, end);
  }
  return ranges;
}

Status plan_function_arena(Function& fn, PlanStrategy strategy, uint32_t alignment, std::string* heuristic,
                           uint64_t plan_budget_ms) {
  std::vector<LiveRange> ranges = compute_live_ranges(fn);
  std::vector<PlanBuffer> buffers;
  buffers.reserve(ranges.size());
  for (const LiveRange& r : ranges) buffers.push_back(r.buffer);
  // Scratch in the arena: one buffer per instruction that needs some, live
  // only while it runs; they follow the value buffers in `buffers`.
  std::vector<size_t> scratch_of;
  if (fn.workspace_in_arena && strategy != PlanStrategy::kFreeAtLastUse) {
    for (size_t k = 0; k < fn.program.size(); ++k) {
      if (fn.program[k].workspace_size == 0) continue;
      scratch_of.push_back(k);
      buffers.push_back({fn.program[k].workspace_size, static_cast<int64_t>(k), static_cast<int64_t>(k) + 1});
    }
  }
  if (strategy == PlanStrategy::kFreeAtLastUse) {
    // No static plan: the VM allocates at run time; offsets stay 0.
    for (Value& value : fn.values) value.arena_offset = 0;
    fn.arena_size = 0;
    fn.lower_bound = live_lower_bound(buffers);
    if (heuristic) *heuristic = "free-at-last-use";
    return ok_status();
  }
  Result<BufferPlan> plan = strategy == PlanStrategy::kNaive ? plan_naive(buffers, alignment)
                                                             : plan_arena(buffers, {alignment, plan_budget_ms});
  if (!plan.ok()) return plan.status().annotate("planning the arena of @" + fn.name);
  // The planner is checked on every compile: a wrong plan corrupts results silently.
  HEXIR_RETURN_IF_ERROR(check_buffer_plan(buffers, *plan, alignment).annotate("arena plan of @" + fn.name));
  for (size_t i = 0; i < ranges.size(); ++i) fn.values[ranges[i].root].arena_offset = plan->offsets[i];
  for (size_t j = 0; j < scratch_of.size(); ++j)
    fn.program[scratch_of[j]].workspace_offset = plan->offsets[ranges.size() + j];
  for (size_t v = 0; v < fn.values.size(); ++v)
    fn.values[v].arena_offset = fn.values[buffer_head(fn, static_cast<int>(v))].arena_offset;
  fn.arena_size = plan->size;
  fn.lower_bound = live_lower_bound(buffers);
  if (heuristic) *heuristic = plan->heuristic;
  return ok_status();
}

}  // namespace hexir::serializer
