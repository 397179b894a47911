// Strided views (docs/views.md): which transpose, slice and expand nodes
// become views, where copies are inserted (exactly where a reader needs a
// row-major operand, one per view, shared) and where not, and what the
// files say.
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

using ops::OpId;

Planned planned_views(std::string_view source, bool views = true) {
  Planned p;
  p.module = parse_ok(source);
  assign_storage(p.fn(), p.plan, views);
  assign_in_place(p.fn(), p.plan);
  place_donations(p.fn(), p.plan);
  record_last_uses(p.fn(), p.plan);
  std::string heuristic;
  Status s = plan_function_arena(p.fn(), p.plan, PlanStrategy::kArena, 64, &heuristic);
  INFO(s.to_string());
  REQUIRE(s.ok());
  return p;
}

// The instruction writing `name`.
const Instruction& writer_of(const Planned& p, std::string_view name) {
  const int id = p.id(name);
  for (const Instruction& inst : p.plan.program)
    for (int out : inst.outputs)
      if (out == id) return inst;
  FAIL("no instruction writes " << name);
  return p.plan.program.front();
}

void check_verifies(std::string_view source, const CompileOptions& options = {}) {
  std::vector<uint8_t> bytes = compile_ok(source, options);
  Result<format::VerifiedModule> v = format::verify_executable(bytes);
  CHECK_MESSAGE(v.ok(), v.status().to_string());
}

TEST_CASE("views: a transpose read by an elementwise kernel is a view, no copy") {
  constexpr const char* kSource = R"(
func @f(%x: f32[4,6]) -> (f32[6,4]) {
  %a = call @relu(%x) : f32[4,6]
  %t = call @transpose(%a) {perm = [1, 0]} : f32[6,4]
  %y = call @exp(%t) : f32[6,4]
  return %y
})";
  const Planned p = planned_views(kSource);
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kExp});
  const ValuePlan& t = p.at("t");
  CHECK(t.storage_root == p.id("a"));
  CHECK(t.view_strides == std::vector<int64_t>{1, 6});
  CHECK(t.partial_view);
  // exp reads a through a permuted view: never in place on it.
  CHECK(writer_of(p, "y").alias_mask == 0);
  CHECK(p.plan.copied_bytes == 0);
  CHECK(p.plan.copied_bytes_without_views == 96);
  // Without views: the transpose's copy, as before.
  const Planned before = planned_views(kSource, false);
  CHECK(before.ops() == std::vector<OpId>{OpId::kRelu, OpId::kTranspose, OpId::kExp});
  CHECK(before.plan.copied_bytes == 96);
  check_verifies(kSource);
}

TEST_CASE("views: readers that need row-major share one copy where the transpose was") {
  constexpr const char* kSource = R"(
const @g : f32[4] = splat 1.0
const @b : f32[4] = splat 0.0
func @f(%x: f32[4,6]) -> (f32[6,4], f32[6,4], f32[6,4]) {
  %a = call @relu(%x) : f32[4,6]
  %t = call @transpose(%a) {perm = [1, 0]} : f32[6,4]
  %s = call @softmax(%t) {axis = -1} : f32[6,4]
  %n = call @layernorm(%t, @g, @b) {axis = -1, epsilon = 1e-5} : f32[6,4]
  %e = call @exp(%t) : f32[6,4]
  return %s, %n, %e
})";
  const Planned p = planned_views(kSource);
  // One copy, in the transpose's place; every reader reads its result.
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kCopy, OpId::kSoftmax, OpId::kLayernorm, OpId::kExp});
  const Instruction& copy = p.plan.program[1];
  CHECK(copy.outputs[0] == p.id("t"));
  const ValuePlan& source = p.plan.values[static_cast<size_t>(copy.inputs[0])];
  CHECK(source.storage_root == p.id("a"));
  CHECK(source.view_strides == std::vector<int64_t>{1, 6});
  CHECK(p.at("t").storage_root == p.id("t"));
  CHECK(p.plan.copied_bytes == 96);
  CHECK(p.plan.copied_bytes_without_views == 96);  // never more than before
  check_verifies(kSource);
}

