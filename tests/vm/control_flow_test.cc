// Issue 11: counted loops in .hxir, lowered to LoopBegin/LoopNext, run by
// the VM's program counter with every value at a static arena offset: the
// results, the in-place carried values, zero allocations and uploads per
// invoke however many iterations, the free-at-last-use baseline's
// per-iteration allocations, and the front end's errors.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"

namespace hexir::vm {
namespace {

using compiler::PlanStrategy;

struct Aligned {
  std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
  size_t size = 0;
  explicit Aligned(const std::vector<uint8_t>& bytes) : size(bytes.size()) {
    data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    std::memcpy(data.get(), bytes.data(), size);
  }
  std::span<const uint8_t> span() const { return {data.get(), size}; }
};

std::vector<uint8_t> compile(const std::string& source, PlanStrategy plan = PlanStrategy::kArena) {
  compiler::CompileOptions options;
  options.plan = plan;
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(source, "loop.hxir", ".", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

std::string compile_error(const std::string& source) {
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(source, "loop.hxir", ".");
  REQUIRE_MESSAGE(!bytes.ok(), "expected a compile error");
  return bytes.status().message();
}

struct Loaded {
  Aligned bytes;
  std::unique_ptr<hal::Device> device;
  std::optional<Module> module;
  std::optional<Program> program;
  std::optional<Context> context;
  explicit Loaded(const std::string& source, PlanStrategy plan = PlanStrategy::kArena)
      : bytes(compile(source, plan)) {
    Result<std::unique_ptr<hal::Device>> d = hal::create_device("cpu?threads=1");
    REQUIRE(d.ok());
    device = std::move(d).value();
    Result<Module> m = Module::load_buffer(bytes.span());
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    module.emplace(std::move(m).value());
    Result<Program> p = Program::prepare(*module, *device);
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    program.emplace(std::move(p).value());
    Result<Context> c = Context::create(*program);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    context.emplace(std::move(c).value());
  }
};

TensorRef f32(std::vector<float>& v, std::vector<int64_t> dims) {
  return {v.data(), v.size() * 4, TensorType{DType::kF32, std::move(dims)}};
}
TensorRef i64(int64_t& v) { return {&v, 8, TensorType{DType::kI64, {}}}; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// a <- a + x, n times: x * (n + 1). The add runs in place on the carried value.
constexpr const char* kAccumulate = R"(module @loop
func @main(%x: f32[4], %n: i64[]) -> f32[4] {
  %r = for %i = 0 to %n step 1 iter(%a = %x) {
    %a2 = call @add(%a, %x) : f32[4]
    yield %a2
  }
  return %r
}
)";

TEST_CASE("a counted loop runs n times; 1,000 iterations allocate and upload nothing") {
  Loaded l(kAccumulate);
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<float> x = {1, 2, 3, -4}, out(4, 0);
    int64_t trip = n;
    const TensorRef inputs[] = {f32(x, {4}), i64(trip)};
    const TensorRef outputs[] = {f32(out, {4})};
    const hal::DeviceCounters before = l.device->counters();
    Status s = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    const hal::DeviceCounters after = l.device->counters();
    CHECK(after.allocations == before.allocations);
    CHECK(after.uploads == before.uploads);
    for (size_t k = 0; k < 4; ++k) CHECK(out[k] == x[k] * static_cast<float>(n + 1));
  }
  // One add per iteration, no copy: the yield is the add's in-place write.
  const std::vector<InstructionInfo> list = l.module->instructions(0);
  int adds = 0, copies = 0;
  for (const InstructionInfo& info : list) {
    adds += info.op == "add";
    copies += info.op == "copy";
  }
  CHECK(adds == 1);
  CHECK(copies == 1);  // the initial value into the carried value
}

TEST_CASE("two carried values that swap, the induction variable, literal bounds and a step") {
  // (a, b) -> (b, a + b): Fibonacci; s sums the induction variable 0, 3, 6, 9.
  Loaded l(R"(module @fib
func @main(%x: f32[2], %y: f32[2], %z: f32[]) -> (f32[2], f32[2], f32[]) {
  %r:2 = for %i = 0 to 10 step 1 iter(%a = %x, %b = %y) {
    %c = call @add(%a, %b) : f32[2]
    yield %b, %c
  }
  %s = for %j = 0 to 12 step 3 iter(%t = %z) {
    %f = call @cast(%j) {to = "f32"} : f32[]
    %t2 = call @add(%t, %f) : f32[]
    yield %t2
  }
  return %r#0, %r#1, %s
}
)");
  std::vector<float> x = {0, 1}, y = {1, 1}, z = {0.5f}, r0(2), r1(2), s(1);
  const TensorRef inputs[] = {f32(x, {2}), f32(y, {2}), f32(z, {})};
  const TensorRef outputs[] = {f32(r0, {2}), f32(r1, {2}), f32(s, {})};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  // Reference: the same recurrence on the host.
  for (size_t k = 0; k < 2; ++k) {
    float a = x[k], b = y[k];
    for (int i = 0; i < 10; ++i) {
      const float c = a + b;
      a = b;
      b = c;
    }
    CHECK(r0[k] == a);
    CHECK(r1[k] == b);
  }
  CHECK(s[0] == 0.5f + 0 + 3 + 6 + 9);
}

TEST_CASE("nested loops: the inner loop's carried value restarts from the outer's") {
  Loaded l(R"(module @nest
func @main(%x: f32[3], %n: i64[], %m: i64[]) -> f32[3] {
  %r = for %i = 0 to %n step 1 iter(%a = %x) {
    %b = for %j = 0 to %m step 1 iter(%c = %a) {
      %c2 = call @add(%c, %x) : f32[3]
      yield %c2
    }
    %a2 = call @mul(%b, %x) : f32[3]
    yield %a2
  }
  return %r
}
)");
  std::vector<float> x = {1, 0.5f, 2}, out(3);
  int64_t n = 3, m = 4;
  const TensorRef inputs[] = {f32(x, {3}), i64(n), i64(m)};
  const TensorRef outputs[] = {f32(out, {3})};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (size_t k = 0; k < 3; ++k) {
    float a = x[k];
    for (int i = 0; i < n; ++i) {
      float c = a;
      for (int j = 0; j < m; ++j) c = c + x[k];
      a = c * x[k];
    }
    CHECK(out[k] == a);
  }
}

TEST_CASE("free-at-last-use runs loops too, and counts the per-iteration allocations") {
  // %t is a value of the body: the dynamic plan allocates it every iteration.
  const std::string source = R"(module @dyn
func @main(%x: f32[64], %n: i64[]) -> f32[64] {
  %r = for %i = 0 to %n step 1 iter(%a = %x) {
    %t = call @mul(%a, %x) : f32[64]
    %a2 = call @sub(%t, %a) : f32[64]
    yield %a2
  }
  return %r
}
)";
  std::vector<float> x(64), expected(64);
  for (size_t k = 0; k < 64; ++k) x[k] = 0.5f + 0.01f * static_cast<float>(k);
  int64_t n = 50;
  for (size_t k = 0; k < 64; ++k) {
    float a = x[k];
    for (int i = 0; i < n; ++i) a = a * x[k] - a;
    expected[k] = a;
  }
  uint64_t static_allocations = 0, dynamic_allocations = 0;
  for (PlanStrategy plan : {PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    Loaded l(source, plan);
    std::vector<float> out(64);
    const TensorRef inputs[] = {f32(x, {64}), i64(n)};
    const TensorRef outputs[] = {f32(out, {64})};
    const hal::DeviceCounters before = l.device->counters();
    Status st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    const uint64_t allocations = l.device->counters().allocations - before.allocations;
    (plan == PlanStrategy::kArena ? static_allocations : dynamic_allocations) = allocations;
    CHECK(out == expected);
  }
  CHECK(static_allocations == 0);
  CHECK(dynamic_allocations >= static_cast<uint64_t>(n));  // at least %t, every iteration
}

TEST_CASE("a donated input carried through a loop is updated in the caller's buffer, no copy") {
  // The KV-cache pattern: the cache comes in donated, each iteration writes
  // row %i in place, the final cache is returned.
  Loaded l(R"(module @cache
const @zero : i64[] = splat 0
const @five : f32[1,1] = splat 5.0
func @main(%cache: f32[8,4] donate, %row: f32[1,4], %n: i64[]) -> (f32[8,4], f32[4]) {
  %r = for %i = 0 to %n iter(%c = %cache) {
    %scaled = call @mul(%row, %row) : f32[1,4]
    %c1 = call @update_slice(%c, %scaled, %i, @zero) : f32[8,4]
    %mark = call @neg(@five) : f32[1,1]
    %c2 = call @update_slice(%c1, %mark, %i, @zero) : f32[8,4]   // a chain: both in the caller's buffer
    yield %c2
  }
  %s = call @reduce_sum(%r) {axes = [0]} : f32[4]
  return %r, %s
}
)");
  const FunctionSignature& sig = l.module->function(0);
  CHECK(sig.inputs[0].donated_to == 0);  // the cache is output 0's buffer
  for (const InstructionInfo& info : l.module->instructions(0)) CHECK(info.op != "copy");
  std::vector<float> cache(32, -1.0f), row = {1, 2, 3, 4}, sum(4);
  int64_t n = 5;
  const TensorRef inputs[] = {f32(cache, {8, 4}), f32(row, {1, 4}), i64(n)};
  const TensorRef outputs[] = {f32(cache, {8, 4}), f32(sum, {4})};
  const hal::DeviceCounters before = l.device->counters();
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(l.device->counters().allocations == before.allocations);
  for (size_t r = 0; r < 8; ++r)
    for (size_t k = 0; k < 4; ++k)
      CHECK(cache[r * 4 + k] == (r >= 5 ? -1.0f : k == 0 ? -5.0f : row[k] * row[k]));
  for (size_t k = 0; k < 4; ++k) CHECK(sum[k] == (k == 0 ? -25.0f - 3 : 5 * row[k] * row[k] - 3));
  for (const InstructionInfo& info : l.module->instructions(0))
    if (info.op == "update_slice") CHECK(info.result == "cache");  // writes the caller's buffer itself
}

TEST_CASE("a donated carried value whose next value cannot be written in place is copied into it") {
  // The matmul reads %a while writing (no in-place run), so the yield copies
  // its (fused) result into the donated buffer that holds %a.
  Loaded l(R"(module @copyback
const @w : f32[4,4] = splat 0.5
const @b : f32[4] = splat 1.0
func @f(%x: f32[1,4] donate, %n: i64[]) -> (f32[1,4]) {
  %r = for %i = 0 to %n step 1 iter(%a = %x) {
    %m = call @matmul(%a, @w) : f32[1,4]
    %a2 = call @add(%m, @b) : f32[1,4]
    yield %a2
  }
  return %r
}
)");
  CHECK(l.module->function(0).inputs[0].donated_to == 0);
  std::vector<float> x = {1, 2, 3, 4};
  int64_t n = 3;
  std::vector<float> expected = x;
  for (int i = 0; i < n; ++i) {
    float sum = 0;
    for (float v : expected) sum += v * 0.5f;
    for (float& v : expected) v = sum + 1.0f;
  }
  const TensorRef inputs[] = {f32(x, {1, 4}), i64(n)};
  const TensorRef outputs[] = {f32(x, {1, 4})};
  Status st = l.context->invoke(0, inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(x == expected);
}

TEST_CASE("the README's loop example compiles and runs") {
  Loaded l(R"(module @readme
func @main(%x: f32[4], %n: i64[]) -> (f32[4], f32[4], f32[]) {
  %r = for %i = 0 to %n step 1 iter(%a = %x) {
    %a2 = call @add(%a, %x) : f32[4]
    yield %a2
  }
  %q:2 = for %j = 0 to 10 iter(%b = %x, %c = %r) {
    %d = call @add(%b, %c) : f32[4]
    yield %c, %d
  }
  %z = call @reduce_sum(%r) {axes = [0]} : f32[]
  return %q#0, %q#1, %z
}
)");
  std::vector<float> x = {1, 2, 0.5f, -1}, q0(4), q1(4), z(1);
  int64_t n = 2;
  const TensorRef inputs[] = {f32(x, {4}), i64(n)};
  const TensorRef outputs[] = {f32(q0, {4}), f32(q1, {4}), f32(z, {})};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  float zsum = 0;
  for (size_t k = 0; k < 4; ++k) {
    const float r = x[k] * 3;
    zsum += r;
    float b = x[k], c = r;
    for (int j = 0; j < 10; ++j) {
      const float d = b + c;
      b = c;
      c = d;
    }
    CHECK(q0[k] == b);
    CHECK(q1[k] == c);
  }
  CHECK(z[0] == zsum);
}

TEST_CASE("if: each branch computes and yields the results; ifs inside a loop") {
  Loaded l(R"(module @branch
const @zero : f32[] = splat 0.0
func @main(%x: f32[4], %flag: bool[], %n: i64[]) -> (f32[4], f32[]) {
  %y = if %flag -> (f32[4]) {
    %a = call @mul(%x, %x) : f32[4]
    yield %a
  } else {
    %b = call @neg(%x) : f32[4]
    yield %b
  }
  // Sum the positive elements seen over n rounds, choosing per round.
  %s = for %i = 0 to %n iter(%acc = @zero) {
    %fi = call @cast(%i) {to = "f32"} : f32[]
    %first = call @less(%fi, @zero) : bool[]
    %odd:2 = if %first -> (f32[], f32[]) {
      yield %acc, %acc
    } else {
      %sum = call @reduce_sum(%y) {axes = [0]} : f32[]
      %two = call @add(%sum, %acc) : f32[]
      yield %two, %sum
    }
    yield %odd#0
  }
  return %y, %s
}
)");
  for (bool flag : {true, false}) {
    std::vector<float> x = {1, -2, 3, 0.5f}, y(4), s(1);
    uint8_t f = flag ? 1 : 0;
    int64_t n = 3;
    const TensorRef inputs[] = {f32(x, {4}), {&f, 1, TensorType{DType::kBool, {}}}, i64(n)};
    const TensorRef outputs[] = {f32(y, {4}), f32(s, {})};
    const hal::DeviceCounters before = l.device->counters();
    Status st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(l.device->counters().allocations == before.allocations);
    float sum = 0;
    for (size_t k = 0; k < 4; ++k) {
      const float expected = flag ? x[k] * x[k] : -x[k];
      CHECK(y[k] == expected);
      sum += expected;
    }
    CHECK(s[0] == 3 * sum);
  }
}

// A branch that cannot be built (the ONNX importer's If branch at shapes it
// does not support) ends in `fail`: the other branch gives the results.
constexpr const char* kFailBranch = R"(module @fail
func @main(%x: f32[4], %c: bool[]) -> f32[4] {
  %y = if %c -> (f32[4]) {
    %t = call @mul(%x, %x) : f32[4]
    %t2 = call @add(%t, %x) : f32[4]
    yield %t2
  } else {
    fail "the else-branch needs 8 kHz input"
  }
  %z = call @neg(%y) : f32[4]
  return %z
}
)";

// Index arithmetic at run time (issue 30: PyTorch's `arange < pos + 1`
// mask), and an integer division by zero: a run-time error naming the
// instruction and the element, like `fail`.
constexpr const char* kIntMask = R"(module @mask
const @one : i64[] = dense [1]
const @ar : i64[6] = dense [0, 1, 2, 3, 4, 5]
func @main(%pos: i64[], %d: i64[]) -> (bool[6], i64[6]) {
  %end = call @add(%pos, @one) : i64[]
  %mask = call @less(@ar, %end) : bool[6]
  %q = call @div(@ar, %d) : i64[6]
  return %mask, %q
}
)";

TEST_CASE("integer arithmetic at run time: a mask from a position, and division by zero fails naming the instruction") {
  Loaded l(kIntMask);
  int64_t pos = 2, d = -2;
  uint8_t mask[6] = {};
  int64_t q[6] = {};
  const TensorRef inputs[] = {i64(pos), i64(d)};
  const TensorRef outputs[] = {{mask, 6, TensorType{DType::kBool, {6}}}, {q, 48, TensorType{DType::kI64, {6}}}};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(std::vector<uint8_t>(mask, mask + 6) == std::vector<uint8_t>{1, 1, 1, 0, 0, 0});
  CHECK(std::vector<int64_t>(q, q + 6) == std::vector<int64_t>{0, 0, -1, -1, -2, -2});  // toward zero
  d = 0;
  st = l.context->invoke("main", inputs, outputs);
  REQUIRE(!st.ok());
  CHECK(st.code() == StatusCode::kInvalidArgument);
  const bool named = has(st.message(), "('div')") && has(st.message(), "integer division by zero") &&
                     has(st.message(), "result element 0 ");
  CHECK_MESSAGE(named, st.to_string());
  d = 3;  // the context is still usable
  st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(std::vector<int64_t>(q, q + 6) == std::vector<int64_t>{0, 0, 0, 1, 1, 1});
}

TEST_CASE("fail: the invoke stops with its message on the path through it, and only there") {
  for (PlanStrategy plan : {PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    Loaded l(kFailBranch, plan);
    std::vector<float> x = {1, -2, 3, 0.5f}, z(4);
    uint8_t c = 1;
    const TensorRef inputs[] = {f32(x, {4}), {&c, 1, TensorType{DType::kBool, {}}}};
    const TensorRef outputs[] = {f32(z, {4})};
    Status st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    for (size_t k = 0; k < 4; ++k) CHECK(z[k] == -(x[k] * x[k] + x[k]));
    c = 0;
    st = l.context->invoke("main", inputs, outputs);
    REQUIRE(!st.ok());
    CHECK_MESSAGE(has(st.message(), "function 'main' instruction 4 ('fail'): the else-branch needs 8 kHz input"),
                  st.to_string());
    c = 1;  // the context is still usable
    st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
  }
}

TEST_CASE("fail errors name file:line:col") {
  std::string e = compile_error("module @e\nfunc @main(%x: f32[4], %c: bool[]) -> f32[4] {\n"
                                "  %y = if %c -> (f32[4]) {\n    fail oops\n  } else {\n    yield %x\n  }\n"
                                "  return %y\n}\n");
  CHECK_MESSAGE(has(e, "loop.hxir:4:10: expected a quoted message after 'fail'"), e);
  // A loop body still yields after a fail.
  e = compile_error("module @e\nfunc @main(%x: f32[4], %n: i64[]) -> f32[4] {\n"
                    "  %r = for %i = 0 to %n iter(%a = %x) {\n    fail \"no\"\n  }\n  return %r\n}\n");
  CHECK_MESSAGE(has(e, "loop body ends without 'yield'"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4]) -> f32[4] {\n  fail \"" + std::string(5000, 'x') +
                    "\"\n  return %x\n}\n");
  CHECK_MESSAGE(has(e, "loop.hxir:3:3: a fail message holds at most 4096 bytes, got 5000"), e);
}

TEST_CASE("if errors name file:line:col") {
  auto branch = [](const std::string& then_body, const std::string& else_body,
                   const std::string& head = "%y = if %c -> (f32[4])") {
    return "module @e\nfunc @main(%x: f32[4], %c: bool[], %k: f32[]) -> f32[4] {\n  " + head + " {\n" + then_body +
           "  } else {\n" + else_body + "  }\n  return %y\n}\n";
  };
  std::string e = compile_error(branch("    yield %x\n", "    yield %k\n"));
  CHECK_MESSAGE(has(e, "loop.hxir:6:11: the else-branch yields %k (f32[]) as result 0, the if declares f32[4]"), e);
  e = compile_error(branch("    yield %x, %x\n", "    yield %x\n"));
  CHECK_MESSAGE(has(e, "loop.hxir:4:5: the then-branch yields 2 value(s), the if declares 1 result(s)"), e);
  e = compile_error(branch("    %t = call @neg(%x) : f32[4]\n    yield %t\n", "    yield %t\n"));
  CHECK_MESSAGE(has(e, "is used outside the then-branch that defines it"), e);
  e = compile_error(branch("    yield %x\n", "    yield %x\n", "%y = if %k -> (f32[4])"));
  CHECK_MESSAGE(has(e, "loop.hxir:3:8: condition %k is f32[], an if takes a bool[]"), e);
  e = compile_error(branch("    yield %x\n", "    yield %x\n", "%y, %z = if %c -> (f32[4])"));
  CHECK_MESSAGE(has(e, "the if has 1 result(s) but 2 result name(s) are given"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4], %c: bool[]) -> f32[4] {\n"
                    "  %y = if %c -> (f32[4]) {\n    yield %x\n  }\n  return %y\n}\n");
  CHECK_MESSAGE(has(e, "'else' (an if has both branches)"), e);
  e = compile_error(branch("    %t = call @neg(%x) : f32[4]\n", "    yield %x\n"));
  CHECK_MESSAGE(has(e, "the then-branch ends without 'yield'"), e);
}

TEST_CASE("call @f: another function of the module, inlined (loops and ifs inside it too)") {
  Loaded l(R"(module @calls
const @one : f32[4] = splat 1.0
func @poly(%v: f32[4]) -> f32[4] {
  %sq = call @mul(%v, %v) : f32[4]
  %p = call @add(%sq, @one) : f32[4]
  return %p
}
func @repeat(%v: f32[4], %n: i64[]) -> (f32[4], f32[4]) {
  %r = for %i = 0 to %n iter(%a = %v) {
    %b = call @poly(%a) : f32[4]
    %half = call @mul(%b, %v) : f32[4]
    yield %half
  }
  return %r, %v
}
func @main(%x: f32[4], %n: i64[]) -> (f32[4], f32[4]) {
  %y, %same = call @repeat(%x, %n) : f32[4], f32[4]
  %z = call @poly(%y) : f32[4]
  return %z, %same
}
)");
  const size_t main = l.module->find_function("main").value();
  std::vector<float> x = {0.5f, -0.25f, 0.125f, 1.0f}, z(4), same(4);
  int64_t n = 3;
  const TensorRef inputs[] = {f32(x, {4}), i64(n)};
  const TensorRef outputs[] = {f32(z, {4}), f32(same, {4})};
  Status st = l.context->invoke(main, inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (size_t k = 0; k < 4; ++k) {
    float a = x[k];
    for (int i = 0; i < n; ++i) a = (a * a + 1.0f) * x[k];
    CHECK(z[k] == a * a + 1.0f);
    CHECK(same[k] == x[k]);
  }
  std::string e = compile_error(R"(module @e
func @f(%v: f32[4]) -> f32[4] {
  return %v
}
func @main(%x: f32[2]) -> f32[4] {
  %y = call @f(%x) : f32[4]
  return %y
}
)");
  CHECK_MESSAGE(has(e, "loop.hxir:6:13: argument 0 of @f (%x) is f32[2], @f takes f32[4]"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4]) -> f32[4] {\n  %y = call @main(%x) : f32[4]\n  return %y\n}\n");
  CHECK_MESSAGE(has(e, "@main calls itself (recursion is not supported)"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4]) -> f32[4] {\n  %y = call @later(%x) : f32[4]\n  return %y\n}\n");
  CHECK_MESSAGE(has(e, "unknown kernel or function @later"), e);
}

TEST_CASE("a context's loop iteration limit ends a runaway invoke cleanly") {
  Loaded l(kAccumulate);
  REQUIRE(l.context->set_max_loop_iterations(100).ok());
  std::vector<float> x = {1, 2, 3, 4}, out(4);
  int64_t n = int64_t{1} << 40;
  const TensorRef inputs[] = {f32(x, {4}), i64(n)};
  const TensorRef outputs[] = {f32(out, {4})};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE(!st.ok());
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK_MESSAGE(has(st.message(), "loop iterations, the context's limit"), st.message());
  n = 99;  // within the limit: runs, and the count starts again each invoke
  for (int round = 0; round < 2; ++round) {
    st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(out[3] == 4 * 100.0f);
  }
}

// A loop that would run 2^62 iterations: only a bound or a cancel ends it.
constexpr int64_t kEndless = int64_t{1} << 62;

TEST_CASE("cancel from another thread stops a loop of 2^62 iterations; the next invoke runs") {
  for (PlanStrategy plan : {PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    Loaded l(kAccumulate, plan);
    CHECK_FALSE(l.context->cancel());  // nothing running: nothing happens
    std::vector<float> x = {1, 2, 3, 4}, out(4);
    int64_t n = kEndless;
    const TensorRef inputs[] = {f32(x, {4}), i64(n)};
    const TensorRef outputs[] = {f32(out, {4})};
    // The canceller retries until a cancel lands on the running invoke.
    std::thread canceller([&] {
      while (!l.context->cancel()) std::this_thread::yield();
    });
    Status st = l.context->invoke("main", inputs, outputs);
    canceller.join();
    REQUIRE(!st.ok());
    CHECK(st.code() == StatusCode::kCancelled);
    CHECK_MESSAGE(has(st.message(), "cancelled (Context::cancel) after"), st.message());
    // The cancel ended with that invoke: the next one runs to its end.
    n = 3;
    st = l.context->invoke("main", inputs, outputs);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(out[3] == 4 * 4.0f);
  }
}

TEST_CASE("a deadline stops a loop of 2^62 iterations; 0 takes it away") {
  Loaded l(kAccumulate);
  CHECK(l.context->set_deadline(std::chrono::nanoseconds(-1)).code() == StatusCode::kInvalidArgument);
  REQUIRE(l.context->set_deadline(std::chrono::milliseconds(1)).ok());
  std::vector<float> x = {1, 2, 3, 4}, out(4);
  int64_t n = kEndless;
  const TensorRef inputs[] = {f32(x, {4}), i64(n)};
  const TensorRef outputs[] = {f32(out, {4})};
  Status st = l.context->invoke("main", inputs, outputs);
  REQUIRE(!st.ok());
  CHECK(st.code() == StatusCode::kDeadlineExceeded);
  CHECK_MESSAGE(has(st.message(), "ran past its deadline (set_deadline: 1000000 ns from its start)"), st.message());
  // A generous deadline lets a short loop finish; 0 is none at all.
  n = 3;
  REQUIRE(l.context->set_deadline(std::chrono::hours(1)).ok());
  st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(out[3] == 4 * 4.0f);
  REQUIRE(l.context->set_deadline(std::chrono::nanoseconds(0)).ok());
  n = 1000;
  st = l.context->invoke("main", inputs, outputs);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(out[3] == 4 * 1001.0f);
}

TEST_CASE("one context, two threads: the second invoke is refused while the first runs") {
  Loaded l(kAccumulate);
  std::vector<float> x = {1, 2, 3, 4}, out(4), other_out(4);
  int64_t endless = kEndless, short_trip = 2;
  const TensorRef inputs[] = {f32(x, {4}), i64(endless)};
  const TensorRef outputs[] = {f32(out, {4})};
  const TensorRef other_inputs[] = {f32(x, {4}), i64(short_trip)};
  const TensorRef other_outputs[] = {f32(other_out, {4})};
  Status endless_status;
  std::thread runner([&] {
    // Refused itself while the other thread's short invoke runs: tried again.
    do endless_status = l.context->invoke("main", inputs, outputs);
    while (endless_status.code() == StatusCode::kFailedPrecondition);
  });
  // Short invokes run (or are refused) until the endless one holds the context.
  Status st;
  int wrong = 0;
  do {
    st = l.context->invoke("main", other_inputs, other_outputs);
    if (st.ok() && other_out[3] != 4 * 3.0f) ++wrong;
  } while (st.ok());
  CHECK(wrong == 0);
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK_MESSAGE(has(st.message(), "invoke: the context is already running an invoke on another thread; use one "
                                  "context per thread"),
                st.message());
  CHECK(l.context->set_profiling(true).code() == StatusCode::kFailedPrecondition);
  while (!l.context->cancel()) std::this_thread::yield();
  runner.join();
  CHECK(endless_status.code() == StatusCode::kCancelled);
}

TEST_CASE("loop errors name file:line:col") {
  auto loop = [](const std::string& body, const std::string& iter = "iter(%a = %x)",
                 const std::string& head = "%r = for") {
    return "module @e\nfunc @main(%x: f32[4], %n: i64[], %k: f32[]) -> f32[4] {\n  " + head + " %i = 0 to %n " +
           iter + " {\n" + body + "  }\n  return %r\n}\n";
  };
  std::string e = compile_error(loop("    yield %a, %a\n"));
  CHECK_MESSAGE(has(e, "loop.hxir:4:5: 'yield' gives 2 value(s)"), e);
  e = compile_error(loop("    %b = call @sum(%a) : f32[]\n    yield %k\n"));
  CHECK_MESSAGE(has(e, "loop.hxir:"), e);
  e = compile_error(loop("    yield %k\n"));
  CHECK_MESSAGE(has(e, "loop.hxir:4:11: yielded value 0 (%k) is f32[], the carried value %a is f32[4]"), e);
  e = compile_error(loop("    %b = call @neg(%a) : f32[4]\n    yield %b\n  }\n  %c = call @neg(%b) : f32[4]\n  {\n"));
  CHECK_MESSAGE(has(e, "is used outside the loop that defines it"), e);
  e = compile_error(loop("    %b = call @neg(%a) : f32[4]\n"));
  CHECK_MESSAGE(has(e, "loop body ends without 'yield'"), e);
  e = compile_error(loop("    return %a\n"));
  CHECK_MESSAGE(has(e, "'return' inside a loop body"), e);
  e = compile_error(loop("    yield %a\n", "iter(%a = %x, %b = %x)"));
  CHECK_MESSAGE(has(e, "the loop carries 2 value(s) but 1 result name(s) are given (write %r:2"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4], %n: i32[]) -> f32[4] {\n"
                    "  %r = for %i = 0 to %n iter(%a = %x) {\n    yield %a\n  }\n  return %r\n}\n");
  CHECK_MESSAGE(has(e, "loop.hxir:3:8: trip count %n is i32[], a loop bound must be i64[]"), e);
  e = compile_error("module @e\nfunc @main(%x: f32[4]) -> f32[4] {\n  yield %x\n}\n");
  CHECK_MESSAGE(has(e, "loop.hxir:3:3: 'yield' outside a loop"), e);
  e = compile_error(loop("    yield %a\n", "step 0 iter(%a = %x)"));
  CHECK_MESSAGE(has(e, "a positive integer step"), e);
}

}  // namespace
}  // namespace hexir::vm
