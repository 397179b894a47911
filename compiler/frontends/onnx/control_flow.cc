// Control flow: If (a branch taken at import, or an if of the graph) and Loop
// (a counted for).
#include "frontends/onnx/handlers.h"

#include <algorithm>

#include "hexir/format/prelude.h"

namespace hexir::compiler::onnx_import {

namespace {

// The values a branch (then_branch or else_branch) of an If gives, its
// nodes imported into the open region.
Result<std::vector<Ref>> import_branch(Importer& im, const NodeCtx& n, const char* taken) {
  const std::string& label = n.loc.node;
  const auto* branch = find_attribute(n.node, taken);
  if (!branch || branch->type() != onnx::AttributeProto::GRAPH)
    return error_at(n.loc, std::string("attribute '") + taken + "' is missing");
  const onnx::GraphProto& g = branch->g();
  if (g.output_size() != n.node.output_size())
    return error_at(n.loc, std::string(taken) + " has " + std::to_string(g.output_size()) +
                               " outputs, the node " + std::to_string(n.node.output_size()));
  if (g.sparse_initializer_size() > 0)
    return error_at(n.loc, "sparse initializers are not supported by the ONNX importer");
  const std::string scope = label + "/" + taken + "/";
  HEXIR_RETURN_IF_ERROR(im.check_definitions(g, scope));
  const Importer::NameScope names(im);
  for (const auto& t : g.initializer()) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor contents, im.proto_contents(t, n.loc));
    im.bind(t.name(), im.new_const(im.claim(t.name()), std::move(contents), n.loc));
  }
  const std::vector<bool> needed = im.needed_nodes(g);
  for (int i = 0; i < g.node_size(); ++i)
    if (needed[static_cast<size_t>(i)]) HEXIR_RETURN_IF_ERROR(im.import_node(g.node(i), i, scope));
  std::vector<Ref> outs;
  for (int i = 0; i < g.output_size(); ++i) {
    const std::optional<Ref> r = im.lookup(g.output(i).name());
    if (!r)
      return error_at(n.loc, std::string(taken) + " output '" + g.output(i).name() + "' is not computed");
    outs.push_back(*r);
  }
  return outs;
}

// Opens the loop (begin_loop) and imports its body: the iteration number
// is the induction variable, the condition a constant true, the carried
// values the loop's. Returns the body's outputs after the condition
// (carried, then scan); `loop_values` gets [induction, carried...].
Result<std::vector<Ref>> build_loop_body(Importer& im, const NodeCtx& n, const onnx::GraphProto& body,
                                         Ref start, Ref trip, const std::vector<Ref>& inits,
                                         std::vector<int>& loop_values) {
  GraphBuilder::LoopSpec spec;
  HEXIR_ASSIGN_OR_RETURN(spec.start, im.materialize(start, n.loc));
  HEXIR_ASSIGN_OR_RETURN(spec.trip, im.materialize(trip, n.loc));
  for (Ref r : inits) {
    HEXIR_ASSIGN_OR_RETURN(int v, im.materialize(r, n.loc));
    spec.inits.push_back(v);
  }
  spec.induction_name = im.fresh(body.input(0).name());
  for (size_t k = 0; k < inits.size(); ++k)
    spec.carried_names.push_back(im.fresh(k + 2 < static_cast<size_t>(body.input_size())
                                              ? body.input(static_cast<int>(k) + 2).name()
                                              : n.loc.node + "/scan"));
  spec.loc = n.loc;
  HEXIR_ASSIGN_OR_RETURN(loop_values, im.builder().begin_loop(std::move(spec)));
  const Importer::NameScope names(im);
  Ref induction{loop_values[0], -1};
  const auto& iteration = body.input(0);
  if (iteration.type().tensor_type().shape().dim_size() == 1) {  // declared [1]
    HEXIR_ASSIGN_OR_RETURN(induction, im.reshape(n, induction, {1}, im.helper_name(n, "iteration")));
  }
  im.bind(iteration.name(), induction);
  HostTensor truth = make_host(kBool, {});
  truth.set_f(0, 1);
  const Ref cond_in = im.new_const(im.fresh(body.input(1).name()), std::move(truth), n.loc);
  im.bind(body.input(1).name(), cond_in);
  for (int k = 2; k < body.input_size(); ++k)
    im.bind(body.input(k).name(), Ref{loop_values[static_cast<size_t>(k) - 1], -1});
  for (const auto& t : body.initializer()) {
    HEXIR_ASSIGN_OR_RETURN(HostTensor contents, im.proto_contents(t, n.loc));
    im.bind(t.name(), im.new_const(im.claim(t.name()), std::move(contents), n.loc));
  }
  const std::vector<bool> needed = im.needed_nodes(body);
  const std::string scope = n.loc.node + "/body/";
  for (int i = 0; i < body.node_size(); ++i)
    if (needed[static_cast<size_t>(i)]) HEXIR_RETURN_IF_ERROR(im.import_node(body.node(i), i, scope));
  std::vector<Ref> outs;
  for (int i = 0; i < body.output_size(); ++i) {
    const std::optional<Ref> r = im.lookup(body.output(i).name());
    if (!r) return error_at(n.loc, "body output '" + body.output(i).name() + "' is not computed");
    outs.push_back(*r);
  }
  HEXIR_ASSIGN_OR_RETURN(HostPtr cond_out, im.host(outs[0]));
  if (!cond_out || cond_out->count() != 1 || cond_out->f(0) == 0)
    return error_at(n.loc, "the body's condition output ('" + body.output(0).name() +
                               "') is not true at import: a while loop is not supported, only a counted one");
  outs.erase(outs.begin());
  return outs;
}

