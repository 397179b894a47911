// A minimal application embedding libhexir_vm: loads a compiled model, runs
// it once on the CPU and prints its outputs.
//
//   hexir-compile samples/mlp.hxir -o mlp.hxe
//   hexir-embed mlp.hxe samples/mlp/input_x.npy
#include <algorithm>
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
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.hxe INPUT.npy\n", argv[0]);
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
  return 0;
}
