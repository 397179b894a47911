// End-to-end memory planning: both samples under every plan (naive,
// free-at-last-use, arena; memory schedule; --align 256; in place off) give
// bit-identical outputs; the arena is at or below the lower bound computed
// without aliasing; a donated cache is updated in the caller's buffer.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/format/prelude.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"
#include "hexir_generated.h"
#include "loaded.h"
#include "vm_impl.h"

namespace fs = std::filesystem;
using hexir::compiler::CompileOptions;
using hexir::compiler::PlanStrategy;
using hexir::compiler::Schedule;
using hexir::vm::Context;
using hexir::vm::Module;
using hexir::vm::Program;
using hexir::vm::TensorRef;

namespace {

const fs::path kSamplesDir = HEXIR_SAMPLES_DIR;
const char* const kSamples[] = {"mlp", "transformer", "convnet"};

struct Variant {
  const char* name;
  CompileOptions options;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  auto add = [&](const char* name, PlanStrategy plan, Schedule schedule = Schedule::kSource,
                 uint32_t alignment = 64, bool in_place = true) {
    CompileOptions o;
    o.plan = plan;
    o.schedule = schedule;
    o.alignment = alignment;
    o.in_place = in_place;
    out.push_back({name, o});
  };
  add("naive", PlanStrategy::kNaive);
  add("free-at-last-use", PlanStrategy::kFreeAtLastUse);
  add("arena", PlanStrategy::kArena);
  add("arena, schedule=memory", PlanStrategy::kArena, Schedule::kMemory);
  add("free-at-last-use, schedule=memory", PlanStrategy::kFreeAtLastUse, Schedule::kMemory);
  add("arena, align 256", PlanStrategy::kArena, Schedule::kSource, 256);
  add("arena, no in-place", PlanStrategy::kArena, Schedule::kSource, 64, false);
  return out;
}

using hexir::testing::Loaded;
using hexir::testing::load_compiled;

std::unique_ptr<Loaded> compile_sample(const std::string& name, const CompileOptions& options) {
  auto bytes = hexir::compiler::compile_file(kSamplesDir / (name + ".hxir"), options);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return load_compiled(*bytes);
}

hexir::NpyArray load_npy(const fs::path& path) {
  auto array = hexir::read_npy(path.string());
  REQUIRE_MESSAGE(array.ok(), array.status().to_string());
  return std::move(array).value();
}

// Runs main twice (the second run must not depend on what the first left
// behind) and returns the outputs of the second.
std::vector<std::vector<uint8_t>> run_main(Loaded& l, Context& context, hexir::NpyArray& input) {
  TensorRef in{input.data.data(), input.data.size(), input.type};
  std::vector<std::vector<uint8_t>> outputs;
  for (int round = 0; round < 2; ++round) {
    hexir::Status status = context.invoke("main", {&in, 1});
    REQUIRE_MESSAGE(status.ok(), status.to_string());
  }
  const auto& sig = l.module->function(0);
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    std::vector<uint8_t> out(sig.outputs[j].byte_size);
    REQUIRE(context.read_output(0, j, out).ok());
    outputs.push_back(std::move(out));
  }
  return outputs;
}

