// Fused epilogues (fusion.h): which nodes a conv2d or matmul absorbs, which it
// must not, and that the rewritten graph stays consistent (values renumbered,
// names and readers kept) and compiles to a file the verifier accepts.
#include <algorithm>

#include "hexir/compiler/hxir.h"
#include "passes/fusion.h"
#include "passes/layout.h"
#include "test_util.h"

namespace hexir::compiler::testing {
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
  CHECK(mm.params == std::vector<int64_t>{0, static_cast<int64_t>(ops::Activation::kGeluTanh), 0, 0});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: a copy of a result nothing else reads goes; its producer writes the copy's value") {
  // What the ONNX front end writes for an output behind an Identity.
  Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
const @b : f32[3] = dense [1.0, 2.0, 3.0]
func @main(%x: f32[2,4]) -> (f32[2,3], f32[2,4], f32[2,4], f32[2,4], f32[8]) {
  %h = call @matmul(%x, @w) : f32[2,3]
  %hb = call @add(%h, @b) : f32[2,3]
  %y = call @copy(%hb) : f32[2,3]
  %c = call @copy(%x) : f32[2,4]
  %n = call @neg(%x) : f32[2,4]
  %d = call @copy(%n) : f32[2,4]
  %t = call @tanh(%x) : f32[2,4]
  %r = call @reshape(%t) : f32[8]
  %e = call @copy(%r) : f32[8]
  return %y, %c, %n, %d, %e
})");
  // The bias add and the copy of its result; the copies of an input, of a
  // value returned itself and of a view stay.
  CHECK(fuse_epilogues(m) == 2);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kMatmul, OpId::kCopy, OpId::kNeg, OpId::kCopy, OpId::kTanh,
                                          OpId::kReshape, OpId::kCopy});
  CHECK(fn.values[static_cast<size_t>(fn.nodes[0].results[0])].name == "y");
  CHECK(fn.outputs[0] == fn.nodes[0].results[0]);
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: a transpose of the last two dims read only as a matmul's b becomes its transpose_b") {
  Module m = parse_ok(R"(
const @w : f32[4,3] = splat 0.5
func @main(%q: f32[2,5,4], %k: f32[2,6,4], %x: f32[3,4]) -> (f32[2,5,6], f32[2,5,3], f32[4,3]) {
  %kt = call @transpose(%k) {perm = [0, 2, 1]} : f32[2,4,6]
  %s = call @matmul(%q, %kt) : f32[2,5,6]
  %r = call @relu(%s) : f32[2,5,6]
  %wt = call @transpose(@w) {perm = [1, 0]} : f32[3,4]
  %xt = call @transpose(%x) {perm = [1, 0]} : f32[4,3]
  %u = call @matmul(%q, %xt) : f32[2,5,3]
  return %r, %u, %xt
})");
  CHECK(fuse_epilogues(m) == 2);  // the transpose of %k, then the relu
  const Function& fn = m.functions[0];
  check_consistent(fn);
  // %k's transpose went into the matmul (relu fused after it); @w's (read
  // by no matmul) and %x's (also returned) stay.
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kMatmul, OpId::kTranspose, OpId::kTranspose, OpId::kMatmul});
  const Node& mm = fn.nodes[0];
  CHECK(fn.values[static_cast<size_t>(mm.inputs[1])].name == "k");
  CHECK(mm.params == std::vector<int64_t>{1, static_cast<int64_t>(ops::Activation::kRelu), 0, 0});
  CHECK(fn.nodes[3].params.empty());
  auto text = print_hxir(m);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK_MESSAGE(text->find("call @matmul(%q, %k) {activation = \"relu\", transpose_b = 1} : f32[2,5,6]") !=
                    std::string::npos,
                *text);
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: a constant's transpose read only by a matmul is its transpose_b too (too large to fold)") {
  Module m = parse_ok(R"(
const @w : f32[3,4] = splat 0.5
func @main(%x: f32[2,4]) -> (f32[2,3]) {
  %wt = call @transpose(@w) {perm = [1, 0]} : f32[4,3]
  %y = call @matmul(%x, %wt) : f32[2,3]
  return %y
})");
  CHECK(fuse_epilogues(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kMatmul});
  CHECK(fn.values[static_cast<size_t>(fn.nodes[0].inputs[1])].name == "w");
  CHECK(fn.nodes[0].params == std::vector<int64_t>{1});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: x * sigmoid(x) is one silu, not when the sigmoid is read again or of another value") {
  Module m = parse_ok(R"(
func @main(%x: f32[2,8], %z: f32[2,8]) -> (f32[2,8], f32[2,8], f32[2,8], f32[2,8]) {
  %s = call @sigmoid(%x) : f32[2,8]
  %a = call @mul(%s, %x) : f32[2,8]
  %t = call @sigmoid(%z) : f32[2,8]
  %b = call @mul(%x, %t) : f32[2,8]
  %u = call @sigmoid(%z) : f32[2,8]
  %c = call @mul(%z, %u) : f32[2,8]
  return %a, %b, %c, %u
})");
  CHECK(fuse_epilogues(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kSilu, OpId::kSigmoid, OpId::kMul, OpId::kSigmoid, OpId::kMul});
  CHECK(fn.values[static_cast<size_t>(fn.nodes[0].inputs[0])].name == "x");
  CHECK(fn.values[static_cast<size_t>(fn.nodes[0].results[0])].name == "a");
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: a zero pad of the spatial dims read only by an unpadded average pool becomes its counted pads") {
  Module m = parse_ok(R"(
func @main(%x: f32[1,4,6,6]) -> (f32[1,4,6,6], f32[1,4,6,6], f32[1,4,6,6], f32[1,4,8,8]) {
  %p = call @pad(%x) {mode = "constant", pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[1,4,8,8]
  %a = call @average_pool(%p) {kernel_shape = [3, 3]} : f32[1,4,6,6]
  %q = call @pad(%x) {mode = "constant", pads = [0, 0, 1, 1, 0, 0, 1, 1], value = 1.0} : f32[1,4,8,8]
  %b = call @average_pool(%q) {kernel_shape = [3, 3]} : f32[1,4,6,6]
  %r = call @pad(%x) {mode = "reflect", pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[1,4,8,8]
  %c = call @average_pool(%r) {kernel_shape = [3, 3]} : f32[1,4,6,6]
  %s = call @pad(%x) {mode = "constant", pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[1,4,8,8]
  %d = call @average_pool(%s) {kernel_shape = [3, 3]} : f32[1,4,6,6]
  return %a, %b, %c, %s
})");
  // Only the first: not a pad of ones, not reflect, not a pad the caller reads too.
  CHECK(fuse_epilogues(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(fn.nodes[0].op == OpId::kAveragePool);
  CHECK(fn.values[static_cast<size_t>(fn.nodes[0].inputs[0])].name == "x");
  CHECK(fn.nodes[0].params == std::vector<int64_t>{3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1});
  const std::vector<OpId> ops = ops_of(fn);
  CHECK(std::count(ops.begin(), ops.end(), OpId::kPad) == 3);
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

TEST_CASE("fusion: a channels-last conv2d takes its activation before its layout word") {
  Module m = parse_ok(R"(
const @w : f32[4,4,3,3] = splat 0.5
func @main(%x: f32[1,5,5,4]) -> (f32[1,5,5,4]) {
  %c = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,5,5,4]
  %r = call @relu(%c) : f32[1,5,5,4]
  return %r
})");
  CHECK(fuse_epilogues(m) == 1);
  const Node& conv = m.functions[0].nodes[0];
  CHECK(conv.params == std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, static_cast<int64_t>(ops::Activation::kRelu), 0, 0, 1});
  CHECK(ops::conv2d_channels_last(conv.params));
  CHECK(compile_module(m).ok());
}

TEST_CASE("layout: channels-last 3x3s at stride 1 with 32-256 channels on maps of 100+ pixels run by Winograd") {
  Module m = parse_ok(R"(
const @w : f32[40,32,3,3] = splat 0.5
const @w2 : f32[8,40,3,3] = splat 0.25
func @main(%x: f32[1,12,10,32], %v: f32[8,32,3,3]) -> (f32[1,12,10,8], f32[1,6,5,8], f32[1,9,9,8], f32[1,12,10,8]) {
  %a = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,12,10,40]
  %b = call @conv2d(%a, @w2) {pads = [1, 1, 1, 1], strides = [2, 2], channels_last = 1} : f32[1,6,5,8]
  %c = call @conv2d(%a, @w2) {pads = [1, 1, 1, 1], channels_last = 1, activation = "relu"} : f32[1,12,10,8]
  %s = call @slice(%a) {starts = [0, 0, 0, 0], ends = [1, 9, 9, 40]} : f32[1,9,9,40]
  %d = call @conv2d(%s, @w2) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,9,9,8]
  %e = call @conv2d(%x, %v) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,12,10,8]
  return %c, %b, %d, %e
})");
  // %a: 32 channels, 120 pixels; %c: 40 channels (its fused epilogue before the word); not %b (stride 2),
  // %d (81 pixels), %e (weights not a constant).
  CHECK(choose_winograd(m) == 2);
  std::vector<bool> winograd;
  for (const Node& node : m.functions[0].nodes)
    if (node.op == OpId::kConv2d) winograd.push_back(ops::conv2d_winograd(node.params));
  CHECK(winograd == std::vector<bool>{true, false, true, false, false});
  CHECK(m.functions[0].nodes[2].params.back() == 2);
  CHECK(compile_module(m).ok());
}

