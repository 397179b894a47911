// The compiler's graph IR and the builder every front end goes through.
//
// A Module holds constants and functions. A function is a list of nodes in a
// topological order; each node runs one operator (ops/op.h) on values and
// gives one value per result (split gives several). The graph records only
// what the program says: where values live, in which order instructions run
// and where buffers sit in the arena are plan results (plan.h), kept beside
// the graph by the passes (compiler/passes/), never written into it.
//
// GraphBuilder checks every node as it is added (operand counts, attributes
// lowered to parameter words, the operator's result-type rule, the result
// types the front end states), so the .hxir parser (parser.h) and an importer
// share one path and a graph that was built is valid. Errors name the
// Location the front end gave ("t.hxir:2:3: ...", "model.onnx: node 'mm0'
// (MatMul): ...").
//
// A constant's bytes stay where they are until the writer streams them out:
// inline bytes (small `dense` lists), a fill pattern, or a byte range of a
// file (an .npy's data region), read in chunks (constant_data.h). Compiling a
// model never holds its weights more than once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/compiler/options.h"
#include "hexir/ops/op.h"

namespace hexir::compiler {

// Where something came from, for error messages: a position in a text file,
// or a node of an imported model. Every part is optional.
struct Location {
  std::shared_ptr<const std::string> file;  // display name of the source, shared by its locations
  int line = 0;                             // 1-based text position; 0: none
  int col = 0;
  std::string node;     // an imported node's name
  std::string op_type;  // and its operator type

  static Location text(std::shared_ptr<const std::string> file, int line, int col);
  static Location imported(std::shared_ptr<const std::string> file, std::string node,
                           std::string op_type = {});

