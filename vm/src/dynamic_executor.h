// Free-at-last-use (PlanStrategy::FreeAtLastUse), the dynamic baseline: its
// executor and the tables it runs from. Every arena value is allocated on the
// device before its writer (or takes over its aliased input's buffer) and
// released after its last use; scratch lives around its instruction. It
// allocates on every invoke, and counts it in the context's invoke_stats.
// The instructions, bound arguments and control flow are the context's
// FunctionTable (vm_impl.h); this holds only the values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/hal/device.h"

namespace hexir::vm {

class ContextImpl;
class ModuleImpl;
class ProgramImpl;
struct FunctionTable;

class DynamicExecutor {
 public:
  // Values are allocated at `alignment` (the arena's, at least the constants').
  explicit DynamicExecutor(uint64_t alignment) : alignment_(alignment) {}

  // Context::create, once per function in order: numbers the function's
  // arena values and records which instruction writes and which releases each.
  // `local_value`: scratch of one entry per slot of the module, all -1, as
  // this leaves it (so that a module's functions cost their operands, not
  // its slots, each).
  Status add_function(const ModuleImpl& m, const ProgramImpl& p, size_t function_index,
                      std::vector<int32_t>& local_value);
  // Runs function `function` of c, its arguments bound in t by invoke;
  // `failed`: the instruction that failed. Holds no value when it returns.
  Status run(ContextImpl& c, size_t function, FunctionTable& t, size_t* failed);
  // Bytes of values and scratch held now: 0 between invokes.
  uint64_t live_bytes() const { return live_bytes_; }

  // One function's values. Arena values (slots that are not views) are
  // numbered locally; each has a size and the operands entries (its slot's
  // and its views') patched with its buffer.
  struct Values {
    std::vector<uint64_t> value_size;
    std::vector<uint32_t> value_patch_begin;  // CSR into value_patch_args
    std::vector<uint32_t> value_patch_args;
    std::vector<uint32_t> step_write_begin;  // CSR into step_write: values each instruction writes
    std::vector<uint32_t> step_write;
    std::vector<int32_t> step_inherit;      // per instruction: value whose buffer output 0 takes over, or -1
    std::vector<uint64_t> step_workspace;   // per instruction: scratch bytes allocated around it
    std::vector<uint32_t> step_free_begin;  // CSR into step_free: values released after each instruction
    std::vector<uint32_t> step_free;
    std::vector<hal::Buffer> value_buffer;  // held during an invoke
  };

 private:
  Status run_steps(ContextImpl& c, Values& v, FunctionTable& t, size_t* failed);
  // Before instruction k: a buffer for each value it writes, patched into t.
  Status hold_writes(ContextImpl& c, Values& v, FunctionTable& t, size_t k);
  // Instruction k (a dispatch) with its scratch, waited for when it must be.
  Status dispatch(ContextImpl& c, const Values& v, FunctionTable& t, size_t k);
  Result<hal::Buffer> allocate(ContextImpl& c, uint64_t size);
  void release_after(hal::Device& device, Values& v, size_t k);
  void release_values(hal::Device& device, Values& v);

  uint64_t alignment_ = 0;
  uint64_t live_bytes_ = 0;
  std::vector<Values> functions_;
};

}  // namespace hexir::vm
