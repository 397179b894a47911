#include "hexir/format/verifier.h"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>

#include "hexir/format/sections.h"
#include "hxe_test_builder.h"

namespace hexir::format {
namespace {

using testing::AlignedBytes;
using testing::ModuleSpec;
using testing::tiny_module_spec;
using testing::write_hxe;

Result<VerifiedModule> verify(const AlignedBytes& file, bool data_checksum = false) {
  VerifyOptions options;
  options.verify_data_checksum = data_checksum;
  return verify_executable(file.span(), options);
}

// Builds the tiny module with one defect and expects an error containing `needle`.
void expect_error(const std::function<void(ModuleSpec&)>& mutate, const std::string& needle,
                  StatusCode code = StatusCode::kDataLoss) {
  ModuleSpec spec = tiny_module_spec();
  mutate(spec);
  AlignedBytes file = write_hxe(spec);
  Result<VerifiedModule> result = verify(file);
  REQUIRE_FALSE(result.ok());
  INFO("message: " << result.status().message());
  CHECK(result.status().code() == code);
  CHECK(result.status().message().find(needle) != std::string::npos);
}

TEST_CASE("a valid file verifies and exposes its parts") {
  AlignedBytes file = write_hxe(tiny_module_spec());
  Result<VerifiedModule> result = verify(file, /*data_checksum=*/true);
  REQUIRE_MESSAGE(result.ok(), result.status().to_string());
  const VerifiedModule& v = *result;
  CHECK(v.module->name()->str() == "tiny");
  REQUIRE(v.sections.size() == 1);
  CHECK(v.sections[0].data() == file.data() + 4096);
  CHECK(v.sections[0].size() == 16);
  REQUIRE(v.kernel_ids.size() == 3);
  CHECK(v.kernel_ids[0] == ops::OpId::kAdd);
  CHECK(v.kernel_ids[2] == ops::OpId::kRelu);
  REQUIRE(v.slot_types.size() == 6);
  CHECK(v.slot_types[1].to_string() == "f32[4]");
  CHECK(v.constant_types[1].to_string() == "f32[1,4]");
}

TEST_CASE("data checksum is checked on request") {
  ModuleSpec spec = tiny_module_spec();
  spec.data_checksum = true;
  AlignedBytes file = write_hxe(spec);
  CHECK(verify(file, true).ok());
  file.data()[4096] ^= 1;           // a weight byte
  CHECK(verify(file, false).ok());  // O(metadata) load does not look at weights
  Result<VerifiedModule> result = verify(file, true);
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().message().find("data checksum") != std::string::npos);
}

TEST_CASE("truncated files give an error at every length") {
  AlignedBytes file = write_hxe(tiny_module_spec());
  for (size_t n = 0; n < file.size(); n += (n < 4200 ? 1 : 7)) {
    Result<VerifiedModule> result = verify_executable(file.prefix(n), {});
    CHECK_MESSAGE(!result.ok(), "length ", n);
  }
}

TEST_CASE("every single-bit flip in the prelude and metadata is an error") {
  const AlignedBytes original = write_hxe(tiny_module_spec());
  Prelude prelude;
  std::memcpy(&prelude, original.data(), sizeof(prelude));
  const size_t end = prelude.metadata_offset + prelude.metadata_size;
  int flips = 0;
  for (size_t byte = 0; byte < end; ++byte) {
    // Every bit of the prelude; one bit per metadata byte (rotating).
    for (int bit = 0; bit < 8; ++bit) {
      if (byte >= sizeof(Prelude) && bit != static_cast<int>(byte % 8)) continue;
      AlignedBytes file = original.copy();
      file.data()[byte] ^= static_cast<uint8_t>(1u << bit);
      Result<VerifiedModule> result = verify(file, true);
      CHECK_MESSAGE(!result.ok(), "byte ", byte, " bit ", bit);
      ++flips;
    }
  }
  CHECK(flips > 500);
}

TEST_CASE("bit flips behind a valid checksum never crash the verifier") {
  // The checksum catches accidents; this drives the flatbuffer and semantic
  // checks with hostile metadata. Each result may be ok or an error.
  const AlignedBytes original = write_hxe(tiny_module_spec());
  Prelude prelude;
  std::memcpy(&prelude, original.data(), sizeof(prelude));
  int rejected = 0;
  for (size_t byte = prelude.metadata_offset; byte < prelude.metadata_offset + prelude.metadata_size;
       ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      AlignedBytes file = original.copy();
      file.data()[byte] ^= static_cast<uint8_t>(1u << bit);
      testing::reseal_metadata(file);
      if (!verify(file).ok()) ++rejected;
    }
  }
  CHECK(rejected > 0);
}

