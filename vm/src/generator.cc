// The generation runner (hexir/generator.h): every function it calls bound
// once at create to buffers of its own, so that generate() only writes a
// token and a position, invokes, and samples from the logits.
#include "hexir/generator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "hexir/base/half.h"
#include "vm_impl.h"

namespace hexir::vm {
namespace {

bool is_token_dtype(DType d) { return d == DType::kI64 || d == DType::kI32; }
bool is_logits_dtype(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }

// The token count of an [L] or [1,L] input; 0 for any other shape.
int64_t token_count(const TensorType& t) {
  if (t.dims.size() == 1) return t.dims[0];
  if (t.dims.size() == 2 && t.dims[0] == 1) return t.dims[1];
  return 0;
}

// splitmix64 (Steele, Lea, Flood 2014): the runner's own generator, no global state.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Status check_sampling(const SamplingOptions& s) {
  if (!(s.temperature >= 0.0f) || std::isinf(s.temperature))
    return invalid_argument("sampling: temperature is " + std::to_string(s.temperature) +
                            " (0: greedy, or a positive finite value)");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f))
    return invalid_argument("sampling: top_p is " + std::to_string(s.top_p) + " (in (0, 1]; 1: every token)");
  return ok_status();
}

std::string input_names(const FunctionSignature& sig) {
  std::string names;
  for (const TensorSignature& in : sig.inputs) names += (names.empty() ? "'" : ", '") + in.name + "'";
  return names.empty() ? "none" : names;
}

}  // namespace

// One function as the runner calls it: its argument lists, bound to the
// runner's buffers at create.
struct GeneratorBinding {
  size_t function = 0;
  size_t length = 0;  // tokens per invoke
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  DType ids_dtype = DType::kI64;
  bool has_position = false;
  DType position_dtype = DType::kI64;
  uint64_t position_count = 0;  // 1 (the first position) or `length` (one per token)
  DType logits_dtype = DType::kF32;
  uint64_t logits_offset = 0;  // bytes to the last row's logits
  // While binding (create only): per input and output, which buffer.
  std::vector<int> input_cache;   // decode cache index, or -1
  std::vector<int> output_cache;  // decode cache index, or -1
  int ids_input = -1, position_input = -1, logits_output = -1;
};

class GeneratorImpl {
 public:
  GeneratorImpl() = default;
  GeneratorImpl(const GeneratorImpl&) = delete;
  GeneratorImpl& operator=(const GeneratorImpl&) = delete;
  ~GeneratorImpl() {
    for (hal::Buffer& b : buffers) device->release(b);
  }

  Status bind(size_t function, bool decode, GeneratorBinding& b);
  Status allocate_buffers();
  Result<hal::Buffer> allocate(uint64_t bytes);
  Status write_tokens(const GeneratorBinding& b, const int64_t* tokens, int64_t position);
  Result<std::span<const float>> read_logits(const GeneratorBinding& b);
  int64_t sample(std::span<const float> logits);
  Result<size_t> generate(std::span<const int64_t> prompt, size_t max_new_tokens, std::span<int64_t> tokens,
                          TokenCallback on_token, void* user);

  ContextImpl* context = nullptr;
  hal::Device* device = nullptr;
  const Module* module = nullptr;
  GeneratorOptions options;
  std::vector<hal::Buffer> buffers;  // every allocation, released with the runner
  uint64_t device_bytes = 0;

  // The decode function's caches (its donated inputs), by decode input index.
  std::vector<size_t> cache_inputs;
  std::vector<hal::Buffer> caches;
  hal::Buffer ids, position, logits;
  GeneratorBinding decode;
  std::vector<GeneratorBinding> prefills;
  size_t vocab = 0;

  std::vector<uint8_t> staging;  // token, position and logits bytes for a device the host cannot address
  std::vector<float> logits_f32;
  std::vector<float> scaled;
  std::vector<double> probabilities;
  std::vector<uint32_t> order;
  std::vector<uint64_t> token_ns;
  GenerationStats stats;
  uint64_t random_state = 0;
};