TEST_CASE("layout: Winograd F(4x4, 3x3) on maps of 400+ pixels whose 4x4 tiles cover little more than 2x2 ones") {
  Module m = parse_ok(R"(
const @w : f32[32,32,3,3] = splat 0.5
func @main(%x: f32[1,28,28,32], %y: f32[1,14,14,32], %z: f32[1,22,22,32]) -> (f32[1,28,28,32], f32[1,14,14,32], f32[1,22,22,32]) {
  %a = call @conv2d(%x, @w) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,28,28,32]
  %b = call @conv2d(%y, @w) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,14,14,32]
  %c = call @conv2d(%z, @w) {pads = [1, 1, 1, 1], channels_last = 1} : f32[1,22,22,32]
  return %a, %b, %c
})");
  // 28 x 28: F(4x4) (layout word 3); 14 x 14 (196 pixels) and 22 x 22 (24 x 24 covered against 22 x 22,
  // 1.19x) F(2x2).
  CHECK(choose_winograd(m) == 3);
  std::vector<int64_t> tiles;
  for (const Node& node : m.functions[0].nodes) tiles.push_back(ops::conv2d_winograd_tile(node.params));
  CHECK(tiles == std::vector<int64_t>{4, 2, 2});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: a conv2d with a bias takes a residual add of an earlier value, then the relu after it") {
  Module m = parse_ok(R"(
const @w : f32[4,4,1,1] = splat 0.5
const @b : f32[4] = splat 0.25
func @main(%x: f32[1,4,3,3]) -> (f32[1,4,3,3]) {
  %c = call @conv2d(%x, @w, @b) : f32[1,4,3,3]
  %s = call @add(%x, %c) : f32[1,4,3,3]
  %r = call @relu(%s) : f32[1,4,3,3]
  return %r
})");
  CHECK(fuse_epilogues(m) == 2);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kConv2d});
  const Node& conv = fn.nodes[0];
  REQUIRE(conv.inputs.size() == 4);
  CHECK(fn.values[static_cast<size_t>(conv.inputs[3])].name == "x");
  CHECK(fn.values[static_cast<size_t>(conv.results[0])].name == "r");
  CHECK(conv.params.size() == 12);
  CHECK(conv.params[9] == static_cast<int64_t>(ops::Activation::kRelu));
  CHECK(compile_module(m).ok());
}

