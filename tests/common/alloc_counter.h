// Counts global operator new calls (and their bytes) on the current thread, so a
// test can prove a code path (queue dispatch, Context::invoke) allocates nothing.
// alloc_counter.cc replaces the global operator new/delete of the test
// executable it is linked into.
#pragma once

#include <cstdint>

namespace hexir::testing {

uint64_t thread_allocation_count();
// Bytes asked of operator new on this thread so far (freed ones included):
// what a path allocates in all, for tests that bound it by a size.
uint64_t thread_allocated_bytes();

}  // namespace hexir::testing
