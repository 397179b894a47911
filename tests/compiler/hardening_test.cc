// Issue 9, the compiler's part: silent surprises in .hxir text become errors
// (or are made right), `file` constants stay in the source's folder, --align
// cannot misalign an element, and the passes stay near-linear on hostile
// sizes (a chain of N in-place results, N donations, a wide schedule).
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "hexir/base/half.h"
#include "passes/fusion.h"
#include "test_util.h"

namespace hexir::compiler::testing {
namespace {

// Checks that parsing fails with "t.hxir:LINE:COL: " and a message containing `what`.
void check_error(std::string_view source, int line, int col, std::string_view what,
                 const std::filesystem::path& base = data_dir(), const ParseOptions& options = {}) {
  Result<Module> m = parse_hxir(source, "t.hxir", base, options);
  INFO("source:\n", source, "\nmessage: ", m.status().message());
  REQUIRE(!m.ok());
  const std::string where = "t.hxir:" + std::to_string(line) + ":" + std::to_string(col) + ": ";
  CHECK(m.status().message().rfind(where, 0) == 0);
  CHECK(m.status().message().find(what) != std::string::npos);
}

std::vector<uint8_t> constant_bytes(std::string_view source) {
  Module m = parse_ok(source);
  REQUIRE(m.constants.size() == 1);
  return bytes_of(m.constants[0]);
}

// ---- float literals -------------------------------------------------------------

TEST_CASE("float literals past the dtype's range are errors, not infinities") {
  check_error("const @c : f32[1] = dense [1e39]\n", 1, 28, "1e39 is out of range for f32");
  check_error("const @c : f32[2] = dense [1.0, -1e39]\n", 1, 33, "-1e39 is out of range for f32");
  check_error("const @c : f32[4] = splat 3.5e38\n", 1, 27, "out of range for f32");
  // Half an ulp past FLT_MAX rounds to infinity (ties to even: FLT_MAX is odd).
  check_error("const @c : f32[1] = dense [340282356779733661637539395458142568448.0]\n", 1, 28,
              "out of range for f32");
  check_error("const @c : f16[1] = dense [65520.0]\n", 1, 28, "65520.0 is out of range for f16");
  check_error("const @c : f16[1] = dense [70000]\n", 1, 28, "70000 is out of range for f16");
  check_error("const @c : bf16[1] = dense [3.5e38]\n", 1, 29, "out of range for bf16");
  // Beyond any double: an error in the lexer, wherever the number is.
  check_error("const @c : f32[1] = dense [1e400]\n", 1, 28, "1e400 is out of range");
  check_error(
      "func @f(%x: f32[2]) -> f32[2] {\n  %y = call @softmax(%x) {axis = 1e999} : f32[2]\n  return %y\n}\n",
      2, 34, "out of range");

  // What still fits is kept, rounded to nearest.
  float f = 0;
  std::vector<uint8_t> bytes = constant_bytes("const @c : f32[2] = dense [3.4028235e38, -3.4028235e38]\n");
  std::memcpy(&f, bytes.data(), 4);
  CHECK(f == std::numeric_limits<float>::max());
  // Between FLT_MAX and the half-way point above it: FLT_MAX.
  bytes = constant_bytes("const @c : f32[1] = dense [3.40282356e38]\n");
  std::memcpy(&f, bytes.data(), 4);
  CHECK(f == std::numeric_limits<float>::max());
  CHECK(constant_bytes("const @c : f16[1] = dense [65519.0]\n") == std::vector<uint8_t>{0xff, 0x7b});
  // Infinity written as such, and underflow to zero, are not range errors.
  bytes = constant_bytes("const @c : f32[2] = dense [inf, 1e-50]\n");
  std::memcpy(&f, bytes.data(), 4);
  CHECK(std::isinf(f));
  std::memcpy(&f, bytes.data() + 4, 4);
  CHECK(f == 0.0f);
  CHECK(constant_bytes("const @c : f16[1] = dense [-inf]\n") == std::vector<uint8_t>{0x00, 0xfc});
}

TEST_CASE("f16 and bf16 literals are rounded once, from the double") {
  // 1 + 2^-11 + 2^-52: just past the half-way point between 1 and the next
  // f16. Through f32 it first lands on the point itself, then ties to even
  // (1.0, 0x3c00); numpy.float16(1.0004882812500002) is 0x3c01.
  CHECK(constant_bytes("const @c : f16[1] = dense [1.0004882812500002]\n") ==
        std::vector<uint8_t>{0x01, 0x3c});
  CHECK(constant_bytes("const @c : f16[1] = splat -1.0004882812500002\n") ==
        std::vector<uint8_t>{0x01, 0xbc});
  // The same for bf16: 1 + 2^-8 + 2^-52 rounds up to 0x3f81.
  CHECK(constant_bytes("const @c : bf16[1] = dense [1.0039062500000002]\n") ==
        std::vector<uint8_t>{0x81, 0x3f});
  // Exact half-way points still tie to even.
  CHECK(constant_bytes("const @c : f16[1] = dense [1.00048828125]\n") == std::vector<uint8_t>{0x00, 0x3c});
  CHECK(constant_bytes("const @c : bf16[1] = dense [1.00390625]\n") == std::vector<uint8_t>{0x80, 0x3f});

  CHECK(double_to_half_bits(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -52)) == 0x3c01);
  CHECK(float_to_half_bits(static_cast<float>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -52))) == 0x3c00);
  CHECK(double_to_half_bits(65504.0) == 0x7bff);
  CHECK(double_to_half_bits(65520.0) == 0x7c00);
  CHECK(double_to_half_bits(std::ldexp(1.0, -24)) == 0x0001);  // smallest subnormal
  CHECK(double_to_half_bits(std::ldexp(1.0, -25)) == 0x0000);  // half of it: ties to even (zero)
  CHECK(double_to_half_bits(std::ldexp(1.5, -25)) == 0x0001);
  CHECK(double_to_half_bits(-0.0) == 0x8000);
  CHECK((double_to_half_bits(std::nan("")) & 0x7c00) == 0x7c00);
  CHECK((double_to_half_bits(std::nan("")) & 0x3ff) != 0);
  CHECK(double_to_bfloat16_bits(1.0) == 0x3f80);
  CHECK(double_to_bfloat16_bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -52)) == 0x3f81);
  CHECK(double_to_bfloat16_bits(std::ldexp(1.0, -133)) == 0x0001);  // smallest bf16 subnormal
  CHECK(double_to_bfloat16_bits(1e39) == 0x7f80);
  CHECK((double_to_bfloat16_bits(std::nan("")) & 0x7f80) == 0x7f80);
  CHECK((double_to_bfloat16_bits(std::nan("")) & 0x7f) != 0);
  // Every float converts as the float path does (a float is a double exactly).
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    float x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(x)) continue;
    REQUIRE(double_to_half_bits(x) == float_to_half_bits(x));
    REQUIRE(double_to_bfloat16_bits(x) == float_to_bfloat16_bits(x));
  }
}

