#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace hexir::hal::cuda {

std::string Driver::error_text(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  std::string out = name ? name : "CUresult";
  out += " (" + std::to_string(static_cast<int>(result)) + ")";
  if (text) out += std::string(": ") + text;
  return out;
}

Status Driver::check(CUresult result, const char* what) const {
  if (result == CUDA_SUCCESS) return ok_status();
  const std::string message = std::string(what) + " failed: " + error_text(result);
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return resource_exhausted(message);
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return invalid_argument(message);
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return unavailable(message);
    default:
      return internal_error(message);
  }
}

Result<std::unique_ptr<Driver>> load_driver(const char* path) {
  constexpr const char* kPrefix = "CUDA driver not available: ";
  dlerror();  // clear
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return unavailable(kPrefix + std::string(error ? error : path));
  }
  auto driver = std::make_unique<Driver>();
  driver->library = library;
  std::string missing;
#define HEXIR_CUDA_RESOLVE(symbol)                                                      \
  driver->symbol = reinterpret_cast<decltype(driver->symbol)>(dlsym(library, #symbol)); \
  if (driver->symbol == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#symbol);
  HEXIR_CUDA_DRIVER_SYMBOLS(HEXIR_CUDA_RESOLVE)
#undef HEXIR_CUDA_RESOLVE
  if (!missing.empty()) {
    dlclose(library);
    return unavailable(kPrefix + std::string(path) + " lacks " + missing +
                       " (a driver older than this build's CUDA 13 toolkit?)");
  }
  const CUresult init = driver->cuInit(0);
  if (init != CUDA_SUCCESS) {
    std::string reason = "cuInit failed: " + driver->error_text(init);
    if (init == CUDA_ERROR_STUB_LIBRARY) {
      reason = "cuInit returned CUDA_ERROR_STUB_LIBRARY (34): " + std::string(path) +
               " is the toolkit's link stub, not a real driver";
    }
    dlclose(library);
    return unavailable(kPrefix + reason);
  }
  if (driver->cuDriverGetVersion(&driver->version) != CUDA_SUCCESS) driver->version = 0;
  // The embedded kernels come from this build's toolkit; an older major driver cannot load them.
  if (driver->version / 1000 < CUDA_VERSION / 1000) {
    const std::string have =
        std::to_string(driver->version / 1000) + "." + std::to_string(driver->version % 1000 / 10);
    dlclose(library);
    return unavailable(kPrefix + std::string("the driver supports CUDA ") + have +
                       "; this build's kernels need CUDA " + std::to_string(CUDA_VERSION / 1000) +
                       ".x or newer (update the NVIDIA driver)");
  }
  return driver;
}

Result<const Driver*> driver() {
  static std::once_flag once;
  static std::unique_ptr<Driver> loaded;
  static Status failure;
  std::call_once(once, [] {
    const char* path = std::getenv("HEXIR_CUDA_DRIVER");
    Result<std::unique_ptr<Driver>> result = load_driver(path && *path ? path : "libcuda.so.1");
    if (result.ok()) {
      loaded = std::move(result).value();
    } else {
      failure = result.status();
    }
  });
  if (!loaded) return failure;
  return static_cast<const Driver*>(loaded.get());
}

}  // namespace hexir::hal::cuda
