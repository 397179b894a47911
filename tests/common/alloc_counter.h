// Counts global operator new calls on the current thread, so a test can prove
// a code path (queue dispatch, Context::invoke) allocates nothing.
// alloc_counter.cc replaces the global operator new/delete of the test
// executable it is linked into.
#pragma once

#include <cstdint>

namespace hexir::testing {

uint64_t thread_allocation_count();

}  // namespace hexir::testing
