// Weights prepared once (Device::prepare_dispatch: the CPU packs a constant
// matmul B or conv2d's weights in the GEMM's order and transposes
// conv_transpose's): the kernels give the same bits with and without them, at
// 1 and 2 threads, on shapes past every tile and block edge; the prepared
// bytes are allocated (and counted) by the device at prepare, and dispatching
// with them allocates nothing.
#include <bit>
#include <cstring>
#include <limits>

#include "alloc_counter.h"
#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

struct Runs {
  std::vector<uint8_t> plain, prepared;
  uint64_t prepared_bytes = 0;
};

// Device::prepare_dispatch's request for `call`: every operand null but
// input `constant` (what Program::prepare hands over: the constants only).
struct PrepareRequest {
  std::vector<void*> operands;
  Dispatch dispatch;
};
PrepareRequest prepare_request(const PreparedCall& call, uint32_t constant) {
  PrepareRequest request{std::vector<void*>(call.operands.size(), nullptr), call.dispatch};
  request.operands[constant] = call.operands[constant];
  request.dispatch.operands = request.operands.data();
  return request;
}

// Runs `id` on a cpu device with `threads` threads, without and then with
// what the device prepares from input `constant` (the others are not constants).
Runs run_both(int threads, OpId id, std::vector<HostTensor*> inputs, HostTensor out,
              const std::vector<int64_t>& params, uint32_t constant = 1) {
  CpuQueueCall q = prepare_on_cpu_queue(threads, id, inputs, {&out}, params);
  Device& device = *q.device;
  Queue& queue = *q.queue;
  const PreparedCall& call = q.call;
  Runs runs;
  // Poisoned output: a path that skips writing shows up.
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  REQUIRE(queue.dispatch(call.dispatch).ok());
  runs.plain = out.bytes;

  const PrepareRequest request = prepare_request(call, constant);
  const DeviceCounters before = device.counters();
  auto prepared = device.prepare_dispatch(request.dispatch);
  REQUIRE_MESSAGE(prepared.ok(), prepared.status().to_string());
  const DeviceCounters after = device.counters();
  runs.prepared_bytes = prepared->size;
  CHECK(after.bytes_allocated - before.bytes_allocated == prepared->size);
  CHECK(after.allocations - before.allocations == (prepared->size > 0 ? 1u : 0u));

  Dispatch with = call.dispatch;
  with.prepared = prepared->size > 0 ? prepared->host_ptr : nullptr;
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  const uint64_t allocations = hexir::testing::thread_allocation_count();
  Status status = queue.dispatch(with);
  CHECK(hexir::testing::thread_allocation_count() == allocations);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  runs.prepared = out.bytes;
  device.release(*prepared);
  return runs;
}

