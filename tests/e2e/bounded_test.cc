// Bounded dynamic shapes end to end (docs/design-notes.md): a result whose
// size is data (nonzero, non_max_suppression, compress) is planned at its
// bound, invokes allocate nothing, downstream operators take the extent
// along, and the caller gets the actual shape through the C++ and C APIs;
// operators that would mix data across a bounded dim are refused at compile
// time, naming the operator and the dim.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/hexir.h"
#include "hexir/vm.h"
#include "loaded.h"

namespace hexir::testing {
namespace {

std::vector<uint8_t> compile(const std::string& source, compiler::PlanStrategy plan = compiler::PlanStrategy::kArena) {
  compiler::CompileOptions options;
  options.plan = plan;
  auto bytes = compiler::compile_source(source, "bounded.hxir", "/nonexistent", options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

Status compile_error(const std::string& source) {
  auto bytes = compiler::compile_source(source, "bounded.hxir", "/nonexistent", {});
  return bytes.ok() ? ok_status() : bytes.status();
}

// The row-major coordinates of the non-zero elements (numpy.nonzero), an independent reference.
std::vector<int64_t> reference_nonzero(const std::vector<float>& x, const std::vector<int64_t>& dims) {
  std::vector<std::vector<int64_t>> coords(dims.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == 0.0f) continue;
    size_t rest = i;
    for (size_t d = dims.size(); d-- > 0;) {
      coords[d].push_back(static_cast<int64_t>(rest % static_cast<size_t>(dims[d])));
      rest /= static_cast<size_t>(dims[d]);
    }
  }
  std::vector<int64_t> out;
  for (const auto& c : coords) out.insert(out.end(), c.begin(), c.end());
  return out;
}

const char* kNonZero = R"(module @nz
func @main(%x: f32[3,4]) -> (i64[2,<=12]) {
  %i, %n = call @nonzero(%x) : i64[2,<=12], i64[]
  return %i
}
)";

TEST_CASE("nonzero: the result has its actual shape, row-major, through the C++ API, allocating nothing") {
  for (compiler::PlanStrategy plan : {compiler::PlanStrategy::kArena, compiler::PlanStrategy::kFreeAtLastUse}) {
    auto loaded = load_compiled(compile(kNonZero, plan));
    const vm::FunctionSignature& sig = loaded->module->function(0);
    CHECK(sig.outputs[0].type.to_string() == "i64[2,<=12]");
    CHECK(sig.outputs[0].byte_size == 2 * 12 * 8);  // planned at the bound
    auto context = vm::Context::create(*loaded->program);
    REQUIRE(context.ok());
    const std::vector<std::vector<float>> inputs = {
        {0, 1, 0, 2, 0, 0, -0.0f, 3, 4, 0, 0, 5}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, std::vector<float>(12, 1.0f)};
    for (const std::vector<float>& x : inputs) {
      std::vector<float> in = x;
      vm::TensorRef ref{in.data(), in.size() * 4, sig.inputs[0].type};
      REQUIRE(context->invoke(0, {&ref, 1}).ok());
      const std::vector<int64_t> want = reference_nonzero(x, {3, 4});
      const int64_t count = static_cast<int64_t>(want.size() / 2);
      auto type = context->output_type(0, 0);
      REQUIRE(type.ok());
      CHECK(type->dims == std::vector<int64_t>{2, count});
      auto out = context->output(0, 0);
      REQUIRE(out.ok());
      CHECK(out->byte_size == static_cast<uint64_t>(count) * 2 * 8);
      std::vector<int64_t> got(static_cast<size_t>(count) * 2);
      REQUIRE(context->read_output(0, 0, {reinterpret_cast<uint8_t*>(got.data()), got.size() * 8}).ok());
      CHECK(got == want);
    }
    if (plan == compiler::PlanStrategy::kArena) CHECK(context->invoke_stats().device_allocations == 0);
  }
}

TEST_CASE("nonzero: the C API reports the bounded dim and the actual shape") {
  const std::vector<uint8_t> bytes = compile(kNonZero);
  std::vector<uint8_t> aligned(bytes.size() + 64);
  uint8_t* base = aligned.data() + (64 - reinterpret_cast<uintptr_t>(aligned.data()) % 64) % 64;
  std::memcpy(base, bytes.data(), bytes.size());
  hexir_module_t* module = nullptr;
  REQUIRE(hexir_module_load_buffer(base, bytes.size(), nullptr, &module) == nullptr);
  CHECK(hexir_module_output_bounded_dim(module, 0, 0) == 1);
  CHECK(hexir_module_output_bounded_dim(module, 0, 1) == -1);
  hexir_device_t* device = nullptr;
  REQUIRE(hexir_device_create("cpu", nullptr, &device) == nullptr);
  hexir_program_t* program = nullptr;
  REQUIRE(hexir_program_prepare(module, device, &program) == nullptr);
  hexir_context_t* context = nullptr;
  REQUIRE(hexir_context_create(program, &context) == nullptr);
  std::vector<float> x = {0, 1, 0, 2, 0, 0, 0, 3, 4, 0, 0, 5};
  const int64_t in_dims[] = {3, 4};
  hexir_tensor_t in{x.data(), x.size() * 4, HEXIR_DTYPE_F32, 2, in_dims};
  std::vector<int64_t> out_data(24, -1);
  const int64_t out_dims[] = {2, 12};
  hexir_tensor_t out{out_data.data(), out_data.size() * 8, HEXIR_DTYPE_I64, 2, out_dims};
  REQUIRE(hexir_context_invoke(context, 0, &in, 1, &out, 1) == nullptr);
  int64_t dims[4] = {};
  uint32_t rank = 0;
  REQUIRE(hexir_context_output_shape(context, 0, 0, dims, 4, &rank) == nullptr);
  CHECK(rank == 2);
  CHECK(dims[0] == 2);
  CHECK(dims[1] == 5);
  out_data.resize(10);
  CHECK(out_data == std::vector<int64_t>{0, 0, 1, 2, 2, 1, 3, 3, 0, 3});  // compacted into the caller's buffer
  hexir_status_t* small = hexir_context_output_shape(context, 0, 0, dims, 1, &rank);
  CHECK(small != nullptr);
  hexir_status_free(small);
  hexir_context_release(context);
  hexir_program_release(program);
  hexir_device_release(device);
  hexir_module_release(module);
}

TEST_CASE("a bounded dim passes through row-wise operators and is refused where data would mix across it") {
  // Transpose, gather by the indices, add: the extent travels along.
  const char* source = R"(module @pass
func @main(%x: f32[6], %t: f32[6]) -> (i64[<=6,1], f32[<=6]) {
  %i, %n = call @nonzero(%x) : i64[1,<=6], i64[]
  %it = call @transpose(%i) : i64[<=6,1]
  %flat = call @reshape(%it) : i64[<=6]
  %g = call @gather(%t, %flat) : f32[<=6]
  %y = call @add(%g, %g) : f32[<=6]
  return %it, %y
}
)";
  auto loaded = load_compiled(compile(source));
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = loaded->module->function(0);
  std::vector<float> x = {0, 3, 0, 0, 7, 1}, t = {10, 11, 12, 13, 14, 15};
  vm::TensorRef refs[] = {{x.data(), 24, sig.inputs[0].type}, {t.data(), 24, sig.inputs[1].type}};
  REQUIRE(context->invoke(0, refs).ok());
  CHECK(context->output_type(0, 0)->dims == std::vector<int64_t>{3, 1});
  CHECK(context->output_type(0, 1)->dims == std::vector<int64_t>{3});
  std::vector<float> y(3);
  REQUIRE(context->read_output(0, 1, {reinterpret_cast<uint8_t*>(y.data()), 12}).ok());
  CHECK(y == std::vector<float>{22, 28, 30});

