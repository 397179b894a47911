// The cpu device's thread pool: the GEMM, conv2d and depthwise kernels give
// the same bits at 1, 2 and 3 threads (each task owns its outputs and sums in
// a fixed order), dispatching allocates nothing, and the option is checked.
#include <cstring>

#include "alloc_counter.h"
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// Runs `id` through a queue of a cpu device with `threads` threads.
std::vector<uint8_t> run_threads(int threads, OpId id, std::vector<HostTensor*> inputs, HostTensor out,
                                 const std::vector<int64_t>& params) {
  auto device = create_device("cpu", {.threads = threads});
  REQUIRE(device.ok());
  auto queue = (*device)->create_queue();
  REQUIRE(queue.ok());
  auto call = prepare_call(id, inputs, {&out}, params);
  REQUIRE_MESSAGE(call.ok(), call.status().to_string());
  const uint64_t before = hexir::testing::thread_allocation_count();
  Status status = (*queue)->dispatch(call->dispatch);
  CHECK(hexir::testing::thread_allocation_count() == before);  // the pool was started with the queue
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  return out.bytes;
}

void check_same_bits(OpId id, std::vector<HostTensor*> inputs, const std::vector<int64_t>& out_dims,
                     const std::vector<int64_t>& params) {
  const HostTensor out(DType::kF32, out_dims);
  const std::vector<uint8_t> one = run_threads(1, id, inputs, out, params);
  for (int threads : {2, 3}) {
    INFO("threads " << threads);
    CHECK(run_threads(threads, id, inputs, out, params) == one);
  }
}

TEST_CASE("threads: matmul is bit-identical at 1, 2 and 3 threads past every block edge") {
  for (auto [m_, k_, n_] : {std::tuple<int64_t, int64_t, int64_t>{301, 517, 203}, {8, 1000, 700}, {97, 33, 1}}) {
    const int64_t m = m_, k = k_, n = n_;  // clang 14 cannot capture structured bindings (INFO)
    INFO(m << "x" << k << " * " << k << "x" << n);
    HostTensor a = random_f32({m, k}, 1), b = random_f32({k, n}, 2);
    check_same_bits(OpId::kMatmul, {&a, &b}, {m, n}, {});
  }
}

TEST_CASE("threads: conv2d (im2col, 1x1, grouped, depthwise strided) is bit-identical across thread counts") {
  HostTensor x = random_f32({2, 16, 37, 41}, 3), bias = random_f32({16}, 4);
  HostTensor w3 = random_f32({16, 16, 3, 3}, 5), w1 = random_f32({16, 16, 1, 1}, 6);
  HostTensor wg = random_f32({16, 4, 3, 3}, 7), wd = random_f32({16, 1, 5, 5}, 8);
  // params: strides, pads (t, l, b, r), dilations, groups
  check_same_bits(OpId::kConv2d, {&x, &w3, &bias}, {2, 16, 37, 41}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  check_same_bits(OpId::kConv2d, {&x, &w1}, {2, 16, 37, 41}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  check_same_bits(OpId::kConv2d, {&x, &wg, &bias}, {2, 16, 19, 21}, {2, 2, 1, 1, 1, 1, 1, 1, 4});
  check_same_bits(OpId::kConv2d, {&x, &wd, &bias}, {2, 16, 19, 20}, {2, 2, 2, 1, 2, 1, 1, 1, 16});
}

TEST_CASE("threads: the cpu option is checked") {
  CHECK(create_device("cpu?threads=2").ok());
  CHECK(create_device("cpu", {.threads = 4}).ok());
  for (const char* bad : {"cpu?threads=0", "cpu?threads=x", "cpu?threads=5000", "cpu?fast=1"}) {
    INFO(bad);
    auto device = create_device(bad);
    REQUIRE_FALSE(device.ok());
    CHECK(device.status().message().find("cpu") != std::string::npos);
  }
  CHECK_FALSE(create_device("cpu", {.threads = -1}).ok());
}

}  // namespace
}  // namespace hexir::hal::testing