// ---- strings ----------------------------------------------------------------------

TEST_CASE("a NUL inside a quoted string is an error, not a shorter string") {
  check_error("const @\"w\\x00x\" : f32[1] = splat 1.0\n", 1, 10, "NUL byte (\\x00) in a quoted string");
  check_error("const @w : f32[2] = file \"f32_2x3.npy\\x00.txt\"\n", 1, 38, "NUL byte");
  std::string raw = "func @f(%\"a";
  raw += '\0';
  raw += "b\": f32[2]) -> f32[2] {\n  return %\"a\"\n}\n";
  check_error(raw, 1, 12, "NUL byte in a quoted string");
  // Other escaped bytes are still fine.
  Module m = parse_ok("const @\"w\\x01\" : f32[1] = splat 1.0\n");
  CHECK(m.constants[0].name == std::string("w\x01"));
}

// ---- file constants stay in the source's folder ----------------------------------

struct Folders {
  TempDir temp;
  std::filesystem::path source, outside;
  Folders() {
    source = temp.path() / "model";
    outside = temp.path() / "elsewhere";
    std::filesystem::create_directories(source / "weights");
    std::filesystem::create_directories(outside);
    for (const auto& dir : {source, source / "weights", outside})
      std::filesystem::copy_file(data_dir() / "f32_2x3.npy", dir / "w.npy");
  }
};

constexpr const char* kUse =
    "func @f(%x: f32[2,3]) -> f32[2,3] {\n  %y = call @add(%x, @w) : f32[2,3]\n  return %y\n}\n";

std::string with_file(const std::string& path) {
  return "const @w : f32[2,3] = file \"" + path + "\"\n" + kUse;
}

