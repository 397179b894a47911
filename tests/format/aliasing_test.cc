// The verifier's aliasing, view, read-only, free-at-last-use and workspace
// rules against hand-built files: each illegal alias bit or write is rejected
// with a message naming it; the legal variants are accepted.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "hexir/format/verifier.h"
#include "hxe_test_builder.h"
#include "verify_expect.h"

namespace hexir::format {
namespace {

using testing::AlignedBytes;
using testing::ModuleSpec;
using testing::tiny_module_spec;
using testing::write_hxe;
using testing::verify_spec;
using testing::expect_ok;
using testing::expect_rejected;

// The tiny module (see hxe_test_builder.h): slots x(0) b(1) s(2) h(3) h2(4) y(5);
// add(x, b) -> h; mul(h, s) -> h2 in place over h; relu(h2) -> y.

void expect_rejected(const std::function<void(ModuleSpec&)>& mutate, const std::string& needle) {
  ModuleSpec spec = tiny_module_spec();
  mutate(spec);
  expect_rejected(spec, needle);
}

TEST_CASE("alias: the tiny module's in-place mul is legal") { expect_ok(tiny_module_spec()); }

TEST_CASE("alias: never over a value a later instruction reads") {
  expect_rejected([](ModuleSpec& m) { m.operand_pool[6] = 3; },  // relu reads h after mul overwrote it
                  "instruction 1 (function 'main'): alias bit 0 overwrites slot 3 ('h'), which instruction 2 "
                  "still reads");
}

TEST_CASE("alias: never over a value a later view of it reads") {
  expect_rejected(
      [](ModuleSpec& m) {
        testing::SlotSpec view{
            "hv", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0};
        view.view_of = 3;
        m.slots.push_back(view);
        m.operand_pool[6] = 6;  // relu reads the view of h
      },
      "alias bit 0 overwrites slot 3 ('h'), which instruction 2 still reads");
}

TEST_CASE("alias: never over a constant") {
  expect_rejected(
      [](ModuleSpec& m) { m.instructions[1].alias_mask = 0b11; },
      "alias bit 1 set but the output slot 4 ('h2') does not share the storage of input slot 2 ('s')");
  // Writing the constant's storage is read-only whatever the bits say.
  expect_rejected(
      [](ModuleSpec& m) {
        m.operand_pool[5] = 2;
        m.instructions[1].alias_mask = 0b10;
      },
      "read-only");
}

// add writes its result into x's buffer with an alias bit; mul reads it.
ModuleSpec add_in_place_over_x(bool donated) {
  ModuleSpec m = tiny_module_spec();
  m.slots.push_back({"x2", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0});
  m.slots[0].usage = donated ? fb::SlotUsage::Donated : fb::SlotUsage::ExternalInput;
  m.operand_pool[2] = 6;
  m.operand_pool[3] = 6;
  m.instructions[0].alias_mask = 0b1;
  m.instructions[1].alias_mask = 0;
  m.slots[4].arena_offset = 0;
  m.functions[0].inputs[0].donated_to = donated ? 0 : -1;
  return m;
}

TEST_CASE("alias: never over a non-donated input; a donated one is legal") {
  expect_rejected(add_in_place_over_x(false), "which is not donated");
  expect_ok(add_in_place_over_x(true));
  ModuleSpec later = add_in_place_over_x(true);
  later.operand_pool[6] = 0;  // relu reads x after add overwrote it
  expect_rejected(later, "alias bit 0 overwrites slot 0 ('x'), which instruction 2 still reads");
}

TEST_CASE("alias: never over the value of a function output") {
  ModuleSpec m = tiny_module_spec();
  m.kernels.push_back("exp");
  m.slots.push_back(
      {"y2", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0});
  m.operand_pool.insert(m.operand_pool.end(), {5, 6});
  m.instructions.push_back({3, 8, 2, 1, 0, 0, 0b1, 0});
  m.functions[0].instruction_count = 4;
  expect_rejected(m, "alias bit 0 overwrites slot 5 ('y'), the value of output 0");
  // The result that IS the output may take the buffer over.
  m.functions[0].outputs[0].slot = 6;
  expect_ok(m);
  // And without the bit the write is an overlap.
  m.instructions[3].alias_mask = 0;
  expect_rejected(m, "overlaps input 0 slot 5 ('y') without an alias bit");
}

// reduce_sum(x) -> r (4 bytes at 0); add(r, x) -> z (16 bytes at 0); relu(z) -> y.
ModuleSpec mismatched_sizes() {
  ModuleSpec m = tiny_module_spec();
  m.kernels = {"reduce_sum", "add", "relu"};
  m.slots = {
      {"x", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"r", fb::DType::F32, {1, 1}, 4, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"z", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"y", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 1, 0, 2, 2, 3};
  m.param_pool = {1, 1};
  m.instructions = {{0, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 3, 2, 0, 0, 0b1, 0}, {2, 5, 2, 1, 0, 0, 0, 0}};
  m.functions[0].outputs[0].slot = 3;
  m.sections.clear();
  m.constants.clear();
  return m;
}

TEST_CASE("alias: never into an input of another byte size") {
  ModuleSpec m = mismatched_sizes();
  expect_rejected(
      m, "alias bit 0 set but the output slot 2 ('z') does not share the storage of input slot 1 ('r')");
  m.instructions[1].alias_mask = 0;
  expect_rejected(m, "overlaps input 0 slot 1 ('r') without an alias bit");
  m.slots[2].arena_offset = 64;
  m.arena_size = 128;
  expect_ok(m);
}

TEST_CASE("alias: only kernels that may run in place") {
  expect_rejected([](ModuleSpec& m) { m.instructions[0].alias_mask = 0b1; }, "does not share");
  expect_rejected(
      [](ModuleSpec& m) {
        m.kernels[1] = "matmul";
        m.slots[2].shape = {4, 4};
        m.slots[2].byte_size = 64;
        m.constants[1].shape = {4, 4};
        m.constants[1].byte_size = 64;
        m.constants[1].fill_count = 16;
      },
      "alias bit 0 set but 'matmul' cannot run in place");
}

TEST_CASE("writes into a donated buffer wait for the last read of the input") {
  ModuleSpec m = tiny_module_spec();
  m.slots[0].usage = fb::SlotUsage::Donated;
  m.slots.push_back({"xw", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0});
  m.functions[0].inputs[0].donated_to = 0;
  m.instructions[1].alias_mask = 0;
  m.operand_pool[5] = 6;  // mul writes x's buffer ...
  m.operand_pool[6] = 0;  // ... that relu still reads
  expect_rejected(m, "writes the input buffer 0 while slot 0 ('x') in it is still read by instruction 2");
  m.operand_pool[6] = 6;  // relu reads the new value instead
  expect_ok(m);
}

TEST_CASE("values are written before they are read") {
  expect_rejected([](ModuleSpec& m) { m.operand_pool[2] = 4; },
                  "input 0 slot 3 ('h') is read before any instruction writes it");
}

TEST_CASE("views: checked against the value they view") {
  auto with_view = [](int32_t view_of, fb::StorageKind storage, uint64_t offset) {
    ModuleSpec m = tiny_module_spec();
    testing::SlotSpec view{"v", fb::DType::F32, {4}, 16, storage, fb::SlotUsage::Transient, offset, 0};
    view.view_of = view_of;
    m.slots.push_back(view);
    return m;
  };
  expect_ok(with_view(3, fb::StorageKind::Arena, 0));
  expect_rejected(with_view(6, fb::StorageKind::Arena, 0), "view_of 6 is not another slot");
  expect_rejected(with_view(60, fb::StorageKind::Arena, 0), "view_of 60 is not another slot");
  expect_rejected(with_view(-5, fb::StorageKind::Arena, 0), "view_of -5 is not another slot");
  expect_rejected(with_view(1, fb::StorageKind::Arena, 0), "does not have its storage");
  ModuleSpec chain = with_view(3, fb::StorageKind::Arena, 0);
  testing::SlotSpec second{
      "w", fb::DType::F32, {2, 2}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0};
  second.view_of = 6;
  chain.slots.push_back(second);
  expect_rejected(chain, "itself a view");
  // A view is never an instruction's output.
  ModuleSpec written = tiny_module_spec();
  written.slots[4].view_of = 3;
  expect_rejected(written, "is a view; views are never written");
}

TEST_CASE("read-only marking: usage must fit the storage and writes only go to writable slots") {
  expect_rejected([](ModuleSpec& m) { m.slots[3].usage = fb::SlotUsage::Donated; },
                  "usage donated is not allowed for arena storage");
  expect_rejected([](ModuleSpec& m) { m.slots[5].usage = fb::SlotUsage::ExternalInput; },
                  "usage external_input is not allowed for output storage");
  expect_rejected([](ModuleSpec& m) { m.slots[1].usage = fb::SlotUsage::Transient; },
                  "usage transient is not allowed for constant storage");
  expect_rejected([](ModuleSpec& m) { m.operand_pool[7] = 2; },
                  "output slot 2 ('s') is read-only (constant)");
  expect_rejected([](ModuleSpec& m) { m.operand_pool[7] = 0; },
                  "output slot 0 ('x') is read-only (external_input)");
  expect_rejected([](ModuleSpec& m) { m.slots[0].usage = fb::SlotUsage::Donated; },
                  "slot is Donated but the input is not donated");
}

ModuleSpec free_at_last_use_spec() {
  ModuleSpec m = tiny_module_spec();
  m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  m.arena_size = 0;
  m.functions[0].arena_size = 0;
  m.slots[3].last_use = 1;  // h: read by mul, which takes its buffer over
  m.slots[4].last_use = 2;  // h2: read by relu
  return m;
}

TEST_CASE("free-at-last-use: offsets are 0 and last uses match the instructions") {
  expect_ok(free_at_last_use_spec());
  ModuleSpec m = free_at_last_use_spec();
  m.slots[3].last_use = 2;
  expect_rejected(m, "slot 3 ('h') has last_use 2 but its last use is instruction 1");
  m = free_at_last_use_spec();
  m.slots[4].last_use = -1;
  expect_rejected(m, "slot 4 ('h2') has last_use -1");
  m = free_at_last_use_spec();
  m.slots[4].arena_offset = 64;
  expect_rejected(m, "arena offset 64 in a free-at-last-use plan (must be 0)");
  m = free_at_last_use_spec();
  m.arena_size = 64;
  expect_rejected(m, "has a static arena of 64 bytes");
  // Values at offset 0 have their own buffers: only a real alias overlaps.
  m = free_at_last_use_spec();
  m.instructions[1].alias_mask = 0;
  m.slots[3].last_use = 1;
  expect_ok(m);
  // A value written twice would leak its first buffer.
  m = free_at_last_use_spec();
  m.operand_pool[5] = 3;  // mul(h, s) writes h again (in place over itself)
  expect_rejected(m, "is written a second time");
  // Static plans may record last uses too, but they must be right.
  m = tiny_module_spec();
  m.slots[3].last_use = 0;
  expect_rejected(m, "has last_use 0 but its last use is instruction 1");
}

// softmax over axis 0 of x f32[2,4] -> y: needs 4 * 12 = 48 bytes of scratch.
ModuleSpec softmax_axis0() {
  ModuleSpec m;
  m.kernels = {"softmax"};
  m.slots = {
      {"x", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"y", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1};
  m.param_pool = {0};
  m.instructions = {{0, 0, 2, 1, 0, 1, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 1, -1}}, 0, 1, 0, 0});
  return m;
}

TEST_CASE("workspace: the shared workspace or the instruction's arena range covers the kernel's need") {
  CHECK(ops::workspace_bytes(ops::OpId::kSoftmax, std::vector<TensorType>{{DType::kF32, {2, 4}}},
                             std::vector<int64_t>{0}) == 48);
  CHECK(ops::workspace_bytes(ops::OpId::kSoftmax, std::vector<TensorType>{{DType::kF32, {2, 4}}},
                             std::vector<int64_t>{1}) == 0);
  ModuleSpec m = softmax_axis0();
  expect_rejected(m, "'softmax' needs 48 bytes of workspace but the plan's shared workspace has 0");
  m.workspace_size = 48;
  expect_ok(m);

  m = softmax_axis0();
  m.arena_size = 64;
  m.workspaces = {fb::WorkspaceRange(0, 48)};
  expect_ok(m);
  m.workspaces = {fb::WorkspaceRange(0, 16)};
  expect_rejected(m, "workspace range of 16 bytes, but 'softmax' needs 48");
  m.workspaces = {fb::WorkspaceRange(64, 48)};
  expect_rejected(m, "outside the 64-byte arena");
  m.workspaces = {fb::WorkspaceRange(8, 48)};
  expect_rejected(m, "misaligned");
  m.workspaces = {fb::WorkspaceRange(0, 48), fb::WorkspaceRange(0, 0)};
  expect_rejected(m, "2 workspace ranges for 1 instructions");
  // Free-at-last-use allocates scratch per instruction: no ranges, no shared need.
  m = softmax_axis0();
  m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  expect_ok(m);
}

}  // namespace
}  // namespace hexir::format
