// flop_estimate: what the compiler's rematerialization weighs bytes against.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "hexir/ops/cost.h"

using namespace hexir;
using namespace hexir::ops;

namespace {
TensorType f32(std::vector<int64_t> dims) { return {DType::kF32, std::move(dims)}; }
uint64_t flops(OpId id, std::vector<TensorType> in, std::vector<TensorType> out, std::vector<int64_t> params = {}) {
  return flop_estimate(id, in, out, params);
}
}  // namespace

TEST_CASE("flop_estimate: contractions count two per multiply-add") {
  // [8,32] x [32,16]: 8*16 outputs, 32 multiply-adds each.
  CHECK(flops(OpId::kMatmul, {f32({8, 32}), f32({32, 16})}, {f32({8, 16})}) == 2u * 8 * 16 * 32);
  // A bias adds one per output element; batch dims multiply.
  CHECK(flops(OpId::kMatmul, {f32({8, 32}), f32({32, 16}), f32({16})}, {f32({8, 16})}) == 2u * 8 * 16 * 32 + 8 * 16);
  CHECK(flops(OpId::kMatmul, {f32({4, 8, 32}), f32({4, 32, 16})}, {f32({4, 8, 16})}) == 2u * 4 * 8 * 16 * 32);
  // conv2d x [1,3,8,8], w [6,3,3,3] -> [1,6,6,6]: 27 taps per output, plus the bias/epilogue pass.
  CHECK(flops(OpId::kConv2d, {f32({1, 3, 8, 8}), f32({6, 3, 3, 3})}, {f32({1, 6, 6, 6})}) == 2u * 216 * 27 + 216);
}

TEST_CASE("flop_estimate: elementwise, movement, reductions, normalizations and views") {
  CHECK(flops(OpId::kAdd, {f32({4, 5}), f32({5})}, {f32({4, 5})}) == 20);
  CHECK(flops(OpId::kGelu, {f32({4, 5})}, {f32({4, 5})}) == 20);
  CHECK(flops(OpId::kTranspose, {f32({4, 5})}, {f32({5, 4})}, {1, 0}) == 20);
  CHECK(flops(OpId::kReduceSum, {f32({4, 5})}, {f32({5})}, {0, 0}) == 20);
  CHECK(flops(OpId::kSoftmax, {f32({4, 5})}, {f32({4, 5})}, {1}) == 80);
  CHECK(flops(OpId::kLayernorm, {f32({4, 5}), f32({5}), f32({5})}, {f32({4, 5})}) == 120);
  CHECK(flops(OpId::kMaxPool, {f32({1, 1, 4, 4})}, {f32({1, 1, 2, 2})}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}) == 16);
  CHECK(flops(OpId::kReshape, {f32({4, 5})}, {f32({20})}) == 0);
}

TEST_CASE("flop_estimate saturates instead of wrapping") {
  const int64_t big = int64_t{1} << 40;
  CHECK(flops(OpId::kMatmul, {f32({big, big}), f32({big, big})}, {f32({big, big})}) ==
        std::numeric_limits<uint64_t>::max());
}
