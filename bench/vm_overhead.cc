// VM interpreter overhead: a chain of tiny dispatches (add / mul / relu on
// f32[16], alternating) run through Context::invoke, against the bare CPU
// compute kernels called directly in a loop with plans computed beforehand.
// The kernels do almost no work, so the difference is what the VM adds per
// dispatch; dispatches per second of each are printed too.
//
//   vm_overhead [--dispatches N] [--rounds R] [--block B]
//
// Prints the median time per invoke of each and their ratio (target: within 5%).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/compiler/compiler.h"
#include "hexir/hal/cpu_kernels.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace {

using Clock = std::chrono::steady_clock;
using hexir::ops::OpId;

constexpr int64_t kWidth = 16;
constexpr float kAddend = 0.001f;
constexpr float kFactor = 0.999f;

OpId op_at(int i) {
  switch (i % 3) {
    case 0:
      return OpId::kAdd;
    case 1:
      return OpId::kMul;
    default:
      return OpId::kRelu;
  }
}

// main(%x: f32[16]) -> f32[16]: v1 = add(x, @a), v2 = mul(v1, @m), v3 = relu(v2), ...
std::string make_source(int dispatches) {
  std::string s = "module @chain\n\n";
  s += "const @a : f32[16] = splat " + std::to_string(kAddend) + "\n";
  s += "const @m : f32[16] = splat " + std::to_string(kFactor) + "\n\n";
  s += "func @main(%x: f32[16]) -> (f32[16]) {\n";
  std::string prev = "%x";
  for (int i = 0; i < dispatches; ++i) {
    std::string v = "%v" + std::to_string(i + 1);
    switch (op_at(i)) {
      case OpId::kAdd:
        s += "  " + v + " = call @add(" + prev + ", @a) : f32[16]\n";
        break;
      case OpId::kMul:
        s += "  " + v + " = call @mul(" + prev + ", @m) : f32[16]\n";
        break;
      default:
        s += "  " + v + " = call @relu(" + prev + ") : f32[16]\n";
        break;
    }
    prev = v;
  }
  s += "  return " + prev + "\n}\n";
  return s;
}

