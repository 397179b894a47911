// The ONNX importer's core (importer.h): the model read (its metadata parsed,
// the weights left in the file), graph inputs and initializers, constants
// and values by ONNX name, node plumbing, and the driver that runs a handler
// (registry.cc) per needed node. The public entry points are at the end.
#include "frontends/onnx/importer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>

#include "frontends/onnx/handlers.h"
#include "hexir/base/mapped_file.h"
#include "passes/fold.h"
#include "passes/fusion.h"

namespace hexir::compiler::onnx_import {

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, std::string_view name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Importer::Importer(std::filesystem::path path, const OnnxImportOptions& options)
    : path_(std::move(path)),
      base_dir_(path_.parent_path()),
      file_(std::make_shared<const std::string>(path_.string())),
      options_(options) {}

static void drop_unread_nodes(Function& fn);

Result<Module> Importer::run() {
  HEXIR_RETURN_IF_ERROR(load());
  const onnx::GraphProto& graph = model_.graph();
  builder_.set_module_name(graph.name().empty() ? path_.stem().string() : graph.name());
  HEXIR_RETURN_IF_ERROR(read_opsets());
  HEXIR_RETURN_IF_ERROR(check_definitions(graph));
  reserve_names(graph);
  HEXIR_RETURN_IF_ERROR(read_initializers(graph));
  HEXIR_RETURN_IF_ERROR(builder_.begin_function(options_.function_name, Location::imported(file_, "", "")));
  HEXIR_RETURN_IF_ERROR(read_inputs(graph));
  const std::vector<bool> needed = needed_nodes(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!needed[static_cast<size_t>(i)]) continue;
    HEXIR_RETURN_IF_ERROR(import_node(graph.node(i), i));
  }
  HEXIR_RETURN_IF_ERROR(set_outputs(graph));
  for (const auto& [name, bound] : options_.dim_bounds)
    if (!dim_bounds_used_.count(name))
      return invalid_argument(path_.string() + ": --dim-bound " + name +
                              ": no NonZero, NonMaxSuppression or Compress output of that name is computed");
  HEXIR_RETURN_IF_ERROR(builder_.end_function());
  HEXIR_ASSIGN_OR_RETURN(Module module, builder_.finish());
  recognize_exported_gelu(module);  // exporters spell GELU out in five nodes
  recognize_exported_hard_swish(module);  // and the hard swish in four
  // What the rewrites above and the 3-D convolutions' frames left unread.
  if (!conv3d_frames_.empty())
    for (Function& fn : module.functions) drop_unread_nodes(fn);
  return module;
}

// Operator nodes none of whose results is read or returned, last to first
// (a node's inputs are read again only by nodes before it, which the same
// pass then finds unread in turn).
static void drop_unread_nodes(Function& fn) {
  std::vector<int> reads(fn.values.size(), 0);
  for (const Node& node : fn.nodes)
    for (int v : node.inputs) ++reads[static_cast<size_t>(v)];
  for (int v : fn.outputs) ++reads[static_cast<size_t>(v)];
  std::vector<bool> node_dropped(fn.nodes.size(), false), value_dropped(fn.values.size(), false);
  for (size_t n = fn.nodes.size(); n-- > 0;) {
    const Node& node = fn.nodes[n];
    if (node.kind != NodeKind::kOp || node.results.empty()) continue;
    if (std::any_of(node.results.begin(), node.results.end(), [&](int v) { return reads[static_cast<size_t>(v)] > 0; }))
      continue;
    node_dropped[n] = true;
    for (int v : node.results) value_dropped[static_cast<size_t>(v)] = true;
    for (int v : node.inputs) --reads[static_cast<size_t>(v)];
  }
  if (std::find(node_dropped.begin(), node_dropped.end(), true) != node_dropped.end())
    drop(fn, node_dropped, std::move(value_dropped));
}

// ---- loading ----------------------------------------------------------------
Status Importer::load() {
  HEXIR_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path_.string()));
  const uint8_t* begin = mapped.data();
  std::string stripped;
  if (!strip_model(begin, begin + mapped.size(), stripped, raw_spans_))
    return invalid_argument(path_.string() + ": not an ONNX model (malformed protobuf)");
  if (stripped.size() > static_cast<size_t>(INT32_MAX))
    return invalid_argument(path_.string() + ": the model's metadata exceeds 2 GiB");
  // Before protobuf merges what the scan read one by one, and to say why a deep model fails.
  if (const std::string problem = check_model_fields(
          reinterpret_cast<const uint8_t*>(stripped.data()),
          reinterpret_cast<const uint8_t*>(stripped.data()) + stripped.size());
      !problem.empty())
    return invalid_argument(path_.string() + ": not an ONNX model Hexir can read: " + problem);
  if (!model_.ParseFromString(stripped))
    return invalid_argument(path_.string() + ": not an ONNX model (protobuf parse failed)");
  if (!model_.has_graph()) return invalid_argument(path_.string() + ": the model has no graph");
  if (static_cast<size_t>(model_.graph().initializer_size()) != raw_spans_.initializers.size())
    return internal_error(path_.string() + ": initializer scan found " +
                          std::to_string(raw_spans_.initializers.size()) + " initializers, protobuf " +
                          std::to_string(model_.graph().initializer_size()));
  return ok_status();
}

