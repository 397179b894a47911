// The cpu kernels against the operators they implement: the shape rule
// says what each kernel writes, and may_run_in_place promises aliasing works.
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

TensorType type_of(const HostTensor& t) { return TensorType{t.dtype, t.dims}; }

TEST_CASE("catalog: infer_result_type gives the type each kernel call writes") {
  for (KernelCall& call : one_call_per_kernel()) {
    INFO("kernel " << std::string(ops::op_def(call.id).name));
    std::vector<TensorType> inputs;
    for (const HostTensor& t : call.inputs) inputs.push_back(type_of(t));
    auto result = ops::infer_result_type(call.id, inputs, call.params);
    REQUIRE_MESSAGE(result.ok(), result.status().to_string());
    CHECK(result.value() == type_of(call.output));
  }
}

TEST_CASE("catalog: kernels marked may_run_in_place give the same bytes with the output aliasing an input") {
  for (KernelCall& call : one_call_per_kernel()) {
    if (!ops::op_def(call.id).may_run_in_place) continue;
    HostTensor expected = call.output;
    std::vector<HostTensor*> inputs;
    for (HostTensor& t : call.inputs) inputs.push_back(&t);
    REQUIRE(run_kernel(call.id, inputs, expected, call.params).ok());
    for (size_t aliased = 0; aliased < call.inputs.size(); ++aliased) {
      if (call.inputs[aliased].bytes.size() != call.output.bytes.size()) continue;
      if (!((ops::op_def(call.id).in_place_inputs >> aliased) & 1u)) continue;
      INFO("kernel " << std::string(ops::op_def(call.id).name) << ", output aliasing input " << aliased);
      std::vector<HostTensor> copies = call.inputs;
      std::vector<HostTensor*> inputs_copy;
      for (HostTensor& t : copies) inputs_copy.push_back(&t);
      HostTensor out = call.output;  // its type; its bytes stay untouched
      REQUIRE(run_op(call.id, inputs_copy, {&out}, call.params, static_cast<int>(aliased)).ok());
      CHECK(copies[aliased].bytes == expected.bytes);
    }
  }
}

}  // namespace
}  // namespace hexir::hal::testing
