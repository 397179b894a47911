// The VM under the memory plans: free-at-last-use allocates each value per
// invoke (and counts it), in-place results take their input's buffer over,
// scratch reaches the kernel from the shared workspace or an arena range.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <memory>
#include <string>

#include "alloc_counter.h"
#include "hexir/vm.h"
#include "hxe_test_builder.h"
#include "vm_impl.h"

namespace hexir::vm {
namespace {

using hexir::testing::AlignedBytes;
using hexir::testing::ModuleSpec;
using hexir::testing::tiny_expected;
using hexir::testing::tiny_module_spec;
using hexir::testing::write_hxe;

struct Loaded {
  AlignedBytes bytes;
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<Module> module;
  std::unique_ptr<Program> program;
};

std::unique_ptr<Loaded> load(const ModuleSpec& spec) {
  auto l = std::make_unique<Loaded>();
  l->bytes = write_hxe(spec);
  Result<std::unique_ptr<hal::Device>> device = hal::create_device("cpu");
  REQUIRE(device.ok());
  l->device = std::move(device).value();
  Result<Module> module = Module::load_buffer(l->bytes.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  l->module = std::make_unique<Module>(std::move(module).value());
  Result<Program> program = Program::prepare(*l->module, *l->device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  l->program = std::make_unique<Program>(std::move(program).value());
  return l;
}

ModuleSpec free_at_last_use_tiny() {
  ModuleSpec m = tiny_module_spec();
  m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  m.arena_size = 0;
  m.functions[0].arena_size = 0;
  m.slots[3].last_use = 1;
  m.slots[4].last_use = 2;
  return m;
}

TEST_CASE("free-at-last-use: values are allocated per invoke and released after their last use") {
  auto l = load(free_at_last_use_tiny());
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  CHECK(context->impl().arena.size == 0);  // no static arena
  const uint64_t before = l->device->counters().allocations - l->device->counters().releases;
  const TensorType type{DType::kF32, {1, 4}};
  for (int round = 0; round < 3; ++round) {
    std::array<float, 4> x{1, -2, 3, -4}, y{};
    TensorRef in{x.data(), 16, type}, out{y.data(), 16, type};
    REQUIRE(context->invoke(0, {&in, 1}, {&out, 1}).ok());
    for (size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(tiny_expected(x[i], i)));
  }
  // h is allocated; h2 takes h's buffer over in place (alias bit): one allocation per invoke.
  CHECK(context->invoke_stats().device_allocations == 3);
  CHECK(context->invoke_stats().peak_live_bytes == 16);
  CHECK(context->impl().dynamic->live_bytes() == 0);
  CHECK(l->device->counters().allocations - l->device->counters().releases == before);  // nothing leaked
}

TEST_CASE("free-at-last-use: an unknown opcode is an error, and what was held is released") {
  auto l = load(free_at_last_use_tiny());
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  // Written past the const view of impl(): what a corrupted table would hold.
  FunctionTable& t = const_cast<ContextImpl&>(context->impl()).functions[0];
  REQUIRE(t.dispatches.size() == 3);
  t.opcode = {fb::Opcode::Dispatch, static_cast<fb::Opcode>(99), fb::Opcode::Dispatch};
  t.target.assign(3, 0);
  t.step.assign(3, 0);
  const uint64_t before = l->device->counters().allocations - l->device->counters().releases;
  const TensorType type{DType::kF32, {1, 4}};
  std::array<float, 4> x{1, 2, 3, 4}, y{};
  TensorRef in{x.data(), 16, type}, out{y.data(), 16, type};
  Status status = context->invoke(0, {&in, 1}, {&out, 1});
  CHECK(status.code() == StatusCode::kInternal);
  CHECK(status.to_string().find("opcode 99") != std::string::npos);
  CHECK(context->impl().dynamic->live_bytes() == 0);
  CHECK(l->device->counters().allocations - l->device->counters().releases == before);  // nothing leaked
}

TEST_CASE("free-at-last-use: without the alias each value gets its own buffer") {
  ModuleSpec m = free_at_last_use_tiny();
  m.instructions[1].alias_mask = 0;
  auto l = load(m);
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  const TensorType type{DType::kF32, {1, 4}};
  std::array<float, 4> x{1, 2, 3, 4}, y{};
  TensorRef in{x.data(), 16, type}, out{y.data(), 16, type};
  REQUIRE(context->invoke(0, {&in, 1}, {&out, 1}).ok());
  for (size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(tiny_expected(x[i], i)));
  CHECK(context->invoke_stats().device_allocations == 2);
  CHECK(context->invoke_stats().peak_live_bytes == 32);  // h and h2 live together at mul
}

TEST_CASE("static plans: the peak stays 0 and invokes allocate nothing") {
  auto l = load(tiny_module_spec());
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  const TensorType type{DType::kF32, {1, 4}};
  std::array<float, 4> x{1, 2, 3, 4}, y{};
  TensorRef in{x.data(), 16, type}, out{y.data(), 16, type};
  REQUIRE(context->invoke(0, {&in, 1}, {&out, 1}).ok());
  CHECK(context->invoke_stats().device_allocations == 0);
  CHECK(context->invoke_stats().peak_live_bytes == 0);
}

// `count` functions f0, f1, ..., each y = relu(relu(x)) through one
// free-at-last-use value h: three slots and two instructions per function.
ModuleSpec many_functions(uint32_t count) {
  ModuleSpec m;
  m.kernels = {"relu"};
  m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  for (uint32_t f = 0; f < count; ++f) {
    const auto x = static_cast<uint32_t>(m.slots.size());
    m.slots.push_back({"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0});
    m.slots.push_back({"h", fb::DType::F32, {4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0, -1, 1});
    m.slots.push_back({"y", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0});
    const auto operands = static_cast<uint32_t>(m.operand_pool.size());
    m.operand_pool.insert(m.operand_pool.end(), {x, x + 1, x + 1, x + 2});
    m.instructions.push_back({0, operands, 2, 1, 0, 0, 0, 0});
    m.instructions.push_back({0, operands + 2, 2, 1, 0, 0, 0, 0});
    m.functions.push_back({"f" + std::to_string(f), {{"x", x, -1}}, {{"0", x + 2, -1}}, 2 * f, 2, 0, 16});
  }
  return m;
}

// Context::create numbers each function's values; it must not pay for every
// slot of the module per function (O(functions x slots)). Measured by what
// it allocates in all: twice the functions (and slots), about twice the bytes.
TEST_CASE("free-at-last-use: Context::create is linear in the functions and slots") {
  auto created_bytes = [](uint32_t count) {
    auto l = load(many_functions(count));
    const uint64_t before = testing::thread_allocated_bytes();
    Result<Context> context = Context::create(*l->program);
    REQUIRE_MESSAGE(context.ok(), context.status().to_string());
    const uint64_t bytes = testing::thread_allocated_bytes() - before;
    // Each function runs: relu(relu(x)).
    std::array<float, 4> x{1, -2, 3, -4}, y{};
    const TensorType type{DType::kF32, {4}};
    TensorRef in{x.data(), 16, type}, out{y.data(), 16, type};
    REQUIRE(context->invoke(count - 1, {&in, 1}, {&out, 1}).ok());
    CHECK(y[2] == 3.0f);
    CHECK(y[1] == 0.0f);
    return bytes;
  };
  const uint64_t small = created_bytes(1000);
  const uint64_t large = created_bytes(2000);
  CAPTURE(small);
  CAPTURE(large);
  if (small == 0) return;  // ThreadSanitizer: operator new is its own, nothing is counted
  CHECK(large < small * 5 / 2);  // quadratic: about 4x
}

// softmax over axis 0 of f32[3,4] -> y, with its scratch as an arena range.
ModuleSpec softmax_axis0(bool in_arena, bool dynamic) {
  ModuleSpec m;
  m.kernels = {"softmax"};
  m.slots = {
      {"x", fb::DType::F32, {3, 4}, 48, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"y", fb::DType::F32, {3, 4}, 48, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1};
  m.param_pool = {0};
  m.instructions = {{0, 0, 2, 1, 0, 1, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 1, -1}}, 0, 1, 0, 0});
  if (dynamic) {
    m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  } else if (in_arena) {
    m.arena_size = 128;
    m.functions[0].arena_size = 128;
    m.workspaces = {fb::WorkspaceRange(64, 48)};
  } else {
    m.workspace_size = 48;
  }
  return m;
}

TEST_CASE("workspace: softmax over a non-last axis gets its scratch under every plan, same results") {
  const std::array<float, 12> x{0.5f, -1, 2, 3, 1, 1, -2, 0.25f, -0.5f, 4, 0, 1};
  std::array<float, 12> reference{};
  for (int i = 0; i < 4; ++i) {
    double sum = 0;
    float m = -INFINITY;
    for (int j = 0; j < 3; ++j) m = std::fmax(m, x[j * 4 + i]);
    for (int j = 0; j < 3; ++j) sum += std::exp(x[j * 4 + i] - m);
    for (int j = 0; j < 3; ++j) reference[j * 4 + i] = static_cast<float>(std::exp(x[j * 4 + i] - m) / sum);
  }
  const TensorType type{DType::kF32, {3, 4}};
  for (auto [in_arena_, dynamic_] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    const bool in_arena = in_arena_, dynamic = dynamic_;  // clang 14 cannot capture structured bindings (CAPTURE)
    CAPTURE(in_arena);
    CAPTURE(dynamic);
    auto l = load(softmax_axis0(in_arena, dynamic));
    Result<Context> context = Context::create(*l->program);
    REQUIRE(context.ok());
    const hal::Dispatch& d = context->impl().functions[0].dispatches[0];
    if (dynamic) {
      CHECK(d.workspace == nullptr);  // allocated around the dispatch
    } else {
      CHECK(d.workspace_size == 48);
      CHECK(d.workspace != nullptr);
      if (in_arena) CHECK(d.workspace == device_address(context->impl().arena, 64));
    }
    std::array<float, 12> in = x, out{};
    TensorRef input{in.data(), 48, type}, output{out.data(), 48, type};
    REQUIRE(context->invoke(0, {&input, 1}, {&output, 1}).ok());
    for (size_t i = 0; i < 12; ++i) CHECK(out[i] == doctest::Approx(reference[i]).epsilon(1e-6));
    CHECK(context->invoke_stats().device_allocations == (dynamic ? 1u : 0u));
    CHECK(context->invoke_stats().peak_live_bytes == (dynamic ? 48u : 0u));
  }
}

}  // namespace
}  // namespace hexir::vm
