// Byte-moving kernels of any dtype: the strided gather behind transpose and
// slice (by element size), the strided copy concat and split are made of,
// gather (numpy.take), pad, the run-time windows of dynamic_slice and
// update_slice, scatter_nd and scatter_elements, gather_elements and
// gather_nd, and the pattern fill behind
// Device::fill.
#include "common.cuh"

namespace hexir_kernels {

// Output element i (row-major over out_dims) is input element
// offset + sum(index[d] * in_stride[d]); slice strides may be negative.
template <typename Element>
__device__ void strided(const StridedParams& p) {
  const hexir::ops::StridedPlan& q = p.plan;
  const Element* in = static_cast<const Element*>(p.in) + q.offset;
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < q.n; i += stride) {
    int64_t rest = i, offset = 0;
    for (int d = q.rank - 1; d >= 0; --d) {
      offset += (rest % q.out_dims[d]) * q.in_stride[d];
      rest /= q.out_dims[d];
    }
    out[i] = in[offset];
  }
}

template <typename Unit>
__device__ void strided_copy(const StridedCopyParams& p) {
  const int64_t per_row = p.row_bytes / static_cast<int64_t>(sizeof(Unit));
  const int64_t n = p.rows * per_row;
  const int64_t src_pitch = p.src_pitch / static_cast<int64_t>(sizeof(Unit));
  const int64_t dst_pitch = p.dst_pitch / static_cast<int64_t>(sizeof(Unit));
  const Unit* src = static_cast<const Unit*>(p.src);
  Unit* dst = static_cast<Unit*>(p.dst);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < n; i += stride) {
    const int64_t r = i / per_row, c = i % per_row;
    dst[r * dst_pitch + c] = src[r * src_pitch + c];
  }
}

// Output [outer, index_count, inner]: one thread per unit of the output. An
// index outside [-axis_dim, axis_dim) writes zeros (the cpu kernel returns an
// error instead; a kernel cannot).
template <typename Unit, typename Index>
__device__ void gather(const GatherParams& p) {
  const hexir::ops::GatherPlan& q = p.plan;
  const int64_t inner = q.inner_bytes / static_cast<int64_t>(sizeof(Unit));
  const int64_t n = q.outer * q.index_count * inner;
  const Unit* data = static_cast<const Unit*>(p.data);
  const Index* indices = static_cast<const Index*>(p.indices);
  Unit* out = static_cast<Unit*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < n; i += stride) {
    const int64_t row = i / inner, c = i % inner;
    const int64_t o = row / q.index_count, j = row % q.index_count;
    int64_t index = static_cast<int64_t>(indices[j]);
    if (index < 0) index += q.axis_dim;
    if (index < 0 || index >= q.axis_dim) {
      out[i] = Unit{};
    } else {
      out[i] = data[(o * q.axis_dim + index) * inner + c];
    }
  }
}

template <typename Unit>
__device__ void gather_any_index(const GatherParams& p) {
  if (p.plan.index_i64) {
    gather<Unit, int64_t>(p);
  } else {
    gather<Unit, int32_t>(p);
  }
}

// pad: one thread per output element; ops::pad_source_index per dim, or the constant.
template <typename Element>
__device__ void pad(const PadParams& p) {
  const hexir::ops::PadPlan& q = p.plan;
  const Element* in = static_cast<const Element*>(p.in);
  Element* out = static_cast<Element*>(p.out);
  const Element value = static_cast<Element>(static_cast<uint64_t>(q.value));
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < q.n; i += stride) {
    int64_t rest = i, offset = 0;
    bool constant = false;
    for (int d = q.rank - 1; d >= 0; --d) {
      const int64_t source = hexir::ops::pad_source_index(q, d, rest % q.out_dims[d]);
      rest /= q.out_dims[d];
      constant = constant || source < 0;
      offset += source * q.in_stride[d];
    }
    out[i] = constant ? value : in[offset];
  }
}

// The offset of the window's first element in x: the start indices read from
// device memory by every thread (a few cached loads), clamped.
__device__ inline int64_t window_origin(const WindowParams& p) {
  const hexir::ops::WindowPlan& q = p.plan;
  int64_t origin = 0;
  for (int d = 0; d < q.rank; ++d)
    origin += hexir::ops::window_start(*p.starts[d], q.dims[d], q.window[d]) * q.stride[d];
  return origin;
}

// dynamic_slice: window element i from x.
template <typename Element>
__device__ void dynamic_slice(const WindowParams& p) {
  const int64_t origin = window_origin(p);
  const Element* x = static_cast<const Element*>(p.x);
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < p.plan.n; i += stride)
    out[i] = x[hexir::ops::window_offset(p.plan, origin, i)];
}

