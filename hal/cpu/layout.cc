// Byte-moving kernels of any dtype: the strided gather behind transpose and
// slice (and expand), concat, split, copy, gather, pad, dynamic_slice and
// update_slice, scatter_nd and scatter_elements, gather_elements and gather_nd.
#include <algorithm>
#include <cstring>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernel_util.h"
#include "thread_pool.h"

namespace hexir::hal::cpu::internal {
namespace {

// Output in row-major order; element i comes from the input at
// offset + sum(index[d] * in_stride[d]). The inner run is typed so it compiles to moves.
template <typename Element>
void strided_typed(const ops::StridedPlan& p, const uint8_t* in, uint8_t* out) {
  const Element* src = reinterpret_cast<const Element*>(in) + p.offset;
  Element* dst = reinterpret_cast<Element*>(out);
  if (p.rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int32_t outer_rank = p.rank - 1;
  const int64_t inner = p.out_dims[outer_rank];
  const int64_t inner_stride = p.in_stride[outer_rank];
  // A few channels interleaved from planes (NCHW to channels-last: [.., w, c]
  // from w contiguous, c a plane apart): the last two dims in one loop, not
  // an index step per pixel (a 224 x 224 x 3 image took 2.5x as long).
  if (outer_rank >= 1 && inner <= 4 && inner_stride != 1 && p.in_stride[outer_rank - 1] == 1) {
    const int32_t rows_rank = outer_rank - 1;
    const int64_t pixels = p.out_dims[rows_rank];
    int64_t index[kMaxRank] = {};
    do {
      int64_t offset = 0;
      for (int32_t i = 0; i < rows_rank; ++i) offset += index[i] * p.in_stride[i];
      const Element* s = src + offset;
      for (int64_t x = 0; x < pixels; ++x, dst += inner)
        for (int64_t j = 0; j < inner; ++j) dst[j] = s[x + j * inner_stride];
    } while (next_index(index, p.out_dims, rows_rank));
    return;
  }
  int64_t index[kMaxRank] = {};
  do {
    int64_t offset = 0;
    for (int32_t i = 0; i < outer_rank; ++i) offset += index[i] * p.in_stride[i];
    const Element* s = src + offset;
    if (inner_stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(inner) * sizeof(Element));
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = s[j * inner_stride];
    }
    dst += inner;
  } while (next_index(index, p.out_dims, outer_rank));
}

struct Bytes16 {
  uint8_t bytes[16];
};

// Copies `rows` rows of `row_bytes`, src rows `src_pitch` apart, dst `dst_pitch` apart.
void copy_rows(uint8_t* dst, int64_t dst_pitch, const uint8_t* src, int64_t src_pitch, int64_t rows,
               int64_t row_bytes) {
  if (row_bytes == 0) return;
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_pitch, src + r * src_pitch, static_cast<size_t>(row_bytes));
}

template <typename Index>
Status gather_typed(const ops::GatherPlan& p, const uint8_t* data, const Index* indices, uint8_t* out) {
  const int64_t inner = p.inner_bytes;
  for (int64_t o = 0; o < p.outer; ++o) {
    const uint8_t* block = data + o * p.axis_dim * inner;
    for (int64_t i = 0; i < p.index_count; ++i) {
      int64_t index = static_cast<int64_t>(indices[i]);
      if (index < 0) index += p.axis_dim;
      // Indices are data, not metadata: checked here, where they are read.
      if (index < 0 || index >= p.axis_dim)
        return invalid_argument("gather: index " + std::to_string(static_cast<int64_t>(indices[i])) +
                                " (position " + std::to_string(i) + ") is out of range for an axis of " +
                                std::to_string(p.axis_dim));
      std::memcpy(out, block + index * inner, static_cast<size_t>(inner));
      out += inner;
    }
  }
  return ok_status();
}

// ---- scatter ----

// The dim index k of a scatter's indices counts in.
int64_t scatter_dim(const ops::ScatterPlan& p, int64_t k) {
  return p.depth > 0 ? p.data_dims[k % p.depth] : p.data_dims[p.axis];
}

// Every index checked before anything is written, so a failed invoke leaves
// a result written in place (a donated cache) as it was.
// `name`: the operator, for the message (the gathers share this plan).
template <typename Index>
Status check_scatter_indices(const ops::ScatterPlan& p, const Index* indices, const char* name) {
  const int64_t count = p.depth > 0 ? p.tuples * p.depth : p.n;
  for (int64_t k = 0; k < count; ++k) {
    const int64_t dim = scatter_dim(p, k);
    if (ops::scatter_index(static_cast<int64_t>(indices[k]), dim) < 0)
      return invalid_argument(std::string(name) + ": index " +
                              std::to_string(static_cast<int64_t>(indices[k])) + " (position " +
                              std::to_string(k) + ") is out of range for a dim of " + std::to_string(dim));
  }
  return ok_status();
}

// Calls land(update element, data offset) for every update in order. An index
// out of range (possible only if the indices shared the result's storage,
// which the compiler never plans) lands nowhere.
template <typename Index, typename Land>
void for_each_scatter_target(const ops::ScatterPlan& p, const Index* indices, Land&& land) {
  if (p.depth > 0) {
    for (int64_t t = 0; t < p.tuples; ++t) {
      const int64_t offset = ops::nd_tuple_offset(p, indices, t);
      if (offset < 0) continue;
      for (int64_t c = 0; c < p.slice; ++c) land(t * p.slice + c, offset + c);
    }
    return;
  }
  const int32_t axis = p.axis;
  int64_t coordinate[kMaxRank] = {};
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t index = ops::scatter_index(static_cast<int64_t>(indices[i]), p.data_dims[axis]);
    if (index >= 0) {
      int64_t offset = index * p.data_stride[axis];
      for (int32_t d = 0; d < p.rank; ++d)
        if (d != axis) offset += coordinate[d] * p.data_stride[d];
      land(i, offset);
    }
    next_index(coordinate, p.index_dims, p.rank);
  }
}