TEST_CASE("every plan gives bit-identical outputs that match the numpy references") {
  for (const std::string name : kSamples) {
    CAPTURE(name);
    hexir::NpyArray input = load_npy(kSamplesDir / name / "input_x.npy");
    std::vector<std::vector<uint8_t>> baseline;
    for (const Variant& v : variants()) {
      const std::string variant = v.name;
      CAPTURE(variant);
      auto l = compile_sample(name, v.options);
      auto context = Context::create(*l->program);
      REQUIRE(context.ok());
      std::vector<std::vector<uint8_t>> outputs = run_main(*l, *context, input);
      const bool dynamic = v.options.plan == PlanStrategy::kFreeAtLastUse;
      // Static plans allocate nothing per invoke; the dynamic baseline does, and says so.
      if (dynamic) {
        CHECK(context->invoke_stats().device_allocations > 0);
        CHECK(context->invoke_stats().peak_live_bytes > 0);
        CHECK(context->invoke_stats().peak_live_bytes >= l->module->lower_bound_bytes());
      } else {
        CHECK(context->invoke_stats().device_allocations == 0);
      }
      CHECK(context->invoke_stats().uploads == 0);
      if (baseline.empty()) {
        baseline = outputs;
        for (size_t j = 0; j < outputs.size(); ++j) {
          hexir::NpyArray expected =
              load_npy(kSamplesDir / name / ("expected_" + std::to_string(j) + ".npy"));
          REQUIRE(expected.data.size() == outputs[j].size());
          const float* got = reinterpret_cast<const float*>(outputs[j].data());
          const float* want = reinterpret_cast<const float*>(expected.data.data());
          for (size_t e = 0; e < outputs[j].size() / 4; ++e)
            CHECK(got[e] == doctest::Approx(want[e]).epsilon(1e-4));
        }
        continue;
      }
      REQUIRE(outputs.size() == baseline.size());
      for (size_t j = 0; j < outputs.size(); ++j) CHECK(outputs[j] == baseline[j]);
    }
  }
}

TEST_CASE("--align 256: every arena offset and the arena itself are multiples of 256") {
  for (const char* name : kSamples) {
    CompileOptions options;
    options.alignment = 256;
    auto l = compile_sample(name, options);
    const hexir::fb::Module& m = l->fb();
    CHECK(m.arena()->alignment() == 256);
    CHECK(m.arena()->size() % 256 == 0);
    for (const hexir::fb::Slot* s : *m.slots())
      if (s->storage() == hexir::fb::StorageKind::Arena) CHECK(s->arena_offset() % 256 == 0);
    auto context = Context::create(*l->program);
    REQUIRE(context.ok());
    CHECK(reinterpret_cast<uintptr_t>(context->impl().arena.host_ptr) % 256 == 0);
  }
}

TEST_CASE("the samples' arena is at or below their lower bound without aliasing") {
  for (const std::string name : kSamples) {
    CAPTURE(name);
    CompileOptions no_alias;
    no_alias.in_place = false;
    CompileOptions naive;
    naive.plan = PlanStrategy::kNaive;
    auto plain = compile_sample(name, no_alias);
    auto arena = compile_sample(name, CompileOptions{});
    auto baseline = compile_sample(name, naive);
    const uint64_t bound_without_aliasing = plain->module->lower_bound_bytes();
    const uint64_t bound_with_aliasing = arena->module->lower_bound_bytes();
    MESSAGE(name, ": naive ", baseline->module->arena_bytes(), " B, arena ", arena->module->arena_bytes(),
            " B, lower bound ", bound_with_aliasing, " B with aliasing, ", bound_without_aliasing,
            " B without");
    CHECK(bound_with_aliasing <= bound_without_aliasing);
    CHECK(arena->module->arena_bytes() <= bound_without_aliasing);
    CHECK(arena->module->arena_bytes() >= bound_with_aliasing);
    CHECK(arena->module->arena_bytes() <= plain->module->arena_bytes());
  }
}

