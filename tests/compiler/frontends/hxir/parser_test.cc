// The .hxir parser: every valid form, and every error with its file:line:col.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "hexir/base/half.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

template <typename T>
std::vector<T> elements(const Constant& c) {
  std::vector<uint8_t> bytes = bytes_of(c);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// The element a splat constant repeats.
const std::vector<uint8_t>& pattern_of(const Constant& c) {
  const auto* fill = std::get_if<FillPattern>(&c.source);
  REQUIRE(fill);
  return fill->element;
}

const Constant& constant_named(const Module& m, std::string_view name) {
  for (const Constant& c : m.constants)
    if (c.name == name) return c;
  FAIL("no constant " << name);
  return m.constants.front();
}

// Checks that parsing fails with exactly "t.hxir:LINE:COL: " followed by a
// message containing `what`.
void check_error(std::string_view source, int line, int col, std::string_view what) {
  std::string message = parse_error(source);
  std::string where = "t.hxir:" + std::to_string(line) + ":" + std::to_string(col) + ": ";
  INFO("source:\n", source, "\nmessage: ", message);
  REQUIRE(!message.empty());
  CHECK(message.rfind(where, 0) == 0);
  CHECK(message.find(what) != std::string::npos);
}

TEST_CASE("parser: the design card's example program") {
  Module m = parse_ok(R"(module @mlp

const @w1 : f32[2,3] = file "f32_2x3.npy"      // path relative to the .hxir file
const @b1 : f32[3] = splat 0.0
const @s  : f32[2] = dense [0.5, 2.0]

func @main(%x: f32[1,2]) -> (f32[1,3]) {
  %h  = call @matmul(%x, @w1) : f32[1,3]
  %h1 = call @add(%h, @b1) : f32[1,3]            // numpy-style broadcasting
  %h2 = call @relu(%h1) : f32[1,3]
  %p  = call @softmax(%h2) {axis = -1} : f32[1,3]
  return %p
}
)");
  CHECK(m.name == "mlp");
  REQUIRE(m.constants.size() == 3);
  REQUIRE(m.functions.size() == 1);
  const Function& fn = m.functions[0];
  CHECK(fn.name == "main");
  CHECK(fn.arguments.size() == 1);
  CHECK(fn.result_types == std::vector<TensorType>{{DType::kF32, {1, 3}}});
  REQUIRE(fn.nodes.size() == 4);
  CHECK(fn.nodes[0].op == ops::OpId::kMatmul);
  CHECK(fn.nodes[3].op == ops::OpId::kSoftmax);
  CHECK(fn.nodes[3].params == std::vector<int64_t>{1});  // axis -1 normalized
  REQUIRE(fn.outputs.size() == 1);
  CHECK(fn.values[fn.outputs[0]].name == "p");
  CHECK(fn.values[fn.outputs[0]].loc.to_string() == "t.hxir:11:3");
}

TEST_CASE("parser: module name defaults to the file stem") {
  Module m = parse_ok("func @f(%x: f32[2]) -> f32[2] { %y = call @relu(%x) : f32[2] return %y }");
  CHECK(m.name == "t");
}

TEST_CASE("parser: an empty file is an empty module") {
  Module m = parse_ok("// nothing here\n");
  CHECK(m.functions.empty());
  CHECK(m.constants.empty());
}

TEST_CASE("parser: file constants of several dtypes") {
  Module m = parse_ok(R"(
const @a : f32[2,3] = file "f32_2x3.npy"
const @b : f16[4] = file "f16_4.npy"
const @c : i64[3] = file "i64_3.npy"
const @d : bool[4] = file "bool_4.npy"
const @e : i32[] = file "i32_scalar.npy"
)");
  CHECK(elements<float>(constant_named(m, "a")) == std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5});
  CHECK(elements<uint16_t>(constant_named(m, "b")).size() == 4);
  CHECK(elements<int64_t>(constant_named(m, "c")) == std::vector<int64_t>{1, -2, int64_t{1} << 40});
  CHECK(bytes_of(constant_named(m, "d")) == std::vector<uint8_t>{1, 0, 1, 1});
  CHECK(elements<int32_t>(constant_named(m, "e")) == std::vector<int32_t>{7});
  for (const Constant& c : m.constants) {
    // Only the header was read: the constant names a range of its file.
    CHECK(std::holds_alternative<FileRange>(c.source));
    CHECK(c.byte_size == bytes_of(c).size());
  }
}