Status Importer::read_opsets() {
  opset_ = -1;
  for (const auto& o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
  if (opset_ < 0) opset_ = model_.opset_import_size() == 0 ? 1 : -1;
  return ok_status();
}

void Importer::reserve_names(const onnx::GraphProto& graph) {
  for (const auto& v : graph.input()) reserved_.insert(v.name());
  for (const auto& v : graph.output()) reserved_.insert(v.name());
  for (const auto& t : graph.initializer()) reserved_.insert(t.name());
  for (const auto& n : graph.node()) {
    for (const auto& o : n.output()) reserved_.insert(o);
    for (const auto& a : n.attribute()) {  // subgraphs (If branches)
      if (a.has_g()) reserve_names(a.g());
      for (const auto& g : a.graphs()) reserve_names(g);
    }
  }
}

std::string Importer::fresh(const std::string& hint) {
  std::string name = hint;
  for (int k = 1; reserved_.count(name) || used_.count(name); ++k) name = hint + "_" + std::to_string(k);
  used_.insert(name);
  return name;
}

std::string Importer::claim(const std::string& onnx_name) {
  if (!used_.count(onnx_name)) {
    used_.insert(onnx_name);
    return onnx_name;
  }
  return fresh(onnx_name);
}

Status Importer::read_initializers(const onnx::GraphProto& graph) {
  if (graph.sparse_initializer_size() > 0)
    return error_at(graph_loc(graph.sparse_initializer(0).values().name()),
                    "sparse initializers are not supported by the ONNX importer");
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto& t = graph.initializer(i);
    const Location loc = Location::imported(file_, t.name(), "initializer");
    ConstRecord c;
    c.name = claim(t.name());
    c.type = t.data_type();
    c.dims.assign(t.dims().begin(), t.dims().end());
    c.loc = loc;
    if (onnx_element_size(c.type) == 0)
      return error_at(loc, "initializer of type " + onnx_type_name(c.type) + " is not supported");
    HEXIR_RETURN_IF_ERROR(check_file_dims(c.dims, onnx_element_size(c.type), loc));
    const std::optional<FileSpan>& raw = raw_spans_.initializers[static_cast<size_t>(i)];
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      HEXIR_ASSIGN_OR_RETURN(c.file, external_range(t, c.bytes(), loc));
    } else if (raw) {
      if (raw->size != c.bytes())
        return error_at(loc, "raw_data holds " + std::to_string(raw->size) + " bytes, " +
                                 onnx_type_name(c.type) + shape_text(c.dims) + " needs " +
                                 std::to_string(c.bytes()));
      c.file = FileRange{path_, raw->offset};
    } else {
      HEXIR_ASSIGN_OR_RETURN(HostTensor h, typed_contents(t, loc));
      c.host = std::make_shared<HostTensor>(std::move(h));
    }
    const int index = static_cast<int>(consts_.size());
    consts_.push_back(std::move(c));
    entries_[t.name()] = Ref{-1, index};
    initializer_names_.insert(t.name());
  }
  return ok_status();
}

Status check_file_dims(const std::vector<int64_t>& dims, uint32_t esize, const Location& loc) {
  int64_t bytes = esize;
  for (int64_t d : dims) {
    if (d < 0) return error_at(loc, "negative dim in " + shape_text(dims));
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return error_at(loc, "dims " + shape_text(dims) + " hold more bytes than a 64-bit size");
  }
  return ok_status();
}

Result<FileRange> Importer::external_range(const onnx::TensorProto& t, uint64_t bytes,
                                           const Location& loc) const {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      uint64_t v = 0;
      auto [end, ec] = std::from_chars(kv.value().data(), kv.value().data() + kv.value().size(), v);
      if (ec != std::errc() || end != kv.value().data() + kv.value().size())
        return error_at(loc, "external data " + kv.key() + " '" + kv.value() + "' is not a number");
      (kv.key() == "offset" ? offset : length.emplace()) = v;
    }
  }
  if (location.empty()) return error_at(loc, "external data without a 'location'");
  if (length && *length != bytes)
    return error_at(loc, "external data length " + std::to_string(*length) + " does not match the " +
                             std::to_string(bytes) + " bytes of its type");
  // Opened here to confine and check it; the constant reads its real path later.
  Result<ExternalFile> file = open_external_data(base_dir_, location);
  if (!file.ok()) return error_at(loc, file.status().message());
  return FileRange{std::move(file->path), offset};
}

Result<ExternalFile> open_external_data(const std::filesystem::path& base_dir, const std::string& location) {
  const std::string shown = "external data location '" + location + "'";
  if (location.find('\0') != std::string::npos)
    return invalid_argument(shown + " holds a NUL byte (a path ends at the first)");
  if (std::filesystem::path(location).is_absolute() || location.find("..") != std::string::npos)
    return invalid_argument(shown + " must be a relative path below the model's directory");
  const std::filesystem::path dir = base_dir.empty() ? std::filesystem::path(".") : base_dir;
  std::unique_ptr<char, void (*)(void*)> real_dir(::realpath(dir.c_str(), nullptr), std::free);
  if (!real_dir) return invalid_argument("cannot resolve the model's directory '" + dir.string() + "'");
  const std::filesystem::path joined = dir / location;
  std::unique_ptr<char, void (*)(void*)> real(::realpath(joined.c_str(), nullptr), std::free);
  if (!real) return not_found(shown + ": cannot open '" + joined.string() + "': " + std::strerror(errno));
  // Symlinks (of the file or a folder on the way) must not lead out of the folder.
  std::string inside = real_dir.get();
  if (inside.back() != '/') inside += '/';
  if (std::string_view(real.get()).substr(0, inside.size()) != inside)
    return invalid_argument(shown + " resolves to '" + real.get() + "', outside the model's directory '" +
                            real_dir.get() + "'");
  Result<InputFile> file = open_input_file(real.get());
  if (!file.ok()) return file.status().annotate(shown);
  return ExternalFile{real.get(), std::move(file).value()};
}