// Prepared and not, at 1 and 2 threads: all four the same bits.
// expect_prepared: 1 yes, 0 no.
void check_prepared(OpId id, std::vector<HostTensor*> inputs, const std::vector<int64_t>& out_dims,
                    const std::vector<int64_t>& params, int expect_prepared = 1) {
  const HostTensor out(DType::kF32, out_dims);
  const Runs one = run_both(1, id, inputs, out, params);
  CHECK((one.prepared_bytes > 0) == (expect_prepared == 1));
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

// `id` with its input 1 prepared, through a 1-thread queue (its pool has
// scratch) and then called directly without a pool: the same bits.
void check_pooled_and_direct(OpId id, std::vector<HostTensor*> inputs, HostTensor& out,
                             const std::vector<int64_t>& params) {
  CpuQueueCall q = prepare_on_cpu_queue(1, id, inputs, {&out}, params);
  Device& device = *q.device;
  Queue& queue = *q.queue;
  const PreparedCall& call = q.call;
  auto prepared = device.prepare_dispatch(prepare_request(call, 1).dispatch);
  REQUIRE(prepared.ok());
  REQUIRE(prepared->size > 0);
  Dispatch with = call.dispatch;
  with.prepared = prepared->host_ptr;
  REQUIRE(queue.dispatch(with).ok());
  const std::vector<uint8_t> pooled = out.bytes;
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  REQUIRE(reinterpret_cast<cpu::KernelFn>(with.kernel)(KernelContext{}, with).ok());
  CHECK(out.bytes == pooled);
  device.release(*prepared);
}

TEST_CASE("prepared: the A block packed once into the pool's scratch gives the bits of packing each panel") {
  // Through a queue (its pool has scratch: A's rows packed once per K block)
  // against the kernel called without a pool (A packed again per chunk of
  // B's strips); N past one chunk (12 strips of 32), M past one row block.
  for (auto [m_, k_, n_] : {std::tuple<int64_t, int64_t, int64_t>{301, 517, 1000},
                            {256, 768, 800},
                            {13, 257, 450},
                            {200, 300, 65}}) {
    const int64_t m = m_, k = k_, n = n_;
    INFO(m << "x" << k << " * " << k << "x" << n);
    HostTensor a = random_f32({m, k}, 3), b = random_f32({k, n}, 4), out(DType::kF32, {m, n});
    check_pooled_and_direct(OpId::kMatmul, {&a, &b}, out, {});
  }
}

TEST_CASE("prepared: a cpu device with pack_weights off prepares nothing (the mapped weights stay shared)") {
  HostTensor a = random_f32({37, 70}, 11), b = random_f32({70, 45}, 12);
  for (const char* name : {"cpu?pack_weights=0", "cpu?threads=2&pack_weights=0"}) {
    INFO(name);
    auto device = create_device(name);
    REQUIRE_MESSAGE(device.ok(), device.status().to_string());
    HostTensor out(DType::kF32, {37, 45});
    auto call = prepare_call(OpId::kMatmul, {&a, &b}, {&out}, {});
    REQUIRE(call.ok());
    auto prepared = (*device)->prepare_dispatch(prepare_request(*call, 1).dispatch);
    REQUIRE(prepared.ok());
    CHECK(prepared->size == 0);
    CHECK((*device)->counters().allocations == 0);
  }
  auto with = create_device("cpu", {.threads = 1, .pack_weights = false});
  REQUIRE(with.ok());
  CHECK(create_device("cpu?pack_weights=2").status().message().find("pack_weights=0|1") != std::string::npos);
}

TEST_CASE("prepared: matmul with bias and activation, batched A over one B; per-batch B is not prepared") {
  HostTensor a = random_f32({3, 37, 70}, 3), b = random_f32({70, 45}, 4), bias = random_f32({45}, 5);
  // params: transpose_b 0, then the epilogue (activation 1: relu; two float words)
  check_prepared(OpId::kMatmul, {&a, &b, &bias}, {3, 37, 45}, {0, 1, 0, 0});
  HostTensor b3 = random_f32({3, 70, 45}, 6);
  check_prepared(OpId::kMatmul, {&a, &b3}, {3, 37, 45}, {}, /*expect_prepared=*/0);
  HostTensor b1 = random_f32({1, 70, 45}, 7);
  check_prepared(OpId::kMatmul, {&a, &b1}, {3, 37, 45}, {});
  // B stored [n, k] (transpose_b): transposed and packed once against many
  // rows; against a few, read where it lies (nothing prepared).
  HostTensor bt = random_f32({45, 70}, 8);
  check_prepared(OpId::kMatmul, {&a, &bt, &bias}, {3, 37, 45}, {1, 1, 0, 0});
  HostTensor a1 = random_f32({1, 70}, 9);
  check_prepared(OpId::kMatmul, {&a1, &bt, &bias}, {1, 45}, {1, 1, 0, 0}, /*expect_prepared=*/0);
}

TEST_CASE("prepared: conv2d with its weights packed once is bit-identical (3x3, 1x1, strided, grouped, short M)") {
  HostTensor x = random_f32({2, 16, 37, 41}, 8), bias = random_f32({16}, 9);
  HostTensor w3 = random_f32({16, 16, 3, 3}, 10), w1 = random_f32({16, 16, 1, 1}, 11);
  HostTensor wg = random_f32({16, 4, 3, 3}, 12), wd = random_f32({16, 1, 5, 5}, 13);
  // params: strides, pads (t, l, b, r), dilations, groups
  check_prepared(OpId::kConv2d, {&x, &w3, &bias}, {2, 16, 37, 41}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  check_prepared(OpId::kConv2d, {&x, &w1}, {2, 16, 37, 41}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  check_prepared(OpId::kConv2d, {&x, &wg, &bias}, {2, 16, 19, 21}, {2, 2, 1, 1, 1, 1, 1, 1, 4});
  // Depthwise (NCHW) has no GEMM: nothing prepared.
  check_prepared(OpId::kConv2d, {&x, &wd, &bias}, {2, 16, 19, 20}, {2, 2, 2, 1, 2, 1, 1, 1, 16}, 0);
  // Channels-last depthwise (the layout word): its weights block-major. 72 channels (vectors of 8
  // past 64), 200 at 7x7 under a 5x5 window (every pixel an edge one), 46 (8, 4, then 2 one at a time).
  struct DepthwiseCase {
    int64_t c, hw, k, stride;
  };
  for (const DepthwiseCase& dc : {DepthwiseCase{72, 19, 3, 1}, DepthwiseCase{200, 7, 5, 1}, DepthwiseCase{46, 13, 3, 2}}) {
    const int64_t c = dc.c, hw = dc.hw, k = dc.k, stride = dc.stride;
    INFO("channels-last depthwise " << c << " channels at " << hw << ", " << k << "x" << k << " stride " << stride);
    HostTensor xl = random_f32({2, hw, hw, c}, 30), wl = random_f32({c, 1, k, k}, 31), bl = random_f32({c}, 32);
    const int64_t pad = k / 2, o = (hw + 2 * pad - k) / stride + 1;
    check_prepared(OpId::kConv2d, {&xl, &wl, &bl}, {2, o, o, c}, {stride, stride, pad, pad, pad, pad, 1, 1, c, 1});
  }
  // Few input channels (a stem) and a short M with many output columns.
  HostTensor xs = random_f32({1, 3, 67, 66}, 14), ws = random_f32({24, 3, 5, 5}, 15), bs = random_f32({24}, 16);
  check_prepared(OpId::kConv2d, {&xs, &ws, &bs}, {1, 24, 33, 33}, {2, 2, 1, 1, 2, 2, 1, 1, 1});
  HostTensor xm = random_f32({1, 40, 30, 29}, 17), wm = random_f32({24, 40, 3, 3}, 18);
  check_prepared(OpId::kConv2d, {&xm, &wm}, {1, 24, 30, 29}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  HostTensor w1m = random_f32({25, 40, 1, 1}, 19);
  check_prepared(OpId::kConv2d, {&xm, &w1m}, {1, 25, 30, 29}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  // As short an M as reads B's strips in place (at most two panels: 12 rows on AVX2, 24 on AVX-512),
  // the prepared panels through the strips kernel.
  for (int64_t k : {12, 24}) {
    HostTensor ws = random_f32({k, 40, 1, 1}, 20 + k);
    check_prepared(OpId::kConv2d, {&xm, &ws}, {1, k, 30, 29}, {1, 1, 0, 0, 0, 0, 1, 1, 1});
  }
}

// conv_transpose prepared from its weights, which are then poisoned (NaN):
// called directly with its workspace, without one and with one too small
// (the direct loop), it gives the bits of the plain call each time, so it
// reads nothing of the weights it says it replaces.
void check_conv_transpose_weights_unread(std::vector<HostTensor*> inputs,
                                         const std::vector<int64_t>& out_dims,
                                         const std::vector<int64_t>& params) {
  auto device = create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  HostTensor out(DType::kF32, out_dims);
  auto call = prepare_call(OpId::kConvTranspose, inputs, {&out}, params);
  REQUIRE_MESSAGE(call.ok(), call.status().to_string());
  uint32_t replaced = 0;
  auto prepared = (*device)->prepare_dispatch(prepare_request(*call, 1).dispatch, &replaced);
  REQUIRE(prepared.ok());
  REQUIRE(prepared->size > 0);
  CHECK(replaced == 1u << 1);
  HostTensor poisoned = *inputs[1];
  for (int64_t i = 0; i < poisoned.count(); ++i) poisoned.at(i) = std::numeric_limits<float>::quiet_NaN();
  std::vector<void*> operands = call->operands;
  operands[1] = poisoned.bytes.data();
  const auto kernel = reinterpret_cast<cpu::KernelFn>(call->dispatch.kernel);
  for (uint64_t size : {call->dispatch.workspace_size, uint64_t{0}, uint64_t{64}}) {
    INFO("workspace " << size);
    Dispatch plain = call->dispatch;
    if (size == 0) plain.workspace = nullptr;
    plain.workspace_size = size;
    for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
    REQUIRE(kernel(KernelContext{}, plain).ok());
    const std::vector<uint8_t> want = out.bytes;
    Dispatch with = plain;
    with.operands = operands.data();
    with.prepared = prepared->host_ptr;
    for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
    REQUIRE(kernel(KernelContext{}, with).ok());
    CHECK(out.bytes == want);
  }
  (*device)->release(*prepared);
}

TEST_CASE("prepared: conv_transpose with its weights transposed once is bit-identical (grouped, banded)") {
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<int64_t> params;  // [sh, sw, pt, pl, pb, pr, dh, dw, groups, oph, opw]
  };
  const Case cases[] = {
      {{1, 24, 9, 7}, {24, 24, 2, 2}, {2, 2, 0, 0, 0, 0, 1, 1, 1, 0, 0}},  // PP-OCR's 2x2 stride 2
      {{2, 8, 10, 12}, {8, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}},   // two images, output padding
      {{1, 6, 5, 5}, {6, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 3, 0, 0}},     // three groups
      // bands of input rows (col past 1 MiB), with groups and dilation too
      {{1, 4, 80, 64}, {4, 8, 4, 4}, {2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0}},
      {{1, 4, 300, 70}, {4, 6, 3, 3}, {2, 3, 1, 2, 2, 0, 2, 1, 2, 1, 2}},
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    INFO("x " << dims_string(c.x) << " w " << dims_string(c.w) << " params " << dims_string(c.params));
    HostTensor x = random_f32(c.x, seed++), w = random_f32(c.w, seed++);
    HostTensor bias = random_f32({c.w[1] * c.params[8]}, seed++);
    auto type = ops::infer_result_type(OpId::kConvTranspose, std::vector{x.type(), w.type()}, c.params);
    REQUIRE_MESSAGE(type.ok(), type.status().to_string());
    check_prepared(OpId::kConvTranspose, {&x, &w}, type->dims, c.params);
    check_prepared(OpId::kConvTranspose, {&x, &w, &bias}, type->dims, c.params);
    check_conv_transpose_weights_unread({&x, &w, &bias}, type->dims, c.params);
    // Weights that are not a constant: nothing prepared, transposed per call.
    const HostTensor out(DType::kF32, type->dims);
    const Runs runs = run_both(1, OpId::kConvTranspose, {&x, &w, &bias}, out, c.params, /*constant=*/0);
    CHECK(runs.prepared_bytes == 0);
    CHECK(runs.prepared == runs.plain);
  }
}

// conv2d against a double reference (NCHW, groups 1).
std::vector<double> conv_reference(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                   const std::vector<int64_t>& pr, int64_t oh, int64_t ow) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], wd = x.dims[3];
  const int64_t k = w.dims[0], kh = w.dims[2], kw = w.dims[3];
  std::vector<double> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double sum = bias ? bias->at(o) : 0.0;
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = y * pr[0] - pr[2] + ky * pr[6], ix = xo * pr[1] - pr[3] + kx * pr[7];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                sum += static_cast<double>(x.at(((b * c + ci) * h + iy) * wd + ix)) *
                       w.at(((o * c + ci) * kh + ky) * kw + kx);
              }
          out.push_back(sum);
        }
  return out;
}

