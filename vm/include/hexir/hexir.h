/* Hexir's C API: load a .hxe executable, prepare it on a device, run it.
 * C99 and C++; a thin layer over the C++ API of hexir/vm.h (one
 * implementation), in the same library (libhexir_vm).
 *
 *   hexir_device_t* device; hexir_module_t* module;
 *   hexir_program_t* program; hexir_context_t* context;
 *   hexir_status_t* s = hexir_device_create("cpu", NULL, &device);
 *   if (!s) s = hexir_module_load_file("mlp.hxe", NULL, &module);   // mmap + verify
 *   if (!s) s = hexir_program_prepare(module, device, &program);     // constants once
 *   if (!s) s = hexir_context_create(program, &context);             // one arena
 *   if (!s) s = hexir_context_invoke(context, 0, inputs, 1, NULL, 0); // allocates nothing
 *   if (s) { fprintf(stderr, "%s\n", hexir_status_message(s)); hexir_status_free(s); }
 *
 * Errors. Every fallible function returns a hexir_status_t*: NULL on success
 * (nothing is allocated), otherwise a status the CALLER OWNS and frees with
 * hexir_status_free, carrying a code and a message that names what is wrong
 * and where. Nothing here throws, aborts on bad input or keeps global state.
 *
 * Handles. Device, module, program and context are opaque and reference
 * what they depend on: a program keeps its module and device alive, a
 * context its program. Each *_release may therefore be called in any order;
 * the last owner frees. A handle is not thread-safe; different contexts of
 * one program may run on different threads at once. A context detects use
 * from two threads at once: an invoke entered while another thread's runs
 * on it is refused (HEXIR_STATUS_FAILED_PRECONDITION) and changes nothing.
 * hexir_context_cancel and the hexir_context_set_* bounds may be called from
 * any thread at any time.
 *
 * Pointers returned by accessors (names, dims) are BORROWED: they stay valid
 * as long as the handle they came from (or a program or context made from
 * it) lives, unless the function says otherwise.
 */
#ifndef HEXIR_HEXIR_H_
#define HEXIR_HEXIR_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. hexir_abi_version() returns the library's;
 * a caller built against this header should check they are equal. Bumped on
 * any change that breaks a binary built against an older header. */
#define HEXIR_ABI_VERSION 1

uint32_t hexir_abi_version(void);
/* "0.1.0": the library's version. Static storage; never freed. */
const char* hexir_version_string(void);

/* ---- status ------------------------------------------------------------ */

typedef enum hexir_status_code_e {
  HEXIR_STATUS_OK = 0,
  HEXIR_STATUS_INVALID_ARGUMENT = 1,    /* caller passed something wrong */
  HEXIR_STATUS_DATA_LOSS = 2,           /* a file is corrupt, truncated or hostile */
  HEXIR_STATUS_NOT_FOUND = 3,           /* a named thing does not exist */
  HEXIR_STATUS_UNAVAILABLE = 4,         /* a device or driver is not present */
  HEXIR_STATUS_UNIMPLEMENTED = 5,       /* not in this build or backend */
  HEXIR_STATUS_RESOURCE_EXHAUSTED = 6,  /* out of memory, or over a load limit */
  HEXIR_STATUS_FAILED_PRECONDITION = 7,  /* e.g. a context already running an invoke on another thread */
  HEXIR_STATUS_INTERNAL = 8,
  HEXIR_STATUS_CANCELLED = 9,           /* an invoke stopped by hexir_context_cancel */
  HEXIR_STATUS_DEADLINE_EXCEEDED = 10   /* an invoke past its hexir_context_set_deadline */
} hexir_status_code_t;

typedef struct hexir_status_s hexir_status_t;

/* The code of `status`; HEXIR_STATUS_OK for NULL. */
hexir_status_code_t hexir_status_code(const hexir_status_t* status);
/* The message, NUL-terminated; "" for NULL. Owned by `status`: valid until it is freed. */
const char* hexir_status_message(const hexir_status_t* status);
/* "INVALID_ARGUMENT" etc. Static storage. */
const char* hexir_status_code_name(hexir_status_code_t code);
/* Frees a status returned by this library. NULL is a no-op. */
void hexir_status_free(hexir_status_t* status);

/* ---- element types ------------------------------------------------------ */

