// The command-line tools as a user runs them: exit codes, messages, files.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "budget_programs.h"
#include "hexir/base/npy.h"
#include "run_command.h"
#include "scratch_dir.h"

namespace fs = std::filesystem;

namespace {

using hexir::testing::read_all;
using hexir::testing::run_command;
using hexir::testing::ScratchDir;
using hexir::testing::write_all;

const std::string kSamples = HEXIR_SAMPLES_DIR;
const std::string kCompile = HEXIR_COMPILE;
const std::string kDump = HEXIR_DUMP;
const std::string kRun = HEXIR_RUN;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("tools: compile, dump and run the mlp sample against its reference") {
  ScratchDir dir;
  auto c = run_command(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "mlp.hxe");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto d = run_command(kDump + " " + dir / "mlp.hxe");
  CHECK(d.exit_code == 0);
  CHECK(contains(d.output, "arena"));
  CHECK(contains(d.output, "lower bound"));
  CHECK(contains(d.output, "fill"));
  auto r = run_command(kRun + " " + dir / "mlp.hxe --device cpu --input x=" + kSamples +
                       "/mlp/input_x.npy --output-dir " + dir / "out --iterations 3 --stats-json " +
                       dir / "stats.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "output 0: f32[8,10] -> " + dir / "out/p.npy"));  // named by the output
  auto got = hexir::read_npy(dir / "out/p.npy");
  auto want = hexir::read_npy(kSamples + "/mlp/expected_0.npy");
  REQUIRE(got.ok());
  REQUIRE(want.ok());
  REQUIRE(got->type == want->type);
  const float* g = reinterpret_cast<const float*>(got->data.data());
  const float* w = reinterpret_cast<const float*>(want->data.data());
  for (size_t i = 0; i < got->data.size() / 4; ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(1e-4));

  const std::string stats = read_all(dir / "stats.json");
  for (const char* key :
       {"\"arena_bytes\"", "\"constant_bytes\"", "\"lower_bound_bytes\"", "\"load_ms\"", "\"prepare\"",
        "\"invoke\"", "\"ms_median\"", "\"ms_first\"", "\"device_allocations\"", "\"uploads\"", "\"bytes\""})
    CHECK_MESSAGE(contains(stats, key), key);
  CHECK(contains(stats, "\"count\":3"));
  CHECK_FALSE(contains(stats, "\"profile\""));  // only with --profile
}

TEST_CASE("tools: hexir-run names each output file by the output's name, escaped") {
  ScratchDir dir;
  write_all(dir / "names.hxir", R"(module @names
func @main(%x: f32[2]) -> (f32[2], f32[2], f32[2]) {
  %"a/b:0" = call @relu(%x) : f32[2]
  %".h" = call @add(%x, %x) : f32[2]
  return %"a/b:0", %".h", %"a/b:0"
}
)");
  auto c = run_command(kCompile + " " + dir / "names.hxir -o " + dir / "names.hxe");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto r = run_command(kRun + " " + dir / "names.hxe --output-dir " + dir / "out");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  // The compiler names a value returned twice "NAME#INDEX"; '/', ':', '#' and a leading '.' are escaped.
  for (const char* file : {"a%2Fb%3A0.npy", "%2Eh.npy", "a%2Fb%3A0%232.npy"}) {
    CHECK_MESSAGE(fs::is_regular_file(dir.path / "out" / file), file);
    CHECK_MESSAGE(contains(r.output, std::string("-> ") + dir / "out" + "/" + file), file);
  }
  CHECK(std::distance(fs::directory_iterator(dir.path / "out"), fs::directory_iterator()) == 3);
}

TEST_CASE("tools: hexir-run --profile sums time per operator and lists the slowest instructions") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/convnet.hxir -o " + dir / "c.hxe").exit_code == 0);
  auto r = run_command(kRun + " " + dir / "c.hxe --threads 1 --iterations 2 --profile --stats-json " +
                       dir / "s.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "profile: "));
  CHECK(contains(r.output, "operator"));
  CHECK(contains(r.output, "conv2d"));  // with its fused relu
  CHECK(contains(r.output, "slowest instructions:"));
  CHECK(contains(r.output, "conv2d %r1 f32[1,8,16,16]"));  // the fused conv2d writes the relu's value
  const std::string stats = read_all(dir / "s.json");
  for (const char* key : {"\"profile\"", "\"operators\"", "\"instructions\"", "\"ms_per_invoke\""})
    CHECK_MESSAGE(contains(stats, key), key);
}

TEST_CASE("tools: hexir-dump --json has the documented keys") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "t.hxe").exit_code == 0);
  auto d = run_command(kDump + " " + dir / "t.hxe --json");
  REQUIRE(d.exit_code == 0);
  for (const char* key :
       {"\"sections\"", "\"constants\"", "\"arena\"", "\"functions\"", "\"slots\"", "\"instructions\"",
        "\"lower_bound\"", "\"alignment\"", "\"strategy\"", "\"storage\":\"rodata\"", "\"storage\":\"fill\""})
    CHECK_MESSAGE(contains(d.output, key), key);
  CHECK(d.output.front() == '{');
}

