#include "passes/storage.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/views.h"

namespace hexir::compiler {

namespace {

int find_root(std::vector<int>& parent, int v) {
  while (parent[static_cast<size_t>(v)] != v) {
    parent[static_cast<size_t>(v)] = parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
    v = parent[static_cast<size_t>(v)];
  }
  return v;
}

// An if's yielded values written straight into its results: per graph value,
// the result it is, or -1. Legal when the value is written by an op directly
// in that branch (not a nested region) and yielded once there.
std::vector<int> branch_yields(const Function& fn, const std::vector<int>& innermost) {
  std::vector<int> merged(fn.values.size(), -1);
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& node = fn.nodes[n];
    if (node.kind != NodeKind::kIfElse && node.kind != NodeKind::kIfEnd) continue;
    const Node& begin = fn.nodes[static_cast<size_t>(node.params[0])];
    const Node& end = fn.nodes[static_cast<size_t>(begin.params[1])];
    // The branch this node closes is opened by the kIfBegin (then) or the kIfElse (else).
    const int opener =
        node.kind == NodeKind::kIfElse ? static_cast<int>(node.params[0]) : static_cast<int>(begin.params[0]);
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int y = node.inputs[j];
      const Value& yv = fn.values[static_cast<size_t>(y)];
      if (yv.kind != ValueKind::kResult || yv.node < 0 || innermost[static_cast<size_t>(yv.node)] != opener)
        continue;
      const Node& writer = fn.nodes[static_cast<size_t>(yv.node)];
      if (writer.kind != NodeKind::kOp || ops::op_def(writer.op).is_view) continue;
      if (std::count(node.inputs.begin(), node.inputs.end(), y) != 1) continue;
      merged[static_cast<size_t>(y)] = end.results[j];
    }
  }
  return merged;
}

// Reads through views: per graph value that is not a view (a view's reads
// count for the value it views), how many node operands read it or a view
// of it, and the last node that does (-1: none).
struct ViewReads {
  std::vector<int> readers;
  std::vector<int> last_reader;
};

ViewReads view_reads(const Function& fn) {
  ViewReads reads;
  reads.readers.assign(fn.values.size(), 0);
  reads.last_reader.assign(fn.values.size(), -1);
  std::vector<int> root(fn.values.size());
  for (size_t v = 0; v < fn.values.size(); ++v) root[v] = static_cast<int>(v);
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const Node& node = fn.nodes[n];
    if (node.kind == NodeKind::kOp && ops::op_def(node.op).is_view)
      root[static_cast<size_t>(node.results[0])] = root[static_cast<size_t>(node.inputs[0])];
    for (int in : node.inputs) {
      const size_t r = static_cast<size_t>(root[static_cast<size_t>(in)]);
      ++reads.readers[r];
      reads.last_reader[r] = static_cast<int>(n);
    }
  }
  return reads;
}

