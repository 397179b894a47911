#include "passes/in_place.h"

#include "passes/liveness.h"
#include "passes/storage.h"

namespace hexir::compiler {

namespace {

// Per value id: the index of the argument whose value it is, or -1.
std::vector<int> arguments_by_value(const Function& fn, const FunctionPlan& plan) {
  std::vector<int> argument(plan.values.size(), -1);
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const size_t v = static_cast<size_t>(fn.arguments[a].value);
    if (v < argument.size() && argument[v] < 0) argument[v] = static_cast<int>(a);
  }
  return argument;
}

// Whether `inst` reads root `c` through a view with an offset, strides or
// fewer bytes (docs/views.md): writing its result into c's buffer would
// overwrite elements the kernel has yet to read.
bool reads_partial_view(const FunctionPlan& plan, const Instruction& inst, int c) {
  for (int input : inst.inputs) {
    const ValuePlan& p = plan.values[static_cast<size_t>(input)];
    if (p.storage_root == c && p.partial_view) return true;
  }
  return false;
}

// Whether `inst` also reads root `c` through an operand its operator reads
// while it writes (OpDef::read_while_writing: scatter's indices and updates):
// writing over c would change what that operand reads.
bool read_while_writing(const FunctionPlan& plan, const Instruction& inst, int c) {
  const uint32_t reads = ops::op_def(inst.op).read_while_writing;
  for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
    if (((reads >> i) & 1u) && plan.values[static_cast<size_t>(inst.inputs[i])].storage_root == c)
      return true;
  return false;
}

// Sets the alias bit of every input operand of `inst` whose value lives in
// root `root`'s storage (the buffer output 0 takes over).
void set_alias_bits(const FunctionPlan& plan, Instruction& inst, int root) {
  for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
    if (plan.values[static_cast<size_t>(inst.inputs[i])].storage_root == root) inst.alias_mask |= 1u << i;
}

}  // namespace

void assign_in_place(const Function& fn, FunctionPlan& plan, bool arena_values) {
  const Uses uses = compute_uses(plan);
  BufferHeads heads(plan);
  const std::vector<int> argument = arguments_by_value(fn, plan);
  for (size_t k = 0; k < plan.program.size(); ++k) {
    Instruction& inst = plan.program[k];
    // A carried value's update has its alias bits from assign_storage.
    if (inst.control != Control::kNone || inst.writes_carried) continue;
    inst.alias_mask = 0;
    if (!ops::op_def(inst.op).may_run_in_place || inst.outputs.empty()) continue;
    // Only output 0 ever runs in place.
    const int out = plan.values[static_cast<size_t>(inst.outputs[0])].storage_root;
    ValuePlan& result = plan.values[static_cast<size_t>(out)];
    const Value& result_value = value_at(fn, plan, out);
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
    const uint32_t allowed = ops::op_def(inst.op).in_place_inputs;
    for (size_t operand = 0; operand < inst.inputs.size(); ++operand) {
      if (operand >= 32 || !((allowed >> operand) & 1u)) continue;  // the operator reads it while writing
      const int c = plan.values[static_cast<size_t>(inst.inputs[operand])].storage_root;
      const ValuePlan& candidate = plan.values[static_cast<size_t>(c)];
      const Value& candidate_value = value_at(fn, plan, c);
      if (uses.last_read[static_cast<size_t>(c)] != static_cast<int64_t>(k)) continue;  // still read later
      if (reads_partial_view(plan, inst, c)) continue;  // its elements move while the result is written
      if (read_while_writing(plan, inst, c)) continue;  // another operand reads it as it changes
      if (candidate_value.byte_size != result_value.byte_size ||
          candidate_value.type.dtype != result_value.type.dtype)
        continue;
      const int head = heads.head(c);
      bool legal = false;
      if (target_output < 0) {
        // Transient buffers only: never a constant, an input or an output.
        legal = value_at(fn, plan, head).kind == ValueKind::kResult &&
                plan.values[static_cast<size_t>(head)].storage == Storage::kArena &&
                candidate.storage == Storage::kArena;
      } else if (candidate_value.kind == ValueKind::kInput && candidate.buffer_prev < 0) {
        const int a = argument[static_cast<size_t>(c)];
        legal = a >= 0 && fn.arguments[static_cast<size_t>(a)].donate &&
                plan.donated_to[static_cast<size_t>(a)] == target_output;
      }
      if (!legal) continue;
      // Every candidate has the result's byte size, so each frees as much;
      // the first in operand order wins a tie.
      const uint64_t freed = candidate_value.byte_size;
      if (best < 0 || freed > best_freed) {
        best = c;
        best_freed = freed;
      }
    }
    if (best < 0) continue;
    result.buffer_prev = best;
    heads.link(out, best);
    set_alias_bits(plan, inst, best);
  }
}