// ---- graph inputs -------------------------------------------------------------
Status Importer::read_inputs(const onnx::GraphProto& graph) {
  std::set<std::string, std::less<>> seen_options;
  std::vector<std::string> open;
  for (const auto& in : graph.input()) {
    if (initializer_names_.count(in.name())) continue;  // an initializer (IR < 4 lists them as inputs too)
    HEXIR_RETURN_IF_ERROR(read_input(in, seen_options, open));
  }
  HEXIR_RETURN_IF_ERROR(check_input_options(graph, seen_options));
  if (!open.empty()) {
    std::string msg = "dynamic dims must be fixed with --input-shape NAME=D0xD1x...: input ";
    for (size_t i = 0; i < open.size(); ++i) msg += (i ? "; input " : "") + open[i];
    return invalid_argument(path_.string() + ": " + msg);
  }
  return ok_status();
}

// One graph input: a function input, or a constant (its value given, or
// bound). Adds the options that name it to `seen_options`, and to `open` a
// description of its dims left open.
Status Importer::read_input(const onnx::ValueInfoProto& in, std::set<std::string, std::less<>>& seen_options,
                            std::vector<std::string>& open) {
  const Location loc = Location::imported(file_, in.name(), "input");
  if (!in.type().has_tensor_type())
    return error_at(loc, "input '" + in.name() + "' is not a tensor (sequences and maps are not supported)");
  const auto& tt = in.type().tensor_type();
  const std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype)
    return error_at(loc, "input '" + in.name() + "' has element type " + onnx_type_name(tt.elem_type()) +
                             ", which Hexir does not support");
  std::vector<int64_t> dims;
  std::string open_dims;
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      dims.push_back(dim.dim_value());
    } else {
      dims.push_back(-1);
      open_dims += std::string(open_dims.empty() ? "" : ", ") + std::to_string(d) +
                   (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : " (unknown)");
    }
  }
  if (auto it = options_.input_shapes.find(in.name()); it != options_.input_shapes.end()) {
    seen_options.insert(in.name());
    if (tt.has_shape() && it->second.size() != dims.size())
      return error_at(loc, "--input-shape gives input '" + in.name() + "' rank " +
                               std::to_string(it->second.size()) + ", the model declares rank " +
                               std::to_string(dims.size()) + " " + shape_text(dims));
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] >= 0 && dims[d] != it->second[d])
        return error_at(loc, "--input-shape gives input '" + in.name() + "' dim " + std::to_string(d) +
                                 " = " + std::to_string(it->second[d]) + ", the model fixes it to " +
                                 std::to_string(dims[d]));
    dims = it->second;
    open_dims.clear();
    shapes_overridden_ = true;
  } else if (!tt.has_shape()) {
    open_dims = "all (no shape)";
  }
  if (auto it = options_.input_values.find(in.name()); it != options_.input_values.end()) {
    seen_options.insert(in.name());
    const OnnxTensor& value = it->second;
    if (value.type.dtype != *dtype)
      return error_at(loc, "the value given for input '" + in.name() + "' is " + value.type.to_string() +
                               ", the input is " + dtype_name(*dtype));
    bool fits = !tt.has_shape() || value.type.dims.size() == dims.size();
    for (size_t d = 0; fits && d < dims.size(); ++d) fits = dims[d] < 0 || dims[d] == value.type.dims[d];
    Result<uint64_t> size = byte_size(value.type);
    if (!fits || !size.ok() || *size != value.bytes.size())
      return error_at(loc, "the value given for input '" + in.name() + "' (" + value.type.to_string() + ", " +
                               std::to_string(value.bytes.size()) + " bytes) does not fit its shape " +
                               shape_text(dims));
    HostTensor h = make_host(tt.elem_type(), value.type.dims);
    h.bytes = value.bytes;
    entries_[in.name()] = new_const(claim(in.name()), std::move(h), loc);
    return ok_status();
  }
  const bool bound = options_.binds.count(in.name()) > 0;
  if (!open_dims.empty() && !bound) {
    open.push_back("'" + in.name() + "' dims " + open_dims);
    return ok_status();
  }
  if (bound) {
    seen_options.insert(in.name());
    if (!open_dims.empty()) std::replace(dims.begin(), dims.end(), int64_t{-1}, int64_t{1});
    if (product(dims, 0, dims.size()) != 1)
      return error_at(loc, "--bind " + in.name() + ": the input is " + std::string(dtype_name(*dtype)) +
                               shape_text(dims) + "; only an input of one element can be bound");
    HostTensor h = make_host(tt.elem_type(), dims);
    h.set_f(0, options_.binds.find(in.name())->second);
    entries_[in.name()] = new_const(claim(in.name()), std::move(h), loc);
    return ok_status();
  }
  HEXIR_ASSIGN_OR_RETURN(int id, builder_.add_input(claim(in.name()), TensorType{*dtype, dims}, false, loc));
  entries_[in.name()] = Ref{id, -1};
  return ok_status();
}

// Every input option must name an input of the model.
Status Importer::check_input_options(const onnx::GraphProto& graph,
                                     const std::set<std::string, std::less<>>& seen_options) {
  std::vector<std::string> unknown;
  for (const auto& [name, dims] : options_.input_shapes)
    if (!seen_options.count(name)) unknown.push_back(name);
  for (const auto& [name, value] : options_.binds)
    if (!seen_options.count(name)) unknown.push_back(name);
  for (const auto& [name, value] : options_.input_values)
    if (!seen_options.count(name)) unknown.push_back(name);
  if (!unknown.empty()) {
    std::string inputs;
    for (const auto& in : graph.input())
      if (!initializer_names_.count(in.name())) inputs += (inputs.empty() ? "'" : ", '") + in.name() + "'";
    return invalid_argument(path_.string() + ": no model input named '" + unknown.front() +
                            "' (the inputs are " + (inputs.empty() ? "none" : inputs) + ")");
  }
  return ok_status();
}