// Loop-carried values written in place: per graph value, the carried value
// it is (substituted for it in the program), or -1. A yielded value y takes
// the carried value a's place when y has a's dtype and size, the op writing y
// runs directly in the loop's body (not in a nested loop) and y is yielded
// only there and a nowhere else; so does each value before y in an in-place
// chain (y = f(c1) in place on c1, c1 = g(c2) in place on c2, ...: nothing
// reads c_k after its successor's writer), back to a link that runs in place
// on a itself or to a fresh write, with nothing reading a after that link.
// The yield's copy is then the writes themselves: the decoder's chain of
// update_slice on its KV cache runs in the cache's own buffer.
// `innermost`: innermost_regions(fn).
std::vector<int> carried_updates(const Function& fn, const std::vector<int>& innermost,
                                 const ViewReads& reads) {
  std::vector<int> merged(fn.values.size(), -1);
  // Per value: the last node reading it or a view of it.
  const std::vector<int>& last_reader = reads.last_reader;
  for (size_t e = 0; e < fn.nodes.size(); ++e) {
    const Node& end = fn.nodes[e];
    if (end.kind != NodeKind::kLoopEnd) continue;
    const int b = static_cast<int>(end.params[0]);
    const Node& begin = fn.nodes[static_cast<size_t>(b)];
    std::vector<bool> yielded(fn.values.size(), false);
    for (int y : end.inputs) yielded[static_cast<size_t>(y)] = true;
    for (size_t j = 0; j < end.inputs.size(); ++j) {
      const int y = end.inputs[j], a = begin.results[j + 1];
      const Value& av = fn.values[static_cast<size_t>(a)];
      bool elsewhere = false;
      for (size_t k = 0; k < end.inputs.size(); ++k)
        if (k != j && (end.inputs[k] == y || end.inputs[k] == a)) elsewhere = true;
      if (elsewhere || merged[static_cast<size_t>(y)] >= 0) continue;
      // A value of this loop's own body, of a's type, written by an op.
      auto in_body = [&](int v) {
        const Value& value = fn.values[static_cast<size_t>(v)];
        if (value.kind != ValueKind::kResult || value.node <= b || static_cast<size_t>(value.node) >= e)
          return false;
        const Node& writer = fn.nodes[static_cast<size_t>(value.node)];
        return writer.kind == NodeKind::kOp && innermost[static_cast<size_t>(value.node)] == b &&
               !ops::op_def(writer.op).is_view && value.type == av.type && value.byte_size == av.byte_size &&
               merged[static_cast<size_t>(v)] < 0;
      };
      // Whether the writer of `v` reads `c` only at operands it may run in place on.
      auto runs_in_place_on = [&](int v, int c, bool* reads) {
        const Value& value = fn.values[static_cast<size_t>(v)];
        const Node& writer = fn.nodes[static_cast<size_t>(value.node)];
        const ops::OpDef& def = ops::op_def(writer.op);
        bool legal = true;
        *reads = false;
        for (size_t i = 0; i < writer.inputs.size(); ++i) {
          if (writer.inputs[i] != c) continue;
          *reads = true;
          if (i >= 32 || !((def.in_place_inputs >> i) & 1u)) legal = false;
        }
        return !*reads || (legal && def.may_run_in_place && value.result == 0);
      };
      if (!in_body(y)) continue;
      // The chain y <- c1 <- c2 ... back to a write of a (in place) or a
      // fresh write: each link's writer runs in place on the previous value,
      // which nothing reads after it. All of it then lives in a's slot.
      std::vector<int> chain = {y};
      bool ok = false;
      for (int cur = y;;) {
        const int w = fn.values[static_cast<size_t>(cur)].node;
        bool reads_a = false;
        if (!runs_in_place_on(cur, a, &reads_a)) break;
        if (reads_a) {
          ok = last_reader[static_cast<size_t>(a)] <= w;
          break;
        }
        int next = -1;
        for (int c : fn.nodes[static_cast<size_t>(w)].inputs) {
          bool reads_c = false;
          if (c == cur || !in_body(c) || yielded[static_cast<size_t>(c)] ||
              last_reader[static_cast<size_t>(c)] != w || !runs_in_place_on(cur, c, &reads_c))
            continue;
          next = c;
          break;
        }
        if (next < 0) {  // a fresh write: a must be dead by then
          ok = last_reader[static_cast<size_t>(a)] <= w;
          break;
        }
        chain.push_back(next);
        cur = next;
      }
      if (!ok) continue;
      for (int v : chain) merged[static_cast<size_t>(v)] = a;
    }
  }
  return merged;
}

