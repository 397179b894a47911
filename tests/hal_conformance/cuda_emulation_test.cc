// The CUDA kernels and the dispatcher that launches them, run on the host:
// hal/cuda/kernels/*.cu compiled as C++ against cuda_emulation.h, every case
// of kernel_cases.h enqueued through hal/cuda's enqueue_dispatch and compared
// with the cpu kernels. Runs everywhere (no GPU, no nvcc), so the index math,
// launch shapes and parameter marshalling are tested on every build; the real
// device runs the same cases in conformance_test.cc.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/cuda_dispatch.h"
#include "kernel_cases.h"

// The kernels, compiled for the host: the shim first.
// clang-format off
#include "cuda_emulation.h"
#include "cuda/kernels/elementwise.cu"
#include "cuda/kernels/layout.cu"
#include "cuda/kernels/matmul.cu"
#include "cuda/kernels/normalization.cu"
// clang-format on

namespace {

using hexir::Status;
using hexir::hal::cuda::GemmBatch;
using hexir::hal::cuda::Kernel;
using hexir::hal::cuda::LaunchConfig;

// The kernels with shared memory and __syncthreads; the rest run without threads.
bool uses_barriers(Kernel kernel) {
  return kernel == Kernel::kMatmul || kernel == Kernel::kSoftmax || kernel == Kernel::kLayernorm ||
         kernel == Kernel::kReduce;
}

// Runs each launch with the emulation; copies are memcpy. With `gemm` on, the
// library-GEMM path is taken too, computed by a plain loop over the batch.
class EmulatedLauncher final : public hexir::hal::cuda::Launcher {
 public:
  explicit EmulatedLauncher(bool gemm = false) : gemm_(gemm) {}

  Status launch(Kernel kernel, const LaunchConfig& config, void* params) override {
    ++launches;
    for (int i = 0; i < 3; ++i) {
      if (config.grid[i] == 0 || config.block[i] == 0) return hexir::invalid_argument("empty launch");
    }
    if (config.block[0] * config.block[1] * config.block[2] > 1024)
      return hexir::invalid_argument("block > 1024");
    if (config.grid[1] > 65535 || config.grid[2] > 65535) return hexir::invalid_argument("grid y/z > 65535");
    bool ok = false;
    switch (kernel) {
#define HEXIR_EMULATE(name, symbol, P)                                                               \
  case Kernel::name:                                                                                 \
    ok = hexir::cuda_emulation::run<hexir::hal::cuda::P>(symbol, config.grid, config.block,          \
                                                         *static_cast<hexir::hal::cuda::P*>(params), \
                                                         uses_barriers(Kernel::name));               \
    break;
      HEXIR_CUDA_KERNELS(HEXIR_EMULATE)
#undef HEXIR_EMULATE
      case Kernel::kCount:
        return hexir::invalid_argument("no such kernel");
    }
    if (!ok) return hexir::internal_error("divergent __syncthreads");
    return hexir::ok_status();
  }

  Status copy(void* dst, const void* src, uint64_t bytes) override {
    ++copies;
    std::memcpy(dst, src, bytes);
    return hexir::ok_status();
  }

  bool has_gemm() const override { return gemm_; }
  Status gemm(const GemmBatch& g) override {
    ++gemms;
    for (int32_t batch = 0; batch < g.batch; ++batch) {
      const float* a = g.a + batch * g.stride_a;
      const float* b = g.b + batch * g.stride_b;
      float* c = g.c + batch * g.stride_c;
      for (int32_t i = 0; i < g.m; ++i)
        for (int32_t j = 0; j < g.n; ++j) {
          float acc = 0.0f;
          for (int32_t k = 0; k < g.k; ++k) acc += a[i * g.k + k] * b[k * g.n + j];
          c[i * g.n + j] = acc;
        }
    }
    return hexir::ok_status();
  }

  int launches = 0, copies = 0, gemms = 0;

 private:
  bool gemm_;
};

// Runs one case through enqueue_dispatch on host memory.
hexir::hal::testing::HostTensor run_case(const hexir::hal::conformance::KernelCase& c,
                                         EmulatedLauncher& launcher) {
  using hexir::hal::testing::HostTensor;
  std::vector<HostTensor> inputs = c.inputs;
  HostTensor out = hexir::hal::conformance::result_of(c);
  std::vector<hexir::hal::TensorArg> operands;
  for (HostTensor& t : inputs) operands.push_back(t.arg());
  operands.push_back(c.in_place ? inputs[0].arg() : out.arg());
  if (c.in_place)
    operands.back().dims = out.dims.data(), operands.back().rank = static_cast<uint32_t>(out.dims.size());
  hexir::hal::DispatchArgs args;
  args.kernel = 1;
  args.kernel_id = c.id;
  args.operands = operands.data();
  args.input_count = static_cast<uint32_t>(inputs.size());
  args.operand_count = static_cast<uint32_t>(operands.size());
  args.params = c.params.empty() ? nullptr : c.params.data();
  args.param_count = static_cast<uint32_t>(c.params.size());
  Status s = hexir::hal::cuda::enqueue_dispatch(args, launcher);
  INFO(c.name, ": ", s.to_string());
  REQUIRE(s.ok());
  if (c.in_place) out.bytes = inputs[0].bytes;
  return out;
}

}  // namespace

