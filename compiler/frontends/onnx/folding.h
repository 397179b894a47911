// The host constant folder: tensors of any fixed-size ONNX type held in
// memory (initializers' and Constant nodes' contents, folded results) and
// the evaluation, at import, of the operators whose inputs are all such
// tensors. The handlers decide whether a node folds; these functions compute.
// folding.cc says which operator semantics this repeats from ops/ and why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "frontends/onnx/types.h"
#include "hexir/base/status.h"
#include "hexir/compiler/graph.h"

namespace hexir::compiler::onnx_import {

// A tensor of any fixed-size ONNX type, held in memory: initializers' and
// Constant nodes' contents, and what folding computes. Elements are read as
// double (f) or int64 (i) and stored rounded to the element type (floats) or
// wrapped (integers; from a float: truncated toward zero, saturated, NaN 0).
struct HostTensor {
  int32_t type = kFloat;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  uint32_t esize() const { return onnx_element_size(type); }
  bool is_float() const { return type == kFloat || type == kFloat16 || type == kBFloat16 || type == kDouble; }

  double f(int64_t i) const;
  int64_t i(int64_t index) const;
  void set_f(int64_t index, double v);
  void set_i(int64_t index, int64_t v);
};

using HostPtr = std::shared_ptr<const HostTensor>;

// Zeros of `type` and `dims`.
HostTensor make_host(int32_t type, std::vector<int64_t> dims);
// An INT64 vector (or, `scalar`, the one value as a scalar).
HostTensor host_i64(const std::vector<int64_t>& values, bool scalar = false);

// ok when a result of `type` and `dims` holds at most `max_bytes`; else
// kResourceExhausted ("too large to fold": the node then runs instead).
Status fold_limit(int32_t type, const std::vector<int64_t>& dims, uint64_t max_bytes);
// Whether `s` is fold_limit's "too large to fold".
inline bool too_large(const Status& s) { return s.code() == StatusCode::kResourceExhausted; }

// ---- elementwise (errors at `loc`, the node) ----

// Broadcasting binary evaluation into an output of `out_type`: int_fn on
// integer operands, float_fn when either is a float.
Result<HostTensor> fold_binary(const Location& loc, const HostTensor& a, const HostTensor& b,
                               int32_t out_type,
                               const std::function<Result<double>(int64_t, int64_t)>& int_fn,
                               const std::function<double(double, double)>& float_fn, uint64_t max_bytes);
// a op b for op Add, Sub, Mul, Div, Max, Min (Sum and Mean add): operands of
// one type, broadcast; integers wrap, an integer division by zero fails.
Result<HostTensor> fold_arith(const Location& loc, std::string_view op, const HostTensor& a,
                              const HostTensor& b, uint64_t max_bytes);
// The unary map `op` (an ONNX op type: Relu, Sigmoid, ..., Not; not Gelu)
// with LeakyRelu's / HardSigmoid's alpha and beta; an op it has no rule for
// is an error at `loc` (never its input unchanged).
Result<HostTensor> fold_unary(const Location& loc, std::string_view op, const HostTensor& x, double alpha,
                              double beta);
// Clip to [lo, hi] (NaN stays NaN).
HostTensor fold_clip(const HostTensor& x, double lo, double hi);
// Cast to ONNX type `to`.
HostTensor fold_cast(const HostTensor& x, int32_t to);
// where(c, x, y) into `dims` (their broadcast; x and y of one type).
HostTensor fold_where(const HostTensor& c, const HostTensor& x, const HostTensor& y,
                      const std::vector<int64_t>& dims);

// ---- data movement ----

// x with its dims permuted by `perm`.
HostTensor transpose_host(const HostTensor& x, const std::vector<int64_t>& perm);
// Per axis, the elements [start, start + size * step) every `step`.
HostTensor slice_host(const HostTensor& x, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& steps, const std::vector<int64_t>& sizes);
// x broadcast to `dims`.
Result<HostTensor> expand_host(const HostTensor& x, const std::vector<int64_t>& dims, uint64_t max_bytes);
// The parts joined along `axis` into `dims` (checked by the caller).
HostTensor concat_host(const std::vector<HostPtr>& parts, int64_t axis, const std::vector<int64_t>& dims);
// data[indices] along `axis` into `dims`; an index out of range fails at `loc`.
Result<HostTensor> gather_host(const Location& loc, const HostTensor& data, const HostTensor& indices,
                               int64_t axis, const std::vector<int64_t>& dims);

}  // namespace hexir::compiler::onnx_import
