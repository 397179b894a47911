// The HAL conformance suite: one set of tests written against the Device and
// Queue interface, instantiated for every backend. A backend that is not
// present (no GPU, no driver, CUDA not built) prints "HEXIR_SKIP: <reason>"
// and the case returns early; scripts/test.sh counts those as skipped.
//
// Instances: cpu, cuda, cuda-managed, and cuda with graphs and cuBLAS off
// (eager launches and the tiled matmul kernel).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "kernel_cases.h"

#ifdef HEXIR_HAVE_CUDA
#include "cuda/cuda_blas.h"
#include "cuda/cuda_driver.h"
#endif

namespace {

using hexir::DType;
using hexir::Status;
using hexir::StatusCode;
using hexir::hal::Buffer;
using hexir::hal::BufferUsage;
using hexir::hal::Device;
using hexir::hal::Dispatch;
using hexir::hal::MemoryType;
using hexir::hal::Queue;
using hexir::hal::conformance::KernelCase;
using hexir::hal::testing::HostTensor;
namespace fs = std::filesystem;

// Opens `name`; for a device that is not present prints the skip line and
// returns null. Anything else that fails is a test failure.
std::unique_ptr<Device> open_device(const std::string& name) {
  auto device = hexir::hal::create_device(name);
  if (device.ok()) return std::move(device).value();
  if (name != "cpu" && device.status().code() == StatusCode::kUnavailable) {
    std::printf("HEXIR_SKIP: %s: %s\n", name.c_str(), device.status().message().c_str());
    std::fflush(stdout);
    return nullptr;
  }
  INFO(name, ": ", device.status().to_string());
  FAIL("create_device failed");
  return nullptr;
}

// One TEST_CASE per backend for each conformance test body.
#define HEXIR_CONFORMANCE(title)                                                                           \
  static void HEXIR_CONCAT(conformance_body_, __LINE__)(Device & device);                                  \
  TEST_CASE("cpu: " title) {                                                                               \
    if (auto d = open_device("cpu")) HEXIR_CONCAT(conformance_body_, __LINE__)(*d);                        \
  }                                                                                                        \
  TEST_CASE("cuda: " title) {                                                                              \
    if (auto d = open_device("cuda")) HEXIR_CONCAT(conformance_body_, __LINE__)(*d);                       \
  }                                                                                                        \
  TEST_CASE("cuda-managed: " title) {                                                                      \
    if (auto d = open_device("cuda-managed")) HEXIR_CONCAT(conformance_body_, __LINE__)(*d);               \
  }                                                                                                        \
  TEST_CASE("cuda?graphs=off&cublas=off: " title) {                                                        \
    if (auto d = open_device("cuda?graphs=off&cublas=off")) HEXIR_CONCAT(conformance_body_, __LINE__)(*d); \
  }                                                                                                        \
  static void HEXIR_CONCAT(conformance_body_, __LINE__)(Device & device)

void* address(const Buffer& b, uint64_t offset = 0) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(b.device_ptr + offset));
}

Buffer must_allocate(Device& device, uint64_t size, MemoryType type = MemoryType::kDeviceLocal,
                     uint64_t alignment = 64) {
  auto buffer = device.allocate(size, type, BufferUsage::kTransient, alignment);
  INFO("allocate ", size, ": ", buffer.status().to_string());
  REQUIRE(buffer.ok());
  return *buffer;
}

std::vector<uint8_t> read_all(Device& device, const Buffer& b, uint64_t size) {
  std::vector<uint8_t> out(size);
  Status s = device.read(b, 0, out.data(), size);
  INFO(s.to_string());
  REQUIRE(s.ok());
  return out;
}

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 7 + i / 253) & 0xff);
  return v;
}

// A kernel case's operands in device memory, planned and resolved as the VM
// prepares an instruction.
struct DeviceCase {
  std::vector<Buffer> inputs;
  std::vector<Buffer> outputs;
  std::vector<void*> operands;
  std::vector<HostTensor> results;  // shapes and dtypes of the results
  hexir::ops::OpPlan plan;
  Buffer workspace;
  Dispatch dispatch;
};

