#include "hexir/vm.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "alloc_counter.h"
#include "hxe_test_builder.h"
#include "vm_impl.h"

namespace hexir::vm {
namespace {

using hexir::testing::AlignedBytes;
using hexir::testing::ModuleSpec;
using hexir::testing::tiny_expected;
using hexir::testing::tiny_module_spec;
using hexir::testing::write_hxe;

const TensorType kVec{DType::kF32, {1, 4}};

std::unique_ptr<hal::Device> cpu_device() {
  Result<std::unique_ptr<hal::Device>> device = hal::create_device("cpu");
  REQUIRE_MESSAGE(device.ok(), device.status().to_string());
  return std::move(device).value();
}

std::string write_temp_file(const AlignedBytes& bytes) {
  char path[] = "/tmp/hexir_vm_test_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  return path;
}

// Runs the tiny model on `context` and checks y = relu((x + b) * 0.5).
void run_and_check(Context& context, const std::array<float, 4>& x) {
  std::array<float, 4> in = x;
  std::array<float, 4> out{-1, -1, -1, -1};
  TensorRef input{in.data(), 16, kVec};
  TensorRef output{out.data(), 16, kVec};
  Status status = context.invoke(0, {&input, 1}, {&output, 1});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  for (size_t i = 0; i < 4; ++i) CHECK(out[i] == doctest::Approx(tiny_expected(x[i], i)));
}

bool inside(const void* p, std::span<const uint8_t> range) {
  auto* b = static_cast<const uint8_t*>(p);
  return b >= range.data() && b < range.data() + range.size();
}

TEST_CASE("load_buffer: accessors and signatures") {
  AlignedBytes bytes = write_hxe(tiny_module_spec());
  Result<Module> module = Module::load_buffer(bytes.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  CHECK(module->name() == "tiny");
  REQUIRE(module->function_count() == 1);
  const FunctionSignature& main = module->function(0);
  CHECK(main.name == "main");
  REQUIRE(main.inputs.size() == 1);
  CHECK(main.inputs[0].name == "x");
  CHECK(main.inputs[0].type == kVec);
  CHECK(main.inputs[0].byte_size == 16);
  REQUIRE(main.outputs.size() == 1);
  CHECK(main.outputs[0].type == kVec);
  CHECK(module->arena_bytes() == 64);
  CHECK(module->lower_bound_bytes() == 16);
  CHECK(module->constant_bytes() == 32);
  CHECK(module->find_function("main").value() == 0);
  Result<size_t> missing = module->find_function("mian");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("'main'") != std::string::npos);
}

TEST_CASE("load_buffer rejects unaligned memory and corrupt files") {
  AlignedBytes bytes = write_hxe(tiny_module_spec());
  CHECK(Module::load_buffer({bytes.data() + 8, bytes.size() - 8}).status().code() ==
        StatusCode::kInvalidArgument);
  CHECK(Module::load_buffer(bytes.prefix(100)).status().code() == StatusCode::kDataLoss);
}

TEST_CASE("load_file maps, verifies and runs; errors name the file") {
  AlignedBytes bytes = write_hxe(tiny_module_spec());
  const std::string path = write_temp_file(bytes);
  {
    Result<Module> module = Module::load_file(path);
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    auto device = cpu_device();
    Result<Program> program = Program::prepare(*module, *device);
    REQUIRE_MESSAGE(program.ok(), program.status().to_string());
    Result<Context> context = Context::create(*program);
    REQUIRE_MESSAGE(context.ok(), context.status().to_string());
    run_and_check(*context, {1, 2, -3, 4});

    // RODATA comes straight from the mapping.
    const ModuleImpl& impl = module->impl();
    REQUIRE_FALSE(impl.mapping.empty());
    CHECK(inside(program->impl().constant_data[0], impl.mapping.bytes()));
  }
  std::remove(path.c_str());
  Result<Module> missing = Module::load_file(path);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find(path) != std::string::npos);

