#include "passes/donation.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hexir/ops/plans.h"
#include "ir/constant_data.h"
#include "passes/fusion.h"

namespace hexir::compiler {

namespace {

// The text `*` stands for when `name` matches `pattern` (the whole name when
// the pattern has no `*`), or nullopt.
std::optional<std::string> match(std::string_view pattern, std::string_view name) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos)
    return pattern == name ? std::optional<std::string>(std::string()) : std::nullopt;
  const std::string_view head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  if (name.size() < head.size() + tail.size() || !name.starts_with(head) || !name.ends_with(tail))
    return std::nullopt;
  return std::string(name.substr(head.size(), name.size() - head.size() - tail.size()));
}

std::string rule_text(const DonationRule& rule) { return "--donate '" + rule.input + "=" + rule.output + "'"; }

}  // namespace

std::optional<int64_t> constant_rows_from(const Module& module, const Value& c, size_t axis) {
  if (c.kind != ValueKind::kConstant || (c.type.dtype != DType::kI64 && c.type.dtype != DType::kI32) ||
      c.byte_size > (uint64_t{1} << 26))
    return std::nullopt;
  const Result<std::vector<uint8_t>> read = constant_bytes(module.constants[static_cast<size_t>(c.constant)]);
  if (!read.ok() || read->empty()) return std::nullopt;
  const std::vector<uint8_t>& bytes = *read;
  int64_t inner = 1;  // elements per step along the axis
  for (size_t d = axis + 1; d < c.type.rank(); ++d) inner *= c.type.dims[d];
  const int64_t length = c.type.dims[axis];
  const size_t element = dtype_size(c.type.dtype);
  std::optional<int64_t> s0;
  for (size_t i = 0; i * element < bytes.size(); ++i) {
    int64_t x;
    if (element == 8) {
      std::memcpy(&x, bytes.data() + i * 8, 8);
    } else {
      int32_t y;
      std::memcpy(&y, bytes.data() + i * 4, 4);
      x = y;
    }
    const int64_t coordinate = (static_cast<int64_t>(i) / inner) % length;
    if (!s0) s0 = x - coordinate;
    if (x - coordinate != *s0) return std::nullopt;
  }
  return s0;
}

std::optional<size_t> constant_iota_axis(const Module& module, const Value& c) {
  const std::vector<int64_t>& dims = c.type.dims;
  const auto wide = [](int64_t d) { return d != 1; };
  const auto found = std::find_if(dims.begin(), dims.end(), wide);
  if (found == dims.end() || std::find_if(found + 1, dims.end(), wide) != dims.end()) return std::nullopt;
  const size_t axis = static_cast<size_t>(found - dims.begin());
  if (constant_rows_from(module, c, axis) != int64_t{0}) return std::nullopt;
  return axis;
}

Status apply_donations(Module& module, std::span<const DonationRule> rules) {
  for (const DonationRule& rule : rules) {
    bool matched = false;
    for (Function& fn : module.functions) {
      for (Argument& arg : fn.arguments) {
        const Value& input = fn.values[static_cast<size_t>(arg.value)];
        const std::optional<std::string> star = match(rule.input, input.name);
        if (!star) continue;
        matched = true;
        std::string output = rule.output;
        if (const size_t at = output.find('*'); at != std::string::npos) output.replace(at, 1, *star);
        const auto it = std::find(fn.output_names.begin(), fn.output_names.end(), output);
        if (it == fn.output_names.end())
          return invalid_argument(rule_text(rule) + ": function @" + fn.name + " has input '" + input.name +
                                  "' but no output '" + output + "'");
        const int j = static_cast<int>(it - fn.output_names.begin());
        if (arg.donate_to >= 0 && arg.donate_to != j)
          return invalid_argument(rule_text(rule) + ": input '" + input.name + "' of function @" + fn.name +
                                  " is donated to output '" + fn.output_names[static_cast<size_t>(arg.donate_to)] +
                                  "' already");
        arg.donate = true;
        arg.donate_to = j;
      }
      HEXIR_RETURN_IF_ERROR(check_donations(fn));
    }
    if (!matched) {
      std::string inputs;
      for (const Function& fn : module.functions) {
        inputs += (inputs.empty() ? "" : "; ") + ("@" + fn.name + ":");
        for (size_t a = 0; a < fn.arguments.size() && a < 8; ++a)
          inputs += " '" + fn.values[static_cast<size_t>(fn.arguments[a].value)].name + "'";
        if (fn.arguments.size() > 8) inputs += " ...";
      }
      return invalid_argument(rule_text(rule) + ": no input matches '" + rule.input + "' (inputs: " + inputs + ")");
    }
  }
  return ok_status();
}

