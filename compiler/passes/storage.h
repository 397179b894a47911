// Storage: where every value of a function lives (the first pass on each
// function; it starts the plan and builds the program), and the buffers that
// values share: a view its root's, an in-place result its input's.
#pragma once

#include <cstdint>
#include <vector>

#include "hexir/compiler/graph.h"
#include "ir/plan.h"

namespace hexir::compiler {

// Starts `plan` for `fn`: decides where every value lives and builds the program:
//  - inputs are Input bindings, constants Constant slots, node results Arena;
//  - a view (reshape) emits nothing and shares the storage root of its input;
//  - a returned value's root becomes Output storage, so its producer writes
//    into the caller's buffer; returning an input, a constant, or a root
//    already bound to an earlier output adds an explicit copy instead;
//  - a donated input gets donated_to = the first free output of its type.
// A node with several results is one instruction with several outputs; each
// result is a value with storage of its own.
// strided_views (docs/views.md): a transpose, slice (steps > 0), expand, or
// reshape of such a view, at the top level of the function, emits nothing
// either: its result is a view with an offset and strides into the value it
// views, read in place by the kernels that take strides
// (ops::accepts_strided_input). A view that some reader needs row-major (or
// that is returned, or read inside a loop or an if) is materialized once
// where its node was: one copy instruction from the strided view, shared by
// every reader, never more bytes than the node itself moved.
// Cost rule: a permuted view (inner stride neither 1 nor 0: a transpose
// of the last dim, a step along it) read by more than one kernel is
// materialized too, unless its base is at most kPermutedViewCacheBytes (views.h).
void assign_storage(const Function& fn, FunctionPlan& plan, bool strided_views = false);

// Bytes the instructions of `plan` move without computing: the results of
// transpose, slice, expand and copy (a loop's body counted once).
uint64_t copied_bytes(const Function& fn, const FunctionPlan& plan);

// The head of the buffer `value` lives in: its storage root, then the
// buffer_prev links (in-place results and donated destinations) followed to
// the value that owns the buffer (an arena value, an input, a constant).
// Walks the chain: O(its length). Passes that need many heads use BufferHeads.
int buffer_head(const FunctionPlan& plan, int value);

// The buffer heads of every value of a plan, in amortized near-constant time
// per query however long the chains (a chain of N in-place results would make
// N calls of buffer_head cost O(N^2)). A union-find over the links: each
// value points at a value further along its chain (its storage root, or its
// root's buffer_prev's root), and queries shorten the paths they follow.
// Stays right when a pass links a head onto another buffer with link().
class BufferHeads {
 public:
  explicit BufferHeads(const FunctionPlan& plan);
  int head(int value);
  // `value`'s buffer, whose head was `value` itself, now continues `onto`'s.
  void link(int value, int onto);

 private:
  std::vector<int> up_;
};

}  // namespace hexir::compiler
