// The host constant folder (folding.h).
//
// Since constant folding goes through the operators' own CPU kernels
// (compiler/passes/fold.h, Importer::fold), the rules here run only where no
// kernel serves the operands: ONNX types Hexir has no dtype for, integer
// shape arithmetic with no integer kernel, and operators with no run-time
// form (Floor, Ceil). The handlers try the kernel first. What follows says
// why this folder exists at all.
//
// What it repeats from ops/, and why. Folding computes, at import, what an
// operator would compute at run time, so it necessarily restates semantics:
//
// - Shared with ops/ (not repeated): the broadcast of two shapes
//   (ops::broadcast_shapes) and Slice's bounds (ops::slice_bounds, the same
//   function @slice's lowering uses).
// - Repeated here: the element rules of the maps (fold_arith, fold_binary's
//   callers: Equal/Less/Greater and Pow, fold_unary, fold_clip, fold_cast,
//   fold_where) and the index arithmetic of the data movement (transpose,
//   slice, expand, concat, gather). ops/ defines operators by their result
//   types and plans (geometry for the kernels), not by a host evaluator, and
//   its kernels (hal/) compute only f32 and Hexir's dtypes. The folder works
//   on every fixed-size ONNX type, including those Hexir has no dtype for
//   (DOUBLE, INT16, UINT16, UINT32, UINT64), in double (floats) or int64
//   (integers, wrapping): it folds shape arithmetic that is never run, in
//   types the runtime never sees, and runs before the graph exists. Its
//   results become constants in the .hxe, byte for byte: evaluating floats
//   in f32 through the kernels instead would change those bytes (a folded
//   Sigmoid or Erf may differ from the kernel's in the last bit).
// - Import-only semantics that ops/ does not have at all stay in their
//   handlers: Shape, Size, Range, ConstantOfShape, BatchNormalization's scale
//   and shift, Pad's index tables for the gather lowering.
//
// Where an operator's rule changes in ops/ or its kernels (a NaN
// convention, a cast's rounding), the matching function here must change
// with it.
#include "frontends/onnx/folding.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "hexir/base/half.h"
#include "hexir/compiler/onnx.h"
#include "hexir/ops/op.h"

namespace hexir::compiler::onnx_import {

// ---- HostTensor ------------------------------------------------------------------

double HostTensor::f(int64_t i) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * esize();
  switch (type) {
    case kFloat: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case kDouble: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_bits_to_float(h);
    }
    case kBFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
    default:
      return static_cast<double>(this->i(i));
  }
}

int64_t HostTensor::i(int64_t index) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
  switch (type) {
    case kUint8:
      return *p;
    case kInt8:
      return static_cast<int8_t>(*p);
    case kBool:
      return *p != 0;
    case kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case kInt64:
    case kUint64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default: {  // a float type: truncate toward zero, saturate, NaN to 0
      const double d = f(index);
      if (std::isnan(d)) return 0;
      if (d >= 9.2233720368547758e18) return INT64_MAX;
      if (d <= -9.2233720368547758e18) return INT64_MIN;
      return static_cast<int64_t>(d);
    }
  }
}

void HostTensor::set_f(int64_t index, double v) {
  uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
  switch (type) {
    case kFloat: {
      const float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      return;
    }
    case kDouble:
      std::memcpy(p, &v, 8);
      return;
    case kFloat16: {
      const uint16_t h = float_to_half_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case kBFloat16: {
      const uint16_t h = float_to_bfloat16_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case kBool:
      *p = v != 0;
      return;
    default: {
      int64_t x = 0;
      if (!std::isnan(v))
        x = v >= 9.2233720368547758e18    ? INT64_MAX
            : v <= -9.2233720368547758e18 ? INT64_MIN
                                          : static_cast<int64_t>(v);
      set_i(index, x);
      return;
    }
  }
}

void HostTensor::set_i(int64_t index, int64_t v) {
  if (is_float()) return set_f(index, static_cast<double>(v));
  uint8_t* p = bytes.data() + static_cast<size_t>(index) * esize();
  if (type == kBool) {
    *p = v != 0;
    return;
  }
  std::memcpy(p, &v, esize());  // little-endian: the low bytes (wraps)
}

HostTensor make_host(int32_t type, std::vector<int64_t> dims) {
  HostTensor t;
  t.type = type;
  t.dims = std::move(dims);
  t.bytes.assign(static_cast<size_t>(t.count()) * t.esize(), 0);
  return t;
}

HostTensor host_i64(const std::vector<int64_t>& values, bool scalar) {
  HostTensor t =
      make_host(kInt64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(values.size())});
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), values.size() * 8);  // empty: may be null
  return t;
}

