// Constants: the Constant node, and the contents of tensors in the model
// (typed fields, raw_data, external data).
#include "frontends/onnx/handlers.h"

#include <cstring>
#include <vector>

namespace hexir::compiler::onnx_import {

namespace {

// `out.size()` bytes of `path` at `offset`, through the checked open (file_io.h).
Status read_file_range(const std::filesystem::path& path, uint64_t offset, std::vector<uint8_t>& out) {
  HEXIR_ASSIGN_OR_RETURN(InputFile file, open_input_file(path.string()));
  if (offset > file.size || out.size() > file.size - offset)
    return data_loss("'" + path.string() + "' has " + std::to_string(file.size) + " bytes, " +
                     std::to_string(out.size()) + " are needed at offset " + std::to_string(offset));
  return read_exact(file, offset, out, path.string());
}

}  // namespace

// Constant: a `value` whose raw_data the scan left in the file becomes a
// constant reading it there; any other value is held (and folds).
Status op_constant(Importer& im, const NodeCtx& n) {
  if (n.node.attribute_size() != 1) return error_at(n.loc, "needs exactly one value attribute");
  const auto& a = n.node.attribute(0);
  HostTensor h;
  if (a.name() == "value" && n.top_index >= 0 && im.raw_spans().node_tensors.count({n.top_index, 0})) {
    // Its raw_data stayed in the file (the scan at load): a constant that reads it there.
    const FileSpan raw = im.raw_spans().node_tensors.at({n.top_index, 0});
    const onnx::TensorProto& t = a.t();
    ConstRecord c;
    c.type = t.data_type();
    c.dims.assign(t.dims().begin(), t.dims().end());
    c.loc = n.loc;
    if (onnx_element_size(c.type) == 0)
      return error_at(n.loc, "tensor of type " + onnx_type_name(c.type) + " is not supported");
    HEXIR_RETURN_IF_ERROR(check_file_dims(c.dims, onnx_element_size(c.type), n.loc));
    if (raw.size != c.bytes())
      return error_at(n.loc, "raw_data holds " + std::to_string(raw.size) + " bytes, " +
                                 onnx_type_name(c.type) + shape_text(c.dims) + " needs " +
                                 std::to_string(c.bytes()));
    const std::string o = im.out_name(n, 0);
    if (o.empty()) return ok_status();
    c.name = im.claim(o);
    c.file = FileRange{im.path(), raw.offset};
    im.define(n, 0, im.add_const(std::move(c)));
    return ok_status();
  }
  if (a.name() == "value") {
    HEXIR_ASSIGN_OR_RETURN(h, im.proto_contents(a.t(), n.loc));
  } else if (a.name() == "value_float") {
    h = make_host(kFloat, {});
    h.set_f(0, a.f());
  } else if (a.name() == "value_floats") {
    h = make_host(kFloat, {a.floats_size()});
    for (int i = 0; i < a.floats_size(); ++i) h.set_f(i, a.floats(i));
  } else if (a.name() == "value_int") {
    h = host_i64({a.i()}, true);
  } else if (a.name() == "value_ints") {
    h = host_i64(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  } else {
    return error_at(n.loc, "attribute '" + a.name() +
                               "' is not supported by the ONNX importer (strings and sparse tensors)");
  }
  im.define_folded(n, 0, std::move(h));
  return ok_status();
}

Result<HostTensor> Importer::attribute_contents(const NodeCtx& n, const onnx::AttributeProto& a) {
  int index = 0;
  while (index < n.node.attribute_size() && &n.node.attribute(index) != &a) ++index;
  auto it =
      n.top_index >= 0 ? raw_spans_.node_tensors.find({n.top_index, index}) : raw_spans_.node_tensors.end();
  if (it == raw_spans_.node_tensors.end()) return proto_contents(a.t(), n.loc);
  const uint32_t esize = onnx_element_size(a.t().data_type());
  if (esize == 0)
    return error_at(n.loc, "tensor of type " + onnx_type_name(a.t().data_type()) + " is not supported");
  // Sized against the bytes in the file before anything is allocated.
  uint64_t count = 1;
  for (int64_t d : a.t().dims())
    if (d < 0 || (d > 0 && count > it->second.size / static_cast<uint64_t>(d)))
      return error_at(n.loc, "attribute '" + a.name() + "': dims do not match its " +
                                 std::to_string(it->second.size) + " bytes of raw_data");
    else
      count *= static_cast<uint64_t>(d);
  if (count * esize != it->second.size)
    return error_at(n.loc, "attribute '" + a.name() + "': raw_data holds " + std::to_string(it->second.size) +
                               " bytes, " + std::to_string(count * esize) + " are needed");
  HostTensor h = make_host(a.t().data_type(), std::vector<int64_t>(a.t().dims().begin(), a.t().dims().end()));
  Status read = read_file_range(path_, it->second.offset, h.bytes);
  if (!read.ok())
    return error_at(n.loc, "cannot read the raw_data of attribute '" + a.name() + "': " + read.message());
  return h;
}

Result<HostTensor> Importer::proto_contents(const onnx::TensorProto& t, const Location& loc) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    HostTensor h = make_host(t.data_type(), std::vector<int64_t>(t.dims().begin(), t.dims().end()));
    if (h.esize() == 0)
      return error_at(loc, "tensor of type " + onnx_type_name(t.data_type()) + " is not supported");
    HEXIR_ASSIGN_OR_RETURN(FileRange range, external_range(t, h.bytes.size(), loc));
    Status read = read_file_range(range.path, range.offset, h.bytes);
    if (!read.ok()) return error_at(loc, "cannot read external data: " + read.message());
    return h;
  }
  return typed_contents(t, loc);
}