// Checks one function's inputs and outputs against the runner's rules and
// records where each goes; the buffers are attached in allocate_buffers.
Status GeneratorImpl::bind(size_t function, bool is_decode, GeneratorBinding& b) {
  const FunctionSignature& sig = module->function(function);
  const std::string what = std::string(is_decode ? "decode" : "prefill") + " function '" + sig.name + "'";
  b.function = function;
  b.input_cache.assign(sig.inputs.size(), -1);
  b.output_cache.assign(sig.outputs.size(), -1);
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TensorSignature& in = sig.inputs[i];
    if (in.name == options.input_ids) {
      b.length = static_cast<size_t>(std::max<int64_t>(token_count(in.type), 0));
      if (!is_token_dtype(in.type.dtype) || b.length == 0 || (is_decode && b.length != 1))
        return invalid_argument(
            what + ": its token ids '" + in.name + "' are " + in.type.to_string() +
            (is_decode ? " (expected i64[1,1], i64[1] or i32)" : " (expected i64[1,L], i64[L] or i32)"));
      b.ids_input = static_cast<int>(i);
      b.ids_dtype = in.type.dtype;
      continue;
    }
    if (in.name == options.position) {
      b.position_input = static_cast<int>(i);
      b.position_dtype = in.type.dtype;
      uint64_t count = 1;
      for (int64_t d : in.type.dims) count *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
      b.position_count = count;
      continue;
    }
    if (is_decode && in.donated_to >= 0) {
      const TensorSignature& out = sig.outputs[static_cast<size_t>(in.donated_to)];
      if (!out.type.same_layout(in.type))
        return invalid_argument(what + ": cache '" + in.name + "' (" + in.type.to_string() +
                                ") is donated to output " + std::to_string(in.donated_to) + " of type " +
                                out.type.to_string());
      b.input_cache[i] = static_cast<int>(cache_inputs.size());
      b.output_cache[static_cast<size_t>(in.donated_to)] = static_cast<int>(cache_inputs.size());
      cache_inputs.push_back(i);
      continue;
    }
    if (!is_decode) {
      const FunctionSignature& dec = module->function(decode.function);
      for (size_t c = 0; c < cache_inputs.size(); ++c) {
        const TensorSignature& cache = dec.inputs[cache_inputs[c]];
        if (cache.name != in.name) continue;
        if (!cache.type.same_layout(in.type) || in.donated_to < 0)
          return invalid_argument(what + ": cache '" + in.name + "' is " + in.type.to_string() +
                                  (in.donated_to < 0 ? " not donated" : "") + ", the decode function's " +
                                  cache.type.to_string() + " donated");
        b.input_cache[i] = static_cast<int>(c);
        b.output_cache[static_cast<size_t>(in.donated_to)] = static_cast<int>(c);
      }
      if (b.input_cache[i] >= 0) continue;
    }
    return invalid_argument(what + ": input '" + in.name + "' (" + in.type.to_string() +
                            ") is none of the token ids ('" + options.input_ids + "'), the position ('" +
                            options.position + "') or " +
                            (is_decode ? "a donated cache" : "a cache of the decode function"));
  }
  if (b.ids_input < 0)
    return invalid_argument(what + " has no input '" + options.input_ids +
                            "' for the token ids (its inputs: " + input_names(sig) + ")");
  if (b.position_input >= 0) {
    const TensorType& type = sig.inputs[static_cast<size_t>(b.position_input)].type;
    const bool one = type.dims.empty() || (type.dims.size() <= 2 && b.position_count == 1);
    const bool per_token = token_count(type) == static_cast<int64_t>(b.length);
    if (!is_token_dtype(type.dtype) || !(one || per_token))
      return invalid_argument(what + ": its position '" + options.position + "' is " + type.to_string() +
                              " (expected i64[] or i64[1] (the first position), i64[1," +
                              std::to_string(b.length) + "] (one per token), or i32)");
    if (one) b.position_count = 1;
  }
  if (!is_decode)
    for (size_t c = 0; c < cache_inputs.size(); ++c)
      if (std::find(b.input_cache.begin(), b.input_cache.end(), static_cast<int>(c)) == b.input_cache.end())
        return invalid_argument(what + " has no cache '" +
                                module->function(decode.function).inputs[cache_inputs[c]].name +
                                "' (the decode function's donated inputs are the caches)");
  for (size_t j = 0; j < sig.outputs.size(); ++j) {
    const TensorSignature& out = sig.outputs[j];
    if (out.name != options.logits) continue;
    b.logits_output = static_cast<int>(j);
    b.logits_dtype = out.type.dtype;
    const std::vector<int64_t>& d = out.type.dims;
    const int64_t v = d.empty() ? 0 : d.back();
    const bool last_only = (d.size() == 2 && d[0] == 1) || (d.size() == 3 && d[0] == 1 && d[1] == 1);
    const bool every_row = d.size() == 3 && d[0] == 1 && d[1] == static_cast<int64_t>(b.length);
    if (!is_logits_dtype(out.type.dtype) || v <= 0 || !(last_only || every_row) || out.type.has_bound())
      return invalid_argument(what + ": its logits '" + out.name + "' are " + out.type.to_string() +
                              " (expected f32, f16 or bf16 [1,V] or [1,1,V]" +
                              (is_decode ? std::string() : ", or [1," + std::to_string(b.length) + ",V]") +
                              ")");
    if (vocab != 0 && static_cast<size_t>(v) != vocab)
      return invalid_argument(what + ": its logits '" + out.name + "' are " + out.type.to_string() +
                              ", the decode function's vocabulary is " + std::to_string(vocab));
    vocab = static_cast<size_t>(v);
    b.logits_offset = every_row ? (b.length - 1) * vocab * dtype_size(out.type.dtype) : 0;
  }
  if (b.logits_output < 0) {
    std::string names;
    for (const TensorSignature& out : sig.outputs) names += (names.empty() ? "'" : ", '") + out.name + "'";
    return invalid_argument(what + " has no output '" + options.logits + "' for the logits (its outputs: " +
                            (names.empty() ? std::string("none") : names) + ")");
  }
  return ok_status();
}