Status fold_limit(int32_t type, const std::vector<int64_t>& dims, uint64_t max_bytes) {
  uint64_t n = onnx_element_size(type);
  for (int64_t d : dims) {
    if (d < 0) return invalid_argument("negative dim");
    if (d != 0 && n > max_bytes / static_cast<uint64_t>(d))
      return resource_exhausted("too large to fold");
    n *= static_cast<uint64_t>(d);
  }
  if (n > max_bytes) return resource_exhausted("too large to fold");
  return ok_status();
}

namespace {

// Product of dims[begin, end).
int64_t dims_product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

std::vector<int64_t> row_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

// The element of an input of `in_dims` (right-aligned, broadcast) read for
// output coordinates `coord` of an output of rank coord.size().
int64_t broadcast_source(const std::vector<int64_t>& coord, const std::vector<int64_t>& in_dims,
                         const std::vector<int64_t>& in_strides) {
  const size_t off = coord.size() - in_dims.size();
  int64_t index = 0;
  for (size_t d = 0; d < in_dims.size(); ++d)
    if (in_dims[d] != 1) index += coord[off + d] * in_strides[d];
  return index;
}

// Calls fn(out_index, coords) for every element of `dims` in row-major order.
void for_each_coord(const std::vector<int64_t>& dims,
                    const std::function<void(int64_t, const std::vector<int64_t>&)>& fn) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<int64_t> coord(dims.size(), 0);
  for (int64_t o = 0; o < n; ++o) {
    fn(o, coord);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++coord[d] < dims[d]) break;
      coord[d] = 0;
    }
  }
}

double apply_binary(std::string_view op, double a, double b) {
  if (op == "Add" || op == "Sum" || op == "Mean") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Max") return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);  // Min
}

Result<int64_t> apply_binary_int(std::string_view op, int64_t a, int64_t b) {
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  if (op == "Add" || op == "Sum" || op == "Mean")
    return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  if (op == "Sub") return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  if (op == "Mul") return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  if (op == "Div") {
    if (b == 0) return invalid_argument("integer division by zero");
    if (a == INT64_MIN && b == -1) return INT64_MIN;
    return a / b;
  }
  if (op == "Max") return std::max(a, b);
  return std::min(a, b);
}

}  // namespace

// ---- elementwise -----------------------------------------------------------------

Result<HostTensor> fold_binary(const Location& loc, const HostTensor& a, const HostTensor& b,
                               int32_t out_type,
                               const std::function<Result<double>(int64_t, int64_t)>& int_fn,
                               const std::function<double(double, double)>& float_fn, uint64_t max_bytes) {
  auto dims = ops::broadcast_shapes(a.dims, b.dims);
  if (!dims)
    return error_at(loc, "shapes " + shape_text(a.dims) + " and " + shape_text(b.dims) + " do not broadcast");
  HEXIR_RETURN_IF_ERROR(fold_limit(out_type, *dims, max_bytes));
  HostTensor out = make_host(out_type, *dims);
  const auto sa = row_strides(a.dims), sb = row_strides(b.dims);
  const bool as_float = a.is_float() || b.is_float();
  Status failed;
  for_each_coord(*dims, [&](int64_t o, const std::vector<int64_t>& c) {
    const int64_t ia = broadcast_source(c, a.dims, sa), ib = broadcast_source(c, b.dims, sb);
    if (as_float) {
      out.set_f(o, float_fn(a.f(ia), b.f(ib)));
    } else {
      Result<double> v = int_fn(a.i(ia), b.i(ib));
      if (!v.ok()) {
        failed = v.status();
        return;
      }
      out.set_f(o, *v);
    }
  });
  if (!failed.ok()) return error_at(loc, failed.message());
  return out;
}

