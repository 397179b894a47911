// The loader-side verifier of .hxe files, shared by the VM and hexir-dump.
// A file is untrusted: every offset, size, index, alias and shape rule is
// checked here, with overflow-safe arithmetic, before anything runs. Errors
// are kDataLoss and name what is wrong and where.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/base/types.h"
#include "hexir/format/prelude.h"
#include "hexir/ops/op.h"
#include "hexir_generated.h"

namespace hexir::format {

struct VerifyOptions {
  // Checksum the data sections too when the file carries a data checksum
  // (O(weights); off keeps mmap loads O(metadata)).
  bool verify_data_checksum = false;
  // Prove that no two arena values live at the same time share a byte
  // (workspaces included). Always on for loads; off only lets a benchmark
  // measure what the proof costs (bench/verify_bench).
  bool prove_no_overlap = true;
};

// A verified view of a file. The metadata (the flatbuffer: every slot,
// instruction, operand, parameter, binding and workspace word) is copied into
// memory this object owns before it is checksummed and verified, so what was
// verified cannot change afterwards, whatever happens to the file; `module`
// and `metadata` point into that copy (shared by copies of this object).
// `file` and `sections` borrow the file bytes (the weights) and are valid as
// long as they are.
struct VerifiedModule {
  Prelude prelude{};  // a copy (the file may be any 8-aligned memory)
  std::span<const uint8_t> file;
  std::shared_ptr<const uint64_t[]> owned_metadata;  // 8-byte aligned copy of the flatbuffer
  std::span<const uint8_t> metadata;                 // inside owned_metadata
  const fb::Module* module = nullptr;                // verified flatbuffer root, inside owned_metadata
  // Per Module.sections entry, its stored bytes in the file. For a zstd section
  // that is the compressed frame until decompress_sections (sections.h) points
  // it at the raw bytes.
  std::vector<std::span<const uint8_t>> sections;
  std::vector<ops::OpId> kernel_ids;       // per Module.kernels entry, its catalog id
  std::vector<TensorType> slot_types;      // per Module.slots entry
  std::vector<TensorType> constant_types;  // per Module.constants entry
  // Free-at-last-use plans: the most bytes of arena values and scratch live at
  // once in any function (what the VM holds at its peak, before alignment).
  // 0 for static plans, whose arena is ArenaPlan.size.
  uint64_t dynamic_peak_bytes = 0;
  // Per function: its loops as [LoopBegin, LoopNext] instruction indices
  // relative to the function's first instruction, in the order of their
  // LoopNext (inner loops first). Verified: properly nested, targets matching.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> loops;
  // Per function: its ifs, in order of their BranchIfZero (outer first):
  // [branch, else_begin) is the then-branch (its Jump last), [else_begin,
  // end) the else-branch; function-relative, verified properly nested.
  struct Branch {
    uint32_t branch = 0, else_begin = 0, end = 0;
  };
  std::vector<std::vector<Branch>> branches;
};

// Verifies the prelude, metadata checksum, flatbuffer structure (identifier
// "HXE1") and every semantic rule of the schema. `file` must start at an
// 8-byte aligned address (flatbuffers reads scalars in place).
Result<VerifiedModule> verify_executable(std::span<const uint8_t> file, const VerifyOptions& options = {});

// What an instruction runs, for messages and listings: its operator's name,
// or "loop_begin" / "loop_next" for the control instructions the VM runs.
const char* instruction_name(const VerifiedModule& module, const fb::Instruction& instruction);

// Helpers shared with hexir-dump.
const char* section_kind_name(fb::SectionKind kind);
const char* storage_kind_name(fb::StorageKind kind);
const char* slot_usage_name(fb::SlotUsage usage);
const char* plan_strategy_name(fb::PlanStrategy strategy);

}  // namespace hexir::format
