// f16 and bf16 models end to end (ops/widen.h): a transformer-ish block and a
// small convnet written once per dtype with the same weights, compiled and run
// on the cpu, the half models' results within half precision of the f32
// model's, and their files holding half-size weights.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hexir/base/half.h"
#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"
#include "loaded.h"

namespace hexir::testing {
namespace {

// Values k / 128 with |k| < 128: exact in f32, f16 and bf16 alike, so the
// three models compute from the same weights and inputs.
std::vector<float> grid_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-127, 127);
  std::vector<float> out(n);
  for (float& v : out) v = static_cast<float>(dist(rng)) / 128.0f;
  return out;
}

std::string constant(const char* name, const char* dtype, const std::string& dims, size_t n, uint32_t seed) {
  std::ostringstream s;
  s << "const @" << name << " : " << dtype << "[" << dims << "] = dense [";
  const std::vector<float> v = grid_values(n, seed);
  for (size_t i = 0; i < n; ++i) s << (i ? ", " : "") << v[i];
  s << "]\n";
  return s.str();
}

// x [32,64] -> layernorm -> self-attention-like softmax(h h^T / 8) h -> + x
//   -> matmul 64x256 + b -> gelu -> matmul 256x64 + b -> + residual -> y
std::string block(const char* t) {
  const std::string T = t;
  std::string s = "module @block\n";
  s += constant("g", t, "64", 64, 1) + constant("b", t, "64", 64, 2) + constant("w1", t, "64,256", 64 * 256, 3) +
       constant("b1", t, "256", 256, 4) + constant("w2", t, "256,64", 256 * 64, 5) + constant("b2", t, "64", 64, 6);
  s += "const @scale : " + T + "[] = dense [0.125]\n";
  s += "func @main(%x: " + T + "[32,64]) -> (" + T + "[32,64]) {\n";
  s += "  %h = call @layernorm(%x, @g, @b) {axis = -1, epsilon = 1e-5} : " + T + "[32,64]\n";
  s += "  %ht = call @transpose(%h) {perm = [1, 0]} : " + T + "[64,32]\n";
  s += "  %s0 = call @matmul(%h, %ht) : " + T + "[32,32]\n";
  s += "  %s = call @mul(%s0, @scale) : " + T + "[32,32]\n";
  s += "  %p = call @softmax(%s) {axis = -1} : " + T + "[32,32]\n";
  s += "  %a = call @matmul(%p, %h) : " + T + "[32,64]\n";
  s += "  %r = call @add(%x, %a) : " + T + "[32,64]\n";
  s += "  %m0 = call @matmul(%r, @w1) : " + T + "[32,256]\n";
  s += "  %m1 = call @add(%m0, @b1) : " + T + "[32,256]\n";
  s += "  %m2 = call @gelu(%m1) : " + T + "[32,256]\n";
  s += "  %m3 = call @matmul(%m2, @w2) : " + T + "[32,64]\n";
  s += "  %m4 = call @add(%m3, @b2) : " + T + "[32,64]\n";
  s += "  %y = call @add(%r, %m4) : " + T + "[32,64]\n";
  s += "  return %y\n}\n";
  return s;
}

// x [1,8,12,12] -> conv 3x3 (16 out) + bias -> relu -> max_pool 2x2 -> reduce_mean over H, W
std::string convnet(const char* t) {
  const std::string T = t;
  std::string s = "module @convnet\n";
  s += constant("w", t, "16,8,3,3", 16 * 8 * 9, 7) + constant("wb", t, "16", 16, 8);
  s += "func @main(%x: " + T + "[1,8,12,12]) -> (" + T + "[1,16]) {\n";
  s += "  %c = call @conv2d(%x, @w, @wb) {pads = [1, 1, 1, 1]} : " + T + "[1,16,12,12]\n";
  s += "  %r = call @relu(%c) : " + T + "[1,16,12,12]\n";
  s += "  %p = call @max_pool(%r) {kernel_shape = [2, 2], strides = [2, 2]} : " + T + "[1,16,6,6]\n";
  s += "  %m = call @reduce_mean(%p) {axes = [2, 3], keepdims = 0} : " + T + "[1,16]\n";
  s += "  return %m\n}\n";
  return s;
}