Result<HostTensor> fold_arith(const Location& loc, std::string_view op, const HostTensor& a,
                              const HostTensor& b, uint64_t max_bytes) {
  if (a.type != b.type)
    return error_at(loc, "operands are " + onnx_type_name(a.type) + " and " + onnx_type_name(b.type));
  auto dims = ops::broadcast_shapes(a.dims, b.dims);
  if (!dims)
    return error_at(loc, "shapes " + shape_text(a.dims) + " and " + shape_text(b.dims) + " do not broadcast");
  HEXIR_RETURN_IF_ERROR(fold_limit(a.type, *dims, max_bytes));
  HostTensor out = make_host(a.type, *dims);
  const auto sa = row_strides(a.dims), sb = row_strides(b.dims);
  Status failed;
  for_each_coord(*dims, [&](int64_t o, const std::vector<int64_t>& c) {
    const int64_t ia = broadcast_source(c, a.dims, sa), ib = broadcast_source(c, b.dims, sb);
    if (a.is_float()) {
      out.set_f(o, apply_binary(op, a.f(ia), b.f(ib)));
    } else {
      Result<int64_t> v = apply_binary_int(op, a.i(ia), b.i(ib));
      if (!v.ok()) {
        failed = v.status();
        return;
      }
      out.set_i(o, *v);
    }
  });
  if (!failed.ok()) return error_at(loc, failed.message());
  return out;
}

// The op types below; anything else is refused rather than passed through.
Result<HostTensor> fold_unary(const Location& loc, std::string_view op, const HostTensor& x, double alpha,
                              double beta) {
  static const std::set<std::string_view> kRules = {
      "Neg",  "Abs",  "Relu", "Sigmoid",    "Tanh",  "Exp",  "Log", "Erf",       "Sqrt",        "Reciprocal",
      "Floor", "Ceil", "Not", "LeakyRelu", "HardSigmoid", "HardSwish", "Softplus"};
  if (!kRules.count(op)) return error_at(loc, "the host folder has no rule for " + std::string(op));
  HostTensor out = make_host(op == "Not" ? kBool : x.type, x.dims);
  for (int64_t i = 0; i < x.count(); ++i) {
    if (!x.is_float() && (op == "Neg" || op == "Abs" || op == "Relu" || op == "Not" || op == "Floor" ||
                          op == "Ceil" || op == "Round" || op == "Sign")) {  // exact on integers
      const int64_t v = x.i(i);
      const int64_t negated = static_cast<int64_t>(0 - static_cast<uint64_t>(v));
      out.set_i(i, op == "Neg"    ? negated
                   : op == "Abs"  ? (v < 0 ? negated : v)
                   : op == "Relu" ? std::max<int64_t>(v, 0)
                   : op == "Not"  ? v == 0
                   : op == "Sign" ? (v > 0) - (v < 0)
                                  : v);
      continue;
    }
    const double v = x.f(i);
    double r = v;
    if (op == "Neg") r = -v;
    else if (op == "Abs") r = std::fabs(v);
    else if (op == "Relu") r = v > 0 ? v : 0;
    else if (op == "Sigmoid") r = 1 / (1 + std::exp(-v));
    else if (op == "Tanh") r = std::tanh(v);
    else if (op == "Exp") r = std::exp(v);
    else if (op == "Log") r = std::log(v);
    else if (op == "Erf") r = std::erf(v);
    else if (op == "Sqrt") r = std::sqrt(v);
    else if (op == "Reciprocal") r = 1 / v;
    else if (op == "Floor") r = std::floor(v);
    else if (op == "Ceil") r = std::ceil(v);
    else if (op == "Round") r = std::nearbyint(v);  // halves to even (the default rounding mode)
    else if (op == "Sign") r = v > 0 ? 1 : v < 0 ? -1 : v;
    else if (op == "Not") r = v == 0;
    else if (op == "LeakyRelu") r = v < 0 ? alpha * v : v;
    else if (op == "HardSigmoid") r = std::max(0.0, std::min(1.0, alpha * v + beta));
    else if (op == "HardSwish") r = v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
    else if (op == "Softplus") r = v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    out.set_f(i, r);
  }
  return out;
}

HostTensor fold_clip(const HostTensor& x, double lo, double hi) {
  HostTensor out = make_host(x.type, x.dims);
  for (int64_t i = 0; i < x.count(); ++i) {
    const double v = x.f(i);
    out.set_f(i, std::isnan(v) ? v : std::min(std::max(v, lo), hi));
  }
  return out;
}

HostTensor fold_cast(const HostTensor& x, int32_t to) {
  HostTensor out = make_host(to, x.dims);
  for (int64_t i = 0; i < x.count(); ++i) {
    if (x.is_float())
      out.set_f(i, x.f(i));
    else
      out.set_i(i, x.i(i));
  }
  return out;
}