TEST_CASE("donation: the caller's cache is updated in place, without a copy or an allocation") {
  constexpr const char* kStep = R"(
module @cache
func @step(%cache: f32[64,128] donate, %row: f32[1,128]) -> (f32[64,128]) {
  %c = call @add(%cache, %row) : f32[64,128]
  return %c
}
)";
  for (PlanStrategy plan : {PlanStrategy::kArena, PlanStrategy::kNaive, PlanStrategy::kFreeAtLastUse}) {
    CompileOptions options;
    options.plan = plan;
    auto bytes = hexir::compiler::compile_source(kStep, "step.hxir", kSamplesDir, options);
    REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
    auto l = load_compiled(*bytes);
    const hexir::fb::Module& m = l->fb();
    const hexir::fb::Function& fn = *m.functions()->Get(0);
    CHECK(fn.inputs()->Get(0)->donated_to() == 0);
    CHECK(m.instructions()->Get(fn.instruction_begin())->alias_mask() == 1);
    CHECK(m.slots()->Get(fn.outputs()->Get(0)->slot())->storage() == hexir::fb::StorageKind::Input);
    CHECK(l->module->arena_bytes() == 0);
    CHECK(l->module->function(0).inputs[0].donated_to == 0);

    auto context = Context::create(*l->program);
    REQUIRE(context.ok());
    CHECK(context->create_stats().device_allocations == 0);  // no arena, no output buffer
    std::vector<float> cache(64 * 128), row(128);
    for (size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<float>(i % 7);
    for (size_t i = 0; i < row.size(); ++i) row[i] = 0.5f * static_cast<float>(i);
    const std::vector<float> original = cache;
    TensorRef c{cache.data(), cache.size() * 4, {hexir::DType::kF32, {64, 128}}};
    TensorRef r{row.data(), row.size() * 4, {hexir::DType::kF32, {1, 128}}};
    TensorRef ins[] = {c, r};
    // The caller passes the cache as the input and as the output (or no outputs).
    REQUIRE(context->invoke("step", ins, {&c, 1}).ok());
    for (size_t i = 0; i < cache.size(); ++i) REQUIRE(cache[i] == original[i] + row[i % 128]);
    REQUIRE(context->invoke("step", ins).ok());
    CHECK(context->output(0, 0)->data == cache.data());
    for (size_t i = 0; i < cache.size(); ++i) REQUIRE(cache[i] == original[i] + 2 * row[i % 128]);
    CHECK(context->invoke_stats().device_allocations == 0);
    // Any other output buffer is refused: the result can only land in the cache.
    std::vector<float> elsewhere(64 * 128);
    TensorRef other{elsewhere.data(), elsewhere.size() * 4, {hexir::DType::kF32, {64, 128}}};
    CHECK_FALSE(context->invoke("step", ins, {&other, 1}).ok());
  }
}