TEST_CASE("a file of a format version outside the readable range is refused: recompile") {
  // Version 1 (matmul's parameter words had another meaning) and the next
  // version, which this runtime cannot know.
  for (const uint32_t version : {1u, kFormatVersion + 1}) {
    AlignedBytes file = write_hxe(tiny_module_spec());
    std::memcpy(file.data() + offsetof(Prelude, format_version), &version, sizeof(version));
    Result<VerifiedModule> result = verify(file);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == StatusCode::kUnimplemented);
    CHECK(result.status().message() == "compiled for format version " + std::to_string(version) +
                                           "; this runtime reads " + std::to_string(kMinReadableFormatVersion) +
                                           ".." + std::to_string(kFormatVersion) + "; recompile");
  }
}

TEST_CASE("prelude defects") {
  AlignedBytes file = write_hxe(tiny_module_spec());
  SUBCASE("bad magic") {
    file.data()[0] = 'X';
    CHECK(verify(file).status().message().find("magic") != std::string::npos);
  }
  SUBCASE("unknown flag") {
    file.data()[12] = 4;
    CHECK(verify(file).status().message().find("flags") != std::string::npos);
  }
  SUBCASE("huge metadata size does not wrap") {
    Prelude p;
    std::memcpy(&p, file.data(), sizeof(p));
    p.metadata_size = ~uint64_t{0} - 10;
    std::memcpy(file.data(), &p, sizeof(p));
    CHECK_FALSE(verify(file).ok());
  }
  SUBCASE("huge data range does not wrap") {
    Prelude p;
    std::memcpy(&p, file.data(), sizeof(p));
    p.data_size = ~uint64_t{0} - 4095;
    std::memcpy(file.data(), &p, sizeof(p));
    CHECK(verify(file).status().message().find("data region") != std::string::npos);
  }
  SUBCASE("unaligned buffer") {
    CHECK(verify_executable({file.data() + 1, file.size() - 1}, {}).status().code() ==
          StatusCode::kInvalidArgument);
  }
}

TEST_CASE("sections") {
  expect_error([](ModuleSpec& m) { m.sections[0].offset = 4096 * 5; }, "outside the data region");
  expect_error([](ModuleSpec& m) { m.sections[0].offset = 4096 + 64; }, "not aligned");
  expect_error([](ModuleSpec& m) { m.sections[0].offset = ~uint64_t{0} - 4095; }, "outside the data region");
  expect_error([](ModuleSpec& m) { m.sections[0].size = ~uint64_t{0}; }, "outside the data region");
  expect_error([](ModuleSpec& m) { m.sections[0].raw_size = 32; }, "raw_size 32 != size 16");
  expect_error([](ModuleSpec& m) { m.sections[0].alignment = 3000; }, "power of two");
  // zstd: the frame is checked when decompressed (format/sections.h); the verifier bounds raw_size.
  expect_error(
      [](ModuleSpec& m) {
        m.sections[0].compression = fb::Compression::Zstd;
        m.sections[0].raw_size = uint64_t{1} << 41;
      },
      "exceeds the limit");
  expect_error(
      [](ModuleSpec& m) {
        m.sections[0].compression = fb::Compression::Zstd;
        m.sections[0].raw_size = 16 * kMaxZstdExpansion + 1;
      },
      "more than zstd can expand 16 stored bytes");
  expect_error([](ModuleSpec& m) { m.sections[0].compression = static_cast<fb::Compression>(7); },
               "unknown compression 7");
}