// Carried values that live in a donated input's buffer (a KV cache updated
// in place by the loop): per graph value, the argument value it is, or -1.
// Legal when the loop is not inside another loop, the carried value's initial
// value is a donated argument that nothing else reads (nor a view of it, nor
// a return), and the loop's result for it is returned (the donation's output,
// of the argument's type). The initial copy then disappears and the caller's
// buffer is the carried value throughout.
std::vector<int> carried_in_donated_inputs(const Function& fn, const ViewReads& reads) {
  std::vector<int> merged(fn.values.size(), -1);
  const std::vector<int>& readers = reads.readers;
  std::vector<int> returned(fn.values.size(), 0);
  for (int out : fn.outputs) ++returned[static_cast<size_t>(out)];
  int depth = 0;
  for (const Node& node : fn.nodes) {
    if (node.kind == NodeKind::kLoopEnd) --depth;
    if (node.kind != NodeKind::kLoopBegin) continue;
    if (depth++ > 0) continue;
    const Node& end = fn.nodes[static_cast<size_t>(node.params[1])];
    for (size_t j = 2; j < node.inputs.size(); ++j) {
      const int x = node.inputs[j], a = node.results[j - 1], r = end.results[j - 2];
      const Value& xv = fn.values[static_cast<size_t>(x)];
      if (xv.kind != ValueKind::kInput || !fn.arguments[static_cast<size_t>(xv.input_index)].donate) continue;
      // An explicit donation names the output the loop's result must be.
      if (const int to = fn.arguments[static_cast<size_t>(xv.input_index)].donate_to;
          to >= 0 && fn.outputs[static_cast<size_t>(to)] != r)
        continue;
      if (readers[static_cast<size_t>(x)] != 1 || returned[static_cast<size_t>(x)] != 0) continue;
      if (returned[static_cast<size_t>(r)] == 0 || end.inputs[j - 2] == a) continue;
      merged[static_cast<size_t>(a)] = x;
    }
  }
  return merged;
}

// Per graph value: the value whose slot it uses in the program (a loop's
// yielded value its carried value's, a carried value its donated input's, a
// branch's yielded value the if's result), or -1. Chains are at most two long.
// `innermost`: innermost_regions(fn); `in_input`: carried_in_donated_inputs.
std::vector<int> slot_substitutions(const Function& fn, const std::vector<int>& innermost,
                                    const ViewReads& reads, const std::vector<int>& in_input) {
  const int graph_values = static_cast<int>(fn.values.size());
  std::vector<int> merged = carried_updates(fn, innermost, reads);
  const std::vector<int> in_result = branch_yields(fn, innermost);
  for (int v = 0; v < graph_values; ++v) {
    if (in_input[static_cast<size_t>(v)] >= 0)
      merged[static_cast<size_t>(v)] = in_input[static_cast<size_t>(v)];
    if (in_result[static_cast<size_t>(v)] >= 0)
      merged[static_cast<size_t>(v)] = in_result[static_cast<size_t>(v)];
  }
  // An extent keeps its own slot: the bounded values name it, and the
  // instruction writing it must write that slot (a branch's count is copied
  // into the if's result instead).
  for (const Value& value : fn.values)
    if (value.extent >= 0) merged[static_cast<size_t>(value.extent)] = -1;
  return merged;
}

// The program of a function, built node by node, and the storage its values
// share: a union-find over storage where a view joins its input's set, a
// loop's result its carried value's, an in-place update its carried value's.
// The representative chosen is always the set's written value (the producer,
// input, constant or carried value).
class ProgramBuilder {
 public:
  // `merged`: slot_substitutions(fn); `views`: plan_strided_views(fn) when
  // strided_views.
  ProgramBuilder(const Function& fn, FunctionPlan& plan, std::vector<int> merged, StridedViews views,
                 bool strided_views)
      : fn_(fn),
        plan_(plan),
        graph_values_(static_cast<int>(fn.values.size())),
        strided_views_(strided_views),
        merged_(std::move(merged)),
        parent_(static_cast<size_t>(graph_values_)),
        views_(std::move(views)) {
    for (int v = 0; v < graph_values_; ++v) parent_[static_cast<size_t>(v)] = v;
    for (int v = 0; v < graph_values_; ++v)
      if (merged_[static_cast<size_t>(v)] >= 0) parent_[static_cast<size_t>(v)] = subst(v);
  }