void prepare_case(Device& device, const KernelCase& c, DeviceCase& d) {
  d.results = hexir::hal::conformance::results_of(c);
  std::vector<hexir::TensorType> in_types, out_types;
  for (const HostTensor& t : c.inputs) {
    Buffer b = must_allocate(device, t.bytes.size());
    REQUIRE(device.write(b, 0, t.bytes.data(), t.bytes.size()).ok());
    d.inputs.push_back(b);
    d.operands.push_back(address(b));
    in_types.push_back(t.type());
  }
  for (size_t j = 0; j < d.results.size(); ++j) {
    out_types.push_back(d.results[j].type());
    if (j == 0 && c.in_place) {
      d.outputs.push_back(Buffer{});
      d.operands.push_back(address(d.inputs[0]));
      continue;
    }
    d.outputs.push_back(must_allocate(device, d.results[j].bytes.size()));
    d.operands.push_back(address(d.outputs.back()));
  }
  auto plan = hexir::ops::plan_op(c.id, in_types, out_types, c.params);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  d.plan = std::move(*plan);
  auto handle = device.resolve_kernel(hexir::ops::kernel_key(c.id, in_types, out_types));
  REQUIRE_MESSAGE(handle.ok(), handle.status().to_string());
  const uint64_t scratch = hexir::ops::workspace_bytes(c.id, in_types, c.params);
  if (scratch > 0) d.workspace = must_allocate(device, scratch);
  d.dispatch.kernel = *handle;
  d.dispatch.plan = d.plan.words().data();
  d.dispatch.operands = d.operands.data();
  d.dispatch.input_count = static_cast<uint32_t>(c.inputs.size());
  d.dispatch.output_count = static_cast<uint32_t>(d.results.size());
  d.dispatch.workspace = scratch > 0 ? address(d.workspace) : nullptr;
  d.dispatch.workspace_size = scratch;
}

std::vector<HostTensor> read_results(Device& device, const KernelCase& c, DeviceCase& d) {
  std::vector<HostTensor> got = d.results;
  for (size_t j = 0; j < got.size(); ++j) {
    if (got[j].bytes.empty()) continue;
    const Buffer& from = (j == 0 && c.in_place) ? d.inputs[0] : d.outputs[j];
    Status s = device.read(from, 0, got[j].bytes.data(), got[j].bytes.size());
    INFO(s.to_string());
    REQUIRE(s.ok());
  }
  return got;
}

void check_case(const KernelCase& c, const std::vector<HostTensor>& got) {
  const std::vector<HostTensor> want = hexir::hal::conformance::cpu_reference(c);
  REQUIRE(got.size() == want.size());
  for (size_t j = 0; j < want.size(); ++j) {
    CAPTURE(j);
    hexir::hal::conformance::check_matches(c, got[j], want[j]);
  }
}

void release_case(Device& device, DeviceCase& d) {
  for (Buffer& b : d.inputs) device.release(b);
  for (Buffer& b : d.outputs)
    if (b.device_ptr) device.release(b);
  if (d.workspace.device_ptr) device.release(d.workspace);
}

}  // namespace

// --------------------------------------------------------------------------
// Memory
// --------------------------------------------------------------------------

HEXIR_CONFORMANCE("allocate honours alignment, size 0, and counts") {
  const auto before = device.counters();
  for (uint64_t alignment : {uint64_t{64}, uint64_t{256}, uint64_t{4096}}) {
    for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
      CAPTURE(alignment);
      CAPTURE(size);
      Buffer b = must_allocate(device, size, MemoryType::kDeviceLocal, alignment);
      CHECK(b.size == size);
      CHECK(b.device_ptr != 0);
      CHECK(b.device_ptr % alignment == 0);
      device.release(b);
      CHECK(b.device_ptr == 0);
    }
  }
  const auto after = device.counters();
  CHECK(after.allocations - before.allocations == 9);
  CHECK(after.releases - before.releases == 9);
  CHECK(after.bytes_allocated - before.bytes_allocated == 3 * 1001);
  auto bad = device.allocate(16, MemoryType::kDeviceLocal, BufferUsage::kTransient, 3);
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  Buffer empty;
  device.release(empty);  // a released or empty buffer is a no-op
}

HEXIR_CONFORMANCE("host-visible memory is addressable from the host") {
  Buffer b = must_allocate(device, 4096, MemoryType::kHostVisible);
  REQUIRE(b.host_ptr != nullptr);
  std::vector<uint8_t> data = pattern_bytes(4096, 1);
  REQUIRE(device.write(b, 0, data.data(), data.size()).ok());
  CHECK(std::memcmp(b.host_ptr, data.data(), data.size()) == 0);
  std::memset(b.host_ptr, 0x5A, 100);
  std::vector<uint8_t> back = read_all(device, b, 4096);
  CHECK(back[0] == 0x5A);
  CHECK(back[99] == 0x5A);
  CHECK(back[100] == data[100]);
  device.release(b);
}

