// Strided views (docs/views.md): which transposes, slices, expands and
// reshapes become views into the value they read, and which are materialized
// with one copy. assign_storage (storage.h) builds the program from it.
#pragma once

#include <cstdint>
#include <vector>

#include "hexir/compiler/graph.h"
#include "hexir/ops/op.h"

namespace hexir::compiler {

// A base of at most this many bytes is read through a permuted view by any
// number of kernels. 256 KiB is the low end of a core's L2 (256 KiB to
// 2 MiB per core on current x86 and Arm server and desktop parts), so the
// second and later column walks over such a base hit cache, where a copy
// would write all its bytes once more; over a larger base every walk misses
// about once per element (each element of a column in a line of its own).
constexpr uint64_t kPermutedViewCacheBytes = 256 * 1024;

// Which view-able nodes become views and which materialize their view with
// a copy, and where every view lies in the value it views.
struct StridedViews {
  enum Kind : uint8_t { kAsBefore, kView, kMaterialize };
  std::vector<uint8_t> node;            // per node
  std::vector<int> root;                // per graph value: the value whose storage it views (itself if none)
  std::vector<ops::ViewLayout> layout;  // per graph value: where it lies in root
  // kMaterialize nodes: the layout in root[input] of the view their copy reads.
  std::vector<ops::ViewLayout> source;
};

// The views of `fn` at its top level (a view computed inside a loop or an if
// reads a row-major value materialized outside it), with the materializations
// that the readers (a kernel that reads only row-major, a return, a region)
// and the cost rule (kPermutedViewCacheBytes) ask for. `innermost`:
// innermost_regions(fn).
StridedViews plan_strided_views(const Function& fn, const std::vector<int>& innermost);

}  // namespace hexir::compiler
