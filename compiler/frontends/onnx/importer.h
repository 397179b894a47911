// The ONNX importer's core (internal to compiler/frontends/onnx): the model
// read, its values and constants by ONNX name, and what a node handler uses
// to read inputs and attributes and to add nodes. The handlers are free
// functions by operator family (handlers.h), dispatched by one table
// (registry.cc). importer.cc defines this class but for the tensor
// contents (constants.cc).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "frontends/onnx/folding.h"
#include "frontends/onnx/types.h"
#include "frontends/onnx/wire.h"
#include "hexir/base/file_io.h"
#include "hexir/compiler/onnx.h"
#include "hexir/ops/op.h"

namespace hexir::compiler::onnx_import {

// Contents read from a file (or moved into the module) stay in memory only up to this size.
constexpr uint64_t kKeepBytes = uint64_t{1} << 20;

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, std::string_view name);

// An external-data file, opened: its real path (no symlinks) and the open file.
struct ExternalFile {
  std::filesystem::path path;
  InputFile file;
};

// Opens external-data file `location` below `base_dir` (a model's folder)
// with the checked open (file_io.h: a FIFO, a device or a directory is
// refused). Refused too: a `location` holding a NUL, an absolute one, one
// with '..', and one whose real path (symlinks resolved, of the file and of
// the folders on the way) lies outside the real `base_dir`.
Result<ExternalFile> open_external_data(const std::filesystem::path& base_dir, const std::string& location);

// A constant of the graph: an initializer, a Constant node, a folded result
// or a constant the importer needs (a scale, a splat). Becomes a module
// constant only when something reads it at run time.
struct ConstRecord {
  std::string name;
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  std::optional<FileRange> file;                   // its bytes in a file (raw_data, external data)
  std::shared_ptr<HostTensor> host;                // its contents, when held (dims may differ: a reshape)
  std::optional<std::vector<uint8_t>> fill;        // one element repeated
  int module_index = -1;                           // in the builder, once added
  Location loc;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(count()) * onnx_element_size(type); }
};

// Dims read from a file (an initializer's, a Constant's): none negative, and
// their bytes (element size `esize`) representable, before count() is used.
Status check_file_dims(const std::vector<int64_t>& dims, uint32_t esize, const Location& loc);

// A graph value: a value of the function (a builder id) or a constant record.
struct Ref {
  int value = -1;
  int konst = -1;
  bool is_const() const { return konst >= 0; }
};

// A value's ONNX element type and dims.
struct Info {
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  int32_t bounded = -1;  // a bounded dim (TensorType::bounded): dims holds its bound, not its size
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// The node being imported.
struct NodeCtx {
  const onnx::NodeProto& node;
  Location loc;
  const std::string& op;
  int top_index = -1;  // its index in the model's graph; -1 inside an inlined branch
};

class Importer {
 public:
  Importer(std::filesystem::path path, const OnnxImportOptions& options);

  // Reads the model and builds the module.
  Result<Module> run();

  // ---- the model --------------------------------------------------------------
  int64_t opset() const { return opset_; }
  const std::filesystem::path& path() const { return path_; }
  const RawSpans& raw_spans() const { return raw_spans_; }
  uint64_t fold_max_bytes() const { return options_.fold_max_bytes; }
  GraphBuilder& builder() { return builder_; }

  // ---- names ------------------------------------------------------------------
  // A name no ONNX value has and nothing made here has taken.
  std::string fresh(const std::string& hint);
  // The ONNX name itself when it is free (an output named twice gets a fresh one).
  std::string claim(const std::string& onnx_name);
  // `name` is taken (a constant made under a name its caller chose).
  void mark_used(const std::string& name) { used_.insert(name); }
  // Binds ONNX name `name` to `r` (inputs and initializers of a subgraph).
  void bind(const std::string& name, Ref r) { set_entry(name, r); }
  // A subgraph's names (its inputs, initializers and node outputs) mean
  // something inside it only: while a NameScope lives, each binding is
  // logged, and its destructor gives every name bound back its outer
  // meaning (an outer value the subgraph shadowed, or none). Without it a
  // node after an If read a branch's value under a shadowed or inner name.
  class NameScope {
   public:
    explicit NameScope(Importer& im) : im_(im), mark_(im.scope_log_.size()) { ++im.open_scopes_; }
    ~NameScope();
    NameScope(const NameScope&) = delete;
    NameScope& operator=(const NameScope&) = delete;

