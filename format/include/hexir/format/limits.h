// What a verified file may make its reader allocate: the load limits the VM
// applies (vm::LoadOptions, hexir_load_options_t) and the tools that read a
// file without the VM (hexir-dump) apply the same way. Checked on the
// verified metadata before any allocation they bound: decompression at load,
// fills at prepare, the arena at Context::create.
#pragma once

#include <cstdint>

#include "hexir/base/status.h"

namespace hexir::format {

struct VerifiedModule;

struct LoadLimits {
  // Raw (decompressed) bytes of all zstd sections together.
  uint64_t max_decompressed_bytes = uint64_t{256} << 20;
  // Bytes of all fill constants together.
  uint64_t max_fill_bytes = uint64_t{256} << 20;
  // Arena plus shared workspace and host arena (static plans), or the most
  // bytes of values and scratch live at once (free-at-last-use).
  uint64_t max_arena_bytes = uint64_t{16} << 30;
  // How errors name a limit: "LoadOptions.max_fill_bytes" (the VM's API) or,
  // for a tool, its flag "--max-fill-bytes".
  bool name_flags = false;
};

// kResourceExhausted naming the first limit the file passes and by how much.
Status check_load_limits(const VerifiedModule& module, const LoadLimits& limits);

}  // namespace hexir::format