HEXIR_CONFORMANCE("write and read round trip, offsets, multi-chunk sizes, range errors") {
  for (MemoryType type : {MemoryType::kDeviceLocal, MemoryType::kHostVisible}) {
    for (uint64_t size : {uint64_t{1}, uint64_t{4097}, uint64_t{9} * 1024 * 1024 + 13}) {
      CAPTURE(size);
      Buffer b = must_allocate(device, size + 8, type);
      std::vector<uint8_t> data = pattern_bytes(size, static_cast<uint32_t>(size));
      const auto before = device.counters();
      REQUIRE(device.write(b, 3, data.data(), size).ok());
      std::vector<uint8_t> back(size);
      REQUIRE(device.read(b, 3, back.data(), size).ok());
      CHECK(back == data);
      const auto after = device.counters();
      CHECK(after.uploads - before.uploads == 1);
      CHECK(after.bytes_uploaded - before.bytes_uploaded == size);
      CHECK(after.downloads - before.downloads == 1);
      CHECK(device.write(b, size + 1, data.data(), 8).code() == StatusCode::kInvalidArgument);
      CHECK(device.read(b, 0, back.data(), size + 9).code() == StatusCode::kInvalidArgument);
      CHECK(device.write(b, UINT64_MAX, data.data(), 2).code() == StatusCode::kInvalidArgument);
      CHECK(device.write(b, 0, nullptr, 1).code() == StatusCode::kInvalidArgument);
      device.release(b);
    }
  }
}

HEXIR_CONFORMANCE("fill repeats 1..16-byte patterns and touches nothing else") {
  for (MemoryType type : {MemoryType::kDeviceLocal, MemoryType::kHostVisible}) {
    for (uint32_t pattern_size = 1; pattern_size <= 16; ++pattern_size) {
      for (uint8_t first : {uint8_t{0x00}, uint8_t{0x7E}}) {
        CAPTURE(pattern_size);
        uint8_t pattern[16];
        for (uint32_t i = 0; i < 16; ++i) pattern[i] = static_cast<uint8_t>(first + (first ? i : 0));
        const uint64_t size = pattern_size * 1000;
        Buffer b = must_allocate(device, size + 16, type);
        std::vector<uint8_t> background(size + 16, 0xC3);
        REQUIRE(device.write(b, 0, background.data(), background.size()).ok());
        const uint64_t offset = pattern_size % 2 == 0 ? 2 : 5;  // also misaligned for the wide memsets
        Status s = device.fill(b, offset, size, pattern, pattern_size);
        INFO(s.to_string());
        REQUIRE(s.ok());
        std::vector<uint8_t> back = read_all(device, b, size + 16);
        bool ok = true;
        for (uint64_t i = 0; i < size + 16; ++i) {
          const uint8_t want = i >= offset && i < offset + size ? pattern[(i - offset) % pattern_size] : 0xC3;
          ok = ok && back[i] == want;
        }
        CHECK(ok);
        device.release(b);
      }
    }
  }
  Buffer b = must_allocate(device, 64);
  const uint8_t pattern[17] = {};
  CHECK(device.fill(b, 0, 64, pattern, 0).code() == StatusCode::kInvalidArgument);
  CHECK(device.fill(b, 0, 64, pattern, 17).code() == StatusCode::kInvalidArgument);
  CHECK(device.fill(b, 0, 63, pattern, 2).code() == StatusCode::kInvalidArgument);
  CHECK(device.fill(b, 60, 8, pattern, 4).code() == StatusCode::kInvalidArgument);
  CHECK(device.fill(b, 0, 64, nullptr, 4).code() == StatusCode::kInvalidArgument);
  device.release(b);
}

