// Helpers for the hal and conformance tests: host tensors, an operator call
// planned and run as the VM does, comparisons.
// References in the tests are written independently of hal/cpu, in double.
#pragma once

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hexir/hal/cpu_kernels.h"
#include "hexir/hal/device.h"
#include "hexir/ops/op.h"

namespace hexir::hal::testing {

using ops::OpId;

inline int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  return strides;
}

// Multi-index of flat position `flat` in `dims`.
inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    index[i] = flat % dims[i];
    flat /= dims[i];
  }
  return index;
}

// A tensor in host memory; the bytes are what a kernel reads or writes.
struct HostTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {
    bytes.assign(static_cast<size_t>(product(dims)) * dtype_size(dtype), 0);
  }

  int64_t count() const { return product(dims); }
  float* f32() { return reinterpret_cast<float*>(bytes.data()); }
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  float& at(int64_t i) { return f32()[i]; }
  float at(int64_t i) const { return f32()[i]; }

  // A bounded dim (TensorType::bounded): dims holds its bound (compact's operand).
  int32_t bounded = -1;
  TensorType type() const { return TensorType{dtype, dims, bounded}; }
};

// Deterministic values in [lo, hi).
inline HostTensor random_f32(std::vector<int64_t> dims, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  HostTensor t(DType::kF32, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.at(i) = dist(rng);
  return t;
}

// Bytes 0, 1, 2, ... so every element of any dtype is distinguishable.
inline HostTensor iota_bytes(DType dtype, std::vector<int64_t> dims) {
  HostTensor t(dtype, std::move(dims));
  for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
  return t;
}

// An i64[] holding `value` (the start indices of dynamic_slice and update_slice).
// The key an operator's kernels are looked up by in the tests that walk every
// operator: f32 in and out, but the quantizers' integer side.
inline ops::KernelKey representative_key(ops::OpId id) {
  if (id == ops::OpId::kQuantizeLinear) return {id, DType::kI8, DType::kI8};
  if (id == ops::OpId::kDequantizeLinear) return {id, DType::kI8, DType::kF32};
  if (id == ops::OpId::kDequantizeInt4) return {id, DType::kU8, DType::kF32};
  if (id == ops::OpId::kIntegerMatmul) return {id, DType::kU8, DType::kI32};
  if (id == ops::OpId::kQuantizedConv2d || id == ops::OpId::kQuantizedAdd) return {id, DType::kU8, DType::kU8};
  return {id, DType::kF32, DType::kF32};
}

inline HostTensor i64_scalar(int64_t value) {
  HostTensor t(DType::kI64, {});
  std::memcpy(t.bytes.data(), &value, 8);
  return t;
}

// An operator call prepared as the VM prepares one: its plan (which also
// checks the operand types against the operator's rules), its kernel on the
// cpu and its operand pointers. `aliased_output` >= 0 makes output 0 write
// into that input's bytes (the in-place contract).
struct PreparedCall {
  ops::OpPlan plan;
  std::vector<void*> operands;
  std::vector<uint64_t> workspace;
  Dispatch dispatch;
};

inline Result<PreparedCall> prepare_call(OpId id, const std::vector<HostTensor*>& inputs,
                                         const std::vector<HostTensor*>& outputs,
                                         const std::vector<int64_t>& params, int aliased_output = -1) {
  std::vector<TensorType> in_types, out_types;
  for (HostTensor* t : inputs) in_types.push_back(t->type());
  for (HostTensor* t : outputs) out_types.push_back(t->type());
  PreparedCall call;
  HEXIR_ASSIGN_OR_RETURN(call.plan, ops::plan_op(id, in_types, out_types, params));
  cpu::KernelFn fn = cpu::find_cpu_kernel(ops::kernel_key(id, in_types, out_types));
  if (fn == nullptr) return unimplemented(std::string("no cpu kernel for ") + ops::op_def(id).name);
  for (HostTensor* t : inputs) call.operands.push_back(t->bytes.data());
  for (HostTensor* t : outputs) call.operands.push_back(t->bytes.data());
  if (aliased_output >= 0)
    call.operands[inputs.size()] = inputs[static_cast<size_t>(aliased_output)]->bytes.data();
  call.workspace.resize((ops::workspace_bytes(id, in_types, params) + 7) / 8);
  call.dispatch.kernel = reinterpret_cast<uintptr_t>(fn);
  call.dispatch.plan = call.plan.words().data();
  call.dispatch.operands = call.operands.data();
  call.dispatch.input_count = static_cast<uint32_t>(inputs.size());
  call.dispatch.output_count = static_cast<uint32_t>(outputs.size());
  call.dispatch.workspace = call.workspace.empty() ? nullptr : call.workspace.data();
  call.dispatch.workspace_size = call.workspace.size() * 8;
  return call;
}

// A call prepared by prepare_call and a queue of a cpu device with `threads`
// threads to dispatch it on (the device outlives its queue).
struct CpuQueueCall {
  std::unique_ptr<Device> device;
  std::unique_ptr<Queue> queue;
  PreparedCall call;
};

inline CpuQueueCall prepare_on_cpu_queue(int threads, OpId id, const std::vector<HostTensor*>& inputs,
                                         const std::vector<HostTensor*>& outputs,
                                         const std::vector<int64_t>& params, int aliased_output = -1) {
  auto device = create_device("cpu", {.threads = threads});
  REQUIRE(device.ok());
  auto queue = (*device)->create_queue();
  REQUIRE(queue.ok());
  auto call = prepare_call(id, inputs, outputs, params, aliased_output);
  REQUIRE_MESSAGE(call.ok(), call.status().to_string());
  return {std::move(*device), std::move(*queue), std::move(*call)};
}

// Plans and runs the builtin cpu kernel for `id` on inputs, writing `outputs`.
inline Status run_op(OpId id, const std::vector<HostTensor*>& inputs, const std::vector<HostTensor*>& outputs,
                     const std::vector<int64_t>& params = {}, int aliased_output = -1) {
  HEXIR_ASSIGN_OR_RETURN(PreparedCall call, prepare_call(id, inputs, outputs, params, aliased_output));
  return reinterpret_cast<cpu::KernelFn>(call.dispatch.kernel)(KernelContext{}, call.dispatch);
}

// The single-output shorthand.
inline Status run_kernel(OpId id, std::vector<HostTensor*> inputs, HostTensor& out,
                         std::vector<int64_t> params = {}) {
  return run_op(id, inputs, {&out}, params);
}

// Element-wise comparison with |got - want| <= atol + rtol * |want|; NaN must
// match NaN and infinities must match exactly. Reports the first mismatch.
inline void check_close(const HostTensor& got, const std::vector<double>& want, double rtol = 1e-5,
                        double atol = 1e-6) {
  REQUIRE(got.count() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.at(static_cast<int64_t>(i));
    const double w = want[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok) {
      INFO("element " << i << ": got " << g << ", want " << w);
      CHECK(ok);
      return;
    }
  }
}

// One valid call of every dispatchable kernel (several for the binary ops).
struct KernelCall {
  OpId id;
  std::vector<HostTensor> inputs;
  HostTensor output;
  std::vector<int64_t> params;
};

inline std::vector<KernelCall> one_call_per_kernel() {
  std::vector<KernelCall> calls;
  const HostTensor x = random_f32({4, 8}, 1, 0.5f, 2.0f), row = random_f32({8}, 2, 0.5f, 2.0f);
  for (OpId id : {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kMinimum}) {
    calls.push_back({id, {x, row}, HostTensor(DType::kF32, {4, 8}), {}});
    calls.push_back({id,
                     {random_f32({4, 1}, 3), random_f32({1, 3, 1, 8}, 4)},
                     HostTensor(DType::kF32, {1, 3, 4, 8}),
                     {}});
  }
  for (OpId id : {OpId::kRelu, OpId::kGelu, OpId::kSilu, OpId::kSigmoid, OpId::kTanh, OpId::kExp, OpId::kSqrt,
                  OpId::kRsqrt, OpId::kNeg}) {
    calls.push_back({id,
                     {x},
                     HostTensor(DType::kF32, {4, 8}),
                     id == OpId::kGelu ? std::vector<int64_t>{0} : std::vector<int64_t>{}});
  }
  calls.push_back({OpId::kGelu, {x}, HostTensor(DType::kF32, {4, 8}), {1}});
  calls.push_back({OpId::kMatmul,
                   {random_f32({2, 4, 8}, 5), random_f32({8, 3}, 6)},
                   HostTensor(DType::kF32, {2, 4, 3}),
                   {}});
  calls.push_back({OpId::kSoftmax, {x}, HostTensor(DType::kF32, {4, 8}), {0}});
  calls.push_back(
      {OpId::kLayernorm, {x, row, row}, HostTensor(DType::kF32, {4, 8}), {1, std::bit_cast<int64_t>(1e-5)}});
  calls.push_back(
      {OpId::kTranspose, {random_f32({2, 3, 4}, 7)}, HostTensor(DType::kF32, {4, 2, 3}), {2, 0, 1}});
  calls.push_back({OpId::kReduceSum, {x}, HostTensor(DType::kF32, {4, 1}), {1, 1}});
  calls.push_back({OpId::kReduceMean, {x}, HostTensor(DType::kF32, {}), {0}});
  calls.push_back({OpId::kConcat, {x, x, x}, HostTensor(DType::kF32, {4, 24}), {1}});
  calls.push_back({OpId::kCopy, {x}, HostTensor(DType::kF32, {4, 8}), {}});
  calls.push_back({OpId::kArgMax, {x}, HostTensor(DType::kI64, {4}), {1, 0, 0}});
  const HostTensor one = i64_scalar(1), two = i64_scalar(2);
  calls.push_back({OpId::kDynamicSlice, {x, one, two}, HostTensor(DType::kF32, {2, 3}), {2, 3}});
  calls.push_back(
      {OpId::kUpdateSlice, {x, random_f32({2, 3}, 8), two, one}, HostTensor(DType::kF32, {4, 8}), {}});
  return calls;
}

inline std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace hexir::hal::testing
