#include "cuda_blas.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#ifndef HEXIR_CUDA_LIB_DIR
#define HEXIR_CUDA_LIB_DIR "/usr/local/cuda/lib64"
#endif

namespace hexir::hal::cuda {
namespace {

constexpr int kOpN = 0;          // CUBLAS_OP_N
constexpr int kOpT = 1;          // CUBLAS_OP_T
constexpr int kDefaultMath = 0;  // CUBLAS_DEFAULT_MATH: full f32, no TF32
constexpr size_t kWorkspaceBytes = size_t{4} << 20;

Result<std::unique_ptr<BlasLibrary>> load_blas() {
  const char* env = std::getenv("HEXIR_CUBLAS");
  const std::string candidates[] = {env && *env ? env : "libcublas.so.13",
                                    HEXIR_CUDA_LIB_DIR "/libcublas.so.13"};
  std::string errors;
  for (const std::string& path : candidates) {
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + std::string(e ? e : path);
      continue;
    }
    auto blas = std::make_unique<BlasLibrary>();
    blas->library = library;
    blas->path = path;
    bool ok = true;
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
      ok = ok && fn != nullptr;
    };
    resolve(blas->create, "cublasCreate_v2");
    resolve(blas->destroy, "cublasDestroy_v2");
    resolve(blas->set_stream, "cublasSetStream_v2");
    resolve(blas->set_math_mode, "cublasSetMathMode");
    resolve(blas->set_workspace, "cublasSetWorkspace_v2");
    resolve(blas->sgemm, "cublasSgemm_v2");
    resolve(blas->sgemm_strided_batched, "cublasSgemmStridedBatched");
    if (!ok) {
      dlclose(library);
      errors += (errors.empty() ? "" : "; ") + path + " lacks a cuBLAS entry point";
      continue;
    }
    return blas;
  }
  return unavailable("cuBLAS not available: " + errors);
}

}  // namespace

Result<const BlasLibrary*> blas_library() {
  static std::once_flag once;
  static std::unique_ptr<BlasLibrary> loaded;
  static Status failure;
  std::call_once(once, [] {
    Result<std::unique_ptr<BlasLibrary>> result = load_blas();
    if (result.ok()) {
      loaded = std::move(result).value();
    } else {
      failure = result.status();
    }
  });
  if (!loaded) return failure;
  return static_cast<const BlasLibrary*>(loaded.get());
}

Result<std::unique_ptr<BlasHandle>> BlasHandle::create(const Driver& driver, const BlasLibrary& blas,
                                                       CUstream stream) {
  std::unique_ptr<BlasHandle> h(new BlasHandle(driver, blas));
  if (int rc = blas.create(&h->handle_); rc != 0) {
    h->handle_ = nullptr;
    return unavailable("cublasCreate failed with status " + std::to_string(rc));
  }
  HEXIR_RETURN_IF_ERROR(
      driver.check(driver.cuMemAlloc_v2(&h->workspace_, kWorkspaceBytes), "cuMemAlloc (cuBLAS workspace)"));
  if (int rc = blas.set_stream(h->handle_, stream); rc != 0)
    return internal_error("cublasSetStream failed with status " + std::to_string(rc));
  if (int rc = blas.set_workspace(h->handle_, reinterpret_cast<void*>(h->workspace_), kWorkspaceBytes);
      rc != 0)
    return internal_error("cublasSetWorkspace failed with status " + std::to_string(rc));
  if (int rc = blas.set_math_mode(h->handle_, kDefaultMath); rc != 0)
    return internal_error("cublasSetMathMode failed with status " + std::to_string(rc));
  return h;
}

BlasHandle::~BlasHandle() {
  if (handle_) blas_.destroy(handle_);
  if (workspace_) driver_.cuMemFree_v2(workspace_);
}

Status BlasHandle::gemm(const GemmBatch& g) {
  // cuBLAS is column-major: row-major C[m,n] = A[m,k] B[k,n] is, read
  // column-major, C^T[n,m] = B^T[n,k] A^T[k,m] with B^T stored as B (ld n).
  // A B stored transposed ([n, k], ld k) reads column-major as B itself: op T.
  const float alpha = 1.0f, beta = 0.0f;
  const int op_b = g.b_transposed ? kOpT : kOpN;
  const int ldb = static_cast<int>(g.ldb > 0 ? g.ldb : (g.b_transposed ? g.k : g.n));
  const int lda = static_cast<int>(g.lda > 0 ? g.lda : g.k);
  int rc;
  if (g.batch == 1) {
    rc = blas_.sgemm(handle_, op_b, kOpN, g.n, g.m, g.k, &alpha, g.b, ldb, g.a, lda, &beta, g.c, g.n);
  } else {
    rc = blas_.sgemm_strided_batched(handle_, op_b, kOpN, g.n, g.m, g.k, &alpha, g.b, ldb, g.stride_b, g.a,
                                     lda, g.stride_a, &beta, g.c, g.n, g.stride_c, g.batch);
  }
  if (rc != 0) return internal_error("cuBLAS sgemm failed with status " + std::to_string(rc));
  return ok_status();
}

}  // namespace hexir::hal::cuda