Result<hal::Buffer> GeneratorImpl::allocate(uint64_t bytes) {
  HEXIR_ASSIGN_OR_RETURN(hal::Buffer buffer,
                         device->allocate(std::max<uint64_t>(bytes, 1), hal::MemoryType::kDeviceLocal,
                                          hal::BufferUsage::kExternal, format::kConstantAlignment));
  buffers.push_back(buffer);
  device_bytes += buffer.size;
  return buffer;
}

// The caches, one token/position/logits buffer for every function, a buffer
// per other output, and the argument lists pointing at them.
Status GeneratorImpl::allocate_buffers() {
  const FunctionSignature& dec = module->function(decode.function);
  for (size_t input : cache_inputs) {
    HEXIR_ASSIGN_OR_RETURN(hal::Buffer cache, allocate(dec.inputs[input].byte_size));
    caches.push_back(cache);
  }
  uint64_t ids_bytes = 0, position_bytes = 0, logits_bytes = 0;
  std::vector<GeneratorBinding*> all{&decode};
  for (GeneratorBinding& b : prefills) all.push_back(&b);
  for (const GeneratorBinding* b : all) {
    const FunctionSignature& sig = module->function(b->function);
    ids_bytes = std::max(ids_bytes, sig.inputs[static_cast<size_t>(b->ids_input)].byte_size);
    if (b->position_input >= 0)
      position_bytes = std::max(position_bytes, sig.inputs[static_cast<size_t>(b->position_input)].byte_size);
    logits_bytes = std::max(logits_bytes, sig.outputs[static_cast<size_t>(b->logits_output)].byte_size);
  }
  HEXIR_ASSIGN_OR_RETURN(ids, allocate(ids_bytes));
  HEXIR_ASSIGN_OR_RETURN(position, allocate(position_bytes));
  HEXIR_ASSIGN_OR_RETURN(logits, allocate(logits_bytes));
  auto address = [](const hal::Buffer& b) { return device_address(b); };
  for (GeneratorBinding* b : all) {
    const FunctionSignature& sig = module->function(b->function);
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      const TensorSignature& in = sig.inputs[i];
      void* data = static_cast<int>(i) == b->ids_input ? address(ids)
                   : static_cast<int>(i) == b->position_input
                       ? address(position)
                       : address(caches[static_cast<size_t>(b->input_cache[i])]);
      b->inputs.push_back({data, in.byte_size, in.type});
    }
    for (size_t j = 0; j < sig.outputs.size(); ++j) {
      const TensorSignature& out = sig.outputs[j];
      void* data = nullptr;
      if (static_cast<int>(j) == b->logits_output) {
        data = address(logits);
      } else if (b->output_cache[j] >= 0) {
        data = address(caches[static_cast<size_t>(b->output_cache[j])]);  // the donated input itself
      } else {
        HEXIR_ASSIGN_OR_RETURN(hal::Buffer other, allocate(out.byte_size));
        data = address(other);
      }
      b->outputs.push_back({data, out.byte_size, out.type});
    }
  }
  if (ids.host_ptr == nullptr || position.host_ptr == nullptr || logits.host_ptr == nullptr)
    staging.resize(std::max({ids_bytes, position_bytes, logits_bytes}));
  logits_f32.resize(vocab);
  scaled.resize(vocab);
  probabilities.resize(vocab);
  order.resize(vocab);
  token_ns.resize(options.max_new_tokens);
  return ok_status();
}