namespace {

// Rewrites where(iota == p, new, cache) nodes of one function (donation.h).
class CacheUpdates {
 public:
  CacheUpdates(Module& module, Function& fn) : module_(module), fn_(fn), producer_(fn.values.size(), -1) {
    for (size_t n = 0; n < fn.nodes.size(); ++n)
      for (int r : fn.nodes[n].results) producer_[static_cast<size_t>(r)] = static_cast<int>(n);
  }

  size_t run() {
    std::vector<Node> original = std::move(fn_.nodes);
    fn_.nodes.clear();
    std::vector<int64_t> new_index(original.size(), -1);
    size_t rewritten = 0;
    for (size_t n = 0; n < original.size(); ++n) {
      const Node& node = original[n];
      if (node.kind == NodeKind::kOp && ((node.op == ops::OpId::kWhere && rewrite_where(original, node)) ||
                                         (node.op == ops::OpId::kScatterElements && rewrite_scatter(original, node)))) {
        ++rewritten;
      } else {
        fn_.nodes.push_back(node);  // a copy: rewrite reads the original list's earlier nodes
      }
      new_index[n] = static_cast<int64_t>(fn_.nodes.size()) - 1;
    }
    if (rewritten == 0) {
      fn_.nodes = std::move(original);
      return 0;
    }
    renumber_nodes(fn_, original.size(), new_index);  // region markers name each other by node index
    return rewritten;
  }

 private:
  const Value& value(int v) const { return fn_.values[static_cast<size_t>(v)]; }

  // The node (of `nodes`, the original list) writing v, or null.
  const Node* writer(const std::vector<Node>& nodes, int v) const {
    const int n = producer_[static_cast<size_t>(v)];
    return n < 0 ? nullptr : &nodes[static_cast<size_t>(n)];
  }

  // Whether constant value v is 0, 1, ..., C-1 along its one dim larger than 1.
  bool is_iota(int v, int64_t* axis) const {
    const std::optional<size_t> found = constant_iota_axis(module_, value(v));
    if (found) *axis = static_cast<int64_t>(*found);
    return found.has_value();
  }

  int add_value(std::string name, TensorType type, const Location& loc) {
    Value v;
    v.name = fresh_name(std::move(name));
    v.byte_size = *byte_size(type);
    v.type = std::move(type);
    v.kind = ValueKind::kResult;
    v.loc = loc;
    fn_.values.push_back(std::move(v));
    producer_.push_back(-1);
    return static_cast<int>(fn_.values.size()) - 1;
  }

  std::string fresh_name(std::string base) {
    for (int suffix = 0;; ++suffix) {
      std::string name = suffix ? base + "." + std::to_string(suffix) : base;
      if (!names_.count(name)) {
        names_.insert(name);
        return name;
      }
    }
  }

  void emit(ops::OpId op, std::vector<int> inputs, int result, std::vector<int64_t> params, const Location& loc) {
    fn_.nodes.push_back(op_node(op, std::move(inputs), result, std::move(params), loc));
  }

