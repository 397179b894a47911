// Weights streaming (a budget below the weights): a compiled file keeps the
// streamed weights in a RODATA section of the Host memory space, read only
// by Prefetch into device arena slots; it verifies and hexir-dump's
// statistics count the weight prefetches. Each defect patched into the file
// (the metadata resealed) is refused naming the slot or section and the
// rule: a kernel reading a streamed weight, a constant slot in another
// memory space than its section, a Prefetch from a constant on the device.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "hexir/format/verifier.h"
#include "hexir/inspect/function_plan.h"
#include "sample_util.h"

namespace hexir::testing {
namespace {

constexpr uint64_t kWeight = 32 * 32 * 4;

// Two 32x32 weights read one after the other and a bias of another type.
std::string two_layers() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::string text = "module @layers\n";
  for (const char* w : {"w1", "w2"}) {
    text += std::string("const @") + w + " : f32[32,32] = dense [";
    for (int i = 0; i < 32 * 32; ++i) text += (i ? ", " : "") + std::to_string(u(rng));
    text += "]\n";
  }
  text += "const @b : f32[32] = dense [";
  for (int i = 0; i < 32; ++i) text += (i ? ", " : "") + std::to_string(u(rng));
  text += R"(]
func @main(%x: f32[4,32]) -> (f32[4,32]) {
  %h = call @matmul(%x, @w1) : f32[4,32]
  %hb = call @add(%h, @b) : f32[4,32]
  %y = call @matmul(%hb, @w2) : f32[4,32]
  return %y
}
)";
  return text;
}

// Two copies of a weight beside a 512-byte activation and the bias: only
// one copy at a time fits, so both weights stream, each right before its matmul.
compiler::CompileOptions budget_options() {
  compiler::CompileOptions o;
  o.device_budget = 512 + kWeight + 128 + 256;
  return o;
}

struct Streamed : PatchedExecutable {
  Streamed() : PatchedExecutable(two_layers(), budget_options()) {}
  uint32_t prefetch() {
    for (uint32_t k = 0; k < m().instructions()->size(); ++k)
      if (m().instructions()->Get(k)->opcode() == fb::Opcode::Prefetch) return k;
    FAIL("no Prefetch");
    return 0;
  }
  uint32_t operand(uint32_t k, uint32_t o) {
    return m().operand_pool()->Get(m().instructions()->Get(k)->operand_begin() + o);
  }
  // Section is a struct: memory_space is its last byte.
  void set_section_memory_space(uint32_t section, uint8_t space) {
    static_assert(sizeof(fb::Section) == 32);
    *writable(reinterpret_cast<const uint8_t*>(m().sections()->Get(section)) + 31) = space;
  }
};

}  // namespace

TEST_CASE("compiled weights streaming verifies, and hexir-dump's statistics count the weight prefetches") {
  Streamed p;
  auto verified = format::verify_executable(p.file.span(), {.prove_no_overlap = true});
  REQUIRE_MESSAGE(verified.ok(), verified.status().to_string());
  REQUIRE(p.m().sections()->size() == 2);
  CHECK(p.m().sections()->Get(0)->memory_space() == fb::MemorySpace::Device);  // the bias
  CHECK(p.m().sections()->Get(1)->memory_space() == fb::MemorySpace::Host);    // the weights
  for (const char* w : {"w1", "w2"}) {
    const fb::Slot* slot = p.m().slots()->Get(p.slot_named(w));
    CHECK(slot->storage() == fb::StorageKind::Constant);
    CHECK(slot->memory_space() == fb::MemorySpace::Host);
    CHECK(p.m().constants()->Get(slot->index())->section() == 1);
  }
  CHECK(p.m().slots()->Get(p.slot_named("b"))->memory_space() == fb::MemorySpace::Device);
  const uint32_t prefetch = p.prefetch();
  CHECK(p.operand(prefetch, 0) == p.slot_named("w1"));
  CHECK(p.m().slots()->Get(p.operand(prefetch, 1))->copy_of() == static_cast<int32_t>(p.slot_named("w1")));
  // The matmul right after reads the copy.
  CHECK(p.operand(prefetch + 1, 1) == p.operand(prefetch, 1));
  const inspect::FunctionStats st = inspect::function_stats(*verified, 0);
  CHECK(st.prefetches == 2);
  CHECK(st.weight_prefetches == 2);
  CHECK(st.bytes_weights_prefetched == 2 * kWeight);
  CHECK(st.constant_bytes_streamed == 2 * kWeight);
  CHECK(st.evictions == 0);
  CHECK(st.host_arena_size == 0);
}

TEST_CASE("verifier: a kernel never reads a streamed weight") {
  Streamed p;
  const uint32_t prefetch = p.prefetch();
  const uint32_t w1 = p.slot_named("w1");
  p.set_operand(prefetch + 1, 1, w1);
  CHECK(has(p.refusal(), "'matmul' reads slot " + std::to_string(w1) + " ('w1'), a host-space slot"));
}

TEST_CASE("verifier: a constant slot is in its section's memory space") {
  {
    Streamed p;
    p.set_section_memory_space(1, 0);  // the weights' section on the device, their slots still host
    CHECK(has(p.refusal(), "('w1'): in the host memory space, but constant 0 ('w1') is in a device section"));
  }
  {
    Streamed p;
    p.set_field(p.m().slots()->Get(p.slot_named("w1")), fb::Slot::VT_MEMORY_SPACE, uint8_t{0});
    CHECK(has(p.refusal(), "('w1'): in the device memory space, but constant 0 ('w1') is in a host section"));
  }
  {
    Streamed p;
    p.set_section_memory_space(1, 2);
    CHECK(has(p.refusal(), "section 1: unknown memory space 2"));
  }
}

TEST_CASE("verifier: a Prefetch reads a host arena value or a streamed weight, and its copy names it") {
  {
    Streamed p;
    const uint32_t b = p.slot_named("b");
    p.set_operand(p.prefetch(), 0, b);
    CHECK(has(p.refusal(), "Prefetch reads slot " + std::to_string(b) +
                               " ('b'), which is not a host arena value or a streamed constant"));
  }
  {
    Streamed p;
    const uint32_t prefetch = p.prefetch();
    const uint32_t copy = p.operand(prefetch, 1);
    const uint32_t w2 = p.slot_named("w2");
    p.set_field(p.m().slots()->Get(copy), fb::Slot::VT_COPY_OF, static_cast<int32_t>(w2));
    CHECK(has(p.refusal(), "whose copy_of is " + std::to_string(w2) + ", but slot " + std::to_string(p.slot_named("w1")) +
                               " ('w1') holds the value of slot " + std::to_string(p.slot_named("w1"))));
  }
}

}  // namespace hexir::testing