TEST_CASE("views: slices with steps, offsets and expands read in place; a contiguous slice feeds matmul") {
  constexpr const char* kSource = R"(
const @w : f32[6,3] = splat 0.5
func @f(%x: f32[8,6], %r: f32[1,6]) -> (f32[4,3], f32[2,6], f32[8,6], f32[2,3]) {
  %s = call @slice(%x) {starts = [1, 0], ends = [8, 6], steps = [2, 2]} : f32[4,3]
  %y = call @neg(%s) : f32[4,3]
  %rows = call @slice(%x) {starts = [2], ends = [4], axes = [0]} : f32[2,6]
  %m = call @matmul(%rows, @w) : f32[2,3]
  %z = call @abs(%rows) : f32[2,6]
  %e = call @expand(%r) {shape = [8, 6]} : f32[8,6]
  %q = call @mul(%e, %x) : f32[8,6]
  return %y, %z, %q, %m
})";
  const Planned p = planned_views(kSource);
  CHECK(p.ops() == std::vector<OpId>{OpId::kNeg, OpId::kMatmul, OpId::kAbs, OpId::kMul});
  CHECK(p.at("s").view_offset == 6);
  CHECK(p.at("s").view_strides == std::vector<int64_t>{12, 2});
  CHECK(p.at("rows").view_offset == 12);
  CHECK(p.at("rows").view_strides.empty());  // contiguous: matmul reads it where it lies
  CHECK(p.at("e").view_strides == std::vector<int64_t>{0, 1});
  CHECK(p.plan.copied_bytes == 0);
  CHECK(p.plan.copied_bytes_without_views == 48 + 48 + 192);
  check_verifies(kSource);
}

TEST_CASE("views: a returned view, a view read in a loop and a negative step are copied") {
  constexpr const char* kSource = R"(
func @f(%x: f32[4,6]) -> (f32[6,4], f32[2,6]) {
  %a = call @relu(%x) : f32[4,6]
  %t = call @transpose(%a) {perm = [1, 0]} : f32[6,4]
  %n = call @slice(%a) {starts = [3], ends = [-10], axes = [0], steps = [-2]} : f32[2,6]
  return %t, %n
})";
  const Planned p = planned_views(kSource);
  // t is materialized by a copy from its view; the negative step stays a slice.
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kCopy, OpId::kSlice});
  check_verifies(kSource);

  constexpr const char* kLoop = R"(
func @f(%x: f32[4,6], %n: i64[]) -> (f32[6,4]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[6,4]
  %acc0 = call @exp(%t) : f32[6,4]
  %acc = for %i = 0 to %n iter(%c = %acc0) {
    %u = call @add(%c, %t) : f32[6,4]
    yield %u
  }
  return %acc
})";
  const Planned l = planned_views(kLoop);
  // Read inside the loop: materialized once, before it.
  CHECK(l.plan.program[0].op == OpId::kCopy);
  CHECK(l.at("t").storage_root == l.id("t"));
  check_verifies(kLoop);
}

TEST_CASE("views: chains compose; a reshape that cannot stay a view materializes its input once") {
  constexpr const char* kSource = R"(
func @f(%x: f32[2,3,4]) -> (f32[4,3], f32[24]) {
  %a = call @relu(%x) : f32[2,3,4]
  %t = call @transpose(%a) {perm = [2, 1, 0]} : f32[4,3,2]
  %s = call @slice(%t) {starts = [1], ends = [2], axes = [2]} : f32[4,3,1]
  %q = call @reshape(%s) : f32[4,3]
  %y = call @sigmoid(%q) : f32[4,3]
  %f = call @reshape(%t) : f32[24]
  %z = call @tanh(%f) : f32[24]
  return %y, %z
})";
  const Planned p = planned_views(kSource);
  // f cannot view t's strides as one dim, so t is copied once (where it
  // was); f views the copy, and so do s and q (offset 1, strides of t's copy).
  CHECK(p.at("q").storage_root == p.id("t"));
  CHECK(p.at("q").view_offset == 1);
  CHECK(p.at("q").view_strides == std::vector<int64_t>{6, 2});
  CHECK(p.ops() == std::vector<OpId>{OpId::kRelu, OpId::kCopy, OpId::kSigmoid, OpId::kTanh});
  CHECK(p.at("f").storage_root == p.id("t"));
  // Before: the transpose (96 B) and the slice (48 B); after: the copy of t.
  CHECK(p.plan.copied_bytes == 96);
  CHECK(p.plan.copied_bytes_without_views == 96 + 48);
  check_verifies(kSource);
}