TEST_CASE("parser: splat constants become fills of one element") {
  Module m = parse_ok(R"(
const @f : f32[3,4] = splat 1.5
const @i : i32[10] = splat -7
const @h : f16[2] = splat 1.0
const @g : bf16[2] = splat -2.0
const @b : bool[5] = splat true
const @u : u8[3] = splat 255
const @s : f32[] = splat 2
)");
  const Constant& f = constant_named(m, "f");
  CHECK(pattern_of(f) == f32_bytes({1.5f}));
  CHECK(f.byte_size == 48);
  CHECK(bytes_of(f).size() == 48);  // 12 elements
  const Constant& i = constant_named(m, "i");
  int32_t minus7 = -7;
  CHECK(pattern_of(i) ==
        std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&minus7), reinterpret_cast<uint8_t*>(&minus7) + 4));
  CHECK(pattern_of(constant_named(m, "h")) == std::vector<uint8_t>{0x00, 0x3c});
  CHECK(pattern_of(constant_named(m, "g")) == std::vector<uint8_t>{0x00, 0xc0});
  CHECK(pattern_of(constant_named(m, "b")) == std::vector<uint8_t>{1});
  CHECK(pattern_of(constant_named(m, "u")) == std::vector<uint8_t>{255});
  CHECK(constant_named(m, "s").byte_size == 4);  // one element
  CHECK(pattern_of(constant_named(m, "s")) == f32_bytes({2.0f}));
}

TEST_CASE("parser: dense constants, flat and nested") {
  Module m = parse_ok(R"(
const @flat   : f32[2,2] = dense [1, 2.5, -3e2, .5]
const @nested : f32[2,2] = dense [[1, 2], [3, 4]]
const @deep   : i32[2,1,2] = dense [[[1, 2]], [[3, 4]]]
const @scalar : f32[] = dense 3.25
const @scalar_list : f32[] = dense [3.25]
const @empty  : f32[0] = dense []
const @bools  : bool[3] = dense [true, false, 1]
const @i8s    : i8[2] = dense [-128, 127]
const @i64s   : i64[2] = dense [9223372036854775807, -9223372036854775808]
const @special : f32[3] = dense [inf, -inf, nan]
)");
  CHECK(elements<float>(constant_named(m, "flat")) == std::vector<float>{1, 2.5, -300, 0.5});
  CHECK(elements<float>(constant_named(m, "nested")) == std::vector<float>{1, 2, 3, 4});
  CHECK(elements<int32_t>(constant_named(m, "deep")) == std::vector<int32_t>{1, 2, 3, 4});
  CHECK(elements<float>(constant_named(m, "scalar")) == std::vector<float>{3.25});
  CHECK(elements<float>(constant_named(m, "scalar_list")) == std::vector<float>{3.25});
  CHECK(bytes_of(constant_named(m, "empty")).empty());
  CHECK(bytes_of(constant_named(m, "bools")) == std::vector<uint8_t>{1, 0, 1});
  for (const Constant& c : m.constants) CHECK(std::holds_alternative<InlineBytes>(c.source));
  CHECK(elements<int8_t>(constant_named(m, "i8s")) == std::vector<int8_t>{-128, 127});
  CHECK(elements<int64_t>(constant_named(m, "i64s")) == std::vector<int64_t>{INT64_MAX, INT64_MIN});
  std::vector<float> special = elements<float>(constant_named(m, "special"));
  CHECK(std::isinf(special[0]));
  CHECK(special[0] > 0);
  CHECK(special[1] < 0);
  CHECK(std::isnan(special[2]));
}

