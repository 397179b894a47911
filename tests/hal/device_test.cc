// The cpu Device and Queue through the hal::Device interface: names, memory,
// transfers, fills, counters, kernels, dispatch, and use from two threads.
#include <bit>
#include <thread>

#include "alloc_counter.h"
#include "hal_test_util.h"
#include "sanitizers.h"

// Sanitizer allocators abort on impossible sizes instead of returning null.
#define HEXIR_SANITIZED_ALLOCATOR (HEXIR_TEST_ASAN || HEXIR_TEST_TSAN)

namespace hexir::hal::testing {
namespace {

using ops::OpId;

std::unique_ptr<Device> make_cpu() {
  auto device = create_device("cpu");
  REQUIRE(device.ok());
  return std::move(device).value();
}

Buffer allocate_or_die(Device& device, uint64_t size, uint64_t alignment = 64) {
  auto buffer = device.allocate(size, MemoryType::kDeviceLocal, BufferUsage::kTransient, alignment);
  REQUIRE(buffer.ok());
  return buffer.value();
}

TEST_CASE("create_device: cpu") {
  auto device = create_device("cpu");
  REQUIRE(device.ok());
  CHECK(device.value()->name() == "cpu");
}

TEST_CASE("create_device: cuda names are recognized; without a GPU they are unavailable, not a crash") {
  for (const char* name :
       {"cuda", "cuda:0", "cuda:12", "cuda-managed", "cuda-managed:1", "cuda:0?graphs=off"}) {
    INFO(std::string(name));
    auto device = create_device(name);
    if (device.ok()) continue;  // a machine with that GPU (tests/hal_conformance covers it)
    CHECK(device.status().code() == StatusCode::kUnavailable);
    const std::string message = device.status().message();
    INFO(message);
    CHECK((message.rfind("CUDA backend not built", 0) == 0 ||
           message.rfind("CUDA driver not available", 0) == 0 || message.rfind("CUDA device ", 0) == 0));
  }
}

TEST_CASE("create_device: unknown names list the valid ones") {
  for (const char* name :
       {"", "gpu", "CPU", "cpu:0", "cuda:", "cuda:x", "cuda0", "cuda-managed:", "cuda:-1"}) {
    INFO("'" << std::string(name) << "'");
    auto device = create_device(name);
    REQUIRE(!device.ok());
    CHECK(device.status().code() == StatusCode::kInvalidArgument);
    CHECK(device.status().message().find("cpu, cuda") != std::string::npos);
  }
}

TEST_CASE("allocate: alignment, size 0, bad alignment, impossible size") {
  auto device = make_cpu();
  for (uint64_t alignment : {1, 16, 64, 256, 4096}) {
    Buffer b = allocate_or_die(*device, 100, alignment);
    CHECK(b.host_ptr != nullptr);
    CHECK(b.device_ptr == reinterpret_cast<uintptr_t>(b.host_ptr));
    CHECK(b.size == 100);
    CHECK(!b.imported);
    CHECK(reinterpret_cast<uintptr_t>(b.host_ptr) % std::max<uint64_t>(alignment, 64) == 0);
    device->release(b);
    CHECK(b.host_ptr == nullptr);
  }
  Buffer empty = allocate_or_die(*device, 0);
  CHECK(empty.size == 0);
  CHECK(device->write(empty, 0, nullptr, 0).ok());
  device->release(empty);

  auto bad = device->allocate(64, MemoryType::kDeviceLocal, BufferUsage::kTransient, 48);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
#if !HEXIR_SANITIZED_ALLOCATOR
  auto huge = device->allocate(uint64_t{1} << 62, MemoryType::kDeviceLocal, BufferUsage::kTransient);
  CHECK(huge.status().code() == StatusCode::kResourceExhausted);
#endif
  auto too_big = device->allocate(~uint64_t{0}, MemoryType::kDeviceLocal, BufferUsage::kTransient);
  CHECK(too_big.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("write then read round trip, at offsets") {
  auto device = make_cpu();
  Buffer b = allocate_or_die(*device, 64);
  std::vector<uint8_t> data(64);
  for (int i = 0; i < 64; ++i) data[i] = static_cast<uint8_t>(i + 1);
  REQUIRE(device->write(b, 0, data.data(), 64).ok());
  const uint8_t patch[3] = {200, 201, 202};
  REQUIRE(device->write(b, 10, patch, 3).ok());
  std::vector<uint8_t> back(64);
  REQUIRE(device->read(b, 0, back.data(), 64).ok());
  data[10] = 200;
  data[11] = 201;
  data[12] = 202;
  CHECK(back == data);
  uint8_t tail[4];
  REQUIRE(device->read(b, 60, tail, 4).ok());
  CHECK(tail[3] == 64);
  device->release(b);
}

TEST_CASE("write, read and fill reject ranges outside the buffer, overflow included") {
  auto device = make_cpu();
  Buffer b = allocate_or_die(*device, 32);
  uint8_t bytes[64] = {};
  CHECK(device->write(b, 0, bytes, 33).code() == StatusCode::kInvalidArgument);
  CHECK(device->write(b, 30, bytes, 4).code() == StatusCode::kInvalidArgument);
  CHECK(device->write(b, 33, bytes, 0).code() == StatusCode::kInvalidArgument);
  CHECK(device->write(b, 8, bytes, ~uint64_t{0}).code() == StatusCode::kInvalidArgument);
  CHECK(device->read(b, 16, bytes, 17).code() == StatusCode::kInvalidArgument);
  CHECK(device->read(b, ~uint64_t{0}, bytes, 2).code() == StatusCode::kInvalidArgument);
  const uint32_t pattern = 7;
  CHECK(device->fill(b, 16, 20, &pattern, 4).code() == StatusCode::kInvalidArgument);
  CHECK(device->write(b, 32, bytes, 0).ok());  // empty range at the end is fine
  device->release(b);
}

TEST_CASE("fill: patterns of 1..16 bytes over sub-ranges") {
  auto device = make_cpu();
  for (uint32_t pattern_size : {1u, 2u, 3u, 4u, 8u, 12u, 16u}) {
    INFO("pattern of " << pattern_size << " bytes");
    Buffer b = allocate_or_die(*device, 256);
    std::vector<uint8_t> zeros(256, 0);
    REQUIRE(device->write(b, 0, zeros.data(), 256).ok());
    uint8_t pattern[16];
    for (uint32_t i = 0; i < 16; ++i) pattern[i] = static_cast<uint8_t>(0xA0 + i);
    const uint64_t offset = 5, size = pattern_size * 13;
    REQUIRE(device->fill(b, offset, size, pattern, pattern_size).ok());
    std::vector<uint8_t> back(256);
    REQUIRE(device->read(b, 0, back.data(), 256).ok());
    for (uint64_t i = 0; i < 256; ++i) {
      const uint8_t want = (i >= offset && i < offset + size) ? pattern[(i - offset) % pattern_size] : 0;
      if (back[i] != want) {
        FAIL_CHECK("byte " << i << " is " << int(back[i]) << ", want " << int(want));
        break;
      }
    }
    device->release(b);
  }
}

TEST_CASE("fill: f32 splat, uniform bytes, and bad patterns") {
  auto device = make_cpu();
  Buffer b = allocate_or_die(*device, 40);
  const float value = 1.5f;
  REQUIRE(device->fill(b, 0, 40, &value, 4).ok());
  float back[10];
  REQUIRE(device->read(b, 0, back, 40).ok());
  for (float f : back) CHECK(f == 1.5f);
  const uint16_t same = 0x7777;
  REQUIRE(device->fill(b, 0, 40, &same, 2).ok());
  REQUIRE(device->read(b, 0, back, 4).ok());
  CHECK(std::bit_cast<uint32_t>(back[0]) == 0x77777777u);
  uint8_t pattern[17] = {};
  CHECK(device->fill(b, 0, 8, pattern, 0).code() == StatusCode::kInvalidArgument);
  CHECK(device->fill(b, 0, 17, pattern, 17).code() == StatusCode::kInvalidArgument);
  CHECK(device->fill(b, 0, 10, pattern, 4).code() == StatusCode::kInvalidArgument);
  CHECK(device->fill(b, 0, 8, nullptr, 4).code() == StatusCode::kInvalidArgument);
  CHECK(device->fill(b, 0, 0, pattern, 4).ok());
  device->release(b);
}

TEST_CASE("cpu queue: its pool's scratch is allocated with the queue, counted, and released with it") {
  // 192 KiB per participant (hal/cpu/thread_pool.h: the GEMM's packed A
  // block); never allocated on dispatch.
  auto device = create_device("cpu", {.threads = 2});
  REQUIRE(device.ok());
  const DeviceCounters before = (*device)->counters();
  {
    auto queue = (*device)->create_queue();
    REQUIRE(queue.ok());
    const DeviceCounters created = (*device)->counters();
    CHECK(created.allocations - before.allocations == 1);
    CHECK(created.bytes_allocated - before.bytes_allocated == 2 * 256 * 1024);
    CHECK(created.releases == before.releases);
  }
  CHECK((*device)->counters().releases - before.releases == 1);
}

TEST_CASE("queue copy: between buffers, overlapping within one, bounds") {
  auto device = make_cpu();
  auto queue = device->create_queue();
  REQUIRE(queue.ok());
  Buffer src = allocate_or_die(*device, 16), dst = allocate_or_die(*device, 16);
  uint8_t data[16];
  for (int i = 0; i < 16; ++i) data[i] = static_cast<uint8_t>(i);
  REQUIRE(device->write(src, 0, data, 16).ok());
  REQUIRE(queue.value()->copy(dst, 4, src, 0, 12).ok());
  REQUIRE(queue.value()->copy(src, 2, src, 0, 8).ok());  // overlapping
  REQUIRE(queue.value()->synchronize().ok());
  uint8_t back[16];
  REQUIRE(device->read(dst, 4, back, 12).ok());
  for (int i = 0; i < 12; ++i) CHECK(back[i] == i);
  REQUIRE(device->read(src, 0, back, 16).ok());
  const uint8_t want[16] = {0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15};
  for (int i = 0; i < 16; ++i) CHECK(back[i] == want[i]);
  CHECK(queue.value()->copy(dst, 8, src, 0, 9).code() == StatusCode::kInvalidArgument);
  CHECK(queue.value()->copy(dst, 0, src, 9, 8).code() == StatusCode::kInvalidArgument);
  device->release(src);
  device->release(dst);
}

TEST_CASE("import_host: zero copy, imported, release is a no-op") {
  auto device = make_cpu();
  std::vector<float> host = {1, 2, 3, 4};
  auto imported = device->import_host(host.data(), 16, BufferUsage::kExternal);
  REQUIRE(imported.ok());
  Buffer b = imported.value();
  CHECK(b.imported);
  CHECK(b.host_ptr == host.data());
  CHECK(b.size == 16);
  const float nine = 9.0f;
  REQUIRE(device->write(b, 4, &nine, 4).ok());
  CHECK(host[1] == 9.0f);  // the caller's memory itself changed
  host[3] = 7.0f;
  float back;
  REQUIRE(device->read(b, 12, &back, 4).ok());
  CHECK(back == 7.0f);
  const DeviceCounters before = device->counters();
  device->release(b);
  CHECK(device->counters().releases == before.releases);
  CHECK(host[0] == 1.0f);  // still ours, still alive
  CHECK(device->import_host(nullptr, 4, BufferUsage::kExternal).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(device->import_host(nullptr, 0, BufferUsage::kExternal).ok());
}

TEST_CASE("counters: one per operation, bytes summed") {
  auto device = make_cpu();
  CHECK(device->counters().allocations == 0);
  Buffer a = allocate_or_die(*device, 100), b = allocate_or_die(*device, 28);
  uint8_t bytes[100] = {};
  REQUIRE(device->write(a, 0, bytes, 100).ok());
  REQUIRE(device->write(b, 0, bytes, 20).ok());
  REQUIRE(device->read(a, 0, bytes, 10).ok());
  REQUIRE(device->fill(a, 0, 8, bytes, 4).ok());
  CHECK(!device->write(a, 0, bytes, 101).ok());  // a failed call is not counted
  auto host = device->import_host(bytes, 100, BufferUsage::kExternal);
  REQUIRE(host.ok());
  DeviceCounters c = device->counters();
  CHECK(c.allocations == 2);
  CHECK(c.bytes_allocated == 128);
  CHECK(c.uploads == 2);
  CHECK(c.bytes_uploaded == 120);
  CHECK(c.downloads == 1);
  CHECK(c.fills == 1);
  CHECK(c.dispatches == 0);
  CHECK(c.releases == 0);
  device->release(a);
  device->release(b);
  device->release(host.value());
  CHECK(device->counters().releases == 2);
}

TEST_CASE("resolve_kernel: every dispatchable operator; views, unknown ids and dtypes are unimplemented") {
  auto device = make_cpu();
  for (int i = 0; i < ops::kOpCount; ++i) {
    const auto id = static_cast<OpId>(i);
    const ops::KernelKey key = hexir::hal::testing::representative_key(id);
    auto handle = device->resolve_kernel(key);
    if (ops::op_def(id).is_view) {
      CHECK(handle.status().code() == StatusCode::kUnimplemented);
      CHECK(handle.status().message().find("view") != std::string::npos);
    } else {
      REQUIRE(handle.ok());
      CHECK(handle.value() == reinterpret_cast<uintptr_t>(cpu::find_cpu_kernel(key)));
    }
  }
  CHECK(device->resolve_kernel({OpId::kCount, DType::kF32, DType::kF32}).status().code() ==
        StatusCode::kUnimplemented);
  auto i32_softmax = device->resolve_kernel({OpId::kSoftmax, DType::kI32, DType::kI32});
  CHECK(i32_softmax.status().code() == StatusCode::kUnimplemented);
  CHECK(i32_softmax.status().message() == "cpu: no kernel for 'softmax' on i32 -> i32");
}

// Tensors in device buffers, as the VM lays them out.
struct DeviceTensor {
  Buffer buffer;
  std::vector<int64_t> dims;
  TensorType type() const { return {DType::kF32, dims}; }
};

DeviceTensor make_tensor(Device& device, std::vector<int64_t> dims, float value) {
  DeviceTensor t{allocate_or_die(device, product(dims) * 4), std::move(dims)};
  REQUIRE(device.fill(t.buffer, 0, t.buffer.size, &value, 4).ok());
  return t;
}

// A prepared binary dispatch: plan and kernel decided here, as at prepare.
struct BinaryDispatch {
  ops::OpPlan plan;
  void* operands[3];
  Dispatch dispatch;
  BinaryDispatch(Device& device, OpId id, const DeviceTensor& a, const DeviceTensor& b,
                 const DeviceTensor& out)
      : operands{a.buffer.host_ptr, b.buffer.host_ptr, out.buffer.host_ptr} {
    const TensorType in[2] = {a.type(), b.type()};
    const TensorType result[1] = {out.type()};
    plan = ops::plan_op(id, in, result, {}).value();
    dispatch.kernel = device.resolve_kernel(ops::kernel_key(id, in, result)).value();
    dispatch.plan = plan.words().data();
    dispatch.operands = operands;
    dispatch.input_count = 2;
    dispatch.output_count = 1;
  }
};

TEST_CASE("queue dispatch_sequence: runs in order and stops at the first failure") {
  auto device = make_cpu();
  auto queue = device->create_queue().value();
  DeviceTensor acc = make_tensor(*device, {4}, 1.0f), two = make_tensor(*device, {}, 2.0f);
  BinaryDispatch prepared(*device, OpId::kMul, acc, two, acc);  // acc *= 2, in place
  const Dispatch mul = prepared.dispatch;
  Dispatch unresolved = mul;
  unresolved.kernel = 0;

  const Dispatch good[3] = {mul, mul, mul};
  size_t failed = 99;
  REQUIRE(queue->dispatch_sequence(good, {}, &failed).ok());
  CHECK(failed == 99);
  CHECK(queue->dispatch_count() == 3);

  const Dispatch bad[3] = {mul, unresolved, mul};
  CHECK(queue->dispatch_sequence(bad, {}, &failed).code() == StatusCode::kInvalidArgument);
  CHECK(failed == 1);
  REQUIRE(queue->synchronize().ok());
  float back[4];
  REQUIRE(device->read(acc.buffer, 0, back, sizeof back).ok());
  for (float f : back) CHECK(f == 16.0f);  // three doublings, then one more before the failure
  CHECK(queue->dispatch_count() == 5);
  CHECK(device->counters().dispatches == 5);
  device->release(acc.buffer);
  device->release(two.buffer);
}

TEST_CASE("queue dispatch: runs the kernel, counts per queue and per device") {
  auto device = make_cpu();
  auto queue = device->create_queue().value();
  DeviceTensor a = make_tensor(*device, {2, 3}, 1.5f), b = make_tensor(*device, {3}, 2.0f),
               out = make_tensor(*device, {2, 3}, 0.0f);
  BinaryDispatch prepared(*device, OpId::kMul, a, b, out);
  Dispatch& args = prepared.dispatch;
  REQUIRE(queue->dispatch(args).ok());
  REQUIRE(queue->dispatch(args).ok());
  REQUIRE(queue->synchronize().ok());
  float back[6];
  REQUIRE(device->read(out.buffer, 0, back, 24).ok());
  for (float f : back) CHECK(f == 3.0f);
  CHECK(queue->dispatch_count() == 2);
  CHECK(device->counters().dispatches == 2);

  auto other = device->create_queue().value();
  CHECK(other->dispatch_count() == 0);

  args.kernel = 0;
  CHECK(queue->dispatch(args).code() == StatusCode::kInvalidArgument);
  for (DeviceTensor* t : {&a, &b, &out}) device->release(t->buffer);
}

TEST_CASE("queue dispatch allocates nothing, for every kernel") {
  auto device = make_cpu();
  auto queue = device->create_queue().value();
  auto calls = one_call_per_kernel();
  for (KernelCall& call : calls) {
    INFO("kernel " << std::string(ops::op_def(call.id).name));
    std::vector<HostTensor*> inputs;
    for (HostTensor& t : call.inputs) inputs.push_back(&t);
    auto prepared = prepare_call(call.id, inputs, {&call.output}, call.params);
    REQUIRE_MESSAGE(prepared.ok(), prepared.status().to_string());
    const uint64_t before = hexir::testing::thread_allocation_count();
    const Status status = queue->dispatch(prepared->dispatch);
    const uint64_t allocations = hexir::testing::thread_allocation_count() - before;
    REQUIRE(status.ok());
    CHECK(allocations == 0);
  }
  CHECK(queue->dispatch_count() == calls.size());
}

TEST_CASE("two threads, two queues, one device: concurrent dispatches stay separate") {
  auto device = make_cpu();
  constexpr int kDispatches = 2000;
  auto worker = [&device](float value, uint64_t* queue_count, bool* correct) {
    auto queue = device->create_queue().value();
    DeviceTensor acc = make_tensor(*device, {64}, 0.0f), step = make_tensor(*device, {}, value);
    BinaryDispatch prepared(*device, OpId::kAdd, acc, step, acc);  // acc += step, in place
    const Dispatch& args = prepared.dispatch;
    bool all_ok = true;
    for (int i = 0; i < kDispatches; ++i) all_ok = queue->dispatch(args).ok() && all_ok;
    all_ok = queue->synchronize().ok() && all_ok;  // settles the device-wide dispatch count
    float back[64];
    all_ok = device->read(acc.buffer, 0, back, sizeof(back)).ok() && all_ok;
    for (float f : back) all_ok = all_ok && f == value * kDispatches;
    *queue_count = queue->dispatch_count();
    *correct = all_ok;
    device->release(acc.buffer);
    device->release(step.buffer);
  };
  uint64_t count_a = 0, count_b = 0;
  bool ok_a = false, ok_b = false;
  std::thread thread_a(worker, 1.0f, &count_a, &ok_a);
  std::thread thread_b(worker, 2.0f, &count_b, &ok_b);
  thread_a.join();
  thread_b.join();
  CHECK(ok_a);
  CHECK(ok_b);
  CHECK(count_a == kDispatches);
  CHECK(count_b == kDispatches);
  const DeviceCounters c = device->counters();
  CHECK(c.dispatches == 2 * kDispatches);
  // Two buffers per worker, and each queue's pool scratch (allocated with
  // the queue, released with it).
  CHECK(c.allocations == 4 + 2);
  CHECK(c.releases == 4 + 2);
  CHECK(c.fills == 4);
}

}  // namespace
}  // namespace hexir::hal::testing
