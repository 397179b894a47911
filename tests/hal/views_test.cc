// Strided views (docs/views.md): every kernel that takes strides
// (ops::accepts_strided_input) reading a transpose, slice with steps,
// expand (zero strides) or squeeze / unsqueeze of a base in place, against
// the same kernel on the view copied out row-major.
#include <algorithm>
#include <bit>
#include <numeric>

#include "hal_test_util.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;
using ops::ViewLayout;

// A view of `base`: its type, and where it lies in base.
struct View {
  HostTensor* base = nullptr;
  TensorType type;
  ViewLayout layout;
};

// The view `op` (transpose, slice, expand, reshape) with `params` makes of a
// row-major base, or of another view.
View view_of(const View& x, OpId op, const std::vector<int64_t>& params) {
  std::vector<TensorType> in = {x.type};
  Result<TensorType> type = ops::infer_result_type(op, in, params);
  REQUIRE(type.ok());
  std::optional<ViewLayout> layout = ops::result_view_layout(op, x.type, x.layout, params, *type);
  REQUIRE(layout.has_value());
  return View{x.base, *type, *layout};
}

View whole(HostTensor& base) { return View{&base, base.type(), {}}; }

// The view copied out row-major, element by element (the reference).
HostTensor materialize(const View& v) {
  HostTensor out(v.type.dtype, v.type.dims);
  const size_t element = dtype_size(v.type.dtype);
  std::vector<int64_t> strides = v.layout.strides;
  if (strides.empty()) strides = row_major_strides(v.type.dims);
  for (int64_t i = 0; i < out.count(); ++i) {
    const auto index = unravel(i, v.type.dims);
    int64_t at = v.layout.offset;
    for (size_t d = 0; d < index.size(); ++d) at += index[d] * strides[d];
    std::memcpy(&out.bytes[static_cast<size_t>(i) * element], &v.base->bytes[static_cast<size_t>(at) * element],
                element);
  }
  return out;
}

// Runs `id` on the views in place: operand pointers at each view's offset,
// its strides in the plan, as the VM prepares a strided slot.
Status run_on_views(OpId id, const std::vector<View>& inputs, HostTensor& out, const std::vector<int64_t>& params) {
  std::vector<TensorType> in_types;
  std::vector<std::vector<int64_t>> strides;
  for (const View& v : inputs) {
    in_types.push_back(v.type);
    strides.push_back(v.layout.strides);
  }
  std::vector<TensorType> out_types = {out.type()};
  HEXIR_ASSIGN_OR_RETURN(ops::OpPlan plan, ops::plan_op(id, in_types, out_types, params, strides));
  cpu::KernelFn fn = cpu::find_cpu_kernel(ops::kernel_key(id, in_types, out_types));
  if (fn == nullptr) return unimplemented("no cpu kernel");
  std::vector<void*> operands;
  for (const View& v : inputs)
    operands.push_back(v.base->bytes.data() + static_cast<size_t>(v.layout.offset) * dtype_size(v.type.dtype));
  operands.push_back(out.bytes.data());
  Dispatch d;
  d.kernel = reinterpret_cast<uintptr_t>(fn);
  d.plan = plan.words().data();
  d.operands = operands.data();
  d.input_count = static_cast<uint32_t>(inputs.size());
  d.output_count = 1;
  return fn(KernelContext{}, d);
}

// `id` on the views in place gives the bits it gives on their row-major copies
// (reductions: within rounding, their order of summation may differ).
void check_against_copies(OpId id, const std::vector<View>& inputs, const std::vector<int64_t>& params = {},
                          bool exact = true) {
  std::vector<HostTensor> copies;
  for (const View& v : inputs) copies.push_back(materialize(v));
  std::vector<HostTensor*> copy_ptrs;
  for (HostTensor& c : copies) copy_ptrs.push_back(&c);
  std::vector<TensorType> types;
  for (const View& v : inputs) types.push_back(v.type);
  Result<TensorType> result = ops::infer_result_type(id, types, params);
  REQUIRE(result.ok());
  HostTensor want(result->dtype, result->dims), got(result->dtype, result->dims);
  REQUIRE(run_kernel(id, copy_ptrs, want, params).ok());
  REQUIRE(run_on_views(id, inputs, got, params).ok());
  if (exact) {
    CHECK(got.bytes == want.bytes);
  } else {
    std::vector<double> w(want.f32(), want.f32() + want.count());
    check_close(got, w, 1e-5, 1e-5);
  }
}