/* Values match the file format's and the C++ hexir::DType's. */
typedef enum hexir_dtype_e {
  HEXIR_DTYPE_F32 = 0,
  HEXIR_DTYPE_F16 = 1,
  HEXIR_DTYPE_BF16 = 2,
  HEXIR_DTYPE_I32 = 3,
  HEXIR_DTYPE_I64 = 4,
  HEXIR_DTYPE_I8 = 5,
  HEXIR_DTYPE_U8 = 6,
  HEXIR_DTYPE_BOOL = 7
} hexir_dtype_t;

/* "f32", ...; "?" for a value outside the enum. Static storage. */
const char* hexir_dtype_name(hexir_dtype_t dtype);
/* Bytes per element; 0 for a value outside the enum. */
uint32_t hexir_dtype_size(hexir_dtype_t dtype);

/* ---- device --------------------------------------------------------------- */

typedef struct hexir_device_s hexir_device_t;

typedef struct hexir_device_options_s {
  /* sizeof(hexir_device_options_t) as the caller compiled it (set by _init). */
  uint32_t struct_size;
  /* cpu: threads per context, the calling thread included; 0: one per core. */
  int32_t threads;
  /* cuda, cuda-managed: the device ordinal; -1: the one the name gives
   * ("cuda:1"), or 0. A name with an ordinal and an ordinal here is refused. */
  int32_t ordinal;
} hexir_device_options_t;

/* Fills the caller's struct with the defaults: threads 0, ordinal -1. */
void hexir_device_options_init(hexir_device_options_t* options);

/* Opens a device by name: "cpu", "cuda", "cuda:1", "cuda-managed", and the
 * options after '?' the C++ API takes ("cuda:0?graphs=off"), each at most
 * once (twice: HEXIR_STATUS_INVALID_ARGUMENT). `options` may be
 * NULL (the defaults). On success *out_device is a new handle the caller owns
 * (hexir_device_release); programs prepared on it keep it alive. An absent
 * device or driver gives HEXIR_STATUS_UNAVAILABLE with the reason. */
hexir_status_t* hexir_device_create(const char* name, const hexir_device_options_t* options,
                                    hexir_device_t** out_device);
/* "cpu", "cuda:0", ... Borrowed from `device`. */
const char* hexir_device_name(const hexir_device_t* device);
/* Releases the caller's reference. NULL is a no-op. */
void hexir_device_release(hexir_device_t* device);

/* ---- device buffers ------------------------------------------------------- */

/* Memory of a device for invoke's arguments. On the cpu it is host memory
 * (hexir_buffer_data can be read and written directly); on cuda it is device
 * memory, which hexir_context_invoke needs for every argument a caller passes,
 * filled and read with hexir_buffer_write / hexir_buffer_read. */
typedef struct hexir_buffer_s hexir_buffer_t;

/* `size` bytes (64-byte aligned, contents undefined) on `device`. The buffer
 * keeps the device alive. *out_buffer: owned by the caller
 * (hexir_buffer_release). */
hexir_status_t* hexir_buffer_allocate(hexir_device_t* device, uint64_t size, hexir_buffer_t** out_buffer);
/* Frees the memory (addresses from hexir_buffer_data die here) and the
 * buffer's reference to its device. NULL is a no-op. */
void hexir_buffer_release(hexir_buffer_t* buffer);
/* The address to put in hexir_tensor_t.data (a device address on cuda):
 * valid until the buffer is released. NULL for NULL or a 0-byte buffer. */
void* hexir_buffer_data(const hexir_buffer_t* buffer);
uint64_t hexir_buffer_size(const hexir_buffer_t* buffer);
/* Synchronous copies between `size` bytes of host memory and the buffer's
 * bytes [offset, offset + size), which must lie inside it. */
hexir_status_t* hexir_buffer_write(hexir_buffer_t* buffer, uint64_t offset, const void* host, uint64_t size);
hexir_status_t* hexir_buffer_read(const hexir_buffer_t* buffer, uint64_t offset, void* host, uint64_t size);

/* A caller's tensor. `data` is host memory for the cpu device and a device
 * address for cuda. `dims` may be NULL: the shape the function declares
 * (then `rank` is ignored); otherwise `rank` values, checked. */
typedef struct hexir_tensor_s {
  void* data;
  uint64_t byte_size;
  hexir_dtype_t dtype;
  uint32_t rank;
  const int64_t* dims;
} hexir_tensor_t;

/* ---- module --------------------------------------------------------------- */

typedef struct hexir_module_s hexir_module_t;

