// Just enough of CUDA's device-side language to compile hal/cuda/kernels/*.cu
// as host C++ and run a launch with real threads: one std::thread per thread
// of a block, blocks run one after another, __syncthreads is a std::barrier
// and __shared__ memory is a function-local static. Used to test the kernels
// and the dispatcher's launch shapes on machines without a GPU; speed is not a goal.
#pragma once

#include <math.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

namespace hexir::cuda_emulation {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

inline thread_local Dim3 thread_index, block_index;
inline thread_local unsigned sync_count = 0;
inline Dim3 block_dim, grid_dim;
inline std::barrier<>* block_barrier = nullptr;

// Runs kernel(params) over the grid. Returns false when the threads of a block
// reached __syncthreads a different number of times (a divergent barrier,
// undefined behaviour on a GPU). Kernels that never synchronize (`barriers`
// false) run their threads one after another on the calling thread.
template <typename Params>
bool run(void (*kernel)(Params), const unsigned grid[3], const unsigned block[3], const Params& params,
         bool barriers) {
  block_dim = {block[0], block[1], block[2]};
  grid_dim = {grid[0], grid[1], grid[2]};
  const unsigned threads = block[0] * block[1] * block[2];
  if (!barriers) {
    for (unsigned z = 0; z < grid[2]; ++z)
      for (unsigned y = 0; y < grid[1]; ++y)
        for (unsigned x = 0; x < grid[0]; ++x)
          for (unsigned t = 0; t < threads; ++t) {
            block_index = {x, y, z};
            thread_index = {t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])};
            kernel(params);
          }
    return true;
  }
  std::barrier<> barrier(static_cast<std::ptrdiff_t>(threads));
  block_barrier = &barrier;
  std::vector<unsigned> counts(threads);
  std::atomic<bool> divergent{false};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      thread_index = {t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])};
      for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
          for (unsigned x = 0; x < grid[0]; ++x) {
            block_index = {x, y, z};
            sync_count = 0;
            kernel(params);
            counts[t] = sync_count;
            barrier.arrive_and_wait();
            if (t == 0)
              for (unsigned c : counts)
                if (c != counts[0]) divergent = true;
            barrier.arrive_and_wait();
          }
    });
  }
  for (std::thread& thread : pool) thread.join();
  block_barrier = nullptr;
  return !divergent;
}

}  // namespace hexir::cuda_emulation

#define threadIdx ::hexir::cuda_emulation::thread_index
#define blockIdx ::hexir::cuda_emulation::block_index
#define blockDim ::hexir::cuda_emulation::block_dim
#define gridDim ::hexir::cuda_emulation::grid_dim

inline void __syncthreads() {
  if (::hexir::cuda_emulation::block_barrier == nullptr) {
    std::fprintf(stderr, "cuda emulation: __syncthreads in a kernel run without barriers\n");
    std::abort();
  }
  ++::hexir::cuda_emulation::sync_count;
  ::hexir::cuda_emulation::block_barrier->arrive_and_wait();
}

inline float __int_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline float __uint_as_float(unsigned bits) { return __int_as_float(bits); }
// The signed form of dp4a: c + the sum of the four products of a's and b's
// signed bytes (the wrapping int32 add of the hardware).
inline int __dp4a(int a, int b, int c) {
  uint32_t sum = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i)
    sum += static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
                                 static_cast<int32_t>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i))));
  return static_cast<int>(sum);
}
inline unsigned __float_as_uint(float f) {
  unsigned bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
