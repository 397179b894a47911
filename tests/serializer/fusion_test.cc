// Fused epilogues (fusion.h): which nodes a conv2d or matmul absorbs, which it
// must not, and that the rewritten graph stays consistent (values renumbered,
// names and readers kept) and compiles to a file the verifier accepts.
#include "fusion.h"
#include "hxir_printer.h"
#include "test_util.h"

namespace hexir::serializer::testing {
namespace {

using ops::OpId;

std::vector<OpId> ops_of(const Function& fn) {
  std::vector<OpId> ops;
  for (const Node& n : fn.nodes) ops.push_back(n.op);
  return ops;
}

// Every id in range, every result's value pointing back at its node.
void check_consistent(const Function& fn) {
  const int values = static_cast<int>(fn.values.size());
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    for (int v : fn.nodes[n].inputs) CHECK((v >= 0 && v < values));
    for (size_t r = 0; r < fn.nodes[n].results.size(); ++r) {
      const Value& value = fn.values[static_cast<size_t>(fn.nodes[n].results[r])];
      CHECK(value.node == static_cast<int>(n));
      CHECK(value.result == static_cast<int>(r));
    }
  }
  for (int v : fn.outputs) CHECK((v >= 0 && v < values));
  for (const Argument& a : fn.arguments) CHECK(fn.values[static_cast<size_t>(a.value)].kind == ValueKind::kInput);
}

TEST_CASE("fusion: matmul absorbs its bias add and activation; the activation's name stays") {
  Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
const @b : f32[3] = dense [1.0, 2.0, 3.0]
func @main(%x: f32[2,4]) -> (f32[2,3]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  %hb = call @add(@b, %h) : f32[2,3]
  %a = call @gelu(%hb) {approximate = "tanh"} : f32[2,3]
  %y = call @mul(%a, %a) : f32[2,3]
  return %y
})");
  CHECK(fuse_epilogues(m) == 2);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kMatmul, OpId::kMul});
  const Node& mm = fn.nodes[0];
  CHECK(mm.inputs.size() == 3);
  CHECK(fn.values[static_cast<size_t>(mm.inputs[2])].name == "b");
  CHECK(fn.values[static_cast<size_t>(mm.results[0])].name == "a");
  CHECK(mm.params == std::vector<int64_t>{static_cast<int64_t>(ops::Activation::kGeluTanh), 0, 0});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: conv2d absorbs clip (relu6) and keeps its own parameters first") {
  Module m = parse_ok(R"(
const @w : f32[2,1,3,3] = splat 0.1
func @main(%x: f32[1,1,5,5]) -> (f32[1,2,5,5]) {
  %c = call @conv2d(%x, @w) {pads = [1, 1, 1, 1]} : f32[1,2,5,5]
  %r = call @clip(%c) {min = 0.0, max = 6.0} : f32[1,2,5,5]
  return %r
})");
  CHECK(fuse_epilogues(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(fn.nodes.size() == 1);
  const std::vector<int64_t>& p = fn.nodes[0].params;
  REQUIRE(p.size() == 12);
  CHECK(p[2] == 1);  // pad_top
  CHECK(p[9] == static_cast<int64_t>(ops::Activation::kClip));
  CHECK(std::bit_cast<double>(p[11]) == 6.0);
  CHECK(fn.outputs[0] == fn.nodes[0].results[0]);  // the returned value is the fused result
}

TEST_CASE("fusion: a residual add absorbs the relu after it") {
  Module m = parse_ok(R"(
func @main(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3]) {
  %s = call @add(%x, %y) : f32[2,3]
  %r = call @relu(%s) : f32[2,3]
  %z = call @sub(%r, %x) : f32[2,3]
  %q = call @relu(%z) : f32[2,3]
  return %q
})");
  CHECK(fuse_epilogues(m) == 1);  // sub takes no epilogue
  check_consistent(m.functions[0]);
  REQUIRE(ops_of(m.functions[0]) == std::vector<OpId>{OpId::kAdd, OpId::kSub, OpId::kRelu});
  CHECK(m.functions[0].nodes[0].params == std::vector<int64_t>{static_cast<int64_t>(ops::Activation::kRelu), 0, 0});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: nothing is absorbed that another reader or the caller still needs") {
  SUBCASE("the raw result is read twice") {
    Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
func @main(%x: f32[2,4]) -> (f32[2,3]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  %r = call @relu(%h) : f32[2,3]
  %y = call @add(%r, %h) : f32[2,3]
  return %y
})");
    CHECK(fuse_epilogues(m) == 0);
  }
  SUBCASE("the raw result is returned") {
    Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
func @main(%x: f32[2,4]) -> (f32[2,3], f32[2,3]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  %r = call @relu(%h) : f32[2,3]
  return %h, %r
})");
    CHECK(fuse_epilogues(m) == 0);
  }
  SUBCASE("a bias that is not a constant f32[n], or that broadcasts the result") {
    Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
const @row : f32[1,3] = splat 1.0
const @col : f32[2,1] = splat 1.0
func @main(%x: f32[2,4], %b: f32[3]) -> (f32[2,3], f32[2,3], f32[2,3]) {
  %h1 = call @matmul(%x, @w) : f32[2,3]
  %y1 = call @add(%h1, %b) : f32[2,3]
  %h2 = call @matmul(%x, @w) : f32[2,3]
  %y2 = call @add(%h2, @row) : f32[2,3]
  %h3 = call @matmul(%x, @w) : f32[2,3]
  %y3 = call @add(%h3, @col) : f32[2,3]
  return %y1, %y2, %y3
})");
    CHECK(fuse_epilogues(m) == 0);
  }
  SUBCASE("a matrix-vector product has no columns to bias; exp is no epilogue") {
    Module m = parse_ok(R"(
const @v : f32[4] = splat 0.5
const @b : f32[2] = splat 1.0
func @main(%x: f32[2,4]) -> (f32[2]) {
  %h = call @matmul(%x, @v) : f32[2]
  %y = call @add(%h, @b) : f32[2]
  %e = call @exp(%y) : f32[2]
  return %e
})");
    CHECK(fuse_epilogues(m) == 0);
  }
}