  // Emits plan.program: control nodes as control instructions, views as
  // nothing (they join their input's storage), every other op as one instruction.
  void build() {
    for (size_t n = 0; n < fn_.nodes.size(); ++n) {
      const Node& node = fn_.nodes[n];
      if (node.kind == NodeKind::kIfBegin) {
        begin_branch(n, node);
      } else if (node.kind == NodeKind::kIfElse || node.kind == NodeKind::kIfEnd) {
        end_branch(n, node);
      } else if (node.kind == NodeKind::kLoopBegin) {
        begin_loop(n, node);
      } else if (node.kind == NodeKind::kLoopEnd) {
        end_loop(n, node);
      } else if (node.kind == NodeKind::kFail) {
        emit_fail(n, node);
      } else if (node.kind == NodeKind::kOp && strided_views_ && views_.node[n] != StridedViews::kAsBefore) {
        view_or_materialize(n, node);
      } else if (ops::op_def(node.op).is_view) {
        parent_[static_cast<size_t>(node.results[0])] = root(subst(node.inputs[0]));
      } else {
        emit_op(n, node);
      }
    }
  }

  // Sets every value's storage root and each root's storage, from its kind:
  // inputs are Input bindings, constants Constant slots, results Arena.
  void assign_roots() {
    const int all_values = graph_values_ + static_cast<int>(plan_.added.size());
    plan_.values.resize(static_cast<size_t>(all_values));
    for (int v = 0; v < all_values; ++v) plan_.values[static_cast<size_t>(v)].storage_root = root(v);
    // The values holding a bounded dim's extent (and views of them) live in the extent table.
    std::vector<bool> is_extent(static_cast<size_t>(all_values), false);
    for (int v = 0; v < all_values; ++v)
      if (const int e = value_at(fn_, plan_, v).extent; e >= 0)
        is_extent[static_cast<size_t>(plan_.values[static_cast<size_t>(e)].storage_root)] = true;
    for (int v = 0; v < all_values; ++v) {
      ValuePlan& p = plan_.values[static_cast<size_t>(v)];
      if (p.storage_root != v) continue;
      const Value& value = value_at(fn_, plan_, v);
      switch (value.kind) {
        case ValueKind::kInput:
          p.storage = Storage::kInput;
          p.storage_index = static_cast<uint32_t>(value.input_index);
          break;
        case ValueKind::kConstant:
          p.storage = Storage::kConstant;
          p.storage_index = static_cast<uint32_t>(value.constant);
          break;
        case ValueKind::kResult:
          p.storage = is_extent[static_cast<size_t>(v)] ? Storage::kExtent : Storage::kArena;
          break;
      }
    }
  }

  const StridedViews& views() const { return views_; }
  // Per materialized view: (the view its copy reads, its node).
  const std::vector<std::pair<int, int>>& materialized() const { return materialized_; }

 private:
  // The value whose slot `v` uses (slot_substitutions).
  int subst(int v) const {
    while (v < graph_values_ && merged_[static_cast<size_t>(v)] >= 0) v = merged_[static_cast<size_t>(v)];
    return v;
  }
  int root(int v) { return find_root(parent_, v); }

  // A value the plan adds: ids after the graph's (plan.added).
  int add_value(std::string name, TensorType type, uint64_t bytes, int extent = -1) {
    Value value;
    value.name = std::move(name);
    value.type = std::move(type);
    value.byte_size = bytes;
    value.extent = extent;  // a bounded view keeps its value's run-time extent
    value.kind = ValueKind::kResult;
    const int id = graph_values_ + static_cast<int>(plan_.added.size());
    plan_.added.push_back(std::move(value));
    parent_.push_back(id);
    return id;
  }

  void copy(int from, int to) {
    Instruction inst;
    inst.op = ops::OpId::kCopy;
    inst.inputs = {from};
    inst.outputs = {to};
    plan_.program.push_back(std::move(inst));
  }

  void begin_branch(size_t n, const Node& node) {
    Instruction inst;
    inst.control = Control::kBranchIfZero;
    inst.node = static_cast<int>(n);
    inst.inputs = {subst(node.inputs[0])};
    branch_at_.push_back(static_cast<int64_t>(plan_.program.size()));
    plan_.program.push_back(std::move(inst));
  }

