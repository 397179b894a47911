// The verifier's overlap proof: no two arena values live at the same
// time share a byte, views folded into their value, in-place results taking
// over their input's bytes, per-instruction workspaces included; and writes
// into a caller's buffer respect the values in it, a donated input and the
// output computed in it being one buffer. Hand-built files, each defect alone.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "hexir/format/verifier.h"
#include "hxe_test_builder.h"
#include "verify_expect.h"

namespace hexir::format {
namespace {

using testing::AlignedBytes;
using testing::ModuleSpec;
using testing::SlotSpec;
using testing::write_hxe;
using testing::verify_spec;
using testing::expect_ok;
using testing::expect_rejected;

SlotSpec arena_slot(const std::string& name, std::vector<int64_t> shape, uint64_t offset) {
  uint64_t bytes = 4;
  for (int64_t d : shape) bytes *= static_cast<uint64_t>(d);
  return {
      name, fb::DType::F32, std::move(shape), bytes, fb::StorageKind::Arena, fb::SlotUsage::Transient, offset,
      0};
}

// func @main(%x: f32[4]) -> (f32[4]) { a = relu(x); b = neg(x); c = sub(a, b) }
// slots x(0) a(1) b(2) c(3); b is placed at `b_offset` (a is at 0).
ModuleSpec relu_neg_sub(uint64_t b_offset) {
  ModuleSpec m;
  m.name = "overlap";
  m.kernels = {"relu", "neg", "sub"};
  m.slots = {
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      arena_slot("a", {4}, 0),
      arena_slot("b", {4}, b_offset),
      {"c", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 0, 2, 1, 2, 3};
  m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 2, 1, 0, 0, 0, 0}, {2, 4, 3, 2, 0, 0, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 3, 128, 32});
  m.arena_size = 128;
  m.arena_lower_bound = 32;
  return m;
}

TEST_CASE("overlap: two values live at once on the same bytes are refused") {
  expect_ok(relu_neg_sub(64));
  // b on a's bytes while a waits for sub: sub would compute a - a = 0.
  expect_rejected(relu_neg_sub(0),
                  "instruction 1 (function 'main'): slot 2 ('b') at arena [0, +16) overlaps slot 1 ('a') at "
                  "[0, +16), which is live from instruction 0 to 2");
}

TEST_CASE("overlap: a partial overlap, below or above, is refused") {
  ModuleSpec m = relu_neg_sub(64);
  m.arena_alignment = 8;
  for (SlotSpec* s : {&m.slots[0], &m.slots[1], &m.slots[2], &m.slots[3]}) {
    s->shape = {8};
    s->byte_size = 32;
  }
  m.slots[2].arena_offset = 24;  // b's first 8 bytes are a's last
  expect_rejected(m, "slot 2 ('b') at arena [24, +32) overlaps slot 1 ('a') at [0, +32)");
  m.slots[1].arena_offset = 48;  // now a's first 8 bytes are b's last
  m.slots[2].arena_offset = 24;
  expect_rejected(m, "slot 2 ('b') at arena [24, +32) overlaps slot 1 ('a') at [48, +32)");
  m.slots[2].arena_offset = 80;  // adjacent is fine
  expect_ok(m);
  m.slots[2].arena_offset = 16;  // touching from below: [16, 48) and [48, 80)
  expect_ok(m);
}

TEST_CASE("overlap: a value's bytes are free again after its last use") {
  // a = relu(x); t = neg(a); b = abs(t) on a's bytes (a is dead); c = sub(t, b).
  ModuleSpec m;
  m.kernels = {"relu", "neg", "abs", "sub"};
  m.slots = {
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      arena_slot("a", {4}, 0),
      arena_slot("t", {4}, 64),
      arena_slot("b", {4}, 0),
      {"c", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 1, 2, 2, 3, 2, 3, 4};
  m.instructions = {
      {0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 2, 1, 0, 0, 0, 0}, {2, 4, 2, 1, 0, 0, 0, 0}, {3, 6, 3, 2, 0, 0, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 4, -1}}, 0, 4, 128, 32});
  m.arena_size = 128;
  expect_ok(m);
  // Read a again at the end: now b overwrites it while it is live.
  m.instructions[3].operand_begin = 9;
  m.operand_pool.insert(m.operand_pool.end(), {1, 3, 4});
  expect_rejected(m,
                  "slot 3 ('b') at arena [0, +16) overlaps slot 1 ('a') at [0, +16), which is live from "
                  "instruction 0 to 3");
  // A view of a read at the end keeps a alive just the same.
  SlotSpec view = arena_slot("av", {4}, 0);
  view.view_of = 1;
  m.slots.push_back(view);
  m.operand_pool[9] = 5;
  expect_rejected(m, "slot 3 ('b') at arena [0, +16) overlaps slot 1 ('a')");
}

TEST_CASE("overlap: an in-place result takes over its input's bytes, only at the input's last use") {
  // The tiny module: mul writes h2 over h with an alias bit (h's last use).
  expect_ok(testing::tiny_module_spec());
  // Without the bit, the same placement is two live values on one range.
  ModuleSpec m = testing::tiny_module_spec();
  m.instructions[1].alias_mask = 0;
  expect_rejected(m, "overlaps input 0 slot 3 ('h') without an alias bit");
}