TEST_CASE("cuda kernels (host emulation) match the cpu kernels") {
  for (const auto& c : hexir::hal::conformance::kernel_cases()) {
    CAPTURE(c.name);
    EmulatedLauncher launcher;
    hexir::hal::testing::HostTensor want = hexir::hal::conformance::cpu_reference(c);
    hexir::hal::testing::HostTensor got = run_case(c, launcher);
    hexir::hal::conformance::check_matches(c, got, want);
  }
}

TEST_CASE("cuda matmul: the tiled kernel is bit-identical to the cpu kernel") {
  for (const auto& c : hexir::hal::conformance::kernel_cases()) {
    if (c.id != hexir::ops::OpId::kMatmul) continue;
    CAPTURE(c.name);
    EmulatedLauncher launcher;
    hexir::hal::testing::HostTensor got = run_case(c, launcher);
    hexir::hal::testing::HostTensor want = hexir::hal::conformance::cpu_reference(c);
    CHECK(got.bytes == want.bytes);
  }
}

TEST_CASE("cuda matmul: library GEMM taken exactly when one stride per operand describes the batch") {
  struct Expect {
    const char* name;
    bool gemm;
  };
  const Expect expected[] = {{"matmul batched x 2-D", true},
                             {"matmul odd 33x70x17", true},
                             {"matmul vector x matrix", true},
                             {"matmul matrix x vector", true},
                             {"matmul vector x vector", true},
                             {"matmul broadcast batch", false},
                             {"matmul mixed batch broadcast", false},
                             {"matmul repeated a", true},
                             {"matmul K = 0", false},
                             {"matmul 64x96x80", true}};
  for (const auto& c : hexir::hal::conformance::kernel_cases()) {
    if (c.id != hexir::ops::OpId::kMatmul) continue;
    CAPTURE(c.name);
    bool found = false;
    for (const Expect& e : expected) {
      if (c.name != e.name) continue;
      found = true;
      EmulatedLauncher launcher(/*gemm=*/true);
      hexir::hal::testing::HostTensor got = run_case(c, launcher);
      CHECK(launcher.gemms == (e.gemm ? 1 : 0));
      hexir::hal::conformance::check_matches(c, got, hexir::hal::conformance::cpu_reference(c));
    }
    CHECK(found);
  }
}

TEST_CASE("cuda pattern fill kernel repeats 1..16-byte patterns") {
  for (uint32_t size = 1; size <= 16; ++size) {
    CAPTURE(size);
    uint8_t pattern[16];
    for (uint32_t i = 0; i < 16; ++i) pattern[i] = static_cast<uint8_t>(0xA0 + i);
    std::vector<uint8_t> memory(size * 37 + 2, 0x11);
    EmulatedLauncher launcher;
    Status s = hexir::hal::cuda::enqueue_pattern_fill(memory.data() + 1, size * 37, pattern, size, launcher);
    REQUIRE(s.ok());
    CHECK(memory.front() == 0x11);
    CHECK(memory.back() == 0x11);
    bool ok = true;
    for (uint32_t i = 0; i < size * 37; ++i) ok = ok && memory[1 + i] == pattern[i % size];
    CHECK(ok);
  }
}

TEST_CASE("cuda dispatcher rejects bad operands like the cpu kernels") {
  EmulatedLauncher launcher;
  hexir::hal::testing::HostTensor a = hexir::hal::testing::random_f32({4}, 1);
  hexir::hal::testing::HostTensor i32(hexir::DType::kI32, {4});
  hexir::hal::TensorArg ops[3] = {a.arg(), i32.arg(), a.arg()};
  hexir::hal::DispatchArgs args;
  args.kernel = 1;
  args.kernel_id = hexir::ops::OpId::kAdd;
  args.operands = ops;
  args.input_count = 2;
  args.operand_count = 3;
  Status s = hexir::hal::cuda::enqueue_dispatch(args, launcher);
  CHECK(s.code() == hexir::StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected f32") != std::string::npos);
  args.operand_count = 2;
  CHECK(hexir::hal::cuda::enqueue_dispatch(args, launcher).code() == hexir::StatusCode::kInvalidArgument);
  args.kernel_id = hexir::ops::OpId::kReshape;
  CHECK(hexir::hal::cuda::enqueue_dispatch(args, launcher).code() == hexir::StatusCode::kInvalidArgument);
  args.kernel_id = hexir::ops::OpId::kSoftmax;
  args.input_count = 1;
  ops[1] = a.arg();
  args.operand_count = 2;
  CHECK(hexir::hal::cuda::enqueue_dispatch(args, launcher).code() == hexir::StatusCode::kInvalidArgument);
  CHECK(launcher.launches == 0);
}