  // kIfElse or kIfEnd: the branch's yields are copies into the if's results
  // (none for values written there already); then the jump over the else
  // branch, or the end of the if.
  void end_branch(size_t n, const Node& node) {
    const Node& begin = fn_.nodes[static_cast<size_t>(node.params[0])];
    const Node& end = fn_.nodes[static_cast<size_t>(begin.params[1])];
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int to = subst(end.results[j]);
      if (root(subst(node.inputs[j])) != root(to)) copy(subst(node.inputs[j]), to);
    }
    const int64_t at = branch_at_.back();
    if (node.kind == NodeKind::kIfElse) {
      Instruction jump;
      jump.control = Control::kJump;
      jump.node = static_cast<int>(n);
      branch_at_.back() = static_cast<int64_t>(plan_.program.size());
      plan_.program.push_back(std::move(jump));
      plan_.program[static_cast<size_t>(at)].target = static_cast<int64_t>(plan_.program.size());
    } else {
      plan_.program[static_cast<size_t>(at)].target = static_cast<int64_t>(plan_.program.size());
      branch_at_.pop_back();
    }
  }

  // The carried values take their initial values (copies); the counter is
  // the induction variable's value.
  void begin_loop(size_t n, const Node& node) {
    for (size_t j = 2; j < node.inputs.size(); ++j)
      if (subst(node.results[j - 1]) != node.inputs[j]) copy(node.inputs[j], subst(node.results[j - 1]));
    Instruction inst;
    inst.control = Control::kLoopBegin;
    inst.node = static_cast<int>(n);
    inst.inputs = {node.inputs[0], node.inputs[1]};
    inst.outputs = {node.results[0]};
    loop_begin_at_.push_back(static_cast<int64_t>(plan_.program.size()));
    plan_.program.push_back(std::move(inst));
  }

  // The yield: each carried value takes its next value. A yielded value that
  // is another carried value of this loop (a swap) is first copied aside, so
  // no copy reads a value an earlier one overwrote. Then the back edge.
  void end_loop(size_t n, const Node& node) {
    const Node& begin = fn_.nodes[static_cast<size_t>(node.params[0])];
    std::vector<int> sources(node.inputs.size());
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int y = subst(node.inputs[j]);
      int y_root = root(y);
      sources[j] = y;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        if (k == j || root(begin.results[k + 1]) != y_root) continue;
        const Value& yv = fn_.values[static_cast<size_t>(node.inputs[j])];
        const int aside = add_value(yv.name + ".yield" + std::to_string(j), yv.type, yv.byte_size);
        copy(y, aside);
        sources[j] = aside;
        break;
      }
    }
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const int a = subst(begin.results[j + 1]);
      if (root(sources[j]) != root(a)) copy(sources[j], a);
      parent_[static_cast<size_t>(node.results[j])] = root(a);  // the result is the carried value
    }
    const int64_t head = loop_begin_at_.back();
    loop_begin_at_.pop_back();
    Instruction next;
    next.control = Control::kLoopNext;
    next.node = static_cast<int>(n);
    next.inputs = {begin.inputs[1], begin.results[0]};
    next.outputs = {begin.results[0]};
    next.target = head + 1;
    next.step = begin.params[0];
    plan_.program[static_cast<size_t>(head)].target = static_cast<int64_t>(plan_.program.size()) + 1;
    plan_.loops.emplace_back(head, static_cast<int64_t>(plan_.program.size()));
    plan_.program.push_back(std::move(next));
  }

  void emit_fail(size_t n, const Node& node) {
    Instruction inst;
    inst.control = Control::kFail;
    inst.node = static_cast<int>(n);
    inst.message = node.message;
    plan_.program.push_back(std::move(inst));
  }

  // A strided view shares its base's storage; a materialized one is one copy
  // from a view of the base into the result.
  void view_or_materialize(size_t n, const Node& node) {
    const int result = node.results[0];
    const int base = root(subst(node.inputs[0]));
    if (views_.node[n] == StridedViews::kView) {
      parent_[static_cast<size_t>(result)] = base;
      return;
    }
    const Value& rv = fn_.values[static_cast<size_t>(result)];
    const int view = add_value(rv.name + ".view", rv.type, rv.byte_size, rv.extent);
    parent_[static_cast<size_t>(view)] = base;
    materialized_.emplace_back(view, static_cast<int>(n));
    copy(view, subst(result));
  }

  void emit_op(size_t n, const Node& node) {
    Instruction inst;
    inst.op = node.op;
    inst.node = static_cast<int>(n);
    for (int in : node.inputs) inst.inputs.push_back(subst(in));
    for (int out : node.results) inst.outputs.push_back(subst(out));
    if (inst.outputs != node.results) {  // writes a carried value in place
      inst.writes_carried = true;
      for (size_t i = 0; i < inst.inputs.size() && i < 32; ++i)
        if (inst.inputs[i] == inst.outputs[0]) inst.alias_mask |= 1u << i;
    }
    plan_.program.push_back(std::move(inst));
  }

  const Function& fn_;
  FunctionPlan& plan_;
  const int graph_values_;
  const bool strided_views_;
  const std::vector<int> merged_;  // slot_substitutions
  std::vector<int> parent_;        // the union-find over storage, per value id
  const StridedViews views_;
  std::vector<std::pair<int, int>> materialized_;
  std::vector<int64_t> loop_begin_at_;  // open loops: program index of their kLoopBegin
  std::vector<int64_t> branch_at_;      // open ifs: program index of their kBranchIfZero, then of their kJump
};