typedef struct hexir_load_options_s {
  uint32_t struct_size; /* set by _init */
  /* Nonzero: check the data sections' checksum (O(weights) at load). */
  int32_t verify_data_checksum;
  /* Nonzero: copy the whole file (or buffer) into memory the module owns
   * instead of mapping it (using it in place); the file or buffer may then
   * change or go as soon as the load returns. */
  int32_t copy_weights;
  /* Limits (hexir/vm.h LoadOptions); a file beyond one is refused at load
   * with HEXIR_STATUS_RESOURCE_EXHAUSTED naming it. */
  uint64_t max_decompressed_bytes;
  uint64_t max_fill_bytes;
  uint64_t max_arena_bytes;
} hexir_load_options_t;

/* Fills the caller's struct with the defaults of hexir::vm::LoadOptions. */
void hexir_load_options_init(hexir_load_options_t* options);

/* Maps the file at `path` read-only and verifies it; nothing is copied. The
 * file must not be truncated while the module lives (copy_weights
 * otherwise). `options` may be NULL. *out_module: owned by the caller. */
hexir_status_t* hexir_module_load_file(const char* path, const hexir_load_options_t* options,
                                       hexir_module_t** out_module);
/* Uses `size` bytes at `data` in place: BORROWED, they must stay alive and
 * unchanged while the module, or anything made from it, lives, and be
 * 64-byte aligned (copy_weights: copied, then free to go). */
hexir_status_t* hexir_module_load_buffer(const void* data, size_t size, const hexir_load_options_t* options,
                                         hexir_module_t** out_module);
/* Maps the regular file open as `fd` (from offset 0). The caller keeps the
 * descriptor and may close it as soon as this returns. */
hexir_status_t* hexir_module_load_fd(int fd, const hexir_load_options_t* options, hexir_module_t** out_module);
/* Releases the caller's reference; programs prepared from the module keep it
 * alive (and the bytes or mapping it uses). NULL is a no-op. */
void hexir_module_release(hexir_module_t* module);

/* Reflection: readable before anything is prepared, so a caller can size
 * its own buffers. Borrowed strings, valid while the module lives. */
const char* hexir_module_name(const hexir_module_t* module);
size_t hexir_module_function_count(const hexir_module_t* module);
/* NULL for an index out of range. */
const char* hexir_module_function_name(const hexir_module_t* module, size_t function);
/* HEXIR_STATUS_NOT_FOUND lists the names there are. */
hexir_status_t* hexir_module_find_function(const hexir_module_t* module, const char* name,
                                           size_t* out_function);
/* The one function whose inputs have the dtypes and shapes of
 * inputs[0..input_count), by position: as many inputs, each of the same
 * dtype and dims (`dims` must not be NULL; `data` and `byte_size` are not
 * read). For a module with a function per shape (prefill_32, prefill_128,
 * decode): the one for the caller's tensors. None fits:
 * HEXIR_STATUS_NOT_FOUND; several: HEXIR_STATUS_INVALID_ARGUMENT; either
 * message names the shapes asked and lists every function's signature. */
hexir_status_t* hexir_module_find_function_for_shapes(const hexir_module_t* module,
                                                      const hexir_tensor_t* inputs, size_t input_count,
                                                      size_t* out_function);
/* 0 for a function index out of range. */
size_t hexir_module_input_count(const hexir_module_t* module, size_t function);
size_t hexir_module_output_count(const hexir_module_t* module, size_t function);

/* One argument or result of a function, filled into the caller's struct; its
 * pointers are borrowed from the module. */
typedef struct hexir_tensor_info_s {
  const char* name;    /* borrowed; "" when the file gives none */
  hexir_dtype_t dtype;
  uint32_t rank;
  const int64_t* dims; /* `rank` values, borrowed */
  uint64_t byte_size;
  /* Inputs: the output index this input may be written as (donated), or -1.
   * A donated input's buffer may be overwritten by the call. Outputs: -1. */
  int32_t donated_to;
} hexir_tensor_info_t;

/* Input or output `index` of `function`; an index out of range is
 * HEXIR_STATUS_INVALID_ARGUMENT naming it. */
hexir_status_t* hexir_module_input_info(const hexir_module_t* module, size_t function, size_t index,
                                        hexir_tensor_info_t* out_info);
hexir_status_t* hexir_module_output_info(const hexir_module_t* module, size_t function, size_t index,
                                         hexir_tensor_info_t* out_info);
