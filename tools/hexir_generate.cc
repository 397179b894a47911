// hexir-generate MODEL.hxe (--prompt PROMPT.npy | --prompt-tokens 1,2,3) --max-new-tokens N
//                [--device cpu] [--threads T] [--decode NAME] [--no-prefill]
//                [--temperature T] [--top-k K] [--top-p P] [--seed S] [--eos ID]
//                [--max-positions N] [--logits-dir DIR] [--stats-json FILE]
// Generates tokens from a language model (a decode function with donated
// caches and optionally prefill functions; hexir/generator.h) and prints
// them with tokens/s and the per-token latency (median, p90). --logits-dir
// writes each step's logits as DIR/step_000.npy, ... (f32[1,V]; step 0: the
// prompt's last position) for comparison with another runtime.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "hexir/base/npy.h"
#include "hexir/generator.h"
#include "hexir/vm.h"

namespace hexir {
namespace {

struct Options {
  std::string path;
  std::string device = "cpu";
  uint32_t threads = 0;
  std::string prompt_npy;
  std::string prompt_tokens;
  uint32_t max_new_tokens = 0;
  std::string logits_dir;
  std::string stats_json;
  vm::LoadOptions load;  // the --max-* load limits
  vm::GeneratorOptions generator;
};

const std::string kUsage =
    std::string(
        "usage: hexir-generate MODEL.hxe (--prompt PROMPT.npy | --prompt-tokens 1,2,3) --max-new-tokens N\n"
        "                      [--device cpu] [--threads T] [--decode NAME] [--no-prefill]\n"
        "                      [--temperature T] [--top-k K] [--top-p P] [--seed S] [--eos ID]\n"
        "                      [--max-positions N] [--logits-dir DIR] [--stats-json FILE]\n"
        "  --prompt PROMPT.npy   the prompt's token ids (i64 or i32, any shape: read in order)\n"
        "  --prompt-tokens LIST  the prompt's token ids, comma separated\n"
        "  --decode NAME         the decode function (default 'decode'); prefill functions are every other\n"
        "                        function with an 'input_ids' input, used when one takes the prompt's "
        "length\n"
        "  --no-prefill          the prompt token by token through decode even where a prefill fits\n"
        "  --temperature T       0 (default): greedy; otherwise sampled (with --top-k, --top-p, --seed)\n"
        "  --eos ID              stop after this token\n"
        "  --max-positions N     refuse a prompt and token count past the model's N positions\n"
        "  --logits-dir DIR      each step's logits as DIR/step_000.npy, step_001.npy, ... (f32[1,V])\n"
        "  --stats-json FILE     tokens, timings and memory as JSON\n") +
    cli::kLoadLimitsUsage;

// A float option: a finite decimal number.
bool float_value(cli::Args& args, std::string_view name, float* out) {
  std::string text;
  if (!args.value(name, &text)) return false;
  if (text.empty()) return true;  // reported
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v))
    args.usage_error(std::string(name) + " expects a number, got '" + text + "'");
  else
    *out = static_cast<float>(v);
  return true;
}

std::optional<int> parse_args(cli::Args& args, Options& o) {
  uint64_t eos = 0;
  bool has_eos = false;
  while (args.next()) {
    if (args.flag("--no-prefill")) {
      o.generator.prefill = false;
      continue;
    }
    if (args.number("--eos", &eos)) {
      has_eos = true;
      continue;
    }
    if (args.value("--device", &o.device) || args.value("--decode", &o.generator.decode) ||
        args.value("--prompt", &o.prompt_npy) || args.value("--prompt-tokens", &o.prompt_tokens) ||
        args.value("--logits-dir", &o.logits_dir) || args.value("--stats-json", &o.stats_json) ||
        args.number("--threads", &o.threads, uint32_t{1}, uint32_t{1024}) ||
        args.number("--max-new-tokens", &o.max_new_tokens, uint32_t{1}, uint32_t{1} << 24) ||
        args.number("--top-k", &o.generator.sampling.top_k) ||
        args.number("--seed", &o.generator.sampling.seed) ||
        args.number("--max-positions", &o.generator.max_positions) ||
        float_value(args, "--temperature", &o.generator.sampling.temperature) ||
        float_value(args, "--top-p", &o.generator.sampling.top_p) || args.load_limit(&o.load))
      continue;
    args.input(&o.path);
  }
  if (std::optional<int> rc = args.stop()) return rc;
  if (o.path.empty()) return args.usage_error("no model file");
  if (o.prompt_npy.empty() == o.prompt_tokens.empty())
    return args.usage_error("give the prompt with --prompt FILE.npy or --prompt-tokens 1,2,3 (one of them)");
  if (o.max_new_tokens == 0) return args.usage_error("--max-new-tokens N is required");
  if (has_eos) {
    if (eos > static_cast<uint64_t>(INT64_MAX)) return args.usage_error("--eos is past the i64 range");
    o.generator.eos_token = static_cast<int64_t>(eos);
  }
  o.generator.max_new_tokens = o.max_new_tokens;
  return std::nullopt;
}