  const Status reduce = compile_error(R"(module @mix
func @main(%x: f32[6]) -> (f32[1]) {
  %i, %n = call @nonzero(%x) : i64[1,<=6], i64[]
  %f = call @cast(%i) {to = "f32"} : f32[1,<=6]
  %s = call @reduce_sum(%f) {axes = [1]} : f32[1]
  return %s
}
)");
  CHECK_FALSE(reduce.ok());
  CHECK(reduce.message().find("@reduce_sum: operand 0 (f32[1,<=6]) has a bounded dim 1") != std::string::npos);
  const Status exact = compile_error(R"(module @exact
func @main(%x: f32[6]) -> (i64[1,6]) {
  %i, %n = call @nonzero(%x) : i64[1,6], i64[]
  return %i
}
)");
  CHECK_FALSE(exact.ok());
  CHECK(exact.message().find("i64[1,<=6]") != std::string::npos);
}

TEST_CASE("gather_nd over a bounded count of index tuples: one result row per tuple (detector post-processing)") {
  // scores > 0.5 -> nonzero -> transpose -> gather_nd(scores, tuples): the kept scores,
  // as torchvision's detectors write boolean-mask indexing.
  const char* source = R"(module @kept
const @half : f32[] = splat 0.5
func @main(%s: f32[2,3]) -> (f32[<=6]) {
  %m = call @greater(%s, @half) : bool[2,3]
  %i, %n = call @nonzero(%m) : i64[2,<=6], i64[]
  %t = call @transpose(%i) : i64[<=6,2]
  %k = call @gather_nd(%s, %t) : f32[<=6]
  return %k
}
)";
  auto loaded = load_compiled(compile(source));
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = loaded->module->function(0);
  std::vector<float> s = {0.9f, 0.1f, 0.7f, 0.2f, 0.6f, 0.5f};
  vm::TensorRef refs[] = {{s.data(), 24, sig.inputs[0].type}};
  REQUIRE(context->invoke(0, refs).ok());
  CHECK(context->output_type(0, 0)->dims == std::vector<int64_t>{3});
  std::vector<float> k(3);
  REQUIRE(context->read_output(0, 0, {reinterpret_cast<uint8_t*>(k.data()), 12}).ok());
  CHECK(k == std::vector<float>{0.9f, 0.7f, 0.6f});