namespace {

// The donated input `input`'s buffer for the in-place chain ending at
// `result` (straight-line programs): from the chain's first value back, each
// writer runs in place on an input it reads last (an arena result, which
// then joins the chain, or at last `input` itself). A KV cache updated layer
// after layer by update_slice: the copy into the arena before the first
// update and out of it after the last go. Links nothing unless the walk
// reaches `input`.
bool chain_to_donated_input(const Function& fn, FunctionPlan& plan, const Uses& uses, BufferHeads& heads,
                            int result, int input) {
  struct Link {
    int value, onto;
    size_t instruction;
  };
  std::vector<Link> links;
  const Value& want = value_at(fn, plan, result);
  for (int cur = heads.head(result);;) {
    const int64_t w = uses.def[static_cast<size_t>(cur)];
    if (w < 0 || plan.values[static_cast<size_t>(cur)].buffer_prev >= 0) return false;
    const Instruction& inst = plan.program[static_cast<size_t>(w)];
    if (inst.control != Control::kNone || inst.writes_carried || inst.outputs.empty() ||
        plan.values[static_cast<size_t>(inst.outputs[0])].storage_root != cur ||
        !ops::op_def(inst.op).may_run_in_place)
      return false;
    const uint32_t allowed = ops::op_def(inst.op).in_place_inputs;
    int next = -1;
    for (size_t operand = 0; operand < inst.inputs.size() && operand < 32; ++operand) {
      if (!((allowed >> operand) & 1u)) continue;
      const int c = plan.values[static_cast<size_t>(inst.inputs[operand])].storage_root;
      const Value& cv = value_at(fn, plan, c);
      if (uses.last_read[static_cast<size_t>(c)] != w || cv.byte_size != want.byte_size ||
          cv.type.dtype != want.type.dtype || reads_partial_view(plan, inst, c) ||
          read_while_writing(plan, inst, c))
        continue;
      if (c == input ||
          (cv.kind == ValueKind::kResult && plan.values[static_cast<size_t>(c)].storage == Storage::kArena)) {
        next = c;
        if (c == input) break;
      }
    }
    if (next < 0) return false;
    links.push_back({cur, next, static_cast<size_t>(w)});
    if (next == input) break;
    cur = heads.head(next);  // written before `w`: the walk ends
  }
  for (const Link& l : links) {
    plan.values[static_cast<size_t>(l.value)].buffer_prev = l.onto;
    heads.link(l.value, l.onto);
    set_alias_bits(plan, plan.program[l.instruction], l.onto);
  }
  return true;
}

// Why output value `result` cannot be computed in the buffer of donated
// input `input`, for the compile error.
std::string why_not_donated(const Function& fn, const FunctionPlan& plan, const Uses& uses, int result, int input) {
  const Value& r = value_at(fn, plan, result);
  if (r.kind == ValueKind::kInput) return "the output is the input %" + r.name + ", returned as it is";
  if (r.kind == ValueKind::kConstant) return "the output is the constant @" + r.name;
  const int64_t w = uses.def[static_cast<size_t>(result)];
  if (w < 0) return "the output is not written by an instruction of its own";
  const Instruction& writer = plan.program[static_cast<size_t>(w)];
  const std::string writer_text = std::string("`") + ops::op_def(writer.op).name + "` (instruction " +
                                  std::to_string(w) + ")";
  const int64_t read = uses.last_read[static_cast<size_t>(input)];
  if (plan.values[static_cast<size_t>(result)].storage != Storage::kOutput)
    return "the output's value %" + r.name + " is also returned as another output or read as a view";
  if (read == w)
    return "the input is read by " + writer_text + " while it writes the output (an operator that cannot run in place)";
  if (read > w) {
    const Instruction& reader = plan.program[static_cast<size_t>(read)];
    return "the input is still read by `" + std::string(ops::op_def(reader.op).name) + "` (instruction " +
           std::to_string(read) + ") when " + writer_text +
           " writes the output, and no chain of in-place updates leads from the input to it (an elementwise "
           "op or update_slice/scatter on the input, each read last where it is updated)";
  }
  return "the output's writer " + writer_text + " runs in place over another value";
}

}  // namespace

void place_donations(const Function& fn, FunctionPlan& plan, bool in_place_chains) {
  const Uses uses = compute_uses(plan);
  BufferHeads heads(plan);
  bool straight_line = true;
  for (const Instruction& inst : plan.program) straight_line = straight_line && !is_branching(inst.control);
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (!arg.donate || plan.donated_to[a] < 0) continue;
    const size_t j = static_cast<size_t>(plan.donated_to[a]);
    const int result = plan.values[static_cast<size_t>(plan.outputs[j])].storage_root;
    ValuePlan& r = plan.values[static_cast<size_t>(result)];
    if (heads.head(result) == arg.value) continue;  // an in-place chain already ends there
    if (in_place_chains && straight_line && chain_to_donated_input(fn, plan, uses, heads, result, arg.value))
      continue;
    // Written straight into the donated buffer: legal when the input (with
    // its views) is read by no instruction from the writer on.
    if (value_at(fn, plan, result).kind == ValueKind::kResult && r.storage == Storage::kOutput &&
        r.buffer_prev < 0 && uses.def[static_cast<size_t>(result)] >= 0 &&
        uses.last_read[static_cast<size_t>(arg.value)] < uses.def[static_cast<size_t>(result)]) {
      r.buffer_prev = arg.value;
      heads.link(result, arg.value);
      continue;
    }
    plan.donated_to[a] = -1;  // no legal way: plan_module refuses the donation
    plan.donation_refused[a] = " to output " + std::to_string(j) +
                               (j < fn.output_names.size() ? " '" + fn.output_names[j] + "'" : "") + ": " +
                               why_not_donated(fn, plan, uses, result, arg.value);
  }
  // Storage follows the buffer's head (views already share their root's).
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& head = plan.values[static_cast<size_t>(heads.head(static_cast<int>(v)))];
    plan.values[v].storage = head.storage;
    plan.values[v].storage_index = head.storage_index;
  }
}

}  // namespace hexir::compiler