TEST_CASE("tools: hexir-dump shows every result of a several-output instruction") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/convnet.hxir -o " + dir / "c.hxe").exit_code == 0);
  auto d = run_command(kDump + " " + dir / "c.hxe");
  REQUIRE(d.exit_code == 0);
  CHECK(contains(d.output, "%a, %b = split %c2 {1, 8, 8} : f32[1,8,8,8], f32[1,8,8,8]"));
  auto j = run_command(kDump + " " + dir / "c.hxe --json");
  REQUIRE(j.exit_code == 0);
  CHECK(contains(j.output, "\"kernel\":\"split\""));
  CHECK(contains(j.output, "\"outputs\":["));
}

TEST_CASE("tools: hexir-dump marks a matmul that reads its b transposed in place") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "t.hxe").exit_code == 0);
  auto d = run_command(kDump + " " + dir / "t.hxe");
  CHECK_MESSAGE(contains(d.output, "%s0 = matmul %q, %k {1} : f32[4,16,16]  ; alias=0b00 b transposed (read in place)"),
                d.output);
  REQUIRE(
      run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "u.hxe --no-fuse").exit_code ==
      0);
  CHECK_FALSE(contains(run_command(kDump + " " + dir / "u.hxe").output, "b transposed"));
}

TEST_CASE("tools: hexir-dump shows a KV-cache scatter into a donated cache in place, with no arena") {
  ScratchDir dir;
  write_all(dir / "kv.hxir", R"(module @kv
func @step(%cache: f32[2,8,4] donate, %pos: i64[2,1,4], %rows: f32[2,1,4]) -> (f32[2,8,4]) {
  %c = call @scatter_elements(%cache, %pos, %rows) {axis = 1} : f32[2,8,4]
  return %c
}
)");
  auto c = run_command(kCompile + " " + dir / "kv.hxir -o " + dir / "kv.hxe");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto d = run_command(kDump + " " + dir / "kv.hxe");
  REQUIRE(d.exit_code == 0);
  // Output 0 takes the cache's buffer (alias bit 0): only the new rows move.
  CHECK_MESSAGE(
      contains(d.output, "%c = scatter_elements %cache, %pos, %rows {1, 0} : f32[2,8,4]  ; alias=0b001"),
      d.output);
  CHECK_MESSAGE(contains(d.output, "arena 0 bytes"), d.output);
}

