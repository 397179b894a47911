// Turns a planned module into .hxe bytes: prelude, "HXE1" flatbuffer
// metadata, then the RODATA section on a page boundary (zstd-compressed when
// asked and when that makes it smaller).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hexir/base/status.h"
#include "hexir/serializer/compiler.h"
#include "ir.h"

namespace hexir::serializer {

struct WriteOptions {
  PlanStrategy strategy = PlanStrategy::kArena;
  uint32_t alignment = 64;
  std::string heuristic;
  bool data_checksum = false;
  SectionCompression compression = SectionCompression::kNone;
  int compression_level = 3;
};

// Expects detect/dedupe/pack_constants, and assign_storage and
// plan_function_arena on every function, to have run.
Result<std::vector<uint8_t>> write_module(const Module& module, const WriteOptions& options);

// Sections smaller than this are never compressed: they cost at most a page.
inline constexpr uint64_t kMinCompressedSectionSize = 4096;

}  // namespace hexir::serializer
