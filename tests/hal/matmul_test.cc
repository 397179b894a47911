// matmul against a naive double reference with numpy.matmul's rules.
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cpu_isa.h"
#include "hal_test_util.h"
#include "hexir/base/half.h"

namespace hexir::hal::testing {
namespace {

using ops::OpId;

// numpy.matmul reference: returns the result dims and values.
std::pair<std::vector<int64_t>, std::vector<double>> matmul_reference(const HostTensor& a,
                                                                      const HostTensor& b) {
  std::vector<int64_t> ad = a.dims, bd = b.dims;
  const bool a_vector = ad.size() == 1, b_vector = bd.size() == 1;
  if (a_vector) ad.insert(ad.begin(), 1);
  if (b_vector) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  REQUIRE(bd[bd.size() - 2] == K);
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  a_batch.insert(a_batch.begin(), rank - a_batch.size(), 1);
  b_batch.insert(b_batch.begin(), rank - b_batch.size(), 1);
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    REQUIRE((a_batch[i] == b_batch[i] || a_batch[i] == 1 || b_batch[i] == 1));
    batch[i] = a_batch[i] == 1 ? b_batch[i] : a_batch[i];
  }
  std::vector<double> values;
  for (int64_t n = 0; n < product(batch); ++n) {
    const auto index = unravel(n, batch);
    int64_t a_matrix = 0, b_matrix = 0;
    for (size_t i = 0; i < rank; ++i) {
      a_matrix = a_matrix * a_batch[i] + (a_batch[i] == 1 ? 0 : index[i]);
      b_matrix = b_matrix * b_batch[i] + (b_batch[i] == 1 ? 0 : index[i]);
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          sum += static_cast<double>(a.at(a_matrix * M * K + i * K + k)) * b.at(b_matrix * K * N + k * N + j);
        }
        values.push_back(sum);
      }
    }
  }
  std::vector<int64_t> dims = batch;
  if (!a_vector) dims.push_back(M);
  if (!b_vector) dims.push_back(N);
  return {dims, values};
}

void check_matmul(const std::vector<int64_t>& dims_a, const std::vector<int64_t>& dims_b,
                  const std::vector<int64_t>& expected_dims) {
  INFO(dims_string(dims_a) << " @ " << dims_string(dims_b));
  HostTensor a = random_f32(dims_a, 21), b = random_f32(dims_b, 22);
  auto [dims, want] = matmul_reference(a, b);
  REQUIRE(dims == expected_dims);
  HostTensor out(DType::kF32, dims);
  // Poison the output so a kernel that skips zeroing shows up.
  for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
  REQUIRE(run_kernel(OpId::kMatmul, {&a, &b}, out).ok());
  const int64_t K = dims_a.back();
  check_close(out, want, 1e-5, 1e-5 * static_cast<double>(K + 1));
}

TEST_CASE("matmul: 2-D") {
  check_matmul({3, 4}, {4, 5}, {3, 5});
  check_matmul({1, 1}, {1, 1}, {1, 1});
  check_matmul({7, 13}, {13, 9}, {7, 9});
}

TEST_CASE("matmul: b stored transposed (transpose_b) gives a @ b^T, batched and broadcast") {
  struct Case {
    std::vector<int64_t> a, bt;
  };
  for (const Case& c : {Case{{3, 4}, {5, 4}}, Case{{37, 300}, {261, 300}}, Case{{2, 4, 5, 19}, {2, 4, 7, 19}},
                        Case{{3, 5, 40}, {1, 33, 40}},
                        // A few rows: dot products of rows (gemm_dot_rows), k past and short of the lanes,
                        // n past the blocks of B's rows and the tasks' columns.
                        Case{{1, 1}, {1, 1}}, Case{{1, 37}, {70, 37}}, Case{{2, 300}, {261, 300}},
                        Case{{4, 17}, {9, 17}}, Case{{3, 1, 8}, {3, 131, 8}}}) {
    INFO(dims_string(c.a) << " @ " << dims_string(c.bt) << "^T");
    HostTensor a = random_f32(c.a, 31), bt = random_f32(c.bt, 32);
    // The reference: b = bt with its last two dims swapped, an ordinary matmul.
    std::vector<int64_t> b_dims = c.bt;
    std::swap(b_dims[b_dims.size() - 1], b_dims[b_dims.size() - 2]);
    HostTensor b(DType::kF32, b_dims);
    const int64_t rows = c.bt[c.bt.size() - 2], cols = c.bt.back(), mats = bt.count() / (rows * cols);
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) b.at(m * rows * cols + j * rows + i) = bt.at(m * rows * cols + i * cols + j);
    auto [dims, want] = matmul_reference(a, b);
    HostTensor out(DType::kF32, dims);
    for (int64_t i = 0; i < out.count(); ++i) out.at(i) = 12345.0f;
    REQUIRE(run_kernel(OpId::kMatmul, {&a, &bt}, out, std::vector<int64_t>{1}).ok());
    check_close(out, want, 1e-5, 1e-5 * static_cast<double>(c.a.back() + 1));
  }
}