HEXIR_CONFORMANCE("queue copy between device and host-visible buffers") {
  auto queue = device.create_queue();
  REQUIRE(queue.ok());
  Buffer host = must_allocate(device, 1 << 20, MemoryType::kHostVisible);
  Buffer a = must_allocate(device, 1 << 20);
  Buffer b = must_allocate(device, 1 << 20);
  std::vector<uint8_t> data = pattern_bytes(1 << 20, 9);
  std::memcpy(host.host_ptr, data.data(), data.size());
  REQUIRE((*queue)->copy(a, 0, host, 0, 1 << 20).ok());
  REQUIRE((*queue)->copy(b, 100, a, 200, 5000).ok());
  REQUIRE((*queue)->synchronize().ok());
  CHECK(read_all(device, a, 1 << 20) == data);
  std::vector<uint8_t> got(5000);
  REQUIRE(device.read(b, 100, got.data(), got.size()).ok());
  CHECK(std::memcmp(got.data(), data.data() + 200, 5000) == 0);
  CHECK((*queue)->copy(a, (1 << 20) - 4, b, 0, 8).code() == StatusCode::kInvalidArgument);
  CHECK((*queue)->copy(a, 0, b, (1 << 20) - 4, 8).code() == StatusCode::kInvalidArgument);
  device.release(host);
  device.release(a);
  device.release(b);
}

HEXIR_CONFORMANCE("import_host wraps host memory or says it cannot") {
  std::vector<uint8_t> memory(256, 1);
  auto imported = device.import_host(memory.data(), memory.size(), BufferUsage::kConstant);
  if (imported.ok()) {
    CHECK(imported->host_ptr == memory.data());
    CHECK(imported->imported);
    device.release(*imported);
  } else {
    CHECK(imported.status().code() == StatusCode::kUnimplemented);
  }
}

// --------------------------------------------------------------------------
// Kernels
// --------------------------------------------------------------------------

HEXIR_CONFORMANCE("resolve_kernel: every dispatchable operator on f32, never a view") {
  for (int i = 0; i < hexir::ops::kOpCount; ++i) {
    const auto id = static_cast<hexir::ops::OpId>(i);
    CAPTURE(hexir::ops::op_def(id).name);
    auto handle = device.resolve_kernel(hexir::hal::testing::representative_key(id));
    if (hexir::ops::op_def(id).is_view) {
      CHECK(handle.status().code() == StatusCode::kUnimplemented);
    } else {
      REQUIRE(handle.ok());
      CHECK(*handle != 0);
    }
  }
  CHECK(device.resolve_kernel({hexir::ops::OpId::kMatmul, DType::kI32, DType::kI32}).status().code() ==
        StatusCode::kUnimplemented);
}

HEXIR_CONFORMANCE("every kernel matches the cpu kernels (one dispatch each)") {
  auto queue = device.create_queue();
  REQUIRE(queue.ok());
  for (const KernelCase& c : hexir::hal::conformance::kernel_cases()) {
    CAPTURE(c.name);
    DeviceCase d;
    prepare_case(device, c, d);
    Status s = (*queue)->dispatch(d.dispatch);
    INFO(s.to_string());
    REQUIRE(s.ok());
    REQUIRE((*queue)->synchronize().ok());
    check_case(c, read_results(device, c, d));
    release_case(device, d);
  }
}

HEXIR_CONFORMANCE("every kernel matches the cpu kernels (as sequences, replayed with new data)") {
  for (const KernelCase& original : hexir::hal::conformance::kernel_cases()) {
    CAPTURE(original.name);
    // A queue per case: its graph cache keys on the sequence's storage and
    // bindings, which the next case (freed and reallocated buffers) may repeat.
    auto queue = device.create_queue();
    REQUIRE(queue.ok());
    KernelCase c = original;
    DeviceCase d;
    prepare_case(device, c, d);
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        // Same pointers, new data: a replayed graph must read it.
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          const DType half = c.inputs[i].dtype;
          if (hexir::ops::is_half(half)) c.inputs[i] = hexir::hal::conformance::from_half(c.inputs[i]);
          else if (half != DType::kF32) continue;
          for (int64_t e = 0; e < c.inputs[i].count(); ++e)
            c.inputs[i].at(e) = c.inputs[i].at(e) * 0.5f + 0.25f;
          if (hexir::ops::is_half(half)) c.inputs[i] = hexir::hal::conformance::to_half(c.inputs[i], half);
          REQUIRE(device.write(d.inputs[i], 0, c.inputs[i].bytes.data(), c.inputs[i].bytes.size()).ok());
        }
      }
      size_t failed = 99;
      Status s = (*queue)->dispatch_sequence(std::span(&d.dispatch, 1), d.operands, &failed);
      INFO(s.to_string());
      REQUIRE(s.ok());
      REQUIRE((*queue)->synchronize().ok());
      check_case(c, read_results(device, c, d));
    }
    release_case(device, d);
  }
}