TEST_CASE("parser: f16 and bf16 conversions round to nearest even") {
  CHECK(float_to_half_bits(1.0f) == 0x3c00);
  CHECK(float_to_half_bits(-2.0f) == 0xc000);
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(1e6f) == 0x7c00);                    // overflow to inf
  CHECK(float_to_half_bits(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half_bits(1e-10f) == 0x0000);
  CHECK((float_to_half_bits(std::nanf("")) & 0x7c00) == 0x7c00);
  CHECK((float_to_half_bits(std::nanf("")) & 0x3ff) != 0);
  CHECK(float_to_half_bits(1.0f + 1.0f / 2048) == 0x3c00);  // tie goes to even
  CHECK(float_to_half_bits(1.0f + 3.0f / 2048) == 0x3c02);
  CHECK(float_to_bfloat16_bits(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16_bits(-2.0f) == 0xc000);
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie to even
  CHECK(float_to_bfloat16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  CHECK((float_to_bfloat16_bits(std::nanf("")) & 0x7f80) == 0x7f80);
}

TEST_CASE("parser: several functions, donation, single unparenthesized result") {
  Module m = parse_ok(R"(
func @step(%cache: f32[4,2] donate, %row: f32[1,2]) -> (f32[4,2]) {
  %c = call @add(%cache, %row) : f32[4,2]
  return %c
}
func @other(%x: f32[3]) -> f32[3] {
  %y = call @neg(%x) : f32[3]
  return %y
}
)");
  REQUIRE(m.functions.size() == 2);
  CHECK(m.functions[0].arguments[0].donate);
  CHECK(!m.functions[0].arguments[1].donate);
  CHECK(m.functions[1].name == "other");
  CHECK(m.functions[1].result_types.size() == 1);
}

TEST_CASE("parser: both return spellings, several results") {
  for (const char* ret : {"return %a, %b", "return (%a, %b)"}) {
    std::string src = std::string(R"(
func @f(%x: f32[2]) -> (f32[2], f32[2]) {
  %a = call @relu(%x) : f32[2]
  %b = call @exp(%x) : f32[2]
  )") + ret + "\n}\n";
    Module m = parse_ok(src);
    REQUIRE(m.functions[0].outputs.size() == 2);
    CHECK(m.functions[0].values[m.functions[0].outputs[1]].name == "b");
  }
}

TEST_CASE("parser: attributes of every value kind") {
  Module m = parse_ok(R"(
const @g : f32[4] = splat 1.0
const @b : f32[4] = splat 0.0
func @f(%x: f32[2,4]) -> (f32[4,2], f32[2,4], f32[2,4], f32[1,4]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[4,2]
  %l = call @layernorm(%x, @g, @b) {axis = -1, epsilon = 1e-6} : f32[2,4]
  %e = call @layernorm(%x, @g, @b) {epsilon = 0} : f32[2,4]
  %n = call @gelu(%l) {approximate = "tanh"} : f32[2,4]
  %s = call @reduce_sum(%x) {axes = [-2], keepdims = 1} : f32[1,4]
  %sum = call @add(%n, %e) : f32[2,4]
  return %t, %sum, %n, %s
}
)");
  const Function& fn = m.functions[0];
  CHECK(fn.nodes[0].params == std::vector<int64_t>{1, 0});
  CHECK(fn.nodes[1].params == std::vector<int64_t>{1, std::bit_cast<int64_t>(1e-6)});
  CHECK(fn.nodes[2].params == std::vector<int64_t>{1, std::bit_cast<int64_t>(0.0)});
  CHECK(fn.nodes[3].params == std::vector<int64_t>{1});
  CHECK(fn.nodes[4].params == std::vector<int64_t>{1, 0});
}

TEST_CASE("parser: reshape takes its dims from the declared type") {
  Module m = parse_ok(R"(
func @f(%x: f32[2,6]) -> (f32[3,4]) {
  %r = call @reshape(%x) : f32[3,4]
  %y = call @relu(%r) : f32[3,4]
  return %y
}
)");
  CHECK(m.functions[0].nodes[0].params == std::vector<int64_t>{3, 4});
}

TEST_CASE("parser: comments and odd spacing") {
  Module m = parse_ok(
      "// header\nmodule @m // trailing\nconst @c:f32[2]=dense[1,2]//x\n"
      "func @f(%x:f32[2])->(f32[2]){%y=call @add(%x,@c):f32[2]//c\nreturn %y}// end");
  CHECK(m.name == "m");
  CHECK(m.functions[0].nodes.size() == 1);
}

TEST_CASE("parser: a constant used twice in a function is one value") {
  Module m = parse_ok(R"(
const @c : f32[2] = splat 1.0
func @f(%x: f32[2]) -> (f32[2]) {
  %a = call @add(%x, @c) : f32[2]
  %b = call @mul(%a, @c) : f32[2]
  return %b
}
)");
  const Function& fn = m.functions[0];
  CHECK(fn.nodes[0].inputs[1] == fn.nodes[1].inputs[1]);
}

// ---- errors -----------------------------------------------------------------

TEST_CASE("parser: quoted names for values, constants, functions and modules") {
  Module m = parse_ok(R"(module @"model:v1"
const @"w.1:0" : f32[2] = dense [1.0, 2.0]
const @"tab\there" : f32[2] = splat 0.5
func @"serving/default"(%"input:0": f32[2], %plain: f32[2]) -> (f32[2]) {
  %"mul/out:0" = call @mul(%"input:0", @"w.1:0") : f32[2]
  %"a \"q\" \\ \x01" = call @add(%"mul/out:0", @"tab\there") : f32[2]
  %y = call @add(%"a \"q\" \\ \x01", %plain) : f32[2]
  return %y
})");
  CHECK(m.name == "model:v1");
  CHECK(m.functions[0].name == "serving/default");
  CHECK(m.constants[0].name == "w.1:0");
  CHECK(m.constants[1].name == "tab\there");
  const Function& fn = m.functions[0];
  CHECK(fn.values[static_cast<size_t>(fn.arguments[0].value)].name == "input:0");
  bool found = false;
  for (const Value& v : fn.values) found = found || v.name == std::string("a \"q\" \\ \x01");
  CHECK(found);
  // A quoted name that is an identifier is the same name.
  Module same = parse_ok(R"(func @main(%"x": f32[2]) -> (f32[2]) {
  %"y" = call @relu(%x) : f32[2]
  return %y
})");
  CHECK(same.functions[0].nodes.size() == 1);
}

TEST_CASE("parser error: quoted names") {
  check_error("func @main(%\"\": f32[2]) -> (f32[2]) {\n}", 1, 12, "empty quoted name after '%'");
  check_error("func @main(%\"x: f32[2]) -> (f32[2]) {\n}", 1, 12, "unterminated string");
  check_error("func @main(%\"x\\q\": f32[2]) -> (f32[2]) {\n}", 1, 16, "unknown escape");
  check_error("func @main(%\"x\": f32[2]) -> (f32[2]) {\n  return %\"y\"\n}", 2, 10, "unknown value %y");
}

TEST_CASE("parser error: expected ')' after operands") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = call @add(%x, %x {axis = 1} : f32[2]\n", 2, 25,
              "expected ')' after operands, got '{'");
}