  AlignedBytes truncated(100);
  std::memcpy(truncated.data(), bytes.data(), 100);
  const std::string bad_path = write_temp_file(truncated);
  Result<Module> bad = Module::load_file(bad_path);
  std::remove(bad_path.c_str());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK(bad.status().message().find(bad_path) != std::string::npos);
}

struct Loaded {
  AlignedBytes bytes;
  std::unique_ptr<hal::Device> device;
  std::optional<Module> module;
  std::optional<Program> program;
};

std::unique_ptr<Loaded> load_tiny(const ModuleSpec& spec = tiny_module_spec()) {
  auto l = std::make_unique<Loaded>();
  l->bytes = write_hxe(spec);
  Result<Module> module = Module::load_buffer(l->bytes.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  l->module.emplace(std::move(module).value());
  l->device = cpu_device();
  Result<Program> program = Program::prepare(*l->module, *l->device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  l->program.emplace(std::move(program).value());
  return l;
}

TEST_CASE("prepare imports RODATA in place and materializes fills once") {
  auto l = load_tiny();
  const PhaseStats& stats = l->program->prepare_stats();
  CHECK(stats.device_allocations == 1);  // the packed fills
  CHECK(stats.uploads == 0);             // cpu imports RODATA
  const ProgramImpl& p = l->program->impl();
  REQUIRE(p.constant_data.size() == 2);
  CHECK(p.constant_data[0] == l->bytes.data() + 4096);
  const float* fill = static_cast<const float*>(p.constant_data[1]);
  for (int i = 0; i < 4; ++i) CHECK(fill[i] == 0.5f);
  CHECK(&l->program->module().impl() == &l->module->impl());  // the Program holds its own handle
  CHECK(l->program->device().name() == "cpu");
}

TEST_CASE("the constant operand of a dispatch points into the caller's buffer") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  const FunctionTable& table = context->impl().functions[0];
  REQUIRE(table.dispatches.size() == 3);
  const hal::Dispatch& add = table.dispatches[0];
  REQUIRE(add.input_count + add.output_count == 3);
  CHECK(inside(add.operands[1], l->bytes.span()));
  CHECK(add.operands[1] == l->bytes.data() + 4096);
  // The in-place mul writes where add wrote.
  CHECK(table.dispatches[1].operands[2] == add.operands[2]);
}

// The verifier refuses an unknown opcode at load; should one reach the VM
// anyway (here written into the table), it stops the invoke.
TEST_CASE("an opcode the VM does not know is an error, not a LoopNext") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  // Written past the const view of impl(): what a corrupted table would hold.
  FunctionTable& t = const_cast<ContextImpl&>(context->impl()).functions[0];
  REQUIRE(t.dispatches.size() == 3);
  t.opcode = {fb::Opcode::Dispatch, static_cast<fb::Opcode>(99), fb::Opcode::Dispatch};
  t.target.assign(3, 0);
  t.step.assign(3, 0);
  t.run_end = {1, 2, 3};
  std::array<float, 4> x{1, 2, 3, 4}, y{};
  TensorRef in{x.data(), 16, kVec}, out{y.data(), 16, kVec};
  Status status = context->invoke(0, {&in, 1}, {&out, 1});
  CHECK(status.code() == StatusCode::kInternal);
  CHECK(status.to_string().find("opcode 99") != std::string::npos);
  CHECK(context->invoke_stats().dispatches == 1);  // the instruction before it
}

TEST_CASE("invoke computes the result, with caller and context-owned outputs") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  CHECK(context->create_stats().device_allocations == 2);  // arena + one output buffer
  run_and_check(*context, {1, 2, 3, 4});
  run_and_check(*context, {-1, 5, -3, 0.5f});