TEST_CASE("file constants: paths inside the source's folder are read") {
  Folders f;
  for (const char* path : {"w.npy", "weights/w.npy", "./weights/../w.npy", "weights//w.npy"}) {
    INFO(path);
    Module m = parse_ok(with_file(path), f.source);
    const auto& range = std::get<FileRange>(m.constants[0].source);
    // The real path is what gets read later.
    CHECK(range.path.is_absolute());
    CHECK(std::filesystem::equivalent(range.path, f.source / path));
  }
  // A symlink that stays inside is fine too.
  std::filesystem::create_symlink(f.source / "weights" / "w.npy", f.source / "inside.npy");
  parse_ok(with_file("inside.npy"), f.source);
}

TEST_CASE("file constants: absolute paths, .. and symlinks out of the folder are refused") {
  Folders f;
  const std::string outside = (f.outside / "w.npy").string();
  check_error(with_file(outside), 1, 28, "is an absolute path", f.source);
  check_error(with_file("/etc/passwd"), 1, 28, "--allow-external-files", f.source);
  check_error(with_file("../elsewhere/w.npy"), 1, 28, "outside the source's folder", f.source);
  check_error(with_file("weights/../../elsewhere/w.npy"), 1, 28, "outside the source's folder", f.source);
  std::filesystem::create_symlink(f.outside / "w.npy", f.source / "link.npy");
  check_error(with_file("link.npy"), 1, 28, "outside the source's folder", f.source);
  std::filesystem::create_directory_symlink(f.outside, f.source / "linked_dir");
  check_error(with_file("linked_dir/w.npy"), 1, 28, "outside the source's folder", f.source);
  // A missing file keeps its message.
  check_error(with_file("missing.npy"), 1, 28, "cannot load constant @w: cannot open", f.source);

  // Allowed explicitly: parser option, CompileOptions, hexir-compile flag (tests/tools).
  ParseOptions allow;
  allow.allow_external_files = true;
  for (const std::string& path : {outside, std::string("../elsewhere/w.npy"), std::string("link.npy")}) {
    INFO(path);
    Result<Module> m = parse_hxir(with_file(path), "t.hxir", f.source, allow);
    CHECK_MESSAGE(m.ok(), m.status().message());
  }
  CompileOptions options;
  Result<std::vector<uint8_t>> refused = compile_source(with_file(outside), "t.hxir", f.source, options);
  CHECK(!refused.ok());
  options.allow_external_files = true;
  Result<std::vector<uint8_t>> compiled = compile_source(with_file(outside), "t.hxir", f.source, options);
  CHECK_MESSAGE(compiled.ok(), compiled.status().message());
}

TEST_CASE("file constants: the folder of a source in the working directory is '.'") {
  Folders f;
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(f.source);
  Result<Module> inside = parse_hxir(with_file("w.npy"), "t.hxir", "");
  Result<Module> outside = parse_hxir(with_file("../elsewhere/w.npy"), "t.hxir", "");
  std::filesystem::current_path(cwd);
  CHECK_MESSAGE(inside.ok(), inside.status().message());
  REQUIRE(!outside.ok());
  CHECK(outside.status().message().find("outside the source's folder") != std::string::npos);
}

// ---- --align ------------------------------------------------------------------------

TEST_CASE("--align below an element's size is refused, naming the value") {
  constexpr const char* kF32 = R"(func @f(%x: f32[3]) -> f32[3] {
  %a = call @relu(%x) : f32[3]
  %b = call @neg(%a) : f32[3]
  %c = call @add(%a, %b) : f32[3]
  return %c
}
)";
  for (uint32_t alignment : {1u, 2u}) {
    CompileOptions options;
    options.alignment = alignment;
    Result<std::vector<uint8_t>> r = compile_source(kF32, "t.hxir", data_dir(), options);
    REQUIRE(!r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().rfind("t.hxir:2:3: arena alignment " + std::to_string(alignment), 0) == 0);
    CHECK(r.status().message().find("4-byte elements of %a (f32[3]) in @f") != std::string::npos);
  }
  for (PlanStrategy plan : {PlanStrategy::kNaive, PlanStrategy::kArena, PlanStrategy::kFreeAtLastUse}) {
    CompileOptions options;
    options.alignment = 4;
    options.plan = plan;
    compile_ok(kF32, options);
  }
  // i64 needs 8; u8 is fine at 1.
  CompileOptions options;
  options.alignment = 4;
  Result<std::vector<uint8_t>> r = compile_source(
      "func @f(%x: f32[3]) -> f32[3] {\n  %a = call @cast(%x) {to = \"i64\"} : i64[3]\n"
      "  %b = call @cast(%a) {to = \"f32\"} : f32[3]\n  return %b\n}\n",
      "t.hxir", data_dir(), options);
  REQUIRE(!r.ok());
  INFO(r.status().message());
  CHECK(r.status().message().find("8-byte elements of %a (i64[3])") != std::string::npos);
  // One-byte elements: alignment 1 is fine.
  options.alignment = 1;
  compile_ok(
      "func @f(%x: f32[3]) -> f32[3] {\n  %a = call @cast(%x) {to = \"u8\"} : u8[3]\n"
      "  %b = call @cast(%a) {to = \"f32\"} : f32[3]\n  return %b\n}\n",
      options);
}

