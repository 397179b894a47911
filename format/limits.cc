#include "hexir/format/limits.h"

#include <string>

#include "hexir/format/verifier.h"
#include "hexir_generated.h"

namespace hexir::format {
namespace {

uint64_t saturating_add(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

// "the limit LoadOptions.max_fill_bytes = N" or "the limit --max-fill-bytes N".
std::string limit(const LoadLimits& limits, const char* field, uint64_t value) {
  if (!limits.name_flags) return "the limit LoadOptions." + std::string(field) + " = " + std::to_string(value);
  std::string flag = "--" + std::string(field);
  for (char& c : flag)
    if (c == '_') c = '-';
  return "the limit " + flag + " " + std::to_string(value);
}

}  // namespace

Status check_load_limits(const VerifiedModule& module, const LoadLimits& limits) {
  const fb::Module& m = *module.module;
  uint64_t raw = 0;
  if (m.sections())
    for (const fb::Section* s : *m.sections())
      if (s->compression() == fb::Compression::Zstd) raw = saturating_add(raw, s->raw_size());
  if (raw > limits.max_decompressed_bytes)
    return resource_exhausted("zstd sections decompress to " + std::to_string(raw) + " bytes, more than " +
                              limit(limits, "max_decompressed_bytes", limits.max_decompressed_bytes));
  uint64_t fill = 0;
  if (m.constants())
    for (const fb::Constant* c : *m.constants())
      if (c->storage() == fb::ConstantStorage::Fill) fill = saturating_add(fill, c->byte_size());
  if (fill > limits.max_fill_bytes)
    return resource_exhausted("fill constants make " + std::to_string(fill) + " bytes, more than " +
                              limit(limits, "max_fill_bytes", limits.max_fill_bytes));
  const fb::ArenaPlan& plan = *m.arena();
  if (plan.strategy() == fb::PlanStrategy::FreeAtLastUse) {
    if (module.dynamic_peak_bytes > limits.max_arena_bytes)
      return resource_exhausted("the free-at-last-use plan holds up to " + std::to_string(module.dynamic_peak_bytes) +
                                " bytes of values and scratch, more than " +
                                limit(limits, "max_arena_bytes", limits.max_arena_bytes));
  } else if (saturating_add(saturating_add(plan.size(), plan.workspace_size()), plan.host_size()) >
             limits.max_arena_bytes) {
    return resource_exhausted("the arena plan needs " + std::to_string(plan.size()) + " bytes of arena and " +
                              std::to_string(plan.workspace_size()) + " of workspace (and " +
                              std::to_string(plan.host_size()) + " of host arena), more than " +
                              limit(limits, "max_arena_bytes", limits.max_arena_bytes));
  }
  return ok_status();
}

}  // namespace hexir::format
