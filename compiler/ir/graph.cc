#include "hexir/compiler/graph.h"

#include <algorithm>
#include <set>
#include <system_error>

#include "hexir/format/prelude.h"

namespace hexir::compiler {

Location Location::text(std::shared_ptr<const std::string> file, int line, int col) {
  Location loc;
  loc.file = std::move(file);
  loc.line = line;
  loc.col = col;
  return loc;
}

Location Location::imported(std::shared_ptr<const std::string> file, std::string node, std::string op_type) {
  Location loc;
  loc.file = std::move(file);
  loc.node = std::move(node);
  loc.op_type = std::move(op_type);
  return loc;
}

std::string Location::position() const {
  if (line > 0) return std::to_string(line) + ":" + std::to_string(col);
  if (!node.empty()) return "node '" + node + "'" + (op_type.empty() ? "" : " (" + op_type + ")");
  return {};
}

std::string Location::to_string() const {
  const std::string where = position();
  if (!file || file->empty()) return where;
  if (where.empty()) return *file;
  return *file + (line > 0 ? ":" : ": ") + where;
}

Status error_at(const Location& loc, std::string_view what) {
  std::string where = loc.to_string();
  if (where.empty()) return invalid_argument(std::string(what));
  return invalid_argument(where + ": " + std::string(what));
}

namespace {

// A location that is known, else the fallback.
const Location& or_else(const Location& loc, const Location& fallback) {
  return loc.line > 0 || !loc.node.empty() || (loc.file && !loc.file->empty()) ? loc : fallback;
}

const Location& at_index(const std::vector<Location>& locs, size_t i, const Location& fallback) {
  return i < locs.size() ? or_else(locs[i], fallback) : fallback;
}

Status check_type(const TensorType& type, const Location& loc) {
  Result<uint64_t> size = byte_size(type);
  if (!size.ok()) return error_at(loc, "type " + type.to_string() + ": " + size.status().message());
  return ok_status();
}

// " (first defined at 1:9)", or nothing when the first definition has no location.
std::string first_defined(const Location& loc) {
  const std::string where = loc.position();
  return where.empty() ? std::string() : " (first defined at " + where + ")";
}

std::string sigil_name(const Value& v) { return (v.kind == ValueKind::kConstant ? "@" : "%") + v.name; }

}  // namespace

GraphBuilder::GraphBuilder(std::string module_name) { module_.name = std::move(module_name); }

Status GraphBuilder::check_constant_name(std::string_view name, const Location& loc) const {
  if (auto it = constant_index_.find(name); it != constant_index_.end())
    return error_at(loc, "redefinition of constant @" + std::string(name) +
                             first_defined(module_.constants[static_cast<size_t>(it->second)].loc));
  return ok_status();
}

Result<int> GraphBuilder::add_constant(std::string name, TensorType type, ConstantSource source,
                                       Location loc) {
  HEXIR_RETURN_IF_ERROR(check_constant_name(name, loc));
  HEXIR_RETURN_IF_ERROR(check_type(type, loc));
  Constant c;
  c.byte_size = *byte_size(type);
  const uint64_t element = dtype_size(type.dtype);
  if (const auto* inline_bytes = std::get_if<InlineBytes>(&source)) {
    if (inline_bytes->bytes.size() != c.byte_size)
      return error_at(loc, "constant @" + name + " has " + std::to_string(inline_bytes->bytes.size()) +
                               " byte(s), its type " + type.to_string() + " needs " +
                               std::to_string(c.byte_size));
  } else if (const auto* fill = std::get_if<FillPattern>(&source)) {
    if (fill->element.size() != element)
      return error_at(loc, "fill of constant @" + name + " has a " + std::to_string(fill->element.size()) +
                               "-byte pattern, one " + dtype_name(type.dtype) + " element is " +
                               std::to_string(element));
  } else {
    const auto& range = std::get<FileRange>(source);
    std::error_code ec;
    const uint64_t file_size = std::filesystem::file_size(range.path, ec);
    if (ec)
      return error_at(loc,
                      "constant @" + name + ": cannot open '" + range.path.string() + "': " + ec.message());
    if (range.offset > file_size || c.byte_size > file_size - range.offset)
      return error_at(loc, "constant @" + name + " needs bytes [" + std::to_string(range.offset) + ", +" +
                               std::to_string(c.byte_size) + ") of '" + range.path.string() +
                               "', which has " + std::to_string(file_size));
  }
  c.name = std::move(name);
  c.type = std::move(type);
  c.source = std::move(source);
  c.loc = std::move(loc);
  const int index = static_cast<int>(module_.constants.size());
  constant_index_[c.name] = index;
  module_.constants.push_back(std::move(c));
  return index;
}

std::optional<int> GraphBuilder::find_constant(std::string_view name) const {
  auto it = constant_index_.find(name);
  if (it == constant_index_.end()) return std::nullopt;
  return it->second;
}

Status GraphBuilder::begin_function(std::string name, Location loc) {
  if (open_) return error_at(loc, "function @" + function().name + " is still open (end_function)");
  // A map, not a scan of the functions so far: N functions cost O(N log N).
  auto [it, inserted] = function_index_.try_emplace(name, static_cast<int>(module_.functions.size()));
  if (!inserted)
    return error_at(loc, "redefinition of function @" + name +
                             first_defined(module_.functions[static_cast<size_t>(it->second)].loc));
  Function fn;
  fn.name = std::move(name);
  fn.loc = std::move(loc);
  module_.functions.push_back(std::move(fn));
  largest_callee_.push_back(-1);
  open_ = true;
  outputs_set_ = false;
  value_names_.clear();
  next_suffix_.clear();
  constant_values_.clear();
  value_region_.clear();
  open_regions_.clear();
  open_if_types_.clear();
  return ok_status();
}

Status GraphBuilder::check_value_name(std::string_view name, const Location& loc) const {
  if (auto it = value_names_.find(name); it != value_names_.end())
    return error_at(loc, "redefinition of %" + std::string(name) + first_defined(value(it->second).loc));
  return ok_status();
}

std::optional<int> GraphBuilder::find_value(std::string_view name) const {
  auto it = value_names_.find(name);
  if (it == value_names_.end()) return std::nullopt;
  return it->second;
}

Status GraphBuilder::check_value_id(int id, const char* what, const Location& loc) const {
  if (id < 0 || static_cast<size_t>(id) >= function().values.size())
    return error_at(loc,
                    std::string(what) + " " + std::to_string(id) + " is not a value of @" + function().name);
  if (!visible(id)) {
    const Value& v = value(id);
    const Node& region = function().nodes[static_cast<size_t>(value_region_[static_cast<size_t>(id)])];
    const char* kind = region.kind == NodeKind::kLoopBegin ? "loop" : region.kind == NodeKind::kIfBegin ? "then-branch" : "else-branch";
    return error_at(loc, std::string(what) + " " + sigil_name(v) + " is used outside the " + kind +
                             " that defines it (the " + kind + " at " + region.loc.position() + ")");
  }
  return ok_status();
}

bool GraphBuilder::visible(int id) const {
  const int loop = value_region_[static_cast<size_t>(id)];
  return loop < 0 || std::find(open_regions_.begin(), open_regions_.end(), loop) != open_regions_.end();
}

int GraphBuilder::push_value(Value value) {
  const int id = static_cast<int>(function().values.size());
  value_region_.push_back(value.kind == ValueKind::kConstant || open_regions_.empty() ? -1
                                                                                      : open_regions_.back());
  function().values.push_back(std::move(value));
  return id;
}

Result<std::vector<int>> GraphBuilder::begin_loop(LoopSpec spec) {
  if (!open_) return error_at(spec.loc, "begin_loop outside a function");
  Function& fn = function();
  HEXIR_RETURN_IF_ERROR(check_value_id(spec.start, "loop start", spec.loc));
  HEXIR_RETURN_IF_ERROR(check_value_id(spec.trip, "trip count", spec.loc));
  for (int v : spec.inits) HEXIR_RETURN_IF_ERROR(check_value_id(v, "initial value", spec.loc));
  const TensorType counter{DType::kI64, {}};
  for (const auto& [id, what] : {std::pair{spec.start, "loop start"}, std::pair{spec.trip, "trip count"}})
    if (value(id).type != counter)
      return error_at(spec.loc, std::string(what) + " " + sigil_name(value(id)) + " is " +
                                    value(id).type.to_string() + ", a loop bound must be i64[]");
  if (spec.step <= 0) return error_at(spec.loc, "loop step " + std::to_string(spec.step) + " must be positive");
  if (!spec.carried_names.empty() && spec.carried_names.size() != spec.inits.size())
    return error_at(spec.loc, std::to_string(spec.carried_names.size()) + " carried names for " +
                                  std::to_string(spec.inits.size()) + " initial values");
  const int node_index = static_cast<int>(fn.nodes.size());
  std::vector<std::string> names;
  names.push_back(spec.induction_name.empty() ? "loop" + std::to_string(node_index) + ".i" : spec.induction_name);
  for (size_t j = 0; j < spec.inits.size(); ++j)
    names.push_back(spec.carried_names.empty() ? "loop" + std::to_string(node_index) + ".carried" + std::to_string(j)
                                               : spec.carried_names[j]);
  for (size_t j = 0; j < names.size(); ++j)
    HEXIR_RETURN_IF_ERROR(check_value_name(names[j], j == 0 ? spec.loc : at_index(spec.carried_locs, j - 1, spec.loc)));
  Node node;
  node.kind = NodeKind::kLoopBegin;
  node.inputs = {spec.start, spec.trip};
  node.inputs.insert(node.inputs.end(), spec.inits.begin(), spec.inits.end());
  node.params = {spec.step, -1};
  node.loc = spec.loc;
  open_regions_.push_back(node_index);  // the results are the body's
  for (size_t j = 0; j < names.size(); ++j) {
    Value v;
    v.name = names[j];
    v.type = j == 0 ? counter : value(spec.inits[j - 1]).type;
    v.byte_size = j == 0 ? 8 : value(spec.inits[j - 1]).byte_size;
    v.kind = ValueKind::kResult;
    v.node = node_index;
    v.result = static_cast<int>(j);
    v.loc = j == 0 ? spec.loc : at_index(spec.carried_locs, j - 1, spec.loc);
    const int id = push_value(std::move(v));
    value_names_[names[j]] = id;
    node.results.push_back(id);
  }
  std::vector<int> ids = node.results;
  function().nodes.push_back(std::move(node));
  return ids;
}

Result<std::vector<int>> GraphBuilder::end_loop(const std::vector<int>& yielded, std::vector<std::string> result_names,
                                                const Location& loc, const std::vector<Location>& yield_locs) {
  if (!open_) return error_at(loc, "end_loop outside a function");
  if (open_regions_.empty() || function().nodes[static_cast<size_t>(open_regions_.back())].kind != NodeKind::kLoopBegin)
    return error_at(loc, "end_loop: the innermost open region is not a loop");
  Function& fn = function();
  const int begin = open_regions_.back();
  const Node& head = fn.nodes[static_cast<size_t>(begin)];
  const size_t carried = head.results.size() - 1;
  if (yielded.size() != carried)
    return error_at(loc, "'yield' gives " + std::to_string(yielded.size()) + " value(s), the loop at " +
                             head.loc.position() + " carries " + std::to_string(carried));
  for (size_t j = 0; j < carried; ++j) {
    const Location& at = at_index(yield_locs, j, loc);
    HEXIR_RETURN_IF_ERROR(check_value_id(yielded[j], "yielded value", at));
    const Value& carried_value = value(head.results[j + 1]);
    if (value(yielded[j]).type != carried_value.type)
      return error_at(at, "yielded value " + std::to_string(j) + " (" + sigil_name(value(yielded[j])) + ") is " +
                              value(yielded[j]).type.to_string() + ", the carried value " +
                              sigil_name(carried_value) + " is " + carried_value.type.to_string());
  }
  if (!result_names.empty() && result_names.size() != carried)
    return error_at(loc, std::to_string(result_names.size()) + " result name(s) for a loop carrying " +
                             std::to_string(carried) + " value(s)");
  const int node_index = static_cast<int>(fn.nodes.size());
  for (size_t j = 0; j < carried; ++j) {
    if (result_names.size() <= j) result_names.push_back("loop" + std::to_string(begin) + ".result" + std::to_string(j));
    HEXIR_RETURN_IF_ERROR(check_value_name(result_names[j], loc));
  }
  open_regions_.pop_back();  // the results are visible after the loop
  Node node;
  node.kind = NodeKind::kLoopEnd;
  node.inputs = yielded;
  node.params = {begin};
  node.loc = loc;
  for (size_t j = 0; j < carried; ++j) {
    const TensorType type = value(head.results[j + 1]).type;
    node.results.push_back(push_named_result(result_names[j], type, node_index, j, loc));
  }
  fn.nodes[static_cast<size_t>(begin)].params[1] = node_index;
  std::vector<int> ids = node.results;
  fn.nodes.push_back(std::move(node));
  return ids;
}

int GraphBuilder::push_named_result(const std::string& name, const TensorType& type, int node, size_t result,
                                    const Location& loc) {
  Value v;
  v.name = name;
  v.type = type;
  v.byte_size = *byte_size(type);
  v.kind = ValueKind::kResult;
  v.node = node;
  v.result = static_cast<int>(result);
  v.loc = loc;
  const int id = push_value(std::move(v));
  value_names_[name] = id;
  return id;
}

Result<int> GraphBuilder::add_input(std::string name, TensorType type, bool donate, Location loc, int donate_to) {
  if (!open_) return error_at(loc, "add_input outside a function");
  if (!function().nodes.empty()) return error_at(loc, "inputs come before the nodes of @" + function().name);
  HEXIR_RETURN_IF_ERROR(check_value_name(name, loc));
  HEXIR_RETURN_IF_ERROR(check_type(type, loc));
  if (type.has_bound())
    return error_at(loc, "input %" + name + " is " + type.to_string() + ": inputs have exact shapes");
  Value value;
  value.name = std::move(name);
  value.byte_size = *byte_size(type);
  value.type = std::move(type);
  value.kind = ValueKind::kInput;
  value.input_index = static_cast<int>(function().arguments.size());
  value.loc = std::move(loc);
  const std::string key = value.name;
  const int id = push_value(std::move(value));
  value_names_[key] = id;
  function().arguments.push_back({id, donate || donate_to >= 0, donate_to});
  return id;
}

Result<int> GraphBuilder::use_constant(int constant, Location loc) {
  if (!open_) return error_at(loc, "use_constant outside a function");
  if (constant < 0 || static_cast<size_t>(constant) >= module_.constants.size())
    return error_at(loc, "constant index " + std::to_string(constant) + " is not a constant of the module");
  auto [it, inserted] = constant_values_.try_emplace(constant, static_cast<int>(function().values.size()));
  if (!inserted) return it->second;
  const Constant& c = module_.constants[static_cast<size_t>(constant)];
  Value value;
  value.name = c.name;
  value.type = c.type;
  value.byte_size = c.byte_size;
  value.kind = ValueKind::kConstant;
  value.constant = constant;
  value.loc = std::move(loc);
  return push_value(std::move(value));
}

Status GraphBuilder::set_result_types(std::vector<TensorType> types) {
  if (!open_) return invalid_argument("set_result_types outside a function");
  Function& fn = function();
  if (types.empty()) return error_at(fn.loc, "function @" + fn.name + " must return at least one value");
  for (const TensorType& type : types) HEXIR_RETURN_IF_ERROR(check_type(type, fn.loc));
  fn.result_types = std::move(types);
  return ok_status();
}

Result<std::vector<int>> GraphBuilder::add_node(ops::OpId op, const std::vector<int>& inputs,
                                                const ops::AttrMap& attrs,
                                                const std::vector<TensorType>& declared, Location loc) {
  NodeSpec spec;
  spec.op = op;
  spec.inputs = inputs;
  spec.attrs = attrs;
  spec.declared = declared;
  spec.locs.node = std::move(loc);
  return add_node(std::move(spec));
}

Result<std::vector<int>> GraphBuilder::add_node(NodeSpec spec) {
  const NodeLocations& locs = spec.locs;
  const Location& op_loc = or_else(locs.op, locs.node);
  const Location& attrs_loc = or_else(locs.attrs, op_loc);
  if (!open_) return error_at(locs.node, "add_node outside a function");
  if (static_cast<int>(spec.op) >= ops::kOpCount)
    return error_at(op_loc, "unknown operator id " + std::to_string(static_cast<int>(spec.op)));
  for (int input : spec.inputs) HEXIR_RETURN_IF_ERROR(check_value_id(input, "operand", locs.node));
  // The node's own names against each other through a map (split can have thousands).
  std::map<std::string_view, size_t> own_names;
  for (size_t i = 0; i < spec.names.size(); ++i) {
    const Location& name_loc = at_index(locs.results, i, locs.node);
    HEXIR_RETURN_IF_ERROR(check_value_name(spec.names[i], name_loc));
    auto [it, inserted] = own_names.try_emplace(spec.names[i], i);
    if (!inserted)
      return error_at(name_loc, "redefinition of %" + spec.names[i] +
                                    first_defined(at_index(locs.results, it->second, locs.node)));
  }
  for (size_t i = 0; i < spec.declared.size(); ++i)
    HEXIR_RETURN_IF_ERROR(check_type(spec.declared[i], at_index(locs.types, i, locs.node)));

  // Operand count, attributes, then the result-type rule.
  const ops::OpDef& def = ops::op_def(spec.op);
  const int count = static_cast<int>(spec.inputs.size());
  if (count < def.min_inputs || (def.max_inputs >= 0 && count > def.max_inputs)) {
    std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                       : def.min_inputs == def.max_inputs
                           ? std::to_string(def.min_inputs)
                           : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    return error_at(
        op_loc, "@" + std::string(def.name) + " takes " + want + " operand(s), got " + std::to_string(count));
  }
  Function& fn = function();
  std::vector<TensorType> input_types;
  input_types.reserve(spec.inputs.size());
  for (int v : spec.inputs) input_types.push_back(fn.values[static_cast<size_t>(v)].type);
  Result<std::vector<int64_t>> params =
      ops::lower_attributes(spec.op, input_types, spec.attrs, spec.declared);
  if (!params.ok()) return error_at(attrs_loc, params.status().message());
  Result<std::vector<TensorType>> inferred = ops::infer_result_types(spec.op, input_types, *params);
  if (!inferred.ok()) return error_at(op_loc, inferred.status().message());
  const size_t results = inferred->size();
  if (!spec.declared.empty() && spec.declared.size() != results)
    return error_at(at_index(locs.types, 0, locs.node), std::to_string(spec.declared.size()) +
                                                            " result type(s) declared, @" + def.name +
                                                            " gives " + std::to_string(results));
  for (size_t i = 0; i < spec.declared.size(); ++i) {
    if (spec.declared[i] == (*inferred)[i]) continue;
    return error_at(at_index(locs.types, i, locs.node),
                    "declared result type " + spec.declared[i].to_string() +
                        (results > 1 ? " (result " + std::to_string(i) + ")" : std::string()) +
                        " does not match @" + def.name + "'s shape rule, which gives " +
                        (*inferred)[i].to_string());
  }
  if (!spec.names.empty() && spec.names.size() != results)
    return error_at(locs.node, std::to_string(spec.names.size()) + " result name(s) given, @" + def.name +
                                   " gives " + std::to_string(results));
  if (spec.names.empty()) {
    // Made-up names: unique in the function, never a name a front end gave.
    const std::string base = std::string(def.name) + "_" + std::to_string(fn.nodes.size());
    for (size_t i = 0; i < results; ++i) {
      std::string name = results > 1 ? base + "." + std::to_string(i) : base;
      for (int k = 1; value_names_.count(name); ++k)
        name = base + "_" + std::to_string(k) + (results > 1 ? "." + std::to_string(i) : "");
      spec.names.push_back(std::move(name));
    }
  }

  // Bounded dims: each result's extent, one value however many operands bring it.
  const std::vector<ops::ExtentSource> sources =
      ops::extent_sources(spec.op, input_types, *params, *inferred);
  std::vector<int> extents(results, -1);
  for (size_t r = 0; r < sources.size() && r < results; ++r) {
    for (int i : sources[r].inputs) {
      const int e = fn.values[static_cast<size_t>(spec.inputs[static_cast<size_t>(i)])].extent;
      if (extents[r] >= 0 && e != extents[r])
        return error_at(op_loc, "@" + std::string(def.name) + ": operands " + std::to_string(sources[r].inputs[0]) +
                                    " and " + std::to_string(i) +
                                    " have bounded dims of different run-time extents (%" +
                                    fn.values[static_cast<size_t>(extents[r])].name + ", %" +
                                    fn.values[static_cast<size_t>(e)].name + ")");
      extents[r] = e;
    }
  }

  Node node;
  node.op = spec.op;
  node.inputs = std::move(spec.inputs);
  node.params = std::move(*params);
  node.loc = locs.node;
  const int node_index = static_cast<int>(fn.nodes.size());
  const int first_result = static_cast<int>(fn.values.size());
  for (size_t i = 0; i < results; ++i) {
    Value value;
    value.name = spec.names[i];
    value.type = std::move((*inferred)[i]);
    value.byte_size = *byte_size(value.type);
    value.kind = ValueKind::kResult;
    value.node = node_index;
    value.result = static_cast<int>(i);
    value.loc = at_index(locs.results, i, locs.node);
    value.extent = extents[i];
    if (i < sources.size() && sources[i].result >= 0) value.extent = first_result + sources[i].result;
    if (i < sources.size() && sources[i].operand >= 0) {
      value.extent = node.inputs[static_cast<size_t>(sources[i].operand)];
      if (fn.values[static_cast<size_t>(value.extent)].kind != ValueKind::kResult)
        return error_at(op_loc, "@" + std::string(def.name) + ": the extent (operand " +
                                    std::to_string(sources[i].operand) +
                                    ") must be computed at run time, not an input or a constant");
    }
    const int id = push_value(std::move(value));
    value_names_[spec.names[i]] = id;
    node.results.push_back(id);
  }
  std::vector<int> ids = node.results;
  function().nodes.push_back(std::move(node));
  return ids;
}

Status GraphBuilder::set_outputs(const std::vector<int>& values, const Location& loc,
                                 const std::vector<Location>& value_locs) {
  if (!open_) return error_at(loc, "set_outputs outside a function");
  if (!open_regions_.empty()) return error_at(loc, "'return' inside a loop body or branch (close it with 'yield')");
  Function& fn = function();
  const Location& where = or_else(loc, fn.loc);
  for (int v : values) HEXIR_RETURN_IF_ERROR(check_value_id(v, "returned value", where));
  if (fn.result_types.empty()) {
    if (values.empty()) return error_at(where, "function @" + fn.name + " must return at least one value");
    for (int v : values) fn.result_types.push_back(fn.values[static_cast<size_t>(v)].type);
  }
  if (values.size() != fn.result_types.size())
    return error_at(where, "function @" + fn.name + " returns " + std::to_string(values.size()) +
                               " value(s), its signature declares " + std::to_string(fn.result_types.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = fn.values[static_cast<size_t>(values[i])];
    if (v.type != fn.result_types[i])
      return error_at(at_index(value_locs, i, where), "returned value " + std::to_string(i) + " (" +
                                                          sigil_name(v) + ") is " + v.type.to_string() +
                                                          ", the signature of @" + fn.name + " declares " +
                                                          fn.result_types[i].to_string());
  }
  fn.outputs = values;
  fn.output_names.clear();
  std::set<std::string, std::less<>> taken;
  for (size_t i = 0; i < values.size(); ++i) {
    std::string name = fn.values[static_cast<size_t>(values[i])].name;
    if (name.empty() || !taken.insert(name).second) {
      name += "#" + std::to_string(i);
      taken.insert(name);
    }
    fn.output_names.push_back(std::move(name));
  }
  outputs_set_ = true;
  return ok_status();
}

Status GraphBuilder::begin_if(int cond, std::vector<TensorType> result_types, Location loc) {
  for (const TensorType& type : result_types) HEXIR_RETURN_IF_ERROR(check_type(type, loc));
  HEXIR_RETURN_IF_ERROR(begin_if_untyped(cond, std::move(loc)));
  open_if_types_.back() = std::move(result_types);
  return ok_status();
}

Status GraphBuilder::begin_if_untyped(int cond, Location loc) {
  if (!open_) return error_at(loc, "begin_if outside a function");
  HEXIR_RETURN_IF_ERROR(check_value_id(cond, "condition", loc));
  if (value(cond).type != TensorType{DType::kBool, {}})
    return error_at(loc, "condition " + sigil_name(value(cond)) + " is " + value(cond).type.to_string() +
                             ", an if takes a bool[]");
  Function& fn = function();
  Node node;
  node.kind = NodeKind::kIfBegin;
  node.inputs = {cond};
  node.params = {-1, -1};
  node.loc = std::move(loc);
  open_regions_.push_back(static_cast<int>(fn.nodes.size()));
  open_if_types_.emplace_back();
  fn.nodes.push_back(std::move(node));
  return ok_status();
}

Status GraphBuilder::fail(std::string message, Location loc) {
  if (!open_) return error_at(loc, "fail outside a function");
  if (message.size() > format::kMaxFailMessageBytes)
    return error_at(loc, "a fail message holds at most " + std::to_string(format::kMaxFailMessageBytes) + " bytes, got " +
                             std::to_string(message.size()));
  Node node;
  node.kind = NodeKind::kFail;
  node.message = std::move(message);
  node.loc = std::move(loc);
  function().nodes.push_back(std::move(node));
  return ok_status();
}

GraphBuilder::Checkpoint GraphBuilder::checkpoint() const {
  Checkpoint c;
  c.nodes = function().nodes.size();
  c.values = function().values.size();
  c.constants = module_.constants.size();
  c.open_regions = open_regions_;
  c.open_if_types = open_if_types_;
  for (int opener : open_regions_) c.opener_params.push_back(function().nodes[static_cast<size_t>(opener)].params);
  return c;
}

void GraphBuilder::rollback(const Checkpoint& c) {
  Function& fn = function();
  fn.nodes.resize(c.nodes);
  fn.values.resize(c.values);
  value_region_.resize(c.values);
  std::erase_if(value_names_, [&](const auto& entry) { return entry.second >= static_cast<int>(c.values); });
  std::erase_if(constant_values_, [&](const auto& entry) {
    return entry.first >= static_cast<int>(c.constants) || entry.second >= static_cast<int>(c.values);
  });
  module_.constants.resize(c.constants);
  std::erase_if(constant_index_, [&](const auto& entry) { return entry.second >= static_cast<int>(c.constants); });
  open_regions_ = c.open_regions;
  open_if_types_ = c.open_if_types;
  // Markers of regions open then are only ever changed when they close: undo that.
  for (size_t r = 0; r < open_regions_.size(); ++r)
    fn.nodes[static_cast<size_t>(open_regions_[r])].params = c.opener_params[r];
}

Status GraphBuilder::check_yields(const std::vector<int>& yielded, const std::vector<TensorType>& types,
                                  const char* branch, const Location& loc,
                                  const std::vector<Location>& yield_locs) const {
  if (yielded.size() != types.size())
    return error_at(loc, std::string("the ") + branch + " yields " + std::to_string(yielded.size()) +
                             " value(s), the if declares " + std::to_string(types.size()) + " result(s)");
  for (size_t j = 0; j < types.size(); ++j) {
    const Location& at = at_index(yield_locs, j, loc);
    HEXIR_RETURN_IF_ERROR(check_value_id(yielded[j], "yielded value", at));
    if (value(yielded[j]).type != types[j])
      return error_at(at, "the " + std::string(branch) + " yields " + sigil_name(value(yielded[j])) + " (" +
                              value(yielded[j]).type.to_string() + ") as result " + std::to_string(j) +
                              ", the if declares " + types[j].to_string());
  }
  return ok_status();
}

Status GraphBuilder::close_branch(const std::vector<int>& yielded, const char* branch, const Location& loc,
                                  const std::vector<Location>& yield_locs) {
  const Function& fn = function();
  const bool failed = fn.nodes.size() > static_cast<size_t>(open_regions_.back()) + 1 &&
                      fn.nodes.back().kind == NodeKind::kFail;
  if (failed && yielded.empty()) return ok_status();  // nothing runs past the fail
  std::optional<std::vector<TensorType>>& types = open_if_types_.back();
  if (!types) {
    for (size_t j = 0; j < yielded.size(); ++j)
      HEXIR_RETURN_IF_ERROR(check_value_id(yielded[j], "yielded value", at_index(yield_locs, j, loc)));
    types.emplace();
    for (int y : yielded) types->push_back(value(y).type);
  }
  return check_yields(yielded, *types, branch, loc, yield_locs);
}

Status GraphBuilder::else_branch(const std::vector<int>& yielded, const Location& loc,
                                 const std::vector<Location>& yield_locs) {
  if (!open_) return error_at(loc, "else_branch outside a function");
  if (open_regions_.empty() || function().nodes[static_cast<size_t>(open_regions_.back())].kind != NodeKind::kIfBegin)
    return error_at(loc, "'else' without an open then-branch");
  HEXIR_RETURN_IF_ERROR(close_branch(yielded, "then-branch", loc, yield_locs));
  Function& fn = function();
  const int begin = open_regions_.back();
  const int node_index = static_cast<int>(fn.nodes.size());
  Node node;
  node.kind = NodeKind::kIfElse;
  node.inputs = yielded;
  node.params = {begin};
  node.loc = loc;
  fn.nodes[static_cast<size_t>(begin)].params[0] = node_index;
  open_regions_.back() = node_index;  // the else-branch's values are its own
  fn.nodes.push_back(std::move(node));
  return ok_status();
}

Result<std::vector<int>> GraphBuilder::end_if(const std::vector<int>& yielded, std::vector<std::string> result_names,
                                              const Location& loc, const std::vector<Location>& yield_locs) {
  if (!open_) return error_at(loc, "end_if outside a function");
  if (open_regions_.empty() || function().nodes[static_cast<size_t>(open_regions_.back())].kind != NodeKind::kIfElse)
    return error_at(loc, "an if needs an else-branch");
  HEXIR_RETURN_IF_ERROR(close_branch(yielded, "else-branch", loc, yield_locs));
  if (!open_if_types_.back())
    return error_at(loc, "both branches of the if end in a fail: its result types are unknown");
  const std::vector<TensorType> types = *open_if_types_.back();
  if (!result_names.empty() && result_names.size() != types.size())
    return error_at(loc, std::to_string(result_names.size()) + " result name(s) for an if with " +
                             std::to_string(types.size()) + " result(s)");
  Function& fn = function();
  const int else_node = open_regions_.back();
  const int begin = static_cast<int>(fn.nodes[static_cast<size_t>(else_node)].params[0]);
  const int node_index = static_cast<int>(fn.nodes.size());
  for (size_t j = 0; j < types.size(); ++j) {
    if (result_names.size() <= j) result_names.push_back("if" + std::to_string(begin) + ".result" + std::to_string(j));
    HEXIR_RETURN_IF_ERROR(check_value_name(result_names[j], loc));
  }
  open_regions_.pop_back();
  open_if_types_.pop_back();
  Node node;
  node.kind = NodeKind::kIfEnd;
  node.inputs = yielded;
  node.params = {begin};
  node.loc = loc;
  for (size_t j = 0; j < types.size(); ++j) {
    node.results.push_back(push_named_result(result_names[j], types[j], node_index, j, loc));
  }
  fn.nodes[static_cast<size_t>(begin)].params[1] = node_index;
  std::vector<int> ids = node.results;
  fn.nodes.push_back(std::move(node));
  return ids;
}

Result<std::vector<int>> GraphBuilder::inline_call(std::string_view callee, const std::vector<int>& args,
                                                   std::vector<std::string> names,
                                                   const std::vector<TensorType>& declared, const Location& loc) {
  if (!open_) return error_at(loc, "inline_call outside a function");
  auto it = function_index_.find(callee);
  if (it == function_index_.end()) return error_at(loc, "unknown function @" + std::string(callee));
  const size_t index = static_cast<size_t>(it->second);
  if (index + 1 == module_.functions.size())
    return error_at(loc, "@" + std::string(callee) + " calls itself (recursion is not supported)");
  const size_t callee_nodes = module_.functions[index].nodes.size();
  // Before the copy: the callee holds its own calls inlined already.
  HEXIR_RETURN_IF_ERROR(check_inlined_size(index, module_.functions[index].outputs.size(), loc));
  int& largest = largest_callee_.back();
  if (largest < 0 || module_.functions[static_cast<size_t>(largest)].nodes.size() < callee_nodes)
    largest = static_cast<int>(index);
  // Not a copy: inlining appends to the open function's vectors, never to
  // module_.functions itself, so the callee (an ended function) stays put.
  const Function& f = module_.functions[index];
  const std::string sig = "@" + f.name;
  if (args.size() != f.arguments.size())
    return error_at(loc, sig + " takes " + std::to_string(f.arguments.size()) + " argument(s), got " +
                             std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    HEXIR_RETURN_IF_ERROR(check_value_id(args[i], "argument", loc));
    const TensorType& want = f.values[static_cast<size_t>(f.arguments[i].value)].type;
    if (value(args[i]).type != want)
      return error_at(loc, "argument " + std::to_string(i) + " of " + sig + " (" + sigil_name(value(args[i])) +
                               ") is " + value(args[i]).type.to_string() + ", " + sig + " takes " +
                               want.to_string());
  }
  if (declared.size() != f.result_types.size() || names.size() != f.result_types.size())
    return error_at(loc, sig + " returns " + std::to_string(f.result_types.size()) + " value(s); " +
                             std::to_string(names.size()) + " name(s) and " + std::to_string(declared.size()) +
                             " type(s) are given");
  for (size_t j = 0; j < declared.size(); ++j)
    if (declared[j] != f.result_types[j])
      return error_at(loc, "declared result type " + declared[j].to_string() + " (result " + std::to_string(j) +
                               ") does not match " + sig + "'s " + f.result_types[j].to_string());
  for (const std::string& name : names) HEXIR_RETURN_IF_ERROR(check_value_name(name, loc));

  Function& fn = function();
  const int64_t offset = static_cast<int64_t>(fn.nodes.size());
  const std::string prefix = f.name + ".";
  std::vector<int> map(f.values.size(), -1);
  for (size_t i = 0; i < args.size(); ++i) map[static_cast<size_t>(f.arguments[i].value)] = args[i];
  for (size_t v = 0; v < f.values.size(); ++v)
    if (f.values[v].kind == ValueKind::kConstant) {
      HEXIR_ASSIGN_OR_RETURN(map[v], use_constant(f.values[v].constant, loc));
    }
  const size_t regions = open_regions_.size();
  std::vector<bool> fresh(f.values.size(), false);  // a value this call made (not an argument or constant)
  for (const Node& source : f.nodes) {
    Node node = source;
    node.loc = loc;
    for (int& in : node.inputs) in = map[static_cast<size_t>(in)];
    if (node.kind != NodeKind::kOp)  // region markers name each other by node index; a loop's step stays
      for (size_t p = node.kind == NodeKind::kLoopBegin ? 1 : 0; p < node.params.size(); ++p) node.params[p] += offset;
    const int node_index = static_cast<int>(function().nodes.size());
    // The results' region: a loop's induction and carried values are its body's.
    if (node.kind == NodeKind::kLoopEnd || node.kind == NodeKind::kIfEnd) open_regions_.pop_back();
    if (node.kind == NodeKind::kLoopBegin) open_regions_.push_back(node_index);
    node.results.clear();
    for (size_t r = 0; r < source.results.size(); ++r) {
      const Value& sv = f.values[static_cast<size_t>(source.results[r])];
      std::string name = unique_value_name(prefix + sv.name);
      const int id = push_named_result(name, sv.type, node_index, r, loc);
      map[static_cast<size_t>(source.results[r])] = id;
      fresh[static_cast<size_t>(source.results[r])] = true;
      node.results.push_back(id);
    }
    // Bounded results keep their extent (an earlier result, or this node's own).
    for (size_t r = 0; r < source.results.size(); ++r) {
      const int e = f.values[static_cast<size_t>(source.results[r])].extent;
      if (e >= 0) function().values[static_cast<size_t>(node.results[r])].extent = map[static_cast<size_t>(e)];
    }
    if (node.kind == NodeKind::kIfBegin) open_regions_.push_back(node_index);
    if (node.kind == NodeKind::kIfElse) open_regions_.back() = node_index;
    function().nodes.push_back(std::move(node));
  }
  open_regions_.resize(regions);
  // The results: a value the call made takes the caller's name; an argument,
  // a constant or a value returned twice gets a copy of that name.
  std::vector<int> results;
  std::vector<bool> renamed(f.values.size(), false);
  for (size_t j = 0; j < f.outputs.size(); ++j) {
    const size_t out = static_cast<size_t>(f.outputs[j]);
    if (fresh[out] && !renamed[out]) {
      renamed[out] = true;
      Value& v = function().values[static_cast<size_t>(map[out])];
      value_names_.erase(v.name);
      v.name = names[j];
      value_names_[names[j]] = map[out];
      results.push_back(map[out]);
      continue;
    }
    NodeSpec copy;
    copy.op = ops::OpId::kCopy;
    copy.inputs = {map[out]};
    copy.names = {names[j]};
    copy.locs.node = loc;
    HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, add_node(std::move(copy)));
    results.push_back(ids[0]);
  }
  return results;
}

std::string GraphBuilder::unique_value_name(const std::string& base) {
  ++name_probes_;
  if (!value_names_.count(base)) return base;
  // The next suffix to try per base: a function calling @g N times probes
  // O(N) names, not 1 + 2 + ... + N.
  int& next = next_suffix_[base];
  std::string name;
  do {
    ++name_probes_;
    name = base + "_" + std::to_string(++next);
  } while (value_names_.count(name));
  return name;
}

Status GraphBuilder::check_inlined_size(size_t callee, size_t extra, const Location& loc) const {
  const uint64_t callee_nodes = module_.functions[callee].nodes.size();
  const uint64_t total = ended_nodes_ + function().nodes.size() + callee_nodes + extra;
  if (total <= max_nodes_) return ok_status();
  const std::string name = "@" + module_.functions[callee].name;
  return error_at(loc, "inlining " + name + " (" + std::to_string(callee_nodes) + " instructions) into @" +
                           function().name + " would make the module " + std::to_string(total) +
                           " instructions, over the limit of " + std::to_string(max_nodes_) + " (call chain " +
                           "@" + function().name + " -> " + call_chain(callee) +
                           "; hexir-compile --max-instructions N raises the limit)");
}

std::string GraphBuilder::call_chain(size_t from) const {
  constexpr int kShown = 6;  // then "... -> @last (N calls deep)"
  std::string chain = "@" + module_.functions[from].name;
  int depth = 0;
  std::string last;
  for (int f = largest_callee_[from]; f >= 0; f = largest_callee_[static_cast<size_t>(f)]) {
    ++depth;
    last = "@" + module_.functions[static_cast<size_t>(f)].name;
    if (depth < kShown) chain += " -> " + last;
  }
  if (depth >= kShown) chain += (depth > kShown ? " -> ... -> " : " -> ") + last;
  return chain;
}

Status GraphBuilder::end_function() {
  if (!open_) return invalid_argument("end_function without begin_function");
  if (!open_regions_.empty())
    return error_at(function().nodes[static_cast<size_t>(open_regions_.back())].loc,
                    "region is not closed with 'yield' before the end of @" + function().name);
  if (!outputs_set_)
    return error_at(function().loc, "function @" + function().name + " returns nothing (set_outputs)");
  HEXIR_RETURN_IF_ERROR(check_donations(function()));
  open_ = false;
  ended_nodes_ += function().nodes.size();
  value_names_.clear();
  next_suffix_.clear();
  constant_values_.clear();
  return ok_status();
}

Result<Module> GraphBuilder::finish() {
  if (open_)
    return error_at(function().loc, "function @" + function().name + " was not ended (end_function)");
  return std::move(module_);
}

Result<Module> merge_modules(std::vector<Module> parts) {
  if (parts.empty()) return invalid_argument("merge_modules: no module");
  Module merged;
  merged.name = parts.front().name;
  std::set<std::string> function_names, constant_names;
  for (Module& part : parts) {
    const int offset = static_cast<int>(merged.constants.size());
    std::vector<std::string> renamed(part.constants.size());
    for (size_t c = 0; c < part.constants.size(); ++c) {
      Constant& constant = part.constants[c];
      std::string name = constant.name;
      for (int suffix = 1; constant_names.count(name); ++suffix) name = constant.name + "." + std::to_string(suffix);
      constant_names.insert(name);
      constant.name = renamed[c] = name;
      merged.constants.push_back(std::move(constant));
    }
    for (Function& fn : part.functions) {
      if (!function_names.insert(fn.name).second)
        return error_at(fn.loc, "function @" + fn.name + " is given twice (each function needs its own name)");
      for (Value& v : fn.values)
        if (v.kind == ValueKind::kConstant) {
          v.name = renamed[static_cast<size_t>(v.constant)];
          v.constant += offset;
        }
      merged.functions.push_back(std::move(fn));
    }
  }
  return merged;
}

Status check_donations(const Function& fn) {
  std::vector<int> taken(fn.result_types.size(), -1);
  for (size_t a = 0; a < fn.arguments.size(); ++a) {
    const Argument& arg = fn.arguments[a];
    if (arg.donate_to < 0) continue;
    const Value& input = fn.values[static_cast<size_t>(arg.value)];
    const std::string what = "function @" + fn.name + ": input %" + input.name + " (" + input.type.to_string() +
                             ") donated to output " + std::to_string(arg.donate_to);
    const size_t j = static_cast<size_t>(arg.donate_to);
    if (j >= fn.result_types.size())
      return error_at(input.loc, what + ": the function has " + std::to_string(fn.result_types.size()) +
                                     " output(s)");
    const std::string output_name = j < fn.output_names.size() ? " '" + fn.output_names[j] + "'" : "";
    if (fn.result_types[j] != input.type)
      return error_at(input.loc, what + output_name + " (" + fn.result_types[j].to_string() +
                                     "): a donated buffer holds an output of its own type");
    if (taken[j] >= 0)
      return error_at(input.loc,
                      what + output_name + ": input %" +
                          fn.values[static_cast<size_t>(fn.arguments[static_cast<size_t>(taken[j])].value)].name +
                          " is donated to it already");
    taken[j] = static_cast<int>(a);
  }
  return ok_status();
}

// Per node: the node opening the region directly around it (a kLoopBegin,
// kIfBegin or kIfElse), -1 at the top level. A region's own markers belong
// to the region around it.
std::vector<int> innermost_regions(const Function& fn) {
  std::vector<int> innermost(fn.nodes.size(), -1);
  std::vector<int> stack;
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    const NodeKind kind = fn.nodes[n].kind;
    if ((kind == NodeKind::kLoopEnd || kind == NodeKind::kIfElse || kind == NodeKind::kIfEnd) && !stack.empty())
      stack.pop_back();
    innermost[n] = stack.empty() ? -1 : stack.back();
    if (kind == NodeKind::kLoopBegin || kind == NodeKind::kIfBegin || kind == NodeKind::kIfElse)
      stack.push_back(static_cast<int>(n));
  }
  return innermost;
}

}  // namespace hexir::compiler