TEST_CASE("views: matmul reads the heads of an attention split by a transpose as they lie") {
  constexpr const char* kSource = R"(
func @f(%q: f32[16,64], %k: f32[16,64]) -> (f32[4,16,16]) {
  %q2 = call @reshape(%q) : f32[16,4,16]
  %qh = call @transpose(%q2) {perm = [1, 0, 2]} : f32[4,16,16]
  %k2 = call @reshape(%k) : f32[16,4,16]
  %kh = call @transpose(%k2) {perm = [1, 0, 2]} : f32[4,16,16]
  %s = call @matmul(%qh, %kh) {transpose_b = 1} : f32[4,16,16]
  %t = call @transpose(%s) {perm = [0, 2, 1]} : f32[4,16,16]
  %u = call @matmul(%t, %qh) : f32[4,16,16]
  return %u
})";
  const Planned p = planned_views(kSource);
  // The heads are read through their strides (row stride 64, batch stride
  // 16); t's column stride is not 1, so matmul gets a copy of it.
  CHECK(p.ops() == std::vector<OpId>{OpId::kMatmul, OpId::kCopy, OpId::kMatmul});
  CHECK(p.at("qh").view_strides == std::vector<int64_t>{16, 64, 1});
  CHECK(p.plan.copied_bytes == 4096);
  CHECK(p.plan.copied_bytes_without_views == 3 * 4096);
  check_verifies(kSource);
}

TEST_CASE("views: files carry offsets and strides; --no-views keeps the copies") {
  constexpr const char* kSource = R"(
func @f(%x: f32[4,6]) -> (f32[3,4]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[6,4]
  %s = call @slice(%t) {starts = [1], ends = [6], axes = [0], steps = [2]} : f32[3,4]
  %y = call @relu(%s) : f32[3,4]
  return %y
})";
  std::vector<uint8_t> bytes = compile_ok(kSource);
  const fb::Module* m = module_of(bytes);
  CHECK(kernel_names(m, function_named(m, "f")) == std::vector<std::string>{"relu"});
  bool found = false;
  for (const fb::Slot* s : *m->slots()) {
    if (s->name()->string_view() != "s") continue;
    found = true;
    CHECK(s->view_of() >= 0);
    CHECK(s->view_offset() == 1);
    REQUIRE(s->strides());
    CHECK(std::vector<int64_t>(s->strides()->begin(), s->strides()->end()) == std::vector<int64_t>{2, 6});
  }
  CHECK(found);
  CompileOptions no_views;
  no_views.strided_views = false;
  std::vector<uint8_t> before = compile_ok(kSource, no_views);
  const fb::Module* mb = module_of(before);
  CHECK(kernel_names(mb, function_named(mb, "f")) == std::vector<std::string>{"transpose", "slice", "relu"});
  check_verifies(kSource);
}

// The cost rule: a permuted view of a base larger than cache read by two
// kernels is copied once (each kernel would walk the base down its columns);
// read by one, or of a small base, it stays a view; slices with inner stride
// 1 and expands stay views however many read them.
TEST_CASE("views: a large permuted view read by two kernels is copied once, by one it stays a view") {
  // x: 512x256 f32, 512 KiB, over kPermutedViewCacheBytes.
  static_assert(512 * 256 * 4 > kPermutedViewCacheBytes);
  constexpr const char* kTwo = R"(
func @f(%x: f32[512,256]) -> (f32[256,512], f32[256]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[256,512]
  %a = call @relu(%t) : f32[256,512]
  %s = call @reduce_sum(%t) {axes = [1], keepdims = 0} : f32[256]
  return %a, %s
})";
  const Planned two = planned_views(kTwo);
  CHECK(two.ops() == std::vector<OpId>{OpId::kCopy, OpId::kRelu, OpId::kReduceSum});
  const Instruction& copy = two.plan.program[0];
  CHECK(copy.outputs[0] == two.id("t"));
  CHECK(two.plan.values[static_cast<size_t>(copy.inputs[0])].view_strides == std::vector<int64_t>{1, 256});
  CHECK(two.at("t").storage_root == two.id("t"));
  CHECK(two.at("t").view_strides.empty());
  CHECK(two.plan.copied_bytes == 512 * 1024);
  CHECK(two.plan.copied_bytes_without_views == 512 * 1024);
  check_verifies(kTwo);

  constexpr const char* kOne = R"(
