// Host offload in the VM (docs/memory-budget.md): the copies go to the queue
// as copy_begin with a fence each, and the queue is told to wait for a copy
// right before the first instruction that needs it done (a prefetch's
// reader, the first writer over an eviction's source) and at the end of the
// invoke; nothing is allocated per invoke, on the heap or the device. A
// recording queue over the cpu device's shows the order: a CUDA queue (copy
// stream and events) gets the same calls.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "budget_programs.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace hexir {
namespace {

// @far (budget_programs.h): %a is too far from %x to recompute: under two
// 16 KiB values it is evicted after its writer and prefetched before the add.
const std::string& kFar = testing::kFarProgram;

// 64-byte aligned owned copy (load_buffer needs it).
struct Aligned {
  std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
  size_t size = 0;
  explicit Aligned(const std::vector<uint8_t>& bytes) : size(bytes.size()) {
    data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    std::memcpy(data.get(), bytes.data(), size);
  }
  std::span<const uint8_t> span() const { return {data.get(), size}; }
};

// Records what the VM asks of the queue (into storage reserved up front: the
// recording itself allocates nothing), and does it with the cpu queue.
class RecordingQueue final : public hal::Queue {
 public:
  RecordingQueue(std::unique_ptr<hal::Queue> inner, std::vector<std::string>* log) : inner_(std::move(inner)), log_(log) {}
  Status dispatch(const hal::Dispatch& d) override {
    log_->emplace_back("dispatch");
    return inner_->dispatch(d);
  }
  Status dispatch_sequence(std::span<const hal::Dispatch> sequence, std::span<void* const> bindings,
                           size_t* failed_index) override {
    log_->emplace_back("run " + std::to_string(sequence.size()));
    return inner_->dispatch_sequence(sequence, bindings, failed_index);
  }
  Status copy(const hal::Buffer& dst, uint64_t dst_offset, const hal::Buffer& src, uint64_t src_offset,
              uint64_t size) override {
    log_->emplace_back("copy");
    return inner_->copy(dst, dst_offset, src, src_offset, size);
  }
  Status reserve_copy_fences(uint32_t count) override {
    log_->emplace_back("reserve " + std::to_string(count));
    return ok_status();
  }
  Status copy_begin(const hal::Buffer& dst, uint64_t dst_offset, const hal::Buffer& src, uint64_t src_offset,
                    uint64_t size, uint32_t fence) override {
    log_->emplace_back(std::string(dst.memory_type == hal::MemoryType::kHostVisible ? "evict " : "prefetch ") +
                       std::to_string(fence));
    return inner_->copy(dst, dst_offset, src, src_offset, size);
  }
  Status copy_wait(uint32_t fence) override {
    log_->emplace_back("wait " + std::to_string(fence));
    return ok_status();
  }
  Status synchronize() override { return inner_->synchronize(); }
  uint64_t dispatch_count() const override { return inner_->dispatch_count(); }

 private:
  std::unique_ptr<hal::Queue> inner_;
  std::vector<std::string>* log_;
};

// The cpu device, whose queues record.
class RecordingDevice final : public hal::Device {
 public:
  RecordingDevice(std::unique_ptr<hal::Device> inner, std::vector<std::string>* log)
      : inner_(std::move(inner)), log_(log) {}
  std::string_view name() const override { return inner_->name(); }
  Result<hal::Buffer> allocate(uint64_t size, hal::MemoryType type, hal::BufferUsage usage,
                               uint64_t alignment) override {
    Result<hal::Buffer> buffer = inner_->allocate(size, type, usage, alignment);
    if (buffer.ok()) buffer->memory_type = type;  // the cpu's buffers are all host memory; keep the space asked for
    return buffer;
  }
  void release(hal::Buffer& buffer) override { inner_->release(buffer); }
  Result<hal::Buffer> import_host(void* host_ptr, uint64_t size, hal::BufferUsage usage) override {
    return inner_->import_host(host_ptr, size, usage);
  }
  Status write(const hal::Buffer& dst, uint64_t offset, const void* src, uint64_t size) override {
    return inner_->write(dst, offset, src, size);
  }
  Status read(const hal::Buffer& src, uint64_t offset, void* dst, uint64_t size) override {
    return inner_->read(src, offset, dst, size);
  }
  Status fill(const hal::Buffer& dst, uint64_t offset, uint64_t size, const void* pattern,
              uint32_t pattern_size) override {
    return inner_->fill(dst, offset, size, pattern, pattern_size);
  }
  Result<uintptr_t> resolve_kernel(const ops::KernelKey& key) override { return inner_->resolve_kernel(key); }
  Result<hal::Buffer> prepare_dispatch(const hal::Dispatch& dispatch, uint32_t* replaced_inputs) override {
    return inner_->prepare_dispatch(dispatch, replaced_inputs);
  }
  Result<std::unique_ptr<hal::Queue>> create_queue() override {
    HEXIR_ASSIGN_OR_RETURN(std::unique_ptr<hal::Queue> queue, inner_->create_queue());
    return std::unique_ptr<hal::Queue>(std::make_unique<RecordingQueue>(std::move(queue), log_));
  }
  hal::DeviceCounters counters() const override { return inner_->counters(); }