  // "t.hxir:2:3", "model.onnx: node 'mm0' (MatMul)", "" when nothing is known.
  std::string to_string() const;
  // The same without the file ("2:3", "node 'mm0' (MatMul)"): "first defined at ...".
  std::string position() const;
};

// invalid_argument("LOCATION: what"), or just `what` for an unknown location.
Status error_at(const Location& loc, std::string_view what);

// ---- constants ----------------------------------------------------------------

// Where a constant's bytes are.
struct InlineBytes {
  std::vector<uint8_t> bytes;  // all of them (byte_size)
};
struct FillPattern {
  std::vector<uint8_t> element;  // one element, repeated element-count times
};
struct FileRange {
  std::filesystem::path path;  // read lazily, in chunks: byte_size bytes from `offset`
  uint64_t offset = 0;
};
using ConstantSource = std::variant<InlineBytes, FillPattern, FileRange>;

struct Constant {
  std::string name;  // without '@'
  TensorType type;
  uint64_t byte_size = 0;
  ConstantSource source;
  Location loc;
};

// ---- functions ----------------------------------------------------------------

enum class ValueKind : uint8_t {
  kInput,     // function argument `input_index`
  kConstant,  // a use of Module::constants[constant]
  kResult,    // result `result` of node `node` (or, in a plan, of an instruction the plan added)
};

// An SSA value of one function; becomes one VM slot.
struct Value {
  std::string name;  // without '%' or '@'
  TensorType type;
  uint64_t byte_size = 0;
  ValueKind kind = ValueKind::kResult;
  int input_index = -1;  // kInput
  int constant = -1;     // kConstant
  int node = -1;         // kResult: the node writing it; -1 for a value a plan added
  int result = 0;        // kResult: which of the node's results
  // A type with a bounded dim (TensorType::bounded): the value (i64[]) that
  // holds its actual extent at run time, set by the builder from
  // ops::extent_sources (the count result of the node that made the dim,
  // passed on by the nodes that keep it). -1: none.
  int extent = -1;
  Location loc;
};

// What a node is: an operator, or one end of a structured region. Regions
// are kept flat, in program order, between their two marker nodes
// (docs/control-flow.md):
//  - kLoopBegin: inputs [start, trip, initial carried values...] (start and
//    trip i64[]), results [induction variable (i64[]), carried values...],
//    params [step (> 0), index of its kLoopEnd];
//  - kLoopEnd: inputs [the yielded values, one per carried value], results
//    [the loop's results, one per carried value], params [index of its kLoopBegin].
// Every node between them is the body. A body value is visible only inside
// the body; the results are visible after kLoopEnd.
//  - kIfBegin: inputs [condition (bool[])], params [index of its kIfElse,
//    index of its kIfEnd]; the then-branch follows;
//  - kIfElse: inputs [the then-branch's yielded values], params [its kIfBegin];
//    the else-branch follows;
//  - kIfEnd: inputs [the else-branch's yielded values], results [the if's
//    results], params [its kIfBegin].
// A value of a branch is visible only inside that branch.
//  - kFail: no inputs or results; `message` is the error the invoke stops
//    with when it runs. A branch whose last node is a kFail yields nothing
//    (its kIfElse/kIfEnd has no inputs): the if's results come from the
//    other branch (the ONNX importer's If branch that cannot be built at the
//    compiled shapes).
enum class NodeKind : uint8_t { kOp, kLoopBegin, kLoopEnd, kIfBegin, kIfElse, kIfEnd, kFail };

struct Node {
  NodeKind kind = NodeKind::kOp;
  ops::OpId op = ops::OpId::kCopy;  // kOp only
  std::vector<int> inputs;   // value ids
  std::vector<int> results;  // value ids, one per result of the operator
  std::vector<int64_t> params;
  std::string message;  // kFail
  Location loc;
};

struct Argument {
  int value = -1;
  // The caller's buffer is written as output `donate_to` (-1: the first
  // output of the same type no other donation took). A donation the plan
  // cannot honour is a compile error (plan_module), never dropped.
  bool donate = false;
  int donate_to = -1;
};

struct Function {
  std::string name;
  Location loc;
  std::vector<Value> values;  // arguments, constant uses and node results, in the order added
  std::vector<Argument> arguments;
  std::vector<TensorType> result_types;
  std::vector<Node> nodes;   // in the order added: every input is defined before its reader
  std::vector<int> outputs;  // the value returned as each result
  // Each result's name in the executable: the returned value's name (an ONNX
  // graph's output names), made unique by position when one value is returned twice.
  std::vector<std::string> output_names;
};

struct Module {
  std::string name;
  std::vector<Constant> constants;
  std::vector<Function> functions;
};

// One module of every function of `parts`, in order (the first part's name):
// several ONNX files, or one file at several input shapes, compiled into one
// executable (a prefill at 3 lengths and a decode step). Function names must
// be unique (an error names the one given twice); constants are appended,
// renamed with a ".N" suffix where a name is taken, and identical ones are
// stored once by the writer (dedupe_constants compares their bytes).
Result<Module> merge_modules(std::vector<Module> parts);

// Each explicit donation (Argument::donate_to) names an output of the
// input's type that no other input is donated to; errors name the function,
// the input and the output.
Status check_donations(const Function& fn);

// Per node of `fn`: the node opening the region directly around it (a
// kLoopBegin, kIfBegin or kIfElse), -1 at the top level. A region's own
// markers belong to the region around it.
std::vector<int> innermost_regions(const Function& fn);

// ---- the builder --------------------------------------------------------------

// Where the parts of a node were written, for its errors. Each falls back to
// `node` when unknown (an importer gives just that).
struct NodeLocations {
  Location node;                  // the node (text: its first result name)
  Location op;                    // where the operator is named: operand counts, the result-type rule
  Location attrs;                 // its attributes (falls back to `op`)
  std::vector<Location> results;  // per result: its name (redefinitions)
  std::vector<Location> types;    // per stated result type: mismatches with the rule
};

struct NodeSpec {
  ops::OpId op = ops::OpId::kCopy;
  std::vector<int> inputs;  // value ids of the open function
  ops::AttrMap attrs;
  // The result types the front end states, checked against the rule; empty:
  // the rule's types are taken as they are. reshape takes its shape from
  // them and split its part count (ops::lower_attributes).
  std::vector<TensorType> declared;
  // One name per result; empty: names are made up ("<op>_<node>", ".<i>" per result of several).
  std::vector<std::string> names;
  NodeLocations locs;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string module_name = "module");

  void set_module_name(std::string name) { module_.name = std::move(name); }
  // The most nodes the module may hold, all functions together, checked
  // where calls are inlined (a call copies its callee: a chain of functions
  // each calling the next twice doubles at every step).
  void set_max_nodes(uint64_t max) { max_nodes_ = max; }
  uint64_t max_nodes() const { return max_nodes_; }
  // Names looked up to name inlined values uniquely: a work counter (tests
  // check it stays linear in the values inlined).
  uint64_t name_probes() const { return name_probes_; }