func @f(%x: f32[512,256]) -> (f32[256,512]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[256,512]
  %a = call @relu(%t) : f32[256,512]
  return %a
})";
  const Planned one = planned_views(kOne);
  CHECK(one.ops() == std::vector<OpId>{OpId::kRelu});
  CHECK(one.at("t").view_strides == std::vector<int64_t>{1, 256});
  CHECK(one.plan.copied_bytes == 0);

  // The same two readers of a 64 KiB base: it stays in cache, no copy.
  constexpr const char* kSmall = R"(
func @f(%x: f32[128,128]) -> (f32[128,128], f32[128]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[128,128]
  %a = call @relu(%t) : f32[128,128]
  %s = call @reduce_sum(%t) {axes = [1], keepdims = 0} : f32[128]
  return %a, %s
})";
  const Planned small = planned_views(kSmall);
  CHECK(small.ops() == std::vector<OpId>{OpId::kRelu, OpId::kReduceSum});
  CHECK(small.plan.copied_bytes == 0);

  // A row slice (inner stride 1) and an expand (stride 0) read by two
  // kernels each stay views.
  constexpr const char* kRows = R"(
func @f(%x: f32[512,256], %r: f32[512,1]) -> (f32[256,256], f32[256], f32[512,256], f32[512,256]) {
  %h = call @slice(%x) {starts = [0], ends = [512], axes = [0], steps = [2]} : f32[256,256]
  %a = call @exp(%h) : f32[256,256]
  %b = call @reduce_sum(%h) {axes = [1], keepdims = 0} : f32[256]
  %e = call @expand(%r) {shape = [512, 256]} : f32[512,256]
  %c = call @add(%e, %x) : f32[512,256]
  %d = call @mul(%e, %x) : f32[512,256]
  return %a, %b, %c, %d
})";
  const Planned rows = planned_views(kRows);
  CHECK(rows.ops() == std::vector<OpId>{OpId::kExp, OpId::kReduceSum, OpId::kAdd, OpId::kMul});
  CHECK(rows.plan.copied_bytes == 0);
}

TEST_CASE("views: the cost rule copies a permuted chain once, at the view every kernel reads through") {
  // All kernels read t through its row slice s (permuted too): s is copied
  // (half of t), not t.
  constexpr const char* kBehind = R"(
func @f(%x: f32[512,256]) -> (f32[128,512], f32[128]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[256,512]
  %s = call @slice(%t) {starts = [0], ends = [128], axes = [0]} : f32[128,512]
  %a = call @relu(%s) : f32[128,512]
  %b = call @reduce_max(%s) {axes = [1], keepdims = 0} : f32[128]
  return %a, %b
})";
  const Planned behind = planned_views(kBehind);
  CHECK(behind.ops() == std::vector<OpId>{OpId::kCopy, OpId::kRelu, OpId::kReduceMax});
  CHECK(behind.plan.program[0].outputs[0] == behind.id("s"));
  CHECK(behind.at("t").view_strides == std::vector<int64_t>{1, 256});
  CHECK(behind.plan.copied_bytes == 128 * 512 * 4);
  check_verifies(kBehind);

  // t read by relu and, through s, by exp: t is copied once and s becomes a
  // row-major slice of the copy, read in place.
  constexpr const char* kBoth = R"(
func @f(%x: f32[512,256]) -> (f32[256,512], f32[128,512]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[256,512]
  %a = call @relu(%t) : f32[256,512]
  %s = call @slice(%t) {starts = [0], ends = [128], axes = [0]} : f32[128,512]
  %e = call @exp(%s) : f32[128,512]
  return %a, %e
})";
  const Planned both = planned_views(kBoth);
  CHECK(both.ops() == std::vector<OpId>{OpId::kCopy, OpId::kRelu, OpId::kExp});
  CHECK(both.plan.program[0].outputs[0] == both.id("t"));
  CHECK(both.at("s").storage_root == both.id("t"));
  CHECK(both.at("s").view_strides.empty());
  CHECK(both.plan.copied_bytes == 256 * 512 * 4);
  CHECK(both.plan.copied_bytes_without_views == 256 * 512 * 4 + 128 * 512 * 4);
  check_verifies(kBoth);
}

}  // namespace
}  // namespace hexir::compiler::testing