TEST_CASE("tools: hexir-compile --donate by pattern; a donation it cannot honour fails naming input, output, why") {
  ScratchDir dir;
  write_all(dir / "kv.hxir", R"(module @kv
func @step(%past.0: f32[2,8,4], %past.1: f32[2,8,4], %pos: i64[2,1,4], %rows: f32[2,1,4]) -> (f32[2,8,4], f32[2,8,4]) {
  %present.0 = call @scatter_elements(%past.0, %pos, %rows) {axis = 1} : f32[2,8,4]
  %present.1 = call @scatter_elements(%past.1, %pos, %rows) {axis = 1} : f32[2,8,4]
  return %present.0, %present.1
}
)");
  auto c = run_command(kCompile + " " + dir / "kv.hxir -o " + dir / "kv.hxe --donate 'past.*=present.*'");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  auto d = run_command(kDump + " " + dir / "kv.hxe");
  REQUIRE(d.exit_code == 0);
  CHECK_MESSAGE(contains(d.output, "%past.0: f32[2,8,4] donate -> output 0"), d.output);
  CHECK_MESSAGE(contains(d.output, "%past.1: f32[2,8,4] donate -> output 1"), d.output);
  CHECK_MESSAGE(contains(d.output, "arena 0 bytes"), d.output);
  // Crossed: past.1's buffer as present.0, written before past.1 is read.
  auto crossed = run_command(kCompile + " " + dir / "kv.hxir -o " + dir / "x.hxe --donate past.1=present.0");
  CHECK(crossed.exit_code == 1);
  CHECK_MESSAGE(contains(crossed.output, "input %past.1 cannot be donated to output 0 'present.0': the input is "
                                         "still read by `scatter_elements` (instruction 1)"),
                crossed.output);
  auto unmatched = run_command(kCompile + " " + dir / "kv.hxir -o " + dir / "x.hxe --donate 'cache.*=present.*'");
  CHECK(unmatched.exit_code == 1);
  CHECK_MESSAGE(contains(unmatched.output, "no input matches 'cache.*'"), unmatched.output);
  CHECK(run_command(kCompile + " " + dir / "kv.hxir -o " + dir / "x.hxe --donate past").exit_code == 2);
}

TEST_CASE("tools: hexir-compile --weights int8 stores matmul weights int8 and prints each with its error") {
  ScratchDir dir;
  std::string w = "dense [";
  for (int r = 0; r < 64; ++r) {
    w += r ? ", [" : "[";
    for (int c = 0; c < 64; ++c) w += (c ? ", " : "") + std::to_string(0.01 * ((r * 7 + c * 3) % 19 - 9));
    w += "]";
  }
  write_all(dir / "fc.hxir", "module @fc\nconst @w : f32[64,64] = " + w + "]\n" + R"(func @main(%x: f32[1,64]) -> (f32[1,64]) {
  %y = call @matmul(%x, @w) : f32[1,64]
  return %y
}
)");
  auto c = run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "fc.hxe --weights int8");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  CHECK_MESSAGE(contains(c.output, "weight w [64, 64]: 16384 -> 4352 bytes (int8), largest error"), c.output);
  CHECK_MESSAGE(contains(c.output, "weights: 1 stored smaller, 16384 -> 4352 bytes"), c.output);
  auto d = run_command(kDump + " " + dir / "fc.hxe");
  REQUIRE(d.exit_code == 0);
  CHECK_MESSAGE(contains(d.output, "quantized_matmul"), d.output);
  CHECK_MESSAGE(contains(d.output, "i8[64,64]"), d.output);
  // int4 in groups of 32: 64 rows of 32 packed bytes and 2 f16 scales.
  auto c4 = run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "fc4.hxe --weights int4");
  REQUIRE_MESSAGE(c4.exit_code == 0, c4.output);
  CHECK_MESSAGE(contains(c4.output, "weight w [64, 64]: 16384 -> 2304 bytes (int4:group=32), largest error"), c4.output);
  auto d4 = run_command(kDump + " " + dir / "fc4.hxe");
  CHECK_MESSAGE(contains(d4.output, "int4_matmul"), d4.output);
  CHECK_MESSAGE(contains(d4.output, "u8[64,32]"), d4.output);
  CHECK_MESSAGE(contains(d4.output, "f16[64,2]"), d4.output);
  // hexir-dump lists each compressed weight with its bytes.
  CHECK_MESSAGE(contains(d4.output, "@w.int4 [64, 64] int4 group 32: 2304 bytes with @w.scale (f32: 16384), read by matmul"),
                d4.output);
  CHECK_MESSAGE(contains(d.output, "@w.int8 [64, 64] int8 per row: 4352 bytes with @w.scale (f32: 16384)"), d.output);
  auto j4 = run_command(kDump + " " + dir / "fc4.hxe --json");
  CHECK_MESSAGE(contains(j4.output, "\"format\":\"int4 group 32\",\"rows\":64,\"columns\":64,\"stored_bytes\":2304"), j4.output);
  // A per-weight override wins over --weights; a group that does not divide K is stored int8.
  auto kept = run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "x.hxe --weights int4 --weights-for 'w*=f32'");
  REQUIRE_MESSAGE(kept.exit_code == 0, kept.output);
  CHECK_MESSAGE(!contains(kept.output, "stored smaller"), kept.output);
  auto wide = run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "x.hxe --weights int4:group=128");
  CHECK_MESSAGE(contains(wide.output, "4352 bytes (int8)"), wide.output);
  for (const char* bad : {"int5", "int4:group=48", "int4:group=", "int4:group=0"}) {
    auto r = run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "x.hxe --weights " + bad);
    CHECK_MESSAGE(r.exit_code == 2, bad);
    CHECK_MESSAGE(contains(r.output, "weight format"), r.output);
  }
  CHECK(run_command(kCompile + " " + dir / "fc.hxir -o " + dir / "x.hxe --weights-for int8").exit_code == 2);
}

