// Slot.recomputes (rematerialization under a memory budget): a compiled
// recomputation verifies and hexir-dump marks it; each defect patched into
// the file (the metadata resealed) is refused naming the slot or instruction
// and the rule, before anything runs.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "sample_util.h"

namespace hexir::testing {
namespace {

// %a is read by %e and after each of two peaks (the matmul pairs): under a
// budget of two values it is recomputed twice, once after each peak (both
// recomputations name %a). %xv is a view of the input.
constexpr const char* kHeld = R"(module @held
func @main(%x: f32[64,64]) -> (f32[64,64]) {
  %xv = call @reshape(%x) : f32[64,64]
  %a = call @gelu(%x) {approximate = "tanh"} : f32[64,64]
  %e = call @add(%a, %xv) : f32[64,64]
  %p = call @matmul(%e, %x) : f32[64,64]
  %r = call @matmul(%p, %p) : f32[64,64]
  %s = call @add(%r, %a) : f32[64,64]
  %u = call @matmul(%s, %x) : f32[64,64]
  %w = call @matmul(%u, %u) : f32[64,64]
  %y = call @add(%w, %a) : f32[64,64]
  return %y
}
)";

compiler::CompileOptions budget_options() {
  compiler::CompileOptions o;
  o.device_budget = 2 * 64 * 64 * 4;
  return o;
}

struct Patched : PatchedExecutable {
  Patched() : PatchedExecutable(kHeld, budget_options()) {}
  // The n-th recomputed slot (in slot order, which is program order here).
  uint32_t copy(int n = 0) {
    for (uint32_t s = 0; s < m().slots()->size(); ++s)
      if (m().slots()->Get(s)->recomputes() >= 0 && n-- == 0) return s;
    FAIL("no recomputed slot");
    return 0;
  }
  uint32_t writer(uint32_t slot) {
    for (uint32_t k = 0; k < m().instructions()->size(); ++k) {
      const fb::Instruction* in = m().instructions()->Get(k);
      for (uint32_t o = in->input_count(); o < in->operand_count(); ++o)
        if (m().operand_pool()->Get(in->operand_begin() + o) == slot) return k;
    }
    FAIL("nobody writes slot ", slot);
    return 0;
  }
  // The recomputes field of `slot` (stored: it is not the default -1).
  void set_recomputes(uint32_t slot, int32_t value) {
    // A generated table derives privately from flatbuffers::Table, at the same address.
    const uint8_t* field =
        reinterpret_cast<const flatbuffers::Table*>(m().slots()->Get(slot))->GetAddressOf(fb::Slot::VT_RECOMPUTES);
    REQUIRE(field != nullptr);
    std::memcpy(writable(field), &value, 4);
  }
};

}  // namespace

TEST_CASE("compiled recomputations verify, and hexir-dump marks and counts them") {
  Patched p;
  auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  const uint32_t a = p.slot_named("a");
  REQUIRE(p.m().slots()->Get(p.copy(0))->recomputes() == static_cast<int32_t>(a));
  REQUIRE(p.m().slots()->Get(p.copy(1))->recomputes() == static_cast<int32_t>(a));
  CHECK(p.writer(a) < p.writer(p.copy(0)));
  CHECK(p.writer(p.copy(0)) < p.writer(p.copy(1)));
  const inspect::FunctionStats stats = inspect::function_stats(*verified, 0);
  CHECK(stats.recomputed_instructions == 2);
  CHECK(stats.recomputed_flops == 2 * 64 * 64);
  CHECK(stats.arena_size <= 2 * 64 * 64 * 4);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("hexir_remat_verify_" + std::to_string(::getpid()) + ".hxe");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(p.file.data()), static_cast<std::streamsize>(p.file.size()));
  }
  const CommandResult text = run_command(kDumpTool + " " + path.string());
  CHECK(text.exit_code == 0);
  CAPTURE(text.output);
  CHECK(has(text.output, "%a.remat1 = gelu %x {1} : f32[64,64]  ; alias=0b0 recomputed %a"));
  CHECK(has(text.output, "recomputed: 2 instructions, 8192 FLOPs per invoke"));
  const CommandResult json = run_command(kDumpTool + " " + path.string() + " --json");
  CHECK(json.exit_code == 0);
  CHECK(has(json.output, "\"recomputed_instructions\":2"));
  CHECK(has(json.output, "\"recomputed_flops\":8192"));
  std::filesystem::remove(path);
}

TEST_CASE("recomputes must name another slot") {
  for (int32_t bad : {-7, 100000, -1000000}) {
    Patched p;
    p.set_recomputes(p.copy(), bad);
    CHECK(has(p.refusal(), "recomputes " + std::to_string(bad) + ", which is not another slot"));
  }
  Patched p;
  const uint32_t copy = p.copy();
  p.set_recomputes(copy, static_cast<int32_t>(copy));
  CHECK(has(p.refusal(), "recomputes " + std::to_string(copy) + ", which is not another slot"));
}

TEST_CASE("recomputes must name an arena value that is no view and no recomputation") {
  {
    Patched p;
    p.set_recomputes(p.copy(), static_cast<int32_t>(p.slot_named("xv")));
    CHECK(has(p.refusal(), ", a view"));
  }
  {
    Patched p;
    p.set_recomputes(p.copy(1), static_cast<int32_t>(p.copy(0)));
    CHECK(has(p.refusal(), ", itself a recomputation"));
  }
  {
    Patched p;
    p.set_recomputes(p.copy(), static_cast<int32_t>(p.slot_named("x")));  // an input
    CHECK(has(p.refusal(), "but both must be arena values"));
  }
}

TEST_CASE("the original must be written earlier, by the same kernel with the same parameters") {
  {
    Patched p;  // %w is written after the first recomputation
    p.set_recomputes(p.copy(0), static_cast<int32_t>(p.slot_named("w")));
    CHECK(has(p.refusal(), "no earlier instruction of its function writes that"));
  }
  {
    Patched p;  // %e: written earlier, but by add
    p.set_recomputes(p.copy(0), static_cast<int32_t>(p.slot_named("e")));
    CHECK(has(p.refusal(), "wrote it with another kernel or operand count"));
  }
  {
    Patched p;  // gelu with the erf form instead of tanh
    p.set_param(p.writer(p.copy(0)), 0, 0);
    CHECK(has(p.refusal(), "wrote it with other parameters"));
  }
}

TEST_CASE("each input of a recomputation must hold the value its original read") {
  {
    Patched p;  // %r (live there, of the same type) instead of %x
    const uint32_t r = p.slot_named("r"), x = p.slot_named("x");
    p.set_operand(p.writer(p.copy(0)), 0, r);
    const std::string message = p.refusal();
    CAPTURE(message);
    CHECK(has(message, "a recomputation of slot"));
    CHECK(has(message, "its input 0 slot " + std::to_string(r) + " ('r') does not hold the value instruction 0 read "
                       "there (slot " + std::to_string(x) + " ('x'))"));
  }
  {
    Patched p;  // a view of %x of the same type holds %x: accepted
    p.set_operand(p.writer(p.copy(0)), 0, p.slot_named("xv"));
    reseal_metadata(p.file);
    auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
    CHECK_MESSAGE(verified.ok(), verified.status().to_string());
  }
}

}  // namespace hexir::testing
