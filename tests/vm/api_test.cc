// Issue 9 (hardening), the embedding API misused as an attacker would:
// caller buffers that share bytes (Context::invoke used to refuse only an
// output whose pointer equalled a non-donated input's and computed garbage
// otherwise), out-of-range indices (Module::function asserted), and handles
// used after their owner is gone (a Program or Context outliving its Module
// or Program read freed memory).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"

namespace hexir::vm {
namespace {

const TensorType kVec{DType::kF32, {4}};

// f: two inputs, two outputs. g: a donated input. h: one in, one out.
constexpr const char* kSource = R"(module @api
func @f(%a: f32[4], %b: f32[4]) -> (f32[4], f32[4]) {
  %s = call @add(%a, %b) : f32[4]
  %d = call @sub(%a, %b) : f32[4]
  return %s, %d
}
func @g(%cache: f32[4] donate, %x: f32[4]) -> (f32[4]) {
  %y = call @add(%cache, %x) : f32[4]
  return %y
}
func @h(%x: f32[4]) -> (f32[4]) {
  %y = call @neg(%x) : f32[4]
  return %y
}
)";

std::vector<uint8_t> compile(const std::string& source) {
  Result<std::vector<uint8_t>> bytes = compiler::compile_source(source, "api.hxir", ".");
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  return std::move(bytes).value();
}

// 64-byte aligned owned copy (load_buffer needs it).
struct Aligned {
  std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
  size_t size = 0;
  explicit Aligned(const std::vector<uint8_t>& bytes) : size(bytes.size()) {
    data.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    std::memcpy(data.get(), bytes.data(), size);
  }
  std::span<const uint8_t> span() const { return {data.get(), size}; }
};

std::unique_ptr<hal::Device> cpu() {
  Result<std::unique_ptr<hal::Device>> device = hal::create_device("cpu");
  REQUIRE(device.ok());
  return std::move(device).value();
}

struct Loaded {
  Aligned bytes;
  std::unique_ptr<hal::Device> device = cpu();
  std::optional<Module> module;
  std::optional<Program> program;
  std::optional<Context> context;
  explicit Loaded(const std::string& source = kSource) : bytes(compile(source)) {
    Result<Module> m = Module::load_buffer(bytes.span());
    REQUIRE_MESSAGE(m.ok(), m.status().to_string());
    module.emplace(std::move(m).value());
    Result<Program> p = Program::prepare(*module, *device);
    REQUIRE_MESSAGE(p.ok(), p.status().to_string());
    program.emplace(std::move(p).value());
    Result<Context> c = Context::create(*program);
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    context.emplace(std::move(c).value());
  }
  size_t fn(const char* name) const { return module->find_function(name).value(); }
};

TensorRef ref(float* data) { return {data, 16, kVec}; }

// The message of a refused invoke (kInvalidArgument), or "OK".
std::string refusal(const Status& s) {
  if (s.ok()) return "OK";
  CHECK(s.code() == StatusCode::kInvalidArgument);
  return s.message();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs `body` in a child process: a crash or an abort there is a failed
// check here, not a dead test runner. Returns body's exit code, 128+signal
// when it died.
int in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(20);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_CASE("aliasing: an output that overlaps an input is refused, naming both") {
  Loaded l;
  const size_t f = l.fn("f");
  std::array<float, 12> buffer{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::array<float, 4> b{1, 1, 1, 1}, d{};
  // Output 0 starts one element into input 'a': it used to compute garbage silently.
  TensorRef ins[2] = {ref(buffer.data()), ref(b.data())};
  TensorRef outs[2] = {ref(buffer.data() + 1), ref(d.data())};
  std::string message = refusal(l.context->invoke(f, ins, outs));
  CHECK(message ==
        "output 0 of function 'f' overlaps input 'a' (12 of its 16 bytes), which is not donated to it");
  // The same pointer: the long-standing case, same wording.
  outs[0] = ref(b.data());
  CHECK(refusal(l.context->invoke(f, ins, outs)) ==
        "output 0 of function 'f' overlaps input 'b' (16 of its 16 bytes), which is not donated to it");
  // Output 1 touching the last byte of input 'a'.
  outs[0] = ref(buffer.data() + 8);
  outs[1] = TensorRef{reinterpret_cast<uint8_t*>(buffer.data() + 4) - 1, 16, kVec};
  message = refusal(l.context->invoke(f, ins, outs));
  CHECK(message ==
        "output 1 of function 'f' overlaps input 'a' (1 of its 16 bytes), which is not donated to it");
  // Adjacent is fine.
  outs[1] = ref(buffer.data() + 4);
  REQUIRE(refusal(l.context->invoke(f, ins, outs)) == "OK");
  CHECK(buffer[8] == 2);  // a + b
  CHECK(buffer[4] == 0);  // a - b
}

TEST_CASE("aliasing: two outputs sharing memory are refused") {
  Loaded l;
  const size_t f = l.fn("f");
  std::array<float, 4> a{1, 2, 3, 4}, b{1, 1, 1, 1};
  std::array<float, 8> out{};
  TensorRef ins[2] = {ref(a.data()), ref(b.data())};
  TensorRef same[2] = {ref(out.data()), ref(out.data())};
  CHECK(refusal(l.context->invoke(f, ins, same)) == "outputs 0 and 1 of function 'f' overlap (16 bytes)");
  TensorRef partly[2] = {ref(out.data() + 2), ref(out.data())};
  CHECK(refusal(l.context->invoke(f, ins, partly)) == "outputs 0 and 1 of function 'f' overlap (8 bytes)");
}

TEST_CASE("aliasing: two plain inputs may share memory; a donated input may not") {
  Loaded l;
  const size_t f = l.fn("f");
  std::array<float, 4> a{1, 2, 3, 4}, s{}, d{};
  TensorRef ins[2] = {ref(a.data()), ref(a.data())};  // read-only both: f(a, a)
  TensorRef outs[2] = {ref(s.data()), ref(d.data())};
  REQUIRE(refusal(l.context->invoke(f, ins, outs)) == "OK");
  CHECK(s == std::array<float, 4>{2, 4, 6, 8});
  CHECK(d == std::array<float, 4>{0, 0, 0, 0});

  const size_t g = l.fn("g");
  std::array<float, 8> cache{1, 2, 3, 4, 5, 6, 7, 8};
  TensorRef donated[2] = {ref(cache.data()), ref(cache.data() + 2)};
  CHECK(refusal(l.context->invoke(g, donated, {&donated[0], 1})) ==
        "donated input 'cache' of function 'g' overlaps input 'x' (8 of its 16 bytes); a donated input is "
        "overwritten with a result, so no other argument may share its memory");
  CHECK(refusal(l.context->invoke(g, donated)) != "OK");
  // The one legal overlap: the donated input passed as its own output.
  donated[1] = ref(a.data());
  REQUIRE(refusal(l.context->invoke(g, donated, {&donated[0], 1})) == "OK");
  CHECK(cache[0] == 2);
  CHECK(cache[3] == 8);
  // ... and only exactly: an output that overlaps the donated input elsewhere is refused.
  TensorRef shifted = ref(cache.data() + 1);
  CHECK(has(refusal(l.context->invoke(g, donated, {&shifted, 1})), "pass that input's buffer as the output"));
}

TEST_CASE("aliasing: the context's own output fed back as an input (y = f(y)) is refused") {
  Loaded l;
  const size_t h = l.fn("h");
  std::array<float, 4> x{1, -2, 3, -4};
  TensorRef in = ref(x.data());
  REQUIRE(refusal(l.context->invoke(h, {&in, 1})) == "OK");
  Result<TensorRef> y = l.context->output(h, 0);
  REQUIRE(y.ok());
  CHECK(static_cast<const float*>(y->data)[1] == 2);
  // y = h(y) into the context's own buffer: refused, the result stays readable.
  TensorRef feedback = *y;
  CHECK(refusal(l.context->invoke(h, {&feedback, 1})) ==
        "input 'x' of function 'h' is the context's own buffer of output 0 (16 of its 16 bytes), which this "
        "invoke overwrites; pass an output buffer or copy the input first");
  // Into a caller buffer it is fine: the own buffer is only read.
  std::array<float, 4> out{};
  TensorRef to = ref(out.data());
  REQUIRE(refusal(l.context->invoke(h, {&feedback, 1}, {&to, 1})) == "OK");
  CHECK(out == std::array<float, 4>{1, -2, 3, -4});
  // Another function's own buffer is not written by h: reading it is fine.
  const size_t f = l.fn("f");
  std::array<float, 4> ones{1, 1, 1, 1};
  TensorRef fin[2] = {ref(ones.data()), ref(ones.data())};
  REQUIRE(refusal(l.context->invoke(f, fin)) == "OK");
  TensorRef f_out = *l.context->output(f, 0);
  REQUIRE(refusal(l.context->invoke(h, {&f_out, 1})) == "OK");
  CHECK(static_cast<const float*>(l.context->output(h, 0)->data)[0] == -2);
}

// 40 inputs concatenated: the check sorts the arguments (n log n) in the
// context's preallocated scratch instead of comparing every pair.
std::string wide_source(int n) {
  std::string args, operands, type = "f32[" + std::to_string(4 * n) + "]";
  for (int i = 0; i < n; ++i) {
    args += (i ? ", " : "") + std::string("%x") + std::to_string(i) + ": f32[4]";
    operands += (i ? ", " : "") + std::string("%x") + std::to_string(i);
  }
  return "module @wide\nfunc @main(" + args + ") -> (" + type + ") {\n  %y = call @concat(" + operands +
         ") {axis = 0} : " + type + "\n  return %y\n}\n";
}

TEST_CASE("aliasing: many arguments, checked without allocating") {
  constexpr int kN = 40;
  Loaded l(wide_source(kN));
  std::vector<float> x(8 * kN), y(4 * kN);  // x: the inputs, then room for an overlapping output
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  std::vector<TensorRef> ins;
  for (int i = 0; i < kN; ++i) ins.push_back(ref(x.data() + 4 * (kN - 1 - i)));  // not in address order
  TensorRef out{y.data(), 16 * kN, TensorType{DType::kF32, {4 * kN}}};
  REQUIRE(refusal(l.context->invoke(0, ins, {&out, 1})) == "OK");
  const uint64_t before = testing::thread_allocation_count();
  bool all_ok = true;
  for (int it = 0; it < 100; ++it) {
    all_ok &= l.context->invoke(0, ins, {&out, 1}).ok();
    all_ok &= l.context->invoke(0, ins).ok();
  }
  CHECK(testing::thread_allocation_count() - before == 0);
  CHECK(all_ok);
  CHECK(y[0] == static_cast<float>(4 * (kN - 1)));
  // An output starting inside input x16, found among 41 ranges.
  out = TensorRef{x.data() + 4 * (kN - 1 - 16) + 2, 16 * kN, TensorType{DType::kF32, {4 * kN}}};
  const std::string message = refusal(l.context->invoke(0, ins, {&out, 1}));
  CHECK(has(message, "output 0 of function 'main' overlaps input 'x"));
  CHECK(has(message, "which is not donated to it"));
}

TEST_CASE("the small invoke checks allocate nothing either") {
  Loaded l;
  const size_t f = l.fn("f"), g = l.fn("g");
  std::array<float, 4> a{1, 2, 3, 4}, b{1, 1, 1, 1}, s{}, d{}, cache{};
  TensorRef ins[2] = {ref(a.data()), ref(b.data())};
  TensorRef outs[2] = {ref(s.data()), ref(d.data())};
  TensorRef gin[2] = {ref(cache.data()), ref(b.data())};
  REQUIRE(l.context->invoke(f, ins, outs).ok());
  const uint64_t before = testing::thread_allocation_count();
  bool all_ok = true;
  for (int it = 0; it < 100; ++it) {
    all_ok &= l.context->invoke(f, ins, outs).ok();
    all_ok &= l.context->invoke(f, ins).ok();
    all_ok &= l.context->invoke(g, gin, {&gin[0], 1}).ok();
  }
  CHECK(testing::thread_allocation_count() - before == 0);
  CHECK(all_ok);
  CHECK(cache[0] == 100);
}

TEST_CASE("indices out of range are refused, never asserted") {
  Loaded l;
  std::array<float, 4> x{};
  TensorRef in = ref(x.data());
  CHECK(has(refusal(l.context->invoke(size_t{3}, {&in, 1})),
            "function index 3 out of range (the module has 3)"));
  CHECK(has(refusal(l.context->invoke(SIZE_MAX, {&in, 1})), "out of range"));
  CHECK(l.context->output(7, 0).status().code() == StatusCode::kInvalidArgument);
  CHECK(l.context->output(0, 9).status().code() == StatusCode::kInvalidArgument);
  std::array<uint8_t, 16> host{};
  CHECK(l.context->read_output(7, 0, host).code() == StatusCode::kInvalidArgument);
  // Module::function used to assert (abort) on a bad index: now an empty signature.
  CHECK(in_child([&] {
          const FunctionSignature& none = l.module->function(99);
          return none.name.empty() && none.inputs.empty() && none.outputs.empty() ? 0 : 1;
        }) == 0);
  CHECK(l.module->functions().size() == 3);
  CHECK(l.module->functions()[2].name == "h");
}

std::string temp_file(const std::vector<uint8_t>& bytes) {
  char path[] = "/tmp/hexir_api_test_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  return path;
}

// A module whose result depends on a RODATA constant, so a freed mapping shows.
constexpr const char* kWithWeights = R"(module @weights
const @w : f32[4] = dense [10.0, 20.0, 30.0, 40.0]
func @main(%x: f32[4]) -> (f32[4]) {
  %y = call @add(%x, @w) : f32[4]
  return %y
}
)";

TEST_CASE("a Context keeps its Program and Module alive; handles may go in any order") {
  const std::string path = temp_file(compile(kWithWeights));
  // In a child: before the fix this read an unmapped file and freed signatures.
  CHECK(in_child([&] {
          std::unique_ptr<hal::Device> device = cpu();
          std::optional<Module> module(Module::load_file(path).value());
          std::optional<Program> program(Program::prepare(*module, *device).value());
          const Module& seen = program->module();
          module.reset();  // the caller's handle goes first
          if (seen.name() != "weights" || seen.function(0).name != "main") return 1;
          std::optional<Context> context(Context::create(*program).value());
          program.reset();  // then the Program's
          std::array<float, 4> x{1, 2, 3, 4}, y{};
          TensorRef in{x.data(), 16, kVec}, out{y.data(), 16, kVec};
          if (!context->invoke("main", {&in, 1}, {&out, 1}).ok()) return 2;
          if (y != std::array<float, 4>{11, 22, 33, 44}) return 3;
          context.reset();  // the last owner unmaps the file
          return 0;
        }) == 0);
  std::remove(path.c_str());
}

TEST_CASE("moved-from handles refuse instead of crashing") {
  Loaded l;
  Context moved = std::move(*l.context);
  std::array<float, 4> x{};
  TensorRef in = ref(x.data());
  const Status s = l.context->invoke(size_t{0}, {&in, 1});
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(has(s.message(), "moved-from Context"));
  CHECK(l.context->invoke("h", {&in, 1}).code() == StatusCode::kFailedPrecondition);
  CHECK(l.context->output(0, 0).status().code() == StatusCode::kFailedPrecondition);
  Program program = std::move(*l.program);
  CHECK(Context::create(*l.program).status().code() == StatusCode::kFailedPrecondition);
  Module module = std::move(*l.module);
  CHECK(Program::prepare(*l.module, *l.device).status().code() == StatusCode::kFailedPrecondition);
  // The moved-to handles work.
  std::array<float, 4> a{1, 2, 3, 4}, y{};
  TensorRef ain = ref(a.data()), out = ref(y.data());
  REQUIRE(moved.invoke("h", {&ain, 1}, {&out, 1}).ok());
  CHECK(y[3] == -4);
  CHECK(Context::create(program).ok());
  CHECK(Program::prepare(module, *l.device).ok());
}

}  // namespace
}  // namespace hexir::vm
