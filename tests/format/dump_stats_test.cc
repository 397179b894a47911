// Per-function memory statistics (inspect::function_stats) and how hexir-dump
// prints them, on hand-checked programs.
#include <doctest/doctest.h>

#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "sample_util.h"

namespace hexir::inspect {
namespace {

using format::verify_executable;

using testing::AlignedBytes;

// The shared tiny model (tests/format/hxe_test_builder.h):
//   %h = add(%x, @b)   @b: 16 bytes of RODATA
//   %h2 = mul(%h, @s)  @s: a 16-byte fill; in place over %h (alias bit 0)
//   %y = relu(%h2)     straight into output 0
// arena 64 bytes, lower bound 16.
TEST_CASE("dump stats: the hand-built tiny model") {
  AlignedBytes file = testing::write_hxe(testing::tiny_module_spec());
  auto verified = verify_executable(file.span());
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const FunctionStats st = function_stats(*verified, 0);
  CHECK(st.arena_size == 64);
  CHECK(st.lower_bound == 16);
  CHECK(st.percent_over == doctest::Approx(300.0));
  CHECK(st.in_place_aliases == 1);
  CHECK(st.view_aliases == 0);
  CHECK(st.constant_bytes_stored == 16);
  CHECK(st.constant_bytes_filled == 16);

  const std::vector<StorageValue> values = function_storage_values(*verified, 0);
  REQUIRE(values.size() == 2);
  CHECK(values[0].name == "%h");
  CHECK(values[0].first == 0);
  CHECK(values[0].last == 1);
  CHECK_FALSE(values[0].in_place);
  CHECK(values[1].name == "%h2");
  CHECK(values[1].first == 1);
  CHECK(values[1].last == 2);
  CHECK(values[1].in_place);
  CHECK(values[1].offset == 0);
  CHECK(values[1].size == 16);

  const PlanSvgInput picture = function_plan_picture(*verified, 0);
  REQUIRE(picture.rects.size() == 2);
  CHECK(picture.rects[1].flags == kPlanSvgAliased);
  CHECK(picture.rects[1].lower == 1);
  CHECK(picture.rects[1].upper == 3);
  CHECK(picture.lower_bound == 16);

  testing::ScratchDir dir;
  testing::write_file(dir / "tiny.hxe", file.data(), file.size());
  auto text = testing::run_command(testing::kDumpTool + " " + dir / "tiny.hxe");
  CHECK_MESSAGE(text.exit_code == 0, text.output);
  CHECK_MESSAGE(testing::contains(text.output,
                                  "stats: arena 64 B, lower bound 16 B (300.0% over); aliases: 1 in "
                                  "place, 0 views; constants: 16 B stored, 16 B filled"),
                text.output);
  auto json = testing::run_command(testing::kDumpTool + " " + dir / "tiny.hxe --json");
  CHECK(json.exit_code == 0);
  CHECK_MESSAGE(testing::contains(json.output,
                                  "\"stats\":{\"arena_size\":64,\"lower_bound\":16,\"percent_over\":300.000,"
                                  "\"in_place_aliases\":1,\"view_aliases\":0,\"constant_bytes_stored\":16,"
                                  "\"constant_bytes_filled\":16,\"recomputed_instructions\":0,\"recomputed_flops\":0,"
                                  "\"copied_bytes\":0,\"strided_views\":0,\"channels_last_convolutions\":0,\"winograd_convolutions\":0,\"winograd4_convolutions\":0}"),
                json.output);
}

// Three views (of a constant, of an arena value, of an input), two RODATA
// constants (64 + 16 bytes) and one fill (16 bytes).
constexpr const char* kViews = R"(module @views
const @w : f32[4,4] = dense [[1,2,3,4],[5,6,7,8],[9,10,11,12],[13,14,15,16]]
const @b : f32[4] = splat 0.5
const @u : f32[2,2] = dense [[1,2],[3,4]]
func @main(%x: f32[2,4]) -> (f32[4,2]) {
  %h = call @matmul(%x, @w) : f32[2,4]
  %r = call @add(%h, @b) : f32[2,4]
  %uv = call @reshape(@u) : f32[4]
  %s = call @add(%r, %uv) : f32[2,4]
  %t = call @reshape(%s) : f32[4,2]
  %xr = call @reshape(%x) : f32[4,2]
  %y = call @add(%t, %xr) : f32[4,2]
  return %y
}
)";

TEST_CASE("dump stats: views and constants of a compiled program") {
  std::vector<uint8_t> bytes = testing::compile_text(kViews);
  AlignedBytes file = testing::aligned(bytes);
  auto verified = verify_executable(file.span());
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const fb::Module& m = *verified->module;
  const fb::Function& fn = *m.functions()->Get(0);
  uint64_t aliased = 0;  // whatever the in-place pass decided, counted independently
  for (uint32_t k = 0; k < fn.instruction_count(); ++k)
    aliased += m.instructions()->Get(fn.instruction_begin() + k)->alias_mask() != 0;

  const FunctionStats st = function_stats(*verified, 0);
  CHECK(st.arena_size == fn.arena_size());
  CHECK(st.lower_bound == fn.lower_bound());
  CHECK(st.lower_bound > 0);
  CHECK(st.in_place_aliases == aliased);
  CHECK(st.view_aliases == 3);
  uint64_t named_views = 0;  // the writer names each view's value in Slot.view_of
  for (const fb::Slot* s : *m.slots()) named_views += s->view_of() >= 0;
  CHECK(named_views == 3);
  CHECK(st.constant_bytes_stored == 64 + 16);
  CHECK(st.constant_bytes_filled == 16);

  // %t (a view of %s) extends %s's live range to the last instruction.
  const std::vector<StorageValue> values = function_storage_values(*verified, 0);
  bool found = false;
  for (const StorageValue& v : values) {
    if (v.name != "%s") continue;
    found = true;
    CHECK(v.views == 1);
    CHECK(v.last == static_cast<int64_t>(fn.instruction_count()) - 1);
  }
  CHECK(found);

  testing::ScratchDir dir;
  testing::write_file(dir / "views.hxe", bytes.data(), bytes.size());
  auto json = testing::run_command(testing::kDumpTool + " " + dir / "views.hxe --json");
  CHECK(json.exit_code == 0);
  CHECK_MESSAGE(testing::contains(json.output, "\"in_place_aliases\":" + std::to_string(aliased) +
                                                   ",\"view_aliases\":3,\"constant_bytes_stored\":80,"
                                                   "\"constant_bytes_filled\":16,\"recomputed_instructions\":0,\"recomputed_flops\":0,"
                                  "\"copied_bytes\":0,\"strided_views\":0,\"channels_last_convolutions\":0,\"winograd_convolutions\":0,\"winograd4_convolutions\":0}"),
                json.output);
  auto text = testing::run_command(testing::kDumpTool + " " + dir / "views.hxe");
  CHECK_MESSAGE(testing::contains(text.output, "3 views; constants: 80 B stored, 16 B filled"), text.output);
}

// Strided views (docs/views.md): the bytes copied per invoke with and
// without views, and the views read in place, in text and JSON.
constexpr const char* kStrided = R"(module @strided
func @main(%x: f32[4,6]) -> (f32[6,4], f32[3,4]) {
  %t = call @transpose(%x) {perm = [1, 0]} : f32[6,4]
  %e = call @exp(%t) : f32[6,4]
  %s = call @slice(%t) {starts = [1], ends = [6], axes = [0], steps = [2]} : f32[3,4]
  %p = call @softmax(%s) {axis = -1} : f32[3,4]
  return %e, %p
}
)";