// update_slice: update element i into the window of out (which holds x).
template <typename Element>
__device__ void update_slice(const WindowParams& p) {
  // out_of_range skip or fail: a window that would leave x writes nothing
  // (fail: after a negative start is counted from the end; no error path here).
  int64_t origin = window_origin(p);
  if (p.plan.out_of_range != hexir::ops::kWindowClamp) {
    origin = 0;
    for (int d = 0; d < p.plan.rank; ++d) {
      const int64_t start = hexir::ops::window_start_unclamped(*p.starts[d], p.plan.dims[d], p.plan.out_of_range);
      if (!hexir::ops::window_inside(start, p.plan.dims[d], p.plan.window[d])) return;
      origin += start * p.plan.stride[d];
    }
  }
  const Element* update = static_cast<const Element*>(p.update);
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < p.plan.n; i += stride)
    out[hexir::ops::window_offset(p.plan, origin, i)] = update[i];
}

// scatter_nd: one thread per slice element, over the index tuples in order;
// scatter_elements: one thread per line of updates along the axis (every
// other coordinate fixed), along it in order. No two threads touch one
// element, so duplicate indices resolve as on the cpu (the last update, or
// all combined in order), without atomics. An index out of range lands
// nowhere (the cpu kernel fails the invoke instead; a kernel cannot).
template <typename T, typename Index>
__device__ void scatter(const ScatterParams& p) {
  const hexir::ops::ScatterPlan& q = p.plan;
  const Index* indices = static_cast<const Index*>(p.indices);
  const T* updates = static_cast<const T*>(p.updates);
  T* out = static_cast<T*>(p.out);
  const int64_t stride = global_stride();
  if (q.depth > 0) {
    for (int64_t c = global_index(); c < q.slice; c += stride)
      for (int64_t t = 0; t < q.tuples; ++t) {
        int64_t offset = 0;
        bool inside = true;
        for (int d = 0; d < q.depth; ++d) {
          const int64_t index =
              hexir::ops::scatter_index(static_cast<int64_t>(indices[t * q.depth + d]), q.data_dims[d]);
          inside = inside && index >= 0;
          offset += index * q.data_stride[d];
        }
        if (inside)
          out[offset + c] =
              hexir::ops::scatter_combine(out[offset + c], updates[t * q.slice + c], q.reduction);
      }
    return;
  }
  const int64_t length = q.index_dims[q.axis];
  const int64_t lines = length == 0 ? 0 : q.n / length;
  int64_t inner = 1;
  for (int d = q.axis + 1; d < q.rank; ++d) inner *= q.index_dims[d];
  for (int64_t line = global_index(); line < lines; line += stride) {
    const int64_t first = (line / inner) * length * inner + line % inner;
    for (int64_t j = 0; j < length; ++j) {
      const int64_t i = first + j * inner;
      const int64_t index = hexir::ops::scatter_index(static_cast<int64_t>(indices[i]), q.data_dims[q.axis]);
      if (index < 0) continue;
      const int64_t offset = hexir::ops::scatter_elements_offset(q, i, index);
      out[offset] = hexir::ops::scatter_combine(out[offset], updates[i], q.reduction);
    }
  }
}

template <typename T>
__device__ void scatter_any_index(const ScatterParams& p) {
  if (p.plan.index_i64) {
    scatter<T, int64_t>(p);
  } else {
    scatter<T, int32_t>(p);
  }
}

// gather_elements (depth 0) and gather_nd: result element i reads where
// the scatters' update i lands. An index out of range reads a zero (the
// cpu kernel fails the invoke instead; a kernel cannot).
template <typename Element, typename Index>
__device__ void gather_indexed(const GatherIndexedParams& p) {
  const hexir::ops::ScatterPlan& q = p.plan;
  const Element* data = static_cast<const Element*>(p.data);
  const Index* indices = static_cast<const Index*>(p.indices);
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < q.n; i += stride) {
    int64_t offset;
    if (q.depth > 0) {
      offset = hexir::ops::nd_tuple_offset(q, indices, i / q.slice);
      if (offset >= 0) offset += i % q.slice;
    } else {
      const int64_t index = hexir::ops::scatter_index(static_cast<int64_t>(indices[i]), q.data_dims[q.axis]);
      offset = index < 0 ? -1 : hexir::ops::scatter_elements_offset(q, i, index);
    }
    out[i] = offset < 0 ? Element(0) : data[offset];
  }
}

template <typename Element>
__device__ void gather_indexed_any_index(const GatherIndexedParams& p) {
  if (p.plan.index_i64) {
    gather_indexed<Element, int64_t>(p);
  } else {
    gather_indexed<Element, int32_t>(p);
  }
}

}  // namespace hexir_kernels

extern "C" __global__ void hexir_strided_1(StridedParams p) { hexir_kernels::strided<uint8_t>(p); }
extern "C" __global__ void hexir_strided_2(StridedParams p) { hexir_kernels::strided<uint16_t>(p); }
extern "C" __global__ void hexir_strided_4(StridedParams p) { hexir_kernels::strided<uint32_t>(p); }
extern "C" __global__ void hexir_strided_8(StridedParams p) { hexir_kernels::strided<uint64_t>(p); }