template <typename T, typename Index>
void scatter_typed(const ops::ScatterPlan& p, const Index* indices, const uint8_t* updates, uint8_t* out) {
  const T* u = reinterpret_cast<const T*>(updates);
  T* o = reinterpret_cast<T*>(out);
  if (p.reduction == ops::kScatterNone) {
    for_each_scatter_target(p, indices, [&](int64_t i, int64_t offset) { o[offset] = u[i]; });
  } else {
    for_each_scatter_target(p, indices, [&](int64_t i, int64_t offset) {
      o[offset] = ops::scatter_combine(o[offset], u[i], p.reduction);
    });
  }
}

// gather_elements and gather_nd: result element i reads data where scatter
// update i would land (the indices checked first).
template <typename Element, typename Index>
void gather_scatter_typed(const ops::ScatterPlan& p, const Index* indices, const uint8_t* data,
                          uint8_t* out) {
  const Element* src = reinterpret_cast<const Element*>(data);
  Element* dst = reinterpret_cast<Element*>(out);
  for_each_scatter_target(p, indices, [&](int64_t i, int64_t offset) { dst[i] = src[offset]; });
}

template <typename Index>
Status gather_scatter_plan(const ops::ScatterPlan& p, const Index* indices, const uint8_t* data,
                           uint8_t* out) {
  HEXIR_RETURN_IF_ERROR(check_scatter_indices(p, indices, p.depth > 0 ? "gather_nd" : "gather_elements"));
  switch (p.element_size) {
    case 1:
      gather_scatter_typed<uint8_t>(p, indices, data, out);
      break;
    case 2:
      gather_scatter_typed<uint16_t>(p, indices, data, out);
      break;
    case 4:
      gather_scatter_typed<uint32_t>(p, indices, data, out);
      break;
    default:
      gather_scatter_typed<uint64_t>(p, indices, data, out);
      break;
  }
  return ok_status();
}

// none moves elements of their width; the reductions compute in data's dtype.
template <typename Index>
void scatter_updates(const ops::ScatterPlan& p, const Index* indices, const uint8_t* updates, uint8_t* out) {
  if (p.reduction == ops::kScatterNone) {
    switch (p.element_size) {
      case 1:
        return scatter_typed<uint8_t>(p, indices, updates, out);
      case 2:
        return scatter_typed<uint16_t>(p, indices, updates, out);
      case 4:
        return scatter_typed<uint32_t>(p, indices, updates, out);
      default:
        return scatter_typed<uint64_t>(p, indices, updates, out);
    }
  }
  switch (static_cast<DType>(p.dtype)) {
    case DType::kI32:
      return scatter_typed<int32_t>(p, indices, updates, out);
    case DType::kI64:
      return scatter_typed<int64_t>(p, indices, updates, out);
    default:
      return scatter_typed<float>(p, indices, updates, out);
  }
}

