// Functions chosen by the shapes of their inputs (Module::find_function_for)
// and the generation runner (hexir/generator.h) over samples/decoder/lm.hxir:
// a decode function with a donated KV cache and prefill functions of 4 and 8
// tokens. Greedy tokens against the numpy reference (expected_tokens.npy),
// every step's logits against the functions invoked one by one through
// Context::invoke, the token-by-token fallback, sampling from a seed, eos,
// no allocation per token, and each refusal.
#include "hexir/generator.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/vm.h"

namespace hexir::vm {
namespace {

namespace fs = std::filesystem;
const fs::path kDecoder = fs::path(HEXIR_SAMPLES_DIR) / "decoder";
constexpr int64_t kVocab = 64;
constexpr int64_t kCacheFloats = 2 * 2 * 2 * 32 * 16;

std::vector<int64_t> read_i64(const std::string& name) {
  auto array = read_npy((kDecoder / name).string());
  REQUIRE_MESSAGE(array.ok(), array.status().to_string());
  std::vector<int64_t> values(array->data.size() / 8);
  std::memcpy(values.data(), array->data.data(), values.size() * 8);
  return values;
}

// A module compiled from text (or lm.hxir), prepared on the cpu, with one context.
struct Loaded {
  std::unique_ptr<hal::Device> device;
  std::optional<Module> module;
  std::optional<Program> program;
  std::optional<Context> context;
};

std::unique_ptr<Loaded> load(Result<std::vector<uint8_t>> bytes) {
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().to_string());
  auto l = std::make_unique<Loaded>();
  auto device = hal::create_device("cpu", {.threads = 1});
  REQUIRE(device.ok());
  l->device = std::move(device).value();
  auto module = Module::load_buffer({bytes->data(), bytes->size()}, {.copy_weights = true});
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  l->module.emplace(std::move(module).value());
  auto program = Program::prepare(*l->module, *l->device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  l->program.emplace(std::move(program).value());
  auto context = Context::create(*l->program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  l->context.emplace(std::move(context).value());
  return l;
}

std::unique_ptr<Loaded> load_lm() { return load(compiler::compile_file(kDecoder / "lm.hxir")); }
std::unique_ptr<Loaded> load_text(const std::string& text) {
  return load(compiler::compile_source(text, "test.hxir", kDecoder.string()));
}

// The reference: decode invoked token by token through Context::invoke with
// the test's own buffers (the prompt at positions 0.., then each argmax fed
// back), every step's logits kept.
struct Reference {
  std::vector<int64_t> tokens;
  std::vector<std::vector<float>> logits;
};

Reference greedy_by_invoke(Context& context, const std::vector<int64_t>& prompt, size_t count) {
  Reference r;
  std::vector<float> cache(kCacheFloats, 0.0f), logits(kVocab);
  int64_t token = 0, pos = 0;
  const TensorRef inputs[] = {{&token, 8, {DType::kI64, {1, 1}}},
                              {&pos, 8, {DType::kI64, {}}},
                              {cache.data(), kCacheFloats * 4, {DType::kF32, {2, 2, 2, 32, 16}}}};
  const TensorRef outputs[] = {{logits.data(), kVocab * 4, {DType::kF32, {1, 1, kVocab}}}, inputs[2]};
  for (size_t step = 0; step + 1 < prompt.size() + count; ++step, ++pos) {
    token = step < prompt.size() ? prompt[step] : r.tokens.back();
    const Status s = context.invoke("decode", inputs, outputs);
    REQUIRE_MESSAGE(s.ok(), s.to_string());
    if (step + 1 < prompt.size()) continue;
    r.logits.push_back(logits);
    r.tokens.push_back(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  return r;
}

struct Recorder {
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> tokens;
  size_t stop_after = SIZE_MAX;
  static bool record(void* self, size_t index, int64_t token, std::span<const float> logits) {
    auto* r = static_cast<Recorder*>(self);
    CHECK(index == r->tokens.size());
    r->tokens.push_back(token);
    r->logits.emplace_back(logits.begin(), logits.end());
    return index + 1 < r->stop_after;
  }
};

TEST_CASE("find_function_for: the one function whose inputs have the shapes asked, by position or by name") {
  auto l = load_text(
      "module @shapes\n"
      "func @prefill_4(%ids: i64[1,4], %cache: f32[2,8] donate) -> (f32[2,8]) {\n"
      "  %c = call @relu(%cache) : f32[2,8]\n  return %c\n}\n"
      "func @decode(%ids: i64[1,1], %cache: f32[2,8] donate) -> (f32[2,8]) {\n"
      "  %c = call @relu(%cache) : f32[2,8]\n  return %c\n}\n"
      "func @also_decode(%ids: i64[1,1], %cache: f32[2,8]) -> (f32[2,8]) {\n"
      "  %c = call @relu(%cache) : f32[2,8]\n  return %c\n}\n");
  const Module& m = *l->module;
  const TensorType cache{DType::kF32, {2, 8}};
  const TensorType four[] = {{DType::kI64, {1, 4}}, cache};
  Result<size_t> found = m.find_function_for(four);
  REQUIRE_MESSAGE(found.ok(), found.status().to_string());
  CHECK(m.function(*found).name == "prefill_4");

  const TensorType one[] = {{DType::kI64, {1, 1}}, cache};
  found = m.find_function_for(one);
  REQUIRE_FALSE(found.ok());
  CHECK(found.status().code() == StatusCode::kInvalidArgument);
  CHECK(found.status().message().find("2 functions take (i64[1,1], f32[2,8]) ('decode', 'also_decode')") !=
        std::string::npos);
  CHECK(found.status().message().find("prefill_4(ids: i64[1,4], cache: f32[2,8] donate) -> (f32[2,8])") !=
        std::string::npos);

  const TensorType seven[] = {{DType::kI64, {1, 7}}, cache};
  found = m.find_function_for(seven);
  REQUIRE_FALSE(found.ok());
  CHECK(found.status().code() == StatusCode::kNotFound);
  CHECK(found.status().message().find("no function takes (i64[1,7], f32[2,8]) (the module has 3:") !=
        std::string::npos);
  const TensorType wrong_dtype[] = {{DType::kI32, {1, 4}}, cache};
  CHECK_FALSE(m.find_function_for(wrong_dtype).ok());
  CHECK_FALSE(m.find_function_for(std::span<const TensorType>(four, 1)).ok());  // fewer inputs

  // By name: the given inputs only.
  const NamedTensorType named_four[] = {{"ids", {DType::kI64, {1, 4}}}};
  found = m.find_function_for(named_four);
  REQUIRE(found.ok());
  CHECK(m.function(*found).name == "prefill_4");
  const NamedTensorType named_one[] = {{"ids", {DType::kI64, {1, 1}}}};
  CHECK(m.find_function_for(named_one).status().code() == StatusCode::kInvalidArgument);
  const NamedTensorType unknown[] = {{"tokens", {DType::kI64, {1, 4}}}};
  found = m.find_function_for(unknown);
  CHECK(found.status().code() == StatusCode::kNotFound);
  CHECK(found.status().message().find("no function takes (tokens: i64[1,4])") != std::string::npos);
}

TEST_CASE("generator: greedy tokens from prefill_8 are the numpy reference's, and token by token too") {
  auto l = load_lm();
  const std::vector<int64_t> prompt = read_i64("prompt.npy"), expected = read_i64("expected_tokens.npy");
  REQUIRE(prompt.size() == 8);
  auto generator = Generator::create(*l->context, {.max_new_tokens = 20});
  REQUIRE_MESSAGE(generator.ok(), generator.status().to_string());
  CHECK(generator->vocab_size() == kVocab);
  CHECK(l->module->function(generator->decode_function()).name == "decode");
  REQUIRE(generator->prefill_function(8) >= 0);
  CHECK(l->module->function(static_cast<size_t>(generator->prefill_function(8))).name == "prefill_8");
  CHECK(l->module->function(static_cast<size_t>(generator->prefill_function(4))).name == "prefill_4");
  CHECK(generator->prefill_function(5) == -1);

  std::vector<int64_t> tokens(20, -1);
  Result<size_t> count = generator->generate(prompt, 20, tokens);
  REQUIRE_MESSAGE(count.ok(), count.status().to_string());
  CHECK(*count == 20);
  CHECK(tokens == expected);
  const GenerationStats& stats = generator->stats();
  CHECK(stats.prompt_tokens == 8);
  CHECK(stats.generated_tokens == 20);
  CHECK(stats.prefill_function == generator->prefill_function(8));
  CHECK(stats.token_ns.size() == 20);
  CHECK(stats.token_ns[0] == stats.prefill_ns);
  uint64_t decode_ns = 0;
  for (size_t i = 1; i < stats.token_ns.size(); ++i) decode_ns += stats.token_ns[i];
  CHECK(decode_ns == stats.decode_ns);
  CHECK(stats.tokens_per_second > 0);

  // Again (the caches zeroed for the new sequence): the same tokens, and
  // neither an allocation of memory nor a device allocation or upload.
  const hal::DeviceCounters before = l->device->counters();
  const uint64_t allocations = hexir::testing::thread_allocation_count();
  std::fill(tokens.begin(), tokens.end(), -1);
  count = generator->generate(prompt, 20, tokens);
  CHECK(hexir::testing::thread_allocation_count() == allocations);
  const hal::DeviceCounters after = l->device->counters();
  CHECK(after.allocations == before.allocations);
  CHECK(after.uploads == before.uploads);
  REQUIRE(count.ok());
  CHECK(tokens == expected);

  // Token by token through decode: the same tokens.
  auto by_token = Generator::create(*l->context, {.prefill = false, .max_new_tokens = 20});
  REQUIRE(by_token.ok());
  CHECK(by_token->prefill_function(8) == -1);
  std::fill(tokens.begin(), tokens.end(), -1);
  count = by_token->generate(prompt, 20, tokens);
  REQUIRE_MESSAGE(count.ok(), count.status().to_string());
  CHECK(tokens == expected);
  CHECK(by_token->stats().prefill_function == -1);
}

TEST_CASE(
    "generator: every step's logits are those of decode invoked step by step (prefill_4, and no prefill)") {
  auto l = load_lm();
  auto reference_context = Context::create(*l->program);
  REQUIRE(reference_context.ok());
  for (const size_t length : {size_t{4}, size_t{5}, size_t{1}}) {
    CAPTURE(length);
    const std::vector<int64_t> all = read_i64("prompt.npy");
    const std::vector<int64_t> prompt(all.begin(), all.begin() + static_cast<ptrdiff_t>(length));
    const Reference want = greedy_by_invoke(*reference_context, prompt, 12);
    auto generator = Generator::create(*l->context, {.max_new_tokens = 12});
    REQUIRE(generator.ok());
    Recorder got;
    std::vector<int64_t> tokens(12);
    Result<size_t> count = generator->generate(prompt, 12, tokens, &Recorder::record, &got);
    REQUIRE_MESSAGE(count.ok(), count.status().to_string());
    CHECK(*count == 12);
    CHECK(tokens == want.tokens);
    CHECK(got.tokens == want.tokens);
    CHECK(generator->stats().prefill_function == (length == 4 ? generator->prefill_function(4) : -1));
    REQUIRE(got.logits.size() == want.logits.size());
    for (size_t s = 0; s < want.logits.size(); ++s)
      for (int64_t v = 0; v < kVocab; ++v)
        REQUIRE_MESSAGE(std::abs(got.logits[s][v] - want.logits[s][v]) <= 1e-5f,
                        "step " << s << " logit " << v);
  }
}

TEST_CASE(
    "generator: sampling is deterministic from its seed and keeps to top-k; eos and the callback stop it") {
  auto l = load_lm();
  const std::vector<int64_t> prompt = read_i64("prompt.npy"), expected = read_i64("expected_tokens.npy");
  const SamplingOptions sampling{.temperature = 1.5f, .top_k = 5, .top_p = 0.95f, .seed = 42};
  auto generator = Generator::create(*l->context, {.sampling = sampling, .max_new_tokens = 24});
  REQUIRE(generator.ok());
  std::vector<int64_t> first(24), second(24), other(24);
  Recorder seen;
  REQUIRE(generator->generate(prompt, 24, first, &Recorder::record, &seen).ok());
  // Each token among the 5 largest logits of its step.
  for (size_t s = 0; s < seen.tokens.size(); ++s) {
    const std::vector<float>& z = seen.logits[s];
    const auto larger = std::count_if(z.begin(), z.end(), [&](float x) { return x > z[seen.tokens[s]]; });
    CHECK(larger < 5);
  }
  CHECK(first != expected);  // not greedy
  REQUIRE(generator->generate(prompt, 24, second).ok());
  CHECK(second == first);  // each generate starts from the seed
  REQUIRE(generator->set_sampling({.temperature = 1.5f, .top_k = 5, .top_p = 0.95f, .seed = 43}).ok());
  REQUIRE(generator->generate(prompt, 24, other).ok());
  CHECK(other != first);
  // top_k 1 and a vanishing top_p are greedy whatever the temperature.
  REQUIRE(generator->set_sampling({.temperature = 3.0f, .top_k = 1, .seed = 7}).ok());
  REQUIRE(generator->generate(prompt, 20, other).ok());
  CHECK(std::vector<int64_t>(other.begin(), other.begin() + 20) == expected);
  REQUIRE(generator->set_sampling({.temperature = 3.0f, .top_p = 1e-6f, .seed = 7}).ok());
  REQUIRE(generator->generate(prompt, 20, other).ok());
  CHECK(std::vector<int64_t>(other.begin(), other.begin() + 20) == expected);

  // eos: the first occurrence of expected[3] ends it, itself included.
  const size_t first_eos =
      static_cast<size_t>(std::find(expected.begin(), expected.end(), expected[3]) - expected.begin());
  auto with_eos = Generator::create(*l->context, {.eos_token = expected[3], .max_new_tokens = 20});
  REQUIRE(with_eos.ok());
  std::vector<int64_t> tokens(20, -1);
  Result<size_t> count = with_eos->generate(prompt, 20, tokens);
  REQUIRE(count.ok());
  CHECK(*count == first_eos + 1);
  CHECK(with_eos->stats().generated_tokens == first_eos + 1);
  CHECK(with_eos->stats().token_ns.size() == first_eos + 1);
  // The callback stops it after its third token.
  Recorder stopper;
  stopper.stop_after = 3;
  count = with_eos->generate(prompt, 20, tokens, &Recorder::record, &stopper);
  REQUIRE(count.ok());
  CHECK(*count == 3);
}

TEST_CASE("generator: a model without the expected arguments, bad options and bad prompts are refused") {
  auto l = load_lm();
  auto missing = Generator::create(*l->context, {.decode = "step"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("no function 'step'") != std::string::npos);
  auto no_logits = Generator::create(*l->context, {.logits = "scores"});
  REQUIRE_FALSE(no_logits.ok());
  CHECK(no_logits.status().message().find("decode function 'decode' has no output 'scores' for the logits") !=
        std::string::npos);
  auto no_ids = Generator::create(*l->context, {.input_ids = "tokens"});
  REQUIRE_FALSE(no_ids.ok());
  CHECK(no_ids.status().message().find("input 'input_ids' (i64[1,1]) is none of the token ids ('tokens')") !=
        std::string::npos);
  auto by_index = Generator::create(*l->context, {.decode_index = 0, .max_new_tokens = 4});
  REQUIRE_MESSAGE(by_index.ok(), by_index.status().to_string());
  CHECK(!Generator::create(*l->context, {.decode_index = 3}).ok());
  auto bad_sampling = Generator::create(*l->context, {.sampling = {.temperature = -1.0f}});
  CHECK(bad_sampling.status().message().find("temperature is -1") != std::string::npos);
  CHECK(!Generator::create(*l->context, {.sampling = {.top_p = 0.0f}}).ok());

  // A decode function with an input the runner does not know.
  auto odd = load_text(
      "module @odd\n"
      "func @decode(%input_ids: i64[1,1], %mask: f32[1,4], %cache: f32[4] donate) -> (f32[1,4], f32[4]) {\n"
      "  %c = call @relu(%cache) : f32[4]\n  %logits = call @relu(%mask) : f32[1,4]\n  return %logits, "
      "%c\n}\n");
  auto refused = Generator::create(*odd->context);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("decode function 'decode': input 'mask' (f32[1,4]) is none of") !=
        std::string::npos);
  // A prefill whose cache is not donated.
  auto undonated = load_text(
      "module @undonated\n"
      "func @decode(%input_ids: i64[1,1], %cache: f32[4] donate) -> (f32[1,4], f32[4]) {\n"
      "  %c = call @relu(%cache) : f32[4]\n  %logits = call @reshape(%c) : f32[1,4]\n  return %logits, "
      "%c\n}\n"
      "func @prefill_2(%input_ids: i64[1,2], %cache: f32[4]) -> (f32[1,4], f32[4]) {\n"
      "  %c = call @relu(%cache) : f32[4]\n  %logits = call @reshape(%c) : f32[1,4]\n  return %logits, "
      "%c\n}\n");
  refused = Generator::create(*undonated->context);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find(
            "prefill function 'prefill_2': cache 'cache' is f32[4] not donated") != std::string::npos);
  CHECK(Generator::create(*undonated->context, {.prefill = false}).ok());

  auto generator = Generator::create(*l->context, {.max_new_tokens = 4, .max_positions = 32});
  REQUIRE(generator.ok());
  std::vector<int64_t> tokens(8);
  const int64_t prompt[] = {1, 2, 3};
  CHECK(generator->generate({}, 4, tokens).status().message().find("the prompt is empty") !=
        std::string::npos);
  CHECK(generator->generate(prompt, 5, tokens).status().message().find("made for 4") != std::string::npos);
  CHECK(generator->generate(prompt, 4, std::span<int64_t>(tokens.data(), 2))
            .status()
            .message()
            .find("room for 2") != std::string::npos);
  const int64_t outside[] = {1, 64};
  CHECK(generator->generate(outside, 4, tokens)
            .status()
            .message()
            .find("prompt token 1 is 64, outside the vocabulary of 64") != std::string::npos);
  const std::vector<int64_t> long_prompt(30, 1);
  CHECK(generator->generate(long_prompt, 4, tokens)
            .status()
            .message()
            .find("33 positions, the model holds 32") != std::string::npos);
  CHECK(generator->generate(prompt, 0, tokens).value() == 0);
}

}  // namespace
}  // namespace hexir::vm