TEST_CASE("tools: hexir-compile --function puts several ONNX imports in one executable, weights stored once") {
  const std::string mlp = kSamples + "/../tests/fuzz/seeds/onnx/mlp.onnx";
  ScratchDir dir;
  auto one = run_command(kCompile + " " + mlp + " -o " + dir / "one.hxe");
  if (one.exit_code != 0 && contains(one.output, "built without ONNX")) {
    MESSAGE("skipped: hexir-compile was built without ONNX support");
    return;
  }
  REQUIRE_MESSAGE(one.exit_code == 0, one.output);
  // The model fixes x at [2,2]; restating it is allowed (a dynamic dim would take any size here).
  auto two = run_command(kCompile + " --function first=" + mlp + " --function second=" + mlp + ",x=2x2 -o " +
                         dir / "two.hxe");
  REQUIRE_MESSAGE(two.exit_code == 0, two.output);
  // The same three constants as one import: the second function's copies are stored once.
  CHECK_MESSAGE(contains(two.output, "3 constants, 48 bytes"), two.output);
  auto d = run_command(kDump + " " + dir / "two.hxe");
  REQUIRE(d.exit_code == 0);
  CHECK_MESSAGE(contains(d.output, "first(%x: f32[2,2]) -> (f32[2,3])"), d.output);
  CHECK_MESSAGE(contains(d.output, "second(%x: f32[2,2]) -> (f32[2,3])"), d.output);
  const std::vector<float> x(4, 1.0f);
  hexir::write_npy(dir / "x.npy", hexir::TensorType{hexir::DType::kF32, {2, 2}},
                   {reinterpret_cast<const uint8_t*>(x.data()), x.size() * 4});
  auto r = run_command(kRun + " " + dir / "two.hxe --function second --input x=" + dir / "x.npy");
  CHECK_MESSAGE(r.exit_code == 0, r.output);
  auto twice = run_command(kCompile + " --function f=" + mlp + " --function f=" + mlp + " -o " + dir / "x.hxe");
  CHECK(twice.exit_code == 1);
  CHECK_MESSAGE(contains(twice.output, "function @f is given twice"), twice.output);
  auto bad = run_command(kCompile + " --function f=" + mlp + ",y=2x2 -o " + dir / "x.hxe");
  CHECK(bad.exit_code == 1);
  CHECK_MESSAGE(contains(bad.output, "no model input named 'y'"), bad.output);
  CHECK(run_command(kCompile + " --function f -o " + dir / "x.hxe").exit_code == 2);
}