TEST_CASE("fusion: no residual from a value computed after the conv2d, nor into a conv2d without a bias") {
  Module m = parse_ok(R"(
const @w : f32[4,4,1,1] = splat 0.5
const @b : f32[4] = splat 0.25
func @main(%x: f32[1,4,3,3]) -> (f32[1,4,3,3], f32[1,4,3,3]) {
  %c = call @conv2d(%x, @w, @b) : f32[1,4,3,3]
  %later = call @neg(%x) : f32[1,4,3,3]
  %s = call @add(%c, %later) : f32[1,4,3,3]
  %d = call @conv2d(%x, @w) : f32[1,4,3,3]
  %t = call @add(%d, %x) : f32[1,4,3,3]
  return %s, %t
})");
  CHECK(fuse_epilogues(m) == 0);
  CHECK(ops_of(m.functions[0]) ==
        std::vector<OpId>{OpId::kConv2d, OpId::kNeg, OpId::kAdd, OpId::kConv2d, OpId::kAdd});
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

TEST_CASE("fusion: a mul or add takes a following scalar mul and add as its affine epilogue") {
  Module m = parse_ok(R"(
const @s : f32[1] = dense [0.5]
const @t : f32[] = dense [2.0]
const @v : f32[3] = dense [1.0, 2.0, 3.0]
func @main(%x: f32[2,3], %g: f32[2,1]) -> (f32[2,3], f32[2,3], f32[2,3]) {
  %h = call @hard_swish(%x) : f32[2,3]
  %m = call @mul(@s, %h) : f32[2,3]
  %y = call @add(%m, @t) : f32[2,3]
  %e = call @mul(%x, %g) : f32[2,3]
  %r = call @relu(%e) : f32[2,3]
  %a = call @add(%x, %x) : f32[2,3]
  %b = call @add(@t, %a) : f32[2,3]
  %c = call @mul(%b, @v) : f32[2,3]
  return %y, %r, %c
})");
  CHECK(fuse_epilogues(m) == 3);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kHardSwish, OpId::kMul, OpId::kMul, OpId::kAdd, OpId::kMul});
  const int64_t affine = static_cast<int64_t>(ops::Activation::kAffine);
  // mul(s, h) then add t: x * 1 + 2 after the mul's own product.
  CHECK(fn.nodes[1].params == std::vector<int64_t>{affine, std::bit_cast<int64_t>(1.0), std::bit_cast<int64_t>(2.0)});
  CHECK(fn.values[static_cast<size_t>(fn.nodes[1].results[0])].name == "y");
  // mul + relu (the gate times the map, then an activation).
  CHECK(fn.nodes[2].params == std::vector<int64_t>{static_cast<int64_t>(ops::Activation::kRelu), 0, 0});
  // add then add t: the missing multiply is * 1; a mul by a constant of three elements is no affine map.
  CHECK(fn.nodes[3].params == std::vector<int64_t>{affine, std::bit_cast<int64_t>(1.0), std::bit_cast<int64_t>(2.0)});
  CHECK(fn.nodes[4].params.empty());
  auto text = print_hxir(m);
  REQUIRE(text.ok());
  CHECK(text->find("activation = \"affine\"") != std::string::npos);
  Module again = parse_ok(*text);
  for (size_t k = 0; k < fn.nodes.size(); ++k) CHECK(again.functions[0].nodes[k].params == fn.nodes[k].params);
  CHECK(compile_module(m).ok());
  // A mul alone: + -0 is the exact missing add.
  Module alone = parse_ok(R"(
const @s : f32[] = dense [3.0]
func @main(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = call @add(%x, %y) : f32[4]
  %m = call @mul(%a, @s) : f32[4]
  return %m
})");
  CHECK(fuse_epilogues(alone) == 1);
  CHECK(alone.functions[0].nodes[0].params ==
        std::vector<int64_t>{affine, std::bit_cast<int64_t>(3.0), std::bit_cast<int64_t>(-0.0)});
  // Not through a value read twice, nor an infinite constant, nor a conv2d.
  Module other = parse_ok(R"(
const @inf : f32[] = dense [inf]
const @s : f32[] = dense [3.0]
const @w : f32[1,1,1,1] = dense [2.0]
func @main(%x: f32[4], %y: f32[4], %z: f32[1,1,2,2]) -> (f32[4], f32[4], f32[4], f32[1,1,2,2]) {
  %a = call @add(%x, %y) : f32[4]
  %m = call @mul(%a, @s) : f32[4]
  %b = call @add(%x, %y) : f32[4]
  %n = call @mul(%b, @inf) : f32[4]
  %c = call @conv2d(%z, @w) : f32[1,1,2,2]
  %d = call @mul(%c, @s) : f32[1,1,2,2]
  return %m, %a, %n, %d
})");
  CHECK(fuse_epilogues(other) == 0);
}

