#include "hexir/ops/cost.h"

#include <limits>

namespace hexir::ops {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t mul_sat(uint64_t a, uint64_t b) { return a != 0 && b > kMax / a ? kMax : a * b; }
uint64_t add_sat(uint64_t a, uint64_t b) { return b > kMax - a ? kMax : a + b; }

uint64_t elements(const TensorType& t) {
  uint64_t n = 1;
  for (int64_t d : t.dims) n = mul_sat(n, d > 0 ? static_cast<uint64_t>(d) : 0);
  return n;
}

uint64_t output_elements(std::span<const TensorType> outputs) {
  uint64_t n = 0;
  for (const TensorType& t : outputs) n = add_sat(n, elements(t));
  return n;
}

// Product of dims [from, rank) of `t` (1 when none).
uint64_t tail_product(const TensorType& t, size_t from) {
  uint64_t n = 1;
  for (size_t i = from; i < t.dims.size(); ++i) n = mul_sat(n, t.dims[i] > 0 ? static_cast<uint64_t>(t.dims[i]) : 0);
  return n;
}

}  // namespace

uint64_t flop_estimate(OpId id, std::span<const TensorType> inputs, std::span<const TensorType> outputs,
                       std::span<const int64_t> params) {
  const uint64_t out = output_elements(outputs);
  switch (id) {
    case OpId::kReshape:
      return 0;
    case OpId::kMatmul: {
      if (inputs.empty() || inputs[0].dims.empty()) return out;
      // The contracted dim is a's last (a 1-D a is promoted to [1, k]).
      const int64_t k = inputs[0].dims.back();
      return add_sat(mul_sat(mul_sat(out, 2), k > 0 ? static_cast<uint64_t>(k) : 0), inputs.size() > 2 ? out : 0);
    }
    case OpId::kConv2d:
    case OpId::kConvTranspose: {
      if (inputs.size() < 2 || inputs[1].dims.size() != 4) return out;
      // conv2d: each output element sums C/groups * KH * KW taps (w [K, C/g, KH, KW]);
      // conv_transpose: each input element scatters into K/groups * KH * KW (w [C, K/g, KH, KW]).
      const uint64_t taps = tail_product(inputs[1], 1);
      const uint64_t points = id == OpId::kConv2d ? out : elements(inputs[0]);
      return add_sat(mul_sat(mul_sat(points, 2), taps), out);
    }
    case OpId::kSeparableConv2d: {
      // The depthwise's KH * KW taps per element of its result [N, C, OH, OW]
      // (out / K * C elements), then the 1x1's C per output element.
      if (inputs.size() < 3 || inputs[0].dims.size() != 4 || inputs[1].dims.size() != 4 ||
          inputs[2].dims.size() != 4 || inputs[2].dims[0] <= 0 || inputs[0].dims[1] < 0)
        return out;
      const uint64_t c = static_cast<uint64_t>(inputs[0].dims[1]);
      const uint64_t mid = mul_sat(out / static_cast<uint64_t>(inputs[2].dims[0]), c);
      return add_sat(mul_sat(mul_sat(mid, 2), tail_product(inputs[1], 2)), mul_sat(mul_sat(out, 2), c));
    }
    case OpId::kMaxPool:
    case OpId::kAveragePool: {
      const uint64_t taps = params.size() >= 2 && params[0] > 0 && params[1] > 0
                                ? mul_sat(static_cast<uint64_t>(params[0]), static_cast<uint64_t>(params[1]))
                                : 1;
      return mul_sat(out, taps);
    }
    case OpId::kReduceSum:
    case OpId::kReduceMean:
    case OpId::kReduceMax:
    case OpId::kArgMax:
      return inputs.empty() ? out : elements(inputs[0]);
    case OpId::kSoftmax:  // max, subtract and exp, sum, divide
      return mul_sat(out, 4);
    case OpId::kLayernorm:  // mean, variance, normalize, scale and shift
      return mul_sat(out, 6);
    default:
      // Elementwise operators and data movement: one per element written.
      return out;
  }
}

}  // namespace hexir::ops