TEST_CASE("dump stats: bytes copied per invoke before and after strided views") {
  hexir::compiler::CompileOptions no_views;
  no_views.strided_views = false;
  std::vector<uint8_t> before = testing::compile_text(kStrided, no_views);
  std::vector<uint8_t> after = testing::compile_text(kStrided);
  AlignedBytes before_file = testing::aligned(before), after_file = testing::aligned(after);
  auto vb = verify_executable(before_file.span());
  auto va = verify_executable(after_file.span());
  REQUIRE_MESSAGE(vb.ok(), vb.status().to_string());
  REQUIRE_MESSAGE(va.ok(), va.status().to_string());
  const FunctionStats sb = function_stats(*vb, 0), sa = function_stats(*va, 0);
  CHECK(sb.copied_bytes == 96 + 48);  // the transpose and the slice
  CHECK(sb.strided_views == 0);
  CHECK(sa.copied_bytes == 48);  // softmax's row-major copy of the sliced view
  CHECK(sa.strided_views == 2);  // %t read by exp, the view the copy reads

  testing::ScratchDir dir;
  testing::write_file(dir / "after.hxe", after.data(), after.size());
  auto text = testing::run_command(testing::kDumpTool + " " + dir / "after.hxe");
  CHECK(text.exit_code == 0);
  CHECK_MESSAGE(testing::contains(text.output, "copies: 48 B per invoke (transpose, slice, expand, copy); 2 strided "
                                               "views read in place"),
                text.output);
  CHECK_MESSAGE(testing::contains(text.output, "view of #0 +0 strides [1,6]"), text.output);
  CHECK_MESSAGE(testing::contains(text.output, "view of #0 +1 strides [2,6]"), text.output);
  auto json = testing::run_command(testing::kDumpTool + " " + dir / "after.hxe --json");
  CHECK_MESSAGE(testing::contains(json.output, "\"copied_bytes\":48,\"strided_views\":2,\"channels_last_convolutions\":0,\"winograd_convolutions\":0,\"winograd4_convolutions\":0}"),
                json.output);
}