// A Loop node's body and how many carried values and scan outputs it has.
struct LoopBody {
  const onnx::GraphProto* graph = nullptr;
  int carried = 0, scans = 0;
};

Result<LoopBody> read_loop_body(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"body"}));
  const auto* attr = find_attribute(n.node, "body");
  if (!attr || attr->type() != onnx::AttributeProto::GRAPH)
    return error_at(n.loc, "attribute 'body' is missing");
  const onnx::GraphProto& body = attr->g();
  const int carried = n.node.input_size() - 2;
  if (carried < 0) return error_at(n.loc, "a Loop has inputs M, cond and the carried values");
  if (body.input_size() != carried + 2)
    return error_at(n.loc, "the body takes " + std::to_string(body.input_size()) + " inputs, expected " +
                               std::to_string(carried + 2) + " (iteration number, condition, " +
                               std::to_string(carried) + " carried values)");
  const int scans = body.output_size() - 1 - carried;
  if (scans < 0)
    return error_at(n.loc, "the body gives " + std::to_string(body.output_size()) +
                               " outputs, fewer than 1 + " + std::to_string(carried) + " carried values");
  if (body.sparse_initializer_size() > 0)
    return error_at(n.loc, "sparse initializers are not supported by the ONNX importer");
  HEXIR_RETURN_IF_ERROR(im.check_definitions(body, n.loc.node + "/body/"));
  return LoopBody{&body, carried, scans};
}

// The trip count M (input 0) and, when known at import, how many
// iterations run (0 when `cond` is false); a `cond` computed at run time
// (a while loop) fails.
struct LoopCount {
  Ref m;
  Info mi;
  std::optional<int64_t> trips;
};