 private:
  std::unique_ptr<hal::Device> inner_;
  std::vector<std::string>* log_;
};

}  // namespace

TEST_CASE("offload: the VM begins each copy with a fence and waits for it right before it is needed") {
  compiler::CompileOptions options;
  options.device_budget = 2 * 64 * 64 * 4;
  auto bytes = compiler::compile_source(kFar, "far.hxir", ".", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  const Aligned file(*bytes);
  auto module = vm::Module::load_buffer(file.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  REQUIRE(module->host_arena_bytes() == 64 * 64 * 4);
  std::vector<std::string> log;
  log.reserve(256);
  auto cpu = hal::create_device("cpu?threads=1");
  REQUIRE(cpu.ok());
  RecordingDevice device(std::move(*cpu), &log);
  auto program = vm::Program::prepare(*module, device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  auto context = vm::Context::create(*program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  CHECK(context->host_bytes() == 64 * 64 * 4);
  REQUIRE(log == std::vector<std::string>{"reserve 2"});
  std::vector<float> x(64 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) / 8.0f - 0.3f;
  const vm::TensorRef in{x.data(), x.size() * 4, {DType::kF32, {64, 64}}};
  REQUIRE(context->invoke(size_t{0}, {&in, 1}).ok());  // warm up
  log.clear();
  const uint64_t heap_before = testing::thread_allocation_count();
  REQUIRE(context->invoke(size_t{0}, {&in, 1}).ok());
  CHECK(testing::thread_allocation_count() - heap_before == 0);
  CHECK(context->invoke_stats().device_allocations == 0);
  // Program: a0..a (6), evict, p, q, r, prefetch, add. %p is written over
  // %a's bytes (the arena reuses them), so the eviction must be done before
  // it; the prefetch before the add reading its copy; the last at the end.
  const std::vector<std::string> expected = {"run 6", "evict 0", "wait 0",   "run 3", "prefetch 1",
                                             "wait 1", "run 1",  "wait 1"};
  CHECK(log == expected);
  // The same bits as without a budget.
  auto free_bytes = compiler::compile_source(kFar, "far.hxir", ".", {});
  REQUIRE(free_bytes.ok());
  const Aligned free_file(*free_bytes);
  auto free_module = vm::Module::load_buffer(free_file.span());
  REQUIRE(free_module.ok());
  auto free_device = hal::create_device("cpu?threads=1");
  REQUIRE(free_device.ok());
  auto free_program = vm::Program::prepare(*free_module, **free_device);
  REQUIRE(free_program.ok());
  auto free_context = vm::Context::create(*free_program);
  REQUIRE(free_context.ok());
  REQUIRE(free_context->invoke(size_t{0}, {&in, 1}).ok());
  std::vector<uint8_t> got(64 * 64 * 4), want(64 * 64 * 4);
  REQUIRE(context->read_output(0, 0, got).ok());
  REQUIRE(free_context->read_output(0, 0, want).ok());
  CHECK(got == want);
}

}  // namespace hexir