int fail(const char* what, const hexir::Status& status) {
  std::fprintf(stderr, "vm_overhead: %s: %s\n", what, status.to_string().c_str());
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The direct loop: the same compute kernels on the same operands, with the
// plans computed beforehand, called in a plain loop. Like the VM's in-place
// plan, the first op reads the input and writes a scratch buffer, the middle
// ones run in place, the last writes the output.
struct DirectChain {
  std::vector<float> a, m, scratch;
  std::vector<hexir::ops::OpPlan> plans;
  std::vector<void*> operands;  // 3 per dispatch
  std::vector<hexir::hal::Dispatch> dispatches;
  std::vector<hexir::hal::cpu::KernelFn> fns;
  hexir::hal::KernelContext context;

  hexir::Status build(int count, float* x, float* out) {
    a.assign(kWidth, kAddend);
    m.assign(kWidth, kFactor);
    scratch.assign(kWidth, 0.0f);
    operands.resize(3 * count);
    dispatches.resize(count);
    fns.resize(count);
    plans.clear();
    const hexir::TensorType type{hexir::DType::kF32, {kWidth}};
    float* prev = x;
    for (int i = 0; i < count; ++i) {
      const OpId id = op_at(i);
      const uint32_t inputs = id == OpId::kRelu ? 1 : 2;
      const std::vector<hexir::TensorType> in(inputs, type), result{type};
      HEXIR_ASSIGN_OR_RETURN(hexir::ops::OpPlan plan, hexir::ops::plan_op(id, in, result, {}));
      plans.push_back(std::move(plan));
      hexir::hal::cpu::KernelFn fn = hexir::hal::cpu::find_cpu_kernel(hexir::ops::kernel_key(id, in, result));
      if (fn == nullptr)
        return hexir::internal_error("no cpu kernel for " + std::string(hexir::ops::op_def(id).name));
      float* dst = (i + 1 == count) ? out : scratch.data();
      void** ops = &operands[3 * i];
      ops[0] = prev;
      if (inputs == 2) ops[1] = id == OpId::kAdd ? a.data() : m.data();
      ops[inputs] = dst;
      hexir::hal::Dispatch& d = dispatches[i];
      d.kernel = reinterpret_cast<uintptr_t>(fn);
      d.operands = ops;
      d.input_count = inputs;
      d.output_count = 1;
      fns[i] = fn;
      prev = dst;
    }
    for (int i = 0; i < count; ++i) dispatches[i].plan = plans[i].words().data();
    return hexir::ok_status();
  }

  hexir::Status run() const {
    const size_t n = dispatches.size();
    for (size_t i = 0; i < n; ++i) {
      hexir::Status s = fns[i](context, dispatches[i]);
      if (!s.ok()) return s;
    }
    return hexir::ok_status();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int dispatches = 1000, rounds = 200, block = 50;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (arg == "--dispatches")
      dispatches = next();
    else if (arg == "--rounds")
      rounds = next();
    else if (arg == "--block")
      block = next();
    else {
      std::fprintf(stderr, "usage: %s [--dispatches N] [--rounds R] [--block B]\n", argv[0]);
      return 2;
    }
  }
  if (dispatches < 1 || rounds < 1 || block < 1) {
    std::fprintf(stderr, "vm_overhead: counts must be positive\n");
    return 2;
  }

  // Compile and load the chain.
  auto hxe = hexir::compiler::compile_source(make_source(dispatches), "chain.hxir",
                                               std::filesystem::current_path());
  if (!hxe.ok()) return fail("compile", hxe.status());
  // load_buffer wants 64-byte aligned bytes.
  size_t padded = (hxe->size() + 63) / 64 * 64;
  auto* raw = static_cast<uint8_t*>(std::aligned_alloc(64, padded));
  std::memcpy(raw, hxe->data(), hxe->size());
  int rc = 0;
  {
    auto module = hexir::vm::Module::load_buffer({raw, hxe->size()});
    if (!module.ok()) {
      std::free(raw);
      return fail("load", module.status());
    }
    auto device = hexir::hal::create_device("cpu");
    if (!device.ok()) {
      std::free(raw);
      return fail("device", device.status());
    }
    auto program = hexir::vm::Program::prepare(*module, **device);
    if (!program.ok()) {
      std::free(raw);
      return fail("prepare", program.status());
    }
    auto context = hexir::vm::Context::create(*program);
    if (!context.ok()) {
      std::free(raw);
      return fail("context", context.status());
    }
    auto main_fn = module->find_function("main");
    if (!main_fn.ok()) {
      std::free(raw);
      return fail("function", main_fn.status());
    }
    const size_t fn = *main_fn;

    std::vector<float> x(kWidth), vm_out(kWidth, 0.0f), direct_out(kWidth, 0.0f);
    for (int i = 0; i < kWidth; ++i) x[i] = 0.1f * static_cast<float>(i - 8);
    hexir::TensorType type{hexir::DType::kF32, {kWidth}};
    hexir::vm::TensorRef in{x.data(), kWidth * sizeof(float), type};
    hexir::vm::TensorRef out{vm_out.data(), kWidth * sizeof(float), type};

    DirectChain direct;
    hexir::Status built = direct.build(dispatches, x.data(), direct_out.data());
    if (!built.ok()) {
      std::free(raw);
      return fail("direct", built);
    }

    // Warm up both, and check they agree.
    for (int i = 0; i < 3 * block; ++i) {
      hexir::Status s = context->invoke(fn, std::span(&in, 1), std::span(&out, 1));
      if (!s.ok()) {
        std::free(raw);
        return fail("invoke", s);
      }
      s = direct.run();
      if (!s.ok()) {
        std::free(raw);
        return fail("direct run", s);
      }
    }
    if (std::memcmp(vm_out.data(), direct_out.data(), kWidth * sizeof(float)) != 0) {
      std::fprintf(stderr, "vm_overhead: VM and direct results differ\n");
      rc = 1;
    }
    uint64_t vm_dispatches_before = context->invoke_stats().dispatches;
    uint64_t invokes_before = context->invoke_count();

    // Interleave blocks of each so drift and neighbours' load hit both alike.
    std::vector<double> vm_ns, direct_ns;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < block; ++i) (void)context->invoke(fn, std::span(&in, 1), std::span(&out, 1));
      auto t1 = Clock::now();
      for (int i = 0; i < block; ++i) (void)direct.run();
      auto t2 = Clock::now();
      vm_ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / block);
      direct_ns.push_back(std::chrono::duration<double, std::nano>(t2 - t1).count() / block);
    }
    uint64_t vm_dispatches = (context->invoke_stats().dispatches - vm_dispatches_before) /
                             (context->invoke_count() - invokes_before);

    double vm_med = median(vm_ns), direct_med = median(direct_ns);
    double ratio = vm_med / direct_med;
    std::printf("vm_overhead: %d dispatches of add/mul/relu on f32[16], %d rounds x %d invokes\n", dispatches,
                rounds, block);
    std::printf("  VM dispatches per invoke: %llu, device allocations during invokes: %llu\n",
                static_cast<unsigned long long>(vm_dispatches),
                static_cast<unsigned long long>(context->invoke_stats().device_allocations));
    std::printf("  direct kernel loop : %10.1f us/invoke  (%6.1f ns/dispatch)\n", direct_med / 1e3,
                direct_med / dispatches);
    std::printf("  VM Context::invoke : %10.1f us/invoke  (%6.1f ns/dispatch)\n", vm_med / 1e3,
                vm_med / dispatches);
    std::printf("  VM dispatches/s    : %10.3g   direct dispatches/s: %10.3g\n", dispatches / (vm_med * 1e-9),
                dispatches / (direct_med * 1e-9));
    std::printf("  ratio VM/direct    : %10.3f  (overhead %+.1f%%, %+.1f ns/dispatch; target within 5%%)\n",
                ratio, (ratio - 1.0) * 100.0, (vm_med - direct_med) / dispatches);
  }
  std::free(raw);
  return rc;
}
