// The verifier on strided views (docs/views.md): a view must stay inside its
// base over its whole index space (overflow-safe), is never written, never
// taken over in place, and read strided only by kernels that take strides.
#include <cstdint>
#include <functional>

#include "verify_expect.h"

namespace hexir::testing {
namespace {

// func @main(%x: f32[2,3]) -> (f32[3,2]) {
//   %a = relu(%x)                  // arena
//   %t = a viewed transposed       // view of %a, strides [1, 3]
//   %y = exp(%t)                   // output 0
// }
ModuleSpec transposed_view_spec() {
  ModuleSpec m;
  m.name = "views";
  m.kernels = {"relu", "exp", "softmax"};
  m.slots = {
      {"x", fb::DType::F32, {2, 3}, 24, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"a", fb::DType::F32, {2, 3}, 24, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"t", fb::DType::F32, {3, 2}, 24, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0, 1, -1, 0, {1, 3}},
      {"y", fb::DType::F32, {3, 2}, 24, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 2, 3};
  m.instructions = {
      {0, 0, 2, 1, 0, 0, 0, 0},
      {1, 2, 2, 1, 0, 0, 0, 0},
  };
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 2, 64, 24});
  m.arena_size = 64;
  m.arena_lower_bound = 24;
  return m;
}

void expect_view_rejected(const std::function<void(ModuleSpec&)>& mutate, const std::string& needle) {
  ModuleSpec spec = transposed_view_spec();
  mutate(spec);
  expect_rejected(spec, needle);
}

TEST_CASE("views: a transposed view inside its base verifies; offsets and broadcasts too") {
  expect_ok(transposed_view_spec());
  ModuleSpec sliced = transposed_view_spec();  // the last column's 2 elements, broadcast to [3,2]
  sliced.slots[2].view_offset = 2;
  sliced.slots[2].strides = {0, 3};
  expect_ok(sliced);
  ModuleSpec contiguous = transposed_view_spec();  // the second row as [1,3] ... read as [3,1]? no: [3] rows
  contiguous.slots[2].shape = {1, 3};
  contiguous.slots[2].byte_size = 12;
  contiguous.slots[2].view_offset = 3;
  contiguous.slots[2].strides = {};
  contiguous.slots[3].shape = {1, 3};
  contiguous.slots[3].byte_size = 12;
  expect_ok(contiguous);
}

TEST_CASE("views: a view reaching past its base is refused, overflowing strides too") {
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].strides = {1, 4}; }, "view reaches element 6");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].view_offset = 1; }, "view reaches element 6");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].strides = {INT64_MAX / 2 + 1, 1}; }, "overflow");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].strides = {INT64_MAX, INT64_MAX}; }, "overflow");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].view_offset = INT64_MAX; }, "overflow");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].strides = {-1, 3}; }, "negative");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].view_offset = -1; }, "negative");
  expect_view_rejected([](ModuleSpec& m) { m.slots[2].strides = {1, 3, 1}; }, "3 strides for a view of rank 2");
  expect_view_rejected(
      [](ModuleSpec& m) {
        m.slots[2].strides = {};
        m.slots[2].view_offset = 1;  // row-major from element 1: reaches element 6
      },
      "view reaches element 6");
  expect_view_rejected(
      [](ModuleSpec& m) {
        m.slots[2].dtype = fb::DType::I32;
        m.kernels[1] = "relu";  // any reader; the dtype is refused first
      },
      "must have its dtype");
  expect_view_rejected([](ModuleSpec& m) { m.slots[1].strides = {3, 1}; }, "views nothing");
}

TEST_CASE("views: an empty view reaches nothing") {
  ModuleSpec spec = transposed_view_spec();
  spec.slots[2].shape = {0, 2};
  spec.slots[2].byte_size = 0;
  spec.slots[2].view_offset = 5;
  spec.slots[2].strides = {100, 100};
  spec.slots[3].shape = {0, 2};
  spec.slots[3].byte_size = 0;
  expect_ok(spec);
}

TEST_CASE("views: never written, never in place, read strided only where a kernel takes strides") {
  // relu writing into the view.
  expect_view_rejected(
      [](ModuleSpec& m) {
        m.operand_pool = {0, 1, 1, 2};
        m.instructions[1] = {0, 2, 2, 1, 0, 0, 0, 0};
        m.slots[2].shape = {2, 3};
        m.slots[2].strides = {1, 2};
        m.slots[2].view_offset = 0;
      },
      "views are never written");
  // exp in place over its strided input: the output takes a's storage.
  expect_view_rejected(
      [](ModuleSpec& m) {
        m.slots.push_back({"e", fb::DType::F32, {3, 2}, 24, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0});
        m.operand_pool = {0, 1, 2, 4, 4, 3};
        m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 2, 1, 0, 0, 0b1, 0}, {0, 4, 2, 1, 0, 0, 0, 0}};
        m.functions[0].instruction_count = 3;
      },
      "a view with an offset or strides (never written in place)");
  // softmax reads its input row-major only.
  expect_view_rejected(
      [](ModuleSpec& m) {
        m.param_pool = {1};
        m.instructions[1] = {2, 2, 2, 1, 0, 1, 0, 0};
      },
      "is a strided view but 'softmax' reads it only row-major");
}

}  // namespace
}  // namespace hexir::testing