TEST_CASE("fusion: inside a loop body it fuses there, never across the body's edge; the markers stay paired") {
  Module m = parse_ok(R"(
const @w : f32[2,1,1,1] = dense [1.0, 2.0]
const @s : f32[2,1,1] = dense [2.0, 3.0]
const @t : f32[] = dense [0.5]
func @main(%x: f32[1,1,2,2], %n: i64[]) -> (f32[1,2,2,2]) {
  %c0 = call @conv2d(%x, @w) : f32[1,2,2,2]
  %r = for %i = 0 to %n step 1 iter(%a = %c0) {
    %m = call @mul(%c0, @s) : f32[1,2,2,2]
    %b = call @add(%a, %m) : f32[1,2,2,2]
    %q = call @relu(%b) : f32[1,2,2,2]
    %k = call @add(%q, @t) : f32[1,2,2,2]
    yield %k
  }
  %y = call @relu(%r) : f32[1,2,2,2]
  return %y
})");
  // conv2d's result is read inside the loop (and carried in): not folded,
  // nothing moves out of the body; inside, add + relu fuse.
  CHECK(fold_channel_affine(m) == 0);
  CHECK(fuse(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  size_t begin = fn.nodes.size(), end = fn.nodes.size();
  for (size_t n = 0; n < fn.nodes.size(); ++n) {
    if (fn.nodes[n].kind == NodeKind::kLoopBegin) begin = n;
    if (fn.nodes[n].kind == NodeKind::kLoopEnd) end = n;
  }
  REQUIRE(end < fn.nodes.size());
  CHECK(fn.nodes[begin].params[1] == static_cast<int64_t>(end));
  CHECK(fn.nodes[end].params[0] == static_cast<int64_t>(begin));
  CHECK(end - begin == 4);  // mul, add (+ relu), add in the body
  CHECK(compile_module(m).ok());
}

// The floats of a constant of the module.
std::vector<float> floats_of(const Module& m, const std::string& name) {
  for (const Constant& c : m.constants)
    if (c.name == name) {
      const std::vector<uint8_t> bytes = bytes_of(c);
      std::vector<float> out(bytes.size() / 4);
      std::memcpy(out.data(), bytes.data(), bytes.size());
      return out;
    }
  FAIL("no constant @" << name);
  return {};
}

TEST_CASE("fold_channel_affine: a batch norm's mul and add go into the convolution's weights and a new bias") {
  Module m = parse_ok(R"(
const @w : f32[2,1,1,2] = dense [1.0, 2.0, 3.0, 4.0]
const @s : f32[2,1,1] = dense [0.5, -2.0]
const @t : f32[1,2,1,1] = dense [0.25, 1.0]
func @main(%x: f32[1,1,3,3]) -> (f32[1,2,3,2]) {
  %c = call @conv2d(%x, @w) : f32[1,2,3,2]
  %m = call @mul(@s, %c) : f32[1,2,3,2]
  %y = call @add(%m, @t) : f32[1,2,3,2]
  %r = call @relu(%y) : f32[1,2,3,2]
  return %r
})");
  CHECK(fold_channel_affine(m) == 2);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kConv2d, OpId::kRelu});
  const Node& conv = fn.nodes[0];
  REQUIRE(conv.inputs.size() == 3);
  CHECK(fn.values[static_cast<size_t>(conv.results[0])].name == "y");
  CHECK(floats_of(m, "w") == std::vector<float>{0.5f, 1.0f, -6.0f, -8.0f});
  CHECK(fn.values[static_cast<size_t>(conv.inputs[2])].type == TensorType{DType::kF32, {2}});
  CHECK(floats_of(m, fn.values[static_cast<size_t>(conv.inputs[2])].name) == std::vector<float>{0.25f, 1.0f});
  // The scale and shift are read by nobody now: no slot, no bytes.
  for (const Value& v : fn.values) CHECK((v.name != "s" && v.name != "t"));
  CHECK(fuse_epilogues(m) == 1);  // then the relu
  CHECK(compile_module(m).ok());
}