std::vector<bool> Importer::needed_nodes(const onnx::GraphProto& graph) {
  std::set<std::string, std::less<>> need;
  for (const auto& o : graph.output()) need.insert(o.name());
  std::vector<bool> needed(static_cast<size_t>(graph.node_size()), false);
  for (int i = graph.node_size(); i-- > 0;) {
    const auto& n = graph.node(i);
    bool used = false;
    for (const auto& o : n.output()) used |= !o.empty() && need.count(o) > 0;
    if (!used) continue;
    needed[static_cast<size_t>(i)] = true;
    for (const auto& in : n.input())
      if (!in.empty()) need.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) read_names(a.g(), need);
      for (const auto& g : a.graphs()) read_names(g, need);
    }
  }
  needed_names_.insert(need.begin(), need.end());
  return needed;
}

void Importer::read_names(const onnx::GraphProto& graph, std::set<std::string, std::less<>>& out) {
  for (const auto& o : graph.output()) out.insert(o.name());
  for (const auto& n : graph.node()) {
    for (const auto& in : n.input())
      if (!in.empty()) out.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) read_names(a.g(), out);
      for (const auto& g : a.graphs()) read_names(g, out);
    }
  }
}

// ---- constants ------------------------------------------------------------------
Ref Importer::new_const(std::string name, HostTensor host, const Location& loc) {
  ConstRecord c;
  c.name = std::move(name);
  c.type = host.type;
  c.dims = host.dims;
  c.host = std::make_shared<HostTensor>(std::move(host));
  c.loc = loc;
  consts_.push_back(std::move(c));
  return Ref{-1, static_cast<int>(consts_.size()) - 1};
}

// The same bytes under other dims (a reshape of a constant costs nothing).
Ref Importer::reshaped_const(Ref r, std::vector<int64_t> dims, std::string name, const Location& loc) {
  ConstRecord c = consts_[static_cast<size_t>(r.konst)];
  c.name = std::move(name);
  c.dims = std::move(dims);
  c.module_index = -1;
  c.loc = loc;
  consts_.push_back(std::move(c));
  return Ref{-1, static_cast<int>(consts_.size()) - 1};
}

Ref Importer::scalar_const(double v, int32_t type, const std::string& hint, const Location& loc) {
  HostTensor h = make_host(type, {});
  h.set_f(0, v);
  return new_const(fresh(hint), std::move(h), loc);
}

Ref Importer::fill_const(int32_t type, std::vector<int64_t> dims, std::vector<uint8_t> element,
                         std::string name, const Location& loc) {
  ConstRecord c;
  c.name = std::move(name);
  c.type = type;
  c.dims = std::move(dims);
  c.fill = std::move(element);
  c.loc = loc;
  consts_.push_back(std::move(c));
  return Ref{-1, static_cast<int>(consts_.size()) - 1};
}

Ref Importer::add_const(ConstRecord c) {
  consts_.push_back(std::move(c));
  return Ref{-1, static_cast<int>(consts_.size()) - 1};
}

std::optional<Ref> Importer::lookup(std::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

Info Importer::info(Ref r) const {
  if (r.is_const()) {
    const ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
    return {c.type, c.dims};
  }
  const TensorType& t = builder_.value(r.value).type;
  return {onnx_type_of(t.dtype), t.dims, t.bounded};
}

std::optional<Ref> Importer::module_const(int module_index) const {
  for (size_t k = 0; k < consts_.size(); ++k)
    if (consts_[k].module_index == module_index) return Ref{-1, static_cast<int>(k)};
  return std::nullopt;
}

Result<HostPtr> Importer::host(Ref r) {
  if (!r.is_const()) return HostPtr();
  ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
  HostPtr h = c.host;
  if (!h) {
    if (c.bytes() > options_.fold_max_bytes) return HostPtr();
    auto loaded = std::make_shared<HostTensor>(make_host(c.type, c.dims));
    HostTensor& t = *loaded;
    if (c.fill) {
      for (size_t at = 0; at < t.bytes.size(); at += c.fill->size())
        std::memcpy(t.bytes.data() + at, c.fill->data(), c.fill->size());
    } else if (c.file) {
      std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(c.file->path.c_str(), "rb"), std::fclose);
      if (!f) return error_at(c.loc, "cannot open '" + c.file->path.string() + "': " + std::strerror(errno));
      if (fseeko(f.get(), static_cast<off_t>(c.file->offset), SEEK_SET) != 0 ||
          std::fread(t.bytes.data(), 1, t.bytes.size(), f.get()) != t.bytes.size())
        return error_at(c.loc, "cannot read " + std::to_string(t.bytes.size()) + " bytes at offset " +
                                   std::to_string(c.file->offset) + " of '" + c.file->path.string() + "'");
    } else if (c.module_index >= 0) {  // moved into the module when it was first used
      const auto& bytes = std::get<InlineBytes>(builder_.constant(c.module_index).source).bytes;
      if (!t.bytes.empty()) std::memcpy(t.bytes.data(), bytes.data(), t.bytes.size());  // empty: may be null
    }
    if (t.bytes.size() <= kKeepBytes) c.host = loaded;
    h = std::move(loaded);
  }
  if (h->dims != c.dims) {  // a reshaped record sharing its source's contents
    auto view = std::make_shared<HostTensor>(*h);
    view->dims = c.dims;
    h = std::move(view);
  }
  return h;
}