TEST_CASE("constants") {
  expect_error([](ModuleSpec& m) { m.constants[0].offset = 64; },
               "constant 0 ('b'): bytes [64, +16) are outside");
  expect_error([](ModuleSpec& m) { m.constants[0].offset = 8; }, "64-byte aligned");
  expect_error([](ModuleSpec& m) { m.constants[0].offset = ~uint64_t{0} - 63; }, "outside section");
  expect_error([](ModuleSpec& m) { m.constants[0].section = 7; }, "section 7 out of range");
  expect_error([](ModuleSpec& m) { m.constants[0].byte_size = 20; }, "byte_size is 20 but f32[4] needs 16");
  expect_error([](ModuleSpec& m) { m.constants[0].dtype = static_cast<fb::DType>(42); }, "invalid dtype");
  expect_error([](ModuleSpec& m) { m.constants[1].fill_count = 5; }, "does not make 16 bytes");
  expect_error([](ModuleSpec& m) { m.constants[1].fill_pattern.assign(17, 0); }, "fill pattern has 17 bytes");
  expect_error([](ModuleSpec& m) { m.constants[1].fill_pattern.clear(); }, "fill pattern has 0 bytes");
  expect_error(
      [](ModuleSpec& m) {
        m.constants[1].fill_pattern.assign(16, 0);
        m.constants[1].fill_count = uint64_t{1} << 61;  // 16 * 2^61 wraps to 0
        m.constants[1].byte_size = 0;
        m.constants[1].shape = {0};
      },
      "does not make");
  expect_error(
      [](ModuleSpec& m) {
        m.constants[1].shape = {int64_t{1} << 40, int64_t{1} << 40};
        m.constants[1].byte_size = 0;
      },
      "bad shape");
  expect_error([](ModuleSpec& m) { m.constants[1].shape = {-1, -16}; }, "bad shape");
}

TEST_CASE("kernels") {
  expect_error([](ModuleSpec& m) { m.kernels[1] = "frobnicate"; },
               "kernel 1: 'frobnicate' is not in the kernel catalog");
}

TEST_CASE("slots") {
  expect_error([](ModuleSpec& m) { m.slots[3].arena_offset = 32; },
               "not a multiple of the arena alignment 64");
  expect_error([](ModuleSpec& m) { m.slots[3].arena_offset = 64; }, "exceed the arena size 64");
  expect_error([](ModuleSpec& m) { m.slots[3].arena_offset = ~uint64_t{0} - 63; }, "exceed the arena size");
  expect_error([](ModuleSpec& m) { m.slots[1].index = 9; }, "constant index 9 out of range");
  expect_error([](ModuleSpec& m) { m.slots[3].usage = fb::SlotUsage::Constant; },
               "not allowed for arena storage");
  expect_error([](ModuleSpec& m) { m.slots[3].storage = static_cast<fb::StorageKind>(9); },
               "unknown storage");
  expect_error(
      [](ModuleSpec& m) {
        m.slots[3].shape = {int64_t{1} << 62, 4};
        m.slots[3].byte_size = 0;
      },
      "overflows");
}