  // No outputs: results land in the context's own buffer.
  std::array<float, 4> x{3, 3, -7, 9};
  TensorRef input{x.data(), 16, kVec};
  CHECK_FALSE(context->output(0, 0).ok());  // the last invoke passed outputs
  REQUIRE(context->invoke("main", {&input, 1}).ok());
  Result<TensorRef> own = context->output(0, 0);
  REQUIRE_MESSAGE(own.ok(), own.status().to_string());
  CHECK(own->type == kVec);
  CHECK(own->byte_size == 16);
  const float* y = static_cast<const float*>(own->data);
  for (size_t i = 0; i < 4; ++i) CHECK(y[i] == doctest::Approx(tiny_expected(x[i], i)));
  // Owned by the context: the same buffer every time, not the caller's.
  REQUIRE(context->invoke(0, {&input, 1}).ok());
  CHECK(context->output(0, 0)->data == own->data);
  std::array<float, 4> read{};
  REQUIRE(context->read_output(0, 0, {reinterpret_cast<uint8_t*>(read.data()), 16}).ok());
  for (size_t i = 0; i < 4; ++i) CHECK(read[i] == y[i]);
  CHECK_FALSE(context->output(0, 1).ok());
  CHECK(context->invoke_count() == 4);
  CHECK(context->invoke_stats().dispatches == 12);
}

TEST_CASE("invoke argument errors") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  std::array<float, 8> x{};
  std::array<float, 8> y{};
  TensorRef input{x.data(), 16, kVec};
  TensorRef output{y.data(), 16, kVec};

  auto message = [&](Status s) {
    CHECK_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    return s.message();
  };
  CHECK(message(context->invoke(0, {})) == "function 'main' takes 1 inputs, got 0");
  TensorRef two[2] = {input, input};
  CHECK(message(context->invoke(0, two)) == "function 'main' takes 1 inputs, got 2");
  TensorRef wrong_shape{x.data(), 32, TensorType{DType::kF32, {2, 4}}};
  CHECK(message(context->invoke(0, {&wrong_shape, 1})) ==
        "input 'x' of function 'main': expected f32[1,4], got f32[2,4]");
  TensorRef wrong_dtype{x.data(), 16, TensorType{DType::kI32, {1, 4}}};
  CHECK(message(context->invoke(0, {&wrong_dtype, 1})) ==
        "input 'x' of function 'main': expected f32[1,4], got i32[1,4]");
  TensorRef short_buffer{x.data(), 8, kVec};
  CHECK(message(context->invoke(0, {&short_buffer, 1})).find("smaller") != std::string::npos);
  TensorRef null_data{nullptr, 16, kVec};
  CHECK(message(context->invoke(0, {&null_data, 1})).find("null") != std::string::npos);
  TensorRef bad_out{y.data(), 16, TensorType{DType::kF32, {4}}};
  CHECK(message(context->invoke(0, {&input, 1}, {&bad_out, 1})) ==
        "output 0 of function 'main': expected f32[1,4], got f32[4]");
  TensorRef outs[2] = {output, output};
  CHECK(message(context->invoke(0, {&input, 1}, outs)) == "function 'main' has 1 outputs, got 2");
  TensorRef same_as_input{x.data(), 16, kVec};
  CHECK(message(context->invoke(0, {&input, 1}, {&same_as_input, 1})).find("not donated") !=
        std::string::npos);
  CHECK(message(context->invoke(3, {&input, 1})).find("out of range") != std::string::npos);
  Status unknown = context->invoke("predict", {&input, 1});
  CHECK(unknown.code() == StatusCode::kNotFound);
  CHECK(unknown.message() == "no function 'predict' (the module has 'main')");
  // A failed call leaves the context usable.
  run_and_check(*context, {1, 1, 1, 1});
}

