// f16 and bf16 operands through the f32 kernels (ops/widen.h): the widening
// kernel converts each half operand to f32 in the workspace, runs the f32
// kernel on the copies and rounds its results back. Internal to hal/cpu.
#pragma once

#include <cstdint>

#include "kernel_util.h"

namespace hexir::hal::cpu::internal {

// n halves (f16 or bf16 bits) to floats and back (nearest even, NaN kept),
// split over the pool; F16C where the CPU has AVX2, portable otherwise.
void halves_to_floats(const KernelContext& context, DType dtype, const uint16_t* in, float* out, int64_t n);
void floats_to_halves(const KernelContext& context, DType dtype, const float* in, uint16_t* out, int64_t n);

Status run_widened(KernelFn f32_kernel, const KernelContext& context, const Dispatch& d);
uint64_t widened_prepared_bytes(KernelFn f32_kernel, const Dispatch& constants);
void widened_prepare(KernelFn f32_kernel, const Dispatch& constants, void* out);
uint32_t widened_prepare_key(KernelFn f32_kernel, const Dispatch& constants, uint64_t* words);

// The widening kernel of one f32 kernel, and its prepare step (the f32
// kernel's, on the constants converted to f32: packed weights are f32 panels).
template <KernelFn F>
Status widened(const KernelContext& context, const Dispatch& d) {
  return run_widened(F, context, d);
}
template <KernelFn F>
uint64_t widened_bytes(const Dispatch& constants) {
  return widened_prepared_bytes(F, constants);
}
template <KernelFn F>
void widened_fill(const Dispatch& constants, void* out) {
  widened_prepare(F, constants, out);
}
template <KernelFn F>
uint32_t widened_key(const Dispatch& constants, uint64_t* words) {
  return widened_prepare_key(F, constants, words);
}

}  // namespace hexir::hal::cpu::internal