Result<int> Importer::materialize(Ref r, const Location& loc) {
  if (!r.is_const()) return r.value;
  ConstRecord& c = consts_[static_cast<size_t>(r.konst)];
  if (c.module_index < 0) {
    const std::optional<DType> dtype = dtype_from_onnx(c.type);
    if (!dtype)
      return error_at(loc, "constant '" + c.name + "' is " + onnx_type_name(c.type) +
                               ", which Hexir does not support at run time");
    TensorType type{*dtype, c.dims};
    ConstantSource source;
    if (c.fill) {
      source = FillPattern{*c.fill};
    } else if (c.file) {
      source = *c.file;
    } else if (c.host.use_count() == 1 && c.host->bytes.size() > kKeepBytes && tentative_ == 0) {
      // A large folded result (transposed weights): its bytes move into the
      // module; host() reads them back from there if a later fold needs them.
      // (Not in a branch being tried: a rollback would lose them.)
      source = InlineBytes{std::move(c.host->bytes)};
      c.host.reset();
    } else {
      source = InlineBytes{c.host->bytes};
    }
    HEXIR_ASSIGN_OR_RETURN(c.module_index,
                           builder_.add_constant(c.name, std::move(type), std::move(source), c.loc));
  }
  return builder_.use_constant(c.module_index, loc);
}

// ---- node plumbing --------------------------------------------------------------
Result<Ref> Importer::input(const NodeCtx& n, int i) {
  if (i >= n.node.input_size() || n.node.input(i).empty())
    return error_at(n.loc, "input " + std::to_string(i) + " is missing");
  auto it = entries_.find(n.node.input(i));
  if (it == entries_.end())
    return error_at(n.loc, "input '" + n.node.input(i) +
                               "' is not defined before this node (nodes must be in topological order)");
  return it->second;
}

Result<std::optional<Ref>> Importer::optional_input(const NodeCtx& n, int i) {
  if (i >= n.node.input_size() || n.node.input(i).empty()) return std::optional<Ref>();
  HEXIR_ASSIGN_OR_RETURN(Ref r, input(n, i));
  return std::optional<Ref>(r);
}

std::string Importer::out_name(const NodeCtx& n, int i) const {
  return i < n.node.output_size() ? n.node.output(i) : std::string();
}

void Importer::define(const NodeCtx& n, int i, Ref r) {
  if (i < n.node.output_size() && !n.node.output(i).empty()) set_entry(n.node.output(i), r);
}

void Importer::set_entry(const std::string& name, Ref r) {
  auto [it, added] = entries_.try_emplace(name, r);
  if (open_scopes_ > 0) scope_log_.emplace_back(name, added ? std::nullopt : std::optional<Ref>(it->second));
  it->second = r;
}

Importer::NameScope::~NameScope() {
  for (size_t k = im_.scope_log_.size(); k-- > mark_;) {  // newest first: the oldest entry wins
    auto& [name, before] = im_.scope_log_[k];
    if (before)
      im_.entries_[name] = *before;
    else
      im_.entries_.erase(name);
  }
  im_.scope_log_.resize(mark_);
  --im_.open_scopes_;
}

Status Importer::only_first_outputs(const NodeCtx& n, int count) {
  for (int i = count; i < n.node.output_size(); ++i)
    if (!n.node.output(i).empty() && needed_names_.count(n.node.output(i)))
      return error_at(n.loc, "output " + std::to_string(i) + " ('" + n.node.output(i) +
                                 "') is used, but only the first " + std::to_string(count) +
                                 " output(s) are supported");
  return ok_status();
}

Status Importer::check_attrs(const NodeCtx& n, std::initializer_list<std::string_view> allowed) {
  for (const auto& a : n.node.attribute())
    if (std::find(allowed.begin(), allowed.end(), a.name()) == allowed.end())
      return error_at(n.loc, "attribute '" + a.name() + "' is not supported by the ONNX importer (opset " +
                                 std::to_string(opset_) + ")");
  return ok_status();
}

Result<int64_t> Importer::attr_int(const NodeCtx& n, std::string_view name, int64_t fallback) {
  const auto* a = find_attribute(n.node, name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT)
    return error_at(n.loc, "attribute '" + std::string(name) + "' must be an integer");
  return a->i();
}

Result<double> Importer::attr_float(const NodeCtx& n, std::string_view name, double fallback) {
  const auto* a = find_attribute(n.node, name);
  if (!a) return fallback;
  if (a->type() == onnx::AttributeProto::FLOAT) return static_cast<double>(a->f());
  if (a->type() == onnx::AttributeProto::INT) return static_cast<double>(a->i());
  return error_at(n.loc, "attribute '" + std::string(name) + "' must be a float");
}