TEST_CASE("--align 4: scratch stays in the shared workspace, aligned for its doubles") {
  // softmax over a non-last axis needs scratch holding doubles.
  constexpr const char* kSoftmax = R"(func @f(%x: f32[4,3]) -> f32[4,3] {
  %a = call @relu(%x) : f32[4,3]
  %b = call @softmax(%a) {axis = 0} : f32[4,3]
  %c = call @neg(%b) : f32[4,3]
  return %c
}
)";
  Planned p;
  p.module = parse_ok(kSoftmax);
  assign_storage(p.fn(), p.plan);
  record_workspaces(p.fn(), p.plan);
  REQUIRE(p.plan.workspace_size > 0);
  p.plan.workspace_in_arena = true;
  std::string heuristic;
  REQUIRE(plan_function_arena(p.fn(), p.plan, PlanStrategy::kArena, 4, &heuristic).ok());
  CHECK(!p.plan.workspace_in_arena);
  CompileOptions options;
  options.alignment = 4;
  std::vector<uint8_t> bytes = compile_ok(kSoftmax, options);
  Result<format::VerifiedModule> v = format::verify_executable(bytes);
  CHECK_MESSAGE(v.ok(), v.status().to_string());
}

// ---- near-linear passes on hostile sizes ---------------------------------------------

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every pass compile_source runs on one function, with the arena plan.
void run_passes(const Function& fn, FunctionPlan& plan, Schedule schedule = Schedule::kSource) {
  assign_storage(fn, plan);
  if (schedule == Schedule::kMemory) schedule_for_memory(fn, plan);
  assign_in_place(fn, plan);
  place_donations(fn, plan);
  record_last_uses(fn, plan);
  record_workspaces(fn, plan);
  std::string heuristic;
  Status s = plan_function_arena(fn, plan, PlanStrategy::kArena, 64, &heuristic, 0);
  INFO(s.to_string());
  REQUIRE(s.ok());
}

// These sizes took minutes with the quadratic passes (a chain of 20,000: 9 s;
// 100,000: over 2 minutes); now well under a second. Nothing here is timed
// (machines are noisy): a quadratic pass runs past the suite's timeout, and
// the time is printed for the record.

TEST_CASE("passes: a chain of 100,000 in-place results plans in near-linear time") {
  constexpr int kChain = 100000;
  GraphBuilder b("chain");
  REQUIRE(b.begin_function("main").ok());
  int v = *b.add_input("x", {DType::kF32, {16}});
  for (int i = 0; i < kChain; ++i) v = (*b.add_node(i % 2 ? ops::OpId::kNeg : ops::OpId::kRelu, {v}))[0];
  REQUIRE(b.set_outputs({v}).ok());
  REQUIRE(b.end_function().ok());
  Module m = *b.finish();
  const Function& fn = m.functions[0];
  FunctionPlan plan;
  const auto start = std::chrono::steady_clock::now();
  run_passes(fn, plan);
  const double took = seconds_since(start);
  MESSAGE("passes over a chain of ", kChain, ": ", took, " s");
  // Every intermediate result runs in the first one's buffer: one 64-byte arena.
  CHECK(plan.arena_size == 64);
  const int first = fn.nodes.front().results[0];
  CHECK(buffer_head(plan, fn.nodes[kChain - 2].results[0]) == first);
  BufferHeads heads(plan);
  int shared = 0;
  for (int n = 0; n + 1 < kChain; ++n)
    shared += heads.head(fn.nodes[static_cast<size_t>(n)].results[0]) == first;
  CHECK(shared == kChain - 1);
  CHECK(heads.head(fn.outputs[0]) == fn.outputs[0]);  // the output: the caller's buffer
}