// A fused epilogue's parameter words (after a conv2d's or matmul's own).
std::vector<int64_t> with_epilogue(std::vector<int64_t> params, OpId activation,
                                   const std::vector<int64_t>& activation_params = {}) {
  std::optional<std::vector<int64_t>> words = ops::epilogue_words(activation, activation_params);
  REQUIRE(words.has_value());
  params.insert(params.end(), words->begin(), words->end());
  return params;
}

TEST_CASE("prepared: matmul of one to four rows (the few-rows GEMM) gives the tiles' bits, with bias and activation") {
  // K past one block (256) and not; N past one task (8 strips) and split over threads; N under a strip.
  for (auto [k_, n_] : {std::pair<int64_t, int64_t>{300, 65}, {600, 1000}, {5, 7}, {256, 33}}) {
    for (int64_t m = 1; m <= 4; ++m) {
      const int64_t k = k_, n = n_;
      INFO(m << "x" << k << " * " << k << "x" << n);
      HostTensor a = random_f32({m, k}, 40), b = random_f32({k, n}, 41), bias = random_f32({n}, 42);
      check_prepared(OpId::kMatmul, {&a, &b}, {m, n}, {});
      check_prepared(OpId::kMatmul, {&a, &b, &bias}, {m, n}, with_epilogue({0}, OpId::kGelu, {0}));
      check_prepared(OpId::kMatmul, {&a, &b, &bias}, {m, n}, with_epilogue({0}, OpId::kHardSwish));
    }
  }
  // Batched A over one B: 3 x 2 rows, each batch element its own few-rows call.
  HostTensor a = random_f32({3, 2, 70}, 43), b = random_f32({70, 45}, 44);
  check_prepared(OpId::kMatmul, {&a, &b}, {3, 2, 45}, {});
}