HostTensor fold_where(const HostTensor& c, const HostTensor& x, const HostTensor& y,
                      const std::vector<int64_t>& dims) {
  HostTensor out = make_host(x.type, dims);
  const auto sc = row_strides(c.dims), sx = row_strides(x.dims), sy = row_strides(y.dims);
  const size_t es = out.esize();
  for_each_coord(dims, [&](int64_t o, const std::vector<int64_t>& co) {
    const bool pick = c.i(broadcast_source(co, c.dims, sc)) != 0;
    const HostTensor& src = pick ? x : y;
    const int64_t i = broadcast_source(co, src.dims, pick ? sx : sy);
    std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es,
                src.bytes.data() + static_cast<size_t>(i) * es, es);
  });
  return out;
}

// ---- data movement ---------------------------------------------------------------

HostTensor transpose_host(const HostTensor& h, const std::vector<int64_t>& perm) {
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(h.dims[static_cast<size_t>(p)]);
  HostTensor out = make_host(h.type, dims);
  const auto in_strides = row_strides(h.dims);
  const size_t es = h.esize();
  for_each_coord(dims, [&](int64_t o, const std::vector<int64_t>& c) {
    int64_t src = 0;
    for (size_t d = 0; d < c.size(); ++d) src += c[d] * in_strides[static_cast<size_t>(perm[d])];
    std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es,
                h.bytes.data() + static_cast<size_t>(src) * es, es);
  });
  return out;
}

Result<HostTensor> expand_host(const HostTensor& h, const std::vector<int64_t>& dims, uint64_t max_bytes) {
  HEXIR_RETURN_IF_ERROR(fold_limit(h.type, dims, max_bytes));
  HostTensor out = make_host(h.type, dims);
  const auto s = row_strides(h.dims);
  const size_t es = h.esize();
  for_each_coord(dims, [&](int64_t o, const std::vector<int64_t>& c) {
    const int64_t src = broadcast_source(c, h.dims, s);
    std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es,
                h.bytes.data() + static_cast<size_t>(src) * es, es);
  });
  return out;
}

HostTensor slice_host(const HostTensor& h, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& steps, const std::vector<int64_t>& sizes) {
  HostTensor out = make_host(h.type, sizes);
  const auto s = row_strides(h.dims);
  const size_t es = h.esize();
  for_each_coord(sizes, [&](int64_t o, const std::vector<int64_t>& c) {
    int64_t src = 0;
    for (size_t d = 0; d < c.size(); ++d) src += (starts[d] + c[d] * steps[d]) * s[d];
    std::memcpy(out.bytes.data() + static_cast<size_t>(o) * es,
                h.bytes.data() + static_cast<size_t>(src) * es, es);
  });
  return out;
}

HostTensor concat_host(const std::vector<HostPtr>& parts, int64_t axis, const std::vector<int64_t>& dims) {
  HostTensor out = make_host(parts[0]->type, dims);
  const size_t es = out.esize();
  const int64_t outer = dims_product(dims, 0, static_cast<size_t>(axis));
  size_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostPtr& h : parts) {
      const size_t row =
          static_cast<size_t>(dims_product(h->dims, static_cast<size_t>(axis), h->dims.size())) * es;
      if (row) std::memcpy(out.bytes.data() + at, h->bytes.data() + static_cast<size_t>(o) * row, row);
      at += row;  // an empty part: no copy (its data may be null)
    }
  return out;
}

Result<HostTensor> gather_host(const Location& loc, const HostTensor& d, const HostTensor& ix, int64_t axis,
                               const std::vector<int64_t>& dims) {
  HostTensor out = make_host(d.type, dims);
  const size_t a = static_cast<size_t>(axis);
  const int64_t outer = dims_product(d.dims, 0, a), axis_dim = d.dims[a];
  const size_t inner = static_cast<size_t>(dims_product(d.dims, a + 1, d.dims.size())) * d.esize();
  size_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < ix.count(); ++k) {
      int64_t i = ix.i(k);
      if (i < 0) i += axis_dim;
      if (i < 0 || i >= axis_dim)
        return error_at(loc, "index " + std::to_string(ix.i(k)) + " is out of range for an axis of " +
                                 std::to_string(axis_dim));
      std::memcpy(out.bytes.data() + at, d.bytes.data() + (static_cast<size_t>(o * axis_dim + i)) * inner,
                  inner);
      at += inner;
    }
  return out;
}

}  // namespace hexir::compiler::onnx_import
