// Replaces the global operator new of test_vm to count heap allocations per
// thread, so a test can prove Context::invoke allocates nothing.
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
thread_local uint64_t g_heap_allocations = 0;

void* counted(std::size_t size) {
  ++g_heap_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

namespace hexir::vm::testing {
uint64_t heap_allocations_on_this_thread() { return g_heap_allocations; }
}  // namespace hexir::vm::testing

void* operator new(std::size_t size) { return counted(size); }
void* operator new[](std::size_t size) { return counted(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
