// Turns a planned module into .hxe bytes: prelude, "HXE1" flatbuffer
// metadata, then the RODATA section on a page boundary.
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
};

// Expects detect/dedupe/pack_constants, and assign_storage and
// plan_function_arena on every function, to have run.
Result<std::vector<uint8_t>> write_module(const Module& module, const WriteOptions& options);

}  // namespace hexir::serializer