TEST_CASE("parser error: unknown kernel") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = call @frobnicate(%x) : f32[2]\n  return %y\n}", 2,
              13, "unknown kernel or function @frobnicate");
}

TEST_CASE("parser error: unknown value and unknown constant") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = call @add(%x, %z) : f32[2]\n  return %y\n}", 2, 22,
              "unknown value %z");
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = call @add(%x, @w) : f32[2]\n  return %y\n}", 2, 22,
              "unknown constant @w");
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  return %q\n}", 2, 10, "unknown value %q");
}

TEST_CASE("parser error: redefinitions") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %x = call @relu(%x) : f32[2]\n  return %x\n}", 2, 3,
              "redefinition of %x (first defined at 1:9)");
  check_error("func @f(%x: f32[2], %x: f32[2]) -> (f32[2]) {\n  return %x\n}", 1, 21,
              "redefinition of %x (first defined at 1:9)");
  check_error("const @c : f32[1] = splat 0\nconst @c : f32[1] = splat 1\n", 2, 7,
              "redefinition of constant @c (first defined at 1:7)");
  check_error("func @f(%x: f32[2]) -> f32[2] { return %x }\nfunc @f(%x: f32[2]) -> f32[2] { return %x }", 2,
              6, "redefinition of function @f (first defined at 1:6)");
}

TEST_CASE("parser error: result type does not match the shape rule") {
  check_error(
      "func @f(%x: f32[1,4], %w: f32[4,3]) -> (f32[1,3]) {\n  %y = call @matmul(%x, %w) : f32[1,4]\n  return "
      "%y\n}",
      2, 31, "declared result type f32[1,4] does not match @matmul's shape rule, which gives f32[1,3]");
}

TEST_CASE("parser error: shape rule rejects the operands") {
  check_error(
      "func @f(%x: f32[2], %y: f32[3]) -> (f32[2]) {\n  %z = call @add(%x, %y) : f32[2]\n  return %z\n}", 2,
      13, "do not broadcast");
}

