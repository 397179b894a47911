// The cpu device's thread pool: the GEMM, conv2d, depthwise, conv_transpose
// and resize kernels give the same bits at 1, 2 and 3 threads (each task owns
// its outputs and sums in a fixed order), dispatching allocates nothing, and
// the option is checked.
#include <cstring>

#include "alloc_counter.h"
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// Runs `id` through a queue of a cpu device with `threads` threads.
std::vector<uint8_t> run_threads(int threads, OpId id, std::vector<HostTensor*> inputs, HostTensor out,
                                 const std::vector<int64_t>& params) {
  CpuQueueCall q = prepare_on_cpu_queue(threads, id, inputs, {&out}, params);
  const uint64_t before = hexir::testing::thread_allocation_count();
  Status status = q.queue->dispatch(q.call.dispatch);
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
  // ... and one row block of few strips, split in smaller row blocks (169 x 64) or fewer strips a task (49 x 64).
  for (auto [m_, k_, n_] : {std::tuple<int64_t, int64_t, int64_t>{301, 517, 203}, {8, 1000, 700}, {97, 33, 1},
                            {169, 512, 64}, {49, 400, 64}, {150, 300, 40}}) {
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

TEST_CASE("threads: separable_conv2d (rows of a thread's scratch, then its GEMM) is bit-identical") {
  HostTensor x = random_f32({2, 24, 37, 64}, 30), dw = random_f32({24, 1, 3, 3}, 31);
  HostTensor pw = random_f32({20, 24, 1, 1}, 32), bias = random_f32({20}, 33), residual = random_f32({2, 20, 37, 64}, 34);
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  // (x, dw_w, pw_w, pw_bias, residual): no depthwise bias (BlazeFace's blocks).
  check_same_bits(OpId::kSeparableConv2d, {&x, &dw, &pw, &bias, &residual}, {2, 20, 37, 64},
                  {1, 1, 1, 1, 1, 1, 1, 1, 24, 0, 0, 0, relu, 0, 0, 2});
  // A small map of many channels: too few row tasks for the threads, so the
  // channels are split over them, then the GEMM runs on the pool.
  HostTensor small = random_f32({2, 64, 10, 10}, 35), dw_small = random_f32({64, 1, 3, 3}, 36);
  HostTensor pw_small = random_f32({96, 64, 1, 1}, 37), dw_bias = random_f32({64}, 38), pw_bias = random_f32({96}, 39);
  const int64_t hard_swish = static_cast<int64_t>(ops::Activation::kHardSwish);
  check_same_bits(OpId::kSeparableConv2d, {&small, &dw_small, &pw_small, &dw_bias, &pw_bias}, {2, 96, 10, 10},
                  {1, 1, 1, 1, 1, 1, 1, 1, 64, hard_swish, 0, 0, hard_swish, 0, 0, 3});
}

TEST_CASE("threads: depthwise 3x3 and 5x5 at strides 1 and 2, few planes (bands of rows), bit-identical") {
  HostTensor x = random_f32({1, 3, 70, 45}, 20), bias = random_f32({3}, 21);
  HostTensor w3 = random_f32({3, 1, 3, 3}, 22), w5 = random_f32({3, 1, 5, 5}, 23);
  check_same_bits(OpId::kConv2d, {&x, &w3, &bias}, {1, 3, 70, 45}, {1, 1, 1, 1, 1, 1, 1, 1, 3});
  check_same_bits(OpId::kConv2d, {&x, &w3, &bias}, {1, 3, 35, 23}, {2, 2, 1, 1, 1, 1, 1, 1, 3});
  check_same_bits(OpId::kConv2d, {&x, &w5, &bias}, {1, 3, 70, 45}, {1, 1, 2, 2, 2, 2, 1, 1, 3});
  check_same_bits(OpId::kConv2d, {&x, &w3}, {1, 3, 66, 41}, {1, 1, 0, 0, 0, 0, 2, 2, 3});  // tap loop
}

TEST_CASE("threads: conv_transpose (GEMM + gather, bands of rows) and resize are bit-identical") {
  // params: strides, pads (t, l, b, r), dilations, groups, output padding
  HostTensor x = random_f32({1, 8, 150, 60}, 30), w = random_f32({8, 6, 4, 4}, 31),
             bias = random_f32({12}, 32);
  check_same_bits(OpId::kConvTranspose, {&x, &w, &bias}, {1, 12, 300, 120},
                  {2, 2, 1, 1, 1, 1, 1, 1, 2, 0, 0});
  HostTensor w2 = random_f32({8, 8, 2, 2}, 33);
  check_same_bits(OpId::kConvTranspose, {&x, &w2}, {1, 8, 300, 120}, {2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 0});
  // resize params: mode, coordinate mode, nearest mode, out_h, out_w
  HostTensor r = random_f32({2, 5, 30, 41}, 34);
  check_same_bits(OpId::kResize, {&r}, {2, 5, 60, 82}, {0, 0, 0, 60, 82});
  check_same_bits(OpId::kResize, {&r}, {2, 5, 61, 300}, {1, 0, 0, 61, 300});
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

TEST_CASE("threads: a cpu option given twice, and a NUL in a device name, are refused") {
  for (const char* twice : {"cpu?threads=2&threads=3", "cpu?threads=2&pack_weights=0&threads=2",
                            "cpu?pack_weights=1&pack_weights=0"}) {
    INFO(twice);
    auto device = create_device(twice);
    REQUIRE_FALSE(device.ok());
    CHECK(device.status().code() == StatusCode::kInvalidArgument);
    CHECK(device.status().message().find("given twice") != std::string::npos);
  }
  // The C API's char* would end at the NUL; the C++ name must not read otherwise.
  using namespace std::string_view_literals;
  for (std::string_view nul : {"cpu\0?threads=5000"sv, "cpu?threads=2\0"sv, "cuda\0"sv, "\0"sv}) {
    auto device = create_device(nul);
    REQUIRE_FALSE(device.ok());
    CHECK(device.status().code() == StatusCode::kInvalidArgument);
    CHECK(device.status().message().find("holds a NUL character at offset " +
                                         std::to_string(nul.find('\0'))) != std::string::npos);
  }
}

}  // namespace
}  // namespace hexir::hal::testing
