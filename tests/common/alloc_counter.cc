#include "alloc_counter.h"

#include <cstdlib>
#include <new>

namespace {
thread_local uint64_t g_thread_allocations = 0;

void* counted_malloc(std::size_t size) {
  ++g_thread_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

namespace hexir::testing {
uint64_t thread_allocation_count() { return g_thread_allocations; }
}  // namespace hexir::testing

// The plain forms; libstdc++'s nothrow and sized forms forward to these.
void* operator new(std::size_t size) { return counted_malloc(size); }
void* operator new[](std::size_t size) { return counted_malloc(size); }
// The nothrow forms too: libstdc++'s forward to the plain ones, but a
// sanitizer runtime (ASan) defines its own, which would then hand out memory
// that the delete above frees with the wrong allocator (alloc-dealloc-mismatch).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  ++g_thread_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  ++g_thread_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