Result<std::optional<std::vector<int64_t>>> Importer::attr_ints(const NodeCtx& n, std::string_view name) {
  const auto* a = find_attribute(n.node, name);
  if (!a) return std::optional<std::vector<int64_t>>();
  if (a->type() != onnx::AttributeProto::INTS && a->type() != onnx::AttributeProto::INT)
    return error_at(n.loc, "attribute '" + std::string(name) + "' must be a list of integers");
  if (a->type() == onnx::AttributeProto::INT)
    return std::optional<std::vector<int64_t>>(std::vector<int64_t>{a->i()});
  return std::optional<std::vector<int64_t>>(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
}

Result<std::string> Importer::attr_string(const NodeCtx& n, std::string_view name, std::string fallback) {
  const auto* a = find_attribute(n.node, name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING)
    return error_at(n.loc, "attribute '" + std::string(name) + "' must be a string");
  return a->s();
}

Result<std::vector<int64_t>> Importer::const_ints(const NodeCtx& n, Ref r, int index, const char* what) {
  HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(r));
  if (!h)
    return error_at(n.loc, std::string(what) + " (input " + std::to_string(index) + ", '" +
                               n.node.input(index) +
                               "') must be a constant (computable at import); it is computed at run time");
  if (h->is_float())
    return error_at(n.loc, std::string(what) + " (input " + std::to_string(index) +
                               ") must be integers, not " + onnx_type_name(h->type));
  std::vector<int64_t> v(static_cast<size_t>(h->count()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = h->i(static_cast<int64_t>(i));
  return v;
}

Result<std::optional<Ref>> Importer::fold(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                                          const ops::AttrMap& attrs, const std::string& name,
                                          const std::vector<TensorType>& declared) {
  using NoFold = std::optional<Ref>;
  if (!std::all_of(inputs.begin(), inputs.end(), [](Ref r) { return r.is_const(); })) return NoFold();
  std::vector<TensorType> types;
  std::vector<HostPtr> held;
  for (Ref r : inputs) {
    const Info i = info(r);
    const std::optional<DType> dtype = dtype_from_onnx(i.type);
    if (!dtype) return NoFold();  // DOUBLE, INT16, ...: the host folder's (folding.h)
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(r));
    if (!h) return NoFold();
    types.push_back(TensorType{*dtype, i.dims});
    held.push_back(std::move(h));
  }
  Result<std::vector<int64_t>> params = ops::lower_attributes(op, types, attrs, declared);
  if (!params.ok()) return NoFold();  // the builder says why
  std::vector<HostOperand> operands;
  for (size_t k = 0; k < held.size(); ++k) operands.push_back({types[k], held[k]->bytes});
  Result<std::optional<std::vector<HostResult>>> results =
      evaluate_on_cpu(op, *params, operands, options_.fold_max_bytes);
  if (!results.ok()) return error_at(n.loc, results.status().message());
  if (!*results || (*results)->size() != 1) return NoFold();
  HostResult& r = (**results)[0];
  if (!declared.empty() && declared != std::vector<TensorType>{r.type}) return NoFold();
  HostTensor t;
  t.type = onnx_type_of(r.type.dtype);
  t.dims = r.type.dims;
  t.bytes = std::move(r.bytes);
  return NoFold(new_const(name, std::move(t), n.loc));
}

Result<std::vector<int>> Importer::emit(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                              const ops::AttrMap& attrs, std::vector<std::string> names,
                              std::vector<TensorType> declared) {
  NodeSpec spec;
  spec.op = op;
  for (Ref r : inputs) {
    HEXIR_ASSIGN_OR_RETURN(int v, materialize(r, n.loc));
    spec.inputs.push_back(v);
  }
  // A handler states dims; where a bounded operand gives a result a bounded
  // dim (the shape rule's, ops/src/bounds.cc), the stated type takes it.
  bool bounded = false;
  std::vector<TensorType> input_types;
  for (int v : spec.inputs) {
    input_types.push_back(builder_.value(v).type);
    bounded = bounded || input_types.back().has_bound();
  }
  if (bounded && !declared.empty()) {
    Result<std::vector<int64_t>> params = ops::lower_attributes(op, input_types, attrs, declared);
    Result<std::vector<TensorType>> inferred =
        params.ok() ? ops::infer_result_types(op, input_types, *params) : params.status();
    if (inferred.ok() && inferred->size() == declared.size())
      for (size_t i = 0; i < declared.size(); ++i)
        if (declared[i].dims == (*inferred)[i].dims) declared[i].bounded = (*inferred)[i].bounded;
  }
  spec.attrs = attrs;
  spec.declared = std::move(declared);
  spec.names = std::move(names);
  spec.locs.node = n.loc;
  return builder_.add_node(std::move(spec));
}

Result<Ref> Importer::emit1(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                            const ops::AttrMap& attrs, const std::string& name,
                            std::vector<TensorType> declared) {
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> folded, fold(n, op, inputs, attrs, name, declared));
  if (folded) return *folded;
  HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, emit(n, op, inputs, attrs, {name}, std::move(declared)));
  return Ref{ids[0], -1};
}

Status Importer::emit_result(const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                             const ops::AttrMap& attrs) {
  HEXIR_ASSIGN_OR_RETURN(Ref r, emit1(n, op, inputs, attrs, result_name(n)));
  define(n, 0, r);
  return ok_status();
}

std::string Importer::result_name(const NodeCtx& n, int i) {
  const std::string o = out_name(n, i);
  return o.empty() ? fresh(n.op + "_" + std::to_string(i)) : claim(o);
}

std::string Importer::helper_name(const NodeCtx& n, const std::string& what) {
  const std::string base = out_name(n, 0).empty() ? n.op : out_name(n, 0);
  return fresh(base + "/" + what);
}

Result<Ref> Importer::reshape(const NodeCtx& n, Ref x, const std::vector<int64_t>& dims,
                              const std::string& name) {
  Info xi = info(x);
  if (x.is_const()) return reshaped_const(x, dims, name, n.loc);
  if (xi.dims == dims) {
    used_.erase(name);  // nothing was made under it
    return x;
  }
  const TensorType& t = builder_.value(x.value).type;
  return emit1(n, ops::OpId::kReshape, {x}, {}, name, {TensorType{t.dtype, dims}});
}

Result<bool> Importer::hosts(const std::vector<std::optional<Ref>>& refs, std::vector<HostPtr>& out) {
  out.clear();
  for (const auto& r : refs) {
    if (!r) {
      out.push_back(nullptr);
      continue;
    }
    HEXIR_ASSIGN_OR_RETURN(HostPtr h, host(*r));
    if (!h) return false;
    out.push_back(h);
  }
  return true;
}

void Importer::define_folded(const NodeCtx& n, int i, HostTensor t) {
  const std::string o = out_name(n, i);
  if (o.empty()) return;
  define(n, i, new_const(claim(o), std::move(t), n.loc));
}

// ---- nodes and subgraphs ---------------------------------------------------------------
namespace {

std::string node_label(const onnx::NodeProto& node, int index, const std::string& scope) {
  return node.name().empty() ? scope + "#" + std::to_string(index) : node.name();
}

}  // namespace