// Outputs: the root is bound to the output when it can be written straight
// into the caller's buffer, else the output is a copy. A loop's result
// carried in its donated input's buffer (`in_input`) is bound to that buffer,
// which decides the donation.
void bind_outputs(const Function& fn, FunctionPlan& plan, const std::vector<int>& in_input) {
  plan.outputs.assign(fn.outputs.size(), -1);
  plan.donated_to.assign(fn.arguments.size(), -1);
  plan.donation_refused.assign(fn.arguments.size(), {});
  std::set<int> bound_roots;
  for (size_t i = 0; i < fn.outputs.size(); ++i) {
    const int returned = fn.outputs[i];
    const int root = plan.values[static_cast<size_t>(returned)].storage_root;
    if (const Value& r = value_at(fn, plan, root);
        r.kind == ValueKind::kInput && returned != root && bound_roots.count(root) == 0 &&
        value_at(fn, plan, returned).kind == ValueKind::kResult &&
        std::find(in_input.begin(), in_input.end(), root) != in_input.end() && r.type == fn.result_types[i]) {
      bound_roots.insert(root);
      plan.donated_to[static_cast<size_t>(r.input_index)] = static_cast<int>(i);
      plan.outputs[i] = returned;
      continue;
    }
    const Value& returned_value = value_at(fn, plan, returned);
    // A result whose bounded dim is not the leading one is laid out at its
    // actual extent (compact) for the caller; an extent stays in the table.
    const bool compact = ops::bounded_is_padded(returned_value.type);
    const bool needs_copy = value_at(fn, plan, root).kind != ValueKind::kResult || bound_roots.count(root) > 0 ||
                            plan.values[static_cast<size_t>(root)].storage == Storage::kExtent || compact;
    if (!needs_copy) {
      bound_roots.insert(root);
      plan.values[static_cast<size_t>(root)].storage = Storage::kOutput;
      plan.values[static_cast<size_t>(root)].storage_index = static_cast<uint32_t>(i);
      plan.outputs[i] = returned;
      continue;
    }
    const Value& source = fn.values[static_cast<size_t>(returned)];
    Value copy;
    copy.name = source.name + ".out" + std::to_string(i);
    copy.type = source.type;
    copy.byte_size = source.byte_size;
    copy.kind = ValueKind::kResult;
    copy.loc = source.loc;
    copy.extent = returned_value.extent;
    const int copy_id = value_count(fn, plan);
    plan.added.push_back(std::move(copy));
    ValuePlan copy_plan;
    copy_plan.storage_root = copy_id;
    copy_plan.storage = Storage::kOutput;
    copy_plan.storage_index = static_cast<uint32_t>(i);
    plan.values.push_back(copy_plan);
    Instruction inst;
    inst.op = compact ? ops::OpId::kCompact : ops::OpId::kCopy;
    inst.inputs = {returned};
    if (compact) inst.inputs.push_back(returned_value.extent);
    inst.outputs = {copy_id};
    plan.program.push_back(std::move(inst));
    plan.outputs[i] = copy_id;
  }
}