/* Bounded dynamic shapes: the dim of result `index` whose size in its info
 * is an upper bound (f32[<=300,4]: 0), its actual extent known after each
 * invoke (hexir_context_output_shape); -1 when every dim is exact or an
 * index is out of range. The buffer a caller passes holds the bound. */
int32_t hexir_module_output_bounded_dim(const hexir_module_t* module, size_t function, size_t index);

typedef struct hexir_module_memory_s {
  uint64_t arena_bytes;       /* the static plan's arena */
  uint64_t lower_bound_bytes; /* the most bytes live at one instant (the ideal arena) */
  uint64_t workspace_bytes;   /* the shared scratch */
  uint64_t constant_bytes;    /* all constants, raw (packed + filled) */
  /* Device bytes each context takes (arena, workspace, its own output
   * buffers); free-at-last-use plans allocate their values per invoke on top. */
  uint64_t context_bytes;
} hexir_module_memory_t;

/* Fills the caller's *out_memory (all zero for a NULL module). */
void hexir_module_memory(const hexir_module_t* module, hexir_module_memory_t* out_memory);

/* The host memory space of a file compiled under a device memory budget
 * (docs/memory-budget.md); all zero without one. A struct of its own so that
 * hexir_module_memory_t keeps its layout. */
typedef struct hexir_module_host_memory_s {
  uint64_t host_arena_bytes;        /* each context's host arena (offloaded values; pinned on cuda) */
  uint64_t host_lower_bound_bytes;  /* the most bytes live in it at one instant */
  /* Of constant_bytes: the streamed weights, kept in host memory (the
   * mapping on the cpu, a pinned copy on cuda) and prefetched into the
   * arena before each read, never on the device for good. */
  uint64_t streamed_constant_bytes;
} hexir_module_host_memory_t;

/* Fills the caller's *out_memory (all zero for a NULL module). */
void hexir_module_host_memory(const hexir_module_t* module, hexir_module_host_memory_t* out_memory);

/* ---- program ----------------------------------------------------------------- */

typedef struct hexir_program_s hexir_program_t;

/* Makes `module` ready on `device`: constants uploaded (or used in place on
 * the cpu) once, kernels resolved. The program keeps both alive; the caller
 * may release its module and device handles at once. *out_program: owned by
 * the caller. */
hexir_status_t* hexir_program_prepare(hexir_module_t* module, hexir_device_t* device,
                                      hexir_program_t** out_program);
/* The module it was prepared from: borrowed, valid while the program lives. */
const hexir_module_t* hexir_program_module(const hexir_program_t* program);
/* Device bytes a program holds for what kernels derived from its constants
 * at prepare (the cpu's packed weights): one copy per constant and packing,
 * shared by every instruction and function reading it. */
uint64_t hexir_program_prepared_bytes(const hexir_program_t* program);

/* Releases the caller's reference; contexts created from it keep it alive. NULL is a no-op. */
void hexir_program_release(hexir_program_t* program);

/* ---- context ------------------------------------------------------------------ */

typedef struct hexir_context_s hexir_context_t;

/* One arena (and workspace, and output buffers) per context, allocated here
 * and never on invoke. It keeps its program alive. Use one per thread. On the
 * cpu its worker threads start here: one the system refuses (a thread or
 * memory limit) is HEXIR_STATUS_RESOURCE_EXHAUSTED saying how many started,
 * and those are joined before it returns. */
hexir_status_t* hexir_context_create(hexir_program_t* program, hexir_context_t** out_context);
/* Frees the context: its arena, its own output buffers (pointers from
 * hexir_context_output die here) and its reference to the program. NULL is a
 * no-op. */
void hexir_context_release(hexir_context_t* context);
/* Device bytes the context holds: hexir_module_memory's context_bytes. */
uint64_t hexir_context_device_bytes(const hexir_context_t* context);

/* Runs `function`. inputs[input_count] and outputs[output_count] are
 * BORROWED for the duration of the call only. output_count 0 (outputs may be
 * NULL): the results land in the context's own buffers (hexir_context_output).
 * The count, dtype and shape of every argument are checked, and that the
 * caller's buffers overlap nowhere the call writes (a donated input passed as
 * its own output is the one legal overlap). An input is written only when it
 * is donated. Allocates nothing on success. */
hexir_status_t* hexir_context_invoke(hexir_context_t* context, size_t function, const hexir_tensor_t* inputs,
                                     size_t input_count, const hexir_tensor_t* outputs, size_t output_count);