  // A bounded tuple dim (the last) would change the result's rank: refused.
  const Status tuple = compile_error(R"(module @tuple
func @main(%s: f32[6], %x: f32[6]) -> (f32[1]) {
  %i, %n = call @nonzero(%x) : i64[1,<=6], i64[]
  %k = call @gather_nd(%s, %i) : f32[1]
  return %k
}
)");
  CHECK_FALSE(tuple.ok());
}


// bound: a plain value bounded at an extent computed at run time (what the
// ONNX importer composes TopK, Concat, Slice and reductions across a
// bounded dim from); unbound: the stored rows, the padding's zeros included.
const char* kBoundRows = R"(module @rows
func @main(%x: f32[5,2], %k: i64[]) -> (f32[<=5,2], f32[5,2]) {
  %n = call @copy(%k) : i64[]
  %y = call @bound(%x, %n) {dim = 0} : f32[<=5,2]
  %z = call @unbound(%y) : f32[5,2]
  return %y, %z
}
)";

TEST_CASE("bound and unbound: the rows below a run-time extent, the rest zeros; an extent past the bound fails") {
  for (compiler::PlanStrategy plan : {compiler::PlanStrategy::kArena, compiler::PlanStrategy::kFreeAtLastUse}) {
    auto loaded = load_compiled(compile(kBoundRows, plan));
    auto context = vm::Context::create(*loaded->program);
    REQUIRE(context.ok());
    const vm::FunctionSignature& sig = loaded->module->function(0);
    std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    for (int64_t k : {int64_t{0}, int64_t{3}, int64_t{5}}) {
      int64_t kk = k;
      vm::TensorRef refs[] = {{x.data(), x.size() * 4, sig.inputs[0].type}, {&kk, 8, sig.inputs[1].type}};
      REQUIRE(context->invoke(0, refs).ok());
      auto type = context->output_type(0, 0);
      REQUIRE(type.ok());
      CHECK(type->dims == std::vector<int64_t>{k, 2});
      std::vector<float> rows(static_cast<size_t>(k) * 2), stored(10);
      REQUIRE(context->read_output(0, 0, {reinterpret_cast<uint8_t*>(rows.data()), rows.size() * 4}).ok());
      REQUIRE(context->read_output(0, 1, {reinterpret_cast<uint8_t*>(stored.data()), stored.size() * 4}).ok());
      CHECK(rows == std::vector<float>(x.begin(), x.begin() + k * 2));
      for (size_t i = 0; i < stored.size(); ++i) CHECK(stored[i] == (static_cast<int64_t>(i) < k * 2 ? x[i] : 0.0f));
    }
    int64_t past = 6;
    vm::TensorRef refs[] = {{x.data(), x.size() * 4, sig.inputs[0].type}, {&past, 8, sig.inputs[1].type}};
    const Status failed = context->invoke(0, refs);
    REQUIRE(!failed.ok());
    CHECK(failed.message().find("extent 6 is outside [0, 5]") != std::string::npos);
  }
}

TEST_CASE("bound: its extent is computed at run time, and a bounded operand is unbound first") {
  CHECK(compile_error(R"(module @m
func @main(%x: f32[5], %k: i64[]) -> (f32[<=5]) {
  %y = call @bound(%x, %k) {dim = 0} : f32[<=5]
  return %y
}
)").message().find("must be computed at run time") != std::string::npos);
  CHECK(compile_error(R"(module @m
func @main(%x: f32[5], %k: i64[]) -> (f32[<=5]) {
  %n = call @copy(%k) : i64[]
  %y = call @bound(%x, %n) {dim = 0} : f32[<=5]
  %z = call @bound(%y, %n) {dim = 0} : f32[<=5]
  return %z
}
)").message().find("unbound it first") != std::string::npos);
}


TEST_CASE("nonzero under a bound given at compile time: planned at it, more rows fail the invoke naming it") {
  auto loaded = load_compiled(compile(R"(module @given
func @main(%x: f32[6]) -> (i64[1,<=2]) {
  %i, %n = call @nonzero(%x) {bound = 2} : i64[1,<=2], i64[]
  return %i
}
)"));
  auto context = vm::Context::create(*loaded->program);
  REQUIRE(context.ok());
  const vm::FunctionSignature& sig = loaded->module->function(0);
  CHECK(sig.outputs[0].byte_size == 2 * 8);
  std::vector<float> two = {0, 1, 0, 0, 2, 0}, three = {1, 1, 0, 0, 2, 0};
  vm::TensorRef ok_ref{two.data(), 24, sig.inputs[0].type};
  REQUIRE(context->invoke(0, {&ok_ref, 1}).ok());
  std::vector<int64_t> got(2);
  REQUIRE(context->read_output(0, 0, {reinterpret_cast<uint8_t*>(got.data()), 16}).ok());
  CHECK(got == std::vector<int64_t>{1, 4});
  vm::TensorRef over{three.data(), 24, sig.inputs[0].type};
  const Status failed = context->invoke(0, {&over, 1});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message().find("3 result rows exceed the bound 2") != std::string::npos);
}

}  // namespace
}  // namespace hexir::testing