// Output rows (the last dim) [row0, row1): a row whose outer indices fall in
// the pads is the constant, or (edge, reflect, wrap) the row
// ops::pad_source_index names; within a row the part read from the input is
// one contiguous copy, the ends element by element. Elements moved as
// unsigned integers of their width.
template <typename Element>
void pad_rows(const ops::PadPlan& p, const uint8_t* in, uint8_t* out, int64_t row0, int64_t row1) {
  const Element* src = reinterpret_cast<const Element*>(in);
  Element* dst = reinterpret_cast<Element*>(out);
  const Element value = static_cast<Element>(static_cast<uint64_t>(p.value));
  const int32_t last = p.rank - 1;
  const int64_t width = p.out_dims[last];
  const int64_t mid0 = std::clamp(p.begin[last] + p.lo[last], int64_t{0}, width);
  const int64_t mid1 = std::clamp(p.begin[last] + p.hi[last], mid0, width);
  int64_t index[kMaxRank] = {};
  for (int64_t r = row0, d = last; d-- > 0; r /= p.out_dims[d]) index[d] = r % p.out_dims[d];
  for (int64_t r = row0; r < row1; ++r) {
    int64_t offset = 0;
    bool constant = false;
    for (int32_t d = 0; d < last && !constant; ++d) {
      const int64_t i = ops::pad_source_index(p, d, index[d]);
      constant = i < 0;
      offset += i * p.in_stride[d];
    }
    Element* row = dst + r * width;
    if (constant) {
      std::fill(row, row + width, value);
    } else {
      const auto edge = [&](int64_t o) {
        const int64_t i = ops::pad_source_index(p, last, o);
        row[o] = i < 0 ? value : src[offset + i];
      };
      for (int64_t o = 0; o < mid0; ++o) edge(o);
      if (mid1 > mid0) std::memcpy(row + mid0, src + offset + (mid0 - p.begin[last]), (mid1 - mid0) * sizeof(Element));
      for (int64_t o = mid1; o < width; ++o) edge(o);
    }
    next_index(index, p.out_dims, last);
  }
}

struct PadJob {
  const ops::PadPlan* p;
  const uint8_t* in;
  uint8_t* out;
  int64_t rows, rows_per_task;
};

template <typename Element>
void pad_task(void* context, int64_t task) {
  const PadJob& job = *static_cast<const PadJob*>(context);
  const int64_t row0 = task * job.rows_per_task;
  pad_rows<Element>(*job.p, job.in, job.out, row0, std::min(job.rows, row0 + job.rows_per_task));
}

// The offset of a window's first element in x, its start indices read from
// operands first .. first + rank - 1 and clamped (ops::window_start).
int64_t window_origin(const ops::WindowPlan& p, const Dispatch& d, uint32_t first) {
  int64_t origin = 0;
  for (int32_t k = 0; k < p.rank; ++k) {
    const int64_t start = *input<int64_t>(d, first + static_cast<uint32_t>(k));
    origin += ops::window_start(start, p.dims[k], p.window[k]) * p.stride[k];
  }
  return origin;
}

// Calls row(x_byte, window_byte, bytes) for each run of the window along the
// last dim: x's bytes from `origin` on, the window's contiguous.
template <typename Row>
void for_each_window_row(const ops::WindowPlan& p, int64_t origin, Row row) {
  const int64_t element = p.element_size;
  if (p.rank == 0) {
    row(0, 0, element);
    return;
  }
  const int32_t outer_rank = p.rank - 1;
  const int64_t run = p.window[outer_rank] * element;
  int64_t index[kMaxRank] = {};
  int64_t window_byte = 0;
  do {
    int64_t offset = origin;
    for (int32_t k = 0; k < outer_rank; ++k) offset += index[k] * p.stride[k];
    row(offset * element, window_byte, run);
    window_byte += run;
  } while (next_index(index, p.window, outer_rank));
}

}  // namespace

Status pad(const KernelContext& context, const Dispatch& d) {
  const ops::PadPlan& p = plan_of<ops::PadPlan>(d);
  if (p.n == 0) return ok_status();
  const auto* in = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  if (p.rank == 0) {
    std::memcpy(out, in, static_cast<size_t>(p.element_size));
    return ok_status();
  }
  const int64_t width = p.out_dims[p.rank - 1];
  PadJob job{&p, in, out, p.n / width, 0};
  // Rows of about 16 KiB per task at least: a small pad is one call.
  job.rows_per_task = std::max<int64_t>(1, (16384 / p.element_size + width - 1) / width);
  const int64_t tasks = (job.rows + job.rows_per_task - 1) / job.rows_per_task;
  ThreadPool::TaskFn fn = p.element_size == 1   ? pad_task<uint8_t>
                          : p.element_size == 2 ? pad_task<uint16_t>
                          : p.element_size == 4 ? pad_task<uint32_t>
                                                : pad_task<uint64_t>;
  if (tasks <= 1) {
    fn(&job, 0);
  } else {
    parallel_for(context, tasks, fn, &job);
  }
  return ok_status();
}