/* Result `index` of the last invoke of `function` that passed no outputs.
 * out_tensor->data points into the CONTEXT'S buffer (a device address on
 * cuda): valid until `function` is invoked again on this context or the
 * context is released. dims: borrowed, valid while the context lives. */
hexir_status_t* hexir_context_output(const hexir_context_t* context, size_t function, size_t index,
                                     hexir_tensor_t* out_tensor);
/* The actual shape of result `index` of the last invoke of `function`
 * (whether it passed outputs or not): a bounded dim
 * (hexir_module_output_bounded_dim) at the extent that invoke produced, its
 * elements row-major at that shape from the start of the buffer; the other
 * dims as declared. Writes *out_rank and, when it is at most `capacity`,
 * the dims into dims[]; HEXIR_STATUS_INVALID_ARGUMENT when they do not fit.
 * hexir_context_output reports the same dims and byte size. */
hexir_status_t* hexir_context_output_shape(const hexir_context_t* context, size_t function, size_t index,
                                           int64_t* dims, uint32_t capacity, uint32_t* out_rank);
/* Copies that result into `size` bytes of host memory at `host` (every
 * backend); `size` must be at least its byte size. */
hexir_status_t* hexir_context_read_output(const hexir_context_t* context, size_t function, size_t index,
                                          void* host, uint64_t size);

/* Bounds on an invoke (hexir/vm.h Context), for files whose loops run as
 * long as their data says, or callers that need an answer in time. Each may
 * be called from any thread, also while another thread runs an invoke on the
 * context; an invoke keeps the bounds it started with. */

/* The most loop iterations one invoke may run, all its loops together; an
 * invoke that would run more fails with HEXIR_STATUS_RESOURCE_EXHAUSTED
 * naming the limit. 0 (the default): no limit. */
hexir_status_t* hexir_context_set_max_loop_iterations(hexir_context_t* context, uint64_t limit);
/* A time limit per invoke, `timeout_ns` nanoseconds from its start; 0 (the
 * default): none. An invoke still running when it passes stops at its next
 * loop iteration or branch with HEXIR_STATUS_DEADLINE_EXCEEDED. The clock is
 * read there, only when a deadline is set: a coarse monotonic clock (a few
 * milliseconds' resolution, so a deadline may be passed by that much). A
 * function without loops or ifs runs to its end: its work is bounded by the
 * file. */
hexir_status_t* hexir_context_set_deadline(hexir_context_t* context, uint64_t timeout_ns);
/* Asks the invoke running on `context` (on another thread) to stop: it
 * returns HEXIR_STATUS_CANCELLED at its next loop iteration or branch, or
 * finishes normally if it reaches its end first. Never blocks. A cancel
 * applies to the invoke running at that moment only: with none running it
 * does nothing and the next invoke runs normally (to bound an invoke that
 * may not have started yet, set a deadline). Returns 1 when an invoke was
 * running, 0 when none was (or `context` is NULL). */
int hexir_context_cancel(hexir_context_t* context);

/* Counters: device allocations the context made at create, and summed over
 * every invoke so far (0 for static plans: invoke never allocates). */
typedef struct hexir_context_stats_s {
  uint64_t invoke_count;
  uint64_t create_device_allocations;
  uint64_t invoke_device_allocations;
  uint64_t invoke_uploads;
  uint64_t invoke_dispatches;
} hexir_context_stats_t;

/* Fills the caller's *out_stats (all zero for a NULL context). */
void hexir_context_stats(const hexir_context_t* context, hexir_context_stats_t* out_stats);

/* ---- generation ----------------------------------------------------------- */

/* A language model decoding in place (hexir/generator.h has the rules): a
 * decode function (token ids "input_ids" i64[1,1], optionally the position
 * "pos" i64[] or i64[1], and caches: every DONATED input, each fed back from
 * the output it is donated to; logits "logits" [1,1,V] or [1,V]) and
 * optionally prefill functions (every other function with an "input_ids"
 * input, [1,L]: the prompt of L tokens in one invoke, its logits [1,V] or
 * [1,L,V]). Created once from a context: the caches (zeroed), token,
 * position and logits buffers and everything else it needs are allocated
 * there; a generation then runs the prompt (its prefill function, or token by
 * token through decode when none takes its length) and one decode step per
 * token, the caches passed as donated inputs and as their own outputs: per
 * token no allocation, no copy of a cache, no upload but the token and
 * position (none on the cpu). It keeps its context alive and holds it during
 * a generation (another thread's invoke on it meanwhile is refused). */