namespace {

// `count` values `first`, `first + 1`, ... or tokens[0..count) as i64 or i32 at `out`.
void store_integers(void* out, DType dtype, const int64_t* tokens, int64_t first, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    const int64_t v = tokens ? tokens[i] : first + static_cast<int64_t>(i);
    if (dtype == DType::kI64)
      static_cast<int64_t*>(out)[i] = v;
    else
      static_cast<int32_t*>(out)[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

// The tokens of one invoke (b.length of them) and, when the function takes
// it, the position: in place where the host addresses the buffers (the
// cpu), otherwise through the staging bytes (an upload of a few bytes).
Status GeneratorImpl::write_tokens(const GeneratorBinding& b, const int64_t* tokens, int64_t first_position) {
  const uint64_t ids_bytes = b.length * dtype_size(b.ids_dtype);
  if (ids.host_ptr) {
    store_integers(ids.host_ptr, b.ids_dtype, tokens, 0, b.length);
  } else {
    store_integers(staging.data(), b.ids_dtype, tokens, 0, b.length);
    HEXIR_RETURN_IF_ERROR(device->write(ids, 0, staging.data(), ids_bytes));
  }
  if (!b.has_position) return ok_status();
  if (position.host_ptr) {
    store_integers(position.host_ptr, b.position_dtype, nullptr, first_position, b.position_count);
    return ok_status();
  }
  store_integers(staging.data(), b.position_dtype, nullptr, first_position, b.position_count);
  return device->write(position, 0, staging.data(), b.position_count * dtype_size(b.position_dtype));
}

// The last position's logits as floats: in place for f32 on the cpu,
// otherwise converted into logits_f32.
Result<std::span<const float>> GeneratorImpl::read_logits(const GeneratorBinding& b) {
  const uint64_t bytes = vocab * dtype_size(b.logits_dtype);
  const uint8_t* src = nullptr;
  if (logits.host_ptr) {
    src = static_cast<const uint8_t*>(logits.host_ptr) + b.logits_offset;
  } else {
    HEXIR_RETURN_IF_ERROR(device->read(logits, b.logits_offset, staging.data(), bytes));
    src = staging.data();
  }
  if (b.logits_dtype == DType::kF32) {
    if (logits.host_ptr) return std::span<const float>(reinterpret_cast<const float*>(src), vocab);
    std::memcpy(logits_f32.data(), src, bytes);
  } else {
    for (size_t i = 0; i < vocab; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      logits_f32[i] = b.logits_dtype == DType::kF16 ? half_bits_to_float(h)
                                                    : std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
    }
  }
  return std::span<const float>(logits_f32);
}

// Greedy, or temperature / top-k / top-p from the runner's generator
// (SamplingOptions). The candidates are ordered by logit, then index; with
// neither top-k nor top-p they stay in index order (nothing is sorted).
int64_t GeneratorImpl::sample(std::span<const float> l) {
  const SamplingOptions& s = options.sampling;
  const size_t v = l.size();
  if (s.temperature == 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < v; ++i)
      if (l[i] > l[best] || (std::isnan(l[best]) && !std::isnan(l[i]))) best = i;
    return static_cast<int64_t>(best);
  }
  float* z = scaled.data();
  for (size_t i = 0; i < v; ++i)
    z[i] = std::isnan(l[i]) ? -std::numeric_limits<float>::infinity() : l[i] / s.temperature;
  uint32_t* idx = order.data();
  std::iota(idx, idx + v, 0u);
  auto before = [z](uint32_t a, uint32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  size_t n = v;
  bool sorted = false;
  if (s.top_k > 0 && s.top_k < v) {
    n = s.top_k;
    std::nth_element(idx, idx + n - 1, idx + v, before);
    std::sort(idx, idx + n, before);
    sorted = true;
  }
  if (s.top_p < 1.0f && !sorted) std::sort(idx, idx + n, before);
  float most = z[idx[0]];
  for (size_t j = 1; j < n; ++j) most = std::max(most, z[idx[j]]);
  if (most == -std::numeric_limits<float>::infinity()) return idx[0];
  double* p = probabilities.data();
  double total = 0;
  for (size_t j = 0; j < n; ++j) total += p[j] = std::exp(static_cast<double>(z[idx[j]]) - most);
  if (s.top_p < 1.0f) {
    double kept = 0;
    size_t keep = n;
    for (size_t j = 0; j < n; ++j) {
      kept += p[j];
      if (kept >= static_cast<double>(s.top_p) * total) {
        keep = j + 1;
        break;
      }
    }
    n = keep;
    total = kept;
  }
  const double u = static_cast<double>(next_random(random_state) >> 11) * 0x1.0p-53 * total;
  double sum = 0;
  for (size_t j = 0; j < n; ++j) {
    sum += p[j];
    if (u < sum) return idx[j];
  }
  return idx[n - 1];
}

Result<size_t> GeneratorImpl::generate(std::span<const int64_t> prompt, size_t max_new_tokens,
                                       std::span<int64_t> tokens, TokenCallback on_token, void* user) {
  if (prompt.empty()) return invalid_argument("generate: the prompt is empty (at least one token)");
  if (max_new_tokens > options.max_new_tokens)
    return invalid_argument("generate: " + std::to_string(max_new_tokens) +
                            " new tokens asked, the runner was made for " +
                            std::to_string(options.max_new_tokens) + " (GeneratorOptions::max_new_tokens)");
  if (tokens.size() < max_new_tokens)
    return invalid_argument("generate: room for " + std::to_string(tokens.size()) + " tokens, " +
                            std::to_string(max_new_tokens) + " asked");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || static_cast<uint64_t>(prompt[i]) >= vocab)
      return invalid_argument("generate: prompt token " + std::to_string(i) + " is " +
                              std::to_string(prompt[i]) + ", outside the vocabulary of " +
                              std::to_string(vocab));
  const uint64_t positions = prompt.size() + (max_new_tokens > 0 ? max_new_tokens - 1 : 0);
  if (options.max_positions > 0 && positions > options.max_positions)
    return invalid_argument("generate: a prompt of " + std::to_string(prompt.size()) + " tokens and " +
                            std::to_string(max_new_tokens) + " new ones take " + std::to_string(positions) +
                            " positions, the model holds " + std::to_string(options.max_positions));
  stats = GenerationStats{};
  stats.prompt_tokens = prompt.size();
  if (max_new_tokens == 0) return size_t{0};
  ContextHold hold(*context);
  if (!hold.held()) return ContextImpl::busy("Generator::generate");
  random_state = options.sampling.seed;

  for (const hal::Buffer& cache : caches) {  // a new sequence
    if (cache.host_ptr) {
      std::memset(cache.host_ptr, 0, cache.size);
    } else {
      const uint8_t zero = 0;
      HEXIR_RETURN_IF_ERROR(device->fill(cache, 0, cache.size, &zero, 1));
    }
  }
  const GeneratorBinding* prefill = nullptr;
  for (const GeneratorBinding& b : prefills)
    if (b.length == prompt.size()) prefill = &b;
  auto step = [&](const GeneratorBinding& b, const int64_t* in, int64_t pos, const char* what) -> Status {
    HEXIR_RETURN_IF_ERROR(write_tokens(b, in, pos));
    Status s = context->invoke(b.function, b.inputs, b.outputs);
    if (!s.ok()) return s.annotate(std::string("generate: ") + what + " at position " + std::to_string(pos));
    return ok_status();
  };

  uint64_t start = now_ns();
  if (prefill) {
    HEXIR_RETURN_IF_ERROR(step(*prefill, prompt.data(), 0, "the prefill"));
    stats.prefill_function = static_cast<int64_t>(prefill->function);
  } else {
    for (size_t i = 0; i < prompt.size(); ++i)
      HEXIR_RETURN_IF_ERROR(step(decode, &prompt[i], static_cast<int64_t>(i), "the prompt through decode"));
  }
  const GeneratorBinding* last = prefill ? prefill : &decode;
  size_t count = 0;
  int64_t position = static_cast<int64_t>(prompt.size());
  while (true) {
    HEXIR_ASSIGN_OR_RETURN(std::span<const float> values, read_logits(*last));
    const int64_t token = sample(values);
    const uint64_t end = now_ns();
    tokens[count] = token;
    token_ns[count] = end - start;
    if (count == 0)
      stats.prefill_ns = end - start;
    else
      stats.decode_ns += end - start;
    ++count;
    stats.generated_tokens = count;
    const bool go_on = on_token == nullptr || on_token(user, count - 1, token, values);
    if (!go_on || count == max_new_tokens || token == options.eos_token) break;
    start = now_ns();
    HEXIR_RETURN_IF_ERROR(step(decode, &tokens[count - 1], position, "a decode step"));
    ++position;
    last = &decode;
  }
  stats.token_ns = std::span<const uint64_t>(token_ns.data(), count);
  if (count > 1 && stats.decode_ns > 0)
    stats.tokens_per_second = static_cast<double>(count - 1) * 1e9 / static_cast<double>(stats.decode_ns);
  return count;
}

Generator::Generator(std::unique_ptr<GeneratorImpl> impl) : impl_(std::move(impl)) {}
Generator::Generator(Generator&&) noexcept = default;
Generator& Generator::operator=(Generator&&) noexcept = default;
Generator::~Generator() = default;

Result<Generator> Generator::create(Context& context, const GeneratorOptions& options) {
  if (!context.impl_) return failed_precondition("Generator::create: the Context is a moved-from handle");
  HEXIR_RETURN_IF_ERROR(check_sampling(options.sampling));
  auto g = std::make_unique<GeneratorImpl>();
  g->context = context.impl_.get();
  g->device = g->context->program->device;
  g->module = g->context->program->module;
  g->options = options;
  const Module& module = *g->module;
  if (options.decode_index >= 0) {
    if (static_cast<uint64_t>(options.decode_index) >= module.function_count())
      return invalid_argument("Generator::create: decode function index " +
                              std::to_string(options.decode_index) + " out of range (the module has " +
                              std::to_string(module.function_count()) + ")");
    g->decode.function = static_cast<size_t>(options.decode_index);
  } else {
    HEXIR_ASSIGN_OR_RETURN(g->decode.function, module.find_function(options.decode));
  }
  HEXIR_RETURN_IF_ERROR(g->bind(g->decode.function, true, g->decode));
  g->decode.has_position = g->decode.position_input >= 0;
  if (options.prefill) {
    for (size_t f = 0; f < module.function_count(); ++f) {
      if (f == g->decode.function) continue;
      bool takes_ids = false;
      for (const TensorSignature& in : module.function(f).inputs) takes_ids |= in.name == options.input_ids;
      if (!takes_ids) continue;
      GeneratorBinding b;
      HEXIR_RETURN_IF_ERROR(g->bind(f, false, b));
      b.has_position = b.position_input >= 0;
      // The one function for a prompt of this length (Module::find_function_for).
      const NamedTensorType ids[] = {
          {options.input_ids, module.function(f).inputs[static_cast<size_t>(b.ids_input)].type}};
      HEXIR_ASSIGN_OR_RETURN(size_t found, module.find_function_for(ids));
      if (found != f)
        return internal_error("prefill function '" + module.function(f).name + "' resolves to '" +
                              module.function(found).name + "'");
      g->prefills.push_back(std::move(b));
    }
  }
  HEXIR_RETURN_IF_ERROR(g->allocate_buffers());
  return Generator(std::move(g));
}

Result<size_t> Generator::generate(std::span<const int64_t> prompt, size_t max_new_tokens,
                                   std::span<int64_t> tokens, TokenCallback on_token, void* user) {
  if (!impl_) return failed_precondition("generate: this is a moved-from Generator");
  return impl_->generate(prompt, max_new_tokens, tokens, on_token, user);
}

Status Generator::set_sampling(const SamplingOptions& sampling) {
  if (!impl_) return failed_precondition("set_sampling: this is a moved-from Generator");
  HEXIR_RETURN_IF_ERROR(check_sampling(sampling));
  impl_->options.sampling = sampling;
  return ok_status();
}

const GenerationStats& Generator::stats() const { return impl_->stats; }
size_t Generator::vocab_size() const { return impl_ ? impl_->vocab : 0; }
size_t Generator::decode_function() const { return impl_ ? impl_->decode.function : 0; }
uint64_t Generator::device_bytes() const { return impl_ ? impl_->device_bytes : 0; }

int64_t Generator::prefill_function(size_t length) const {
  if (!impl_) return -1;
  for (const GeneratorBinding& b : impl_->prefills)
    if (b.length == length) return static_cast<int64_t>(b.function);
  return -1;
}

}  // namespace hexir::vm
