// Every operator states the inverse of its lowering (OpDef::raise) and a FLOPs
// rule; raising the words of a sample and lowering the attributes again
// gives the same words.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "hexir/ops/cost.h"
#include "hexir/ops/op.h"
#include "op_samples.h"

using namespace hexir;
using namespace hexir::ops;

TEST_CASE("catalog: every operator has a lowering, its inverse and a FLOPs rule") {
  for (int k = 0; k < kOpCount; ++k) {
    const OpDef& def = op_def(static_cast<OpId>(k));
    INFO(std::string(def.name));
    CHECK_MESSAGE((def.lower != nullptr), ("@" + std::string(def.name) + " has no lower"));
    CHECK_MESSAGE((def.raise != nullptr), ("@" + std::string(def.name) + " has no raise"));
    CHECK_MESSAGE((def.flops != nullptr), ("@" + std::string(def.name) + " has no flops"));
  }
}

TEST_CASE("raise: every operator's sample words raise to attributes that lower to the same words") {
  std::set<OpId> covered;
  for (const testing::OpSample& sample : testing::op_samples()) {
    const OpDef& def = op_def(sample.op);
    INFO(std::string(def.name));
    covered.insert(sample.op);
    Result<std::vector<int64_t>> params =
        lower_attributes(sample.op, sample.inputs, sample.attrs, sample.declared);
    REQUIRE_MESSAGE(params.ok(), params.status().to_string());
    Result<std::vector<TensorType>> results = infer_result_types(sample.op, sample.inputs, *params);
    REQUIRE_MESSAGE(results.ok(), results.status().to_string());
    // The printer lowers with the node's result types stated.
    const AttrMap raised = raise_attributes(sample.op, sample.inputs, *params);
    Result<std::vector<int64_t>> again = lower_attributes(sample.op, sample.inputs, raised, *results);
    REQUIRE_MESSAGE(again.ok(), again.status().to_string());
    CHECK(*again == *params);
    // Only a view costs nothing; anything that runs costs at least one per element written.
    uint64_t written = 0;
    for (const TensorType& r : *results) written += *element_count(r.dims.data(), r.rank());
    const uint64_t flops = flop_estimate(sample.op, sample.inputs, *results, *params);
    if (def.is_view)
      CHECK(flops == 0);
    else
      CHECK(flops >= written);
  }
  for (int k = 0; k < kOpCount; ++k)
    CHECK_MESSAGE(
        covered.count(static_cast<OpId>(k)) == 1,
        ("no sample for @" + std::string(op_def(static_cast<OpId>(k)).name) + " in tests/ops/op_samples.h"));
}

TEST_CASE("raise: words without an attribute form do not lower back to themselves") {
  // gelu's approximate word is 0 or 1, cast's a castable dtype; the printer refuses such nodes.
  const TensorType x{DType::kF32, {4}};
  CHECK(*lower_attributes(OpId::kGelu, std::span(&x, 1),
                          raise_attributes(OpId::kGelu, std::span(&x, 1), std::vector<int64_t>{2}),
                          std::span(&x, 1)) != std::vector<int64_t>{2});
  CHECK_FALSE(lower_attributes(OpId::kCast, std::span(&x, 1),
                               raise_attributes(OpId::kCast, std::span(&x, 1), std::vector<int64_t>{99}), {})
                  .ok());
  // Operand counts the operator refuses: nothing to raise from.
  CHECK(raise_attributes(OpId::kSlice, {}, std::vector<int64_t>{0, 1, 4}).empty());
}
