// What the compiler is asked to do: the plan strategy, the passes that may be
// turned off to measure them, the limits on what a source may declare, and
// the memory budgets. Shared by the front ends, the passes and the writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hexir/base/status.h"

namespace hexir::compiler {

// The most bytes of stored constants (every constant but a fill) one compile
// reads, writes and, for a zstd section, holds in memory: the default of
// CompileOptions::max_constant_bytes and ParseOptions::max_constant_bytes.
// Sizes come from the source (a declared type, an .npy header of a sparse
// file): without a bound a few bytes of text make the compiler read for hours
// or allocate 400 GB.
inline constexpr uint64_t kDefaultMaxConstantBytes = uint64_t{16} << 30;

// The most instructions (graph nodes, all functions together) a module may
// hold: the default of CompileOptions::max_instructions and
// ParseOptions::max_instructions. Calls are inlined, so a chain of functions
// each calling the next twice doubles at every step: 40 of them in 3 KB of
// text would make 2^40 nodes. The real models of docs/onnx-real-models.md
// have under 1,000 nodes, a 48-layer transformer a few thousand: 2^20 leaves
// a thousandfold headroom, and reaching it costs seconds and about 1 GB.
inline constexpr uint64_t kDefaultMaxInstructions = uint64_t{1} << 20;
// The largest limit check_compile_options accepts (value and node ids are int).
inline constexpr uint64_t kMaxInstructionsLimit = uint64_t{1} << 30;

enum class PlanStrategy {
  kNaive,  // every value its own arena range, nothing reused (the baseline)
  kArena,  // liveness-based static plan that reuses storage (default)
  // No static plan: the VM allocates each value before its writer and frees it
  // after its last use, at run time (the dynamic baseline).
  kFreeAtLastUse,
};

enum class Schedule {
  kSource,  // instructions in the order written
  kMemory,  // independent instructions reordered to lower the live peak
};

enum class SectionCompression {
  kNone,
  kZstd,
};

// An input donated to an output by name (hexir-compile --donate IN=OUT):
// each side is a name, or a pattern with one `*` on both sides matching the
// same text ("past.*=present.*" donates past.0.key to present.0.key).
struct DonationRule {
  std::string input, output;
};

// How a matmul's constant weights are stored: "f32" (as given), "int8",
// "int4" or "int4:group=G" (G weights per scale, a multiple of 32).
struct WeightFormat {
  enum class Kind : uint8_t { kAsGiven, kInt8, kInt4 };
  Kind kind = Kind::kAsGiven;
  int64_t group = 32;  // kInt4 only
  std::string to_string() const;
  bool operator==(const WeightFormat&) const = default;
};
// Weights whose constant name matches `pattern` ('*' any run of characters)
// stored as `format` instead of CompileOptions::weights.
struct WeightOverride {
  std::string pattern;
  WeightFormat format;
};


struct CompileOptions {
  PlanStrategy plan = PlanStrategy::kArena;
  uint32_t alignment = 64;     // arena offset alignment
  bool data_checksum = false;  // checksum the data sections too (O(weights) to verify)
  // Elementwise results take the storage of an input whose last use they are
  // (alias bits), under the arena and free-at-last-use plans. Off only to
  // measure what in-place saves. A result written in place into a donated
  // input (the caller asked for it) is kept either way, and under naive.
  bool in_place = true;
  // A conv2d or matmul absorbs the bias add and the activation that follow it
  // (fused epilogues; compiler/passes/fusion.h): one kernel, one pass over the
  // result; an add or mul an activation or a scalar affine map; per-channel
  // scales and shifts (an imported BatchNormalization) are folded into a
  // convolution's weights and bias (a different rounding, within float
  // precision). Off only to measure what it saves (hexir-compile --no-fuse).
  bool fuse_epilogues = true;
  // transpose, slice (steps > 0) and expand become views with an offset and
  // strides, read in place by the kernels that take strides; copies are
  // inserted only where a reader needs a row-major operand (docs/views.md).
  // Off only to measure what views save (hexir-compile --no-views).
  bool strided_views = true;
  // Dense convolutions larger than 1x1 run channels-last (NHWC), with the
  // layout-free operators between them; conversions only at the edges of
  // such regions (docs/layout.md). hexir-compile --no-channels-last keeps NCHW.
  bool channels_last = true;
  // Channels-last 3x3 convolutions at stride 1 with 32 to 256 input channels
  // on maps of 100 pixels or more run by Winograd: F(4x4, 3x3) (layout word
  // 3: 36 multiply-adds per channel for 16 outputs where the window takes
  // 144; U 36/9 of the weights' bytes) on maps of 400+ pixels that its 4x4
  // tiles cover well, else F(2x2, 3x3) (word 2: 16 for 4, within a few ulps
  // of the direct sums; U 16/9 of the bytes); docs/layout.md.
  // hexir-compile --no-winograd keeps the direct window.
  bool winograd = true;
  Schedule schedule = Schedule::kSource;
  // kZstd: store large data sections (RODATA) zstd-compressed, when that makes
  // them smaller; the VM decompresses them once at load. kNone (default) keeps
  // RODATA usable straight from the mapping.
  SectionCompression compression = SectionCompression::kNone;
  int compression_level = 3;  // zstd level (1..22) for kZstd
  // Budget of the arena planner's improvement search, per function, in
  // milliseconds of counted work: deterministic (the same input and budget
  // give the same plan on any machine). 0: greedy heuristics only.
  uint64_t plan_budget_ms = 200;
  // .hxir `file "x.npy"` constants may name any path (absolute, `..` or a
  // symlink leading out of the source's folder). Off by default: a source
  // reads only files under its own folder.
  bool allow_external_files = false;
  // Bytes of stored constants (all but fills: dense literals, `file` data),
  // one by one and together: a source declaring more is refused before any
  // of it is read (hexir-compile --max-constant-bytes). 16 GiB by default.
  uint64_t max_constant_bytes = kDefaultMaxConstantBytes;
  // Instructions the module may hold once every call is inlined, all
  // functions together: a call that would pass it is refused before it is
  // inlined, naming the call chain (hexir-compile --max-instructions).
  // 1 to kMaxInstructionsLimit; kDefaultMaxInstructions (1,048,576) by default.
  uint64_t max_instructions = kDefaultMaxInstructions;
  // Bytes of device memory a context may take (arena and scratch together;
  // hexir-compile --memory-budget device=BYTES): values are recomputed
  // instead of kept where that lowers the peak (rematerialization,
  // docs/memory-budget.md) until the plan fits, or compiling fails naming the
  // smallest size reached and what holds it up. Needs the arena plan. None:
  // no budget, nothing recomputed. When recomputing is not enough, values
  // are offloaded to the host arena and prefetched back (host offload).
  std::optional<uint64_t> device_budget;
  // Bytes of host memory a context's host arena may take (--memory-budget
  // host=BYTES): offload stops short of it, and a plan over it is refused.
  // None: unlimited.
  std::optional<uint64_t> host_budget;
  // Inputs donated to outputs by name, in every function (see DonationRule):
  // each rule must match an input of some function and, for every input it
  // matches, name an output of that function of the input's type; a
  // donation the plan cannot honour fails the compile (never dropped).
  std::vector<DonationRule> donations;
  // How matmul weights are stored (hexir-compile --weights; weights.h): as
  // given, int8 per output channel (quantized_matmul), or int4 with an f16
  // scale per group (int4_matmul): a quarter or an eighth of the bytes,
  // which is what a decode step's time is. weight_overrides choose per
  // weight by name, the last match winning.
  WeightFormat weights;
  std::vector<WeightOverride> weight_overrides;
};

// One `--memory-budget SPACE=BYTES` option: "device=512MiB" sets
// options.device_budget, "host=1GiB" options.host_budget. BYTES is a count with an optional KiB, MiB or GiB
// suffix (powers of 1024). Fails naming what is wrong: an unknown memory
// space, a malformed or overflowing size, a space given twice.
Status parse_memory_budget(std::string_view text, CompileOptions& options);

// `--weights FORMAT` into *out and `--weights-for PATTERN=FORMAT` into
// options.weight_overrides. Fail naming what is wrong: an unknown format, a
// group that is not a positive multiple of 32, a missing '='.
Status parse_weight_format(std::string_view text, WeightFormat& out);
Status parse_weight_override(std::string_view text, CompileOptions& options);

// One `--donate IN=OUT` option into options.donations. Fails naming what is
// wrong: no '=', an empty side, a `*` on one side only or more than one.
Status parse_donation_option(std::string_view text, CompileOptions& options);

}  // namespace hexir::compiler
