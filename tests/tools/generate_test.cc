// hexir-generate over samples/decoder/lm.hxir (decode, prefill_4, prefill_8),
// and hexir-run choosing among a module's functions by its --input files.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "run_command.h"
#include "scratch_dir.h"

namespace {

using hexir::testing::read_all;
using hexir::testing::run_command;
using hexir::testing::ScratchDir;

const std::string kDecoder = std::string(HEXIR_SAMPLES_DIR) + "/decoder";
const std::string kCompile = HEXIR_COMPILE;
const std::string kRun = HEXIR_RUN;
const std::string kGenerate = HEXIR_GENERATE;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string compile_lm(const ScratchDir& dir) {
  const std::string hxe = dir / "lm.hxe";
  auto c = run_command(kCompile + " " + kDecoder + "/lm.hxir -o " + hxe);
  REQUIRE_MESSAGE(c.exit_code == 0, c.output);
  return hxe;
}

// expected_tokens.npy as "48,52,...".
std::string expected_tokens() {
  auto a = hexir::read_npy(kDecoder + "/expected_tokens.npy");
  REQUIRE(a.ok());
  std::string list;
  for (size_t i = 0; i < a->data.size() / 8; ++i) {
    int64_t v;
    std::memcpy(&v, a->data.data() + 8 * i, 8);
    list += (list.empty() ? "" : ",") + std::to_string(v);
  }
  return list;
}

}  // namespace

TEST_CASE(
    "hexir-generate: the decoder's greedy tokens through prefill_8 and token by token, with stats and "
    "logits") {
  ScratchDir dir;
  const std::string hxe = compile_lm(dir);
  auto r = run_command(kGenerate + " " + hxe + " --prompt " + kDecoder +
                       "/prompt.npy --max-new-tokens 20 --threads 1" + " --logits-dir " +
                       dir / "logits --stats-json " + dir / "stats.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "tokens: " + expected_tokens() + "\n"));
  CHECK(contains(r.output, "prompt: 8 tokens through prefill function 'prefill_8'"));
  CHECK(contains(r.output, "generated: 20 tokens, "));
  CHECK(contains(r.output, "per-token latency median "));
  CHECK(contains(r.output, "device allocations during generation: 0"));
  // Each step's logits: step 0 is the prompt's; its argmax is the first token.
  auto step0 = hexir::read_npy(dir / "logits/step_000.npy");
  REQUIRE(step0.ok());
  CHECK(step0->type.to_string() == "f32[1,64]");
  const float* z = reinterpret_cast<const float*>(step0->data.data());
  size_t best = 0;
  for (size_t i = 1; i < 64; ++i)
    if (z[i] > z[best]) best = i;
  CHECK(contains(r.output, "tokens: " + std::to_string(best) + ","));
  CHECK(std::filesystem::exists(dir / "logits/step_019.npy"));
  CHECK_FALSE(std::filesystem::exists(dir / "logits/step_020.npy"));
  const std::string stats = read_all(dir / "stats.json");
  for (const char* key :
       {"\"tokens\"", "\"prefill_function\":\"prefill_8\"", "\"tokens_per_second\"", "\"token_ms_median\"",
        "\"token_ms_p90\"", "\"prepared_bytes\"", "\"generate_device_allocations\":0"})
    CHECK_MESSAGE(contains(stats, key), key);

  r = run_command(kGenerate + " " + hxe + " --prompt " + kDecoder +
                  "/prompt.npy --max-new-tokens 20 --no-prefill");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "tokens: " + expected_tokens() + "\n"));
  CHECK(contains(r.output, "through decode, token by token"));

  // Sampling from a seed: the same tokens twice.
  const std::string sampled =
      kGenerate + " " + hxe +
      " --prompt-tokens 2,5,0,18 --max-new-tokens 12 --temperature 1.5 --top-k 5 --top-p 0.9 "
      "--seed 7";
  auto a = run_command(sampled), b = run_command(sampled);
  REQUIRE_MESSAGE(a.exit_code == 0, a.output);
  CHECK(contains(a.output, "through prefill function 'prefill_4'"));
  CHECK(a.output.substr(0, a.output.find('\n')) == b.output.substr(0, b.output.find('\n')));
}

TEST_CASE("hexir-generate: usage errors and a model without a decode function") {
  ScratchDir dir;
  const std::string hxe = compile_lm(dir);
  auto r = run_command(kGenerate + " " + hxe + " --max-new-tokens 4");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "give the prompt with --prompt FILE.npy or --prompt-tokens 1,2,3"));
  r = run_command(kGenerate + " " + hxe + " --prompt-tokens 1,x --max-new-tokens 4");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "--prompt-tokens: '1,x' is not a list of token ids"));
  r = run_command(kGenerate + " " + hxe + " --prompt-tokens 1,2 --max-new-tokens 4 --temperature warm");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--temperature expects a number, got 'warm'"));
  r = run_command(kGenerate + " " + hxe + " --prompt-tokens 1,2 --max-new-tokens 4 --decode step");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "no function 'step'"));
  r = run_command(kGenerate + " " + hxe + " --prompt-tokens 1,99 --max-new-tokens 4");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "outside the vocabulary of 64"));
}

TEST_CASE("hexir-run: without --function, the function the --input files fit, or why none or several do") {
  ScratchDir dir;
  const std::string hxe = compile_lm(dir);
  std::vector<uint8_t> ids(4 * 8, 0);
  REQUIRE(hexir::write_npy(dir / "ids4.npy", {hexir::DType::kI64, {1, 4}}, ids).ok());
  REQUIRE(hexir::write_npy(dir / "ids3.npy", {hexir::DType::kI64, {1, 3}}, std::span(ids).first(24)).ok());
  auto r = run_command(kRun + " " + hxe + " --input input_ids=" + dir / "ids4.npy");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "function prefill_4: "));
  r = run_command(kRun + " " + hxe + " --input input_ids=" + dir / "ids4.npy --stats-json " + dir / "run.json");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(read_all(dir / "run.json"), "\"prepared_bytes\":"));
  r = run_command(kRun + " " + hxe + " --input input_ids=" + dir / "ids3.npy");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output,
                 "choosing the function by the --input files: no function takes (input_ids: i64[1,3])"));
  CHECK(contains(r.output, "prefill_8(input_ids: i64[1,8], cache: f32[2,2,2,32,16] donate)"));
  r = run_command(kRun + " " + hxe + " --input cache=" + kDecoder + "/cache0.npy");
  CHECK(r.exit_code == 1);
  CHECK(contains(r.output, "3 functions take (cache: f32[2,2,2,32,16])"));
  CHECK(contains(r.output, "(--function NAME picks one)"));
  r = run_command(kRun + " " + hxe + " --function decode --input cache=" + kDecoder + "/cache0.npy");
  REQUIRE_MESSAGE(r.exit_code == 0, r.output);
  CHECK(contains(r.output, "function decode: "));
}