TEST_CASE("parser error: wrong operand count") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %z = call @add(%x) : f32[2]\n  return %z\n}", 2, 13,
              "@add takes 2 operand(s), got 1");
}

TEST_CASE("parser error: bad attributes point at the attribute block") {
  check_error(
      "func @f(%x: f32[2]) -> (f32[2]) {\n  %z = call @softmax(%x) {axis = 3} : f32[2]\n  return %z\n}", 2,
      26, "out of range");
  check_error(
      "func @f(%x: f32[2]) -> (f32[2]) {\n  %z = call @relu(%x) {alpha = 0.1} : f32[2]\n  return %z\n}", 2,
      23, "unknown attribute 'alpha'");
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %z = call @softmax(%x) {axis = 0, axis = 0} : f32[2]\n}",
              2, 37, "attribute 'axis' is given twice");
}

TEST_CASE("parser error: file constant of the wrong dtype or shape") {
  check_error("const @w : f32[3,2] = file \"f32_2x3.npy\"\n", 1, 28,
              "constant @w is declared f32[3,2] but 'f32_2x3.npy' holds f32[2,3]");
  check_error("const @w : i32[2,3] = file \"f32_2x3.npy\"\n", 1, 28,
              "constant @w is declared i32[2,3] but 'f32_2x3.npy' holds f32[2,3]");
}

TEST_CASE("parser error: unreadable file constants carry the npy message") {
  check_error("const @w : f32[2] = file \"missing.npy\"\n", 1, 26, "cannot load constant @w: cannot open");
  check_error("const @w : f32[2,3] = file \"fortran_f32_2x3.npy\"\n", 1, 28, "fortran_order");
  check_error("const @w : f32[2] = file \"f64_2.npy\"\n", 1, 26, "unsupported dtype '<f8'");
}

TEST_CASE("parser error: return does not match the signature") {
  check_error("func @f(%x: f32[2]) -> (f32[2], f32[2]) {\n  return %x\n}", 2, 3,
              "function @f returns 1 value(s), its signature declares 2");
  check_error("func @f(%x: f32[2], %y: f32[3]) -> (f32[2], f32[2]) {\n  return %x, %y\n}", 2, 14,
              "returned value 1 (%y) is f32[3], the signature of @f declares f32[2]");
}

TEST_CASE("parser error: missing return and statements after return") {
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = call @relu(%x) : f32[2]\n}", 3, 1,
              "function @f ends without 'return'");
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  return %x\n  %y = call @relu(%x) : f32[2]\n}", 3, 3,
              "expected '}' after 'return', got '%y'");
  check_error("func @f(%x: f32[2]) -> (f32[2]) {\n  return %x\n", 3, 1, "got end of file");
}

TEST_CASE("parser error: dense constants of the wrong size") {
  check_error("const @d : f32[3] = dense [1, 2]\n", 1, 21,
              "dense constant @d has 2 element(s), its type f32[3] needs 3");
  check_error("const @d : f32[2,2] = dense [[1, 2], [3]]\n", 1, 38, "has 1 entries, type f32[2,2] needs 2");
  check_error("const @d : f32[2,2] = dense [[1, 2], [3, 4], [5, 6]]\n", 1, 29, "has 3 entries");
  check_error("const @d : f32[2] = dense [[1, 2]]\n", 1, 28, "nested deeper than the rank");
  check_error("const @d : f32[2,2] = dense [[1, 2], 3]\n", 1, 38, "expected '['");
}

TEST_CASE("parser error: element values out of range or of the wrong kind") {
  check_error("const @d : i8[1] = dense [128]\n", 1, 27, "128 is out of range for i8");
  check_error("const @d : u8[1] = splat -1\n", 1, 26, "-1 is out of range for u8");
  check_error("const @d : i32[1] = dense [1.5]\n", 1, 28, "expected an integer for a i32 value, got '1.5'");
  check_error("const @d : bool[1] = splat 2\n", 1, 28, "out of range for bool");
  check_error("const @d : f32[1] = splat \"x\"\n", 1, 27, "expected a f32 value");
  check_error("const @d : i64[1] = dense [99999999999999999999]\n", 1, 28, "does not fit in 64 bits");
}