TEST_CASE("prepared: conv2d with one to four output pixels (the few-rows GEMM, transposed) gives the tiles' bits") {
  // params: strides, pads (t, l, b, r), dilations, groups, then the epilogue.
  struct Case {
    const char* name;
    std::vector<int64_t> x, w, params, out;
  };
  const Case cases[] = {
      {"1-D, 3 pixels (silero-vad's encoder)", {1, 129, 1, 5}, {128, 129, 1, 3}, {1, 1, 0, 0, 0, 0, 1, 1, 1}, {1, 128, 1, 3}},
      {"an STFT: 1 channel, 256 taps, stride 128", {1, 1, 1, 640}, {258, 1, 1, 256}, {1, 128, 0, 0, 0, 0, 1, 1, 1},
       {1, 258, 1, 4}},
      {"1x1 over 2x2, read in place, K past a block", {2, 300, 2, 2}, {40, 300, 1, 1}, {1, 1, 0, 0, 0, 0, 1, 1, 1},
       {2, 40, 2, 2}},
      {"3x3 padded, strided", {1, 16, 3, 4}, {24, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 24, 2, 2}},
      {"grouped, dilated, 1 pixel", {1, 16, 5, 5}, {20, 4, 3, 3}, {1, 1, 0, 0, 0, 0, 2, 2, 4}, {1, 20, 1, 1}},
      {"wide: 700 channels over threads", {1, 128, 1, 3}, {700, 128, 1, 3}, {1, 1, 0, 1, 0, 1, 1, 1, 1}, {1, 700, 1, 3}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    HostTensor x = random_f32(c.x, 50), w = random_f32(c.w, 51), bias = random_f32({c.w[0]}, 52);
    HostTensor residual = random_f32(c.out, 53);
    residual.at(residual.count() / 2) = std::numeric_limits<float>::quiet_NaN();
    check_prepared(OpId::kConv2d, {&x, &w}, c.out, c.params);
    check_prepared(OpId::kConv2d, {&x, &w, &bias}, c.out, with_epilogue(c.params, OpId::kRelu));
    check_prepared(OpId::kConv2d, {&x, &w, &bias, &residual}, c.out, with_epilogue(c.params, OpId::kSigmoid));
    check_prepared(OpId::kConv2d, {&x, &w, &bias, &residual}, c.out,
                   with_epilogue(c.params, OpId::kHardSigmoid, {std::bit_cast<int64_t>(0.2), std::bit_cast<int64_t>(0.5)}));
    // Against the double reference (groups 1).
    if (c.params[8] == 1) {
      HostTensor out(DType::kF32, c.out);
      const Runs runs = run_both(1, OpId::kConv2d, {&x, &w, &bias}, out, c.params);
      out.bytes = runs.prepared;
      const int64_t patch = c.w[1] * c.w[2] * c.w[3];
      check_close(out, conv_reference(x, w, &bias, c.params, c.out[2], c.out[3]), 1e-5, 1e-5 * (patch + 1));
    }
  }
}

TEST_CASE("prepared: a few-pixel conv2d called without a pool (no scratch for its patches) gives the same bits") {
  HostTensor x = random_f32({1, 16, 3, 4}, 60), w = random_f32({24, 16, 3, 3}, 61), out(DType::kF32, {1, 24, 2, 2});
  check_pooled_and_direct(OpId::kConv2d, {&x, &w}, out, {2, 2, 1, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("prepared: a Winograd conv2d, U prepared or packed per pass, with or without a pool's scratch, same bits") {
  // Layout word 2: channels-last by F(2x2, 3x3). 40 -> 20 on an odd 9 x 7 map (tiles past the edges, a
  // part strip); without a pool each element comes from ops::conv2d_winograd_element<2>.
  HostTensor x = random_f32({2, 9, 7, 40}, 62), w = random_f32({20, 40, 3, 3}, 63), bias = random_f32({20}, 64);
  const std::vector<int64_t> params{1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
  check_prepared(OpId::kConv2d, {&x, &w, &bias}, {2, 9, 7, 20}, params);
  HostTensor out(DType::kF32, {2, 9, 7, 20});
  check_pooled_and_direct(OpId::kConv2d, {&x, &w, &bias}, out, params);
  // Layout word 3: F(4x4, 3x3), the same edges (9 x 7: tiles past both), ops::conv2d_winograd_element<4>.
  const std::vector<int64_t> params4{1, 1, 1, 1, 1, 1, 1, 1, 1, 3};
  check_prepared(OpId::kConv2d, {&x, &w, &bias}, {2, 9, 7, 20}, params4);
  check_pooled_and_direct(OpId::kConv2d, {&x, &w, &bias}, out, params4);
}

TEST_CASE("prepared: few-channel stems (the direct path on AVX-512 and AVX2) against the reference, every edge") {
  // params: strides, pads (t, l, b, r), dilations, groups
  struct Case {
    std::vector<int64_t> x, w, params, out;
  };
  for (const Case& c : {Case{{1, 3, 67, 66}, {24, 3, 5, 5}, {2, 2, 1, 1, 2, 2, 1, 1, 1}, {1, 24, 33, 33}},
                        Case{{2, 3, 40, 37}, {11, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 11, 40, 37}},
                        Case{{1, 4, 20, 50}, {9, 4, 3, 3}, {2, 2, 0, 3, 1, 2, 1, 1, 1}, {1, 9, 10, 27}},
                        Case{{1, 1, 17, 16}, {3, 1, 7, 7}, {1, 1, 3, 3, 3, 3, 1, 1, 1}, {1, 3, 17, 16}},
                        // stride 1 direct: 16 channels, a partial last tile of columns
                        Case{{1, 3, 19, 45}, {16, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 16, 19, 45}},
                        // rows ending in 6 and in exactly 16 columns (AVX2: a tile of 8 and of 16)
                        Case{{1, 3, 31, 60}, {8, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 8, 16, 30}},
                        Case{{1, 3, 20, 64}, {24, 3, 5, 5}, {1, 1, 2, 2, 2, 2, 1, 1, 1}, {1, 24, 20, 64}},
                        // rows of whole 48-column tiles (AVX-512's three vectors), stride 2 (PP-OCR cls's stem)
                        Case{{1, 3, 20, 192}, {8, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 8, 10, 96}},
                        // rows of 112 (AVX2: four 24-column tiles and one of 16) and of 56 (2 x 24 + 8: tiles of 16)
                        Case{{1, 3, 9, 224}, {8, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 8, 5, 112}},
                        Case{{1, 3, 10, 111}, {16, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 16, 5, 56}}}) {
    INFO(dims_string(c.x) << " * " << dims_string(c.w));
    HostTensor x = random_f32(c.x, 30), w = random_f32(c.w, 31), bias = random_f32({c.w[0]}, 32);
    HostTensor out(DType::kF32, c.out);
    for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
    REQUIRE(run_kernel(OpId::kConv2d, {&x, &w, &bias}, out, c.params).ok());
    const int64_t patch = c.w[1] * c.w[2] * c.w[3];
    check_close(out, conv_reference(x, w, &bias, c.params, c.out[2], c.out[3]), 1e-5, 1e-5 * (patch + 1));
    // Prepared: the stem's weights tap-major (the GEMM's packed A where there is no direct stem).
    check_prepared(OpId::kConv2d, {&x, &w, &bias}, c.out, c.params);
  }
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