TEST_CASE("matmul: sizes past the block edges and row remainders") {
  check_matmul({37, 300}, {300, 261}, {37, 261});
  check_matmul({5, 129}, {129, 513}, {5, 513});
}

TEST_CASE("matmul: a few rows against a row-major b read where it lies (a decode step's unpacked weights)") {
  // N past a whole strip (a zero-padded tail), K past a K block (sums added block by block).
  check_matmul({1, 300}, {300, 261}, {1, 261});
  check_matmul({3, 600}, {600, 37}, {3, 37});
  check_matmul({4, 257}, {257, 64}, {4, 64});
  check_matmul({2, 8}, {8, 5}, {2, 5});
}

TEST_CASE("matmul: the running CPU's tile gives its sums' bits (an fmaf chain on AVX-512, AVX2, NEON)") {
  // One K block (k <= 256): each element summed over k from 0 in order, as
  // one fused multiply-add per step on the FMA tiles, product then sum on
  // the portable one. Bit for bit, so the path cpu_isa() names is the one
  // that ran: NEON on aarch64 unless HEXIR_MAX_CPU_ISA=portable.
  using hal::cpu::internal::CpuIsa;
  const bool fma = hal::cpu::internal::cpu_isa() != CpuIsa::kPortable;
#if defined(__aarch64__)
  const char* cap = std::getenv("HEXIR_MAX_CPU_ISA");
  CHECK(hal::cpu::internal::cpu_isa() ==
        (cap && std::string_view(cap) == "portable" ? CpuIsa::kPortable : CpuIsa::kNeon));
#endif
  // Full and partial tiles (6 x 16 on NEON and AVX2), A in place and a few rows (m <= 4).
  const std::array<int64_t, 3> shapes[] = {{37, 200, 50}, {13, 64, 16}, {6, 1, 17}, {3, 100, 40}};
  for (const auto& mkn : shapes) {
    const int64_t M = mkn[0], K = mkn[1], N = mkn[2];
    INFO(M << " x " << K << " x " << N);
    HostTensor a = random_f32({M, K}, 41), b = random_f32({K, N}, 42);
    HostTensor out(DType::kF32, {M, N});
    REQUIRE(run_kernel(OpId::kMatmul, {&a, &b}, out).ok());
    int64_t mismatches = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float want = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
          const float x = a.at(i * K + k), y = b.at(k * N + j);
          want = fma ? std::fmaf(x, y, want) : want + x * y;
        }
        const float have = out.at(i * N + j);
        if (std::memcmp(&have, &want, sizeof want) != 0) ++mismatches;
      }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("matmul: 1-D operands are promoted and the added dim dropped") {
  check_matmul({4}, {4, 5}, {5});
  check_matmul({3, 4}, {4}, {3});
  check_matmul({6}, {6}, {});
  check_matmul({4}, {2, 4, 3}, {2, 3});
  check_matmul({2, 3, 4}, {4}, {2, 3});
}

TEST_CASE("matmul: batched with equal batch dims") {
  check_matmul({2, 3, 4}, {2, 4, 5}, {2, 3, 5});
  check_matmul({2, 2, 3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5});
}