TEST_CASE("passes: 40,000 donated inputs and outputs, and a 40,000-wide memory schedule") {
  constexpr int kCount = 40000;
  GraphBuilder b("wide");
  REQUIRE(b.begin_function("main").ok());
  std::vector<int> inputs, outputs;
  for (int i = 0; i < kCount; ++i)
    inputs.push_back(*b.add_input("x" + std::to_string(i), {DType::kF32, {4}}, /*donate=*/true));
  // Each output in place over its donated input; 40,000 instructions ready at once.
  for (int i = 0; i < kCount; ++i)
    outputs.push_back((*b.add_node(ops::OpId::kRelu, {inputs[static_cast<size_t>(i)]}))[0]);
  REQUIRE(b.set_outputs(outputs).ok());
  REQUIRE(b.end_function().ok());
  Module m = *b.finish();
  const Function& fn = m.functions[0];
  for (Schedule schedule : {Schedule::kSource, Schedule::kMemory}) {
    FunctionPlan plan;
    const auto start = std::chrono::steady_clock::now();
    run_passes(fn, plan, schedule);
    const double took = seconds_since(start);
    MESSAGE("passes over ", kCount, " donated inputs: ", took, " s");
    // Each input donated to its own output, in order, and written in place.
    for (int i = 0; i < kCount; i += 997) {
      CHECK(plan.donated_to[static_cast<size_t>(i)] == i);
      CHECK(buffer_head(plan, outputs[static_cast<size_t>(i)]) == inputs[static_cast<size_t>(i)]);
    }
    CHECK(plan.program.size() == static_cast<size_t>(kCount));
  }
}

TEST_CASE("schedule_for_memory: the priority queue picks what the scan picked") {
  // A wide graph whose picks depend on frees: %a is freed by the add after
  // the exp, which makes the add's key drop while it waits; sizes shrink
  // along the source, so the schedule starts from the end.
  std::string text = "func @f(";
  constexpr int kWidth = 12;
  for (int i = 0; i < kWidth; ++i)
    text += (i ? ", " : "") + std::string("%x") + std::to_string(i) + ": f32[" +
            std::to_string(4 + kWidth - i) + "]";
  text += ") -> (";
  for (int i = 0; i < kWidth; ++i)
    text += (i ? ", " : "") + std::string("f32[") + std::to_string(4 + kWidth - i) + "]";
  text += ") {\n";
  for (int i = 0; i < kWidth; ++i) {
    const std::string t = "f32[" + std::to_string(4 + kWidth - i) + "]", n = std::to_string(i);
    text += "  %a" + n + " = call @relu(%x" + n + ") : " + t + "\n";
    text += "  %b" + n + " = call @exp(%a" + n + ") : " + t + "\n";
    text += "  %c" + n + " = call @add(%a" + n + ", %b" + n + ") : " + t + "\n";
  }
  text += "  return ";
  for (int i = 0; i < kWidth; ++i) text += (i ? ", " : "") + std::string("%c") + std::to_string(i);
  text += "\n}\n";
  Module m = parse_ok(text);
  const Function& fn = m.functions[0];
  FunctionPlan plan;
  assign_storage(fn, plan);
  const std::vector<Instruction> source_order = plan.program;
  schedule_for_memory(fn, plan);
  // The reference: the previous O(n^2) scan over the ready list.
  FunctionPlan reference;
  assign_storage(fn, reference);
  {
    const size_t n = reference.program.size();
    auto root_of = [&](int v) { return reference.values[static_cast<size_t>(v)].storage_root; };
    std::vector<int> producer(reference.values.size(), -1), readers_left(reference.values.size(), 0),
        waiting(n, 0);
    std::vector<std::vector<int>> reads(n), successors(n);
    for (size_t k = 0; k < n; ++k)
      for (int output : reference.program[k].outputs)
        producer[static_cast<size_t>(root_of(output))] = static_cast<int>(k);
    for (size_t k = 0; k < n; ++k)
      for (int input : reference.program[k].inputs) {
        const int root = root_of(input);
        if (std::find(reads[k].begin(), reads[k].end(), root) != reads[k].end()) continue;
        reads[k].push_back(root);
        ++readers_left[static_cast<size_t>(root)];
        const int p = producer[static_cast<size_t>(root)];
        if (p >= 0) {
          successors[static_cast<size_t>(p)].push_back(static_cast<int>(k));
          ++waiting[k];
        }
      }
    auto bytes = [&](int root) -> int64_t {
      return reference.values[static_cast<size_t>(root)].storage == Storage::kArena
                 ? static_cast<int64_t>(value_at(fn, reference, root).byte_size)
                 : 0;
    };
    std::vector<int> ready;
    for (size_t k = 0; k < n; ++k)
      if (waiting[k] == 0) ready.push_back(static_cast<int>(k));
    std::vector<Instruction> order;
    while (!ready.empty()) {
      size_t pick = 0;
      int64_t best = 0;
      for (size_t r = 0; r < ready.size(); ++r) {
        const int k = ready[r];
        int64_t delta = 0;
        for (int output : reference.program[static_cast<size_t>(k)].outputs) delta += bytes(root_of(output));
        for (int root : reads[static_cast<size_t>(k)])
          if (readers_left[static_cast<size_t>(root)] == 1) delta -= bytes(root);
        if (r == 0 || delta < best || (delta == best && k < ready[pick])) {
          pick = r;
          best = delta;
        }
      }
      const int k = ready[pick];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
      for (int root : reads[static_cast<size_t>(k)]) --readers_left[static_cast<size_t>(root)];
      for (int next : successors[static_cast<size_t>(k)])
        if (--waiting[static_cast<size_t>(next)] == 0) ready.push_back(next);
      order.push_back(reference.program[static_cast<size_t>(k)]);
    }
    reference.program = std::move(order);
  }
  REQUIRE(plan.program.size() == reference.program.size());
  bool reordered = false;
  for (size_t k = 0; k < plan.program.size(); ++k) {
    CHECK(plan.program[k].outputs == reference.program[k].outputs);
    reordered = reordered || plan.program[k].outputs != source_order[k].outputs;
  }
  CHECK(reordered);
}

}  // namespace
}  // namespace hexir::compiler::testing

