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
    if (format::kernel_info(inst.kernel).is_view) {
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
    inst.kernel = format::KernelId::kCopy;
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

std::vector<LiveRange> compute_live_ranges(const Function& fn) {
  std::vector<int64_t> def(fn.values.size(), -1), last_use(fn.values.size(), -1);
  for (size_t i = 0; i < fn.program.size(); ++i) {
    const Instruction& inst = fn.program[i];
    for (int input : inst.inputs) last_use[fn.values[input].storage_root] = static_cast<int64_t>(i);
    int root = fn.values[inst.output].storage_root;
    if (def[root] < 0) def[root] = static_cast<int64_t>(i);
  }
  std::vector<LiveRange> ranges;
  for (size_t v = 0; v < fn.values.size(); ++v) {
    const Value& value = fn.values[v];
    if (value.storage_root != static_cast<int>(v) || value.storage != Storage::kArena) continue;
    LiveRange range;
    range.root = static_cast<int>(v);
    range.buffer.size = value.byte_size;
    range.buffer.lower = def[v] < 0 ? 0 : def[v];
    range.buffer.upper = std::max(range.buffer.lower, last_use[v]) + 1;
    ranges.push_back(range);
  }
  return ranges;
}

Status plan_function_arena(Function& fn, PlanStrategy strategy, uint32_t alignment, std::string* heuristic) {
  std::vector<LiveRange> ranges = compute_live_ranges(fn);
  std::vector<PlanBuffer> buffers;
  buffers.reserve(ranges.size());
  for (const LiveRange& r : ranges) buffers.push_back(r.buffer);
  Result<BufferPlan> plan = strategy == PlanStrategy::kNaive ? plan_naive(buffers, alignment)
                                                             : plan_greedy_by_size(buffers, alignment);
  if (!plan.ok()) return plan.status().annotate("planning the arena of @" + fn.name);
  // The planner is checked on every compile: a wrong plan corrupts results silently.
  HEXIR_RETURN_IF_ERROR(check_buffer_plan(buffers, *plan, alignment).annotate("arena plan of @" + fn.name));
  for (size_t i = 0; i < ranges.size(); ++i) fn.values[ranges[i].root].arena_offset = plan->offsets[i];
  for (Value& value : fn.values) value.arena_offset = fn.values[value.storage_root].arena_offset;
  fn.arena_size = plan->size;
  fn.lower_bound = live_lower_bound(buffers);
  if (heuristic) *heuristic = plan->heuristic;
  return ok_status();
}

}  // namespace hexir::serializer