TEST_CASE("invoke allocates and uploads nothing") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  run_and_check(*context, {0, 0, 0, 0});  // warm up
  const hal::DeviceCounters before = l->device->counters();
  const PhaseStats vm_before = context->invoke_stats();
  std::array<float, 4> x{1, -1, 2, -2};
  std::array<float, 4> y{};
  TensorRef input{x.data(), 16, kVec};
  TensorRef output{y.data(), 16, kVec};
  for (int i = 0; i < 100; ++i) {
    REQUIRE(context->invoke(0, {&input, 1}, {&output, 1}).ok());
    REQUIRE(context->invoke(0, {&input, 1}).ok());
  }
  const hal::DeviceCounters after = l->device->counters();
  CHECK(after.allocations == before.allocations);
  CHECK(after.uploads == before.uploads);
  CHECK(after.fills == before.fills);
  CHECK(after.dispatches - before.dispatches == 600);
  CHECK(context->invoke_stats().device_allocations == vm_before.device_allocations);
  CHECK(context->invoke_stats().device_allocations == 0);
  CHECK(context->invoke_stats().uploads == 0);
  CHECK(context->invoke_stats().dispatches - vm_before.dispatches == 600);
}

TEST_CASE("invoke makes no heap allocation") {
  auto l = load_tiny();
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  std::array<float, 4> x{1, -1, 2, -2};
  std::array<float, 4> y{};
  TensorRef input{x.data(), 16, kVec};
  TensorRef output{y.data(), 16, kVec};
  REQUIRE(context->invoke(0, {&input, 1}).ok());  // warm up
  const uint64_t before = hexir::testing::thread_allocation_count();
  bool all_ok = true;
  for (int i = 0; i < 100; ++i) {
    all_ok &= context->invoke(0, {&input, 1}, {&output, 1}).ok();
    all_ok &= context->invoke(0, {&input, 1}).ok();
    all_ok &= context->invoke("main", {&input, 1}).ok();
  }
  const uint64_t after = hexir::testing::thread_allocation_count();
  CHECK(all_ok);
  CHECK(after - before == 0);
  // The counter works: an error message is built on the heap.
  CHECK_FALSE(context->invoke(0, {}).ok());
  CHECK(hexir::testing::thread_allocation_count() > after);
}

TEST_CASE("two contexts run concurrently on two threads") {
  auto l = load_tiny();
  Result<Context> a = Context::create(*l->program);
  Result<Context> b = Context::create(*l->program);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->impl().arena.device_ptr != b->impl().arena.device_ptr);
  std::atomic<int> failures{0};
  auto worker = [&](Context* context, float seed) {
    for (int it = 0; it < 2000; ++it) {
      std::array<float, 4> x;
      for (size_t i = 0; i < 4; ++i) x[i] = seed * static_cast<float>(it % 17) - static_cast<float>(i);
      const bool own = it % 2 == 0;
      std::array<float, 4> y{};
      TensorRef input{x.data(), 16, kVec};
      TensorRef output{y.data(), 16, kVec};
      Status status = own ? context->invoke(0, {&input, 1}) : context->invoke(0, {&input, 1}, {&output, 1});
      if (!status.ok()) {
        ++failures;
        continue;
      }
      const float* result = own ? static_cast<const float*>(context->output(0, 0)->data) : y.data();
      for (size_t i = 0; i < 4; ++i)
        if (result[i] != tiny_expected(x[i], i)) ++failures;
    }
  };
  std::thread t1(worker, &*a, 1.0f);
  std::thread t2(worker, &*b, -0.5f);
  t1.join();
  t2.join();
  CHECK(failures.load() == 0);
  CHECK(a->invoke_count() == 2000);
  CHECK(b->invoke_count() == 2000);
  CHECK(a->invoke_stats().dispatches == 6000);
}