HEXIR_CONFORMANCE("a chained sequence: replays, rebinds pointers, allocates and uploads nothing") {
  // x[8,32] @ w[32,16] + b -> gelu -> softmax, as one sequence.
  HostTensor x = hexir::hal::testing::random_f32({8, 32}, 1),
             w = hexir::hal::testing::random_f32({32, 16}, 2),
             bias = hexir::hal::testing::random_f32({16}, 3);
  auto cpu_chain = [&](const HostTensor& input) {
    HostTensor h(DType::kF32, {8, 16}), p(DType::kF32, {8, 16});
    HostTensor in = input, weights = w, b = bias;
    REQUIRE(hexir::hal::testing::run_kernel(hexir::ops::OpId::kMatmul, {&in, &weights}, h).ok());
    REQUIRE(hexir::hal::testing::run_kernel(hexir::ops::OpId::kAdd, {&h, &b}, h).ok());
    REQUIRE(hexir::hal::testing::run_kernel(hexir::ops::OpId::kGelu, {&h}, h, {0}).ok());
    REQUIRE(hexir::hal::testing::run_kernel(hexir::ops::OpId::kSoftmax, {&h}, p, {1}).ok());
    return p;
  };
  Buffer bx = must_allocate(device, x.bytes.size()), bw = must_allocate(device, w.bytes.size());
  Buffer bb = must_allocate(device, bias.bytes.size()), bh = must_allocate(device, 8 * 16 * 4);
  Buffer out_a = must_allocate(device, 8 * 16 * 4), out_b = must_allocate(device, 8 * 16 * 4);
  REQUIRE(device.write(bx, 0, x.bytes.data(), x.bytes.size()).ok());
  REQUIRE(device.write(bw, 0, w.bytes.data(), w.bytes.size()).ok());
  REQUIRE(device.write(bb, 0, bias.bytes.data(), bias.bytes.size()).ok());
  // Operands per dispatch: matmul(x, w) -> h; add(h, b) -> h; gelu(h) -> h; softmax(h) -> out.
  void* ops[10] = {address(bx), address(bw), address(bh), address(bh), address(bb),
                   address(bh), address(bh), address(bh), address(bh), address(out_a)};
  const hexir::TensorType tx{DType::kF32, {8, 32}}, tw{DType::kF32, {32, 16}}, tb{DType::kF32, {16}},
      th{DType::kF32, {8, 16}};
  const std::vector<hexir::TensorType> inputs_of[4] = {{tx, tw}, {th, tb}, {th}, {th}};
  const std::vector<int64_t> params_of[4] = {{}, {}, {0}, {1}};
  const hexir::ops::OpId ids[] = {hexir::ops::OpId::kMatmul, hexir::ops::OpId::kAdd, hexir::ops::OpId::kGelu,
                                  hexir::ops::OpId::kSoftmax};
  const uint32_t first[] = {0, 3, 6, 8};
  hexir::ops::OpPlan plans[4];
  Dispatch seq[4];
  for (int k = 0; k < 4; ++k) {
    const std::vector<hexir::TensorType> result{th};
    plans[k] = hexir::ops::plan_op(ids[k], inputs_of[k], result, params_of[k]).value();
    seq[k].kernel = *device.resolve_kernel(hexir::ops::kernel_key(ids[k], inputs_of[k], result));
    seq[k].plan = plans[k].words().data();
    seq[k].operands = ops + first[k];
    seq[k].input_count = static_cast<uint32_t>(inputs_of[k].size());
    seq[k].output_count = 1;
  }

  auto queue = device.create_queue();
  REQUIRE(queue.ok());
  const auto before = device.counters();
  const uint64_t dispatched_before = (*queue)->dispatch_count();
  HostTensor current = x;
  for (int round = 0; round < 6; ++round) {
    CAPTURE(round);
    if (round == 2) {  // new input data, same pointers
      current = hexir::hal::testing::random_f32({8, 32}, 77);
      REQUIRE(device.write(bx, 0, current.bytes.data(), current.bytes.size()).ok());
    }
    const bool use_b = round >= 3 && round % 2 == 1;  // rebinding the output alternates two pointer sets
    ops[9] = address(use_b ? out_b : out_a);
    size_t failed = 99;
    Status s = (*queue)->dispatch_sequence(std::span<const Dispatch>(seq, 4), std::span(ops + 9, 1), &failed);
    INFO(s.to_string());
    REQUIRE(s.ok());
    REQUIRE((*queue)->synchronize().ok());
    HostTensor got(DType::kF32, {8, 16});
    REQUIRE(device.read(use_b ? out_b : out_a, 0, got.bytes.data(), got.bytes.size()).ok());
    KernelCase tolerance{"chain", hexir::ops::OpId::kSoftmax, {}, {}};
    tolerance.rtol = 1e-4;
    tolerance.atol = 1e-6;
    hexir::hal::conformance::check_matches(tolerance, got, cpu_chain(current));
  }
  const auto after = device.counters();
  CHECK(after.allocations == before.allocations);
  CHECK(after.uploads - before.uploads == 1);  // the one write of round 2
  CHECK((*queue)->dispatch_count() - dispatched_before == 6 * 4);
  CHECK(after.dispatches - before.dispatches == 6 * 4);
  for (Buffer* b : {&bx, &bw, &bb, &bh, &out_a, &out_b}) device.release(*b);
}