// Any other element size: one byte per thread.
extern "C" __global__ void hexir_strided_bytes(StridedParams p) {
  const hexir::ops::StridedPlan& q = p.plan;
  const int64_t size = q.element_size;
  const uint8_t* in = static_cast<const uint8_t*>(p.in) + q.offset * size;
  uint8_t* out = static_cast<uint8_t*>(p.out);
  const int64_t total = q.n * size;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    int64_t rest = i / size, offset = 0;
    for (int d = q.rank - 1; d >= 0; --d) {
      offset += (rest % q.out_dims[d]) * q.in_stride[d];
      rest /= q.out_dims[d];
    }
    out[i] = in[offset * size + i % size];
  }
}

extern "C" __global__ void hexir_strided_copy_1(StridedCopyParams p) {
  hexir_kernels::strided_copy<uint8_t>(p);
}
extern "C" __global__ void hexir_strided_copy_4(StridedCopyParams p) {
  hexir_kernels::strided_copy<uint32_t>(p);
}
extern "C" __global__ void hexir_strided_copy_16(StridedCopyParams p) {
  hexir_kernels::strided_copy<uint4>(p);
}

extern "C" __global__ void hexir_gather_1(GatherParams p) { hexir_kernels::gather_any_index<uint8_t>(p); }
extern "C" __global__ void hexir_gather_4(GatherParams p) { hexir_kernels::gather_any_index<uint32_t>(p); }
extern "C" __global__ void hexir_gather_16(GatherParams p) { hexir_kernels::gather_any_index<uint4>(p); }

extern "C" __global__ void hexir_fill(FillParams p) {
  uint8_t* dst = static_cast<uint8_t*>(p.dst);
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < p.bytes; i += stride)
    dst[i] = p.pattern[i % p.pattern_size];
}

extern "C" __global__ void hexir_pad_1(PadParams p) { hexir_kernels::pad<uint8_t>(p); }
extern "C" __global__ void hexir_pad_2(PadParams p) { hexir_kernels::pad<uint16_t>(p); }
extern "C" __global__ void hexir_pad_4(PadParams p) { hexir_kernels::pad<uint32_t>(p); }
extern "C" __global__ void hexir_pad_8(PadParams p) { hexir_kernels::pad<uint64_t>(p); }

extern "C" __global__ void hexir_dynamic_slice_1(WindowParams p) { hexir_kernels::dynamic_slice<uint8_t>(p); }
extern "C" __global__ void hexir_dynamic_slice_2(WindowParams p) {
  hexir_kernels::dynamic_slice<uint16_t>(p);
}
extern "C" __global__ void hexir_dynamic_slice_4(WindowParams p) {
  hexir_kernels::dynamic_slice<uint32_t>(p);
}
extern "C" __global__ void hexir_dynamic_slice_8(WindowParams p) {
  hexir_kernels::dynamic_slice<uint64_t>(p);
}
extern "C" __global__ void hexir_update_slice_1(WindowParams p) { hexir_kernels::update_slice<uint8_t>(p); }
extern "C" __global__ void hexir_update_slice_2(WindowParams p) { hexir_kernels::update_slice<uint16_t>(p); }
extern "C" __global__ void hexir_update_slice_4(WindowParams p) { hexir_kernels::update_slice<uint32_t>(p); }
extern "C" __global__ void hexir_update_slice_8(WindowParams p) { hexir_kernels::update_slice<uint64_t>(p); }

extern "C" __global__ void hexir_scatter_1(ScatterParams p) { hexir_kernels::scatter_any_index<uint8_t>(p); }
extern "C" __global__ void hexir_scatter_2(ScatterParams p) { hexir_kernels::scatter_any_index<uint16_t>(p); }
extern "C" __global__ void hexir_scatter_4(ScatterParams p) { hexir_kernels::scatter_any_index<uint32_t>(p); }
extern "C" __global__ void hexir_scatter_8(ScatterParams p) { hexir_kernels::scatter_any_index<uint64_t>(p); }
extern "C" __global__ void hexir_scatter_f32(ScatterParams p) { hexir_kernels::scatter_any_index<float>(p); }
extern "C" __global__ void hexir_scatter_i32(ScatterParams p) {
  hexir_kernels::scatter_any_index<int32_t>(p);
}
extern "C" __global__ void hexir_scatter_i64(ScatterParams p) {
  hexir_kernels::scatter_any_index<int64_t>(p);
}

extern "C" __global__ void hexir_gather_indexed_1(GatherIndexedParams p) {
  hexir_kernels::gather_indexed_any_index<uint8_t>(p);
}
extern "C" __global__ void hexir_gather_indexed_2(GatherIndexedParams p) {
  hexir_kernels::gather_indexed_any_index<uint16_t>(p);
}
extern "C" __global__ void hexir_gather_indexed_4(GatherIndexedParams p) {
  hexir_kernels::gather_indexed_any_index<uint32_t>(p);
}
extern "C" __global__ void hexir_gather_indexed_8(GatherIndexedParams p) {
  hexir_kernels::gather_indexed_any_index<uint64_t>(p);
}