TEST_CASE("matmul: broadcast batch dims") {
  check_matmul({2, 3, 4}, {4, 5}, {2, 3, 5});
  check_matmul({197, 1, 48}, {48, 20}, {197, 1, 20});  // the batch as rows of one GEMM
  check_matmul({3, 4}, {2, 4, 5}, {2, 3, 5});
  check_matmul({2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5});
  check_matmul({1, 3, 4}, {2, 4, 5}, {2, 3, 5});
  check_matmul({3, 1, 2, 4}, {1, 2, 4, 3}, {3, 2, 2, 3});
}

TEST_CASE("matmul: zero-size dims") {
  check_matmul({0, 4}, {4, 5}, {0, 5});
  check_matmul({3, 4}, {4, 0}, {3, 0});
  check_matmul({0, 3, 4}, {4, 5}, {0, 3, 5});
  // K == 0: the result is all zeros, not whatever the buffer held.
  check_matmul({3, 0}, {0, 5}, {3, 5});
}

TEST_CASE("matmul: mismatched inner dims and scalars are rejected") {
  HostTensor a = random_f32({3, 4}, 1), b = random_f32({5, 2}, 2), out(DType::kF32, {3, 2});
  CHECK(run_kernel(OpId::kMatmul, {&a, &b}, out).code() == StatusCode::kInvalidArgument);
  HostTensor s = random_f32({}, 3);
  CHECK(run_kernel(OpId::kMatmul, {&s, &b}, out).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hexir::hal::testing

namespace hexir::hal::testing {

using ops::OpId;

TEST_CASE("quantized_matmul: a x (w * scale)^T + bias from int8 rows, a few rows and the GEMM, every tail") {
  // Plain variables, not structured bindings: clang (the sanitizer legs) refuses those in INFO's lambda.
  for (const std::array<int64_t, 3>& mkn : std::vector<std::array<int64_t, 3>>{
           {1, 768, 40}, {3, 37, 19}, {4, 64, 64}, {5, 100, 33}, {64, 129, 70}}) {
    const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
    INFO("m " << m << " k " << k << " n " << n);
    HostTensor a = random_f32({m, k}, 91, -1, 1), scale = random_f32({n}, 92, 0.001f, 0.02f);
    HostTensor bias = random_f32({n}, 93), w(DType::kI8, {n, k}), out(DType::kF32, {m, n});
    for (int64_t i = 0; i < n * k; ++i) w.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 89 + 7) % 255 - 127);
    for (bool with_bias : {false, true}) {
      std::vector<HostTensor*> inputs = {&a, &w, &scale};
      if (with_bias) inputs.push_back(&bias);
      REQUIRE(run_kernel(OpId::kQuantizedMatmul, inputs, out, {}).ok());
      std::vector<double> want;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t t = 0; t < k; ++t)
            sum += double{a.at(i * k + t)} * static_cast<int8_t>(w.bytes[static_cast<size_t>(j * k + t)]);
          want.push_back(sum * scale.at(j) + (with_bias ? bias.at(j) : 0.0));
        }
      check_close(out, want, 2e-5, 1e-5);
    }
  }
}

TEST_CASE("int4_matmul: a x dequantized(w)^T + bias from packed int4 rows, groups of 32 and 64, a few rows and the GEMM") {
  for (const std::array<int64_t, 4>& mkng : std::vector<std::array<int64_t, 4>>{
           {1, 768, 40, 32}, {2, 64, 19, 64}, {4, 128, 64, 32}, {5, 96, 33, 32}, {64, 256, 70, 128}}) {
    const int64_t m = mkng[0], k = mkng[1], n = mkng[2], group = mkng[3];
    INFO("m " << m << " k " << k << " n " << n << " group " << group);
    HostTensor a = random_f32({m, k}, 94, -1, 1), bias = random_f32({n}, 95);
    HostTensor w(DType::kU8, {n, k / 2}), scale(DType::kF16, {n, k / group}), out(DType::kF32, {m, n});
    for (int64_t i = 0; i < n * k / 2; ++i) w.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 89 + 7);
    std::vector<float> scale_of(static_cast<size_t>(n * (k / group)));
    for (size_t i = 0; i < scale_of.size(); ++i) {
      const uint16_t bits = float_to_half_bits(0.001f + 0.0003f * static_cast<float>(i % 61));
      std::memcpy(scale.bytes.data() + i * 2, &bits, 2);
      scale_of[i] = half_bits_to_float(bits);
    }
    for (bool with_bias : {false, true}) {
      std::vector<HostTensor*> inputs = {&a, &w, &scale};
      if (with_bias) inputs.push_back(&bias);
      REQUIRE(run_kernel(OpId::kInt4Matmul, inputs, out, {}).ok());
      std::vector<double> want;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t t = 0; t < k; ++t) {
            // The layout of op.h, spelled out: byte t % 16 of block t / 32, low nibble for the block's first 16.
            const uint8_t byte = w.bytes[static_cast<size_t>(j * k / 2 + t / 32 * 16 + t % 16)];
            const int value = (t % 32 < 16 ? byte & 0xf : byte >> 4) - 8;
            sum += double{a.at(i * k + t)} * value * scale_of[static_cast<size_t>(j * (k / group) + t / group)];
          }
          want.push_back(sum + (with_bias ? bias.at(j) : 0.0));
        }
      check_close(out, want, 2e-5, 1e-5);
    }
  }
}

