// A language model decoding in place: the generation runner over a Context.
//
//   auto generator = hexir::vm::Generator::create(*context, {.max_new_tokens = 64});
//   std::vector<int64_t> tokens(64);
//   auto count = generator->generate(prompt, 64, tokens);      // no allocation per token
//   generator->stats().tokens_per_second;
//
// The module holds a decode function (one token in, the logits of the next
// out) and, optionally, prefill functions taking a whole prompt of a fixed
// length; a module compiled from several ONNX files (prefill_32,
// prefill_128, decode) is one. Each function's inputs are:
//  - the token ids, `input_ids` (i64 or i32; [1,1] or [1] for decode, [1,L]
//    or [L] for a prefill of L tokens);
//  - optionally the position, `pos` (i64 or i32; [] or [1]: the first
//    position of the call, or [1,L] / [L]: one per token). A function
//    without it knows where it starts (a prefill starts at 0);
//  - the caches: every DONATED input of the decode function, each written as
//    the output it is donated to. A prefill has the same caches (by name and
//    type), donated too.
// Its outputs are the logits, `logits` (f32, f16 or bf16; [1,1,V] or [1,V],
// or for a prefill [1,L,V], of which the last row is read), the caches, and
// anything else (written to buffers of the runner's, never read).
//
// Generator::create allocates everything once through the context's device:
// the caches, the token, position and logits buffers, a buffer for every
// other output, the sampler's scratch and the per-token timings. generate()
// then zeroes the caches, runs the prompt (through the prefill function of
// its length, or token by token through decode when none fits), then one
// decode step per token, each passing the caches as donated inputs and as
// their own outputs (the same buffers): per token no allocation, no copy of
// a cache, no upload of anything but the token and position (none on the
// cpu, where they are written in place).
//
// Ownership: the Generator borrows the Context (it must outlive the
// Generator; moving the Context handle is fine) and holds it for the whole
// of generate(): another thread's invoke on it meanwhile is refused. Not
// thread-safe; one per context. Nothing here throws.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "hexir/base/status.h"
#include "hexir/vm.h"

namespace hexir::vm {

// How the next token is picked from the logits. Deterministic: the same
// logits, options and seed give the same tokens.
struct SamplingOptions {
  // 0: greedy, the most likely token (the lowest index among equal logits).
  // Otherwise softmax(logits / temperature) over the candidates left by
  // top_k and top_p, sampled with the runner's own generator (splitmix64),
  // restarted from `seed` at the start of each generate().
  float temperature = 0.0f;
  uint32_t top_k = 0;  // the k most likely tokens only (0: all)
  // The fewest most likely tokens whose probabilities reach top_p, in (0, 1]
  // (1: all).
  float top_p = 1.0f;
  uint64_t seed = 0;
};

struct GeneratorOptions {
  // The decode function: by index when decode_index >= 0, else by name.
  std::string decode = "decode";
  int64_t decode_index = -1;
  std::string input_ids = "input_ids";
  std::string position = "pos";  // absent from a function: it derives the position itself
  std::string logits = "logits";
  // Use a prefill function when one takes the prompt's length (every other
  // function with an input named input_ids is one); false: always token by
  // token through decode.
  bool prefill = true;
  SamplingOptions sampling;
  int64_t eos_token = -1;  // generation stops after this token (included); -1: none
  // The most tokens one generate() may produce: the per-token timings are
  // sized for it at create.
  uint32_t max_new_tokens = 256;
  // Positions the model holds (its cache length): a prompt and token count
  // that would go past it is refused. 0: not checked (the model's own
  // behaviour past its cache applies).
  uint64_t max_positions = 0;
};

struct GenerationStats {
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  // The function that ran the whole prompt in one invoke; -1: token by token through decode.
  int64_t prefill_function = -1;
  uint64_t prefill_ns = 0;  // from the start to the first token (the prompt's invokes and the sampling)
  uint64_t decode_ns = 0;   // the decode steps after it, together
  // Decode steps per second of decode_ns (generated_tokens - 1 of them); 0 without any.
  double tokens_per_second = 0;
  // Per generated token (generated_tokens values): [0] is prefill_ns, [i]
  // the decode step that produced token i (its invoke and sampling). Valid
  // until the next generate() or the Generator goes.
  std::span<const uint64_t> token_ns;
};

// Called after each token with its index (0: the prompt's), the token and
// the logits it was sampled from (V floats, valid during the call only).
// Returning false stops the generation after this token.
using TokenCallback = bool (*)(void* user, size_t index, int64_t token, std::span<const float> logits);

class GeneratorImpl;

class Generator {
 public:
  // Checks the functions as described above and allocates everything;
  // a function that does not fit is refused naming the input or output.
  static Result<Generator> create(Context& context, const GeneratorOptions& options = {});
  Generator(Generator&&) noexcept;
  Generator& operator=(Generator&&) noexcept;
  ~Generator();

  // A new sequence: the caches zeroed, `prompt` (at least one token) at
  // positions 0.., then up to `max_new_tokens` tokens (at most
  // GeneratorOptions::max_new_tokens) into `tokens` (at least that many),
  // stopping early at the eos token or when `on_token` returns false.
  // Returns how many tokens were written. Allocates nothing on success.
  Result<size_t> generate(std::span<const int64_t> prompt, size_t max_new_tokens, std::span<int64_t> tokens,
                          TokenCallback on_token = nullptr, void* user = nullptr);
  // From the next generate() on (checked: temperature >= 0, top_p in (0, 1]).
  Status set_sampling(const SamplingOptions& sampling);

  // The last generate()'s.
  const GenerationStats& stats() const;
  size_t vocab_size() const;
  size_t decode_function() const;
  // The prefill functions found, by prompt length: the function for a prompt
  // of `length` tokens, or -1.
  int64_t prefill_function(size_t length) const;
  // Device bytes the runner allocated (caches, token, position and logits
  // buffers, other outputs), besides the context's own.
  uint64_t device_bytes() const;

 private:
  explicit Generator(std::unique_ptr<GeneratorImpl> impl);
  std::unique_ptr<GeneratorImpl> impl_;
};

}  // namespace hexir::vm