namespace {

// A transpose that moves the input's contiguous dim away from the last: out
// dim t reads the input contiguously (stride 1), the last out dim reads it
// `inner_stride` apart. Walked in square tiles of (t, last) so that both the
// reads and the writes of a tile stay within a few cache lines each, where
// the row-by-row walk reads one element per cache line per row (docs/layout.md:
// the conversions at channels-last regions' edges). The other dims are split
// over the pool; each output element is written once, as by strided_typed.
constexpr int64_t kTransposeTile = 16;

#if defined(__x86_64__) && defined(__GNUC__)
// dst[i][j] = src[j][i] for a 16 x 16 tile of 4-byte elements (rows src_stride
// and dst_stride elements apart): 16 loads, 64 shuffles, 16 stores. Moves bits only.
// (GCC 12's unpack and shuffle intrinsics start from a self-initialized
// _mm512_undefined_ps, which -Wuninitialized reports.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
[[gnu::target("avx512f")]] void transpose16x16(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                                               int64_t dst_stride) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 16; i += 8) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0xdd);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * dst_stride, r[i]);
}


[[gnu::target("avx2")]] void transpose16x16_avx2(const uint32_t* src, int64_t src_stride, uint32_t* dst,
                                                 int64_t dst_stride) {
  for (int bi = 0; bi < 16; bi += 8)
    for (int bj = 0; bj < 16; bj += 8)
      transpose8x8(reinterpret_cast<const float*>(src + bj * src_stride + bi), src_stride,
                   reinterpret_cast<float*>(dst + bi * dst_stride + bj), dst_stride);
}
#pragma GCC diagnostic pop
#endif

template <typename Element>
void transpose_tiled(const KernelContext& context, const ops::StridedPlan& p, int32_t t, const uint8_t* in,
                     uint8_t* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  // For 4-byte elements (below).
  const auto vector_tile = isa_avx512() ? transpose16x16
                           : isa_avx2() ? transpose16x16_avx2
                                                            : nullptr;
#endif
  const int32_t last = p.rank - 1;
  int64_t out_stride[kMaxRank];
  out_stride[last] = 1;
  for (int32_t d = last; d-- > 0;) out_stride[d] = out_stride[d + 1] * p.out_dims[d + 1];
  // The other dims (neither t nor the last), as one flat range.
  int64_t rest_dims[kMaxRank], rest_in[kMaxRank], rest_out[kMaxRank];
  int32_t rest_rank = 0;
  int64_t rest = 1;
  for (int32_t d = 0; d < last; ++d) {
    if (d == t) continue;
    rest_dims[rest_rank] = p.out_dims[d], rest_in[rest_rank] = p.in_stride[d], rest_out[rest_rank] = out_stride[d];
    rest *= p.out_dims[d];
    ++rest_rank;
  }
  const Element* src = reinterpret_cast<const Element*>(in) + p.offset;
  Element* dst = reinterpret_cast<Element*>(out);
  const int64_t rows = p.out_dims[t], cols = p.out_dims[last], col_stride = p.in_stride[last];
  const int64_t row_out = out_stride[t];
  parallel_ranges(context, rest, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, rows * cols)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t r = begin; r < end; ++r) {
                      int64_t in_offset = 0, out_offset = 0;
                      int64_t flat = r;
                      for (int32_t i = rest_rank; i-- > 0;) {
                        const int64_t index = flat % rest_dims[i];
                        flat /= rest_dims[i];
                        in_offset += index * rest_in[i];
                        out_offset += index * rest_out[i];
                      }
                      const Element* s = src + in_offset;
                      Element* o = dst + out_offset;
                      for (int64_t i0 = 0; i0 < rows; i0 += kTransposeTile) {
                        const int64_t i1 = std::min(rows, i0 + kTransposeTile);
                        for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile) {
                          const int64_t j1 = std::min(cols, j0 + kTransposeTile);
#if defined(__x86_64__) && defined(__GNUC__)
                          if constexpr (sizeof(Element) == 4) {
                            if (vector_tile && i1 - i0 == kTransposeTile && j1 - j0 == kTransposeTile) {
                              vector_tile(reinterpret_cast<const uint32_t*>(s + i0 + j0 * col_stride),
                                             col_stride, reinterpret_cast<uint32_t*>(o + i0 * row_out + j0),
                                             row_out);
                              continue;
                            }
                          }
#endif
                          for (int64_t i = i0; i < i1; ++i)
                            for (int64_t j = j0; j < j1; ++j) o[i * row_out + j] = s[i + j * col_stride];
                        }
                      }
                    }
                  });
}