HEXIR_CONFORMANCE("dispatch errors: null handle, failure index in a sequence") {
  auto queue = device.create_queue();
  REQUIRE(queue.ok());
  HostTensor a = hexir::hal::testing::random_f32({4}, 5);
  Buffer ba = must_allocate(device, 16), bo = must_allocate(device, 16);
  REQUIRE(device.write(ba, 0, a.bytes.data(), 16).ok());
  REQUIRE(device.fill(bo, 0, 16, "\0\0\0\0", 4).ok());
  const hexir::TensorType t{DType::kF32, {4}};
  const hexir::ops::OpPlan plan =
      hexir::ops::plan_op(hexir::ops::OpId::kNeg, std::span(&t, 1), std::span(&t, 1), {}).value();
  void* ops[2] = {address(ba), address(bo)};
  Dispatch good;
  good.kernel = *device.resolve_kernel({hexir::ops::OpId::kNeg, DType::kF32, DType::kF32});
  good.plan = plan.words().data();
  good.operands = ops;
  good.input_count = 1;
  good.output_count = 1;
  Dispatch null_handle = good;
  null_handle.kernel = 0;
  CHECK((*queue)->dispatch(null_handle).code() == StatusCode::kInvalidArgument);

  const Dispatch seq[] = {good, good, null_handle, good};
  const uint64_t before = (*queue)->dispatch_count();
  size_t failed = 99;
  Status s = (*queue)->dispatch_sequence(seq, {}, &failed);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(failed == 2);
  CHECK((*queue)->dispatch_count() - before == 3);
  REQUIRE((*queue)->synchronize().ok());
  // The dispatches before the failure ran.
  HostTensor got(DType::kF32, {4});
  REQUIRE(device.read(bo, 0, got.bytes.data(), 16).ok());
  for (int i = 0; i < 4; ++i) CHECK(got.at(i) == -a.at(i));
  device.release(ba);
  device.release(bo);
}

// --------------------------------------------------------------------------
// End to end: the samples through the VM on this device, against the cpu
// --------------------------------------------------------------------------

