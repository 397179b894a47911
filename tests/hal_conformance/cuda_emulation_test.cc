// The CUDA kernels and the dispatcher that launches them, run on the host:
// hal/cuda/kernels/*.cu compiled as C++ against cuda_emulation.h, every case
// of kernel_cases.h planned by its operator (ops::plan_op), resolved through
// hal/cuda's kernel table and enqueued through its host functions, then
// compared with the cpu kernels. Runs everywhere (no GPU, no nvcc), so the
// kernel table, the index math, launch shapes and parameter marshalling are
// tested on every build; the real device runs the same cases in
// conformance_test.cc.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
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
#include "cuda/kernels/spatial.cu"
#include "cuda/kernels/dynamic.cu"
// clang-format on

namespace {

using hexir::DType;
using hexir::Status;
using hexir::hal::conformance::KernelCase;
using hexir::hal::cuda::GemmBatch;
using hexir::hal::cuda::Kernel;
using hexir::hal::cuda::LaunchConfig;
using hexir::hal::testing::HostTensor;
using hexir::ops::OpId;

// The kernels with shared memory and __syncthreads; the rest run without threads.
bool uses_barriers(Kernel kernel) {
  return kernel == Kernel::kMatmul || kernel == Kernel::kSoftmax || kernel == Kernel::kAttention ||
         kernel == Kernel::kLayernorm ||
         kernel == Kernel::kGroupNorm || kernel == Kernel::kReduce || kernel == Kernel::kReduceI32 ||
         kernel == Kernel::kReduceI64 || kernel == Kernel::kLogSoftmax;
}

const char* kernel_name(Kernel kernel) {
  switch (kernel) {
#define HEXIR_KERNEL_NAME(name, symbol, P) \
  case Kernel::name:                       \
    return #symbol;
    HEXIR_CUDA_KERNELS(HEXIR_KERNEL_NAME)
#undef HEXIR_KERNEL_NAME
    case Kernel::kCount:
      break;
  }
  return "?";
}

// Runs each launch with the emulation; copies are memcpy. With `gemm` on, the
// library-GEMM path is taken too, computed by a plain loop over the batch.
// `max_grid` > 0 shrinks every grid dimension to at most that many blocks, to
// show that each kernel's grid-stride loops cover its work with any grid.
class EmulatedLauncher final : public hexir::hal::cuda::Launcher {
 public:
  explicit EmulatedLauncher(bool gemm = false, unsigned max_grid = 0) : gemm_(gemm), max_grid_(max_grid) {}

  Status launch(Kernel kernel, const LaunchConfig& requested, void* params) override {
    ++launches;
    kernels.push_back(kernel);
    LaunchConfig config = requested;
    for (int i = 0; i < 3; ++i) {
      if (config.grid[i] == 0 || config.block[i] == 0) return hexir::invalid_argument("empty launch");
      if (max_grid_ > 0 && config.grid[i] > max_grid_) config.grid[i] = max_grid_;
    }
    if (config.block[0] * config.block[1] * config.block[2] > 1024)
      return hexir::invalid_argument("block > 1024");
    if (config.grid[0] > 0x7fffffffu || config.grid[1] > 65535 || config.grid[2] > 65535)
      return hexir::invalid_argument("grid beyond the launch limits");
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
          const int64_t lda = g.lda > 0 ? g.lda : g.k, ldb = g.ldb > 0 ? g.ldb : (g.b_transposed ? g.k : g.n);
          for (int32_t k = 0; k < g.k; ++k) acc += a[i * lda + k] * (g.b_transposed ? b[j * ldb + k] : b[k * ldb + j]);
          c[i * g.n + j] = acc;
        }
    }
    return hexir::ok_status();
  }

  int launches = 0, copies = 0, gemms = 0;
  std::vector<Kernel> kernels;

 private:
  bool gemm_;
  unsigned max_grid_;
};

std::vector<hexir::TensorType> types_of(const std::vector<HostTensor>& tensors) {
  std::vector<hexir::TensorType> types;
  for (const HostTensor& t : tensors) types.push_back(t.type());
  return types;
}