Status Importer::check_definitions(const onnx::GraphProto& graph, const std::string& scope) const {
  // Each name and what defined it first.
  std::map<std::string_view, std::string> defined;
  auto define = [&](const std::string& name, std::string by, const Location& loc) -> Status {
    auto [it, inserted] = defined.try_emplace(name, std::move(by));
    if (inserted) return ok_status();
    return error_at(loc, "value '" + name + "' is defined more than once (first by " + it->second +
                             "): an ONNX graph defines each value once");
  };
  // An empty name is ONNX's "no value" (an optional input left out): it names no input or initializer.
  for (int i = 0; i < graph.input_size(); ++i) {
    const std::string& name = graph.input(i).name();
    const Location loc = Location::imported(file_, scope + name, "input");
    if (name.empty()) return error_at(loc, "graph input " + std::to_string(i) + " has no name");
    HEXIR_RETURN_IF_ERROR(define(name, "graph input '" + name + "'", loc));
  }
  std::set<std::string_view> initializers;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const onnx::TensorProto& t = graph.initializer(i);
    const Location loc = Location::imported(file_, scope + t.name(), "initializer");
    if (t.name().empty()) return error_at(loc, "initializer " + std::to_string(i) + " has no name");
    if (!initializers.insert(t.name()).second)
      return error_at(loc, "value '" + t.name() + "' is defined more than once (first by another initializer)" +
                               ": an ONNX graph defines each value once");
    if (!defined.count(t.name())) HEXIR_RETURN_IF_ERROR(define(t.name(), "initializer '" + t.name() + "'", loc));
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const std::string label = node_label(node, i, scope);
    for (const auto& out : node.output())
      if (!out.empty())
        HEXIR_RETURN_IF_ERROR(define(out, "node '" + label + "' (" + node.op_type() + ")",
                                     Location::imported(file_, label, node.op_type())));
  }
  return ok_status();
}

Status Importer::import_node(const onnx::NodeProto& node, int index, const std::string& scope) {
  const std::string label = node_label(node, index, scope);
  const NodeCtx n{node, Location::imported(file_, label, node.op_type()), node.op_type(),
                  scope.empty() ? index : -1};
  // find_attribute reads the first of a name: a second is refused, not ignored.
  for (int a = 1; a < node.attribute_size(); ++a)
    for (int b = 0; b < a; ++b)
      if (node.attribute(a).name() == node.attribute(b).name())
        return error_at(n.loc, "attribute '" + node.attribute(a).name() + "' is given more than once");
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return error_at(
        n.loc, "operator domain '" + node.domain() + "' is not supported (only the default ONNX domain)");
  if (opset_ < 0) return error_at(n.loc, "the model imports no opset of the default ONNX domain");
  const std::string& op = node.op_type();
  const Handler handler = find_handler(op);
  if (op != "If" && op != "Loop")
    for (const auto& a : node.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
        return error_at(n.loc, "subgraphs are supported in If and Loop only");
  if (!handler)
    return error_at(
        n.loc, "operator '" + op + "' is not supported by the ONNX importer (docs/onnx.md lists what is)");
  HEXIR_RETURN_IF_ERROR(handler(*this, n));
  note_shape_facts(*this, n);
  return ok_status();
}

Importer::Attempt Importer::begin_attempt() {
  Attempt a{builder_.checkpoint(), entries_, {}};
  for (const ConstRecord& c : consts_) a.module_index.push_back(c.module_index);
  ++tentative_;
  return a;
}

void Importer::undo(const Attempt& a) {
  builder_.rollback(a.builder);
  shape_facts_.erase(shape_facts_.lower_bound(builder_.value_count()), shape_facts_.end());
  std::erase_if(row_indices_, [&](const auto& entry) { return entry.second >= builder_.value_count(); });
  std::erase_if(conv3d_frames_, [&](const auto& entry) {
    return entry.first >= builder_.value_count() || entry.second.value >= builder_.value_count();
  });
  entries_ = a.entries;
  consts_.resize(a.module_index.size());
  for (size_t k = 0; k < consts_.size(); ++k) consts_[k].module_index = a.module_index[k];
}

// ---- outputs ---------------------------------------------------------------------
Status Importer::set_outputs(const onnx::GraphProto& graph) {
  std::vector<int> values;
  std::set<int> returned;
  for (const auto& out : graph.output()) {
    const Location loc = Location::imported(file_, out.name(), "output");
    auto it = entries_.find(out.name());
    if (it == entries_.end())
      return error_at(loc, "output '" + out.name() + "' is not computed by the graph");
    Ref r = it->second;
    const Info ri = info(r);
    if (out.type().has_tensor_type()) {
      const auto& tt = out.type().tensor_type();
      if (tt.elem_type() != 0 && tt.elem_type() != ri.type)
        return error_at(loc, "output '" + out.name() + "' is declared " + onnx_type_name(tt.elem_type()) +
                                 ", the graph computes " + onnx_type_name(ri.type));
      if (tt.has_shape() && !shapes_overridden_) {
        bool match = tt.shape().dim_size() == static_cast<int>(ri.dims.size());
        for (int d = 0; match && d < tt.shape().dim_size(); ++d)
          if (tt.shape().dim(d).has_dim_value())  // a bounded dim: a size within its bound (one sample's)
            match = d == ri.bounded ? tt.shape().dim(d).dim_value() <= ri.dims[static_cast<size_t>(d)]
                                    : tt.shape().dim(d).dim_value() == ri.dims[static_cast<size_t>(d)];
        if (!match)
          return error_at(loc, "output '" + out.name() +
                                   "' is declared with another shape than the graph computes, " +
                                   shape_text(ri.dims));
      }
    }
    HEXIR_ASSIGN_OR_RETURN(int v, materialize(r, loc));
    const Value& value = builder_.value(v);
    const bool renamed = value.name != out.name();
    if (returned.count(v) || renamed) {
      // Another name for a value (an Identity, a second output of one value): a copy named for the output.
      NodeSpec spec;
      spec.op = ops::OpId::kCopy;
      spec.inputs = {v};
      spec.names = {claim(out.name())};
      spec.locs.node = loc;
      HEXIR_ASSIGN_OR_RETURN(std::vector<int> ids, builder_.add_node(std::move(spec)));
      v = ids[0];
    }
    returned.insert(v);
    values.push_back(v);
  }
  if (values.empty()) return invalid_argument(path_.string() + ": the graph has no outputs");
  return builder_.set_outputs(values, Location::imported(file_, "", ""));
}

// ---- helpers every family uses -----------------------------------------------------

Result<int64_t> norm_axis(const NodeCtx& n, int64_t axis, size_t rank, const char* what) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return error_at(n.loc, std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                               std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  // Dims here may come straight from the model (a Reshape's shape), so an
  // overflow saturates: no real tensor has that many elements, and every
  // caller compares the product with one that does (or the builder rejects it).
  int64_t p = 1;
  bool saturated = false;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i] == 0) return 0;
    saturated = saturated || __builtin_mul_overflow(p, dims[i], &p);
  }
  return saturated ? INT64_MAX : p;
}