Result<LoopCount> read_loop_count(Importer& im, const NodeCtx& n) {
  if (n.node.input(0).empty())
    return error_at(n.loc, "a Loop without a trip count M (a while loop) is not supported");
  LoopCount count;
  HEXIR_ASSIGN_OR_RETURN(count.m, im.input(n, 0));
  const Info& mi = count.mi = im.info(count.m);
  if (mi.type != kInt64 || mi.count() != 1)
    return error_at(n.loc, "the trip count ('" + n.node.input(0) + "') is " + onnx_type_name(mi.type) +
                               shape_text(mi.dims) + "; a Loop takes one INT64");
  HEXIR_ASSIGN_OR_RETURN(HostPtr mh, im.host(count.m));
  if (mh) count.trips = std::max<int64_t>(0, static_cast<int64_t>(mh->f(0)));
  if (n.node.input_size() > 1 && !n.node.input(1).empty()) {
    HEXIR_ASSIGN_OR_RETURN(Ref c, im.input(n, 1));
    HEXIR_ASSIGN_OR_RETURN(HostPtr ch, im.host(c));
    if (!ch || ch->count() != 1)
      return error_at(n.loc,
                      "the condition ('" + n.node.input(1) +
                          "') is computed at run time: a while loop is not supported, only a counted one");
    if (ch->f(0) == 0) count.trips = 0;  // runs no iteration
  }
  return count;
}

// The scan outputs' types, learnt by building the body once and rolling it
// back; appends to `inits` a carried [trips, ...] buffer of zeros for each.
Result<std::vector<Info>> add_scan_buffers(Importer& im, const NodeCtx& n, const LoopBody& loop,
                                           int64_t trips, Ref start, Ref trip, std::vector<Ref>& inits) {
  std::vector<Info> scan_types;
  const Importer::Attempt attempt = im.begin_attempt();
  std::vector<int> values;
  Result<std::vector<Ref>> outs = build_loop_body(im, n, *loop.graph, start, trip, inits, values);
  im.end_attempt();
  HEXIR_RETURN_IF_ERROR(outs.status());
  for (int s = 0; s < loop.scans; ++s)
    scan_types.push_back(im.info((*outs)[static_cast<size_t>(loop.carried + s)]));
  im.undo(attempt);
  for (const Info& t : scan_types) {
    std::vector<int64_t> dims = {trips};
    dims.insert(dims.end(), t.dims.begin(), t.dims.end());
    inits.push_back(im.fill_const(t.type, dims, std::vector<uint8_t>(onnx_element_size(t.type), 0),
                                  im.helper_name(n, "scan"), n.loc));
  }
  return scan_types;
}

// Writes each scan output `outs[carried + s]` of the iteration as row
// `induction` of its buffer (update_slice) and yields the buffer.
Status write_scan_rows(Importer& im, const NodeCtx& n, const LoopBody& loop,
                       const std::vector<Info>& scan_types, const std::vector<Ref>& outs,
                       const std::vector<int>& values, std::vector<int>& yielded) {
  const Ref zero = im.scalar_const(0, kInt64, im.helper_name(n, "zero"), n.loc);
  for (int s = 0; s < loop.scans; ++s) {
    const Info t = scan_types[static_cast<size_t>(s)];
    Ref row = outs[static_cast<size_t>(loop.carried + s)];
    if (im.info(row).dims != t.dims)
      return error_at(n.loc,
                      "scan output " + std::to_string(s) + " changes shape between builds of the body");
    std::vector<int64_t> dims = {1};
    dims.insert(dims.end(), t.dims.begin(), t.dims.end());
    HEXIR_ASSIGN_OR_RETURN(row, im.reshape(n, row, dims, im.helper_name(n, "scan_row")));
    std::vector<Ref> operands = {Ref{values[static_cast<size_t>(1 + loop.carried + s)], -1}, row,
                                 Ref{values[0], -1}};
    for (size_t d = 0; d < t.dims.size(); ++d) operands.push_back(zero);
    HEXIR_ASSIGN_OR_RETURN(Ref written, im.emit1(n, ops::OpId::kUpdateSlice, operands, {},
                                                 im.helper_name(n, "scan_write")));
    yielded.push_back(written.value);
  }
  return ok_status();
}

}  // namespace

// A result the two branches of an If give at different sizes along one dim
// (a bounded value, or an empty tensor where the other branch has rows):
// each branch yields its rows padded to the larger bound and their count,
// and the If's result is bounded again at that count after it.
struct CarriedRows {
  int dim = -1;  // -1: the branches agree, the result passes as it is
  int64_t bound = 0;
};