// Plans `c` as the VM does (hal/testing::prepare_call), swaps the cpu kernel
// for the one hal/cuda resolves for the same key, and runs it on host memory.
std::vector<HostTensor> run_case(const KernelCase& c, EmulatedLauncher& launcher) {
  std::vector<HostTensor> inputs = c.inputs;
  std::vector<HostTensor> outputs = hexir::hal::conformance::results_of(c);
  std::vector<HostTensor*> in_pointers, out_pointers;
  for (HostTensor& t : inputs) in_pointers.push_back(&t);
  for (HostTensor& t : outputs) out_pointers.push_back(&t);
  auto call =
      hexir::hal::testing::prepare_call(c.id, in_pointers, out_pointers, c.params, c.in_place ? 0 : -1);
  INFO(c.name, ": ", call.status().to_string());
  REQUIRE(call.ok());
  const hexir::ops::KernelKey key = hexir::ops::kernel_key(c.id, types_of(inputs), types_of(outputs));
  hexir::Result<uintptr_t> handle = hexir::hal::cuda::resolve_cuda_kernel(key);
  INFO("resolve: ", handle.status().to_string());
  REQUIRE(handle.ok());
  call->dispatch.kernel = *handle;
  Status s = hexir::hal::cuda::enqueue_dispatch(call->dispatch, launcher);
  INFO("dispatch: ", s.to_string());
  REQUIRE(s.ok());
  if (c.in_place) outputs[0].bytes = inputs[0].bytes;
  return outputs;
}

void check_all(const KernelCase& c, const std::vector<HostTensor>& got, const std::vector<HostTensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    hexir::hal::conformance::check_matches(c, got[i], want[i]);
  }
}

HostTensor f16_bits(std::vector<int64_t> dims, const std::vector<uint16_t>& bits) {
  HostTensor t(DType::kF16, std::move(dims));
  REQUIRE(t.bytes.size() == bits.size() * 2);
  std::memcpy(t.bytes.data(), bits.data(), t.bytes.size());
  return t;
}