TEST_CASE("fold_channel_affine: an existing bias is scaled and shifted; a scalar affine folds too") {
  Module m = parse_ok(R"(
const @w : f32[2,1,1,1] = dense [1.0, 2.0]
const @b : f32[2] = dense [1.0, -1.0]
const @s : f32[1] = dense [3.0]
const @t : f32[] = dense [0.5]
func @main(%x: f32[1,1,2,2]) -> (f32[1,2,2,2]) {
  %c = call @conv2d(%x, @w, @b) : f32[1,2,2,2]
  %m = call @mul(%c, @s) : f32[1,2,2,2]
  %y = call @add(@t, %m) : f32[1,2,2,2]
  return %y
})");
  CHECK(fold_channel_affine(m) == 2);
  REQUIRE(ops_of(m.functions[0]) == std::vector<OpId>{OpId::kConv2d});
  CHECK(floats_of(m, "w") == std::vector<float>{3.0f, 6.0f});
  CHECK(floats_of(m, "b") == std::vector<float>{3.5f, -2.5f});
  CHECK(m.functions[0].outputs[0] == m.functions[0].nodes[0].results[0]);
}

TEST_CASE("fold_channel_affine: what must not fold") {
  SUBCASE("weights another convolution uses") {
    Module m = parse_ok(R"(
const @w : f32[2,1,1,1] = dense [1.0, 2.0]
const @s : f32[2,1,1] = dense [2.0, 3.0]
func @main(%x: f32[1,1,2,2]) -> (f32[1,2,2,2], f32[1,2,2,2]) {
  %c = call @conv2d(%x, @w) : f32[1,2,2,2]
  %m = call @mul(%c, @s) : f32[1,2,2,2]
  %d = call @conv2d(%x, @w) : f32[1,2,2,2]
  return %m, %d
})");
    CHECK(fold_channel_affine(m) == 0);
  }
  SUBCASE("weights used by two functions") {
    Module m = parse_ok(R"(
const @w : f32[2,1,1,1] = dense [1.0, 2.0]
const @s : f32[2,1,1] = dense [2.0, 3.0]
func @main(%x: f32[1,1,2,2]) -> (f32[1,2,2,2]) {
  %c = call @conv2d(%x, @w) : f32[1,2,2,2]
  %m = call @mul(%c, @s) : f32[1,2,2,2]
  return %m
}
func @other(%x: f32[1,1,2,2]) -> (f32[1,2,2,2]) {
  %c = call @conv2d(%x, @w) : f32[1,2,2,2]
  return %c
})");
    CHECK(fold_channel_affine(m) == 0);
  }
  SUBCASE("a scale that is not a constant, or broadcasts along other dims, or is not finite") {
    Module m = parse_ok(R"(
const @w1 : f32[2,1,1,1] = dense [1.0, 2.0]
const @w2 : f32[2,1,1,1] = dense [1.0, 2.0]
const @w3 : f32[2,1,1,1] = dense [1.0, 2.0]
const @w4 : f32[2,1,1,1] = dense [1.0, 2.0]
const @rows : f32[2,1] = dense [2.0, 3.0]
const @wide : f32[2,2,1] = splat 2.0
const @inf : f32[1] = dense [inf]
func @main(%x: f32[1,1,2,2], %s: f32[2,1,1]) -> (f32[1,2,2,2], f32[1,2,2,2], f32[1,2,2,2], f32[1,2,2,2]) {
  %c1 = call @conv2d(%x, @w1) : f32[1,2,2,2]
  %m1 = call @mul(%c1, %s) : f32[1,2,2,2]
  %c2 = call @conv2d(%x, @w2) : f32[1,2,2,2]
  %m2 = call @mul(%c2, @rows) : f32[1,2,2,2]
  %c3 = call @conv2d(%x, @w3) : f32[1,2,2,2]
  %m3 = call @mul(%c3, @wide) : f32[1,2,2,2]
  %c4 = call @conv2d(%x, @w4) : f32[1,2,2,2]
  %m4 = call @mul(%c4, @inf) : f32[1,2,2,2]
  return %m1, %m2, %m3, %m4
})");
    CHECK(fold_channel_affine(m) == 0);
  }
  SUBCASE("a result read twice, returned, or after an epilogue") {
    Module m = parse_ok(R"(
const @w1 : f32[2,1,1,1] = dense [1.0, 2.0]
const @w2 : f32[2,1,1,1] = dense [1.0, 2.0]
const @w3 : f32[2,1,1,1] = dense [1.0, 2.0]
const @s : f32[2,1,1] = dense [2.0, 3.0]
func @main(%x: f32[1,1,2,2]) -> (f32[1,2,2,2], f32[1,2,2,2], f32[1,2,2,2], f32[1,2,2,2]) {
  %c1 = call @conv2d(%x, @w1) : f32[1,2,2,2]
  %m1 = call @mul(%c1, @s) : f32[1,2,2,2]
  %a1 = call @add(%m1, %c1) : f32[1,2,2,2]
  %c2 = call @conv2d(%x, @w2) : f32[1,2,2,2]
  %m2 = call @mul(%c2, @s) : f32[1,2,2,2]
  %c3 = call @conv2d(%x, @w3) {activation = "relu"} : f32[1,2,2,2]
  %m3 = call @mul(%c3, @s) : f32[1,2,2,2]
  return %a1, %m2, %c2, %m3
})");
    CHECK(fold_channel_affine(m) == 0);
  }
  SUBCASE("a mul that broadcasts the result to a larger shape") {
    Module m = parse_ok(R"(
const @w : f32[2,1,1,1] = dense [1.0, 2.0]
const @s : f32[3,2,1,1] = splat 2.0
func @main(%x: f32[1,1,2,2]) -> (f32[3,2,2,2]) {
  %c = call @conv2d(%x, @w) : f32[1,2,2,2]
  %m = call @mul(%c, @s) : f32[3,2,2,2]
  return %m
})");
    CHECK(fold_channel_affine(m) == 0);
  }
}

