// The serializer's in-memory graph: what the parser builds, the passes
// rewrite and the writer turns into flatbuffer metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/base/types.h"
#include "hexir/ops/op.h"

namespace hexir::serializer {

struct SourceLoc {
  int line = 0;
  int col = 0;
};

// A module-level constant. Either `data` holds all byte_size bytes (packed
// into RODATA by the packing pass), or it is a fill: `fill_pattern` (one
// element) repeated `fill_count` times and `data` is empty.
struct Constant {
  std::string name;  // without '@'
  TensorType type;
  uint64_t byte_size = 0;
  std::vector<uint8_t> data;
  bool is_fill = false;
  std::vector<uint8_t> fill_pattern;
  uint64_t fill_count = 0;
  uint64_t rodata_offset = 0;  // set by pack_constants, for non-fills
  SourceLoc loc;
};

enum class ValueKind : uint8_t {
  kInput,        // function argument `input_index`
  kConstant,     // reference to Module::constants[constant_index]
  kInstruction,  // result of a call
};

enum class Storage : uint8_t { kArena, kConstant, kInput, kOutput };

// An SSA value of one function; becomes one VM slot.
struct Value {
  std::string name;  // without '%' or '@'
  TensorType type;
  uint64_t byte_size = 0;
  ValueKind kind = ValueKind::kInstruction;
  int input_index = -1;
  int constant_index = -1;
  SourceLoc loc;

  // Filled by assign_storage: the value whose storage this one uses (itself
  // unless it is a view), and where that storage lives.
  int storage_root = -1;
  Storage storage = Storage::kArena;
  uint32_t storage_index = 0;  // constant index, input or output binding index
  uint64_t arena_offset = 0;   // set by the arena plan, for kArena

  // Set on storage roots by assign_in_place / place_donations: the root whose
  // buffer this value takes over when it is written (-1: a buffer of its own).
  // Following it from any root ends at the buffer's head, whose storage every
  // value of the chain shares (see buffer_head in passes.h).
  int buffer_prev = -1;
  // Storage roots in arena storage: program index of the last instruction that
  // reads the value or a view of it (its writer when nothing does). Set by
  // record_last_uses; the VM frees the value there under free-at-last-use.
  int64_t last_use = -1;
};

struct Instruction {
  ops::OpId kernel = ops::OpId::kCopy;
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  std::vector<int64_t> params;
  SourceLoc loc;
  // Bit i: the output is written into the storage of inputs[i] (in place).
  uint32_t alias_mask = 0;
  // Scratch bytes the kernel needs (ops::workspace_bytes) and, when
  // the plan puts scratch in the arena, its offset there.
  uint64_t workspace_size = 0;
  uint64_t workspace_offset = 0;
};

struct Argument {
  int value = -1;
  bool donate = false;
  int donated_to = -1;  // output index, set by assign_storage
};

struct Function {
  std::string name;
  SourceLoc loc;
  std::vector<Value> values;
  std::vector<Argument> arguments;
  std::vector<TensorType> result_types;
  std::vector<Instruction> instructions;  // as parsed, views included
  std::vector<int> returned;              // value id per result, before storage assignment
  std::vector<int> outputs;               // value id bound to each output, after storage assignment
  // After assign_storage: the instructions actually dispatched (views dropped,
  // copies added), in order. Liveness and planning count in this list.
  std::vector<Instruction> program;
  uint64_t arena_size = 0;
  uint64_t lower_bound = 0;
  uint64_t workspace_size = 0;      // largest scratch of one instruction
  bool workspace_in_arena = false;  // scratch planned as arena ranges (else shared, past the arena)
};

struct Module {
  std::string name;
  std::vector<Constant> constants;
  std::vector<Function> functions;
};

}  // namespace hexir::serializer