TEST_CASE("tools: host offload under --memory-budget, as hexir-compile, hexir-dump and hexir-run show it") {
  ScratchDir dir;
  // %a is too far from %x to recompute: under 32 KiB it waits in the host arena.
  write_all(dir / "far.hxir", hexir::testing::kFarProgram);
  auto c = run_command(kCompile + " " + dir / "far.hxir -o " + dir / "f.hxe --memory-budget device=32KiB");
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  CHECK_MESSAGE(contains(c.output, "memory budget device=32768 bytes: met, 0 instructions recomputed, 1 prefetches; "
                                   "host arena 16384 bytes"),
                c.output);
  auto d = run_command(kDump + " " + dir / "f.hxe");
  REQUIRE(d.exit_code == 0);
  CHECK_MESSAGE(contains(d.output, "%a.host1 = evict %a : f32[64,64]  ; alias=0b0 device -> host"), d.output);
  CHECK(contains(d.output, "%a.prefetch1 = prefetch %a.host1 : f32[64,64]  ; alias=0b0 host -> device"));
  CHECK(contains(d.output, "= add %r, %a.prefetch1"));
  CHECK(contains(d.output, "host arena @0"));
  CHECK(contains(d.output, "copy of %a"));
  CHECK(contains(d.output, "host arena 16384 bytes, lower bound 16384; per invoke 1 evictions (16384 B), "
                           "1 prefetches (16384 B)"));
  auto j = run_command(kDump + " " + dir / "f.hxe --json");
  REQUIRE(j.exit_code == 0);
  CHECK_MESSAGE(contains(j.output, "\"memory_spaces\":[{\"space\":\"device\",\"size\":32768"), j.output);
  CHECK(contains(j.output, "\"bytes_prefetched_per_invoke\":16384"));
  CHECK(contains(j.output, "{\"space\":\"host\",\"size\":16384,\"lower_bound\":16384,"
                           "\"bytes_evicted_per_invoke\":16384"));
  CHECK(contains(j.output, "\"memory_space\":\"host\""));
  CHECK(contains(j.output, "\"host_size\":16384"));
  auto svg = run_command(kDump + " " + dir / "f.hxe --plan-svg " + dir / "f.svg");
  REQUIRE(svg.exit_code == 0);
  CHECK(contains(read_all(dir / "f.svg"), "host arena"));
  auto r = run_command(kRun + " " + dir / "f.hxe --iterations 2 --stats-json " + dir / "s.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  const std::string stats = read_all(dir / "s.json");
  CHECK_MESSAGE(contains(stats, "\"host_arena_bytes\":16384"), stats);
  CHECK(contains(stats, "\"context_host_bytes\":16384"));
  // A host budget below what the offload needs is refused by name.
  auto refused = run_command(kCompile + " " + dir / "far.hxir -o " + dir / "g.hxe" +
                             " --memory-budget device=32KiB --memory-budget host=1KiB");
  CHECK(refused.exit_code != 0);
  CHECK_MESSAGE(contains(refused.output, "0 values offloaded to host memory under host=1024"), refused.output);
}

TEST_CASE("tools: --plan=naive is larger than the arena plan and both run") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "n.hxe --plan=naive")
              .exit_code == 0);
  REQUIRE(run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "a.hxe --plan=arena")
              .exit_code == 0);
  CHECK(run_command(kRun + " " + dir / "n.hxe").exit_code == 0);  // random inputs
  CHECK(run_command(kRun + " " + dir / "a.hxe").exit_code == 0);
  auto n = run_command(kDump + " " + dir / "n.hxe --json"),
       a = run_command(kDump + " " + dir / "a.hxe --json");
  CHECK(contains(n.output, "\"strategy\":\"naive\""));
  CHECK(contains(a.output, "\"strategy\":\"arena\""));
}

TEST_CASE("tools: a malformed .hxir names file, line and column and exits non-zero") {
  ScratchDir dir;
  write_all(
      dir / "bad.hxir",
      "module @m\nfunc @main(%x: f32[2]) -> (f32[2]) {\n  %y = call @relu(%x) : f32[3]\n  return %y\n}\n");
  auto c = run_command(kCompile + " " + dir / "bad.hxir -o " + dir / "bad.hxe");
  CHECK(c.exit_code == 1);
  CHECK_MESSAGE(contains(c.output, "bad.hxir:3:"), c.output);
  CHECK_FALSE(fs::exists(dir / "bad.hxe"));
  write_all(dir / "syntax.hxir", "module @m\nfunc @main(%x: f32[2] -> (f32[2]) {\n");
  c = run_command(kCompile + " " + dir / "syntax.hxir -o " + dir / "s.hxe");
  CHECK(c.exit_code == 1);
  CHECK_MESSAGE(contains(c.output, "syntax.hxir:2:"), c.output);
}