// The outer dim that reads the input contiguously when the last does not
// (a transpose worth tiling), or -1.
int32_t contiguous_outer_dim(const ops::StridedPlan& p) {
  if (p.rank < 2 || p.in_stride[p.rank - 1] <= 1 || p.out_dims[p.rank - 1] < kTransposeTile) return -1;
  for (int32_t d = p.rank - 1; d-- > 0;)
    if (p.in_stride[d] == 1 && p.out_dims[d] >= kTransposeTile) return d;
  return -1;
}

void gather_elements(const KernelContext& context, const ops::StridedPlan& p, const uint8_t* in, uint8_t* out) {
  if (const int32_t t = contiguous_outer_dim(p); t >= 0) {
    if (p.element_size == 4) return transpose_tiled<uint32_t>(context, p, t, in, out);
    if (p.element_size == 8) return transpose_tiled<uint64_t>(context, p, t, in, out);
  }
  switch (p.element_size) {
    case 1:
      strided_typed<uint8_t>(p, in, out);
      break;
    case 2:
      strided_typed<uint16_t>(p, in, out);
      break;
    case 4:
      strided_typed<uint32_t>(p, in, out);
      break;
    case 8:
      strided_typed<uint64_t>(p, in, out);
      break;
    default:
      strided_typed<Bytes16>(p, in, out);
      break;
  }
}

}  // namespace

Status strided_gather(const KernelContext& context, const Dispatch& d) {
  const ops::StridedPlan& p = plan_of<ops::StridedPlan>(d);
  if (p.n == 0) return ok_status();
  gather_elements(context, p, input<uint8_t>(d, 0), output<uint8_t>(d, 0));
  return ok_status();
}

// Each output row takes one contiguous chunk of every input in turn.
Status concat(const KernelContext&, const Dispatch& d) {
  const ops::ConcatPlan& p = plan_of<ops::ConcatPlan>(d);
  if (p.outer == 0) return ok_status();  // no rows (the output may have no storage: no pointer arithmetic on it)
  const int64_t* row_bytes = ops::plan_tail(&p);
  auto* dst = output<uint8_t>(d, 0);
  for (int64_t k = 0; k < p.input_count; ++k) {
    copy_rows(dst, p.out_row_bytes, input<uint8_t>(d, static_cast<uint32_t>(k)), row_bytes[k], p.outer,
              row_bytes[k]);
    dst += row_bytes[k];
  }
  return ok_status();
}

// The inverse: each input row hands one contiguous chunk to every output.
Status split(const KernelContext&, const Dispatch& d) {
  const ops::SplitPlan& p = plan_of<ops::SplitPlan>(d);
  if (p.outer == 0) return ok_status();  // no rows (the input may have no storage: no pointer arithmetic on it)
  const int64_t* row_bytes = ops::plan_tail(&p);
  const auto* src = input<uint8_t>(d, 0);
  for (int64_t k = 0; k < p.output_count; ++k) {
    copy_rows(output<uint8_t>(d, static_cast<uint32_t>(k)), row_bytes[k], src, p.in_row_bytes, p.outer,
              row_bytes[k]);
    src += row_bytes[k];
  }
  return ok_status();
}

Status copy(const KernelContext& context, const Dispatch& d) {
  const ops::CopyPlan& p = plan_of<ops::CopyPlan>(d);
  if (p.strided) {  // a strided view materialized (docs/views.md)
    if (p.gather.n > 0) gather_elements(context, p.gather, input<uint8_t>(d, 0), output<uint8_t>(d, 0));
    return ok_status();
  }
  const int64_t bytes = p.bytes;
  // memmove: a copy onto itself (or an overlapping alias) stays well defined.
  if (bytes > 0 && d.operands[0] != d.operands[1])
    std::memmove(d.operands[1], d.operands[0], static_cast<size_t>(bytes));
  return ok_status();
}