// ---- calls: the inlined size is bounded, and inlining stays linear ---------------------

namespace hexir::compiler::testing {
namespace {

// @f0 is one relu; each @fI calls @f(I-1) twice: @fI inlines to 2^I nodes,
// the module (f0..fDEPTH) holds 2^(DEPTH+1) - 1.
std::string doubling_calls(int depth) {
  std::string text = "func @f0(%x: f32[4]) -> (f32[4]) {\n  %y = call @relu(%x) : f32[4]\n  return %y\n}\n";
  for (int i = 1; i <= depth; ++i) {
    const std::string callee = "@f" + std::to_string(i - 1);
    text += "func @f" + std::to_string(i) + "(%x: f32[4]) -> (f32[4]) {\n  %a = call " + callee +
            "(%x) : f32[4]\n  %b = call " + callee + "(%a) : f32[4]\n  return %b\n}\n";
  }
  return text;
}

TEST_CASE("inlining: 40 functions each calling the next twice are refused at the instruction limit") {
  // 3 KB of text that inlines to 2^41 nodes: this compiled until killed (2 GB
  // and growing). The check runs before each call is copied, so refusing
  // costs at most the limit's worth of nodes.
  const std::string text = doubling_calls(40);
  ParseOptions options;
  options.max_instructions = 1000;
  Result<Module> m = parse_hxir(text, "t.hxir", data_dir(), options);
  REQUIRE(!m.ok());
  const std::string e = m.status().message();
  INFO(e);
  // @f9 is the first whose second call would pass 1000: 511 + 256 + 256 + 1 copy.
  CHECK(e.rfind("t.hxir:47:13: ", 0) == 0);  // @f9's second call
  CHECK(e.find("inlining @f8 (256 instructions) into @f9 would make the module 1024 instructions, "
               "over the limit of 1000") != std::string::npos);
  CHECK(e.find("call chain @f9 -> @f8 -> @f7 -> @f6 -> @f5 -> @f4 -> @f3 -> ... -> @f0") != std::string::npos);
  CHECK(e.find("--max-instructions") != std::string::npos);

  // The default limit (2^20) refuses it the same way, further along.
  CompileOptions defaults;
  CHECK(defaults.max_instructions == kDefaultMaxInstructions);
  CHECK(ParseOptions{}.max_instructions == kDefaultMaxInstructions);
}

TEST_CASE("inlining: a program just under the instruction limit compiles, one over does not") {
  // Depth 9: the check counts 2^10 = 1024 for @f9's second call.
  const std::string text = doubling_calls(9);
  CompileOptions options;
  options.max_instructions = 1024;
  Result<std::vector<uint8_t>> ok = compile_source(text, "t.hxir", data_dir(), options);
  CHECK_MESSAGE(ok.ok(), ok.status().to_string());
  options.max_instructions = 1023;
  Result<std::vector<uint8_t>> over = compile_source(text, "t.hxir", data_dir(), options);
  REQUIRE(!over.ok());
  CHECK(over.status().message().find("over the limit of 1023") != std::string::npos);
}

TEST_CASE("inlining: the instruction limit is checked with the other compile options") {
  CompileOptions options;
  options.max_instructions = 0;
  CHECK(check_compile_options(options).message().find("instruction limit 0 must be between 1 and") !=
        std::string::npos);
  options.max_instructions = kMaxInstructionsLimit + 1;
  CHECK(!check_compile_options(options).ok());
  options.max_instructions = kMaxInstructionsLimit;
  CHECK(check_compile_options(options).ok());
}

TEST_CASE("inlining: N calls of one function name their values in O(N) lookups") {
  // Each inlined copy's values are named @g's names made unique with a
  // suffix; the suffix search started at 1 on every call (20,000 calls: 30 s).
  constexpr int kCalls = 4000;
  GraphBuilder b("calls");
  const TensorType t{DType::kF32, {4}};
  REQUIRE(b.begin_function("g").ok());
  int v = *b.add_input("x", t);
  v = (*b.add_node(ops::OpId::kRelu, {v}))[0];  // "g.relu_1" in each copy: kept, so renamed
  v = (*b.add_node(ops::OpId::kNeg, {v}))[0];
  REQUIRE(b.set_outputs({v}).ok());
  REQUIRE(b.end_function().ok());
  REQUIRE(b.begin_function("main").ok());
  v = *b.add_input("x", t);
  for (int i = 0; i < kCalls; ++i) {
    Result<std::vector<int>> r = b.inline_call("g", {v}, {"v" + std::to_string(i)}, {t}, {});
    REQUIRE(r.ok());
    v = (*r)[0];
  }
  REQUIRE(b.set_outputs({v}).ok());
  REQUIRE(b.end_function().ok());
  MESSAGE(kCalls, " calls: ", b.name_probes(), " name lookups");
  CHECK(b.name_probes() <= 4 * kCalls);
  Module m = *b.finish();
  std::set<std::string> names;
  for (const Value& value : m.functions[1].values) CHECK(names.insert(value.name).second);
}

TEST_CASE("compile: 40,000 small functions compile in linear work") {
  // Folding per-channel affines counted every constant use of the whole module
  // once per function: compiling 5,000 functions took 0.48 s, 20,000 6.3 s,
  // 40,000 43.9 s; now 0.16, 0.42 and 0.79 s. The folds count the values
  // they visit: twice the module's (once for each fold), not 40,000 times.
  constexpr int kFunctions = 40000;
  std::string text;
  for (int i = 0; i < kFunctions; ++i)
    text += "func @f" + std::to_string(i) + "(%x: f32[4]) -> (f32[4]) {\n  %y = call @relu(%x) : f32[4]\n" +
            "  %z = call @mul(%y, @s) : f32[4]\n  return %z\n}\n";
  text = "const @s : f32[] = dense [2.0]\n" + text;
  Module m = parse_ok(text);
  uint64_t values = 0;
  for (const Function& fn : m.functions) values += fn.values.size();
  uint64_t visited = 0;
  fold_channel_affine(m, &visited);
  fold_input_affine(m, &visited);
  CHECK(visited == 2 * values);

  Result<std::vector<uint8_t>> bytes = compile_source(text, "t.hxir", data_dir(), {});
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  const fb::Module* module = module_of(*bytes);
  REQUIRE(module->functions());
  CHECK(module->functions()->size() == static_cast<size_t>(kFunctions));
}

}  // namespace
}  // namespace hexir::compiler::testing
