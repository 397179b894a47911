// libFuzzer entry point; see fuzz_targets.h (compare_plans). A difference
// between plans, or a variant that fails on a valid program, is a finding.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string difference = hexir::fuzz::compare_plans(data, size);
  if (!difference.empty()) {
    std::fprintf(stderr, "plan_diff: %s\n", difference.c_str());
    std::abort();
  }
  return 0;
}
