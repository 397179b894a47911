// The programs the memory-budget tests share (docs/memory-budget.md), from
// the compiler's passes to the verifier, the VM's queue, the tools and the end
// to end runs: @held, whose peak recomputing lowers, and @far, whose peak only
// host offload lowers. Every value in them is an f32[64,64], 16 KiB.
#pragma once

#include <string>
#include <string_view>

namespace hexir::testing {

// %a and %b are read by %e and again at the end: both live across the two
// matmuls, where the peak is (four 16 KiB values). Each is cheap to compute
// again from %x, an input (live throughout). Recomputing one lowers the peak
// to three values, both to two (%e then runs in place on one of them); one
// value is out of reach.
inline constexpr const char* kHeldProgram = R"(module @held
const @c : f32[64,64] = splat 2.0
func @main(%x: f32[64,64]) -> (f32[64,64]) {
  %a = call @gelu(%x) {approximate = "tanh"} : f32[64,64]
  %b = call @mul(%x, @c) : f32[64,64]
  %e = call @add(%a, %b) : f32[64,64]
  %p = call @matmul(%e, %x) : f32[64,64]
  %q = call @tanh(%p) : f32[64,64]
  %r = call @matmul(%q, %q) : f32[64,64]
  %s = call @add(%r, %a) : f32[64,64]
  %y = call @add(%s, %b) : f32[64,64]
  return %y
}
)";

// @far's body from %x to %y: %a is six elementwise steps from %x (more than
// rematerialization chains, RematOptions::max_chain) and is read only at the
// end, across the three matmuls: the peak (%a, %p, %q: three values) is at %q.
inline constexpr std::string_view kFarSteps = R"(  %a0 = call @neg(%x) : f32[64,64]
  %a1 = call @tanh(%a0) : f32[64,64]
  %a2 = call @neg(%a1) : f32[64,64]
  %a3 = call @tanh(%a2) : f32[64,64]
  %a4 = call @neg(%a3) : f32[64,64]
  %a = call @tanh(%a4) : f32[64,64]
  %p = call @matmul(%x, %x) : f32[64,64]
  %q = call @matmul(%p, %p) : f32[64,64]
  %r = call @matmul(%q, %q) : f32[64,64]
  %y = call @add(%r, %a) : f32[64,64]
)";

// @far: 48 KiB unconstrained. Under a device budget of two values (32 KiB)
// %a waits in the host arena: evicted after its writer, prefetched before the
// add that reads it (right after the peak, the prefetch would land on %r's
// matmul, a second peak of three). One value is out of reach: two meet at
// every matmul.
inline const std::string kFarProgram = "module @far\nfunc @main(%x: f32[64,64]) -> (f32[64,64]) {\n" +
                                       std::string(kFarSteps) + "  return %y\n}\n";

}  // namespace hexir::testing