typedef struct hexir_generator_s hexir_generator_t;

typedef struct hexir_generator_options_s {
  uint32_t struct_size; /* set by _init */
  /* The decode function: by index when decode_index >= 0, else by name
   * (NULL: "decode"). */
  const char* decode_function;
  int64_t decode_index;
  /* Argument names; NULL: "input_ids", "pos", "logits". A function without
   * the position input derives the position itself. */
  const char* input_ids;
  const char* position;
  const char* logits;
  /* Nonzero (the default): a prefill function for the prompt's length when
   * there is one; 0: always token by token through decode. */
  int32_t use_prefill;
  /* Sampling: temperature 0 (the default) is greedy (the lowest index among
   * the largest logits). Otherwise softmax(logits / temperature) over the
   * top_k most likely tokens (0: all) and of those the fewest whose
   * probabilities reach top_p (1: all), sampled with the generator's own
   * PRNG (splitmix64) restarted from `seed` at each generation. */
  float temperature;
  uint32_t top_k;
  float top_p;
  uint64_t seed;
  int64_t eos_token;       /* generation stops after this token (included); -1: none */
  uint32_t max_new_tokens; /* the most tokens one generation may produce (256) */
  uint64_t max_positions;  /* prompt + new tokens past this are refused; 0: not checked */
} hexir_generator_options_t;

/* Fills the caller's struct with the defaults of hexir::vm::GeneratorOptions. */
void hexir_generator_options_init(hexir_generator_options_t* options);

/* Checks the functions (a mismatch is HEXIR_STATUS_INVALID_ARGUMENT naming
 * the function and argument) and allocates everything. `options` may be
 * NULL (the defaults). *out_generator: owned by the caller
 * (hexir_generator_release); it keeps `context` alive. */
hexir_status_t* hexir_generator_create(hexir_context_t* context, const hexir_generator_options_t* options,
                                       hexir_generator_t** out_generator);
/* Frees the generator's buffers and its reference to the context. NULL is a no-op. */
void hexir_generator_release(hexir_generator_t* generator);

/* Called after each token: its index (0: the one the prompt gave), the token
 * and the logits it was sampled from (vocab_size floats, valid during the
 * call only). Return 0 to stop after this token, nonzero to go on. */
typedef int (*hexir_token_callback_t)(void* user, size_t index, int64_t token, const float* logits,
                                      size_t vocab_size);

/* A new sequence: the caches zeroed, prompt[0..prompt_length) (at least one
 * token, each in [0, vocab)) at positions 0.., then up to max_new_tokens
 * (at most the options' max_new_tokens) into out_tokens (room for
 * max_new_tokens), stopping after the eos token or when `callback` (may be
 * NULL) returns 0. *out_count: the tokens written. Allocates nothing on
 * success. */
hexir_status_t* hexir_generator_generate(hexir_generator_t* generator, const int64_t* prompt,
                                         size_t prompt_length, size_t max_new_tokens, int64_t* out_tokens,
                                         size_t* out_count, hexir_token_callback_t callback, void* user);

/* The sampling of the next generations (checked: temperature >= 0, top_p in (0, 1]). */
hexir_status_t* hexir_generator_set_sampling(hexir_generator_t* generator, float temperature, uint32_t top_k,
                                             float top_p, uint64_t seed);

typedef struct hexir_generation_stats_s {
  uint64_t prompt_tokens;
  uint64_t generated_tokens;
  int64_t prefill_function; /* the function that ran the prompt in one invoke; -1: token by token */
  uint64_t prefill_ns;      /* start to the first token */
  uint64_t decode_ns;       /* the decode steps after it, together */
  double tokens_per_second; /* decode steps per second of decode_ns; 0 without any */
  /* generated_tokens values: [0] prefill_ns, [i] the decode step of token i.
   * Borrowed: valid until the next generation or the release. */
  const uint64_t* token_ns;
} hexir_generation_stats_t;

/* The last generation's (all zero for a NULL generator). */
void hexir_generator_stats(const hexir_generator_t* generator, hexir_generation_stats_t* out_stats);
/* V, the logits' last dim (0 for NULL). */
size_t hexir_generator_vocab_size(const hexir_generator_t* generator);
/* The function a prompt of `length` tokens runs through in one invoke, or -1 (token by token). */
int64_t hexir_generator_prefill_function(const hexir_generator_t* generator, size_t length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HEXIR_HEXIR_H_ */