TEST_CASE("parser error: types") {
  check_error("const @d : f64[1] = splat 0\n", 1, 12, "unknown dtype 'f64'");
  check_error("const @d : f32[-1] = splat 0\n", 1, 16, "negative dimension -1");
  check_error("const @d : f32 = splat 0\n", 1, 16, "expected '[' after the dtype of a type, got '='");
  check_error("const @d : f32[2,] = splat 0\n", 1, 18, "expected a dimension");
  check_error("const @d : f32[4611686018427387904,4] = splat 0\n", 1, 12, "overflows");
}

TEST_CASE("parser error: lexical errors") {
  check_error("const @d : f32[1] = file \"unterminated\n", 1, 26, "unterminated string");
  check_error("module @m\n  # comment\n", 2, 3, "unexpected character '#'");
  check_error("const @ : f32[1] = splat 0\n", 1, 7, "expected a name after '@'");
  check_error("const @d : f32[1] = splat 1e\n", 1, 29, "expected digits in the exponent");
  check_error("const @d : f32[1] = file \"a\\q\"\n", 1, 29, "unknown escape");
}

TEST_CASE("parser error: declarations") {
  check_error("const @c : f32[1] = splat 0\nmodule @m\n", 2, 1,
              "'module' must come before any const or func");
  check_error("module @a\nmodule @b\n", 2, 1, "second 'module' declaration");
  check_error("funct @f\n", 1, 1, "expected 'module', 'const' or 'func', got 'funct'");
  check_error("const @c : f32[1] = zeros\n", 1, 21,
              "expected 'file', 'splat' or 'dense' after '=', got 'zeros'");
  check_error("func @f(%x: f32[2]) (f32[2]) {\n}", 1, 21, "expected '->'");
  check_error("func @f(%x: f32[2]) -> () {\n}", 1, 6, "must return at least one value");
  check_error("func @f(%x: f32[2]) -> f32[2] {\n  %y = relu(%x) : f32[2]\n}", 2, 8,
              "expected 'call', 'for' or 'if', got 'relu'");
  check_error("func @f(%x: f32[2]) -> f32[2] {\n  %y = call @relu(%x)\n  return %y\n}", 3, 3,
              "expected ':' and the result type after the call, got 'return'");
  check_error("func @f(%x) -> f32[2] {}", 1, 11, "expected ':' after the argument name, got ')'");
}

TEST_CASE("parser error: hostile nesting and rank are bounded") {
  std::string deep = "func @f(%x: f32[2]) -> f32[2] {\n  %y = call @relu(%x) {a = " + std::string(40, '[');
  check_error(deep, 2, 61, "attribute lists nested more than 32 deep");
  // Far deeper input fails the same way instead of exhausting the stack.
  CHECK(parse_error(deep + std::string(200000, '[')).find("nested more than 32 deep") != std::string::npos);
  std::string many = "const @c : f32[";
  for (int i = 0; i < 100; ++i) many += "1,";
  many += "1] = splat 0";
  check_error(many, 1, 144, "more than 64 dimensions");
}

TEST_CASE("parser: mutated programs fail cleanly, never crash") {
  const std::string program = R"(module @m
const @w : f32[2,3] = file "f32_2x3.npy"
const @d : f32[2,2] = dense [[1, 2], [3, 4]]
func @main(%x: f32[1,2], %k: f32[2,2] donate) -> (f32[1,3], f32[4]) {
  %h = call @matmul(%x, @w) : f32[1,3]
  %p = call @softmax(%h) {axis = -1} : f32[1,3]
  %s = call @add(%k, @d) : f32[2,2]
  %r = call @reshape(%s) : f32[4]
  return (%p, %r)
}
)";
  REQUIRE(parse_error(program).empty());
  std::mt19937 rng(7);
  const char alphabet[] = "%@()[]{},:=->\"/ 0123456789.e-fiuabcdnrt\n";
  for (int round = 0; round < 4000; ++round) {
    std::string text = program;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % (sizeof(alphabet) - 1)];
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, 1, alphabet[rng() % (sizeof(alphabet) - 1)]);
          break;
      }
      if (text.empty()) text = "x";
    }
    std::string message = parse_error(text);
    if (!message.empty()) CHECK(message.rfind("t.hxir:", 0) == 0);
  }
  for (size_t n = 0; n < program.size(); ++n) {
    std::string message = parse_error(program.substr(0, n));
    if (!message.empty()) CHECK(message.rfind("t.hxir:", 0) == 0);
  }
}

}  // namespace
}  // namespace hexir::compiler::testing