TEST_CASE("fold_input_affine: x * s + t before an unpadded convolution (grouped) goes into its weights and bias") {
  Module m = parse_ok(R"(
const @w : f32[4,1,1,2] = dense [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
const @s : f32[1] = dense [2.0]
const @t : f32[2,1,1] = dense [0.5, -1.0]
func @main(%x: f32[1,2,3,3]) -> (f32[1,4,3,2]) {
  %m = call @mul(%x, @s) : f32[1,2,3,3]
  %a = call @add(%m, @t) : f32[1,2,3,3]
  %c = call @conv2d(%a, @w) {groups = 2} : f32[1,4,3,2]
  return %c
})");
  CHECK(fold_input_affine(m) == 2);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kConv2d});
  const Node& conv = fn.nodes[0];
  CHECK(fn.values[static_cast<size_t>(conv.inputs[0])].name == "x");
  CHECK(floats_of(m, "w") == std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16});
  REQUIRE(conv.inputs.size() == 3);
  // Output channels 0, 1 read input channel 0 (t = 0.5), 2, 3 channel 1 (t = -1).
  CHECK(floats_of(m, fn.values[static_cast<size_t>(conv.inputs[2])].name) ==
        std::vector<float>{1.5f, 3.5f, -11.0f, -15.0f});
  CHECK(compile_module(m).ok());
}

TEST_CASE("fold_input_affine: not before a padded convolution, nor when x * s is read elsewhere") {
  Module m = parse_ok(R"(
const @w1 : f32[2,2,3,3] = splat 1.0
const @w2 : f32[2,2,1,1] = splat 1.0
const @s : f32[2,1,1] = dense [2.0, 3.0]
func @main(%x: f32[1,2,3,3]) -> (f32[1,2,3,3], f32[1,2,3,3], f32[1,2,3,3]) {
  %m1 = call @mul(%x, @s) : f32[1,2,3,3]
  %c1 = call @conv2d(%m1, @w1) {pads = [1, 1, 1, 1]} : f32[1,2,3,3]
  %m2 = call @mul(%x, @s) : f32[1,2,3,3]
  %c2 = call @conv2d(%m2, @w2) : f32[1,2,3,3]
  return %c1, %c2, %m2
})");
  CHECK(fold_input_affine(m) == 0);
}

TEST_CASE("trim_dead_taps: the window cut to the taps some output reads inside the input, the pads moved") {
  Module m = parse_ok(R"(
const @w : f32[2,1,3,3] = dense [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0]
const @v : f32[2,1,3,3] = splat 1.0
const @u : f32[2,1,3,3] = splat 1.0
func @main(%x: f32[1,1,4,4], %y: f32[1,4,4,1]) -> (f32[1,2,4,4], f32[1,2,4,4], f32[1,4,4,2]) {
  %a = call @conv2d(%x, @w) {pads = [4, 1, 4, 1], dilations = [4, 1]} : f32[1,2,4,4]
  %b = call @conv2d(%x, @v) {pads = [1, 1, 1, 1]} : f32[1,2,4,4]
  %c = call @conv2d(%y, @u) {pads = [4, 4, 4, 4], dilations = [4, 4], channels_last = 1} : f32[1,4,4,2]
  return %a, %b, %c
})");
  // %a: rows at -4, 0, +4 of a 4-row map: only the middle one; the columns all live.
  // %b: every tap live. %c: channels-last (after layout): left alone.
  CHECK(trim_dead_taps(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  const Node& a = fn.nodes[0];
  CHECK(a.params == std::vector<int64_t>{1, 1, 0, 1, 0, 1, 4, 1, 1});
  const Value& w = fn.values[static_cast<size_t>(a.inputs[1])];
  CHECK(w.type.dims == std::vector<int64_t>{2, 1, 1, 3});
  CHECK(floats_of(m, "w") == std::vector<float>{4, 5, 6, 14, 15, 16});
  CHECK(fn.values[static_cast<size_t>(fn.nodes[1].inputs[1])].type.dims == std::vector<int64_t>{2, 1, 3, 3});
  CHECK(compile_module(m).ok());
}

TEST_CASE("channel_affine_as_conv: a per-channel mul then add no convolution took becomes a depthwise 1x1 conv2d") {
  // DenseNet's pre-activation batch norm: after a concat, before a relu.
  Module m = parse_ok(R"(
const @s : f32[3,1,1] = dense [2.0, -1.0, 0.5]
const @t : f32[1,3,1,1] = dense [1.0, 0.0, -3.0]
func @main(%x: f32[1,2,4,4], %y: f32[1,1,4,4]) -> (f32[1,3,4,4]) {
  %c = call @concat(%x, %y) {axis = 1} : f32[1,3,4,4]
  %m = call @mul(@s, %c) : f32[1,3,4,4]
  %a = call @add(@t, %m) : f32[1,3,4,4]
  %r = call @relu(%a) : f32[1,3,4,4]
  return %r
})");
  CHECK(channel_affine_as_conv(m) == 1);
  Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kConcat, OpId::kConv2d, OpId::kRelu});
  const Node& conv = fn.nodes[1];
  CHECK(conv.params == std::vector<int64_t>{1, 1, 0, 0, 0, 0, 1, 1, 3});
  REQUIRE(conv.inputs.size() == 3);
  CHECK(fn.values[static_cast<size_t>(conv.inputs[0])].name == "c");
  const Value& w = fn.values[static_cast<size_t>(conv.inputs[1])];
  CHECK(w.type.dims == std::vector<int64_t>{3, 1, 1, 1});
  CHECK(floats_of(m, w.name) == std::vector<float>{2.0f, -1.0f, 0.5f});
  const Value& b = fn.values[static_cast<size_t>(conv.inputs[2])];
  CHECK(b.type.dims == std::vector<int64_t>{3});
  CHECK(floats_of(m, b.name) == std::vector<float>{1.0f, 0.0f, -3.0f});
  CHECK(fn.values[static_cast<size_t>(conv.results[0])].name == "a");
  // The relu then fuses into it as into any conv2d.
  CHECK(fuse_epilogues(m) == 1);
  CHECK(compile_module(m).ok());
}

