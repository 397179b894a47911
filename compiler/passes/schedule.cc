#include "passes/schedule.h"

#include <set>
#include <vector>
#include <utility>

namespace hexir::compiler {

void schedule_for_memory(const Function& fn, FunctionPlan& plan) {
  // Blocks are not reordered across control instructions (yet).
  for (const Instruction& inst : plan.program)
    if (inst.control != Control::kNone) return;
  const size_t n = plan.program.size();
  const size_t value_total = plan.values.size();
  auto root_of = [&](int v) { return plan.values[static_cast<size_t>(v)].storage_root; };
  std::vector<int> producer(value_total, -1);  // per storage root
  for (size_t k = 0; k < n; ++k)
    for (int output : plan.program[k].outputs)
      producer[static_cast<size_t>(root_of(output))] = static_cast<int>(k);
  // Distinct roots each instruction reads, its successors, and readers left per root.
  std::vector<std::vector<int>> reads(n);
  std::vector<std::vector<int>> successors(n);
  std::vector<int> waiting(n, 0);
  std::vector<int> readers_left(value_total, 0);
  std::vector<int64_t> read_by(value_total, -1);  // the last instruction that listed the root
  for (size_t k = 0; k < n; ++k) {
    for (int input : plan.program[k].inputs) {
      const int root = root_of(input);
      if (read_by[static_cast<size_t>(root)] == static_cast<int64_t>(k)) continue;
      read_by[static_cast<size_t>(root)] = static_cast<int64_t>(k);
      reads[k].push_back(root);
      ++readers_left[static_cast<size_t>(root)];
      const int p = producer[static_cast<size_t>(root)];
      if (p >= 0 && p != static_cast<int>(k)) {
        successors[static_cast<size_t>(p)].push_back(static_cast<int>(k));
        ++waiting[k];
      }
    }
  }
  // A donated input, and each value an in-place capable op makes of it,
  // keeps its last reader last: a donation's chain of updates (a KV cache
  // written layer after layer) stays legal, so the schedule never turns an
  // honoured donation into a refused one.
  std::vector<bool> keeps_last_reader(value_total, false);
  for (const Argument& arg : fn.arguments)
    if (arg.donate) keeps_last_reader[static_cast<size_t>(root_of(arg.value))] = true;
  for (size_t k = 0; k < n; ++k) {
    const Instruction& inst = plan.program[k];
    if (inst.outputs.empty() || !ops::op_def(inst.op).may_run_in_place) continue;
    const uint32_t allowed = ops::op_def(inst.op).in_place_inputs;
    for (size_t operand = 0; operand < inst.inputs.size() && operand < 32; ++operand)
      if (((allowed >> operand) & 1u) && keeps_last_reader[static_cast<size_t>(root_of(inst.inputs[operand]))])
        keeps_last_reader[static_cast<size_t>(root_of(inst.outputs[0]))] = true;
  }
  std::vector<int> last_reader(value_total, -1);
  for (size_t k = 0; k < n; ++k)
    for (int root : reads[k])
      if (keeps_last_reader[static_cast<size_t>(root)]) last_reader[static_cast<size_t>(root)] = static_cast<int>(k);
  for (size_t k = 0; k < n; ++k)
    for (int root : reads[k])
      if (const int last = last_reader[static_cast<size_t>(root)]; last >= 0 && last != static_cast<int>(k)) {
        successors[k].push_back(last);
        ++waiting[static_cast<size_t>(last)];
      }
  auto arena_bytes = [&](int root) -> int64_t {
    return plan.values[static_cast<size_t>(root)].storage == Storage::kArena
               ? static_cast<int64_t>(value_at(fn, plan, root).byte_size)
               : 0;
  };
  // Per root, the sum of the indices of its readers not yet scheduled: when
  // one reader is left, that sum names it.
  std::vector<int64_t> reader_sum(value_total, 0);
  for (size_t k = 0; k < n; ++k)
    for (int root : reads[k]) reader_sum[static_cast<size_t>(root)] += static_cast<int64_t>(k);
  // The ready instructions by (arena bytes allocated - bytes freed, index):
  // the first is the pick. A ready instruction's key changes only when it
  // becomes the last reader of one of its inputs, so each pick costs
  // O(log n) per input it reads instead of a scan of everything ready.
  std::vector<int64_t> delta(n, 0);
  std::vector<bool> is_ready(n, false);
  std::set<std::pair<int64_t, int>> ready;
  auto make_ready = [&](int k) {
    int64_t d = 0;
    for (int output : plan.program[static_cast<size_t>(k)].outputs) d += arena_bytes(root_of(output));
    for (int root : reads[static_cast<size_t>(k)])
      if (readers_left[static_cast<size_t>(root)] == 1) d -= arena_bytes(root);
    delta[static_cast<size_t>(k)] = d;
    is_ready[static_cast<size_t>(k)] = true;
    ready.insert({d, k});
  };
  for (size_t k = 0; k < n; ++k)
    if (waiting[k] == 0) make_ready(static_cast<int>(k));
  std::vector<Instruction> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int k = ready.begin()->second;
    ready.erase(ready.begin());
    is_ready[static_cast<size_t>(k)] = false;
    for (int root : reads[static_cast<size_t>(k)]) {
      const size_t r = static_cast<size_t>(root);
      reader_sum[r] -= k;
      if (--readers_left[r] != 1) continue;
      // The one reader left now frees this root: if it is ready, its key drops.
      const size_t last = static_cast<size_t>(reader_sum[r]);
      if (!is_ready[last]) continue;
      ready.erase({delta[last], static_cast<int>(last)});
      delta[last] -= arena_bytes(root);
      ready.insert({delta[last], static_cast<int>(last)});
    }
    for (int next : successors[static_cast<size_t>(k)])
      if (--waiting[static_cast<size_t>(next)] == 0) make_ready(next);
    order.push_back(plan.program[static_cast<size_t>(k)]);
  }
  plan.program = std::move(order);  // a DAG: every instruction was scheduled
}

}  // namespace hexir::compiler