   private:
    Importer& im_;
    size_t mark_;
  };
  // The value ONNX name `name` stands for, if any yet.
  std::optional<Ref> lookup(std::string_view name) const;
  // Whether some node or output of the model reads ONNX name `name`.
  bool is_needed(const std::string& name) const { return needed_names_.count(name) > 0; }

  // ---- constants --------------------------------------------------------------
  Ref new_const(std::string name, HostTensor host, const Location& loc);
  Ref scalar_const(double v, int32_t type, const std::string& hint, const Location& loc);
  Ref fill_const(int32_t type, std::vector<int64_t> dims, std::vector<uint8_t> element, std::string name,
                 const Location& loc);
  // A constant record made by the caller (a Constant node reading the file).
  Ref add_const(ConstRecord c);

  Info info(Ref r) const;
  // The constant record that became module constant `module_index` (a
  // builder Value's `constant`), if one did.
  std::optional<Ref> module_const(int module_index) const;
  // The contents of a constant when they are (or can be) held: at most
  // fold_max_bytes. nullptr for a run-time value or a larger constant.
  // Contents read from a file are kept for later nodes only when small.
  Result<HostPtr> host(Ref r);
  // Holds the contents of every input in `refs` (nullopt entries stay
  // absent); false when one is a run-time value or too large.
  Result<bool> hosts(const std::vector<std::optional<Ref>>& refs, std::vector<HostPtr>& out);
  // The value of `r` in the function: a constant becomes a module constant
  // (once) and is used here. Called in operand order right before its node,
  // like the .hxir parser does, so both number values alike.
  Result<int> materialize(Ref r, const Location& loc);

  // Where an external-data tensor's bytes are.
  Result<FileRange> external_range(const onnx::TensorProto& t, uint64_t bytes, const Location& loc) const;
  // The contents of a TensorProto inside the model (a Constant node's value) (constants.cc).
  Result<HostTensor> proto_contents(const onnx::TensorProto& t, const Location& loc);
  // The contents of tensor attribute `a` of node `n`, its raw_data read from
  // the file when the scan left it there (constants.cc).
  Result<HostTensor> attribute_contents(const NodeCtx& n, const onnx::AttributeProto& a);

  // ---- node plumbing ----------------------------------------------------------
  Result<Ref> input(const NodeCtx& n, int i);
  Result<std::optional<Ref>> optional_input(const NodeCtx& n, int i);
  std::string out_name(const NodeCtx& n, int i) const;
  // Output i of the node is `r`.
  void define(const NodeCtx& n, int i, Ref r);
  // Folded result `t` becomes output i.
  void define_folded(const NodeCtx& n, int i, HostTensor t);
  // A result that is not computed must not be read.
  Status only_first_outputs(const NodeCtx& n, int count);

  Status check_attrs(const NodeCtx& n, std::initializer_list<std::string_view> allowed);
  Result<int64_t> attr_int(const NodeCtx& n, std::string_view name, int64_t fallback);
  Result<double> attr_float(const NodeCtx& n, std::string_view name, double fallback);
  Result<std::optional<std::vector<int64_t>>> attr_ints(const NodeCtx& n, std::string_view name);
  Result<std::string> attr_string(const NodeCtx& n, std::string_view name, std::string fallback);
  // The integers of a constant input (shapes, axes, starts, ...).
  Result<std::vector<int64_t>> const_ints(const NodeCtx& n, Ref r, int index, const char* what);