TEST_CASE("fusion: the exported GELU (Div, Erf, Add, Mul, Mul) becomes one gelu, then the matmul's epilogue") {
  for (const char* tail : {
           // (x * a) * 0.5, divided by sqrt 2
           "%t = call @div(%h, @sqrt2) : f32[2,3]\n  %e = call @erf(%t) : f32[2,3]\n"
           "  %a = call @add(%e, @one) : f32[2,3]\n  %m = call @mul(%h, %a) : f32[2,3]\n"
           "  %y = call @mul(%m, @half) : f32[2,3]\n",
           // (x * 0.5) * a, multiplied by 1/sqrt 2, constants on the left
           "%q = call @mul(%h, @half) : f32[2,3]\n  %t = call @mul(@rsqrt2, %h) : f32[2,3]\n"
           "  %e = call @erf(%t) : f32[2,3]\n  %a = call @add(@one, %e) : f32[2,3]\n"
           "  %y = call @mul(%q, %a) : f32[2,3]\n"}) {
    INFO(tail);
    Module m = parse_ok(std::string(R"(
const @w : f32[4,3] = splat 0.5
const @sqrt2 : f32[] = dense [1.4142135623730951]
const @rsqrt2 : f32[] = dense [0.7071067811865476]
const @one : f32[] = splat 1.0
const @half : f32[1] = splat 0.5
func @main(%x: f32[2,4]) -> (f32[2,3]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  )") + tail + "  return %y\n}\n");
    CHECK(recognize_exported_gelu(m) == 1);
    check_consistent(m.functions[0]);
    REQUIRE(ops_of(m.functions[0]) == std::vector<OpId>{OpId::kMatmul, OpId::kGelu});
    CHECK(m.functions[0].values[static_cast<size_t>(m.functions[0].nodes[1].results[0])].name == "y");
    CHECK(fuse_epilogues(m) == 1);
    CHECK(ops_of(m.functions[0]) == std::vector<OpId>{OpId::kMatmul});
  }
  // Not a GELU: another constant, or an intermediate read elsewhere.
  Module other = parse_ok(R"(
const @two : f32[] = splat 2.0
const @one : f32[] = splat 1.0
const @half : f32[] = splat 0.5
func @main(%x: f32[3]) -> (f32[3], f32[3]) {
  %t = call @div(%x, @two) : f32[3]
  %e = call @erf(%t) : f32[3]
  %a = call @add(%e, @one) : f32[3]
  %m = call @mul(%x, %a) : f32[3]
  %y = call @mul(%m, @half) : f32[3]
  return %y, %e
})");
  CHECK(recognize_exported_gelu(other) == 0);
}

TEST_CASE("fusion: fused nodes print as attributes and parse back to the same words") {
  Module m = parse_ok(R"(
const @w : f32[2,1,3,3] = splat 0.1
const @v : f32[50,3] = splat 0.5
const @b : f32[3] = splat 0.25
func @main(%x: f32[1,1,5,5], %y: f32[1,2,5,5]) -> (f32[1,2,5,5], f32[1,2,5,5], f32[2,3]) {
  %c = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], activation = "clip", activation_alpha = 0.0, activation_beta = 6.0} : f32[1,2,5,5]
  %s = call @add(%c, %y) {activation = "leaky_relu", activation_alpha = 0.2} : f32[1,2,5,5]
  %f = call @reshape(%s) : f32[2,25]
  %g = call @concat(%f, %f) {axis = 1} : f32[2,50]
  %h = call @matmul(%g, @v, @b) {activation = "gelu_tanh"} : f32[2,3]
  %u = call @conv2d(%x, @w) {activation = "hard_sigmoid"} : f32[1,2,3,3]
  %z = call @add(%y, %y) : f32[1,2,5,5]
  return %s, %z, %h
})");
  // hard_sigmoid's defaults are written out; an unused result is still printed.
  auto text = print_hxir(m);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK(text->find("activation = \"clip\"") != std::string::npos);
  CHECK(text->find("activation = \"gelu_tanh\"") != std::string::npos);
  Module again = parse_ok(*text);
  REQUIRE(again.functions[0].nodes.size() == m.functions[0].nodes.size());
  for (size_t k = 0; k < m.functions[0].nodes.size(); ++k)
    CHECK(again.functions[0].nodes[k].params == m.functions[0].nodes[k].params);
  // Unknown activations and misplaced parameters are errors naming the attribute.
  CHECK(parse_error(R"(
func @main(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3]) {
  %s = call @add(%x, %y) {activation = "softmax"} : f32[2,3]
  return %s
})").find("activation") != std::string::npos);
  CHECK(parse_error(R"(
func @main(%x: f32[2,3], %y: f32[2,3]) -> (f32[2,3]) {
  %s = call @add(%x, %y) {activation = "relu", activation_alpha = 1.0} : f32[2,3]
  return %s
})").find("activation_alpha") != std::string::npos);
}

TEST_CASE("fusion: the compiler fuses by default, --no-fuse keeps every node, both verify") {
  const char* source = R"(
const @w : f32[4,3] = splat 0.5
const @b : f32[3] = splat 0.25
func @main(%x: f32[2,4]) -> (f32[2,3]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  %hb = call @add(%h, @b) : f32[2,3]
  %r = call @relu(%hb) : f32[2,3]
  return %r
})";
  auto instructions = [](const std::vector<uint8_t>& bytes) {
    const fb::Module* m = fb::GetModule(bytes.data() + sizeof(format::Prelude));
    return m->instructions()->size();
  };
  CompileOptions unfused;
  unfused.fuse_epilogues = false;
  CHECK(instructions(compile_ok(source)) == 1);
  CHECK(instructions(compile_ok(source, unfused)) == 3);
}

}  // namespace
}  // namespace hexir::serializer::testing