TEST_CASE("bounded dims: the dim, its extent slot in the table, and the operator's rule") {
  // An extent slot (i64[] in the extent table) appended to the tiny module.
  auto with_extent = [](ModuleSpec& m) {
    m.slots.push_back({"n", fb::DType::I64, {}, 8, fb::StorageKind::Extent, fb::SlotUsage::Transient, 0, 0});
    m.extent_count = 1;
  };
  expect_error([](ModuleSpec& m) { m.slots[3].bounded_dim = 5; }, "bounded dim 5 is not a dim of f32[1,4]");
  expect_error([](ModuleSpec& m) { m.slots[3].bounded_dim = 1; }, "extent -1 is not a slot");
  expect_error(
      [](ModuleSpec& m) {
        m.slots[3].bounded_dim = 1;
        m.slots[3].extent = 0;
      },
      "is not an i64[] slot of the extent table");
  expect_error(
      [&](ModuleSpec& m) {
        with_extent(m);
        m.slots[0].bounded_dim = 1;
        m.slots[0].extent = 6;
      },
      "input slots have exact shapes");
  expect_error(
      [&](ModuleSpec& m) {
        with_extent(m);
        m.slots[6].index = 3;
      },
      "extent table entry 3 of 8 bytes is not one of the module's 1 int64 entries");
  expect_error([](ModuleSpec& m) { m.extent_count = 1000; }, "extent_count 1000 exceeds the 6 slots");
  // A result bounded where its operator's rule gives an exact shape.
  expect_error(
      [&](ModuleSpec& m) {
        with_extent(m);
        m.slots[3].bounded_dim = 1;
        m.slots[3].extent = 6;
      },
      "'add' gives f32[1,4] but the output slot 3 ('h') is f32[1,<=4]");
}

TEST_CASE("instructions") {
  expect_error([](ModuleSpec& m) { m.operand_pool[3] = 9000; },
               "instruction 1 (function 'main'): operand 0 refers to slot 9000, but the module has 6 slots");
  expect_error([](ModuleSpec& m) { m.instructions[2].kernel = 3; }, "kernel index 3 out of range");
  expect_error([](ModuleSpec& m) { m.instructions[2].operand_begin = 7; }, "exceed the operand pool");
  expect_error([](ModuleSpec& m) { m.instructions[2].operand_begin = ~0u; }, "exceed the operand pool");
  expect_error([](ModuleSpec& m) { m.instructions[2].param_count = 3; }, "exceed the parameter pool");
  expect_error(
      [](ModuleSpec& m) {
        m.instructions[2].param_begin = ~0u;
        m.instructions[2].param_count = 2;
      },
      "exceed the parameter pool");
  expect_error([](ModuleSpec& m) { m.instructions[0].input_count = 3; }, "need an output");
  expect_error([](ModuleSpec& m) { m.instructions[0].opcode = 8; }, "unknown opcode");
  expect_error([](ModuleSpec& m) { m.instructions[1].alias_mask = 0b100; }, "alias mask");
  expect_error([](ModuleSpec& m) { m.instructions[1].alias_mask = 0b11; },
               "alias bit 1 set but the output slot 4 ('h2') does not share the storage");
  expect_error([](ModuleSpec& m) { m.instructions[1].alias_mask = 0; }, "without an alias bit");
  // relu writes into the constant @b.
  expect_error([](ModuleSpec& m) { m.operand_pool[7] = 1; }, "read-only");
  // add writes into the (not donated) input.
  expect_error(
      [](ModuleSpec& m) {
        m.operand_pool[2] = 0;
        m.operand_pool[3] = 0;
      },
      "read-only");
  // Result shape disagrees with the shape rule.
  expect_error(
      [](ModuleSpec& m) {
        m.slots[5].shape = {2, 2};
      },
      "'relu' gives f32[1,4] but the output slot 5 ('y') is f32[2,2]");
  expect_error(
      [](ModuleSpec& m) {
        m.slots[1].shape = {3};
        m.slots[1].byte_size = 12;
      },
      "instruction 0 (function 'main'): 'add'");
  expect_error([](ModuleSpec& m) { m.kernels[2] = "reshape"; }, "is a view");
}