// Both branches' result types, learnt by building each and rolling it back;
// nullopt when one cannot be built (the fail path below handles it).
std::optional<std::vector<CarriedRows>> carried_rows(Importer& im, const NodeCtx& n, int cond_id) {
  std::vector<Info> infos[2];
  for (int b = 0; b < 2; ++b) {
    const Importer::Attempt attempt = im.begin_attempt();
    Status begun = im.builder().begin_if_untyped(cond_id, n.loc);
    Result<std::vector<Ref>> outs =
        begun.ok() ? import_branch(im, n, b == 0 ? "then_branch" : "else_branch") : Result<std::vector<Ref>>(begun);
    if (outs.ok())
      for (Ref r : *outs) infos[b].push_back(im.info(r));
    im.end_attempt();
    im.undo(attempt);
    if (!outs.ok()) return std::nullopt;
  }
  std::vector<CarriedRows> carried(infos[0].size());
  for (size_t i = 0; i < carried.size(); ++i) {
    const Info &a = infos[0][i], &b = infos[1][i];
    if (a.bounded < 0 && b.bounded < 0) continue;  // equal or not, the builder judges
    if (a.type != b.type || a.dims.size() != b.dims.size()) continue;
    int dim = a.bounded >= 0 ? a.bounded : b.bounded;
    bool same_elsewhere = (a.bounded < 0 || a.bounded == dim) && (b.bounded < 0 || b.bounded == dim);
    for (size_t d = 0; d < a.dims.size() && same_elsewhere; ++d)
      same_elsewhere = static_cast<int>(d) == dim || a.dims[d] == b.dims[d];
    if (!same_elsewhere) continue;
    carried[i] = CarriedRows{dim, std::max(a.dims[static_cast<size_t>(dim)], b.dims[static_cast<size_t>(dim)])};
  }
  return carried;
}

// A branch's yields with each carried result as its rows padded to the
// bound, and the counts after the others.
Result<std::vector<Ref>> carry_rows(Importer& im, const NodeCtx& n, std::vector<Ref> outs,
                                    const std::vector<CarriedRows>& carried) {
  std::vector<Ref> counts;
  for (size_t i = 0; i < carried.size() && i < outs.size(); ++i) {
    const CarriedRows& c = carried[i];
    if (c.dim < 0) continue;
    const Info ri = im.info(outs[i]);
    const size_t d = static_cast<size_t>(c.dim);
    Ref rows = outs[i];
    if (ri.bounded >= 0) {
      counts.push_back(extent_of(im, outs[i]));
      HEXIR_ASSIGN_OR_RETURN(rows, unbound_rows(im, n, outs[i], RowPadding::kZero));
    } else {
      counts.push_back(
          im.scalar_const(static_cast<double>(ri.dims[d]), kInt64, im.helper_name(n, "branch_rows"), n.loc));
    }
    if (ri.dims[d] < c.bound) {  // zeros up to the bound
      std::vector<int64_t> pad_dims = ri.dims;
      pad_dims[d] = c.bound - ri.dims[d];
      Ref zeros = im.fill_const(ri.type, pad_dims, std::vector<uint8_t>(onnx_element_size(ri.type), 0),
                                im.helper_name(n, "padding"), n.loc);
      if (ri.dims[d] == 0) {
        pad_dims[d] = c.bound;
        rows = im.fill_const(ri.type, pad_dims, std::vector<uint8_t>(onnx_element_size(ri.type), 0),
                             im.helper_name(n, "padding"), n.loc);
      } else {
        ops::AttrMap attrs;
        attrs["axis"] = ops::AttrValue{int64_t{c.dim}};
        HEXIR_ASSIGN_OR_RETURN(rows, im.emit1(n, ops::OpId::kConcat, {rows, zeros}, attrs, im.helper_name(n, "padded")));
      }
    }
    outs[i] = rows;
  }
  outs.insert(outs.end(), counts.begin(), counts.end());
  return outs;
}