ops::AttrValue int_list(const std::vector<int64_t>& v) {
  std::vector<ops::AttrValue> list;
  for (int64_t x : v) {
    ops::AttrValue item;
    item.value = x;
    list.push_back(std::move(item));
  }
  return ops::AttrValue{std::move(list)};
}

ops::AttrValue real(double v) {
  ops::AttrValue a;
  a.value = v;
  return a;
}

Status fold_or_emit(Importer& im, const NodeCtx& n, ops::OpId op, const std::vector<Ref>& inputs,
                    const ops::AttrMap& attrs, const HostFold& host_fold) {
  const std::string name = im.result_name(n);
  HEXIR_ASSIGN_OR_RETURN(std::optional<Ref> folded, im.fold(n, op, inputs, attrs, name));
  if (folded) {
    im.define(n, 0, *folded);
    return ok_status();
  }
  std::vector<HostPtr> held;
  HEXIR_ASSIGN_OR_RETURN(bool all_held, im.hosts(std::vector<std::optional<Ref>>(inputs.begin(), inputs.end()), held));
  if (all_held && host_fold) {
    Result<HostTensor> t = host_fold(held);
    if (t.ok()) {
      im.define(n, 0, im.new_const(name, std::move(*t), n.loc));
      return ok_status();
    }
    if (!too_large(t.status())) return t.status();
  }
  HEXIR_ASSIGN_OR_RETURN(Ref r, im.emit1(n, op, inputs, attrs, name));
  im.define(n, 0, r);
  return ok_status();
}

Result<ops::OpId> hexir_op(const NodeCtx& n, const char* name) {
  std::optional<ops::OpId> op = ops::find_op(name);
  if (!op)
    return error_at(n.loc, "is supported only on constants (folded at import): this build of Hexir has no @" +
                               std::string(name) + " operator");
  return *op;
}

}  // namespace hexir::compiler::onnx_import

namespace hexir::compiler {

using onnx_import::Importer;

Result<Module> import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options) {
  return Importer(path, options).run();
}

Result<OnnxTensor> tensor_from_proto(const onnx::TensorProto& tensor, const std::filesystem::path& base_dir) {
  const Location loc = Location::imported(std::make_shared<const std::string>(""), tensor.name(), "tensor");
  const std::optional<DType> dtype = dtype_from_onnx(tensor.data_type());
  if (!dtype)
    return invalid_argument("tensor '" + tensor.name() + "' has element type " +
                            onnx_type_name(tensor.data_type()) + ", which Hexir does not support");
  OnnxTensor out;
  out.type = TensorType{*dtype, std::vector<int64_t>(tensor.dims().begin(), tensor.dims().end())};
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0;
    for (const auto& kv : tensor.external_data()) {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::strtoull(kv.value().c_str(), nullptr, 10);
    }
    HEXIR_ASSIGN_OR_RETURN(uint64_t size, byte_size(out.type));
    if (location.empty()) return invalid_argument("tensor '" + tensor.name() + "': external data without a 'location'");
    Result<onnx_import::ExternalFile> file = onnx_import::open_external_data(base_dir, location);
    if (!file.ok()) return file.status().annotate("tensor '" + tensor.name() + "'");
    if (offset > file->file.size || size > file->file.size - offset)
      return data_loss("tensor '" + tensor.name() + "': cannot read " + std::to_string(size) +
                       " bytes of external data at offset " + std::to_string(offset) + " from '" +
                       file->path.string() + "', which has " + std::to_string(file->file.size));
    out.bytes.resize(size);
    HEXIR_RETURN_IF_ERROR(read_exact(file->file, offset, out.bytes, file->path.string()));
    return out;
  }
  Result<onnx_import::HostTensor> h = onnx_import::typed_contents(tensor, loc);
  if (!h.ok()) return invalid_argument(h.status().message());
  out.bytes = std::move(h->bytes);
  return out;
}

Result<OnnxTensor> read_onnx_tensor_file(const std::filesystem::path& path) {
  HEXIR_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path.string()));
  onnx::TensorProto tensor;
  if (mapped.size() > static_cast<size_t>(INT32_MAX) ||
      !tensor.ParseFromArray(mapped.data(), static_cast<int>(mapped.size())))
    return invalid_argument("'" + path.string() + "' is not a serialized ONNX TensorProto");
  Result<OnnxTensor> t = tensor_from_proto(tensor, path.parent_path());
  if (!t.ok()) return t.status().annotate(path.string());
  return t;
}

}  // namespace hexir::compiler