TEST_CASE("channel_affine_as_conv: what must not become a convolution") {
  Module m = parse_ok(R"(
const @s : f32[2,1,1] = dense [2.0, 3.0]
const @t : f32[2,1,1] = dense [1.0, -1.0]
const @one : f32[1] = dense [2.0]
const @full : f32[2,3,3] = splat 1.0
func @main(%x: f32[1,2,3,3], %z: f32[1,2,3,3]) -> (f32[1,2,3,3], f32[1,2,3,3], f32[1,2,3,3], f32[1,2,3,3], f32[1,2,3,3], f32[1,2,3,3]) {
  %m1 = call @mul(%x, @s) : f32[1,2,3,3]
  %a1 = call @add(%m1, @t) : f32[1,2,3,3]
  %m2 = call @mul(%x, @one) : f32[1,2,3,3]
  %a2 = call @add(%m2, @one) : f32[1,2,3,3]
  %m3 = call @mul(%x, @full) : f32[1,2,3,3]
  %a3 = call @add(%m3, @t) : f32[1,2,3,3]
  %m4 = call @mul(%x, @s) : f32[1,2,3,3]
  %a4 = call @add(%m4, %z) : f32[1,2,3,3]
  return %a1, %m1, %a2, %a3, %a4, %m4
})");
  // The product read twice, scalars (the affine epilogue's), a constant not
  // per channel, an add of a value: none.
  CHECK(channel_affine_as_conv(m) == 0);
}