TEST_CASE("dequantize_int4: packed rows to floats, the layout int4_matmul reads") {
  const int64_t rows = 6, k = 128, group = 64;
  HostTensor w(DType::kU8, {2, 3, k / 2}), scale(DType::kF16, {2, 3, k / group}), out(DType::kF32, {2, 3, k});
  for (size_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<uint8_t>(i * 57 + 3);
  std::vector<float> scale_of(static_cast<size_t>(rows * (k / group)));
  for (size_t i = 0; i < scale_of.size(); ++i) {
    const uint16_t bits = float_to_half_bits(0.5f - 0.125f * static_cast<float>(i));
    std::memcpy(scale.bytes.data() + i * 2, &bits, 2);
    scale_of[i] = half_bits_to_float(bits);
  }
  REQUIRE(run_kernel(OpId::kDequantizeInt4, {&w, &scale}, out, {}).ok());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < k; ++t) {
      const uint8_t byte = w.bytes[static_cast<size_t>(r * k / 2 + t / 32 * 16 + t % 16)];
      const int value = (t % 32 < 16 ? byte & 0xf : byte >> 4) - 8;
      CHECK(out.at(r * k + t) == static_cast<float>(value) * scale_of[static_cast<size_t>(r * (k / group) + t / group)]);
    }
}

TEST_CASE("integer_matmul: sum (a - a_zero) w in int32, exactly, at the extremes, every tile edge and K tail") {
  for (const std::array<int64_t, 3>& mkn : std::vector<std::array<int64_t, 3>>{
           {1, 768, 40}, {3, 37, 19}, {4, 64, 64}, {5, 100, 33}, {9, 129, 7}, {2, 65536, 3}}) {
    const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
    INFO("m " << m << " k " << k << " n " << n);
    HostTensor a(DType::kU8, {m, k}), w(DType::kI8, {n, k}), zero(DType::kU8, {}), out(DType::kI32, {m, n});
    // The last case: every a 255 and every w -128 with zero point 0, the largest sum K allows.
    const bool extreme = k == 65536;
    for (int64_t i = 0; i < m * k; ++i) a.bytes[static_cast<size_t>(i)] = extreme ? 255 : static_cast<uint8_t>(i * 37 + 11);
    for (int64_t i = 0; i < n * k; ++i) w.bytes[static_cast<size_t>(i)] = extreme ? 0x80 : static_cast<uint8_t>(i * 89 + 7);
    for (int z : {0, 128, 255}) {
      if (extreme && z != 0) continue;
      zero.bytes[0] = static_cast<uint8_t>(z);
      REQUIRE(run_kernel(OpId::kIntegerMatmul, {&a, &w, &zero}, out, {}).ok());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int64_t want = 0;
          for (int64_t t = 0; t < k; ++t)
            want += (int64_t{a.bytes[static_cast<size_t>(i * k + t)]} - z) *
                    static_cast<int8_t>(w.bytes[static_cast<size_t>(j * k + t)]);
          int32_t got = 0;
          std::memcpy(&got, out.bytes.data() + (i * n + j) * 4, 4);
          CHECK(int64_t{got} == want);
        }
    }
  }
}

}  // namespace hexir::hal::testing