HostTensor f32_values(std::vector<int64_t> dims, const std::vector<float>& values) {
  HostTensor t(DType::kF32, std::move(dims));
  REQUIRE(t.count() == static_cast<int64_t>(values.size()));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

template <typename T>
HostTensor ints(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  HostTensor t(dtype, std::move(dims));
  REQUIRE(t.bytes.size() == values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// Cases for paths of the cuda host functions that kernel_cases.h need not
// reach: the 16-byte units of split and gather, one-copy splits and concats,
// f16 conversion corners, slices with negative steps of every element size,
// conv2d shapes with one output row or column.
std::vector<KernelCase> cuda_cases() {
  using hexir::hal::testing::iota_bytes;
  using hexir::hal::testing::random_f32;
  std::vector<KernelCase> cases;
  auto exact = [&](std::string n, OpId id, std::vector<HostTensor> inputs, std::vector<int64_t> params) {
    KernelCase c{"cuda: " + std::move(n), id, std::move(inputs), std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  exact("split f32 into 16-byte-aligned parts", OpId::kSplit, {random_f32({3, 16}, 2000)}, {1, 8, 4, 4});
  exact("split along axis 0 (one copy each)", OpId::kSplit, {iota_bytes(DType::kI32, {5, 3})}, {0, 2, 0, 3});
  exact("split into one part", OpId::kSplit, {iota_bytes(DType::kU8, {2, 5})}, {1, 5});
  exact("split bool odd rows", OpId::kSplit, {iota_bytes(DType::kBool, {4, 3})}, {1, 1, 2});
  exact("concat along axis 0 (one copy each)", OpId::kConcat,
        {iota_bytes(DType::kF16, {2, 3}), iota_bytes(DType::kF16, {1, 3})}, {0});
  exact("gather 16-byte rows, i32 indices", OpId::kGather,
        {random_f32({6, 4}, 2001), ints<int32_t>(DType::kI32, {5}, {5, 0, -6, 2, -1})}, {0});
  exact("gather i64 scalars from axis 1", OpId::kGather,
        {iota_bytes(DType::kI64, {3, 4}), ints<int64_t>(DType::kI64, {2, 2}, {3, -4, 0, 1})}, {1});
  exact("gather f16 2-byte rows", OpId::kGather,
        {iota_bytes(DType::kF16, {2, 5, 1}), ints<int64_t>(DType::kI64, {3}, {4, 4, -5})}, {1});
  exact("gather with no indices", OpId::kGather, {random_f32({3, 4}, 2002), HostTensor(DType::kI64, {0})},
        {0});

  // f16: NaNs with payloads, infinities, signed zeros, subnormals, the largest finite.
  const HostTensor halves = f16_bits(
      {12}, {0x7c01, 0xfe00, 0x7c00, 0xfc00, 0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x3c00, 0x3555});
  // f32 values at the f16 rounding boundaries: ties to even, overflow, underflow to subnormal and zero.
  const float tie_up = 1.0f + 3.0f / 2048.0f, tie_down = 1.0f + 1.0f / 2048.0f;
  const float subnormal_unit = std::ldexp(1.0f, -24);  // the smallest f16 subnormal
  const HostTensor floats =
      f32_values({17}, {tie_up, tie_down, 65504.0f, 65519.99f, 65520.0f, -65520.0f, subnormal_unit,
                        0.5f * subnormal_unit, std::nextafter(0.5f * subnormal_unit, 1.0f),
                        1.5f * subnormal_unit, -2.5f * subnormal_unit, 1023.5f * subnormal_unit, 1e-10f,
                        -0.0f, std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(), std::ldexp(1.0f, -14)});
  const HostTensor wide =
      ints<int64_t>(DType::kI64, {6}, {2049, -2049, 65519, 65520, 1 << 30, -(int64_t{1} << 40)});
  const HostTensor sats = f32_values({10}, {2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f,
                                            -1.5f, 255.9f, 256.0f, -0.99f, 9.3e18f, -9.3e18f});
  for (DType to : {DType::kF32, DType::kF16, DType::kI32, DType::kI64, DType::kBool, DType::kU8}) {
    const std::string t = hexir::dtype_name(to);
    exact("cast f16 corners to " + t, OpId::kCast, {halves}, {static_cast<int64_t>(to)});
    exact("cast i64 beyond f16 precision to " + t, OpId::kCast, {wide}, {static_cast<int64_t>(to)});
  }
  exact("cast f32 rounding corners to f16", OpId::kCast, {floats}, {static_cast<int64_t>(DType::kF16)});
  for (DType to : {DType::kI32, DType::kI64, DType::kU8, DType::kBool})
    exact(std::string("cast f32 saturation corners to ") + hexir::dtype_name(to), OpId::kCast, {sats},
          {static_cast<int64_t>(to)});

  // slice params: per dim [start, step, size]
  exact("slice f32 reversed", OpId::kSlice, {random_f32({7}, 2003)}, {6, -1, 7});
  exact("slice f16 negative steps both dims", OpId::kSlice, {iota_bytes(DType::kF16, {5, 6})},
        {4, -2, 3, 5, -3, 2});
  exact("slice bool negative step", OpId::kSlice, {iota_bytes(DType::kBool, {3, 5})}, {0, 1, 3, 4, -1, 5});
  exact("slice i32 4-D mixed steps", OpId::kSlice, {iota_bytes(DType::kI32, {2, 3, 4, 5})},
        {1, -1, 2, 0, 2, 2, 3, -1, 3, 1, 3, 2});
  exact("slice scalar", OpId::kSlice, {random_f32({}, 2004)}, {});
  exact("where i32 scalar condition", OpId::kWhere,
        {ints<uint8_t>(DType::kBool, {}, {2}), iota_bytes(DType::kI32, {3, 4}), iota_bytes(DType::kI32, {4})},
        {});
  exact(
      "where bool of one element", OpId::kWhere,
      {ints<uint8_t>(DType::kBool, {1}, {0}), iota_bytes(DType::kBool, {1, 1}), iota_bytes(DType::kBool, {})},
      {});

  auto conv = [&](std::string n, std::vector<int64_t> x, std::vector<int64_t> w, bool bias,
                  std::vector<int64_t> params, uint32_t s) {
    KernelCase c{
        "cuda: conv2d " + n, OpId::kConv2d, {random_f32(x, s), random_f32(w, s + 1)}, std::move(params)};
    if (bias) c.inputs.push_back(random_f32({w[0]}, s + 2));
    cases.push_back(c);
  };
  // [stride_h, stride_w, pad_t, pad_l, pad_b, pad_r, dil_h, dil_w, groups]
  conv("kernel as large as the padded input", {1, 2, 3, 4}, {3, 2, 5, 6}, true, {1, 1, 1, 1, 1, 1, 1, 1, 1},
       2010);
  conv("stride 3, dilation 2, groups 3, no bias", {2, 6, 11, 10}, {9, 2, 2, 3}, false,
       {3, 2, 0, 2, 1, 0, 2, 2, 3}, 2013);
  conv("single output pixel per image", {3, 4, 2, 2}, {2, 4, 2, 2}, true, {1, 1, 0, 0, 0, 0, 1, 1, 1}, 2016);
  return cases;
}

}  // namespace

TEST_CASE("cuda kernels (host emulation) match the cpu kernels") {
  for (const auto& c : hexir::hal::conformance::kernel_cases()) {
    CAPTURE(c.name);
    EmulatedLauncher launcher;
    check_all(c, run_case(c, launcher), hexir::hal::conformance::cpu_reference(c));
  }
}

// The cpu GEMM (matmul, conv2d) sums in K blocks with FMA where the machine
// has it, the cuda kernels in one plain chain: those agree within rounding.
// conv_transpose too: the cpu sums over input channels in its GEMM (FMA) and
// then adds the taps, the cuda kernel sums (ci, ky, kx) in one chain
// (ops::conv_transpose_element). Every other kernel agrees bit for bit.
bool sums_differently(OpId id) {
  return id == OpId::kMatmul || id == OpId::kConv2d || id == OpId::kConvTranspose;
}

TEST_CASE("cuda kernels (host emulation): the cuda-only cases match the cpu kernels bit for bit") {
  for (const auto& c : cuda_cases()) {
    CAPTURE(c.name);
    EmulatedLauncher launcher;
    std::vector<HostTensor> got = run_case(c, launcher);
    std::vector<HostTensor> want = hexir::hal::conformance::cpu_reference(c);
    REQUIRE(got.size() == want.size());
    if (sums_differently(c.id)) {
      check_all(c, got, want);
      continue;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].bytes == want[i].bytes);
    }
  }
}

TEST_CASE("cuda kernels cover their work with any grid (grid-stride loops)") {
  // Every grid dimension cut to 1 and to 3 blocks: the kernels must loop over the rest.
  for (unsigned max_grid : {1u, 3u}) {
    CAPTURE(max_grid);
    for (const auto& c : hexir::hal::conformance::kernel_cases()) {
      CAPTURE(c.name);
      EmulatedLauncher launcher(/*gemm=*/false, max_grid);
      check_all(c, run_case(c, launcher), hexir::hal::conformance::cpu_reference(c));
    }
  }
}

TEST_CASE("cuda matmul, conv2d and conv_transpose agree with the cpu kernels within rounding") {
  std::vector<KernelCase> cases = hexir::hal::conformance::kernel_cases();
  for (const KernelCase& c : cuda_cases()) cases.push_back(c);
  int checked = 0;
  for (const auto& c : cases) {
    if (c.id != OpId::kMatmul && c.id != OpId::kConv2d && c.id != OpId::kConvTranspose) continue;
    CAPTURE(c.name);
    EmulatedLauncher launcher;
    std::vector<HostTensor> got = run_case(c, launcher);
    std::vector<HostTensor> want = hexir::hal::conformance::cpu_reference(c);
    REQUIRE(got.size() == 1);
    if (sums_differently(c.id))
      hexir::hal::conformance::check_matches(c, got[0], want[0]);
    else
      CHECK(got[0].bytes == want[0].bytes);
    ++checked;
  }
  CHECK(checked >= 19);
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
                             {"matmul 64x96x80", true},
                             {"matmul + bias + gelu (fused)", true},
                             {"batched matmul + relu6 (fused)", true},
                             {"batched matmul, b transposed", true},
                             {"matmul, b transposed, + bias + relu (fused)", true}};
  for (const auto& c : hexir::hal::conformance::kernel_cases()) {
    if (c.id != OpId::kMatmul || c.inputs[0].dtype != DType::kF32) continue;  // the f32 cases
    CAPTURE(c.name);
    bool found = false;
    for (const Expect& e : expected) {
      if (c.name != e.name) continue;
      found = true;
      EmulatedLauncher launcher(/*gemm=*/true);
      std::vector<HostTensor> got = run_case(c, launcher);
      CHECK(launcher.gemms == (e.gemm ? 1 : 0));
      check_all(c, got, hexir::hal::conformance::cpu_reference(c));
    }
    CHECK(found);
  }
}

TEST_CASE("cuda split, concat and gather pick their copy units from the pointers and row sizes") {
  struct Expect {
    const char* name;
    int copies;
    std::vector<Kernel> kernels;
  };
  const Expect expected[] = {
      {"cuda: split f32 into 16-byte-aligned parts",
       0,
       {Kernel::kStridedCopy16, Kernel::kStridedCopy16, Kernel::kStridedCopy16}},
      {"cuda: split along axis 0 (one copy each)", 2, {}},
      {"cuda: split into one part", 1, {}},
      {"cuda: split bool odd rows", 0, {Kernel::kStridedCopy1, Kernel::kStridedCopy1}},
      {"cuda: concat along axis 0 (one copy each)", 2, {}},
      {"cuda: gather 16-byte rows, i32 indices", 0, {Kernel::kGather16}},
      {"cuda: gather i64 scalars from axis 1", 0, {Kernel::kGather4}},
      {"cuda: gather f16 2-byte rows", 0, {Kernel::kGather1}},
      {"cuda: gather with no indices", 0, {}},
  };
  for (const Expect& e : expected) {
    CAPTURE(e.name);
    bool found = false;
    for (const KernelCase& c : cuda_cases()) {
      if (c.name != e.name) continue;
      found = true;
      EmulatedLauncher launcher;
      run_case(c, launcher);
      CHECK(launcher.copies == e.copies);
      REQUIRE(launcher.kernels.size() == e.kernels.size());
      for (size_t i = 0; i < e.kernels.size(); ++i) {
        CAPTURE(i);
        CHECK(std::string(kernel_name(launcher.kernels[i])) == kernel_name(e.kernels[i]));
      }
    }
    CHECK(found);
  }
}

TEST_CASE("cuda gather writes zeros for out-of-range indices (the cpu kernel reports them)") {
  HostTensor data = hexir::hal::testing::random_f32({4, 3}, 2100);
  HostTensor indices = ints<int64_t>(DType::kI64, {4}, {1, 4, -5, -4});
  KernelCase c{"gather out of range", OpId::kGather, {data, indices}, {0}};
  EmulatedLauncher launcher;
  std::vector<HostTensor> got = run_case(c, launcher);
  REQUIRE(got.size() == 1);
  const float* out = got[0].f32();
  for (int j = 0; j < 3; ++j) {
    CHECK(out[0 * 3 + j] == data.at(1 * 3 + j));
    CHECK(out[1 * 3 + j] == 0.0f);
    CHECK(out[2 * 3 + j] == 0.0f);
    CHECK(out[3 * 3 + j] == data.at(0 * 3 + j));
  }
}

TEST_CASE("cuda kernel table: a kernel for every dispatchable operator, none for views or other dtypes") {
  using hexir::ops::KernelKey;
  for (int id = 0; id < hexir::ops::kOpCount; ++id) {
    const hexir::ops::OpDef& def = hexir::ops::op_def(static_cast<OpId>(id));
    const std::string name = def.name;
    CAPTURE(name);
    const KernelKey key = hexir::hal::testing::representative_key(static_cast<OpId>(id));
    hexir::Result<uintptr_t> handle = hexir::hal::cuda::resolve_cuda_kernel(key);
    if (def.is_view) {
      CHECK(handle.status().code() == hexir::StatusCode::kUnimplemented);
      CHECK(handle.status().message().find("view") != std::string::npos);
    } else {
      CHECK(handle.ok());
    }
  }
  // f32-only operators have nothing for other dtypes; cast has every castable pair and no other.
  hexir::Result<uintptr_t> softmax_i32 =
      hexir::hal::cuda::resolve_cuda_kernel({OpId::kSoftmax, DType::kI32, DType::kI32});
  CHECK(softmax_i32.status().code() == hexir::StatusCode::kUnimplemented);
  CHECK(softmax_i32.status().message().find("cuda") != std::string::npos);
  // The integer operators have one kernel per dtype.
  for (OpId id : {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kMinimum, OpId::kMod,
                  OpId::kNeg, OpId::kAbs, OpId::kSign})
    for (DType t : {DType::kI32, DType::kI64}) CHECK(hexir::hal::cuda::resolve_cuda_kernel({id, t, t}).ok());
  const DType castable[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kBool, DType::kU8};
  for (DType from : castable)
    for (DType to : castable) CHECK(hexir::hal::cuda::resolve_cuda_kernel({OpId::kCast, from, to}).ok());
  CHECK(!hexir::hal::cuda::resolve_cuda_kernel({OpId::kCast, DType::kI8, DType::kF32}).ok());
  // f16 and bf16 through the f32 kernels (ops/widen.h).
  for (DType t : {DType::kF16, DType::kBF16}) {
    CHECK(hexir::hal::cuda::resolve_cuda_kernel({OpId::kMatmul, t, t}).ok());
    CHECK(hexir::hal::cuda::resolve_cuda_kernel({OpId::kLess, t, DType::kBool}).ok());
  }
  CHECK(!hexir::hal::cuda::resolve_cuda_kernel({OpId::kCast, DType::kF32, DType::kI8}).ok());
  // Byte-moving operators take every dtype.
  for (int t = 0; t < hexir::kDTypeCount; ++t) {
    const DType dtype = static_cast<DType>(t);
    for (OpId op : {OpId::kTranspose, OpId::kSlice, OpId::kConcat, OpId::kSplit, OpId::kCopy, OpId::kGather,
                    OpId::kWhere, OpId::kPad, OpId::kExpand})
      CHECK(hexir::hal::cuda::resolve_cuda_kernel({op, dtype, dtype}).ok());
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

namespace {

// One operator on strided views (docs/views.md) through the cpu kernel and
// the cuda one (host emulation), with the plan the VM makes: each operand at
// its view's offset in the base, the strides in the plan.
struct StridedCase {
  const char* name;
  OpId id;
  std::vector<HostTensor> bases;
  std::vector<hexir::TensorType> types;  // of the views
  std::vector<hexir::ops::ViewLayout> layouts;
  std::vector<int64_t> params;
};

HostTensor run_strided(StridedCase& c, bool cuda) {
  std::vector<std::vector<int64_t>> strides;
  for (const auto& l : c.layouts) strides.push_back(l.strides);
  auto results = hexir::ops::infer_result_types(c.id, c.types, c.params);
  REQUIRE(results.ok());
  HostTensor out((*results)[0].dtype, (*results)[0].dims);
  std::vector<hexir::TensorType> out_types = {out.type()};
  auto plan = hexir::ops::plan_op(c.id, c.types, out_types, c.params, strides);
  INFO(c.name, ": ", plan.status().to_string());
  REQUIRE(plan.ok());
  std::vector<void*> operands;
  for (size_t i = 0; i < c.bases.size(); ++i)
    operands.push_back(c.bases[i].bytes.data() + c.layouts[i].offset * hexir::dtype_size(c.types[i].dtype));
  operands.push_back(out.bytes.data());
  hexir::hal::Dispatch d;
  d.plan = plan->words().data();
  d.operands = operands.data();
  d.input_count = static_cast<uint32_t>(c.bases.size());
  d.output_count = 1;
  const hexir::ops::KernelKey key = hexir::ops::kernel_key(c.id, c.types, out_types);
  if (cuda) {
    hexir::Result<uintptr_t> handle = hexir::hal::cuda::resolve_cuda_kernel(key);
    REQUIRE(handle.ok());
    d.kernel = *handle;
    EmulatedLauncher launcher;
    REQUIRE(hexir::hal::cuda::enqueue_dispatch(d, launcher).ok());
  } else {
    hexir::hal::cpu::KernelFn fn = hexir::hal::cpu::find_cpu_kernel(key);
    REQUIRE(static_cast<bool>(fn));
    REQUIRE(fn(hexir::hal::KernelContext{}, d).ok());
  }
  return out;
}

}  // namespace

TEST_CASE("cuda kernels (host emulation) read strided views like the cpu kernels") {
  using hexir::ops::ViewLayout;
  const hexir::TensorType t34{DType::kF32, {3, 4}};
  // A [4,3] base read transposed as [3,4] (strides 1, 3), and sliced with
  // steps from a [6,8] base (offset 9, strides 16, 2).
  const ViewLayout transposed{0, {1, 3}}, sliced{9, {16, 2}};
  std::vector<StridedCase> cases = {
      {"relu of a transpose", OpId::kRelu, {hexir::hal::testing::random_f32({4, 3}, 1)}, {t34}, {transposed}, {}},
      {"gelu (erf) of a slice", OpId::kGelu, {hexir::hal::testing::random_f32({6, 8}, 2)}, {t34}, {sliced}, {0}},
      {"clip of a transpose", OpId::kClip, {hexir::hal::testing::random_f32({4, 3}, 3)}, {t34}, {transposed},
       {std::bit_cast<int64_t>(-0.5), std::bit_cast<int64_t>(0.5)}},
      {"add of a transpose and a broadcast row", OpId::kAdd,
       {hexir::hal::testing::random_f32({4, 3}, 4), hexir::hal::testing::random_f32({6, 8}, 5)},
       {t34, t34}, {transposed, ViewLayout{3, {0, 1}}}, {}},
      {"less of two slices", OpId::kLess,
       {hexir::hal::testing::random_f32({6, 8}, 6), hexir::hal::testing::random_f32({6, 8}, 7)},
       {t34, t34}, {sliced, ViewLayout{1, {8, 2}}}, {}},
      {"reduce_sum of a transpose", OpId::kReduceSum, {hexir::hal::testing::random_f32({4, 3}, 8)}, {t34},
       {transposed}, {0, 1}},
      {"reduce_max of a slice", OpId::kReduceMax, {hexir::hal::testing::random_f32({6, 8}, 9)}, {t34}, {sliced},
       {1, 0}},
      {"copy of a slice", OpId::kCopy, {hexir::hal::testing::random_f32({6, 8}, 10)}, {t34}, {sliced}, {}},
      {"matmul of two head splits (transpose_b)", OpId::kMatmul,
       {hexir::hal::testing::random_f32({5, 3, 4}, 11), hexir::hal::testing::random_f32({5, 3, 4}, 12)},
       {hexir::TensorType{DType::kF32, {3, 5, 4}}, hexir::TensorType{DType::kF32, {3, 5, 4}}},
       {ViewLayout{0, {4, 12, 1}}, ViewLayout{0, {4, 12, 1}}}, {1}},
      {"matmul of a row slice", OpId::kMatmul,
       {hexir::hal::testing::random_f32({6, 8}, 13), hexir::hal::testing::random_f32({4, 5}, 14)},
       {t34, hexir::TensorType{DType::kF32, {4, 5}}}, {ViewLayout{2, {16, 1}}, ViewLayout{}}, {0}},
      {"copy of i64 transposed", OpId::kCopy, {hexir::hal::testing::iota_bytes(DType::kI64, {4, 3})},
       {hexir::TensorType{DType::kI64, {3, 4}}}, {transposed}, {}},
  };
  for (StridedCase& c : cases) {
    CAPTURE(c.name);
    const HostTensor want = run_strided(c, false);
    const HostTensor got = run_strided(c, true);
    if (want.dtype != DType::kF32) {
      CHECK(got.bytes == want.bytes);
      continue;
    }
    for (int64_t i = 0; i < want.count(); ++i) CHECK(got.at(i) == doctest::Approx(want.at(i)).epsilon(1e-5));
  }
}