  // The function's value of a module constant i64[] `value` (made once per value).
  int index_constant(int64_t value) {
    if (auto it = index_constants_.find(value); it != index_constants_.end()) return it->second;
    std::vector<uint8_t> element(8);
    std::memcpy(element.data(), &value, 8);
    const int constant = add_constant(module_, "cache_update." + std::to_string(value), TensorType{DType::kI64, {}},
                                      FillPattern{std::move(element)});
    use_constant(fn_, module_, constant);
    producer_.push_back(-1);
    return index_constants_[value] = static_cast<int>(fn_.values.size()) - 1;
  }
  int zero() { return index_constant(0); }

  std::optional<int64_t> rows_from(int v, size_t axis) const { return constant_rows_from(module_, value(v), axis); }

  void collect_names() {
    if (names_.empty())
      for (const Value& v : fn_.values) names_.insert(v.name);
  }

  // The start operands of an update_slice writing at `position` (one
  // element, integer) along `axis` of a rank-`rank` value, 0 along the rest.
  std::vector<int> starts_at(int position, size_t axis, size_t rank, const std::string& base, const Location& loc) {
    const TensorType p = value(position).type;
    int start = position;
    if (p.rank() != 0) {
      start = add_value(base + ".start", TensorType{p.dtype, {}}, loc);
      emit(ops::OpId::kReshape, {position}, start, {}, loc);
    }
    if (p.dtype != DType::kI64) {
      const int wide = add_value(base + ".start64", TensorType{DType::kI64, {}}, loc);
      emit(ops::OpId::kCast, {start}, wide, {static_cast<int64_t>(DType::kI64)}, loc);
      start = wide;
    }
    std::vector<int> starts;
    for (size_t d = 0; d < rank; ++d) starts.push_back(d == axis ? start : zero());
    return starts;
  }

  // scatter_elements(cache, expand(p), rows) {axis, none}, rows one long
  // along the axis and the indices every one p (torch's index_copy_ at a
  // position) -> update_slice(cache, rows, starts) {fail}: ONNX's rule for
  // a negative p, an invoke that fails past the cache; the indices are
  // never made.
  bool rewrite_scatter(const std::vector<Node>& nodes, const Node& scatter) {
    collect_names();
    if (scatter.params.size() != 2 || scatter.params[1] != ops::kScatterNone) return false;
    const int result = scatter.results[0];
    const TensorType type = value(result).type;
    const int cache = scatter.inputs[0], indices = scatter.inputs[1], rows = scatter.inputs[2];
    const size_t axis = static_cast<size_t>(scatter.params[0]);
    const TensorType r = value(rows).type;
    if (value(cache).type != type || r.rank() != type.rank() || axis >= r.rank() ||
        value(indices).type.dims != r.dims)
      return false;
    const Location loc = scatter.loc;
    // A prefill's rows s0, s0+1, ...: a constant, the window inside the cache.
    if (const std::optional<int64_t> s0 = rows_from(indices, axis);
        s0 && *s0 >= 0 && *s0 + r.dims[axis] <= type.dims[axis]) {
      std::vector<int> inputs = {cache, rows};
      for (size_t d = 0; d < type.rank(); ++d) inputs.push_back(d == axis ? index_constant(*s0) : zero());
      emit(ops::OpId::kUpdateSlice, std::move(inputs), result, {ops::kWindowFail}, loc);
      return true;
    }
    if (r.dims[axis] != 1) return false;
    // The indices: one integer value broadcast (expand, reshape) to the rows' shape.
    int position = indices;
    for (const Node* w = writer(nodes, position);
         w && w->kind == NodeKind::kOp && (w->op == ops::OpId::kExpand || w->op == ops::OpId::kReshape);
         w = writer(nodes, position))
      position = w->inputs[0];
    const TensorType p = value(position).type;
    if (position == indices || (p.dtype != DType::kI64 && p.dtype != DType::kI32) ||
        std::any_of(p.dims.begin(), p.dims.end(), [](int64_t d) { return d != 1; }))
      return false;
    std::vector<int> inputs = {cache, rows};
    for (int start : starts_at(position, axis, type.rank(), value(result).name, loc)) inputs.push_back(start);
    emit(ops::OpId::kUpdateSlice, std::move(inputs), result, {ops::kWindowFail}, loc);
    return true;
  }