TEST_CASE("tools: hexir-run --max-loop-iterations stops a long loop; a fail stops the run with its message") {
  ScratchDir dir;
  write_all(
      dir / "loop.hxir",
      "module @m\nfunc @main(%x: f32[4], %c: bool[]) -> f32[4] {\n"
      "  %r = for %i = 0 to 1000 iter(%a = %x) {\n    %a2 = call @add(%a, %x) : f32[4]\n    yield %a2\n  }\n"
      "  %y = if %c -> (f32[4]) {\n    yield %r\n  } else {\n    fail \"c was false\"\n  }\n"
      "  return %y\n}\n");
  REQUIRE(run_command(kCompile + " " + dir / "loop.hxir -o " + dir / "loop.hxe").exit_code == 0);
  // bool[] .npy files: a 10-byte preamble, the header padded to 128 bytes, one byte of data.
  auto write_bool = [&](const std::string& name, bool value) {
    std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': (), }";
    header.resize(117, ' ');
    header += '\n';
    write_all(dir / name, std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + (value ? '\x01' : '\x00'));
  };
  write_bool("true.npy", true);
  write_bool("false.npy", false);
  auto ok = run_command(kRun + " " + dir / "loop.hxe --input c=" + dir / "true.npy");
  CHECK_MESSAGE(ok.exit_code == 0, ok.output);
  auto limited =
      run_command(kRun + " " + dir / "loop.hxe --input c=" + dir / "true.npy --max-loop-iterations 10");
  CHECK(limited.exit_code == 1);
  CHECK_MESSAGE(contains(limited.output, "loop iterations, the context's limit"), limited.output);
  auto failed = run_command(kRun + " " + dir / "loop.hxe --input c=" + dir / "false.npy");
  CHECK(failed.exit_code == 1);
  CHECK_MESSAGE(contains(failed.output, "('fail'): c was false"), failed.output);
}

TEST_CASE("tools: usage errors exit 2") {
  CHECK(run_command(kCompile).exit_code == 2);
  CHECK(run_command(kCompile + " a.hxir --plan=bogus -o x.hxe").exit_code == 2);
  CHECK(run_command(kDump).exit_code != 0);
  CHECK(run_command(kRun).exit_code != 0);
}

TEST_CASE("tools: truncated and corrupt executables are rejected by dump and run") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/mlp.hxir -o " + dir / "m.hxe").exit_code == 0);
  std::string bytes = read_all(dir / "m.hxe");
  for (size_t len : {size_t{0}, size_t{10}, size_t{64}, size_t{500}, bytes.size() / 2, bytes.size() - 1}) {
    std::ofstream(dir / "t.hxe", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(len));
    auto d = run_command(kDump + " " + dir / "t.hxe");
    CHECK_MESSAGE(d.exit_code == 1, len, d.output);
    CHECK(contains(d.output, "t.hxe"));
    CHECK(run_command(kRun + " " + dir / "t.hxe").exit_code == 1);
  }
  std::string flipped = bytes;
  flipped[200] ^= 0x10;  // inside the metadata: the checksum catches it
  std::ofstream(dir / "f.hxe", std::ios::binary)
      .write(flipped.data(), static_cast<std::streamsize>(flipped.size()));
  auto d = run_command(kDump + " " + dir / "f.hxe");
  CHECK(d.exit_code == 1);
  CHECK_MESSAGE(contains(d.output, "checksum"), d.output);
  CHECK(run_command(kDump + " " + dir / "missing.hxe").exit_code == 1);
}

TEST_CASE("tools: hexir-run rejects wrong input names, shapes and devices") {
  ScratchDir dir;
  REQUIRE(run_command(kCompile + " " + kSamples + "/transformer.hxir -o " + dir / "t.hxe").exit_code == 0);
  auto r = run_command(kRun + " " + dir / "t.hxe --input x=" + kSamples + "/mlp/input_x.npy");
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "input 'x'"), r.output);
  CHECK(contains(r.output, "f32[16,64]"));
  r = run_command(kRun + " " + dir / "t.hxe --input nope=" + kSamples + "/mlp/input_x.npy");
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "'nope'"), r.output);
  r = run_command(kRun + " " + dir / "t.hxe --input x=" + dir / "missing.npy");
  CHECK(r.exit_code == 1);
  r = run_command(kRun + " " + dir / "t.hxe --device tpu");
  CHECK(r.exit_code != 0);
  CHECK_MESSAGE(contains(r.output, "tpu"), r.output);
  r = run_command(kRun + " " + dir / "t.hxe --function nope");
  CHECK(r.exit_code == 1);
  CHECK_MESSAGE(contains(r.output, "main"), r.output);
}