// Where each strided view lies in its root (offsets and strides are relative
// to the graph value viewed, which shares its storage root's buffer from its
// start), and the bytes the program would copy without strided views.
void place_strided_views(const Function& fn, FunctionPlan& plan, const StridedViews& views,
                         const std::vector<std::pair<int, int>>& materialized) {
  auto place = [&](int v, const ops::ViewLayout& layout) {
    ValuePlan& p = plan.values[static_cast<size_t>(v)];
    if (p.storage_root == v) return;
    p.view_offset = layout.offset;
    p.view_strides = layout.strides;
    p.partial_view = layout.offset != 0 || layout.strided() ||
                     value_at(fn, plan, v).byte_size != value_at(fn, plan, p.storage_root).byte_size;
  };
  const int graph_values = static_cast<int>(fn.values.size());
  for (int v = 0; v < graph_values; ++v) place(v, views.layout[static_cast<size_t>(v)]);
  for (const auto& [view, node] : materialized) {
    place(view, views.source[static_cast<size_t>(node)]);
    plan.copied_bytes_without_views -= value_at(fn, plan, view).byte_size;
  }
  for (size_t n = 0; n < fn.nodes.size(); ++n)
    if (views.node[n] != StridedViews::kAsBefore && fn.nodes[n].op != ops::OpId::kReshape)
      plan.copied_bytes_without_views += fn.values[static_cast<size_t>(fn.nodes[n].results[0])].byte_size;
}

// Each donated input takes the output it names (Argument::donate_to), or
// else the first output of its type not taken yet whose writer reads it (a
// cache's update), or else the first of its type: outputs queued per type.
// What cannot be given an output is recorded in donation_refused.
void donate_inputs(const Function& fn, FunctionPlan& plan) {
  using TypeKey = std::pair<DType, std::vector<int64_t>>;
  std::map<TypeKey, std::set<int>> free_outputs;  // per type: output indices
  const size_t result_count = std::min(fn.result_types.size(), fn.outputs.size());
  std::vector<int> taken(result_count, -1);  // per output: the argument donated to it
  for (size_t a = 0; a < plan.donated_to.size(); ++a)
    if (const int j = plan.donated_to[a]; j >= 0 && static_cast<size_t>(j) < result_count)
      taken[static_cast<size_t>(j)] = static_cast<int>(a);
  auto input_name = [&](size_t a) { return "%" + fn.values[static_cast<size_t>(fn.arguments[a].value)].name; };
  auto output_text = [&](size_t j) {
    return " to output " + std::to_string(j) + (j < fn.output_names.size() ? " '" + fn.output_names[j] + "'" : "");
  };
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (!arg.donate || arg.donate_to < 0 || plan.donated_to[a] >= 0) continue;
    const size_t j = static_cast<size_t>(arg.donate_to);
    if (j >= result_count) continue;  // check_donations refused it
    if (taken[j] >= 0) {
      plan.donation_refused[a] = output_text(j) + ": a loop carries " + input_name(static_cast<size_t>(taken[j])) +
                                 " in the caller's buffer to that output";
      continue;
    }
    plan.donated_to[a] = static_cast<int>(j);
    taken[j] = static_cast<int>(a);
  }
  // Per value: the outputs (ascending) whose writer reads it.
  std::map<int, std::vector<int>> read_by_output;
  for (size_t j = 0; j < result_count; ++j) {
    if (taken[j] >= 0) continue;
    free_outputs[{fn.result_types[j].dtype, fn.result_types[j].dims}].insert(static_cast<int>(j));
    const Value& out = fn.values[static_cast<size_t>(fn.outputs[j])];
    if (out.kind == ValueKind::kResult && out.node >= 0)
      for (int operand : fn.nodes[static_cast<size_t>(out.node)].inputs)
        read_by_output[operand].push_back(static_cast<int>(j));
  }
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (!arg.donate || arg.donate_to >= 0 || plan.donated_to[a] >= 0) continue;
    const TensorType& type = fn.values[static_cast<size_t>(arg.value)].type;
    auto it = free_outputs.find(TypeKey{type.dtype, type.dims});
    if (it == free_outputs.end() || it->second.empty()) {
      plan.donation_refused[a] = ": no output of type " + type.to_string() + " is left for it";
      continue;
    }
    std::set<int>& candidates = it->second;
    int chosen = *candidates.begin();
    if (auto readers = read_by_output.find(arg.value); readers != read_by_output.end())
      for (int j : readers->second)
        if (candidates.count(j)) {
          chosen = j;
          break;
        }
    plan.donated_to[a] = chosen;
    candidates.erase(chosen);
  }
}

}  // namespace