// A strided view's copy is the copy kernel's output, bit for bit.
void check_copy(const View& v) {
  HostTensor want = materialize(v);
  HostTensor got(v.type.dtype, v.type.dims);
  REQUIRE(run_on_views(OpId::kCopy, {v}, got, {}).ok());
  CHECK(got.bytes == want.bytes);
}

std::vector<int64_t> iota_perm(size_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  return perm;
}

const OpId kUnaryOps[] = {OpId::kRelu, OpId::kExp, OpId::kTanh, OpId::kErf, OpId::kHardSwish, OpId::kNeg, OpId::kAbs};

TEST_CASE("views: unary maps read transpose views of rank 2, 3 and 4 (every perm) in place") {
  // {3, 2, 37}: rows longer than a vector block where a perm keeps the last dim (read in place);
  // {2, 70, 20}: a transpose of the last two dims past a 16 x 64 tile of the block maps.
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{3, 5}, {2, 3, 4}, {2, 3, 1, 5}, {3, 2, 37}, {2, 70, 20}}) {
    HostTensor base = random_f32(dims, 11);
    std::vector<int64_t> perm = iota_perm(dims.size());
    do {
      INFO(dims_string(dims) << " perm " << dims_string(perm));
      const View t = view_of(whole(base), OpId::kTranspose, perm);
      for (OpId op : kUnaryOps) check_against_copies(op, {t});
      check_against_copies(OpId::kGelu, {t}, {0});  // erf (a block map)
      check_against_copies(OpId::kGelu, {t}, {1});  // the tanh form
      check_against_copies(OpId::kClip, {t}, {std::bit_cast<int64_t>(-0.5), std::bit_cast<int64_t>(0.5)});
      check_against_copies(OpId::kHardSigmoid, {t}, {std::bit_cast<int64_t>(0.2), std::bit_cast<int64_t>(0.5)});
      check_copy(t);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST_CASE("views: slices with steps, offsets and size-1 dims") {
  HostTensor base = random_f32({6, 7, 9}, 3);
  // [start, step, size] per dim.
  const View s1 = view_of(whole(base), OpId::kSlice, {1, 2, 3, 0, 1, 7, 2, 3, 3});
  const View s2 = view_of(whole(base), OpId::kSlice, {5, 1, 1, 2, 4, 2, 0, 1, 9});
  const View s3 = view_of(whole(base), OpId::kSlice, {2, 1, 3, 0, 1, 7, 0, 1, 9});  // contiguous at an offset
  CHECK(s3.layout.offset == 2 * 63);
  CHECK(!s3.layout.strided());
  for (const View& v : {s1, s2, s3}) {
    for (OpId op : kUnaryOps) check_against_copies(op, {v});
    check_copy(v);
  }
  // A slice of a transpose view.
  const View t = view_of(whole(base), OpId::kTranspose, {2, 0, 1});
  const View ts = view_of(t, OpId::kSlice, {1, 3, 3, 1, 2, 2, 0, 1, 7});
  check_against_copies(OpId::kSqrt, {ts});
  check_copy(ts);
}

TEST_CASE("views: expand gives zero strides; binary ops broadcast strided operands") {
  HostTensor row = random_f32({1, 5}, 5);
  HostTensor col = random_f32({4, 1}, 6);
  const View er = view_of(whole(row), OpId::kExpand, {3, 4, 5});
  CHECK(er.layout.strides == std::vector<int64_t>{0, 0, 1});
  check_against_copies(OpId::kExp, {er});
  check_copy(er);
  const View ec = view_of(whole(col), OpId::kExpand, {4, 5});
  CHECK(ec.layout.strides == std::vector<int64_t>{1, 0});
  HostTensor m = random_f32({5, 4}, 8);
  const View mt = view_of(whole(m), OpId::kTranspose, {1, 0});  // [4, 5]
  for (OpId op : {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kPow, OpId::kLess}) {
    check_against_copies(op, {ec, mt});
    check_against_copies(op, {mt, whole(col)});  // strided a, broadcast row-major b
    check_against_copies(op, {whole(row), mt});  // row-major a broadcast over strided b
  }
  // add with its fused epilogue (relu) over two transposes.
  HostTensor m2 = random_f32({5, 4}, 9);
  const View m2t = view_of(whole(m2), OpId::kTranspose, {1, 0});
  check_against_copies(OpId::kAdd, {mt, m2t}, {1, 0, 0});
}

TEST_CASE("views: squeeze and unsqueeze of a strided view keep strides; reshapes that merge refuse") {
  HostTensor base = random_f32({4, 1, 6}, 12);
  const View t = view_of(whole(base), OpId::kTranspose, {2, 1, 0});   // [6, 1, 4]
  const View squeezed = view_of(t, OpId::kReshape, {6, 4});          // drops the 1
  const View unsqueezed = view_of(squeezed, OpId::kReshape, {1, 6, 1, 4});
  CHECK(squeezed.layout.strides == std::vector<int64_t>{1, 6});
  for (const View& v : {squeezed, unsqueezed}) {
    check_against_copies(OpId::kRelu, {v});
    check_copy(v);
  }
  // Merging two dims whose strides do not line up has no view.
  const TensorType flat{DType::kF32, {24}};
  CHECK(!ops::result_view_layout(OpId::kReshape, squeezed.type, squeezed.layout, std::vector<int64_t>{24}, flat).has_value());
  // Splitting a dim of a strided view does.
  const View split = view_of(squeezed, OpId::kReshape, {2, 3, 4});
  CHECK(split.layout.strides == std::vector<int64_t>{3, 1, 6});
  check_copy(split);
  // A negative step has no view (the kernel of slice copies it).
  const TensorType two{DType::kF32, {2, 1, 6}};
  CHECK(!ops::result_view_layout(OpId::kSlice, base.type(), {}, std::vector<int64_t>{3, -2, 2, 0, 1, 1, 0, 1, 6}, two).has_value());
}

TEST_CASE("views: reductions over transpose and slice views") {
  HostTensor base = random_f32({3, 4, 5}, 21);
  const View t = view_of(whole(base), OpId::kTranspose, {2, 0, 1});
  const View s = view_of(whole(base), OpId::kSlice, {0, 2, 2, 1, 1, 3, 0, 2, 3});
  for (const View& v : {t, s}) {
    for (OpId op : {OpId::kReduceSum, OpId::kReduceMean, OpId::kReduceMax}) {
      check_against_copies(op, {v}, {1}, false);        // all axes, keepdims
      check_against_copies(op, {v}, {0, 2}, false);     // the last axis
      check_against_copies(op, {v}, {0, 0, 1}, false);  // the first two
    }
  }
}

TEST_CASE("views: matmul reads a and b with a row stride and batch strides (the heads of an attention)") {
  // [seq 5, heads 3, dh 4] split into heads: [3, 5, 4] with strides [4, 12, 1].
  HostTensor q = random_f32({5, 3, 4}, 31), k = random_f32({5, 3, 4}, 32), v = random_f32({5, 3, 4}, 33);
  const View qh = view_of(whole(q), OpId::kTranspose, {1, 0, 2});
  const View kh = view_of(whole(k), OpId::kTranspose, {1, 0, 2});
  const View vh = view_of(whole(v), OpId::kTranspose, {1, 0, 2});
  CHECK(qh.layout.strides == std::vector<int64_t>{4, 12, 1});
  CHECK(ops::accepts_strided_layout(OpId::kMatmul, 0, qh.type.dims, qh.layout.strides));
  check_against_copies(OpId::kMatmul, {qh, kh}, {1}, false);  // q k^T through transpose_b
  HostTensor p = random_f32({3, 5, 5}, 34);
  check_against_copies(OpId::kMatmul, {whole(p), vh}, {0}, false);  // p v
  // A slice of rows at a stride, one matrix broadcast over a batch.
  HostTensor a = random_f32({7, 9}, 35), w = random_f32({2, 6, 3}, 36);
  const View rows = view_of(whole(a), OpId::kSlice, {1, 2, 3, 2, 1, 6});  // [3, 6], strides [18, 1]
  check_against_copies(OpId::kMatmul, {rows, whole(w)}, {0}, false);
  // Not as it lies: a column stride other than 1.
  const View at = view_of(whole(a), OpId::kTranspose, {1, 0});
  CHECK(!ops::accepts_strided_layout(OpId::kMatmul, 0, at.type.dims, at.layout.strides));
  CHECK(!ops::accepts_strided_layout(OpId::kMatmul, 2, qh.type.dims, qh.layout.strides));  // the bias
}

TEST_CASE("views: copy of strided views of every element size; plan_op refuses strides where they are not read") {
  for (DType dtype : {DType::kU8, DType::kF16, DType::kI32, DType::kI64, DType::kBool}) {
    HostTensor base = iota_bytes(dtype, {3, 4, 2});
    check_copy(view_of(whole(base), OpId::kTranspose, {1, 2, 0}));
    check_copy(view_of(whole(base), OpId::kSlice, {1, 1, 2, 0, 3, 2, 1, 1, 1}));
  }
  // softmax reads row-major only; so does a matmul operand.
  const std::vector<TensorType> x = {TensorType{DType::kF32, {2, 3}}};
  const std::vector<std::vector<int64_t>> strided = {{1, 2}};
  CHECK(ops::plan_op(OpId::kSoftmax, x, x, std::vector<int64_t>{1}, strided).status().code() == StatusCode::kInvalidArgument);
  CHECK(ops::plan_op(OpId::kRelu, x, x, std::vector<int64_t>{}, strided).ok());
  CHECK(!ops::accepts_strided_input(OpId::kMatmul, 0));
  CHECK(!ops::accepts_strided_input(OpId::kWhere, 1));
  CHECK(ops::accepts_strided_input(OpId::kAdd, 1));
  CHECK(!ops::accepts_strided_input(OpId::kAdd, 2));
}

TEST_CASE("views: view_last_element is overflow-safe") {
  CHECK(ops::view_last_element(std::vector<int64_t>{2, 3}, 0, {}) == 5);
  CHECK(ops::view_last_element(std::vector<int64_t>{2, 3}, 4, std::vector<int64_t>{1, 2}) == 9);
  CHECK(ops::view_last_element(std::vector<int64_t>{4, 0}, 100, std::vector<int64_t>{1, 1}) == -1);  // empty
  CHECK(ops::view_last_element(std::vector<int64_t>{5}, 0, std::vector<int64_t>{0}) == 0);           // broadcast
  CHECK(!ops::view_last_element(std::vector<int64_t>{3}, 0, std::vector<int64_t>{-1}).has_value());
  CHECK(!ops::view_last_element(std::vector<int64_t>{3}, -1, {}).has_value());
  CHECK(!ops::view_last_element(std::vector<int64_t>{3}, 0, std::vector<int64_t>{INT64_MAX / 2 + 1}).has_value());
  CHECK(!ops::view_last_element(std::vector<int64_t>{2}, INT64_MAX, std::vector<int64_t>{1}).has_value());
}

}  // namespace
}  // namespace hexir::hal::testing