TEST_CASE("functions and bindings") {
  expect_error([](ModuleSpec& m) { m.functions[0].instruction_count = 4; },
               "exceed the module's 3 instructions");
  expect_error([](ModuleSpec& m) { m.functions[0].instruction_begin = ~0u; }, "exceed the module's");
  expect_error([](ModuleSpec& m) { m.functions[0].name = ""; }, "empty name");
  expect_error([](ModuleSpec& m) { m.functions[0].inputs[0].name = ""; }, "empty name");
  expect_error([](ModuleSpec& m) { m.functions[0].inputs[0].slot = 99; }, "slot 99 out of range");
  expect_error([](ModuleSpec& m) { m.functions[0].inputs[0].slot = 3; }, "is not bound to input 0");
  expect_error([](ModuleSpec& m) { m.functions[0].outputs[0].slot = 3; }, "neither bound to output 0");
  expect_error([](ModuleSpec& m) { m.functions[0].inputs[0].donated_to = 4; }, "donated_to 4 out of range");
  expect_error([](ModuleSpec& m) { m.functions[0].arena_size = 65; }, "exceeds the arena plan size");
  expect_error([](ModuleSpec& m) { m.functions[0].outputs.clear(); },
               "bound to output 0 but the function has 0 outputs");
  expect_error([](ModuleSpec& m) { m.functions[0].instruction_count = 2; }, "output 0 is never written");
  expect_error(
      [](ModuleSpec& m) {
        m.functions.push_back(m.functions[0]);
        m.functions[1].name = "other";
      },
      "overlapping instruction ranges");
  expect_error(
      [](ModuleSpec& m) {
        m.functions.push_back(m.functions[0]);
        m.functions[1].instruction_count = 0;
      },
      "both named 'main'");
}

TEST_CASE("arena plan") {
  expect_error([](ModuleSpec& m) { m.has_arena = false; }, "no arena plan");
  expect_error([](ModuleSpec& m) { m.arena_alignment = 48; }, "not a power of two");
  expect_error([](ModuleSpec& m) { m.arena_alignment = 0; }, "not a power of two");
}

TEST_CASE("donation: an in-place result in a donated input is accepted") {
  ModuleSpec m = tiny_module_spec();
  // relu writes its result into the donated input's buffer, which is output 0.
  m.slots[0].usage = fb::SlotUsage::Donated;
  m.slots.push_back(
      {"y_in_x", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0});
  m.operand_pool[7] = 6;
  m.functions[0].inputs[0].donated_to = 0;
  m.functions[0].outputs[0].slot = 6;
  AlignedBytes file = write_hxe(m);
  Result<VerifiedModule> result = verify(file);
  CHECK_MESSAGE(result.ok(), result.status().to_string());

  // Without donation the same write is rejected.
  m.functions[0].inputs[0].donated_to = -1;
  file = write_hxe(m);
  CHECK_FALSE(verify(file).ok());
}

}  // namespace
}  // namespace hexir::format

namespace hexir::format {
namespace {

TEST_CASE("random multi-byte corruption behind a valid checksum never crashes") {
  const AlignedBytes original = write_hxe(tiny_module_spec());
  Prelude prelude;
  std::memcpy(&prelude, original.data(), sizeof(prelude));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int accepted = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    AlignedBytes file = original.copy();
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = prelude.metadata_offset + next() % prelude.metadata_size;
      file.data()[at] = static_cast<uint8_t>(next());
    }
    testing::reseal_metadata(file);
    if (verify_executable(file.span(), {}).ok()) ++accepted;
  }
  MESSAGE("accepted ", accepted, " of 4000 corrupted files");
}

}  // namespace
}  // namespace hexir::format