// If. A condition known at import (after input shapes and binds): the
// branch taken is imported in place of the node; the other is never read.
// A run-time condition: an if of the graph, each branch built in its
// region. A branch that cannot be built at the compiled shapes (silero
// VAD v5's 8 kHz branch when the input holds 512 samples) becomes a fail
// holding the importer's error: the model imports, and running it down
// that branch stops with that error instead of computing something else.
Status op_if(Importer& im, const NodeCtx& n) {
  HEXIR_RETURN_IF_ERROR(im.check_attrs(n, {"then_branch", "else_branch"}));
  HEXIR_ASSIGN_OR_RETURN(Ref c, im.input(n, 0));
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, im.host(c));
  if (h && h->count() == 1) {
    HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> outs,
                           import_branch(im, n, h->f(0) != 0 ? "then_branch" : "else_branch"));
    for (size_t i = 0; i < outs.size(); ++i) im.define(n, static_cast<int>(i), outs[i]);
    return ok_status();
  }
  const Info ci = im.info(c);
  if (ci.type != kBool || ci.count() != 1)
    return error_at(n.loc, "the condition ('" + n.node.input(0) + "') is " + onnx_type_name(ci.type) +
                               shape_text(ci.dims) + "; an If takes one BOOL");
  Ref cond = c;
  if (!ci.dims.empty()) {
    HEXIR_ASSIGN_OR_RETURN(cond, im.reshape(n, c, {}, im.helper_name(n, "condition")));
  }
  HEXIR_ASSIGN_OR_RETURN(int cond_id, im.materialize(cond, n.loc));
  const std::vector<CarriedRows> carried =
      carried_rows(im, n, cond_id).value_or(std::vector<CarriedRows>(static_cast<size_t>(n.node.output_size())));
  HEXIR_RETURN_IF_ERROR(im.builder().begin_if_untyped(cond_id, n.loc));
  std::vector<std::string> names;
  for (int i = 0; i < n.node.output_size(); ++i)
    names.push_back(carried[static_cast<size_t>(i)].dim >= 0 ? im.helper_name(n, "rows") : im.result_name(n, i));
  for (const CarriedRows& c : carried)
    if (c.dim >= 0) names.push_back(im.helper_name(n, "count"));
  std::string failed[2];
  std::vector<int> results;
  for (int b = 0; b < 2; ++b) {
    const char* branch = b == 0 ? "then_branch" : "else_branch";
    const Importer::Attempt attempt = im.begin_attempt();  // undone when the branch cannot be built
    Status status = ok_status();
    {
      Result<std::vector<Ref>> outs = import_branch(im, n, branch);
      if (outs.ok()) outs = carry_rows(im, n, std::move(*outs), carried);
      std::vector<int> yielded;
      if (outs.ok())
        for (Ref r : *outs) {
          Result<int> v = im.materialize(r, n.loc);
          if (!v.ok()) {
            status = v.status();
            break;
          }
          yielded.push_back(*v);
        }
      else
        status = outs.status();
      if (status.ok() && b == 0) status = im.builder().else_branch(yielded, n.loc);
      if (status.ok() && b == 1) {
        Result<std::vector<int>> ids = im.builder().end_if(yielded, names, n.loc);
        if (ids.ok()) results = *ids;
        status = ids.status();
      }
    }
    im.end_attempt();
    if (status.ok()) continue;
    im.undo(attempt);
    failed[b] = std::string(branch) + " of If node '" + n.loc.node +
                "' cannot be built at the compiled shapes: " + status.message();
    if (failed[b].size() > format::kMaxFailMessageBytes) failed[b].resize(format::kMaxFailMessageBytes);
    HEXIR_RETURN_IF_ERROR(im.builder().fail(failed[b], n.loc));
    if (b == 0) {
      HEXIR_RETURN_IF_ERROR(im.builder().else_branch({}, n.loc));
    } else {
      if (!failed[0].empty())
        return error_at(n.loc, "neither branch can be built: " + failed[0] + "; " + failed[1]);
      HEXIR_ASSIGN_OR_RETURN(results, im.builder().end_if({}, names, n.loc));
    }
  }
  size_t count_result = carried.size();
  for (size_t i = 0; i < carried.size() && i < results.size(); ++i) {
    Ref r{results[i], -1};
    if (carried[i].dim >= 0 && count_result < results.size()) {
      HEXIR_ASSIGN_OR_RETURN(r, bound_rows(im, n, r, carried[i].dim, Ref{results[count_result++], -1},
                                           im.result_name(n, static_cast<int>(i))));
    }
    im.define(n, static_cast<int>(i), r);
  }
  return ok_status();
}