std::vector<uint8_t> compile(const std::string& source) {
  auto bytes = compiler::compile_source(source, "half.hxir", "/nonexistent");
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

uint16_t to_bits(DType t, float v) { return t == DType::kBF16 ? float_to_bfloat16_bits(v) : float_to_half_bits(v); }
float from_bits(DType t, uint16_t b) {
  return t == DType::kBF16 ? std::bit_cast<float>(static_cast<uint32_t>(b) << 16) : half_bits_to_float(b);
}

// Runs the one-input, one-output model on `x` (its values as floats) and returns the result as floats.
std::vector<float> run(const std::vector<uint8_t>& compiled, DType t, const std::vector<float>& x, bool pack) {
  auto loaded = load_compiled(compiled, 2, pack);
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = loaded->module->function(0);
  const size_t width = t == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> in(x.size() * width);
  for (size_t i = 0; i < x.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(in.data() + i * 4, &x[i], 4);
    } else {
      const uint16_t b = to_bits(t, x[i]);
      std::memcpy(in.data() + i * 2, &b, 2);
    }
  }
  std::vector<vm::TensorRef> refs{{in.data(), in.size(), sig.inputs[0].type}};
  const Status status = context->invoke(sig.name, refs);
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  std::vector<uint8_t> out(sig.outputs[0].byte_size);
  REQUIRE(context->read_output(0, 0, std::span(out.data(), out.size())).ok());
  std::vector<float> y(out.size() / width);
  for (size_t i = 0; i < y.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(&y[i], out.data() + i * 4, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, out.data() + i * 2, 2);
      y[i] = from_bits(t, b);
    }
  }
  return y;
}

uint64_t constant_bytes(const std::vector<uint8_t>& compiled) {
  auto loaded = load_compiled(compiled, 1);
  uint64_t bytes = 0;
  for (const fb::Constant* c : *loaded->fb().constants()) bytes += c->byte_size();
  return bytes;
}

}  // namespace

TEST_CASE("f16 and bf16 models: within half precision of the f32 model, half-size weights") {
  struct Model {
    const char* name;
    std::string (*source)(const char*);
    size_t inputs;
  };
  for (const Model& m : {Model{"block", block, 32 * 64}, Model{"convnet", convnet, 8 * 12 * 12}}) {
    INFO(m.name);
    const std::vector<float> x = grid_values(m.inputs, 99);
    const std::vector<uint8_t> f32_model = compile(m.source("f32"));
    const std::vector<float> want = run(f32_model, DType::kF32, x, true);
    double largest = 0;
    for (float v : want) largest = std::max(largest, std::fabs(static_cast<double>(v)));
    for (DType t : {DType::kF16, DType::kBF16}) {
      const bool bf16 = t == DType::kBF16;
      INFO((bf16 ? "bf16" : "f16"));
      const std::vector<uint8_t> half_model = compile(m.source(bf16 ? "bf16" : "f16"));
      // The file keeps the weights in half: half the f32 model's constant bytes.
      CHECK(2 * constant_bytes(half_model) == constant_bytes(f32_model));
      // Each operator rounds its result once to half: a few units in the last
      // place of the largest magnitude, through the block's dozen operators.
      const double tolerance = (bf16 ? 0x1p-8 : 0x1p-11) * 16 * std::max(1.0, largest);
      for (bool pack : {true, false}) {  // weights packed to f32 panels at prepare, or converted per call
        INFO("pack_weights ", pack);
        const std::vector<float> got = run(half_model, t, x, pack);
        REQUIRE(got.size() == want.size());
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
        INFO("largest |y| ", largest, ", worst error ", worst, ", tolerance ", tolerance);
        CHECK(worst <= tolerance);
      }
    }
  }
}

}  // namespace hexir::testing
