// flop_estimate: each operator's own rule (OpDef::flops, in its family
// file), the saturating arithmetic those rules share, and the shared rules.
#include "hexir/ops/cost.h"

#include <limits>

#include "util.h"

namespace hexir::ops {
namespace internal {

namespace {
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
}  // namespace

uint64_t mul_sat(uint64_t a, uint64_t b) { return a != 0 && b > kMax / a ? kMax : a * b; }
uint64_t add_sat(uint64_t a, uint64_t b) { return b > kMax - a ? kMax : a + b; }

uint64_t elements_sat(const TensorType& t) { return tail_product_sat(t, 0); }

uint64_t tail_product_sat(const TensorType& t, size_t from) {
  uint64_t n = 1;
  for (size_t i = from; i < t.dims.size(); ++i)
    n = mul_sat(n, t.dims[i] > 0 ? static_cast<uint64_t>(t.dims[i]) : 0);
  return n;
}

uint64_t output_elements_sat(std::span<const TensorType> outputs) {
  uint64_t n = 0;
  for (const TensorType& t : outputs) n = add_sat(n, elements_sat(t));
  return n;
}

uint64_t flops_per_element(std::span<const TensorType>, std::span<const TensorType> outputs,
                           std::span<const int64_t>) {
  return output_elements_sat(outputs);
}

uint64_t flops_none(std::span<const TensorType>, std::span<const TensorType>, std::span<const int64_t>) {
  return 0;
}

}  // namespace internal

uint64_t flop_estimate(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                       std::span<const int64_t> params) {
  if (static_cast<int>(id) >= kOpCount) return internal::output_elements_sat(outputs);
  return op_def(id).flops(inputs, outputs, params);
}

}  // namespace hexir::ops