namespace {

struct SampleRun {
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<DType> dtypes;  // per output
  hexir::vm::PhaseStats invoke_stats;
  hexir::hal::DeviceCounters before, after;
};

// Compiles samples/NAME.hxir, prepares it on `device`, uploads the sample input
// into a device buffer and invokes `invokes` times (alternating context-owned
// and caller-provided device outputs).
// The samples folder: $HEXIR_SAMPLES_DIR when set (a build run from another
// checkout, as scripts/gpu-check.sh may), else the source tree's.
fs::path samples_dir() {
  const char* env = std::getenv("HEXIR_SAMPLES_DIR");
  return env && *env ? fs::path(env) : fs::path(HEXIR_SAMPLES_DIR);
}

SampleRun run_sample(Device& device, const std::string& name, int invokes) {
  SampleRun r;
  auto hxe = hexir::compiler::compile_file(samples_dir() / (name + ".hxir"));
  INFO(hxe.status().to_string());
  REQUIRE(hxe.ok());
  // load_buffer wants 64-byte aligned data sections.
  std::vector<uint8_t> storage(hxe->size() + 64);
  uint8_t* aligned = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  std::memcpy(aligned, hxe->data(), hxe->size());
  auto module = hexir::vm::Module::load_buffer({aligned, hxe->size()});
  INFO(module.status().to_string());
  REQUIRE(module.ok());
  auto program = hexir::vm::Program::prepare(*module, device);
  INFO(program.status().to_string());
  REQUIRE(program.ok());
  auto context = hexir::vm::Context::create(*program);
  INFO(context.status().to_string());
  REQUIRE(context.ok());
  auto main = module->find_function("main");
  REQUIRE(main.ok());
  const auto& sig = module->function(*main);
  REQUIRE(sig.inputs.size() == 1);
  auto input = hexir::read_npy((samples_dir() / name / "input_x.npy").string());
  REQUIRE(input.ok());
  Buffer in = must_allocate(device, input->data.size());
  REQUIRE(device.write(in, 0, input->data.data(), input->data.size()).ok());
  hexir::vm::TensorRef in_ref{address(in), input->data.size(), input->type};
  std::vector<Buffer> out_buffers;
  std::vector<hexir::vm::TensorRef> out_refs;
  for (const auto& o : sig.outputs) {
    out_buffers.push_back(must_allocate(device, o.byte_size));
    out_refs.push_back({address(out_buffers.back()), o.byte_size, o.type});
  }
  r.before = device.counters();
  for (int i = 0; i < invokes; ++i) {
    const bool own = i % 2 == 0;
    Status s = own ? context->invoke(*main, std::span(&in_ref, 1))
                   : context->invoke(*main, std::span(&in_ref, 1), out_refs);
    INFO("invoke ", i, ": ", s.to_string());
    REQUIRE(s.ok());
  }
  r.after = device.counters();
  r.invoke_stats = context->invoke_stats();
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    r.dtypes.push_back(sig.outputs[j].type.dtype);
    std::vector<uint8_t> own(sig.outputs[j].byte_size), provided(sig.outputs[j].byte_size);
    REQUIRE(context->read_output(*main, j, own).ok() == (invokes % 2 == 1));
    REQUIRE(device.read(out_buffers[j], 0, provided.data(), provided.size()).ok());
    r.outputs.push_back(provided);
  }
  device.release(in);
  for (Buffer& b : out_buffers) device.release(b);
  return r;
}

}  // namespace

HEXIR_CONFORMANCE("samples run through the VM and match the cpu; invoke allocates and uploads nothing") {
  auto cpu = hexir::hal::create_device("cpu");
  REQUIRE(cpu.ok());
  for (std::string name : {"mlp", "transformer", "convnet"}) {
    CAPTURE(name);
    SampleRun want = run_sample(**cpu, name, 2);
    SampleRun got = run_sample(device, name, 6);
    CHECK(got.invoke_stats.device_allocations == 0);
    CHECK(got.invoke_stats.uploads == 0);
    CHECK(got.after.allocations == got.before.allocations);
    CHECK(got.after.uploads == got.before.uploads);
    CHECK(got.after.bytes_uploaded == got.before.bytes_uploaded);
    REQUIRE(got.outputs.size() == want.outputs.size());
    for (size_t j = 0; j < want.outputs.size(); ++j) {
      HostTensor g(DType::kF32, {static_cast<int64_t>(got.outputs[j].size() / 4)}), w = g;
      g.bytes = got.outputs[j];
      w.bytes = want.outputs[j];
      KernelCase tolerance{name + " output " + std::to_string(j), hexir::ops::OpId::kAdd, {}, {}};
      tolerance.rtol = 1e-4;
      tolerance.atol = 1e-5;
      tolerance.exact = want.dtypes[j] != DType::kF32;  // integer results match exactly
      hexir::hal::conformance::check_matches(tolerance, g, w);
    }
  }
}

// --------------------------------------------------------------------------
// Device names and a missing driver
// --------------------------------------------------------------------------

TEST_CASE("create_device(\"cuda\") without a usable GPU is kUnavailable with the reason, never a crash") {
  for (std::string name : {"cuda", "cuda:0", "cuda-managed", "cuda-managed:0", "cuda:7"}) {
    CAPTURE(name);
    auto device = hexir::hal::create_device(name);
    if (device.ok()) {
      CHECK((*device)->name().substr(0, 4) == "cuda");
      continue;
    }
    CHECK(device.status().code() == StatusCode::kUnavailable);
    const std::string m = device.status().message();
    INFO(m);
    CHECK((m.rfind("CUDA driver not available", 0) == 0 || m.rfind("CUDA backend not built", 0) == 0 ||
           m.rfind("CUDA device ", 0) == 0));
  }
}