  // ---- constants: module-wide, named uniquely.
  Result<int> add_constant(std::string name, TensorType type, ConstantSource source, Location loc = {});
  std::optional<int> find_constant(std::string_view name) const;
  const Constant& constant(int index) const { return module_.constants[static_cast<size_t>(index)]; }
  // Fails (naming the first definition) when `name` is a constant already.
  Status check_constant_name(std::string_view name, const Location& loc) const;

  // ---- structured loops (inside a function; they nest).
  // `for %i = start to trip step S iter(%a = init, ...)`: `start` and `trip`
  // are i64[] values, step > 0. Returns [induction variable, carried values...]
  // (each carried value takes its initial value's type).
  struct LoopSpec {
    int start = -1;
    int trip = -1;
    int64_t step = 1;
    std::vector<int> inits;
    std::string induction_name;              // empty: made up
    std::vector<std::string> carried_names;  // one per init, or empty: made up
    Location loc;                            // the `for`
    std::vector<Location> carried_locs;      // per carried value (optional)
  };
  Result<std::vector<int>> begin_loop(LoopSpec spec);
  // Closes the innermost open loop: `yielded` gives each carried value's next
  // value (same count and types); returns the loop's results, named
  // `result_names` (one per carried value, or empty: made up).
  Result<std::vector<int>> end_loop(const std::vector<int>& yielded, std::vector<std::string> result_names = {},
                                    const Location& loc = {}, const std::vector<Location>& yield_locs = {});
  // `if %cond -> (types) { ... yield } else { ... yield }`: `cond` is a
  // bool[] value; each branch yields one value per result type.
  Status begin_if(int cond, std::vector<TensorType> result_types, Location loc = {});
  // The same with the result types taken from the first branch that yields
  // (an importer learns them by building the branch).
  Status begin_if_untyped(int cond, Location loc = {});
  // Ends the then-branch with its yielded values and opens the else-branch.
  Status else_branch(const std::vector<int>& yielded, const Location& loc = {},
                     const std::vector<Location>& yield_locs = {});
  // Ends the else-branch; returns the if's results, named `result_names`
  // (one per result type, or empty: made up).
  Result<std::vector<int>> end_if(const std::vector<int>& yielded, std::vector<std::string> result_names = {},
                                  const Location& loc = {}, const std::vector<Location>& yield_locs = {});
  // `%r = call @f(args) : types`: the module's function `f` (ended before
  // the open one) inlined into the open function, its results named `names`.
  // Checks the arguments' and declared result types against f's signature;
  // a function cannot call itself (it is not ended yet). A call that would
  // make the module hold more than max_nodes() nodes is refused before
  // anything is copied, naming the call chain that grows it.
  bool has_function(std::string_view name) const { return function_index_.count(name) > 0; }
  Result<std::vector<int>> inline_call(std::string_view callee, const std::vector<int>& args,
                                       std::vector<std::string> names, const std::vector<TensorType>& declared,
                                       const Location& loc);
  // Open regions: loop bodies and branches (0: the function's top level).
  size_t open_regions() const { return open_regions_.size(); }
  // `fail "message"`: running this node stops the invoke with `message`. As
  // the last node of a branch, the branch yields nothing (else_branch and
  // end_if take an empty list).
  // A message holds at most format::kMaxFailMessageBytes (the verifier's limit).
  Status fail(std::string message, Location loc = {});

  // A point to return to: rollback(checkpoint()) removes every node, value
  // and constant added since and reopens exactly the regions open then (an
  // importer tries to build an If branch and, when it cannot, puts a fail
  // in its place). Only within the open function.
  struct Checkpoint {
    size_t nodes = 0, values = 0, constants = 0;
    std::vector<int> open_regions;
    std::vector<std::optional<std::vector<TensorType>>> open_if_types;
    std::vector<std::vector<int64_t>> opener_params;  // per open region: its opening marker's params
  };
  Checkpoint checkpoint() const;
  void rollback(const Checkpoint& checkpoint);