// Two 3x3 convolutions with a relu between them: channels-last, one
// conversion in (x) and one out (the returned result), none between.
constexpr const char* kTwoConvs = R"(
module @two
const @w1 : f32[8,8,3,3] = splat 0.01
const @w2 : f32[8,8,3,3] = splat -0.02
func @main(%x: f32[1,8,6,6]) -> (f32[1,8,6,6]) {
  %a = call @conv2d(%x, @w1) {pads = [1, 1, 1, 1]} : f32[1,8,6,6]
  %r = call @relu(%a) : f32[1,8,6,6]
  %b = call @conv2d(%r, @w2) {pads = [1, 1, 1, 1]} : f32[1,8,6,6]
  return %b
}
)";

TEST_CASE("dump stats: channels-last convolutions and the bytes their conversions copy") {
  hexir::compiler::CompileOptions nchw;
  nchw.channels_last = false;
  std::vector<uint8_t> before = testing::compile_text(kTwoConvs, nchw);
  std::vector<uint8_t> after = testing::compile_text(kTwoConvs);
  AlignedBytes before_file = testing::aligned(before), after_file = testing::aligned(after);
  auto vb = verify_executable(before_file.span());
  auto va = verify_executable(after_file.span());
  REQUIRE_MESSAGE(vb.ok(), vb.status().to_string());
  REQUIRE_MESSAGE(va.ok(), va.status().to_string());
  const FunctionStats sb = function_stats(*vb, 0), sa = function_stats(*va, 0);
  CHECK(sb.channels_last_convolutions == 0);
  CHECK(sb.copied_bytes == 0);
  CHECK(sa.channels_last_convolutions == 2);
  CHECK(sa.copied_bytes == 2 * 8 * 36 * 4);  // x in, %b out

  testing::ScratchDir dir;
  testing::write_file(dir / "after.hxe", after.data(), after.size());
  auto text = testing::run_command(testing::kDumpTool + " " + dir / "after.hxe");
  CHECK(text.exit_code == 0);
  CHECK_MESSAGE(testing::contains(text.output, "channels-last: 2 conv2d instructions"), text.output);
}

TEST_CASE("dump stats: the conv2d instructions by Winograd F(2x2, 3x3) and F(4x4, 3x3) are counted and printed") {
  // 12 x 10 (120 pixels): F(2x2); 28 x 28: F(4x4).
  const char* source = R"(module @wino
const @w : f32[32,32,3,3] = splat 0.125
func @main(%x: f32[1,32,12,10], %y: f32[1,32,28,28]) -> (f32[1,32,12,10], f32[1,32,28,28]) {
  %a = call @conv2d(%x, @w) {pads = [1, 1, 1, 1]} : f32[1,32,12,10]
  %b = call @conv2d(%y, @w) {pads = [1, 1, 1, 1]} : f32[1,32,28,28]
  return %a, %b
}
)";
  hexir::compiler::CompileOptions direct;
  direct.winograd = false;
  for (const bool winograd : {true, false}) {
    INFO("winograd " << winograd);
    std::vector<uint8_t> bytes = winograd ? testing::compile_text(source) : testing::compile_text(source, direct);
    AlignedBytes file = testing::aligned(bytes);
    auto v = verify_executable(file.span());
    REQUIRE_MESSAGE(v.ok(), v.status().to_string());
    const FunctionStats st = function_stats(*v, 0);
    CHECK(st.channels_last_convolutions == 2);
    CHECK(st.winograd_convolutions == (winograd ? 2u : 0u));
    CHECK(st.winograd4_convolutions == (winograd ? 1u : 0u));
    testing::ScratchDir dir;
    testing::write_file(dir / "w.hxe", bytes.data(), bytes.size());
    auto text = testing::run_command(testing::kDumpTool + " " + dir / "w.hxe");
    CHECK(text.exit_code == 0);
    CHECK_MESSAGE(testing::contains(text.output, winograd ? "2 conv2d instructions, 2 of them by Winograd (1 F(4x4, 3x3), 1 F(2x2, 3x3))"
                                                          : "2 conv2d instructions, 0 of them by Winograd"),
                  text.output);
  }
}

}  // namespace
}  // namespace hexir::inspect