// Loop as a counted `for` (docs/onnx.md): the trip count M an i64 of one
// element (known at import or a run-time value); `cond` absent or true at
// import, and the body's condition output true or its input passed on (a
// while loop, which stops on a computed condition, is not supported).
// Carried values keep their types. Scan outputs (one tensor per iteration,
// stacked) need M at import: each is a carried [M, ...] buffer of zeros,
// row i written by update_slice in iteration i (in place, no copy: the
// carried-update pass writes the buffer itself).
Status op_loop(Importer& im, const NodeCtx& n) {
  HEXIR_ASSIGN_OR_RETURN(const LoopBody loop, read_loop_body(im, n));
  HEXIR_ASSIGN_OR_RETURN(const LoopCount count, read_loop_count(im, n));
  const std::optional<int64_t> trips = count.trips;
  if (loop.scans > 0 && !trips)
    return error_at(n.loc, "scan outputs need the trip count M known at import (fix it with --bind or "
                           "--input-shape)");
  Ref trip = trips ? im.scalar_const(static_cast<double>(*trips), kInt64, im.helper_name(n, "trip"), n.loc)
                   : count.m;
  if (!trips && !count.mi.dims.empty()) {
    HEXIR_ASSIGN_OR_RETURN(trip, im.reshape(n, count.m, {}, im.helper_name(n, "trip")));
  }
  const Ref start = im.scalar_const(0, kInt64, im.helper_name(n, "start"), n.loc);
  std::vector<Ref> inits;
  for (int k = 0; k < loop.carried; ++k) {
    HEXIR_ASSIGN_OR_RETURN(Ref v, im.input(n, 2 + k));
    inits.push_back(v);
  }
  // With scan outputs, the body is built once to learn their types, then
  // rolled back and built again with a buffer for each.
  std::vector<Info> scan_types;
  if (loop.scans > 0) {
    HEXIR_ASSIGN_OR_RETURN(scan_types, add_scan_buffers(im, n, loop, *trips, start, trip, inits));
  }
  std::vector<int> values;  // [induction, carried...]
  HEXIR_ASSIGN_OR_RETURN(std::vector<Ref> outs,
                         build_loop_body(im, n, *loop.graph, start, trip, inits, values));
  std::vector<int> yielded;
  for (int k = 0; k < loop.carried; ++k) {
    HEXIR_ASSIGN_OR_RETURN(int v, im.materialize(outs[static_cast<size_t>(k)], n.loc));
    yielded.push_back(v);
  }
  if (loop.scans > 0) HEXIR_RETURN_IF_ERROR(write_scan_rows(im, n, loop, scan_types, outs, values, yielded));
  std::vector<std::string> names;
  for (int k = 0; k < loop.carried + loop.scans; ++k) names.push_back(im.result_name(n, k));
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> results, im.builder().end_loop(yielded, names, n.loc));
  for (size_t k = 0; k < results.size(); ++k) im.define(n, static_cast<int>(k), Ref{results[k], -1});
  return ok_status();
}

}  // namespace hexir::compiler::onnx_import
