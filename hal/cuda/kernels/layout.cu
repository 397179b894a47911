// Byte-moving kernels of any dtype: transpose (by element size), the strided
// copy concat is made of, and the pattern fill behind Device::fill.
#include "common.cuh"

namespace hexir_kernels {

template <typename Element>
__device__ void transpose(const TransposeParams& p) {
  const Element* in = static_cast<const Element*>(p.in);
  Element* out = static_cast<Element*>(p.out);
  const int64_t stride = global_stride();
  for (int64_t i = global_index(); i < p.n; i += stride) {
    int64_t rest = i, offset = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      offset += (rest % p.out_dims[d]) * p.in_stride[d];
      rest /= p.out_dims[d];
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

}  // namespace hexir_kernels

extern "C" __global__ void hexir_transpose_1(TransposeParams p) { hexir_kernels::transpose<uint8_t>(p); }
extern "C" __global__ void hexir_transpose_2(TransposeParams p) { hexir_kernels::transpose<uint16_t>(p); }
extern "C" __global__ void hexir_transpose_4(TransposeParams p) { hexir_kernels::transpose<uint32_t>(p); }
extern "C" __global__ void hexir_transpose_8(TransposeParams p) { hexir_kernels::transpose<uint64_t>(p); }

// Any element size: one byte per thread.
extern "C" __global__ void hexir_transpose_bytes(TransposeParams p) {
  const uint8_t* in = static_cast<const uint8_t*>(p.in);
  uint8_t* out = static_cast<uint8_t*>(p.out);
  const int64_t size = p.element_size;
  const int64_t total = p.n * size;
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < total; i += stride) {
    int64_t rest = i / size, offset = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      offset += (rest % p.out_dims[d]) * p.in_stride[d];
      rest /= p.out_dims[d];
    }
    out[i] = in[offset * size + i % size];
  }
}

extern "C" __global__ void hexir_strided_copy_1(StridedCopyParams p) { hexir_kernels::strided_copy<uint8_t>(p); }
extern "C" __global__ void hexir_strided_copy_4(StridedCopyParams p) { hexir_kernels::strided_copy<uint32_t>(p); }
extern "C" __global__ void hexir_strided_copy_16(StridedCopyParams p) { hexir_kernels::strided_copy<uint4>(p); }

extern "C" __global__ void hexir_fill(FillParams p) {
  uint8_t* dst = static_cast<uint8_t*>(p.dst);
  const int64_t stride = hexir_kernels::global_stride();
  for (int64_t i = hexir_kernels::global_index(); i < p.bytes; i += stride) dst[i] = p.pattern[i % p.pattern_size];
}