  // `op` on `inputs` evaluated now by the CPU kernel (passes/fold.h) when
  // every input is a held constant, the operator and its dtypes have a CPU
  // kernel, and the result is within fold_max_bytes: a new constant named
  // `name`, the bits the kernel computes at run time. nullopt otherwise (the
  // caller emits the node, or folds on the host what no kernel computes:
  // folding.h). A kernel's failure (an index out of range) is an error at the node.
  Result<std::optional<Ref>> fold(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                                  const ops::AttrMap& attrs, const std::string& name,
                                  const std::vector<TensorType>& declared = {});
  // Adds a node; `names` one per result (claimed or fresh by the caller).
  Result<std::vector<int>> emit(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                                const ops::AttrMap& attrs, std::vector<std::string> names,
                                std::vector<TensorType> declared = {});
  // One-result node named for output `out` of the ONNX node (or a fresh
  // helper name); a constant instead when fold() folds it.
  Result<Ref> emit1(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs, const ops::AttrMap& attrs,
                    const std::string& name, std::vector<TensorType> declared = {});
  // The whole of most handlers' last step: `op` on `inputs` as the node's output 0.
  Status emit_result(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs, const ops::AttrMap& attrs);
  // The name of the node's output i as a value (claimed), or a helper name.
  std::string result_name(const NodeCtx& n, int i = 0);
  std::string helper_name(const NodeCtx& n, const std::string& what);
  // `x` under `dims` (a constant: the same bytes; a value: a reshape node).
  Result<Ref> reshape(const NodeCtx& n, Ref x, const std::vector<int64_t>& dims, const std::string& name);

  // ---- nodes and subgraphs ----------------------------------------------------
  // Each value of `graph` (an input, an initializer, a node output) is
  // defined once: a second definition is refused rather than silently
  // replacing the first. An initializer may also be listed as an input
  // (before IR 4 every one is; from IR 4 the initializer is the default).
  // Inputs and initializers must have a name.
  // `scope` as for import_node.
  Status check_definitions(const onnx::GraphProto& graph, const std::string& scope = {}) const;
  // `scope`: where an unnamed node is ("" at the top, "If_3/then_branch/" inside an inlined branch).
  Status import_node(const onnx::NodeProto& node, int index, const std::string& scope = {});
  // Which nodes of `graph` its outputs need (walking backwards); adds every
  // name they read to the needed names. A node with subgraphs needs every
  // name read inside them too (their implicit inputs).
  std::vector<bool> needed_nodes(const onnx::GraphProto& graph);

  // What importing a branch or a trial loop body changes (the builder, the
  // names, constants made or moved into the module), to undo it. Between
  // begin_attempt and end_attempt, large folded constants are
  // copied into the module rather than moved (an undo would lose them).
  struct Attempt {
    GraphBuilder::Checkpoint builder;
    std::map<std::string, Ref, std::less<>> entries;
    std::vector<int> module_index;  // per constant record then
  };
  Attempt begin_attempt();
  // ---- run-time shapes of bounded values (dynamic.cc) --------------------------
  // What is known at compile time of a small run-time integer vector that
  // holds dims of a bounded value (its Shape, and what is computed from it):
  // per element an upper bound, whether the element is exactly that, and
  // the extent value it equals (-1: none known).
  struct ShapeFact {
    std::vector<int64_t> upper;
    std::vector<bool> exact;
    std::vector<int> extent;
  };
  std::map<int, ShapeFact>& shape_facts() { return shape_facts_; }
  // The bound given for output `name` (OnnxImportOptions::dim_bounds), marked used.
  std::optional<int64_t> given_dim_bound(const std::string& name) {
    auto it = options_.dim_bounds.find(name);
    if (it == options_.dim_bounds.end()) return std::nullopt;
    dim_bounds_used_.insert(name);
    return it->second;
  }
  // The real-row index of a Concat along bounded dims, by its parts' extents
  // and sizes: Concats of the same parts share it, so their results share
  // their extent (concat_bounded).
  std::map<std::vector<int64_t>, int>& row_indices() { return row_indices_; }
  // A 3-D convolution's result ([N, C, T, H, W]) as the [N, T, C, H, W]
  // frames it was computed in, by builder value (nn.cc: the next 3-D
  // convolution reads them without the two transposes between).
  std::map<int, Ref>& conv3d_frames() { return conv3d_frames_; }