Result<HostTensor> typed_contents(const onnx::TensorProto& t, const Location& loc) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims)
    if (d < 0) return error_at(loc, "tensor '" + t.name() + "' has a negative dim in " + shape_text(dims));
  const int32_t type = t.data_type();
  if (onnx_element_size(type) == 0)
    return error_at(loc, "tensor '" + t.name() + "' of type " + onnx_type_name(type) + " is not supported");
  if (t.has_segment()) return error_at(loc, "tensor '" + t.name() + "' is segmented, which is not supported");
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d != 0 && count > (int64_t{1} << 40) / d)
      return error_at(loc, "tensor '" + t.name() + "' is too large");
    count *= d;
  }
  HostTensor h = make_host(type, dims);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != h.bytes.size())
      return error_at(loc, "tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
                               " bytes of raw_data, " + onnx_type_name(type) + shape_text(dims) + " needs " +
                               std::to_string(h.bytes.size()));
    if (!h.bytes.empty())
      std::memcpy(h.bytes.data(), t.raw_data().data(), h.bytes.size());  // empty: may be null
    return h;
  }
  auto check = [&](int64_t got) -> Status {
    if (got != count)
      return error_at(loc, "tensor '" + t.name() + "' holds " + std::to_string(got) + " values, " +
                               onnx_type_name(type) + shape_text(dims) + " needs " + std::to_string(count));
    return ok_status();
  };
  switch (type) {
    case kFloat:
      HEXIR_RETURN_IF_ERROR(check(t.float_data_size()));
      for (int64_t i = 0; i < count; ++i) h.set_f(i, t.float_data(static_cast<int>(i)));
      break;
    case kDouble:
      HEXIR_RETURN_IF_ERROR(check(t.double_data_size()));
      for (int64_t i = 0; i < count; ++i) h.set_f(i, t.double_data(static_cast<int>(i)));
      break;
    case kInt64:
      HEXIR_RETURN_IF_ERROR(check(t.int64_data_size()));
      for (int64_t i = 0; i < count; ++i) h.set_i(i, t.int64_data(static_cast<int>(i)));
      break;
    case kUint32:
    case kUint64:
      HEXIR_RETURN_IF_ERROR(check(t.uint64_data_size()));
      for (int64_t i = 0; i < count; ++i)
        h.set_i(i, static_cast<int64_t>(t.uint64_data(static_cast<int>(i))));
      break;
    case kFloat16:
    case kBFloat16: {  // bit patterns in int32_data
      HEXIR_RETURN_IF_ERROR(check(t.int32_data_size()));
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t bits = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
        std::memcpy(h.bytes.data() + 2 * i, &bits, 2);
      }
      break;
    }
    default:  // INT32, INT16, INT8, UINT16, UINT8, BOOL in int32_data
      HEXIR_RETURN_IF_ERROR(check(t.int32_data_size()));
      for (int64_t i = 0; i < count; ++i) h.set_i(i, t.int32_data(static_cast<int>(i)));
      break;
  }
  return h;
}

}  // namespace hexir::compiler::onnx_import