Result<std::vector<int64_t>> read_prompt(const Options& o) {
  std::vector<int64_t> prompt;
  if (!o.prompt_tokens.empty()) {
    size_t at = 0;
    while (at <= o.prompt_tokens.size()) {
      const size_t comma = std::min(o.prompt_tokens.find(',', at), o.prompt_tokens.size());
      const std::optional<uint64_t> v = cli::parse_uint(
          std::string_view(o.prompt_tokens).substr(at, comma - at), static_cast<uint64_t>(INT64_MAX));
      if (!v)
        return invalid_argument("--prompt-tokens: '" + o.prompt_tokens +
                                "' is not a list of token ids like 1,2,3");
      prompt.push_back(static_cast<int64_t>(*v));
      at = comma + 1;
    }
    return prompt;
  }
  HEXIR_ASSIGN_OR_RETURN(NpyArray array, read_npy(o.prompt_npy));
  if (array.type.dtype == DType::kI64) {
    prompt.resize(array.data.size() / 8);
    std::memcpy(prompt.data(), array.data.data(), prompt.size() * 8);
  } else if (array.type.dtype == DType::kI32) {
    for (size_t i = 0; i < array.data.size() / 4; ++i) {
      int32_t v;
      std::memcpy(&v, array.data.data() + 4 * i, 4);
      prompt.push_back(v);
    }
  } else {
    return invalid_argument(o.prompt_npy + ": the prompt is " + array.type.to_string() +
                            " (expected i64 or i32 token ids)");
  }
  return prompt;
}

// The per-token latency at quantile q (0.5: median) of `ns`, in milliseconds.
double quantile_ms(std::vector<uint64_t> ns, double q) {
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  const size_t at =
      std::min(ns.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(ns.size())) - 1));
  return static_cast<double>(ns[at]) / 1e6;
}

// --logits-dir: every step's logits kept in memory sized at start (the dump
// happens after the generation, so it does not change its timings).
struct LogitsKeeper {
  std::vector<float> values;
  size_t vocab = 0;
  size_t steps = 0;
  static bool keep(void* self, size_t index, int64_t, std::span<const float> logits) {
    auto* k = static_cast<LogitsKeeper*>(self);
    std::memcpy(k->values.data() + index * k->vocab, logits.data(), k->vocab * sizeof(float));
    k->steps = index + 1;
    return true;
  }
};

