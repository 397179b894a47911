#include "alloc_counter.h"
#include "sanitizers.h"

#include <cstdlib>
#include <new>

// ThreadSanitizer's runtime defines the global operator new/delete itself
// (strongly: a second definition does not link), so under it nothing is
// replaced and the count stays 0. The TSan leg of scripts/test.sh runs only
// the concurrency test cases, none of which depends on the count.

namespace {
thread_local uint64_t g_thread_allocations = 0;
thread_local uint64_t g_thread_allocated_bytes = 0;

[[maybe_unused]] void* counted_malloc(std::size_t size) {
  ++g_thread_allocations;
  g_thread_allocated_bytes += size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

namespace hexir::testing {
uint64_t thread_allocation_count() { return g_thread_allocations; }
uint64_t thread_allocated_bytes() { return g_thread_allocated_bytes; }
}  // namespace hexir::testing

#if !HEXIR_TEST_TSAN
// The plain forms; libstdc++'s nothrow and sized forms forward to these.
void* operator new(std::size_t size) { return counted_malloc(size); }
void* operator new[](std::size_t size) { return counted_malloc(size); }
// The nothrow forms too: libstdc++'s forward to the plain ones, but a
// sanitizer runtime (ASan) defines its own, which would then hand out memory
// that the delete above frees with the wrong allocator (alloc-dealloc-mismatch).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++g_thread_allocations;
  g_thread_allocated_bytes += size;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  ++g_thread_allocations;
  g_thread_allocated_bytes += size;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif  // !HEXIR_TEST_TSAN