namespace hexir::format {
namespace {

// main(%x: f32[2,6]) -> (f32[2,3], f32[2,3]): %a, %b = split(%x) {axis = 1},
// both results bound straight to the outputs; or (`arena`) %a and %b in the
// arena, each copied out.
ModuleSpec split_module_spec(bool arena, uint8_t strategy = 1) {
  using testing::SlotSpec;
  ModuleSpec m;
  m.name = "split";
  m.kernels = {"split", "copy"};
  const fb::StorageKind a_storage = arena ? fb::StorageKind::Arena : fb::StorageKind::Output;
  const fb::SlotUsage a_usage = arena ? fb::SlotUsage::Transient : fb::SlotUsage::ExternalOutput;
  m.slots = {
      SlotSpec{"x", fb::DType::F32, {2, 6}, 48, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      SlotSpec{"a", fb::DType::F32, {2, 3}, 24, a_storage, a_usage, 0, 0},
      SlotSpec{"b", fb::DType::F32, {2, 3}, 24, a_storage, a_usage, arena ? 64u : 0u, arena ? 0u : 1u},
  };
  m.instructions = {{0, 0, 3, 1, 0, 3, 0, 0}};
  m.operand_pool = {0, 1, 2};
  m.param_pool = {1, 3, 3};
  m.functions = {{"main", {{"x", 0, -1}}, {{"0", 1, -1}, {"1", 2, -1}}, 0, 1, 0, 0}};
  m.arena_strategy = strategy;
  if (arena) {
    m.slots.push_back(SlotSpec{
        "a.out", fb::DType::F32, {2, 3}, 24, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0});
    m.slots.push_back(SlotSpec{
        "b.out", fb::DType::F32, {2, 3}, 24, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 1});
    m.instructions.push_back({1, 3, 2, 1, 3, 0, 0, 0});
    m.instructions.push_back({1, 5, 2, 1, 3, 0, 0, 0});
    m.operand_pool.insert(m.operand_pool.end(), {1, 3, 2, 4});
    m.functions[0].outputs = {{"0", 3, -1}, {"1", 4, -1}};
    m.functions[0].instruction_count = 3;
    if (strategy == 2) {  // free-at-last-use: every offset 0, last uses recorded
      m.slots[2].arena_offset = 0;
      m.slots[1].last_use = 1;
      m.slots[2].last_use = 2;
    } else {
      m.arena_size = m.functions[0].arena_size = 128;
      m.arena_lower_bound = m.functions[0].lower_bound = 48;  // a and b live together
    }
  }
  return m;
}

TEST_CASE("several outputs: each is type-checked, written, and has storage of its own") {
  for (bool arena : {false, true}) {
    CAPTURE(arena);
    Result<VerifiedModule> ok = verify(write_hxe(split_module_spec(arena)));
    REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  }
  // Free-at-last-use: both arena outputs at offset 0 are two buffers, not one.
  Result<VerifiedModule> dynamic = verify(write_hxe(split_module_spec(true, 2)));
  REQUIRE_MESSAGE(dynamic.ok(), dynamic.status().to_string());

  auto expect = [](ModuleSpec m, const std::string& needle) {
    Result<VerifiedModule> r = verify(write_hxe(m));
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find(needle) != std::string::npos);
  };
  ModuleSpec overlap = split_module_spec(true);
  overlap.slots[2].arena_offset = 0;  // %b on %a's bytes
  expect(overlap, "outputs 0 and 1 share storage");
  ModuleSpec same = split_module_spec(false);
  same.operand_pool[2] = 1;  // one slot as both results
  expect(same, "outputs 0 and 1 share storage");
  ModuleSpec count = split_module_spec(false);
  count.param_pool = {1, 6};  // one part, two outputs
  count.instructions[0].param_count = 2;
  expect(count, "gives 1 results but the instruction has 2 outputs");
  ModuleSpec type = split_module_spec(false);
  type.param_pool = {1, 4, 2};  // parts of 4 and 2 columns
  expect(type, "'split' gives f32[2,4] but the output slot 1 ('a') is f32[2,3]");
  ModuleSpec rebound = split_module_spec(false);
  rebound.slots[2].index = 0;  // second result also bound to output 0
  expect(rebound, "slot 2 ('b') is neither bound to output 1");
}

}  // namespace
}  // namespace hexir::format
