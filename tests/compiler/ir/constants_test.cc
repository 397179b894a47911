// Constant passes: splat detection, dedupe, packing into one RODATA section.
#include "hexir/format/prelude.h"
#include "test_util.h"

namespace hexir::compiler::testing {
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

// A parsed module with its constant plan.
struct Prepared {
  Module module;
  ConstantPlan plan;
  // The graph constant behind entry `i` of the constant table.
  const Constant& stored(size_t i) const { return module.constants[plan.stored[i].constant]; }
  // The table entry of the constant operand `operand` of node `node` of function `f`.
  int entry_of(size_t f, size_t node, size_t operand) const {
    const Function& fn = module.functions[f];
    return plan.stored_index[fn.values[fn.nodes[node].inputs[operand]].constant];
  }
};

Prepared prepared(const std::string& source) {
  Prepared p;
  p.module = parse_ok(source);
  p.plan = plan_constants(p.module);
  return p;
}

TEST_CASE("splat detection: an all-equal dense constant becomes a fill") {
  Prepared p = prepared("const @a : f32[2,3] = dense [7, 7, 7, 7, 7, 7]\n" + use_all({"a"}, "f32[2,3]"));
  REQUIRE(p.plan.stored.size() == 1);
  const StoredConstant& c = p.plan.stored[0];
  REQUIRE(c.fill);
  CHECK(c.fill->pattern == f32_bytes({7}));
  CHECK(c.fill->count == 6);
  CHECK(p.stored(0).byte_size == 24);
  CHECK(p.plan.rodata_size == 0);
}

TEST_CASE("splat detection: an all-equal file constant becomes a fill") {
  Prepared p =
      prepared("const @ones : f32[3,4] = file \"ones_f32_3x4.npy\"\n" + use_all({"ones"}, "f32[3,4]"));
  REQUIRE(p.plan.stored.size() == 1);
  REQUIRE(p.plan.stored[0].fill);
  CHECK(p.plan.stored[0].fill->count == 12);
  CHECK(p.plan.stored[0].fill->pattern == f32_bytes({1}));
  CHECK(!module_has_rodata(p.plan));
}

TEST_CASE("splat detection: differing elements stay packed data") {
  Prepared p = prepared("const @a : f32[3] = dense [1, 1, 2]\n" + use_all({"a"}, "f32[3]"));
  CHECK(!p.plan.stored[0].fill);
  CHECK(bytes_of(p.stored(0)) == f32_bytes({1, 1, 2}));
}

TEST_CASE("splat detection: compares bytes, so -0.0 and 0.0 differ") {
  Prepared p = prepared("const @a : f32[2] = dense [0.0, -0.0]\n" + use_all({"a"}, "f32[2]"));
  CHECK(!p.plan.stored[0].fill);
}

TEST_CASE("splat detection: empty constants are left alone") {
  Module m = parse_ok("const @e : f32[0] = dense []\n");
  ConstantPlan plan;
  REQUIRE(detect_splats(m, plan).ok());
  REQUIRE(plan.fills.size() == 1);
  CHECK(!plan.fills[0]);
}

TEST_CASE("dedupe: identical constants become one, references follow") {
  Prepared p = prepared(R"(
const @a : f32[3] = dense [1, 2, 3]
const @b : f32[3] = dense [1, 2, 3]
const @c : f32[3] = dense [1, 2, 4]
)" + use_all({"a", "b", "c"}, "f32[3]"));
  REQUIRE(p.plan.stored.size() == 2);
  CHECK(p.stored(0).name == "a");
  CHECK(p.stored(1).name == "c");
  CHECK(p.entry_of(0, 0, 1) == 0);
  CHECK(p.entry_of(0, 1, 1) == 0);
  CHECK(p.entry_of(0, 2, 1) == 1);
  CHECK(p.module.constants.size() == 3);  // the graph keeps every constant
}

TEST_CASE("dedupe: equal bytes with a different dtype or shape stay apart") {
  Prepared p = prepared(R"(
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
  CHECK(p.plan.stored.size() == 3);
}

TEST_CASE("dedupe: a dense splat and a written splat merge") {
  Prepared p = prepared(R"(
const @a : f32[4] = splat 0.5
const @b : f32[4] = dense [0.5, 0.5, 0.5, 0.5]
)" + use_all({"a", "b"}, "f32[4]"));
  REQUIRE(p.plan.stored.size() == 1);
  CHECK(p.plan.stored[0].fill);
}

TEST_CASE("dedupe: fills with the same pattern but a different count stay apart") {
  Prepared p = prepared(R"(
const @a : f32[4] = splat 0.5
const @b : f32[2,2] = splat 0.5
func @f(%x: f32[4], %y: f32[2,2]) -> (f32[4], f32[2,2]) {
  %p = call @add(%x, @a) : f32[4]
  %q = call @add(%y, @b) : f32[2,2]
  return %p, %q
}
)");
  CHECK(p.plan.stored.size() == 2);
}

TEST_CASE("dedupe: unused constants are dropped") {
  Prepared p = prepared(R"(
const @unused : f32[3] = dense [1, 2, 3]
const @used : f32[3] = dense [4, 5, 6]
)" + use_all({"used"}, "f32[3]"));
  REQUIRE(p.plan.stored.size() == 1);
  CHECK(p.stored(0).name == "used");
  CHECK(p.entry_of(0, 0, 1) == 0);
  CHECK(p.plan.stored_index[0] == -1);
}

TEST_CASE("dedupe: works across functions") {
  Prepared p = prepared(R"(
const @a : f32[2] = dense [1, 2]
const @b : f32[2] = dense [1, 2]
func @f(%x: f32[2]) -> f32[2] { %y = call @add(%x, @a) : f32[2]  return %y }
func @g(%x: f32[2]) -> f32[2] { %y = call @add(%x, @b) : f32[2]  return %y }
)");
  REQUIRE(p.plan.stored.size() == 1);
  for (size_t f = 0; f < p.module.functions.size(); ++f) CHECK(p.entry_of(f, 0, 1) == 0);
}

TEST_CASE("packing: every packed constant is 64-byte aligned and none overlap") {
  Prepared p = prepared(R"(
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
  uint64_t size = pack_constants(p.module, p.plan);
  uint64_t end = 0;
  for (const StoredConstant& c : p.plan.stored) {
    if (c.fill) continue;
    CHECK(c.rodata_offset % format::kConstantAlignment == 0);
    CHECK(c.rodata_offset >= end);
    end = c.rodata_offset + p.module.constants[c.constant].byte_size;
  }
  CHECK(size == end);
  CHECK(p.plan.rodata_size == end);
  CHECK(size == 3 * 64 + 24);
}

TEST_CASE("packing: only fills means no RODATA at all") {
  Prepared p = prepared("const @s : f32[1000] = splat 3\n" + use_all({"s"}, "f32[1000]"));
  CHECK(pack_constants(p.module, p.plan) == 0);
  CHECK(!module_has_rodata(p.plan));
}

}  // namespace
}  // namespace hexir::compiler::testing