  // ---- functions: one is open at a time, from begin_function to end_function.
  Status begin_function(std::string name, Location loc = {});
  // `donate_to`: the output index the donated buffer is written as (-1: the
  // first free output of its type); checked against the result types at end_function.
  Result<int> add_input(std::string name, TensorType type, bool donate = false, Location loc = {},
                        int donate_to = -1);
  // The open function's value for module constant `constant`, made on first use.
  Result<int> use_constant(int constant, Location loc = {});
  // The result types the function declares (optional: set_outputs takes the
  // returned values' types when none were declared).
  Status set_result_types(std::vector<TensorType> types);
  // Checks the node, lowers its attributes, runs the result-type rule and adds
  // one value per result; returns their ids.
  Result<std::vector<int>> add_node(NodeSpec spec);
  Result<std::vector<int>> add_node(ops::OpId op, const std::vector<int>& inputs,
                                    const ops::AttrMap& attrs = {},
                                    const std::vector<TensorType>& declared = {}, Location loc = {});
  // The values returned, one per result type. `loc`: the return statement,
  // `value_locs`: each returned operand (both optional).
  Status set_outputs(const std::vector<int>& values, const Location& loc = {},
                     const std::vector<Location>& value_locs = {});
  Status end_function();

  // Names of the open function's inputs and results (%name), and its values.
  std::optional<int> find_value(std::string_view name) const;
  const Value& value(int id) const { return function().values[static_cast<size_t>(id)]; }
  int value_count() const { return static_cast<int>(function().values.size()); }
  // Node `index` of the open function (a Value's `node`).
  const Node& node(int index) const { return function().nodes[static_cast<size_t>(index)]; }
  bool function_open() const { return open_; }
  // Fails (naming the first definition) when the open function has a value named `name`.
  Status check_value_name(std::string_view name, const Location& loc) const;

  // The module; every function must have been ended.
  Result<Module> finish();

 private:
  Function& function() { return module_.functions.back(); }
  const Function& function() const { return module_.functions.back(); }
  Status check_value_id(int id, const char* what, const Location& loc) const;
  int push_value(Value value);
  // A region's result `result` of node `node`, named (checked unique by the caller).
  int push_named_result(const std::string& name, const TensorType& type, int node, size_t result,
                        const Location& loc);
  bool visible(int id) const;

  // Checks a branch's yielded values against the if's result types.
  Status check_yields(const std::vector<int>& yielded, const std::vector<TensorType>& types, const char* branch,
                      const Location& loc, const std::vector<Location>& yield_locs) const;
  // Checks a branch's yields, taking the if's types from them when it has
  // none yet; a branch ending in a fail may yield nothing.
  Status close_branch(const std::vector<int>& yielded, const char* branch, const Location& loc,
                      const std::vector<Location>& yield_locs);
  // Fails when inlining function `callee` (with `extra` nodes of copies) into
  // the open function would pass max_nodes_, naming the call chain.
  Status check_inlined_size(size_t callee, size_t extra, const Location& loc) const;
  // `base`, or `base_K` with the first K that names no value of the open function.
  std::string unique_value_name(const std::string& base);
  // "@f -> @g -> @h": from function `from` down its largest callees.
  std::string call_chain(size_t from) const;

  // Regions: per value of the open function, the region that defines it
  // (the node opening it: a kLoopBegin, kIfBegin or kIfElse; -1: the top
  // level); the regions still open, innermost last; per open if, its result types.
  std::vector<int> value_region_;
  std::vector<int> open_regions_;
  std::vector<std::optional<std::vector<TensorType>>> open_if_types_;  // nullopt: not known yet

  Module module_;
  std::map<std::string, int, std::less<>> constant_index_;
  std::map<std::string, int, std::less<>> function_index_;  // name -> index in module_.functions
  uint64_t max_nodes_ = kDefaultMaxInstructions;
  uint64_t ended_nodes_ = 0;  // nodes of the functions ended so far
  // Per function: the callee it inlined with the most nodes (-1: none), for call_chain.
  std::vector<int> largest_callee_;
  bool open_ = false;
  bool outputs_set_ = false;
  std::map<std::string, int, std::less<>> value_names_;  // open function: %name -> value id
  std::map<int, int> constant_values_;                   // open function: constant -> value id
  std::map<std::string, int, std::less<>> next_suffix_;  // open function: base name -> last suffix given
  uint64_t name_probes_ = 0;
};

}  // namespace hexir::compiler