TEST_CASE("overlap: a value written again after an in-place result took its bytes is refused") {
  // a = relu(x); b = neg(a) in place over a; a = abs(x) again (never read); c = relu(b).
  ModuleSpec m;
  m.kernels = {"relu", "neg", "abs"};
  m.slots = {
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      arena_slot("a", {4}, 0),
      arena_slot("b", {4}, 0),
      {"c", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 1, 2, 0, 1, 2, 3};
  m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0},
                    {1, 2, 2, 1, 0, 0, 0b1, 0},
                    {2, 4, 2, 1, 0, 0, 0, 0},
                    {0, 6, 2, 1, 0, 0, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 4, 64, 16});
  m.arena_size = 64;
  expect_rejected(m,
                  "instruction 1 (function 'main'): alias bit 0 hands the bytes of slot 1 ('a') to slot 2 "
                  "('b'), but instruction 2 writes slot 1 ('a') again");
  // With a on bytes of its own the second write is fine.
  m.slots[2].arena_offset = 64;
  m.arena_size = 128;
  m.instructions[1].alias_mask = 0;
  expect_ok(m);
}

// func @main(%x: f32[2,4]) -> (f32[2,4]) { a = relu(x); s = softmax(x, axis 0); c = add(a, s) }
// softmax over axis 0 needs 48 bytes of scratch; a (at 0) is live across it.
ModuleSpec workspace_module(uint64_t softmax_workspace_offset) {
  ModuleSpec m;
  m.name = "scratch";
  m.kernels = {"relu", "softmax", "add"};
  m.slots = {
      {"x", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      arena_slot("a", {2, 4}, 0),
      arena_slot("s", {2, 4}, 64),
      {"c", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 0, 2, 1, 2, 3};
  m.param_pool = {0};
  m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 2, 1, 0, 1, 0, 0}, {2, 4, 3, 2, 0, 0, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 3, 192, 64});
  m.arena_size = 192;
  m.workspaces = {fb::WorkspaceRange(0, 0), fb::WorkspaceRange(softmax_workspace_offset, 48),
                  fb::WorkspaceRange(0, 0)};
  return m;
}

TEST_CASE("overlap: a workspace never covers a value live across its instruction") {
  expect_ok(workspace_module(128));
  // a is not an operand of softmax, but add reads it afterwards.
  expect_rejected(workspace_module(0),
                  "instruction 1 (function 'main'): workspace [0, +48) overlaps slot 1 ('a') at [0, +32), "
                  "which is live from instruction 0 to 2");
  // Overlapping its own operand stays refused (the operand rule).
  expect_rejected(workspace_module(64), "workspace [64, +48) overlaps operand 1");
  // Bytes of a value that died before are free scratch.
  ModuleSpec m = workspace_module(0);
  m.operand_pool = {0, 1, 0, 2, 2, 2, 3};  // add(s, s): a is never read, dead after relu
  expect_ok(m);
}

// Donation: x donated to output 0, whose result y is computed in x's buffer.
// An instruction writing an Output-storage temporary of output 0 writes that
// same buffer (the VM binds x's buffer to output 0), so it must wait for x.
TEST_CASE("overlap: output buffer of a donated result is the donated input's buffer") {
  ModuleSpec m;
  m.kernels = {"neg", "add"};
  m.slots = {
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0},
      {"t", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
      {"y", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0},
  };
  m.operand_pool = {0, 1, 0, 1, 2};
  // t = neg(x) into output 0's buffer (x's!); y = add(x, t) in place over x.
  m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 3, 2, 0, 0, 0b1, 0}};
  m.functions.push_back({"main", {{"x", 0, 0}}, {{"0", 2, -1}}, 0, 2, 0, 0});
  m.arena_size = 64;
  expect_rejected(m, "writes the output buffer 0 while slot 0 ('x') in it is still read by instruction 1");
}

// Many values, each live over a short window, all packed into two ranges:
// the proof stays fast (one ordered set, checked against neighbours).
// bench/verify_bench times the proof on long chains; a test asserts no time.
TEST_CASE("overlap: a long chain of 20,000 values verifies") {
  const uint32_t n = 20000;
  ModuleSpec m;
  m.kernels = {"neg"};
  m.slots.push_back(
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0});
  for (uint32_t i = 0; i + 1 < n; ++i)
    m.slots.push_back(arena_slot("v" + std::to_string(i), {4}, (i % 2) * 64));
  m.slots.push_back(
      {"y", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0});
  for (uint32_t i = 0; i < n; ++i) {
    m.operand_pool.push_back(i);
    m.operand_pool.push_back(i + 1);
    m.instructions.push_back({0, 2 * i, 2, 1, 0, 0, 0, 0});
  }
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", n, -1}}, 0, n, 128, 32});
  m.arena_size = 128;
  expect_ok(m);
  m.slots[n / 2].arena_offset = m.slots[n / 2 + 1].arena_offset;  // two neighbours on one range
  expect_rejected(m, "overlaps");
}

}  // namespace
}  // namespace hexir::format