TEST_CASE("donated input written in place is the output") {
  ModuleSpec m = tiny_module_spec();
  m.slots[0].usage = fb::SlotUsage::Donated;
  m.slots.push_back(
      {"y_in_x", fb::DType::F32, {1, 4}, 16, fb::StorageKind::Input, fb::SlotUsage::Donated, 0, 0});
  m.operand_pool[7] = 6;  // relu writes into x's buffer
  m.functions[0].inputs[0].donated_to = 0;
  m.functions[0].outputs[0].slot = 6;
  auto l = load_tiny(m);
  CHECK(l->module->function(0).inputs[0].donated_to == 0);
  Result<Context> context = Context::create(*l->program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  CHECK(context->create_stats().device_allocations == 1);  // no output buffer needed

  std::array<float, 4> x{1, 2, -3, 4};
  const std::array<float, 4> original = x;
  TensorRef input{x.data(), 16, kVec};
  REQUIRE(context->invoke(0, {&input, 1}, {&input, 1}).ok());
  for (size_t i = 0; i < 4; ++i) CHECK(x[i] == doctest::Approx(tiny_expected(original[i], i)));

  std::array<float, 4> other{};
  TensorRef elsewhere{other.data(), 16, kVec};
  Status status = context->invoke(0, {&input, 1}, {&elsewhere, 1});
  CHECK(status.message().find("donated input 'x'") != std::string::npos);

  x = original;
  REQUIRE(context->invoke(0, {&input, 1}).ok());
  CHECK(context->output(0, 0)->data == x.data());
}

TEST_CASE("workspace shares the arena allocation") {
  ModuleSpec m = tiny_module_spec();
  m.workspace_size = 256;
  auto l = load_tiny(m);
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  CHECK(context->create_stats().device_allocations == 2);
  CHECK(context->impl().arena.size >= 64 + 256);
  const hal::Dispatch& d = context->impl().functions[0].dispatches[0];
  CHECK(d.workspace_size == 256);
  CHECK(d.workspace != nullptr);
  run_and_check(*context, {1, 2, 3, 4});
}

TEST_CASE("Module, Program and Context are movable") {
  auto l = load_tiny();
  Module moved = std::move(*l->module);
  CHECK(moved.name() == "tiny");
  Result<Context> context = Context::create(*l->program);
  REQUIRE(context.ok());
  Context other = std::move(*context);
  run_and_check(other, {2, 2, 2, 2});
}

TEST_CASE("corrupted files that still verify run without crashing") {
  // Whatever the verifier accepts must be safe to prepare and run.
  const AlignedBytes original = write_hxe(tiny_module_spec());
  format::Prelude prelude;
  std::memcpy(&prelude, original.data(), sizeof(prelude));
  auto device = cpu_device();
  uint64_t state = 0x2545f4914f6cdd1dull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int ran = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    AlignedBytes file = original.copy();
    const size_t at = prelude.metadata_offset + next() % prelude.metadata_size;
    file.data()[at] ^= static_cast<uint8_t>(1u << (next() % 8));
    hexir::testing::reseal_metadata(file);
    Result<Module> module = Module::load_buffer(file.span());
    if (!module.ok()) continue;
    // Huge but consistent sizes are legal; they only fail to allocate.
    if (module->arena_bytes() > (1u << 20) || module->constant_bytes() > (1u << 20) ||
        module->impl().fb().arena()->workspace_size() > (1u << 20))
      continue;
    Result<Program> program = Program::prepare(*module, *device);
    if (!program.ok()) continue;
    Result<Context> context = Context::create(*program);
    if (!context.ok()) continue;
    for (size_t f = 0; f < module->function_count(); ++f) {
      const FunctionSignature& sig = module->function(f);
      std::vector<std::vector<uint8_t>> storage;
      std::vector<TensorRef> inputs;
      for (const TensorSignature& in : sig.inputs) {
        if (in.byte_size > (1u << 20)) break;
        storage.emplace_back(in.byte_size + 64, 0);
        inputs.push_back({storage.back().data(), in.byte_size, in.type});
      }
      if (inputs.size() != sig.inputs.size()) continue;
      if (context->invoke(f, inputs).ok()) ++ran;
    }
  }
  MESSAGE("ran ", ran, " corrupted-but-valid modules");
}

}  // namespace
}  // namespace hexir::vm
