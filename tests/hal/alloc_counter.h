// Counts global operator new calls on the current thread, so tests can prove
// a code path (queue dispatch) allocates nothing. alloc_counter.cc replaces
// the global operator new/delete of the test executable.
#pragma once

#include <cstdint>

namespace hexir::hal::testing {

uint64_t thread_allocation_count();

}  // namespace hexir::hal::testing