// A static KV cache written as exporters write it: index_copy_ (ScatterElements)
// and index_put_ (ScatterND) on a donated cache run in the cache's buffer; the
// invoke moves the new rows only.
TEST_CASE(
    "donation: a scatter into a donated KV cache runs in place; a bad index leaves the cache as it was") {
  constexpr const char* kSources[] = {R"(
module @kv
func @step(%cache: f32[2,8,4] donate, %pos: i64[2,1,4], %rows: f32[2,1,4]) -> (f32[2,8,4]) {
  %c = call @scatter_elements(%cache, %pos, %rows) {axis = 1} : f32[2,8,4]
  return %c
}
)",
                                      R"(
module @kv
func @step(%cache: f32[2,8,4] donate, %pos: i64[2,1,4], %rows: f32[2,1,4]) -> (f32[2,8,4]) {
  %at = call @slice(%pos) {starts = [0, 0, 0], ends = [2, 1, 2], axes = [0, 1, 2]} : i64[2,1,2]
  %c = call @scatter_nd(%cache, %at, %rows) : f32[2,8,4]
  return %c
}
)"};
  for (const char* source : kSources) {
    const bool nd = std::string(source).find("scatter_nd") != std::string::npos;
    CAPTURE(nd);
    auto bytes = hexir::compiler::compile_source(source, "kv.hxir", kSamplesDir, CompileOptions{});
    REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
    auto l = load_compiled(*bytes);
    const hexir::fb::Module& m = l->fb();
    const hexir::fb::Function& fn = *m.functions()->Get(0);
    CHECK(fn.inputs()->Get(0)->donated_to() == 0);
    const hexir::fb::Instruction& scatter =
        *m.instructions()->Get(fn.instruction_begin() + fn.instruction_count() - 1);
    CHECK(scatter.alias_mask() == 1);  // output 0 takes the cache (input 0) over
    CHECK(m.slots()->Get(fn.outputs()->Get(0)->slot())->storage() == hexir::fb::StorageKind::Input);
    if (!nd) CHECK(l->module->arena_bytes() == 0);  // nothing but the cache (scatter_nd: its sliced indices)

    auto context = Context::create(*l->program);
    REQUIRE(context.ok());
    if (!nd) CHECK(context->create_stats().device_allocations == 0);  // no arena, no output buffer
    std::vector<float> cache(2 * 8 * 4), rows(2 * 4);
    for (size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<float>(i);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = -1.0f - static_cast<float>(i);
    // Batch 0 writes position 5, batch 1 position 2 (as -6: from the end).
    std::vector<int64_t> pos(2 * 4);
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = i < 4 ? 5 : -6;
    if (nd) pos = {0, 5, 0, 0, 1, -6, 0, 0};  // [b, position] pairs, sliced from the first two
    std::vector<float> want = cache;
    for (size_t b = 0; b < 2; ++b)
      for (size_t d = 0; d < 4; ++d) want[b * 32 + (b == 0 ? 5 : 2) * 4 + d] = rows[b * 4 + d];
    TensorRef c{cache.data(), cache.size() * 4, {hexir::DType::kF32, {2, 8, 4}}};
    TensorRef ins[] = {c,
                       {pos.data(), pos.size() * 8, {hexir::DType::kI64, {2, 1, 4}}},
                       {rows.data(), rows.size() * 4, {hexir::DType::kF32, {2, 1, 4}}}};
    REQUIRE(context->invoke("step", ins).ok());
    CHECK(context->output(0, 0)->data == cache.data());
    CHECK(cache == want);
    CHECK(context->invoke_stats().device_allocations == 0);
    // An index past the cache fails the invoke, naming it, before anything is written.
    pos[nd ? 5 : 7] = 8;
    const hexir::Status bad = context->invoke("step", ins);
    CHECK(bad.code() == hexir::StatusCode::kInvalidArgument);
    CHECK_MESSAGE(bad.message().find("index 8") != std::string::npos, bad.message());
    CHECK(cache == want);
  }
}

TEST_CASE("donation: one the plan cannot honour is a compile error; a read-only input is never overwritten") {
  constexpr const char* kDonated = R"(
module @m
func @f(%cache: f32[4,4] donate, %x: f32[4,4]) -> (f32[4,4]) {
  %a = call @matmul(%cache, %x) : f32[4,4]
  return %a
}
)";
  auto refused = hexir::compiler::compile_source(kDonated, "m.hxir", kSamplesDir);
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find("input %cache cannot be donated to output 0 'a'") != std::string::npos,
                refused.status().message());
  constexpr const char* kSource = R"(
module @m
func @f(%cache: f32[4,4], %x: f32[4,4]) -> (f32[4,4]) {
  %a = call @matmul(%cache, %x) : f32[4,4]
  return %a
}
)";
  auto bytes = hexir::compiler::compile_source(kSource, "m.hxir", kSamplesDir);
  REQUIRE(bytes.ok());
  auto l = load_compiled(*bytes);
  CHECK(l->module->function(0).inputs[0].donated_to == -1);
  auto context = Context::create(*l->program);
  REQUIRE(context.ok());
  std::vector<float> a(16, 1.0f), x(16, 2.0f);
  TensorRef ins[] = {{a.data(), 64, {hexir::DType::kF32, {4, 4}}},
                     {x.data(), 64, {hexir::DType::kF32, {4, 4}}}};
  // Passing the input's buffer as the output would race matmul: refused.
  CHECK_FALSE(context->invoke(0, ins, {&ins[0], 1}).ok());
  REQUIRE(context->invoke(0, ins).ok());
  CHECK(a == std::vector<float>(16, 1.0f));
}

}  // namespace
