#include "passes/liveness.h"

#include <algorithm>

#include "passes/storage.h"

namespace hexir::compiler {

Uses compute_uses(const FunctionPlan& plan) {
  Uses uses;
  uses.last_read.assign(plan.values.size(), -1);
  uses.def.assign(plan.values.size(), -1);
  for (size_t i = 0; i < plan.program.size(); ++i) {
    const Instruction& inst = plan.program[i];
    for (int input : inst.inputs)
      uses.last_read[static_cast<size_t>(plan.values[static_cast<size_t>(input)].storage_root)] =
          static_cast<int64_t>(i);
    for (int output : inst.outputs) {
      const size_t root = static_cast<size_t>(plan.values[static_cast<size_t>(output)].storage_root);
      if (uses.def[root] < 0) uses.def[root] = static_cast<int64_t>(i);
    }
  }
  if (plan.loops.empty()) return uses;
  // Loops: a value written before a loop and read or written again inside it
  // is live around the back edge, so to the loop's kLoopNext (inner loops
  // first: an outer loop then sees the extended use).
  std::vector<int64_t> last_access(plan.values.size(), -1);
  for (size_t i = 0; i < plan.program.size(); ++i) {
    for (int v : plan.program[i].inputs)
      last_access[static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root)] =
          static_cast<int64_t>(i);
    for (int v : plan.program[i].outputs)
      last_access[static_cast<size_t>(plan.values[static_cast<size_t>(v)].storage_root)] =
          static_cast<int64_t>(i);
  }
  for (const auto& [begin, next] : plan.loops)
    for (size_t v = 0; v < plan.values.size(); ++v) {
      const int64_t def = uses.def[v];
      if (def < 0 || def >= begin) continue;
      if (std::max(uses.last_read[v], last_access[v]) < begin) continue;
      if (uses.last_read[v] < next) uses.last_read[v] = next;
      last_access[v] = std::max(last_access[v], next);
    }
  return uses;
}

void record_workspaces(const Function& fn, FunctionPlan& plan) {
  plan.workspace_size = 0;
  std::vector<TensorType> types;
  for (Instruction& inst : plan.program) {
    if (inst.control != Control::kNone) continue;
    types.clear();
    for (int input : inst.inputs) types.push_back(value_at(fn, plan, input).type);
    inst.workspace_size = ops::workspace_bytes(inst.op, types, params_of(fn, inst));
    inst.workspace_offset = 0;
    plan.workspace_size = std::max(plan.workspace_size, inst.workspace_size);
  }
}

void record_last_uses(const Function&, FunctionPlan& plan) {
  const Uses uses = compute_uses(plan);
  for (size_t v = 0; v < plan.values.size(); ++v) {
    ValuePlan& value = plan.values[v];
    value.last_use = -1;
    if (value.storage_root != static_cast<int>(v) || value.storage != Storage::kArena) continue;
    value.last_use = uses.last_read[v] >= 0 ? uses.last_read[v] : uses.def[v];
  }
}

std::vector<LiveRange> compute_live_ranges(const Function& fn, const FunctionPlan& plan, Storage space) {
  const Uses uses = compute_uses(plan);
  std::vector<LiveRange> ranges;
  std::vector<int> range_of(plan.values.size(), -1);  // per buffer head
  BufferHeads heads(plan);
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& value = plan.values[v];
    if (value.storage_root != static_cast<int>(v) || value.storage != space) continue;
    const int head = heads.head(static_cast<int>(v));
    const int64_t def = uses.def[v] < 0 ? 0 : uses.def[v];
    const int64_t end = std::max(def, uses.last_read[v]) + 1;
    if (range_of[static_cast<size_t>(head)] < 0) {
      range_of[static_cast<size_t>(head)] = static_cast<int>(ranges.size());
      LiveRange range;
      range.root = head;
      range.buffer.size = value_at(fn, plan, head).byte_size;
      range.buffer.lower = def;
      range.buffer.upper = end;
      ranges.push_back(range);
      continue;
    }
    PlanBuffer& buffer = ranges[static_cast<size_t>(range_of[static_cast<size_t>(head)])].buffer;
    buffer.lower = std::min(buffer.lower, def);
    buffer.upper = std::max(buffer.upper, end);
  }
  return ranges;
}

}  // namespace hexir::compiler
