// A minimal application embedding libhexir_vm: loads a compiled model, runs
// it once on the CPU and prints its outputs; given a reference .npy, checks
// output 0 against it (exit 1 when it differs). main.c does the same through
// the C API. Built against an installed hexir.pc:
//
//   hexir-compile samples/mlp.hxir -o mlp.hxe
//   c++ -std=c++20 main.cc $(pkg-config --cflags --libs hexir) -o hexir-embed
//   hexir-embed mlp.hxe samples/mlp/input_x.npy [samples/mlp/expected_0.npy]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/vm.h"

namespace {

int fail(const char* what, const hexir::Status& status) {
  std::fprintf(stderr, "hexir-embed: %s: %s\n", what, status.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.hxe INPUT.npy [EXPECTED.npy]\n", argv[0]);
    return 2;
  }
  // 1. Load: mmap the file and verify it. Nothing is copied.
  auto module = hexir::vm::Module::load_file(argv[1]);
  if (!module.ok()) return fail("load", module.status());
  // 2. Prepare once per device: constants uploaded (or imported) once.
  auto device = hexir::hal::create_device("cpu");
  if (!device.ok()) return fail("device", device.status());
  auto program = hexir::vm::Program::prepare(*module, **device);
  if (!program.ok()) return fail("prepare", program.status());
  // 3. One context per thread: its arena is allocated here, not per invoke.
  auto context = hexir::vm::Context::create(*program);
  if (!context.ok()) return fail("context", context.status());

  auto input = hexir::read_npy(argv[2]);
  if (!input.ok()) return fail("input", input.status());
  hexir::vm::TensorRef x{input->data.data(), input->data.size(), input->type};

  // 4. Invoke "main"; with no output buffers given, results land in the context's own.
  auto main_fn = module->find_function("main");
  if (!main_fn.ok()) return fail("function", main_fn.status());
  hexir::Status status = context->invoke(*main_fn, std::span(&x, 1));
  if (!status.ok()) return fail("invoke", status);

  const hexir::vm::FunctionSignature& sig = module->function(*main_fn);
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    auto out = context->output(*main_fn, i);
    if (!out.ok()) return fail("output", out.status());
    std::printf("output %zu: %s\n", i, out->type.to_string().c_str());
    if (out->type.dtype != hexir::DType::kF32) continue;
    const float* values = static_cast<const float*>(out->data);
    size_t n = out->byte_size / sizeof(float);
    for (size_t j = 0; j < std::min<size_t>(n, 10); ++j) std::printf(" %.6f", values[j]);
    if (n > 10) std::printf(" ... (%zu values)", n);
    std::printf("\n");
  }

  if (argc == 4) {
    auto want = hexir::read_npy(argv[3]);
    if (!want.ok()) return fail("expected", want.status());
    auto out = context->output(*main_fn, 0);
    if (!out.ok()) return fail("output", out.status());
    if (want->type != out->type || want->type.dtype != hexir::DType::kF32) {
      std::fprintf(stderr, "hexir-embed: %s is %s, output 0 is %s\n", argv[3], want->type.to_string().c_str(),
                   out->type.to_string().c_str());
      return 1;
    }
    const float* got = static_cast<const float*>(out->data);
    const float* ref = reinterpret_cast<const float*>(want->data.data());
    double worst = 0;
    bool same = true;
    for (size_t i = 0; i < want->data.size() / sizeof(float); ++i) {
      const double diff = std::fabs(double(got[i]) - ref[i]);
      if (!(diff <= 1e-5 + 1e-4 * std::fabs(double(ref[i])))) same = false;
      worst = std::max(worst, diff);
    }
    std::printf("%s %s (max abs diff %g)\n", same ? "matches" : "differs from", argv[3], worst);
    if (!same) return 1;
  }
  return 0;
}
