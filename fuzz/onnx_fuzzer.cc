// libFuzzer entry point; see fuzz_targets.h.
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hexir::fuzz::import_onnx_bytes(data, size);
  return 0;
}
