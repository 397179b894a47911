// Weights prepared once (Device::prepare_dispatch: the CPU packs a constant
// matmul B or conv2d's weights in the GEMM's order): the kernels give the
// same bits with and without them, at 1 and 2 threads, on shapes past every
// tile and block edge; the prepared bytes are allocated (and counted) by the
// device at prepare, and dispatching with them allocates nothing.
#include <cstring>

#include "alloc_counter.h"
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

struct Runs {
  std::vector<uint8_t> plain, prepared;
  uint64_t prepared_bytes = 0;
};

// Runs `id` on a cpu device with `threads` threads, without and then with
// what the device prepares from input `constant` (the others are not constants).
Runs run_both(int threads, OpId id, std::vector<HostTensor*> inputs, HostTensor out,
              const std::vector<int64_t>& params, uint32_t constant = 1) {
  auto device = create_device("cpu", {.threads = threads});
  REQUIRE(device.ok());
  auto queue = (*device)->create_queue();
  REQUIRE(queue.ok());
  auto call = prepare_call(id, inputs, {&out}, params);
  REQUIRE_MESSAGE(call.ok(), call.status().to_string());
  Runs runs;
  // Poisoned output: a path that skips writing shows up.
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  REQUIRE((*queue)->dispatch(call->dispatch).ok());
  runs.plain = out.bytes;

  std::vector<void*> constants(call->operands.size(), nullptr);
  constants[constant] = call->operands[constant];
  Dispatch request = call->dispatch;
  request.operands = constants.data();
  const DeviceCounters before = (*device)->counters();
  auto prepared = (*device)->prepare_dispatch(request);
  REQUIRE_MESSAGE(prepared.ok(), prepared.status().to_string());
  const DeviceCounters after = (*device)->counters();
  runs.prepared_bytes = prepared->size;
  CHECK(after.bytes_allocated - before.bytes_allocated == prepared->size);
  CHECK(after.allocations - before.allocations == (prepared->size > 0 ? 1u : 0u));

  Dispatch with = call->dispatch;
  with.prepared = prepared->size > 0 ? prepared->host_ptr : nullptr;
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  const uint64_t allocations = hexir::testing::thread_allocation_count();
  Status status = (*queue)->dispatch(with);
  CHECK(hexir::testing::thread_allocation_count() == allocations);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  runs.prepared = out.bytes;
  (*device)->release(*prepared);
  return runs;
}

// Prepared and not, at 1 and 2 threads: all four the same bits.
void check_prepared(OpId id, std::vector<HostTensor*> inputs, const std::vector<int64_t>& out_dims,
                    const std::vector<int64_t>& params, bool expect_prepared = true) {
  const HostTensor out(DType::kF32, out_dims);
  const Runs one = run_both(1, id, inputs, out, params);
  CHECK((one.prepared_bytes > 0) == expect_prepared);
  CHECK(one.prepared == one.plain);
  const Runs two = run_both(2, id, inputs, out, params);
  CHECK(two.plain == one.plain);
  CHECK(two.prepared == one.plain);
}

TEST_CASE("prepared: matmul with its B packed once is bit-identical to packing per call") {
  for (auto [m_, k_, n_] : {std::tuple<int64_t, int64_t, int64_t>{301, 517, 203},
                            {256, 768, 300},
                            {8, 1000, 700},
                            {97, 33, 1},
                            {1, 300, 65},
                            {13, 257, 33},
                            {24, 24, 1000}}) {
    const int64_t m = m_, k = k_, n = n_;
    INFO(m << "x" << k << " * " << k << "x" << n);
    HostTensor a = random_f32({m, k}, 1), b = random_f32({k, n}, 2);
    check_prepared(OpId::kMatmul, {&a, &b}, {m, n}, {});
  }
}

TEST_CASE("prepared: matmul with bias and activation, batched A over one B; per-batch B is not prepared") {
  HostTensor a = random_f32({3, 37, 70}, 3), b = random_f32({70, 45}, 4), bias = random_f32({45}, 5);
  // params: the epilogue (activation 1: relu; two float words)
  check_prepared(OpId::kMatmul, {&a, &b, &bias}, {3, 37, 45}, {1, 0, 0});
  HostTensor b3 = random_f32({3, 70, 45}, 6);
  check_prepared(OpId::kMatmul, {&a, &b3}, {3, 37, 45}, {}, /*expect_prepared=*/false);
  HostTensor b1 = random_f32({1, 70, 45}, 7);
  check_prepared(OpId::kMatmul, {&a, &b1}, {3, 37, 45}, {});
}

TEST_CASE("prepared: conv2d with its weights packed once is bit-identical (3x3, 1x1, strided, grouped, short M)") {
  HostTensor x = random_f32({2, 16, 37, 41}, 8), bias = random_f32({16}, 9);
  HostTensor w3 = random_f32({16, 16, 3, 3}, 10), w1 = random_f32({16, 16, 1, 1}, 11);
  HostTensor wg = random_f32({16, 4, 3, 3}, 12), wd = random_f32({16, 1, 5, 5}, 13);
  // params: strides, pads (t, l, b, r), dilations, groups
  check_prepared(OpId::kConv2d, {&x, &w3, &bias}, {2, 16, 37, 41}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  check_prepared(OpId::kConv2d, {&x, &w1}, {2, 16, 37, 41}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  check_prepared(OpId::kConv2d, {&x, &wg, &bias}, {2, 16, 19, 21}, {2, 2, 1, 1, 1, 1, 1, 1, 4});
  // Depthwise has no GEMM: nothing prepared.
  check_prepared(OpId::kConv2d, {&x, &wd, &bias}, {2, 16, 19, 20}, {2, 2, 2, 1, 2, 1, 1, 1, 16}, false);
  // Few input channels (a stem) and a short M with many output columns.
  HostTensor xs = random_f32({1, 3, 67, 66}, 14), ws = random_f32({24, 3, 5, 5}, 15), bs = random_f32({24}, 16);
  check_prepared(OpId::kConv2d, {&xs, &ws, &bs}, {1, 24, 33, 33}, {2, 2, 1, 1, 2, 2, 1, 1, 1});
  HostTensor xm = random_f32({1, 40, 30, 29}, 17), wm = random_f32({24, 40, 3, 3}, 18);
  check_prepared(OpId::kConv2d, {&xm, &wm}, {1, 24, 30, 29}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  HostTensor w1m = random_f32({25, 40, 1, 1}, 19);
  check_prepared(OpId::kConv2d, {&xm, &w1m}, {1, 25, 30, 29}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
}

TEST_CASE("prepared: matmul against the double reference with the prepared B") {
  HostTensor a = random_f32({45, 300}, 20), b = random_f32({300, 77}, 21);
  const HostTensor out(DType::kF32, {45, 77});
  const Runs runs = run_both(1, OpId::kMatmul, {&a, &b}, out, {});
  HostTensor got(DType::kF32, {45, 77});
  got.bytes = runs.prepared;
  std::vector<double> want(45 * 77, 0.0);
  for (int64_t i = 0; i < 45; ++i)
    for (int64_t j = 0; j < 77; ++j)
      for (int64_t k = 0; k < 300; ++k) want[i * 77 + j] += static_cast<double>(a.at(i * 300 + k)) * b.at(k * 77 + j);
  check_close(got, want, 1e-5, 1e-5 * 301);
}

}  // namespace
}  // namespace hexir::hal::testing