TEST_CASE("list_devices: cpu first, then cuda devices or the reason there are none") {
  auto devices = hexir::hal::list_devices();
  REQUIRE(devices.size() >= 2);
  CHECK(devices[0].name == "cpu");
  CHECK(devices[0].available);
  for (size_t i = 1; i < devices.size(); ++i) {
    CAPTURE(devices[i].name);
    CHECK(devices[i].name.rfind("cuda", 0) == 0);
    CHECK(!devices[i].details.empty());
  }
  if (!devices[1].available) {
    CHECK(devices[1].name == "cuda");
    CHECK((devices[1].details.rfind("CUDA driver not available", 0) == 0 ||
           devices[1].details.rfind("CUDA backend not built", 0) == 0 ||
           devices[1].details == "no CUDA devices"));
  }
}

TEST_CASE("cuda device names: options are checked") {
  auto bad = hexir::hal::create_device("cuda?graphs=maybe");
  REQUIRE(!bad.ok());
#ifdef HEXIR_HAVE_CUDA
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(hexir::hal::create_device("cuda:0?speed=fast").status().code() == StatusCode::kInvalidArgument);
  auto twice = hexir::hal::create_device("cuda?graphs=on&cublas=off&graphs=off");
  REQUIRE(!twice.ok());
  CHECK(twice.status().code() == StatusCode::kInvalidArgument);
  CHECK(twice.status().message().find("option 'graphs' given twice") != std::string::npos);
#else
  CHECK(bad.status().code() == StatusCode::kUnavailable);
#endif
  CHECK(hexir::hal::create_device("cuda:x?graphs=off").status().code() == StatusCode::kInvalidArgument);
}

#ifdef HEXIR_HAVE_CUDA
TEST_CASE("cuda driver loading: a missing library and the toolkit's stub are kUnavailable") {
  auto missing = hexir::hal::cuda::load_driver("libhexir-no-such-driver.so.1");
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kUnavailable);
  CHECK(missing.status().message().rfind("CUDA driver not available: ", 0) == 0);
  const std::string stub = std::string(HEXIR_CUDA_LIB_DIR) + "/stubs/libcuda.so";
  if (!fs::exists(stub)) {
    std::printf("HEXIR_SKIP: no CUDA stub library at %s\n", stub.c_str());
    return;
  }
  auto stubbed = hexir::hal::cuda::load_driver(stub.c_str());
  REQUIRE(!stubbed.ok());
  CHECK(stubbed.status().code() == StatusCode::kUnavailable);
  CHECK(stubbed.status().message().rfind("CUDA driver not available: ", 0) == 0);
  CHECK(stubbed.status().message().find("STUB_LIBRARY") != std::string::npos);
}

TEST_CASE("cuBLAS: the toolkit's libcublas loads and has every entry point used") {
  const std::string path = std::string(HEXIR_CUDA_LIB_DIR) + "/libcublas.so.13";
  if (!fs::exists(path)) {
    std::printf("HEXIR_SKIP: no cuBLAS at %s\n", path.c_str());
    return;
  }
  auto blas = hexir::hal::cuda::blas_library();
  INFO(blas.status().to_string());
  REQUIRE(blas.ok());
  CHECK(((*blas)->sgemm != nullptr));
  CHECK(((*blas)->sgemm_strided_batched != nullptr));
  CHECK(((*blas)->set_workspace != nullptr));
}
#endif

// The widening kernels (ops/widen.h) against an independent composition: the
// f32 kernel on the half operands' exact f32 values, its results rounded to
// half once. Bit for bit: the same f32 kernel runs on the same floats.
TEST_CASE("f16 and bf16 operands: the f32 kernel's results, rounded once") {
  namespace conf = hexir::hal::conformance;
  int checked = 0;
  for (const KernelCase& half_case : conf::kernel_cases()) {
    bool any_half = false;
    for (const HostTensor& t : half_case.inputs) any_half = any_half || hexir::ops::is_half(t.dtype);
    if (!any_half || !hexir::ops::widens_halves(half_case.id)) continue;
    KernelCase f32_case = half_case;
    for (HostTensor& t : f32_case.inputs)
      if (hexir::ops::is_half(t.dtype)) t = conf::from_half(t);
    const std::vector<HostTensor> got = conf::cpu_reference(half_case);
    const std::vector<HostTensor> wide = conf::cpu_reference(f32_case);
    REQUIRE(got.size() == wide.size());
    for (size_t j = 0; j < got.size(); ++j) {
      INFO(half_case.name, " result ", j);
      const HostTensor want = hexir::ops::is_half(got[j].dtype) ? conf::to_half(wide[j], got[j].dtype) : wide[j];
      CHECK(got[j].bytes == want.bytes);
    }
    ++checked;
  }
  CHECK(checked > 100);
}