Status gather(const KernelContext&, const Dispatch& d) {
  const ops::GatherPlan& p = plan_of<ops::GatherPlan>(d);
  const auto* data = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  return p.index_i64 ? gather_typed(p, data, input<int64_t>(d, 1), out)
                     : gather_typed(p, data, input<int32_t>(d, 1), out);
}

Status dynamic_slice(const KernelContext&, const Dispatch& d) {
  const ops::WindowPlan& p = plan_of<ops::WindowPlan>(d);
  if (p.n == 0) return ok_status();
  const auto* x = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  for_each_window_row(p, window_origin(p, d, 1), [&](int64_t x_byte, int64_t window_byte, int64_t bytes) {
    std::memcpy(out + window_byte, x + x_byte, static_cast<size_t>(bytes));
  });
  return ok_status();
}

// A copy of x (none when the result is x's storage: in place), then the
// window from update. The start indices are read before anything is written.
// A result in update's storage means update is as large as x: it is the result.
Status update_slice(const KernelContext&, const Dispatch& d) {
  const ops::WindowPlan& p = plan_of<ops::WindowPlan>(d);
  const auto* x = input<uint8_t>(d, 0);
  const auto* update = input<uint8_t>(d, 1);
  auto* out = output<uint8_t>(d, 0);
  int64_t origin = window_origin(p, d, 2);
  bool inside = true;  // out_of_range skip or fail: checked before anything is written
  if (p.out_of_range != ops::kWindowClamp) {
    origin = 0;
    for (int32_t k = 0; k < p.rank; ++k) {
      const int64_t given = *input<int64_t>(d, 2 + static_cast<uint32_t>(k));
      const int64_t start = ops::window_start_unclamped(given, p.dims[k], p.out_of_range);
      if (!ops::window_inside(start, p.dims[k], p.window[k])) {
        if (p.out_of_range == ops::kWindowFail)
          return invalid_argument("update_slice: index " + std::to_string(given) + " is out of range for dim " +
                                  std::to_string(k) + " of size " + std::to_string(p.dims[k]) + " (a window of " +
                                  std::to_string(p.window[k]) + ")");
        inside = false;
      }
      origin += start * p.stride[k];
    }
  }
  if (out == update) return ok_status();
  if (out != x && p.x_bytes > 0) std::memcpy(out, x, static_cast<size_t>(p.x_bytes));
  if (p.n == 0 || !inside) return ok_status();
  for_each_window_row(p, origin, [&](int64_t x_byte, int64_t window_byte, int64_t bytes) {
    std::memcpy(out + x_byte, update + window_byte, static_cast<size_t>(bytes));
  });
  return ok_status();
}

// scatter_nd and scatter_elements: the indices checked, a copy of data (none
// when the result is data's storage: in place, so a KV-cache write costs the
// rows it writes), then the updates in order (a duplicate target: the last
// update, or all of them combined in order).
Status scatter(const KernelContext&, const Dispatch& d) {
  const ops::ScatterPlan& p = plan_of<ops::ScatterPlan>(d);
  const auto* data = input<uint8_t>(d, 0);
  const auto* updates = input<uint8_t>(d, 2);
  auto* out = output<uint8_t>(d, 0);
  const bool i64 = p.index_i64 != 0;
  const char* name = p.depth > 0 ? "scatter_nd" : "scatter_elements";
  HEXIR_RETURN_IF_ERROR(i64 ? check_scatter_indices(p, input<int64_t>(d, 1), name)
                            : check_scatter_indices(p, input<int32_t>(d, 1), name));
  if (out != data && p.data_bytes > 0) std::memcpy(out, data, static_cast<size_t>(p.data_bytes));
  if (p.n == 0) return ok_status();
  if (i64)
    scatter_updates(p, input<int64_t>(d, 1), updates, out);
  else
    scatter_updates(p, input<int32_t>(d, 1), updates, out);
  return ok_status();
}

// gather_elements and gather_nd: the scatters' plan read the other way.
Status gather_indexed(const KernelContext&, const Dispatch& d) {
  const ops::ScatterPlan& p = plan_of<ops::ScatterPlan>(d);
  const auto* data = input<uint8_t>(d, 0);
  auto* out = output<uint8_t>(d, 0);
  return p.index_i64 ? gather_scatter_plan(p, input<int64_t>(d, 1), data, out)
                     : gather_scatter_plan(p, input<int32_t>(d, 1), data, out);
}

}  // namespace hexir::hal::cpu::internal
