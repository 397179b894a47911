// Constant passes: splat detection, dedupe, packing into one RODATA section.
#include "hexir/format/prelude.h"
#include "test_util.h"

namespace hexir::serializer::testing {
namespace {

// Every constant is used by @f so none is dropped as unused.
std::string use_all(std::initializer_list<const char*> names, const char* type) {
  std::string body;
  int i = 0;
  std::string last = "%x";
  for (const char* n : names) {
    std::string v = "%v" + std::to_string(i++);
    body += "  " + v + " = call @add(" + last + ", @" + n + ") : " + type + "\n";
    last = v;
  }
  return std::string("func @f(%x: ") + type + ") -> (" + type + ") {\n" + body + "  return " + last + "\n}\n";
}

Module prepared(const std::string& source) {
  Module m = parse_ok(source);
  detect_splats(m);
  dedupe_constants(m);
  pack_constants(m);
  return m;
}

TEST_CASE("splat detection: an all-equal dense constant becomes a fill") {
  Module m = prepared("const @a : f32[2,3] = dense [7, 7, 7, 7, 7, 7]\n" + use_all({"a"}, "f32[2,3]"));
  REQUIRE(m.constants.size() == 1);
  const Constant& c = m.constants[0];
  CHECK(c.is_fill);
  CHECK(c.fill_pattern == f32_bytes({7}));
  CHECK(c.fill_count == 6);
  CHECK(c.byte_size == 24);
  CHECK(c.data.empty());
}

TEST_CASE("splat detection: an all-equal file constant becomes a fill") {
  Module m = prepared("const @ones : f32[3,4] = file \"ones_f32_3x4.npy\"\n" + use_all({"ones"}, "f32[3,4]"));
  REQUIRE(m.constants.size() == 1);
  CHECK(m.constants[0].is_fill);
  CHECK(m.constants[0].fill_count == 12);
  CHECK(m.constants[0].fill_pattern == f32_bytes({1}));
  CHECK(!module_has_rodata(m));
}

TEST_CASE("splat detection: differing elements stay packed data") {
  Module m = prepared("const @a : f32[3] = dense [1, 1, 2]\n" + use_all({"a"}, "f32[3]"));
  CHECK(!m.constants[0].is_fill);
  CHECK(m.constants[0].data == f32_bytes({1, 1, 2}));
}

TEST_CASE("splat detection: compares bytes, so -0.0 and 0.0 differ") {
  Module m = prepared("const @a : f32[2] = dense [0.0, -0.0]\n" + use_all({"a"}, "f32[2]"));
  CHECK(!m.constants[0].is_fill);
}

TEST_CASE("splat detection: empty constants are left alone") {
  Module m = parse_ok("const @e : f32[0] = dense []\n");
  detect_splats(m);
  CHECK(!m.constants[0].is_fill);
}

TEST_CASE("dedupe: identical constants become one, references follow") {
  Module m = prepared(R"(
const @a : f32[3] = dense [1, 2, 3]
const @b : f32[3] = dense [1, 2, 3]
const @c : f32[3] = dense [1, 2, 4]
)" + use_all({"a", "b", "c"}, "f32[3]"));
  REQUIRE(m.constants.size() == 2);
  CHECK(m.constants[0].name == "a");
  CHECK(m.constants[1].name == "c");
  const Function& fn = m.functions[0];
  CHECK(fn.values[fn.instructions[0].inputs[1]].constant_index == 0);
  CHECK(fn.values[fn.instructions[1].inputs[1]].constant_index == 0);
  CHECK(fn.values[fn.instructions[2].inputs[1]].constant_index == 1);
}

TEST_CASE("dedupe: equal bytes with a different dtype or shape stay apart") {
  Module m = prepared(R"(
const @a : f32[2,2] = dense [1, 2, 3, 4]
const @b : f32[4] = dense [1, 2, 3, 4]
const @c : i32[4] = dense [1065353216, 1073741824, 1077936128, 1082130432]
func @f(%x: f32[2,2], %y: f32[4], %z: i32[4]) -> (f32[2,2], f32[4], i32[4]) {
  %p = call @add(%x, @a) : f32[2,2]
  %q = call @add(%y, @b) : f32[4]
  %r = call @copy(@c) : i32[4]
  return %p, %q, %r
}
)");
  CHECK(m.constants.size() == 3);
}

TEST_CASE("dedupe: a dense splat and a written splat merge") {
  Module m = prepared(R"(
const @a : f32[4] = splat 0.5
const @b : f32[4] = dense [0.5, 0.5, 0.5, 0.5]
)" + use_all({"a", "b"}, "f32[4]"));
  REQUIRE(m.constants.size() == 1);
  CHECK(m.constants[0].is_fill);
}

TEST_CASE("dedupe: fills with the same pattern but a different count stay apart") {
  Module m = prepared(R"(
const @a : f32[4] = splat 0.5
const @b : f32[2,2] = splat 0.5
func @f(%x: f32[4], %y: f32[2,2]) -> (f32[4], f32[2,2]) {
  %p = call @add(%x, @a) : f32[4]
  %q = call @add(%y, @b) : f32[2,2]
  return %p, %q
}
)");
  CHECK(m.constants.size() == 2);
}

TEST_CASE("dedupe: unused constants are dropped") {
  Module m = prepared(R"(
const @unused : f32[3] = dense [1, 2, 3]
const @used : f32[3] = dense [4, 5, 6]
)" + use_all({"used"}, "f32[3]"));
  REQUIRE(m.constants.size() == 1);
  CHECK(m.constants[0].name == "used");
  CHECK(m.functions[0].values[m.functions[0].instructions[0].inputs[1]].constant_index == 0);
}

TEST_CASE("dedupe: works across functions") {
  Module m = prepared(R"(
const @a : f32[2] = dense [1, 2]
const @b : f32[2] = dense [1, 2]
func @f(%x: f32[2]) -> f32[2] { %y = call @add(%x, @a) : f32[2]  return %y }
func @g(%x: f32[2]) -> f32[2] { %y = call @add(%x, @b) : f32[2]  return %y }
)");
  REQUIRE(m.constants.size() == 1);
  for (const Function& fn : m.functions) CHECK(fn.values[fn.instructions[0].inputs[1]].constant_index == 0);
}

TEST_CASE("packing: every packed constant is 64-byte aligned and none overlap") {
  Module m = prepared(R"(
const @a : f32[3] = dense [1, 2, 3]
const @b : u8[5] = dense [1, 2, 3, 4, 5]
const @c : f32[2,3] = file "f32_2x3.npy"
const @s : f32[3] = splat 9
const @d : i64[3] = file "i64_3.npy"
func @f(%x: f32[3], %y: u8[5], %z: f32[2,3], %w: i64[3]) -> (f32[3], u8[5], f32[2,3], i64[3]) {
  %p = call @add(%x, @a) : f32[3]
  %p2 = call @add(%p, @s) : f32[3]
  %q = call @copy(@b) : u8[5]
  %r = call @add(%z, @c) : f32[2,3]
  %t = call @copy(@d) : i64[3]
  return %p2, %q, %r, %t
}
)");
  uint64_t size = pack_constants(m);
  uint64_t end = 0;
  for (const Constant& c : m.constants) {
    if (c.is_fill) continue;
    CHECK(c.rodata_offset % format::kConstantAlignment == 0);
    CHECK(c.rodata_offset >= end);
    end = c.rodata_offset + c.byte_size;
  }
  CHECK(size == end);
  CHECK(size == 3 * 64 + 24);
}

TEST_CASE("packing: only fills means no RODATA at all") {
  Module m = prepared("const @s : f32[1000] = splat 3\n" + use_all({"s"}, "f32[1000]"));
  CHECK(pack_constants(m) == 0);
  CHECK(!module_has_rodata(m));
}

}  // namespace
}  // namespace hexir::serializer::testing