TEST_CASE("recognize_exported_hard_swish: x * clip(x + 3, 0, 6) / 6 and clip(x + 3, 0, 6) / 6") {
  for (const char* body : {
           "%a = call @add(%x, @three) : f32[2,3]\n  %c = call @clip(%a) {min = 0.0, max = 6.0} : f32[2,3]\n"
           "  %m = call @mul(%x, %c) : f32[2,3]\n  %y = call @div(%m, @six) : f32[2,3]\n",
           "%a = call @add(@three, %x) : f32[2,3]\n  %c = call @clip(%a) {min = 0.0, max = 6.0} : f32[2,3]\n"
           "  %m = call @mul(%c, %x) : f32[2,3]\n  %y = call @mul(%m, @sixth) : f32[2,3]\n",
           "%a = call @add(%x, @three) : f32[2,3]\n  %c = call @clip(%a) {min = 0.0, max = 6.0} : f32[2,3]\n"
           "  %h = call @div(%c, @six) : f32[2,3]\n  %y = call @mul(%x, %h) : f32[2,3]\n"}) {
    INFO(body);
    Module m = parse_ok(std::string(R"(
const @three : f32[] = dense [3.0]
const @six : f32[1] = dense [6.0]
const @sixth : f32[] = dense [0.16666666666666666]
func @main(%x: f32[2,3]) -> (f32[2,3]) {
  )") + body + "  return %y\n}\n");
    CHECK(recognize_exported_hard_swish(m) == 1);
    check_consistent(m.functions[0]);
    REQUIRE(ops_of(m.functions[0]) == std::vector<OpId>{OpId::kHardSwish});
    CHECK(m.functions[0].values[static_cast<size_t>(m.functions[0].nodes[0].results[0])].name == "y");
    CHECK(m.functions[0].values.size() == 2);  // x and y: the constants are read by nobody
  }
  Module sigmoid = parse_ok(R"(
const @three : f32[] = dense [3.0]
const @six : f32[] = dense [6.0]
func @main(%x: f32[2,3]) -> (f32[2,3]) {
  %a = call @add(%x, @three) : f32[2,3]
  %c = call @clip(%a) {min = 0.0, max = 6.0} : f32[2,3]
  %h = call @div(%c, @six) : f32[2,3]
  %y = call @mul(%h, %h) : f32[2,3]
  return %y
})");
  CHECK(recognize_exported_hard_swish(sigmoid) == 1);
  REQUIRE(ops_of(sigmoid.functions[0]) == std::vector<OpId>{OpId::kHardSigmoid, OpId::kMul});
  CHECK(std::bit_cast<double>(sigmoid.functions[0].nodes[0].params[0]) == static_cast<double>(1.0f / 6.0f));
  // Not these: another clip, another constant, an intermediate read elsewhere.
  Module other = parse_ok(R"(
const @three : f32[] = dense [3.0]
const @two : f32[] = dense [2.0]
const @six : f32[] = dense [6.0]
func @main(%x: f32[2,3]) -> (f32[2,3], f32[2,3], f32[2,3]) {
  %a1 = call @add(%x, @three) : f32[2,3]
  %c1 = call @clip(%a1) {min = 0.0, max = 5.0} : f32[2,3]
  %m1 = call @mul(%x, %c1) : f32[2,3]
  %y1 = call @div(%m1, @six) : f32[2,3]
  %a2 = call @add(%x, @two) : f32[2,3]
  %c2 = call @clip(%a2) {min = 0.0, max = 6.0} : f32[2,3]
  %m2 = call @mul(%x, %c2) : f32[2,3]
  %y2 = call @div(%m2, @six) : f32[2,3]
  %a3 = call @add(%x, @three) : f32[2,3]
  %c3 = call @clip(%a3) {min = 0.0, max = 6.0} : f32[2,3]
  %m3 = call @mul(%x, %c3) : f32[2,3]
  %y3 = call @div(%m3, @six) : f32[2,3]
  %z3 = call @add(%y3, %c3) : f32[2,3]
  return %y1, %y2, %z3
})");
  CHECK(recognize_exported_hard_swish(other) == 0);
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

TEST_CASE("fuse_separable: a depthwise conv2d read only by a 1x1 becomes one separable_conv2d at the 1x1's place") {
  // BlazeFace's block: a depthwise without a bias, a 1x1 with one, the
  // residual add and relu (fused into the 1x1 first).
  Module m = parse_ok(R"(
const @dw : f32[4,1,3,3] = splat 0.1
const @pw : f32[6,4,1,1] = splat 0.5
const @b : f32[6] = splat 0.25
func @main(%x: f32[1,4,5,7], %r: f32[1,6,5,7]) -> (f32[1,6,5,7]) {
  %d = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 4} : f32[1,4,5,7]
  %c = call @conv2d(%d, @pw, @b) : f32[1,6,5,7]
  %s = call @add(%c, %r) : f32[1,6,5,7]
  %y = call @relu(%s) : f32[1,6,5,7]
  return %y
})");
  CHECK(fuse_epilogues(m) == 2);
  CHECK(fuse_separable(m) == 1);
  const Function& fn = m.functions[0];
  check_consistent(fn);
  REQUIRE(ops_of(fn) == std::vector<OpId>{OpId::kSeparableConv2d});
  const Node& node = fn.nodes[0];
  std::vector<std::string> inputs;
  for (int v : node.inputs) inputs.push_back(fn.values[static_cast<size_t>(v)].name);
  CHECK(inputs == std::vector<std::string>{"x", "dw", "pw", "b", "r"});  // pw's bias only: biases word 2
  CHECK(fn.values[static_cast<size_t>(node.results[0])].name == "y");
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  CHECK(node.params == std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 4, 0, 0, 0, relu, 0, 0, 2});
  // It prints as attributes and parses back to the same words.
  auto text = print_hxir(m);
  REQUIRE_MESSAGE(text.ok(), text.status().to_string());
  CHECK(text->find("@separable_conv2d") != std::string::npos);
  CHECK(text->find("biases = [0, 1]") != std::string::npos);
  Module again = parse_ok(*text);
  CHECK(again.functions[0].nodes[0].params == node.params);
  CHECK(compile_module(m).ok());
}

TEST_CASE("fuse_separable: not when the depthwise result is read twice, nor before a 3x3, a strided 1x1 or a channels-last one") {
  Module m = parse_ok(R"(
const @dw : f32[4,1,3,3] = splat 0.1
const @pw : f32[6,4,1,1] = splat 0.5
const @w3 : f32[6,4,3,3] = splat 0.5
func @main(%x: f32[1,4,5,7]) -> (f32[1,6,5,7], f32[1,4,5,7], f32[1,6,5,7], f32[1,6,3,4], f32[1,5,7,6]) {
  %d = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 4} : f32[1,4,5,7]
  %c = call @conv2d(%d, @pw) : f32[1,6,5,7]
  %e = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 4} : f32[1,4,5,7]
  %f = call @conv2d(%e, @w3) {pads = [1, 1, 1, 1]} : f32[1,6,5,7]
  %g = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 4} : f32[1,4,5,7]
  %h = call @conv2d(%g, @pw) {strides = [2, 2]} : f32[1,6,3,4]
  %k = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 4} : f32[1,4,5,7]
  %kt = call @transpose(%k) {perm = [0, 2, 3, 1]} : f32[1,5,7,4]
  %l = call @conv2d(%kt, @pw) {channels_last = 1} : f32[1,5,7,6]
  return %c, %d, %f, %h, %l
})");
  CHECK(fuse_separable(m) == 0);
  // A depthwise row past 8192 floats (the operator's rule) stays apart too.
  Module wide = parse_ok(R"(
const @dw : f32[16,1,3,3] = splat 0.1
const @pw : f32[6,16,1,1] = splat 0.5
func @main(%x: f32[1,16,2,520]) -> (f32[1,6,2,520]) {
  %d = call @conv2d(%x, @dw) {pads = [1, 1, 1, 1], groups = 16} : f32[1,16,2,520]
  %c = call @conv2d(%d, @pw) : f32[1,6,2,520]
  return %c
})");
  CHECK(fuse_separable(wide) == 0);
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
}  // namespace hexir::compiler::testing