int run(int argc, char** argv) {
  Options o;
  cli::Args args("hexir-generate", kUsage, argc, argv);
  if (std::optional<int> rc = parse_args(args, o)) return *rc;
  Result<std::vector<int64_t>> prompt = read_prompt(o);
  if (!prompt.ok()) return args.fail(prompt.status().message());

  Result<vm::Module> module = vm::Module::load_file(o.path, o.load);
  if (!module.ok()) return args.fail(module.status().message());
  Result<std::unique_ptr<hal::Device>> device =
      hal::create_device(o.device, {.threads = static_cast<int>(o.threads)});
  if (!device.ok()) return args.fail(device.status().message());
  Result<vm::Program> program = vm::Program::prepare(*module, **device);
  if (!program.ok()) return args.fail(program.status().message());
  Result<vm::Context> context = vm::Context::create(*program);
  if (!context.ok()) return args.fail(context.status().message());
  Result<vm::Generator> generator = vm::Generator::create(*context, o.generator);
  if (!generator.ok()) return args.fail(generator.status().message());

  LogitsKeeper keeper;
  if (!o.logits_dir.empty()) {
    keeper.vocab = generator->vocab_size();
    keeper.values.resize(static_cast<size_t>(o.max_new_tokens) * keeper.vocab);
  }
  std::vector<int64_t> tokens(o.max_new_tokens);
  const uint64_t allocations_before = (*device)->counters().allocations;
  Result<size_t> count = generator->generate(*prompt, o.max_new_tokens, tokens,
                                             o.logits_dir.empty() ? nullptr : &LogitsKeeper::keep, &keeper);
  if (!count.ok()) return args.fail(count.status().message());
  const uint64_t generate_allocations = (*device)->counters().allocations - allocations_before;
  tokens.resize(*count);
  const vm::GenerationStats& stats = generator->stats();

  std::string list;
  for (int64_t t : tokens) list += (list.empty() ? "" : ",") + std::to_string(t);
  std::printf("tokens: %s\n", list.c_str());
  const std::string via =
      stats.prefill_function >= 0
          ? "prefill function '" + module->function(static_cast<size_t>(stats.prefill_function)).name + "'"
          : "decode, token by token";
  std::printf("prompt: %" PRIu64 " tokens through %s, %.3f ms to the first token\n", stats.prompt_tokens,
              via.c_str(), static_cast<double>(stats.prefill_ns) / 1e6);
  const std::vector<uint64_t> decode_ns(stats.token_ns.begin() + (stats.token_ns.empty() ? 0 : 1),
                                        stats.token_ns.end());
  std::printf("generated: %" PRIu64 " tokens, %.1f tokens/s; per-token latency median %.3f ms, p90 %.3f ms\n",
              stats.generated_tokens, stats.tokens_per_second, quantile_ms(decode_ns, 0.5),
              quantile_ms(decode_ns, 0.9));
  std::printf("memory: prepared weights %" PRIu64 " bytes, context %" PRIu64 " bytes, generator %" PRIu64
              " bytes; device allocations during generation: %" PRIu64 "\n",
              program->prepared_bytes(), context->device_bytes(), generator->device_bytes(),
              generate_allocations);

  if (!o.logits_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.logits_dir, ec);
    if (ec) return args.fail("cannot create '" + o.logits_dir + "': " + ec.message());
    const TensorType type{DType::kF32, {1, static_cast<int64_t>(keeper.vocab)}};
    for (size_t s = 0; s < keeper.steps; ++s) {
      char name[32];
      std::snprintf(name, sizeof name, "step_%03zu.npy", s);
      const auto* bytes = reinterpret_cast<const uint8_t*>(keeper.values.data() + s * keeper.vocab);
      if (Status w = write_npy((std::filesystem::path(o.logits_dir) / name).string(), type,
                               {bytes, keeper.vocab * sizeof(float)});
          !w.ok())
        return args.fail(w.message());
    }
    std::printf("logits: %zu steps -> %s/step_000.npy ...\n", keeper.steps, o.logits_dir.c_str());
  }

  if (!o.stats_json.empty()) {
    cli::JsonWriter j;
    j.begin_object();
    j.field("file", o.path);
    j.field("device", std::string((*device)->name()));
    j.field("prompt_tokens", stats.prompt_tokens);
    j.field("prefill_function", stats.prefill_function >= 0
                                    ? module->function(static_cast<size_t>(stats.prefill_function)).name
                                    : std::string());
    j.begin_array("tokens");
    for (int64_t t : tokens) j.value(t);
    j.end_array();
    j.field("prefill_ms", static_cast<double>(stats.prefill_ns) / 1e6, 4);
    j.field("decode_ms", static_cast<double>(stats.decode_ns) / 1e6, 4);
    j.field("tokens_per_second", stats.tokens_per_second, 2);
    j.field("token_ms_median", quantile_ms(decode_ns, 0.5), 4);
    j.field("token_ms_p90", quantile_ms(decode_ns, 0.9), 4);
    j.begin_array("token_ms");
    for (uint64_t ns : stats.token_ns) j.value(static_cast<double>(ns) / 1e6, 4);
    j.end_array();
    j.field("prepared_bytes", program->prepared_bytes());
    j.field("context_device_bytes", context->device_bytes());
    j.field("generator_device_bytes", generator->device_bytes());
    j.field("generate_device_allocations", generate_allocations);
    j.end_object();
    if (Status s = cli::write_file(o.stats_json, j.text() + "\n"); !s.ok()) return args.fail(s.message());
  }
  return 0;
}

}  // namespace
}  // namespace hexir

int main(int argc, char** argv) {
  try {
    return hexir::run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("hexir-generate: out of memory\n", stderr);
    return hexir::cli::kExitFailure;
  }
}