  // where(mask, new, cache) -> update_slice(cache, new', starts) {skip}, or false (the node untouched).
  bool rewrite_where(const std::vector<Node>& nodes, const Node& where) {
    collect_names();
    const int result = where.results[0];
    const TensorType type = value(result).type;  // copies: add_value grows the values
    const size_t rank = type.rank();
    int cond = where.inputs[0], fresh = where.inputs[1], cache = where.inputs[2];
    const Node* mask = writer(nodes, cond);
    if (mask && mask->kind == NodeKind::kOp && mask->op == ops::OpId::kNot) {  // where(!(iota == p), cache, new)
      std::swap(fresh, cache);
      cond = mask->inputs[0];
      mask = writer(nodes, cond);
    }
    if (!mask || mask->kind != NodeKind::kOp || mask->op != ops::OpId::kEqual) return false;
    if (value(cache).type != type || rank == 0) return false;
    int64_t iota_axis = -1;
    int position = -1, iota = -1;
    for (int side = 0; side < 2 && position < 0; ++side)
      if (is_iota(mask->inputs[static_cast<size_t>(side)], &iota_axis)) {
        iota = mask->inputs[static_cast<size_t>(side)];
        position = mask->inputs[static_cast<size_t>(1 - side)];
      }
    if (position < 0) return false;
    const TensorType p = value(position).type;
    if (std::any_of(p.dims.begin(), p.dims.end(), [](int64_t d) { return d != 1; }) || p.dtype != value(iota).type.dtype)
      return false;
    // The mask's dims right-aligned to the result's: it varies along one axis, C long there.
    const TensorType m = value(cond).type;
    if (m.rank() > rank) return false;
    const size_t shift = rank - m.rank();
    const size_t axis = shift + (m.rank() - value(iota).type.rank()) + static_cast<size_t>(iota_axis);
    for (size_t d = 0; d < m.rank(); ++d)
      if (m.dims[d] != (shift + d == axis ? type.dims[axis] : 1)) return false;
    // The new rows: one along the axis, broadcast to the rest of the result.
    const TensorType x = value(fresh).type;
    if (x.dtype != type.dtype || x.rank() > rank) return false;
    std::vector<int64_t> window = type.dims;
    window[axis] = 1;
    const size_t x_shift = rank - x.rank();
    bool exact = x.rank() == rank;
    for (size_t d = 0; d < x.rank(); ++d) {
      const int64_t want = window[x_shift + d];  // 1 along the axis
      if (x.dims[d] != want && x.dims[d] != 1) return false;
      exact = exact && x.dims[d] == want;
    }
    const Location loc = where.loc;
    const std::string base = value(result).name;
    int update = fresh;
    if (!exact) {
      auto count = [](const std::vector<int64_t>& dims) {
        int64_t n = 1;
        for (int64_t d : dims) n *= d;
        return n;
      };
      const bool same_count = count(x.dims) == count(window);
      update = add_value(base + ".rows", TensorType{type.dtype, window}, loc);
      if (same_count)
        emit(ops::OpId::kReshape, {fresh}, update, window, loc);
      else
        emit(ops::OpId::kExpand, {fresh}, update, window, loc);
    }
    std::vector<int> inputs = {cache, update};
    for (int start : starts_at(position, axis, rank, base, loc)) inputs.push_back(start);
    emit(ops::OpId::kUpdateSlice, std::move(inputs), result, {ops::kWindowSkip}, loc);
    return true;
  }

  Module& module_;
  Function& fn_;
  std::vector<int> producer_;  // per value: its node in the original list, -1: none
  std::set<std::string> names_;
  std::map<int64_t, int> index_constants_;  // i64[] constants made, by value
};

}  // namespace

size_t rewrite_cache_updates(Module& module) {
  size_t rewritten = 0;
  for (size_t f = 0; f < module.functions.size(); ++f) rewritten += CacheUpdates(module, module.functions[f]).run();
  return rewritten;
}

}  // namespace hexir::compiler