  void end_attempt() { --tentative_; }
  void undo(const Attempt& a);

 private:
  Status load();
  Status read_opsets();
  void reserve_names(const onnx::GraphProto& graph);
  Location graph_loc(const std::string& what) const { return Location::imported(file_, what, ""); }
  Status read_initializers(const onnx::GraphProto& graph);
  Status read_inputs(const onnx::GraphProto& graph);
  Status read_input(const onnx::ValueInfoProto& in, std::set<std::string, std::less<>>& seen_options,
                    std::vector<std::string>& open);
  Status check_input_options(const onnx::GraphProto& graph,
                             const std::set<std::string, std::less<>>& seen_options);
  static void read_names(const onnx::GraphProto& graph, std::set<std::string, std::less<>>& out);
  Ref reshaped_const(Ref r, std::vector<int64_t> dims, std::string name, const Location& loc);
  Status set_outputs(const onnx::GraphProto& graph);
  // entries_[name] = r, logged for the innermost open NameScope.
  void set_entry(const std::string& name, Ref r);

  std::filesystem::path path_, base_dir_;
  std::shared_ptr<const std::string> file_;
  const OnnxImportOptions& options_;
  onnx::ModelProto model_;
  RawSpans raw_spans_;
  int64_t opset_ = 0;
  bool shapes_overridden_ = false;
  GraphBuilder builder_;
  std::vector<ConstRecord> consts_;
  std::map<std::string, Ref, std::less<>> entries_;
  // (name, its entry before the binding) per binding made in open NameScopes.
  std::vector<std::pair<std::string, std::optional<Ref>>> scope_log_;
  int open_scopes_ = 0;
  std::set<std::string, std::less<>> reserved_, used_, needed_names_, initializer_names_;
  int tentative_ = 0;  // attempts open (begin_attempt): what they build may be undone
  std::map<int, ShapeFact> shape_facts_;  // by builder value
  std::map<std::vector<int64_t>, int> row_indices_;
  std::map<int, Ref> conv3d_frames_;
  std::set<std::string, std::less<>> dim_bounds_used_;
};

// ---- helpers every family uses (importer.cc) ------------------------------------

// The host folder's evaluation of a node on its held inputs (folding.h);
// "too large to fold" (too_large) makes the node run instead.
using HostFold = std::function<Result<HostTensor>(const std::vector<HostPtr>& held)>;
// The node's output 0 as `op` on `inputs`: folded by the CPU kernel where
// it serves the operands (Importer::fold: the bits it computes at run
// time); else, when every input is held and `host_fold` is given, by the
// host folder (dtypes and types no kernel serves: i64 shape arithmetic,
// DOUBLE); else a node.
Status fold_or_emit(Importer& im, const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                    const ops::AttrMap& attrs, const HostFold& host_fold);

// `axis` (negative: from the end) as 0..rank-1; an error naming `what` when out of range.
Result<int64_t> norm_axis(const NodeCtx& n, int64_t axis, size_t rank, const char* what = "axis");
// Product of dims[begin, end); INT64_MAX where it overflows (0 if any dim is).
int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end);
// An attribute value holding a list of integers, or a real.
ops::AttrValue int_list(const std::vector<int64_t>& v);
ops::AttrValue real(double v);
// An operator another part of Hexir may or may not have in this build,
// found by its .hxir name (so the importer builds either way).
Result<ops::OpId> hexir_op(const NodeCtx& n, const char* name);

// raw_data or the typed fields of a tensor (no external data) (constants.cc).
Result<HostTensor> typed_contents(const onnx::TensorProto& t, const Location& loc);

}  // namespace hexir::compiler::onnx_import
