// Elementwise kernels (and softmax / layernorm rows) split their elements over the cpu device's pool when
// there are enough of them: the same bits at 1, 2 and 3 threads in every
// broadcasting mode (flat, scalar either side, general) and for unary maps,
// in place included, and dispatching allocates nothing.
#include "alloc_counter.h"
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

std::vector<uint8_t> run_on(int threads, OpId id, std::vector<HostTensor*> inputs, const std::vector<int64_t>& dims,
                            const std::vector<int64_t>& params = {}, int aliased_output = -1) {
  std::vector<HostTensor> copies;  // in place writes into the input: give each run its own
  for (HostTensor* t : inputs) copies.push_back(*t);
  std::vector<HostTensor*> pointers;
  for (HostTensor& t : copies) pointers.push_back(&t);
  HostTensor out(DType::kF32, dims);
  CpuQueueCall q = prepare_on_cpu_queue(threads, id, pointers, {&out}, params, aliased_output);
  const uint64_t before = hexir::testing::thread_allocation_count();
  Status status = q.queue->dispatch(q.call.dispatch);
  CHECK(hexir::testing::thread_allocation_count() == before);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  return aliased_output >= 0 ? copies[static_cast<size_t>(aliased_output)].bytes : out.bytes;
}

void check_same_bits(OpId id, std::vector<HostTensor*> inputs, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& params = {}, int aliased_output = -1) {
  const std::vector<uint8_t> one = run_on(1, id, inputs, dims, params, aliased_output);
  for (int threads : {2, 3}) {
    INFO("threads " << threads);
    CHECK(run_on(threads, id, inputs, dims, params, aliased_output) == one);
  }
}

TEST_CASE("elementwise: split over threads, the same bits in every mode") {
  HostTensor a = random_f32({3, 97, 1031}, 1), b = random_f32({3, 97, 1031}, 2);
  HostTensor row = random_f32({1031}, 3), column = random_f32({3, 97, 1}, 4), scalar = random_f32({1}, 5);
  const std::vector<int64_t> dims{3, 97, 1031};
  check_same_bits(OpId::kAdd, {&a, &b}, dims);          // flat
  check_same_bits(OpId::kMul, {&a, &scalar}, dims);     // scalar on the right
  check_same_bits(OpId::kSub, {&scalar, &a}, dims);     // scalar on the left
  check_same_bits(OpId::kDiv, {&a, &row}, dims);        // general: rows
  check_same_bits(OpId::kMaximum, {&column, &a}, dims);  // general: a broadcast column
  check_same_bits(OpId::kAdd, {&a, &b}, dims, {}, 0);   // in place
  check_same_bits(OpId::kGelu, {&a}, dims, {0});
  check_same_bits(OpId::kClip, {&a}, dims, {std::bit_cast<int64_t>(-0.5), std::bit_cast<int64_t>(0.5)});
  check_same_bits(OpId::kSigmoid, {&a}, dims, {}, 0);
}

TEST_CASE("softmax, layernorm and reductions: rows split over threads, the same bits") {
  HostTensor x = random_f32({4, 60, 1031}, 6), gamma = random_f32({1031}, 7), beta = random_f32({1031}, 8);
  const std::vector<int64_t> dims{4, 60, 1031};
  check_same_bits(OpId::kSoftmax, {&x}, dims, {2});
  check_same_bits(OpId::kSoftmax, {&x}, dims, {2}, 0);  // in place
  check_same_bits(OpId::kLayernorm, {&x, &gamma, &beta}, dims, {2, std::bit_cast<int64_t>(1e-5)});
  // reduce_mean / reduce_sum: outputs split over threads (global average pool, and a middle axis).
  HostTensor image = random_f32({2, 96, 40, 40}, 9);
  check_same_bits(OpId::kReduceMean, {&image}, {2, 96, 1, 1}, {1, 2, 3});
  HostTensor nhwc = random_f32({2, 40, 40, 200}, 10);  // channels-last: column blocks split over threads
  check_same_bits(OpId::kReduceMean, {&nhwc}, {2, 1, 1, 200}, {1, 1, 2});
  check_same_bits(OpId::kReduceSum, {&x}, {4, 1031}, {0, 1});
}

}  // namespace
}  // namespace hexir::hal::testing