uint64_t copied_bytes(const Function& fn, const FunctionPlan& plan) {
  uint64_t bytes = 0;
  for (const Instruction& inst : plan.program) {
    if (inst.control != Control::kNone || inst.outputs.empty()) continue;
    if (inst.op == ops::OpId::kTranspose || inst.op == ops::OpId::kSlice || inst.op == ops::OpId::kExpand ||
        inst.op == ops::OpId::kCopy)
      for (int out : inst.outputs) bytes += value_at(fn, plan, out).byte_size;
  }
  return bytes;
}

void assign_storage(const Function& fn, FunctionPlan& plan, bool strided_views) {
  plan = FunctionPlan();
  const std::vector<int> innermost = innermost_regions(fn);
  const ViewReads reads = view_reads(fn);
  const std::vector<int> in_input = carried_in_donated_inputs(fn, reads);
  ProgramBuilder program(fn, plan, slot_substitutions(fn, innermost, reads, in_input),
                         strided_views ? plan_strided_views(fn, innermost) : StridedViews{}, strided_views);
  program.build();
  program.assign_roots();
  bind_outputs(fn, plan, in_input);
  // Views take their root's storage.
  for (ValuePlan& p : plan.values) {
    const ValuePlan& root = plan.values[static_cast<size_t>(p.storage_root)];
    p.storage = root.storage;
    p.storage_index = root.storage_index;
  }
  plan.copied_bytes = copied_bytes(fn, plan);
  plan.copied_bytes_without_views = plan.copied_bytes;
  if (strided_views) place_strided_views(fn, plan, program.views(), program.materialized());
  donate_inputs(fn, plan);
}

int buffer_head(const FunctionPlan& plan, int value) {
  int v = plan.values[static_cast<size_t>(value)].storage_root;
  // Each link goes to a value written earlier, so the walk ends.
  while (plan.values[static_cast<size_t>(v)].buffer_prev >= 0)
    v = plan.values[static_cast<size_t>(plan.values[static_cast<size_t>(v)].buffer_prev)].storage_root;
  return v;
}

BufferHeads::BufferHeads(const FunctionPlan& plan) : up_(plan.values.size()) {
  for (size_t v = 0; v < plan.values.size(); ++v) {
    const ValuePlan& value = plan.values[v];
    const int root = value.storage_root;
    if (root != static_cast<int>(v)) {
      up_[v] = root;
    } else if (value.buffer_prev >= 0) {
      up_[v] = plan.values[static_cast<size_t>(value.buffer_prev)].storage_root;
    } else {
      up_[v] = root;
    }
  }
}

int BufferHeads::head(int value) {
  size_t v = static_cast<size_t>(value);
  // Path halving: every other value on the way skips to its grandparent.
  // Links go to values written earlier, so the walk ends.
  while (up_[v] != static_cast<int>(v)) {
    up_[v] = up_[static_cast<size_t>(up_[v])];
    v = static_cast<size_t>(up_[v]);
  }
  return static_cast<int>(v);
}

void BufferHeads::link(int value, int onto) { up_[static_cast<size_t>(head(value))] = head(onto); }

}  // namespace hexir::compiler
