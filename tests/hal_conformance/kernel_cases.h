// Kernel calls every backend must agree on: each operator over shapes that
// reach every code path (fast and general broadcasting, 1-D matmul promotion,
// broadcast batches, strided softmax rows, odd sizes, every element size,
// in-place outputs, several outputs, non-f32 dtypes). Each case is planned by
// its operator (ops::plan_op) and run as the VM runs it; references come
// from the cpu kernels, whose own tests check them against independent
// references (tests/hal).
#pragma once

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hal_test_util.h"
#include "hexir/base/half.h"
#include "hexir/ops/op.h"
#include "hexir/ops/widen.h"

namespace hexir::hal::conformance {

using ops::OpId;
using testing::HostTensor;

struct KernelCase {
  std::string name;
  OpId id;
  std::vector<HostTensor> inputs;
  std::vector<int64_t> params;
  bool in_place = false;  // output 0 takes input 0's storage
  double rtol = 2e-5, atol = 1e-6;
  bool exact = false;  // byte-moving kernels must match bit for bit
};

inline HostTensor with_specials(HostTensor t) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  if (t.count() > 3) {
    t.at(1) = nan;
    t.at(2) = inf;
    t.at(3) = -inf;
  }
  return t;
}

// The result types from the operator's rule (so the cases cannot drift from it).
inline std::vector<HostTensor> results_of(const KernelCase& c) {
  std::vector<TensorType> types;
  for (const HostTensor& t : c.inputs) types.push_back(t.type());
  Result<std::vector<TensorType>> results = ops::infer_result_types(c.id, types, c.params);
  INFO(c.name, ": ", results.status().to_string());
  REQUIRE(results.ok());
  std::vector<HostTensor> out;
  for (const TensorType& t : *results) {
    out.emplace_back(t.dtype, t.dims);
    out.back().bounded = t.bounded;
  }
  return out;
}

// The cpu kernel's results for `c`.
inline std::vector<HostTensor> cpu_reference(const KernelCase& c) {
  std::vector<HostTensor> inputs = c.inputs;
  std::vector<HostTensor> outputs = results_of(c);
  std::vector<HostTensor*> in_pointers, out_pointers;
  for (HostTensor& t : inputs) in_pointers.push_back(&t);
  for (HostTensor& t : outputs) out_pointers.push_back(&t);
  Status s = testing::run_op(c.id, in_pointers, out_pointers, c.params, c.in_place ? 0 : -1);
  INFO(c.name, ": ", s.to_string());
  REQUIRE(s.ok());
  if (c.in_place) outputs[0].bytes = inputs[0].bytes;
  return outputs;
}

// f16 / bf16 elements as floats and back (base/half.h's bits).
inline float half_at(const HostTensor& t, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, t.bytes.data() + i * 2, 2);
  return t.dtype == DType::kBF16 ? std::bit_cast<float>(static_cast<uint32_t>(bits) << 16)
                                 : half_bits_to_float(bits);
}
inline HostTensor to_half(const HostTensor& t, DType half) {
  HostTensor out(half, t.dims);
  for (int64_t i = 0; i < t.count(); ++i) {
    const uint16_t bits = half == DType::kBF16 ? float_to_bfloat16_bits(t.at(i)) : float_to_half_bits(t.at(i));
    std::memcpy(out.bytes.data() + i * 2, &bits, 2);
  }
  return out;
}
inline HostTensor from_half(const HostTensor& t) {
  HostTensor out(DType::kF32, t.dims);
  for (int64_t i = 0; i < t.count(); ++i) out.at(i) = half_at(t, i);
  return out;
}

// Half results: the backends' f32 kernels agree within the case's tolerance,
// so the rounded results within that plus one unit in the last place.
inline void check_halves_match(const KernelCase& c, const HostTensor& got, const HostTensor& want) {
  INFO(c.name);
  REQUIRE(got.bytes.size() == want.bytes.size());
  const double ulp = want.dtype == DType::kBF16 ? 0x1p-7 : 0x1p-10;
  for (int64_t i = 0; i < want.count(); ++i) {
    const double g = half_at(got, i), w = half_at(want, i);
    const bool ok = std::isnan(w)   ? std::isnan(g)
                    : std::isinf(w) ? g == w
                                    : std::fabs(g - w) <= c.atol + 0x1p-24 + (c.rtol + ulp) * std::fabs(w);
    if (!ok) {
      INFO("element ", i, " of ", want.count(), ": got ", g, ", want ", w);
      CHECK(ok);
      return;
    }
  }
}

// Compares element by element (floats with tolerance, NaN == NaN, infinities exact).
inline void check_matches(const KernelCase& c, const HostTensor& got, const HostTensor& want) {
  INFO(c.name);
  REQUIRE(got.dtype == want.dtype);
  REQUIRE(got.bytes.size() == want.bytes.size());
  if (ops::is_half(want.dtype) && !c.exact) return check_halves_match(c, got, want);
  if (c.exact || want.dtype != DType::kF32) {
    size_t first = 0;
    while (first < want.bytes.size() && got.bytes[first] == want.bytes[first]) ++first;
    INFO("first differing byte ", first, " of ", want.bytes.size());
    CHECK(first == want.bytes.size());
    return;
  }
  for (int64_t i = 0; i < want.count(); ++i) {
    const double g = got.at(i), w = want.at(i);
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= c.atol + c.rtol * std::fabs(w);
    }
    if (!ok) {
      INFO("element ", i, " of ", want.count(), ": got ", g, ", want ", w);
      CHECK(ok);
      return;
    }
  }
}

// Every case of an operator that takes f16 and bf16 (ops/widen.h) again with
// its f32 operands in each half dtype: the backends' widening kernels.
inline void add_half_cases(std::vector<KernelCase>& cases) {
  const size_t f32_cases = cases.size();
  for (size_t k = 0; k < f32_cases; ++k) {
    if (!ops::widens_halves(cases[k].id)) continue;
    bool any_f32 = false;
    for (const HostTensor& t : cases[k].inputs) any_f32 = any_f32 || t.dtype == DType::kF32;
    if (!any_f32) continue;
    for (DType half : {DType::kF16, DType::kBF16}) {
      KernelCase c = cases[k];
      c.name += half == DType::kF16 ? " (f16)" : " (bf16)";
      for (HostTensor& t : c.inputs)
        if (t.dtype == DType::kF32) t = to_half(t, half);
      cases.push_back(std::move(c));
    }
  }
}

inline std::vector<KernelCase> kernel_cases() {
  using testing::iota_bytes;
  using testing::random_f32;
  std::vector<KernelCase> cases;
  const OpId binaries[] = {OpId::kAdd, OpId::kSub, OpId::kMul, OpId::kDiv, OpId::kMaximum, OpId::kMinimum};
  const char* binary_names[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  for (int op = 0; op < 6; ++op) {
    const std::string n = binary_names[op];
    const OpId id = binaries[op];
    const uint32_t s = 100 + 10 * op;
    cases.push_back({n + " same shape with NaN/inf",
                     id,
                     {with_specials(random_f32({37, 19}, s)), random_f32({37, 19}, s + 1)},
                     {}});
    cases.push_back(
        {n + " b specials", id, {random_f32({5, 7}, s + 2), with_specials(random_f32({5, 7}, s + 3))}, {}});
    cases.push_back({n + " row broadcast", id, {random_f32({4, 8}, s + 4), random_f32({8}, s + 5)}, {}});
    cases.push_back({n + " scalar b", id, {random_f32({5, 7}, s + 6), random_f32({}, s + 7)}, {}});
    cases.push_back({n + " scalar a", id, {random_f32({1}, s + 8), random_f32({5, 7}, s + 9)}, {}});
    cases.push_back(
        {n + " general broadcast", id, {random_f32({4, 1}, s + 10), random_f32({1, 3, 1, 8}, s + 11)}, {}});
    cases.push_back(
        {n + " general 3-D", id, {random_f32({2, 1, 5}, s + 12), random_f32({3, 1}, s + 13)}, {}});
    cases.push_back({n + " large, bias", id, {random_f32({1000, 33}, s + 14), random_f32({33}, s + 15)}, {}});
    cases.push_back({n + " in place", id, {random_f32({4, 8}, s + 16), random_f32({8}, s + 17)}, {}, true});
  }
  const OpId unaries[] = {OpId::kRelu, OpId::kSilu, OpId::kSigmoid, OpId::kTanh,
                          OpId::kExp,  OpId::kSqrt, OpId::kRsqrt,   OpId::kNeg};
  const char* unary_names[] = {"relu", "silu", "sigmoid", "tanh", "exp", "sqrt", "rsqrt", "neg"};
  for (int op = 0; op < 8; ++op) {
    const std::string n = unary_names[op];
    const uint32_t s = 200 + 10 * op;
    cases.push_back({n, unaries[op], {with_specials(random_f32({3, 129}, s, -4.0f, 4.0f))}, {}});
    cases.push_back({n + " in place", unaries[op], {random_f32({70}, s + 1, 0.1f, 3.0f)}, {}, true});
  }
  // lstm_cell: (gates [B, 4H], c [B, H]) -> (h, c); H past one 256-column chunk, and a tiny one.
  cases.push_back({"lstm_cell", OpId::kLstmCell,
                   {random_f32({3, 4 * 300}, 310, -6.0f, 6.0f), random_f32({3, 300}, 311, -2.0f, 2.0f)}, {}});
  cases.push_back({"lstm_cell one row of 5", OpId::kLstmCell,
                   {with_specials(random_f32({1, 20}, 312, -4.0f, 4.0f)), random_f32({1, 5}, 313)}, {}});
  cases.push_back({"gelu erf", OpId::kGelu, {with_specials(random_f32({3, 129}, 300, -5.0f, 5.0f))}, {0}});
  cases.push_back({"gelu tanh", OpId::kGelu, {with_specials(random_f32({3, 129}, 301, -5.0f, 5.0f))}, {1}});

  // The ONNX unary operators; float parameters are the bits of doubles.
  {
    auto word = [](double v) { return std::bit_cast<int64_t>(v); };
    const double inf = std::numeric_limits<double>::infinity();
    struct Unary {
      std::string name;
      OpId id;
      std::vector<int64_t> params;
    };
    const Unary onnx_unaries[] = {
        {"leaky_relu", OpId::kLeakyRelu, {word(0.01)}},
        {"leaky_relu alpha 0.3", OpId::kLeakyRelu, {word(0.3)}},
        {"clip [-1, 2]", OpId::kClip, {word(-1.0), word(2.0)}},
        {"clip min only", OpId::kClip, {word(-0.5), word(inf)}},
        {"clip max only", OpId::kClip, {word(-inf), word(0.25)}},
        {"clip min above max", OpId::kClip, {word(1.0), word(-1.0)}},
        {"hard_sigmoid", OpId::kHardSigmoid, {word(0.2), word(0.5)}},
        {"hard_sigmoid alpha 1 beta 0", OpId::kHardSigmoid, {word(1.0), word(0.0)}},
        {"hard_swish", OpId::kHardSwish, {}},
        {"erf", OpId::kErf, {}},
        {"log", OpId::kLog, {}},
        {"abs", OpId::kAbs, {}},
        {"reciprocal", OpId::kReciprocal, {}},
        {"softplus", OpId::kSoftplus, {}},
    };
    uint32_t s = 320;
    for (const Unary& u : onnx_unaries) {
      HostTensor x = with_specials(random_f32({3, 129}, s++, -5.0f, 5.0f));
      x.at(5) = 0.0f;
      x.at(6) = -0.0f;
      cases.push_back({u.name, u.id, {x}, u.params});
      cases.push_back({u.name + " in place", u.id, {random_f32({70}, s++, 0.1f, 3.0f)}, u.params, true});
    }
  }

  // pow: numpy.power (NaN for a negative base and a fractional exponent).
  cases.push_back(
      {"pow same shape with NaN/inf",
       OpId::kPow,
       {with_specials(random_f32({37, 19}, 340, 0.1f, 3.0f)), random_f32({37, 19}, 341, -3.0f, 3.0f)},
       {}});
  cases.push_back({"pow negative bases",
                   OpId::kPow,
                   {random_f32({5, 7}, 342), with_specials(random_f32({5, 7}, 343))},
                   {}});
  cases.push_back(
      {"pow scalar exponent", OpId::kPow, {random_f32({5, 7}, 344, 0.0f, 4.0f), random_f32({}, 345)}, {}});
  cases.push_back({"pow general broadcast",
                   OpId::kPow,
                   {random_f32({4, 1}, 346, 0.5f, 2.0f), random_f32({1, 3, 1, 8}, 347)},
                   {}});
  cases.push_back(
      {"pow in place", OpId::kPow, {random_f32({4, 8}, 348, 0.5f, 2.0f), random_f32({8}, 349)}, {}, true});

  // Comparisons: bool results, NaN unequal; operands of f32, i32 or i64.
  {
    HostTensor a = with_specials(random_f32({6, 11}, 350, -2.0f, 2.0f));
    HostTensor b = a;
    for (int64_t i = 0; i < b.count(); i += 3) b.at(i) = b.at(i) + 0.5f;
    b.at(2) = std::numeric_limits<float>::infinity();  // inf == inf
    auto small_ints = [](DType dtype, std::vector<int64_t> dims, uint32_t seed) {
      HostTensor t(dtype, std::move(dims));
      for (int64_t i = 0; i < t.count(); ++i) {
        const int64_t v = static_cast<int64_t>((i * 7 + seed) % 5) - 2;
        if (dtype == DType::kI64)
          std::memcpy(t.bytes.data() + 8 * i, &v, 8);
        else {
          const int32_t w = static_cast<int32_t>(v);
          std::memcpy(t.bytes.data() + 4 * i, &w, 4);
        }
      }
      return t;
    };
    HostTensor big(DType::kI64, {4});
    const int64_t big_values[] = {INT64_MAX, INT64_MIN, INT64_MAX - 1, 1};  // not exact as doubles
    std::memcpy(big.bytes.data(), big_values, sizeof big_values);
    HostTensor big2(DType::kI64, {4});
    const int64_t big2_values[] = {INT64_MAX - 1, INT64_MIN, INT64_MAX, 1};
    std::memcpy(big2.bytes.data(), big2_values, sizeof big2_values);
    const std::pair<OpId, const char*> comparisons[] = {
        {OpId::kEqual, "equal"}, {OpId::kLess, "less"}, {OpId::kGreater, "greater"}};
    uint32_t seed = 360;
    for (auto [op, name] : comparisons) {
      const OpId id = op;  // clang 14 cannot capture a structured binding
      const std::string n = name;
      auto add = [&](std::string what, std::vector<HostTensor> inputs) {
        KernelCase c{n + " " + what, id, std::move(inputs), {}};
        c.exact = true;
        cases.push_back(c);
      };
      add("f32 same shape with NaN/inf", {a, b});
      add("f32 row broadcast", {random_f32({4, 8}, seed++), random_f32({8}, seed++)});
      add("f32 scalar a", {random_f32({}, seed++), random_f32({5, 7}, seed++)});
      add("f32 general broadcast", {random_f32({4, 1}, seed++), random_f32({1, 3, 1, 8}, seed++)});
      add("i64 same shape", {small_ints(DType::kI64, {5, 9}, 1), small_ints(DType::kI64, {5, 9}, 3)});
      add("i64 beyond double precision", {big, big2});
      add("i64 general broadcast",
          {small_ints(DType::kI64, {3, 1, 5}, 2), small_ints(DType::kI64, {4, 1}, 4)});
      add("i32 scalar b", {small_ints(DType::kI32, {6, 7}, 5), small_ints(DType::kI32, {}, 6)});
    }
  }
  {
    KernelCase c{"not bool (any non-zero byte is true)", OpId::kNot, {iota_bytes(DType::kBool, {7, 13})}, {}};
    c.exact = true;
    cases.push_back(c);
    // (No in-place case: the replay test rewrites only f32 inputs between rounds.)
  }

  // Integer arithmetic on i32 and i64 (extremes, -1 and 0 among the operands;
  // divisors never 0: the cpu kernel fails on one, the CUDA kernel writes 0),
  // le/ge, logical maps, sign and the roundings.
  {
    auto int_values = [](DType dtype, std::vector<int64_t> dims, uint32_t seed, bool nonzero) {
      HostTensor t(dtype, std::move(dims));
      const bool wide = dtype == DType::kI64;
      const int64_t lo = wide ? INT64_MIN : INT32_MIN, hi = wide ? INT64_MAX : INT32_MAX;
      const int64_t specials[] = {lo, hi, -1, 0, 1, lo + 1, 7};
      for (int64_t i = 0; i < t.count(); ++i) {
        const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + seed * 40503u;
        int64_t v = (h >> 8) % 4 == 0 ? specials[(h >> 12) % 7] : static_cast<int64_t>((h >> 16) % 61) - 30;
        if (nonzero && v == 0) v = -3;
        if (wide) {
          std::memcpy(t.bytes.data() + 8 * i, &v, 8);
        } else {
          const int32_t w = static_cast<int32_t>(v);
          std::memcpy(t.bytes.data() + 4 * i, &w, 4);
        }
      }
      return t;
    };
    auto add = [&](std::string name, OpId id, std::vector<HostTensor> inputs, std::vector<int64_t> params = {}) {
      KernelCase c{std::move(name), id, std::move(inputs), std::move(params)};
      c.exact = true;
      cases.push_back(c);
    };
    const std::pair<OpId, const char*> int_binaries[] = {
        {OpId::kAdd, "add"},         {OpId::kSub, "sub"},         {OpId::kMul, "mul"}, {OpId::kDiv, "div"},
        {OpId::kMaximum, "maximum"}, {OpId::kMinimum, "minimum"}, {OpId::kMod, "mod"}};
    uint32_t seed = 600;
    for (DType t : {DType::kI32, DType::kI64}) {
      const std::string dt = t == DType::kI32 ? " i32" : " i64";
      for (auto [op, name] : int_binaries) {
        const OpId id = op;
        const bool divides = id == OpId::kDiv || id == OpId::kMod;
        for (int64_t fmod : {0, 1}) {
          if (id != OpId::kMod && fmod == 1) continue;
          std::vector<int64_t> params;
          std::string n = name + dt;
          if (id == OpId::kMod) {
            params = {fmod};
            n += fmod ? " fmod" : "";
          }
          add(n + " same shape", id, {int_values(t, {7, 13}, seed, false), int_values(t, {7, 13}, seed + 1, divides)},
              params);
          add(n + " scalar b", id, {int_values(t, {5, 7}, seed + 2, false), int_values(t, {}, seed + 3, true)},
              params);
          add(n + " scalar a", id, {int_values(t, {1}, seed + 4, false), int_values(t, {5, 7}, seed + 5, true)},
              params);
          add(n + " general broadcast", id,
              {int_values(t, {4, 1}, seed + 6, false), int_values(t, {1, 3, 1, 8}, seed + 7, divides)}, params);
          seed += 10;
        }
      }
      // pow: exponents of every sign and size (the extremes too), wrapping.
      add("pow" + dt + " same shape", OpId::kPow,
          {int_values(t, {7, 13}, seed, false), int_values(t, {7, 13}, seed + 1, false)});
      add("pow" + dt + " general broadcast", OpId::kPow,
          {int_values(t, {4, 1}, seed + 2, false), int_values(t, {1, 3, 1, 8}, seed + 3, false)});
      seed += 4;
      for (auto [op, name] : {std::pair<OpId, const char*>{OpId::kNeg, "neg"}, {OpId::kAbs, "abs"},
                              {OpId::kSign, "sign"}})
        add(name + dt, op, {int_values(t, {3, 129}, seed++, false)});
      for (auto [op, name] : {std::pair<OpId, const char*>{OpId::kLessOrEqual, "less_or_equal"},
                              {OpId::kGreaterOrEqual, "greater_or_equal"}}) {
        add(name + dt + " same shape", op, {int_values(t, {5, 9}, seed, false), int_values(t, {5, 9}, seed + 1, false)});
        add(name + dt + " general broadcast", op,
            {int_values(t, {3, 1, 5}, seed + 2, false), int_values(t, {4, 1}, seed + 3, false)});
        seed += 4;
      }
    }
    for (auto [op, name] : {std::pair<OpId, const char*>{OpId::kLessOrEqual, "less_or_equal"},
                            {OpId::kGreaterOrEqual, "greater_or_equal"}}) {
      HostTensor a = with_specials(random_f32({6, 11}, seed++, -2.0f, 2.0f));
      HostTensor b = a;
      for (int64_t i = 0; i < b.count(); i += 3) b.at(i) = b.at(i) + 0.5f;
      add(std::string(name) + " f32 with NaN/inf", op, {a, b});
      add(std::string(name) + " f32 row broadcast", op, {random_f32({4, 8}, seed++), random_f32({8}, seed++)});
    }
    auto bools = [](std::vector<int64_t> dims, uint32_t seed) {
      HostTensor t(DType::kBool, std::move(dims));
      for (size_t i = 0; i < t.bytes.size(); ++i) {
        const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + seed * 40503u;
        t.bytes[i] = (h >> 9) % 3 == 0 ? 0 : static_cast<uint8_t>(h >> 16);  // any non-zero byte is true
      }
      return t;
    };
    for (auto [op, name] : {std::pair<OpId, const char*>{OpId::kAnd, "and"}, {OpId::kOr, "or"}, {OpId::kXor, "xor"}}) {
      add(std::string(name) + " same shape", op, {bools({7, 13}, seed), bools({7, 13}, seed + 1)});
      add(std::string(name) + " general broadcast", op, {bools({3, 1, 5}, seed + 2), bools({4, 1}, seed + 3)});
      seed += 4;
    }
    HostTensor halves(DType::kF32, {3, 129});
    for (int64_t i = 0; i < halves.count(); ++i) halves.at(i) = static_cast<float>(i - 190) * 0.25f;
    halves = with_specials(halves);
    for (auto [op, name] : {std::pair<OpId, const char*>{OpId::kSign, "sign"}, {OpId::kCeil, "ceil"},
                            {OpId::kFloor, "floor"}, {OpId::kRound, "round"}}) {
      add(std::string(name) + " f32 quarters with NaN/inf", op, {halves});
      add(std::string(name) + " f32 random", op, {random_f32({70}, seed++, -100.0f, 100.0f)});
    }
    KernelCase fmod{"mod f32 fmod", OpId::kMod, {with_specials(random_f32({6, 11}, seed++, -20.0f, 20.0f)),
                                                random_f32({11}, seed++, 0.5f, 3.0f)}, {1}};
    cases.push_back(fmod);
  }

  auto mm = [&](std::string n, std::vector<int64_t> a, std::vector<int64_t> b, uint32_t s) {
    KernelCase c{"matmul " + n, OpId::kMatmul, {random_f32(a, s), random_f32(b, s + 1)}, {}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cases.push_back(c);
  };
  mm("batched x 2-D", {2, 4, 8}, {8, 3}, 400);
  mm("odd 33x70x17", {33, 70}, {70, 17}, 402);
  mm("vector x matrix", {8}, {8, 5}, 404);
  mm("matrix x vector", {4, 8}, {8}, 406);
  mm("vector x vector", {8}, {8}, 408);
  mm("broadcast batch", {3, 1, 5, 7}, {4, 7, 6}, 410);
  mm("mixed batch broadcast", {3, 5, 7}, {2, 3, 7, 4}, 412);
  mm("repeated a", {5, 7}, {6, 7, 4}, 414);
  mm("K = 0", {3, 0}, {0, 4}, 416);
  mm("64x96x80", {64, 96}, {96, 80}, 418);
  cases.push_back({"add + relu (fused), broadcast rows", OpId::kAdd,
                   {with_specials(random_f32({5, 33}, 426)), random_f32({33}, 427)},
                   {static_cast<int64_t>(ops::Activation::kRelu), 0, 0}});
  cases.push_back({"mul + hard_swish (fused), a broadcast gate", OpId::kMul,
                   {with_specials(random_f32({4, 6, 9}, 428)), random_f32({4, 6, 1}, 429)},
                   {static_cast<int64_t>(ops::Activation::kHardSwish), 0, 0}});
  cases.push_back({"mul + affine (fused scalar mul and add)", OpId::kMul,
                   {with_specials(random_f32({5, 33}, 430)), random_f32({1}, 431)},
                   {static_cast<int64_t>(ops::Activation::kAffine), std::bit_cast<int64_t>(0.75),
                    std::bit_cast<int64_t>(-0.5)}});
  {
    // Fused epilogues: [activation, alpha, beta] (ops/plans.h Activation), the bias as a third input.
    const int64_t gelu = static_cast<int64_t>(ops::Activation::kGeluErf);
    const int64_t clip = static_cast<int64_t>(ops::Activation::kClip);
    KernelCase c{"matmul + bias + gelu (fused)", OpId::kMatmul,
                 {random_f32({33, 20}, 420), random_f32({20, 17}, 421), random_f32({17}, 422)}, {0, gelu, 0, 0}};
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cases.push_back(c);
    KernelCase b{"batched matmul + relu6 (fused)", OpId::kMatmul,
                 {random_f32({3, 4, 8}, 423), random_f32({8, 6}, 424)},
                 {0, clip, std::bit_cast<int64_t>(0.0), std::bit_cast<int64_t>(6.0)}};
    b.rtol = 1e-4;
    b.atol = 1e-4;
    cases.push_back(b);
    // b stored transposed ([n, k] per batch element): attention's Q K^T.
    KernelCase t{"batched matmul, b transposed", OpId::kMatmul,
                 {random_f32({3, 5, 19}, 425), random_f32({3, 7, 19}, 426)}, {1}};
    t.rtol = 1e-4;
    t.atol = 1e-4;
    cases.push_back(t);
    KernelCase tb{"matmul, b transposed, + bias + relu (fused)", OpId::kMatmul,
                  {random_f32({33, 20}, 427), random_f32({17, 20}, 428), random_f32({17}, 429)}, {1, 1, 0, 0}};
    tb.rtol = 1e-4;
    tb.atol = 1e-4;
    cases.push_back(tb);
  }

  auto softmax = [&](std::string n, std::vector<int64_t> dims, int64_t axis, bool in_place, uint32_t s) {
    cases.push_back({"softmax " + n, OpId::kSoftmax, {random_f32(dims, s, -3.0f, 3.0f)}, {axis}, in_place});
  };
  softmax("axis 0", {6, 5, 7}, 0, false, 500);
  softmax("axis 1", {6, 5, 7}, 1, false, 501);
  softmax("axis 2", {6, 5, 7}, 2, false, 502);
  softmax("long rows", {4, 300}, 1, false, 503);
  softmax("in place", {8, 10}, 1, true, 504);
  // attention over the first n keys: one decode row, several query rows, n past the keys, none.
  auto attention = [&](std::string n, int64_t m, int64_t t, int64_t keys, int64_t offset, uint32_t seed) {
    cases.push_back({"attention " + n, OpId::kAttention,
                     {random_f32({2, 3, m, 16}, seed), random_f32({2, 3, t, 16}, seed + 1),
                      random_f32({2, 3, t, 24}, seed + 2), testing::i64_scalar(keys)},
                     {std::bit_cast<int64_t>(0.25), offset}});
  };
  attention("decode row", 1, 40, 17, 1, 506);
  attention("query rows", 5, 33, 33, 0, 509);
  attention("count past the keys", 2, 9, 100, 1, 512);
  attention("no key: NaN", 1, 9, -3, 0, 515);
  // quantize_linear / dequantize_linear: per tensor and per axis, i8 and u8 (and i32 dequantized).
  auto bytes = [](DType dtype, std::vector<int64_t> dims, uint32_t seed) {
    HostTensor t = testing::iota_bytes(dtype, std::move(dims));
    for (size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<uint8_t>(t.bytes[i] * 31 + seed);
    return t;
  };
  auto scales = [&](std::vector<int64_t> dims, uint32_t seed) { return random_f32(std::move(dims), seed, 0.01f, 0.2f); };
  cases.push_back({"quantize_linear i8 per tensor", OpId::kQuantizeLinear,
                   {with_specials(random_f32({7, 9}, 520, -30, 30)), scales({}, 521), bytes(DType::kI8, {}, 3)}, {0}});
  cases.push_back({"quantize_linear u8 per axis", OpId::kQuantizeLinear,
                   {random_f32({2, 5, 6}, 522, -10, 10), scales({5}, 523), bytes(DType::kU8, {5}, 4)}, {1}});
  cases.push_back({"dequantize_linear i8 per axis 0", OpId::kDequantizeLinear,
                   {bytes(DType::kI8, {4, 7}, 5), scales({4}, 524), bytes(DType::kI8, {4}, 6)}, {0}});
  cases.push_back({"dequantize_linear u8 per tensor", OpId::kDequantizeLinear,
                   {bytes(DType::kU8, {33}, 7), scales({1}, 525), bytes(DType::kU8, {1}, 8)}, {0}});
  auto int8_rows = [&](int64_t n, int64_t k, uint32_t seed) {
    return bytes(DType::kI8, {n, k}, seed);
  };
  cases.push_back({"quantized_matmul one row", OpId::kQuantizedMatmul,
                   {random_f32({1, 70}, 527), int8_rows(33, 70, 11), scales({33}, 528)}, {}, false, 2e-5, 1e-5});
  cases.push_back({"quantized_matmul rows past the few-rows kernel, bias", OpId::kQuantizedMatmul,
                   {random_f32({2, 9, 40}, 529), int8_rows(17, 40, 12), scales({17}, 530), random_f32({17}, 531)},
                   {}, false, 2e-5, 1e-5});
  // int4_matmul: any byte is two weights; f16 scales made from floats.
  auto f16_scales = [&](std::vector<int64_t> dims, uint32_t seed) {
    const HostTensor f = random_f32(dims, seed, 0.01f, 0.2f);
    HostTensor h(DType::kF16, dims);
    for (int64_t i = 0; i < static_cast<int64_t>(h.bytes.size() / 2); ++i) {
      const uint16_t bits = float_to_half_bits(f.at(i));
      std::memcpy(h.bytes.data() + i * 2, &bits, 2);
    }
    return h;
  };
  cases.push_back({"int4_matmul one row, group 32", OpId::kInt4Matmul,
                   {random_f32({1, 96}, 532), bytes(DType::kU8, {21, 48}, 13), f16_scales({21, 3}, 533)}, {}, false,
                   2e-5, 1e-5});
  cases.push_back({"int4_matmul rows past the few-rows kernel, group 64, bias", OpId::kInt4Matmul,
                   {random_f32({3, 5, 128}, 534), bytes(DType::kU8, {19, 64}, 14), f16_scales({19, 2}, 535),
                    random_f32({19}, 536)},
                   {}, false, 2e-5, 1e-5});
  cases.push_back({"integer_matmul 4x4 tiles and edges, K past 64 with a tail", OpId::kIntegerMatmul,
                   {bytes(DType::kU8, {2, 5, 100}, 16), int8_rows(11, 100, 17), bytes(DType::kU8, {}, 18)}, {}});
  {
    // quantized_conv2d: multipliers that spread the sums over the u8 range; dense (gathered and
    // read in place, past one 64-channel tile) and depthwise.
    auto multipliers = [&](int64_t k, float scale, uint32_t seed) { return random_f32({k}, seed, 0.5f * scale, scale); };
    auto biases = [](int64_t k, int32_t seed) {  // within +-10000: the sums stay inside the output range
      HostTensor t(DType::kI32, {k});
      for (int64_t i = 0; i < k; ++i) {
        const int32_t b = static_cast<int32_t>((i * 7919 + seed) % 20001) - 10000;
        std::memcpy(t.bytes.data() + i * 4, &b, 4);
      }
      return t;
    };
    KernelCase dense{"quantized_conv2d 3x3 pad 1, 70 channels", OpId::kQuantizedConv2d,
                     {bytes(DType::kU8, {1, 7, 6, 16}, 19), bytes(DType::kI8, {1, 5, 36, 16, 4}, 20),
                      biases(70, 21), multipliers(70, 1.0f / 4000, 540)},
                     {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 128, 90, 0, 255}};
    dense.exact = true;
    cases.push_back(dense);
    KernelCase pointwise{"quantized_conv2d 1x1 stride 2, relu bounds", OpId::kQuantizedConv2d,
                         {bytes(DType::kU8, {2, 6, 6, 32}, 22), bytes(DType::kI8, {1, 2, 8, 16, 4}, 23),
                          biases(24, 24), multipliers(24, 1.0f / 1000, 541)},
                         {1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1, 7, 60, 60, 255}};
    pointwise.exact = true;
    cases.push_back(pointwise);
    KernelCase add{"quantized_add with a relu's lower bound", OpId::kQuantizedAdd,
                   {bytes(DType::kU8, {3, 7, 5}, 28), bytes(DType::kU8, {3, 7, 5}, 29)},
                   {128, 100, 20, 20, 255, std::bit_cast<int64_t>(0.075), std::bit_cast<int64_t>(0.03),
                    std::bit_cast<int64_t>(0.1)}};
    add.exact = true;
    cases.push_back(add);
    KernelCase depthwise{"quantized_conv2d depthwise 3x3 stride 2, 40 channels", OpId::kQuantizedConv2d,
                         {bytes(DType::kU8, {1, 9, 8, 40}, 25), bytes(DType::kI8, {9, 40}, 26),
                          biases(40, 27), multipliers(40, 1.0f / 300, 542)},
                         {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 40, 3, 128, 0, 255}};
    depthwise.exact = true;
    cases.push_back(depthwise);
  }
  cases.push_back({"dequantize_int4 rows of a 3-D table, group 32", OpId::kDequantizeInt4,
                   {bytes(DType::kU8, {2, 3, 48}, 15), f16_scales({2, 3, 3}, 537)}, {}});
  cases.push_back({"dequantize_linear i32 per axis 1", OpId::kDequantizeLinear,
                   {bytes(DType::kI32, {3, 4}, 9), scales({4}, 526), bytes(DType::kI32, {4}, 10)}, {1}});
  cases.push_back({"softmax with NaN", OpId::kSoftmax, {with_specials(random_f32({2, 6}, 505))}, {1}});

  auto layernorm = [&](std::string n, std::vector<int64_t> dims, int64_t axis, uint32_t s) {
    std::vector<int64_t> tail(dims.begin() + axis, dims.end());
    cases.push_back({"layernorm " + n,
                     OpId::kLayernorm,
                     {random_f32(dims, s), random_f32(tail, s + 1), random_f32(tail, s + 2)},
                     {axis, std::bit_cast<int64_t>(1e-5)}});
  };
  layernorm("last axis", {4, 8}, 1, 600);
  layernorm("two trailing dims", {3, 4, 5}, 1, 603);
  layernorm("whole tensor", {3, 4}, 0, 606);
  layernorm("wide rows", {2, 1000}, 1, 609);

  auto transpose = [&](std::string n, HostTensor t, std::vector<int64_t> perm) {
    KernelCase c{"transpose " + n, OpId::kTranspose, {std::move(t)}, std::move(perm)};
    c.exact = true;
    cases.push_back(c);
  };
  transpose("f32 3-D", random_f32({2, 3, 4}, 700), {2, 0, 1});
  transpose("u8 2-D", iota_bytes(DType::kU8, {5, 7}), {1, 0});
  transpose("f16 3-D", iota_bytes(DType::kF16, {3, 4, 5}), {1, 2, 0});
  transpose("i64 2-D", iota_bytes(DType::kI64, {4, 6}), {1, 0});
  transpose("bool 3-D", iota_bytes(DType::kBool, {2, 3, 4}), {0, 2, 1});
  transpose("i32 identity", iota_bytes(DType::kI32, {3, 5}), {0, 1});
  transpose("scalar", random_f32({}, 701), {});
  transpose("large 4-D", random_f32({8, 16, 4, 32}, 702), {0, 2, 1, 3});

  auto reduce = [&](std::string n, OpId id, std::vector<int64_t> dims, std::vector<int64_t> params,
                    uint32_t s) {
    KernelCase c{n, id, {random_f32(dims, s)}, std::move(params)};
    c.rtol = 1e-5;
    c.atol = 1e-5;
    cases.push_back(c);
  };
  reduce("reduce_sum all", OpId::kReduceSum, {4, 8}, {0}, 800);
  reduce("reduce_sum axis 1 keepdims", OpId::kReduceSum, {4, 8}, {1, 1}, 801);
  reduce("reduce_sum axes 0,2", OpId::kReduceSum, {3, 4, 5}, {0, 0, 2}, 802);
  reduce("reduce_sum long", OpId::kReduceSum, {3, 1000}, {0, 1}, 803);
  reduce("reduce_mean axis 0", OpId::kReduceMean, {16, 64}, {0, 0}, 804);
  reduce("reduce_mean all", OpId::kReduceMean, {}, {0}, 805);
  reduce("reduce_mean of nothing", OpId::kReduceMean, {0, 3}, {0, 0}, 806);
  reduce("reduce_sum of nothing", OpId::kReduceSum, {0, 3}, {0, 0}, 807);
  reduce("reduce_max all", OpId::kReduceMax, {4, 8}, {0}, 808);
  reduce("reduce_max axis 1 keepdims", OpId::kReduceMax, {4, 8}, {1, 1}, 809);
  reduce("reduce_max axes 0,2", OpId::kReduceMax, {3, 4, 5}, {0, 0, 2}, 810);
  reduce("reduce_max long", OpId::kReduceMax, {3, 1000}, {0, 1}, 811);
  reduce("reduce_max global pool axes 2,3", OpId::kReduceMax, {2, 3, 5, 7}, {1, 2, 3}, 812);
  reduce("reduce_max of nothing", OpId::kReduceMax, {0, 3}, {0, 0}, 813);
  reduce("reduce_max scalar", OpId::kReduceMax, {}, {0}, 814);
  cases.push_back(
      {"reduce_max with NaN/inf", OpId::kReduceMax, {with_specials(random_f32({4, 6}, 815))}, {0, 1}});
  // The rest of reduce_sum's family: a row, a strided axis, a global pool and nothing each.
  const std::pair<const char*, OpId> family[] = {{"reduce_min", OpId::kReduceMin},
                                                 {"reduce_prod", OpId::kReduceProd},
                                                 {"reduce_l1", OpId::kReduceL1},
                                                 {"reduce_l2", OpId::kReduceL2},
                                                 {"reduce_log_sum_exp", OpId::kReduceLogSumExp},
                                                 {"reduce_sum_square", OpId::kReduceSumSquare},
                                                 {"reduce_log_sum", OpId::kReduceLogSum}};
  uint32_t family_seed = 820;
  for (const auto& [name, id] : family) {
    const std::string n = name;
    reduce(n + " axis 1", id, {4, 40}, {0, 1}, family_seed++);
    reduce(n + " axis 0 keepdims", id, {6, 5}, {1, 0}, family_seed++);
    reduce(n + " axes 0,2", id, {3, 4, 5}, {0, 0, 2}, family_seed++);
    reduce(n + " global pool", id, {2, 3, 6, 7}, {1, 2, 3}, family_seed++);
    reduce(n + " of nothing", id, {0, 3}, {0, 0}, family_seed++);
    cases.push_back({n + " with NaN/inf", id, {with_specials(random_f32({4, 6}, family_seed++))}, {0, 1}});
  }
  // The integer reductions: wrapping sums and products of arbitrary bits.
  auto exact_reduce = [&](std::string n, OpId id, HostTensor x, std::vector<int64_t> params) {
    KernelCase c{n, id, {std::move(x)}, std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  for (DType t : {DType::kI32, DType::kI64}) {
    const std::string dt = hexir::dtype_name(t);
    for (OpId id : {OpId::kReduceSum, OpId::kReduceMax, OpId::kReduceMin, OpId::kReduceProd, OpId::kReduceL1,
                    OpId::kReduceSumSquare}) {
      const std::string n = std::string(ops::op_def(id).name) + " " + dt;
      exact_reduce(n + " axis 1", id, iota_bytes(t, {5, 37}), {0, 1});
      exact_reduce(n + " axes 0,2", id, iota_bytes(t, {3, 4, 5}), {1, 0, 2});
      exact_reduce(n + " of nothing", id, iota_bytes(t, {0, 3}), {0, 0});
    }
  }

  auto concat = [&](std::string n, std::vector<HostTensor> inputs, int64_t axis) {
    KernelCase c{"concat " + n, OpId::kConcat, std::move(inputs), {axis}};
    c.exact = true;
    cases.push_back(c);
  };
  const HostTensor x = random_f32({4, 8}, 900);
  concat("f32 axis 1", {x, x, random_f32({4, 3}, 901)}, 1);
  concat("i32 axis 0", {iota_bytes(DType::kI32, {2, 3}), iota_bytes(DType::kI32, {1, 3})}, 0);
  concat("u8 axis 1", {iota_bytes(DType::kU8, {3, 5}), iota_bytes(DType::kU8, {3, 2})}, 1);
  concat("f16 axis 2", {iota_bytes(DType::kF16, {2, 3, 4}), iota_bytes(DType::kF16, {2, 3, 4})}, 2);
  concat("f32 wide rows", {random_f32({3, 64}, 902), random_f32({3, 32}, 903)}, 1);
  concat("single input", {x}, 0);
  concat("empty input", {x, HostTensor(DType::kF32, {4, 0})}, 1);

  KernelCase copy_f32{"copy f32", OpId::kCopy, {random_f32({4, 8}, 1000)}, {}};
  copy_f32.exact = true;
  cases.push_back(copy_f32);
  KernelCase copy_u8{"copy u8", OpId::kCopy, {iota_bytes(DType::kU8, {13})}, {}};
  copy_u8.exact = true;
  cases.push_back(copy_u8);

  // ---- operators of the redesign: several outputs, non-f32 dtypes ----
  auto exact = [&](std::string n, OpId id, std::vector<HostTensor> inputs, std::vector<int64_t> params) {
    KernelCase c{std::move(n), id, std::move(inputs), std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  exact("split f32 axis 1 into 3", OpId::kSplit, {random_f32({4, 9}, 1100)}, {1, 2, 3, 4});
  exact("split i64 axis 0 into 2", OpId::kSplit, {iota_bytes(DType::kI64, {6, 5})}, {0, 4, 2});
  exact("split u8 last axis with an empty part", OpId::kSplit, {iota_bytes(DType::kU8, {3, 2, 7})},
        {2, 7, 0});
  exact("split f16 3-D axis 1", OpId::kSplit, {iota_bytes(DType::kF16, {2, 6, 3})}, {1, 1, 2, 3});

  HostTensor values = with_specials(random_f32({3, 17}, 1200, -300.0f, 300.0f));
  values.at(4) = 2.5e9f;
  values.at(5) = -0.75f;
  HostTensor ints(DType::kI64, {2, 5});
  const int64_t int_values[] = {0, -1, 255, 256, -129, 70000, INT64_MAX, INT64_MIN, 7, 1 << 20};
  std::memcpy(ints.bytes.data(), int_values, sizeof int_values);
  const DType castable[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kBool, DType::kU8};
  for (DType to : castable) {
    exact(std::string("cast f32 to ") + dtype_name(to), OpId::kCast, {values}, {static_cast<int64_t>(to)});
    exact(std::string("cast i64 to ") + dtype_name(to), OpId::kCast, {ints}, {static_cast<int64_t>(to)});
    for (DType from : {DType::kF16, DType::kBF16, DType::kI32, DType::kBool, DType::kU8})
      exact(std::string("cast ") + dtype_name(from) + " to " + dtype_name(to), OpId::kCast,
            {iota_bytes(from, {4, 9})}, {static_cast<int64_t>(to)});
  }

  auto mask = [](std::vector<int64_t> dims, uint32_t seed) {
    HostTensor m(DType::kBool, std::move(dims));
    for (size_t i = 0; i < m.bytes.size(); ++i) m.bytes[i] = static_cast<uint8_t>(((i * 7 + seed) % 3) == 0);
    return m;
  };
  exact("where f32 same shape", OpId::kWhere,
        {mask({4, 6}, 1), random_f32({4, 6}, 1300), random_f32({4, 6}, 1301)}, {});
  exact("where f32 broadcast cond row", OpId::kWhere,
        {mask({6}, 2), random_f32({4, 6}, 1302), random_f32({}, 1303)}, {});
  exact("where i64 general broadcast", OpId::kWhere,
        {mask({3, 1, 5}, 3), iota_bytes(DType::kI64, {4, 1}), iota_bytes(DType::kI64, {1, 4, 5})}, {});
  exact("where u8", OpId::kWhere,
        {mask({2, 9}, 4), iota_bytes(DType::kU8, {2, 9}), iota_bytes(DType::kU8, {9})}, {});
  exact("where f16", OpId::kWhere,
        {mask({5, 3}, 5), iota_bytes(DType::kF16, {5, 3}), iota_bytes(DType::kF16, {5, 1})}, {});

  auto indices = [](DType dtype, std::vector<int64_t> dims, std::vector<int64_t> values) {
    HostTensor t(dtype, std::move(dims));
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == DType::kI64)
        std::memcpy(t.bytes.data() + 8 * i, &values[i], 8);
      else {
        const int32_t v = static_cast<int32_t>(values[i]);
        std::memcpy(t.bytes.data() + 4 * i, &v, 4);
      }
    }
    return t;
  };
  exact("gather f32 rows (embedding)", OpId::kGather,
        {random_f32({10, 8}, 1400), indices(DType::kI64, {2, 3}, {0, 9, 3, 3, -1, 5})}, {0});
  exact("gather i32 axis 1 with i32 indices", OpId::kGather,
        {iota_bytes(DType::kI32, {3, 7, 2}), indices(DType::kI32, {4}, {6, 0, -7, 2})}, {1});
  exact("gather u8 last axis, scalar index", OpId::kGather,
        {iota_bytes(DType::kU8, {4, 5}), indices(DType::kI64, {}, {2})}, {1});

  // slice params: per dim [start, step, size]
  exact("slice f32 rows and strided columns", OpId::kSlice, {random_f32({6, 10}, 1500)}, {1, 2, 3, 0, 3, 4});
  exact("slice i64 negative step", OpId::kSlice, {iota_bytes(DType::kI64, {5, 4})}, {4, -1, 5, 3, -2, 2});
  exact("slice u8 3-D middle", OpId::kSlice, {iota_bytes(DType::kU8, {3, 4, 5})},
        {0, 1, 3, 1, 1, 2, 2, 1, 3});
  exact("slice f16 to nothing", OpId::kSlice, {iota_bytes(DType::kF16, {3, 4})}, {0, 1, 3, 0, 1, 0});

  // dynamic_slice params: the window sizes; start indices are i64[] operands (clamped).
  auto start = [&](int64_t v) { return testing::i64_scalar(v); };
  exact("dynamic_slice f32 one row (KV-cache read)", OpId::kDynamicSlice,
        {random_f32({6, 8}, 1550), start(2), start(0)}, {1, 8});
  exact("dynamic_slice f16 3-D, starts clamped both ways", OpId::kDynamicSlice,
        {iota_bytes(DType::kF16, {4, 5, 6}), start(-4), start(9), start(2)}, {2, 3, 3});
  exact("dynamic_slice u8 whole dim", OpId::kDynamicSlice,
        {iota_bytes(DType::kU8, {3, 7}), start(1), start(100)}, {3, 2});
  exact("dynamic_slice i64 empty window", OpId::kDynamicSlice,
        {iota_bytes(DType::kI64, {3, 4}), start(1), start(1)}, {0, 2});
  exact("dynamic_slice i32 scalar", OpId::kDynamicSlice, {iota_bytes(DType::kI32, {})}, {});
  // update_slice: (x, update, starts...), no params; in place on x or copied.
  auto update_slice = [&](std::string n, std::vector<HostTensor> inputs, bool in_place) {
    KernelCase c{"update_slice " + n, OpId::kUpdateSlice, std::move(inputs), {}};
    c.exact = true;
    c.in_place = in_place;
    cases.push_back(c);
  };
  update_slice("f32 one row into a cache, in place",
               {random_f32({8, 4}, 1560), random_f32({1, 4}, 1561), start(5), start(0)}, true);
  update_slice("f32 one row into a cache, copied",
               {random_f32({8, 4}, 1562), random_f32({1, 4}, 1563), start(5), start(0)}, false);
  update_slice("bf16 3-D, clamped",
               {iota_bytes(DType::kBF16, {3, 4, 5}), iota_bytes(DType::kBF16, {2, 2, 5}), start(7), start(-1),
                start(3)},
               false);
  update_slice("u8 clamped, in place",
               {iota_bytes(DType::kU8, {5, 9}), iota_bytes(DType::kU8, {3, 4}), start(4), start(6)}, true);
  update_slice("i64 empty update",
               {iota_bytes(DType::kI64, {4, 2}), iota_bytes(DType::kI64, {0, 2}), start(1), start(0)}, false);
  update_slice("bool whole tensor",
               {iota_bytes(DType::kBool, {2, 3}), iota_bytes(DType::kBool, {2, 3}), start(1), start(1)},
               false);

  // scatter_nd [reduction] and scatter_elements [axis, reduction]: (data,
  // indices, updates); in place on data or copied. Duplicate targets: the
  // last update, or all combined in order (every backend alike). Reduction
  // cases use small integers in f32 so sums and products are exact.
  auto scatter = [&](std::string n, OpId id, std::vector<HostTensor> inputs, std::vector<int64_t> params,
                     bool in_place) {
    KernelCase c{n, id, std::move(inputs), std::move(params)};
    c.exact = true;
    c.in_place = in_place;
    cases.push_back(c);
  };
  auto small_ints = [](std::vector<int64_t> dims, int seed) {
    HostTensor t(DType::kF32, std::move(dims));
    for (int64_t i = 0; i < t.count(); ++i) t.at(i) = static_cast<float>((i * 7 + seed) % 9 - 4);
    return t;
  };
  scatter("scatter_nd f32 KV-cache rows, in place", OpId::kScatterND,
          {random_f32({2, 8, 4}, 1580), indices(DType::kI64, {2, 1, 2}, {0, 5, 1, -3}),
           random_f32({2, 1, 4}, 1581)},
          {0}, true);
  scatter("scatter_nd u8 full tuples, duplicates, i32 indices", OpId::kScatterND,
          {iota_bytes(DType::kU8, {3, 5}), indices(DType::kI32, {4, 2}, {1, 1, 2, -1, 1, 1, 0, 4}),
           iota_bytes(DType::kU8, {4})},
          {0}, false);
  scatter("scatter_nd f16 rows, copied", OpId::kScatterND,
          {iota_bytes(DType::kF16, {4, 3}), indices(DType::kI64, {2, 1}, {3, -4}),
           iota_bytes(DType::kF16, {2, 3})},
          {0}, false);
  scatter("scatter_nd f32 add, duplicate rows", OpId::kScatterND,
          {small_ints({4, 3}, 1), indices(DType::kI64, {3, 1}, {1, 3, 1}), small_ints({3, 3}, 2)}, {1}, true);
  scatter("scatter_nd f32 mul", OpId::kScatterND,
          {small_ints({4, 3}, 3), indices(DType::kI64, {3, 1}, {1, 3, 1}), small_ints({3, 3}, 4)}, {2},
          false);
  scatter("scatter_nd i64 max, full tuples", OpId::kScatterND,
          {iota_bytes(DType::kI64, {2, 3}), indices(DType::kI32, {3, 2}, {0, 1, 1, 2, 0, 1}),
           iota_bytes(DType::kI64, {3})},
          {3}, false);
  scatter("scatter_nd i32 min", OpId::kScatterND,
          {iota_bytes(DType::kI32, {4, 2}), indices(DType::kI64, {2, 1}, {2, 2}),
           iota_bytes(DType::kI32, {2, 2})},
          {4}, true);
  scatter("scatter_elements f32 index_copy along axis 2, in place", OpId::kScatterElements,
          {random_f32({2, 2, 6, 3}, 1590), indices(DType::kI64, {2, 2, 1, 3}, std::vector<int64_t>(12, 4)),
           random_f32({2, 2, 1, 3}, 1591)},
          {2, 0}, true);
  scatter("scatter_elements bool axis 0, copied", OpId::kScatterElements,
          {iota_bytes(DType::kBool, {3, 4}), indices(DType::kI32, {2, 3}, {2, 0, -1, 1, 1, 0}),
           iota_bytes(DType::kBool, {2, 3})},
          {0, 0}, false);
  scatter("scatter_elements i64 duplicates along axis 1", OpId::kScatterElements,
          {iota_bytes(DType::kI64, {2, 3}), indices(DType::kI64, {2, 4}, {0, 2, 0, -1, 1, 1, 1, 0}),
           iota_bytes(DType::kI64, {2, 4})},
          {1, 0}, false);
  scatter(
      "scatter_elements f32 add along axis 1", OpId::kScatterElements,
      {small_ints({2, 3}, 5), indices(DType::kI64, {2, 4}, {0, 2, 0, -1, 1, 1, 1, 0}), small_ints({2, 4}, 6)},
      {1, 1}, true);
  scatter("scatter_elements f32 max, NaN and inf", OpId::kScatterElements,
          {with_specials(random_f32({3, 4}, 1592)), indices(DType::kI32, {2, 4}, {0, 1, 2, 0, 2, 2, 1, 0}),
           with_specials(random_f32({2, 4}, 1593))},
          {0, 3}, false);
  scatter("scatter_elements i32 mul, smaller indices", OpId::kScatterElements,
          {iota_bytes(DType::kI32, {3, 4, 2}), indices(DType::kI64, {2, 2, 1}, {3, 0, -1, 3}),
           iota_bytes(DType::kI32, {2, 2, 1})},
          {1, 2}, false);

  // gather_elements [axis] and gather_nd [batch_dims]: (data, indices); the
  // scatters' plan read the other way, every element size.
  auto gather_case = [&](std::string n, OpId id, std::vector<HostTensor> inputs,
                         std::vector<int64_t> params) {
    KernelCase c{n, id, std::move(inputs), std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  gather_case("gather_elements f32 axis 1, negative, repeated", OpId::kGatherElements,
              {random_f32({3, 4}, 1594),
               indices(DType::kI64, {3, 5}, {0, 3, -1, 1, 1, 2, 2, 0, -4, 3, 1, 1, 0, 0, 2})},
              {1});
  gather_case("gather_elements u8 axis 0, smaller indices, i32", OpId::kGatherElements,
              {iota_bytes(DType::kU8, {4, 3, 2}), indices(DType::kI32, {2, 2, 2}, {3, 0, -1, 2, 1, 1, 0, 3})},
              {0});
  gather_case("gather_elements f16 last axis", OpId::kGatherElements,
              {iota_bytes(DType::kF16, {2, 5}), indices(DType::kI64, {2, 2}, {4, 0, -2, 1})}, {1});
  gather_case("gather_elements i64 empty", OpId::kGatherElements,
              {iota_bytes(DType::kI64, {2, 3}), indices(DType::kI64, {0, 3}, {})}, {0});
  gather_case("gather_nd f32 rows (tuples of 1)", OpId::kGatherND,
              {random_f32({5, 4}, 1595), indices(DType::kI64, {3, 1}, {4, -5, 2})}, {0});
  gather_case("gather_nd i32 elements (full tuples), i32 indices", OpId::kGatherND,
              {iota_bytes(DType::kI32, {3, 4}), indices(DType::kI32, {2, 2, 2}, {0, 0, 2, 3, -1, -1, 1, 2})},
              {0});
  gather_case("gather_nd f16 batch_dims 1", OpId::kGatherND,
              {iota_bytes(DType::kF16, {2, 3, 4}), indices(DType::kI64, {2, 2, 1}, {2, 0, 1, -1})}, {1});
  gather_case("gather_nd u8 batch_dims 2, elements", OpId::kGatherND,
              {iota_bytes(DType::kU8, {2, 3, 5}), indices(DType::kI64, {2, 3, 1}, {0, 4, 2, 1, 3, -1})}, {2});

  // cumsum [axis, exclusive, reverse]: f32 (small integers: exact), i32, i64.
  auto cumsum_case = [&](std::string n, HostTensor x, std::vector<int64_t> params) {
    KernelCase c{"cumsum " + n, OpId::kCumSum, {std::move(x)}, std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  cumsum_case("f32 last axis", small_ints({3, 7}, 11), {1, 0, 0});
  cumsum_case("f32 middle axis, exclusive", small_ints({2, 5, 3}, 12), {1, 1, 0});
  cumsum_case("i32 first axis, reverse", iota_bytes(DType::kI32, {4, 3}), {0, 0, 1});
  cumsum_case("i64 exclusive reverse", iota_bytes(DType::kI64, {2, 6}), {1, 1, 1});
  cumsum_case("f32 random rows", random_f32({4, 33}, 1596), {1, 0, 0});
  cumsum_case("i32 empty axis", iota_bytes(DType::kI32, {3, 0}), {1, 0, 0});

  // argmax params: [axis, keepdims, select_last_index]
  cases.push_back(
      {"argmax last axis (a vocabulary row)", OpId::kArgMax, {random_f32({2, 300}, 1570)}, {1, 0, 0}});
  cases.push_back({"argmax middle axis, keepdims, NaN/inf",
                   OpId::kArgMax,
                   {with_specials(random_f32({3, 4, 5}, 1571))},
                   {1, 1, 0}});
  cases.push_back({"argmax first axis, select_last, NaN/inf",
                   OpId::kArgMax,
                   {with_specials(random_f32({4, 6}, 1572))},
                   {0, 0, 1}});
  cases.push_back({"argmax of no rows", OpId::kArgMax, {random_f32({0, 3}, 1573)}, {1, 0, 0}});
  cases.push_back({"argmin middle axis, NaN/inf",
                   OpId::kArgMin,
                   {with_specials(random_f32({3, 4, 5}, 1574))},
                   {1, 1, 0}});
  cases.push_back({"argmin first axis, select_last", OpId::kArgMin, {random_f32({4, 6}, 1575)}, {0, 0, 1}});
  for (DType t : {DType::kI32, DType::kI64})
    for (OpId id : {OpId::kArgMax, OpId::kArgMin}) {
      const std::string n = std::string(ops::op_def(id).name) + " " + hexir::dtype_name(t);
      exact(n + " axis 1", id, {iota_bytes(t, {4, 9})}, {1, 0, 0});
      exact(n + " axis 0, select_last", id, {iota_bytes(t, {4, 9})}, {0, 1, 1});
    }
  // log_softmax, hardmax: [axis]
  auto log_softmax = [&](std::string n, std::vector<int64_t> dims, int64_t axis, bool in_place, uint32_t s) {
    KernelCase c{
        "log_softmax " + n, OpId::kLogSoftmax, {random_f32(dims, s, -20.0f, 20.0f)}, {axis}, in_place};
    c.atol = 1e-5;
    cases.push_back(c);
  };
  log_softmax("axis 0", {6, 5, 7}, 0, false, 1576);
  log_softmax("axis 1", {6, 5, 7}, 1, false, 1577);
  log_softmax("long rows", {4, 300}, 1, false, 1578);
  log_softmax("in place", {8, 10}, 1, true, 1579);
  cases.push_back(
      {"log_softmax with NaN/inf", OpId::kLogSoftmax, {with_specials(random_f32({2, 6}, 1580))}, {1}});
  cases.push_back({"hardmax last axis", OpId::kHardmax, {random_f32({3, 40}, 1581)}, {1}});
  cases.push_back(
      {"hardmax axis 0 with NaN/inf", OpId::kHardmax, {with_specials(random_f32({4, 6}, 1582))}, {0}});
  // top_k: [axis, k, largest, sorted]; two results.
  HostTensor tied = random_f32({3, 50}, 1583);
  for (int64_t i = 0; i < tied.count(); i += 3) tied.at(i) = 0.5f;
  exact("top_k largest last axis, ties", OpId::kTopK, {tied}, {1, 7, 1, 1});
  exact("top_k smallest axis 0", OpId::kTopK, {random_f32({9, 4}, 1584)}, {0, 3, 0, 1});
  exact("top_k NaN/inf", OpId::kTopK, {with_specials(random_f32({2, 8}, 1585))}, {1, 4, 1, 1});
  exact("top_k k 0", OpId::kTopK, {random_f32({2, 8}, 1586)}, {1, 0, 1, 1});
  exact("top_k i32", OpId::kTopK, {iota_bytes(DType::kI32, {3, 10})}, {1, 4, 1, 1});
  exact("top_k i64 smallest", OpId::kTopK, {iota_bytes(DType::kI64, {10, 3})}, {0, 10, 0, 1});

  auto conv = [&](std::string n, std::vector<int64_t> x, std::vector<int64_t> w, bool bias,
                  std::vector<int64_t> params, uint32_t s) {
    KernelCase c{"conv2d " + n, OpId::kConv2d, {random_f32(x, s), random_f32(w, s + 1)}, std::move(params)};
    if (bias) c.inputs.push_back(random_f32({w[0]}, s + 2));
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cases.push_back(c);
  };
  // [stride_h, stride_w, pad_t, pad_l, pad_b, pad_r, dil_h, dil_w, groups]
  conv("3x3 pad 1 with bias", {1, 3, 8, 8}, {4, 3, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 1600);
  conv("1x1 (plain GEMM), batch 2", {2, 8, 5, 5}, {6, 8, 1, 1}, true, {1, 1, 0, 0, 0, 0, 1, 1, 1}, 1603);
  conv("strided 2, asymmetric pads", {1, 2, 9, 7}, {3, 2, 3, 2}, false, {2, 2, 1, 0, 2, 1, 1, 1, 1}, 1606);
  conv("dilated 2", {1, 2, 9, 9}, {2, 2, 3, 3}, true, {1, 1, 2, 2, 2, 2, 2, 2, 1}, 1609);
  conv("grouped 2", {1, 4, 6, 6}, {6, 2, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 2}, 1612);
  conv("depthwise", {2, 5, 7, 7}, {5, 1, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 5}, 1615);
  const int64_t hard_swish = static_cast<int64_t>(ops::Activation::kHardSwish);
  const int64_t leaky = static_cast<int64_t>(ops::Activation::kLeakyRelu);
  conv("3x3 + hard_swish (fused)", {1, 3, 8, 8}, {4, 3, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 1, hard_swish, 0, 0},
       1618);
  conv("depthwise + leaky_relu (fused)", {2, 5, 7, 7}, {5, 1, 3, 3}, true,
       {1, 1, 1, 1, 1, 1, 1, 1, 5, leaky, std::bit_cast<int64_t>(0.2), 0}, 1621);

  // Channels-last depthwise (the layout word 1, x [N,H,W,C]): channel counts
  // past a multiple of 16 by 8, 4 and 2 (the vectors of 8 and 4, the scalar
  // tail), strides, a 5x5 window and pads, with and without a bias.
  const int64_t dw_relu = static_cast<int64_t>(ops::Activation::kRelu);
  conv("channels-last depthwise 72 3x3", {1, 9, 11, 72}, {72, 1, 3, 3}, true, {1, 1, 1, 1, 1, 1, 1, 1, 72, 1}, 1624);
  conv("channels-last depthwise 46 3x3 s2 + relu", {2, 10, 13, 46}, {46, 1, 3, 3}, true,
       {2, 2, 1, 1, 1, 1, 1, 1, 46, dw_relu, 0, 0, 1}, 1627);
  conv("channels-last depthwise 28 5x5 pad 2", {1, 12, 19, 28}, {28, 1, 5, 5}, false, {1, 1, 2, 2, 2, 2, 1, 1, 28, 1},
       1630);
  conv("channels-last depthwise 120 5x5 s2", {1, 14, 14, 120}, {120, 1, 5, 5}, true, {2, 2, 2, 2, 2, 2, 1, 1, 120, 1},
       1633);
  // separable_conv2d: (x, dw_w, pw_w, [dw_bias], [pw_bias], [residual]); the
  // depthwise's nine words, its epilogue, the 1x1's epilogue, the biases word.
  auto separable = [&](std::string n, std::vector<int64_t> x, int64_t k, int64_t ks, std::vector<int64_t> params,
                       bool residual, uint32_t s) {
    const int64_t c = x[1], biases = params.back();
    KernelCase kc{"separable_conv2d " + n,
                  OpId::kSeparableConv2d,
                  {random_f32(x, s), random_f32({c, 1, ks, ks}, s + 1), random_f32({k, c, 1, 1}, s + 2)},
                  std::move(params)};
    if (biases & 1) kc.inputs.push_back(random_f32({c}, s + 3));
    if (biases & 2) kc.inputs.push_back(random_f32({k}, s + 4));
    if (residual) {
      std::vector<TensorType> types;
      for (const HostTensor& t : kc.inputs) types.push_back(t.type());
      kc.inputs.push_back(random_f32(ops::infer_result_type(kc.id, types, kc.params)->dims, s + 5));
    }
    kc.rtol = 1e-4;
    kc.atol = 1e-4;
    cases.push_back(kc);
  };
  const int64_t relu = static_cast<int64_t>(ops::Activation::kRelu);
  separable("3x3 + residual + relu, no depthwise bias (BlazeFace's block)", {1, 6, 9, 11}, 6, 3,
            {1, 1, 1, 1, 1, 1, 1, 1, 6, 0, 0, 0, relu, 0, 0, 2}, true, 1630);
  separable("5x5 s2, hard_swish between, both biases, batch 2", {2, 4, 9, 8}, 7, 5,
            {2, 2, 2, 2, 2, 2, 1, 1, 4, hard_swish, 0, 0, 0, 0, 0, 3}, false, 1636);
  separable("3x3 dilated 2, no biases", {1, 3, 10, 7}, 5, 3, {1, 1, 2, 2, 2, 2, 2, 2, 3, 0, 0, 0, 0, 0, 0, 0},
            false, 1642);

  // [kh, kw, stride_h, stride_w, pad_t, pad_l, pad_b, pad_r, dil_h, dil_w, ceil_mode, count_include_pad]
  auto pool = [&](std::string n, OpId id, std::vector<int64_t> x, std::vector<int64_t> params, uint32_t s,
                  bool specials = false) {
    HostTensor input = random_f32(x, s);
    if (specials) input = with_specials(input);
    cases.push_back(
        {(id == OpId::kMaxPool ? "max_pool " : "average_pool ") + n, id, {input}, std::move(params)});
  };
  pool("2x2 stride 2", OpId::kMaxPool, {1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}, 1700);
  pool("3x3 pad 1 with NaN/inf", OpId::kMaxPool, {2, 2, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, 1701,
       true);
  pool("ceil mode", OpId::kMaxPool, {1, 2, 8, 7}, {3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0}, 1702);
  pool("dilated, asymmetric pads", OpId::kMaxPool, {1, 2, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}, 1703);
  pool("windows of pads only", OpId::kMaxPool, {1, 1, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}, 1704);
  // u8 (a QDQ model's pool, moved before its dequantize): NCHW and channels-last (the trailing 1), 70
  // channels past one 64-byte vector.
  cases.push_back({"max_pool u8 3x3 stride 2 pad 1", OpId::kMaxPool, {iota_bytes(DType::kU8, {2, 3, 9, 8})},
                   {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0}});
  {
    HostTensor x(DType::kU8, {1, 7, 6, 70});
    uint32_t seed = 1705;
    for (auto& b : x.bytes) b = static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 23);
    cases.push_back({"max_pool u8 channels-last 3x3 stride 2 pad 1, 70 channels", OpId::kMaxPool, {x},
                     {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1}});
  }
  pool("2x2 stride 2", OpId::kAveragePool, {1, 3, 8, 8}, {2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0}, 1710);
  pool("3x3 pad 1 excluding pads", OpId::kAveragePool, {2, 2, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
       1711);
  pool("3x3 pad 1 counting pads", OpId::kAveragePool, {2, 2, 7, 6}, {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},
       1712);
  pool("ceil mode counting pads", OpId::kAveragePool, {1, 2, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       1713);
  pool("ceil mode excluding pads", OpId::kAveragePool, {1, 2, 8, 7}, {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0},
       1714);
  pool("asymmetric 2x3", OpId::kAveragePool, {2, 3, 10, 9}, {2, 3, 3, 2, 1, 2, 0, 1, 1, 1, 0, 1}, 1715);
  pool("dilated", OpId::kAveragePool, {1, 2, 9, 9}, {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0}, 1716);
  pool("windows of pads only", OpId::kAveragePool, {1, 1, 2, 2}, {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 0}, 1717);
  pool("windows of pads only, counting pads", OpId::kAveragePool, {1, 1, 2, 2},
       {2, 2, 1, 1, 1, 1, 1, 1, 3, 3, 0, 1}, 1718);
  // Channels-last ([N,H,W,C], a 13th word 1): 19 channels, pads, ceil mode.
  pool("channels-last 3x3 stride 2 ceil mode with NaN/inf", OpId::kMaxPool, {2, 7, 8, 19},
       {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 1}, 1719, true);
  pool("channels-last 3x3 pad 1 counting pads", OpId::kAveragePool, {1, 6, 5, 19},
       {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1}, 1720);
  pool("channels-last dilated, excluding pads", OpId::kAveragePool, {1, 9, 9, 5},
       {2, 3, 1, 2, 1, 0, 1, 2, 2, 2, 0, 0, 1}, 1721);

  // pad params: [mode (0 constant, 1 reflect, 2 edge, 3 wrap), value word, begins..., ends...]
  auto pad = [&](std::string n, HostTensor x, std::vector<int64_t> params) {
    KernelCase c{"pad " + n, OpId::kPad, {std::move(x)}, std::move(params)};
    c.exact = true;
    cases.push_back(c);
  };
  pad("f32 constant 1.5", random_f32({3, 4}, 1800), {0, int64_t{std::bit_cast<uint32_t>(1.5f)}, 1, 2, 2, 0});
  pad("i64 reflect", iota_bytes(DType::kI64, {4, 5}), {1, 0, 2, 3, 1, 4});
  pad("u8 edge 3-D", iota_bytes(DType::kU8, {2, 3, 4}), {2, 0, 1, 0, 2, 0, 3, 1});
  pad("f16 wrap", iota_bytes(DType::kF16, {3, 5}), {3, 0, 4, 2, 5, 7});
  pad("bool constant true", iota_bytes(DType::kBool, {2, 3}), {0, 1, 1, 1, 1, 1});
  pad("i32 negative pads crop", iota_bytes(DType::kI32, {5, 6}), {0, 7, -1, 2, -2, -3});
  pad("f32 reflect beyond the dim", random_f32({1, 3}, 1801), {1, 0, 0, 5, 0, 4});
  pad("f32 reflect of one element", random_f32({2, 1}, 1802), {1, 0, 1, 2, 0, 3});
  pad("scalar", random_f32({}, 1803), {0, 0});
  pad("to nothing", random_f32({3, 2}, 1804), {0, 0, -2, 0, -1, 0});

  auto expand = [&](std::string n, HostTensor x, std::vector<int64_t> dims) {
    KernelCase c{"expand " + n, OpId::kExpand, {std::move(x)}, std::move(dims)};
    c.exact = true;
    cases.push_back(c);
  };
  expand("f32 [3,1] to [2,3,4]", random_f32({3, 1}, 1900), {2, 3, 4});
  expand("i64 scalar to [5]", iota_bytes(DType::kI64, {}), {5});
  expand("u8 row to [3,4]", iota_bytes(DType::kU8, {1, 4}), {3, 4});
  expand("f16 identity", iota_bytes(DType::kF16, {2, 3}), {2, 3});
  expand("bool middle dim", iota_bytes(DType::kBool, {2, 1, 3}), {2, 4, 3});
  expand("i32 to an empty dim", iota_bytes(DType::kI32, {1, 3}), {0, 3});

  // resize params: [mode (0 nearest, 1 linear), coordinate mode, nearest mode, out_h, out_w]
  auto resize = [&](std::string n, std::vector<int64_t> x, std::vector<int64_t> params, uint32_t s) {
    cases.push_back({"resize " + n, OpId::kResize, {with_specials(random_f32(x, s))}, std::move(params)});
  };
  resize("nearest asymmetric floor x2", {1, 2, 3, 4}, {0, 2, 2, 6, 8}, 1950);
  resize("nearest half_pixel round_prefer_floor down", {1, 2, 8, 9}, {0, 0, 0, 3, 4}, 1951);
  resize("nearest align_corners round_prefer_ceil", {2, 1, 5, 5}, {0, 1, 1, 7, 3}, 1952);
  resize("nearest tf_half_pixel_for_nn ceil", {1, 1, 4, 6}, {0, 4, 3, 9, 5}, 1953);
  resize("linear half_pixel x2", {1, 2, 4, 5}, {1, 0, 0, 8, 10}, 1954);
  resize("linear align_corners", {1, 3, 5, 4}, {1, 1, 0, 9, 7}, 1955);
  resize("linear asymmetric down", {2, 2, 9, 7}, {1, 2, 0, 4, 3}, 1956);
  resize("linear pytorch_half_pixel to one row", {1, 2, 6, 6}, {1, 3, 0, 1, 5}, 1957);
  resize("to nothing", {1, 2, 3, 3}, {1, 0, 0, 0, 4}, 1958);

  // [stride_h, stride_w, pad_t, pad_l, pad_b, pad_r, dil_h, dil_w, groups, output_padding_h,
  // output_padding_w]
  auto deconv = [&](std::string n, std::vector<int64_t> x, std::vector<int64_t> w, bool bias,
                    std::vector<int64_t> params, uint32_t s) {
    KernelCase c{"conv_transpose " + n,
                 OpId::kConvTranspose,
                 {random_f32(x, s), random_f32(w, s + 1)},
                 std::move(params)};
    if (bias) c.inputs.push_back(random_f32({w[1] * c.params[8]}, s + 2));
    c.rtol = 1e-4;
    c.atol = 1e-4;
    cases.push_back(c);
  };
  deconv("stride 2, pad 1, output_padding 1, bias", {1, 4, 5, 5}, {4, 3, 3, 3}, true,
         {2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2050);
  deconv("stride 1, batch 2", {2, 3, 4, 4}, {3, 2, 3, 3}, false, {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0}, 2053);
  deconv("grouped 2, dilated", {1, 4, 5, 4}, {4, 3, 2, 3}, true, {2, 1, 0, 1, 1, 0, 2, 2, 2, 1, 0}, 2056);
  deconv("depthwise stride 3, asymmetric pads", {1, 3, 4, 3}, {3, 1, 4, 4}, true,
         {3, 2, 2, 0, 1, 3, 1, 1, 3, 2, 1}, 2059);

  // The unary math and ONNX activations (ops::math_of), prelu, group_norm.
  {
    auto word = [](double v) { return std::bit_cast<int64_t>(v); };
    struct Math {
      std::string name;
      OpId id;
      std::vector<int64_t> params;
      float lo, hi;  // the operator's domain (outside it: NaN, checked too)
    };
    const Math maths[] = {
        {"sin", OpId::kSin, {}, -7.0f, 7.0f},
        {"cos", OpId::kCos, {}, -7.0f, 7.0f},
        {"tan", OpId::kTan, {}, -1.5f, 1.5f},
        {"asin", OpId::kAsin, {}, -1.1f, 1.1f},
        {"acos", OpId::kAcos, {}, -1.1f, 1.1f},
        {"atan", OpId::kAtan, {}, -9.0f, 9.0f},
        {"sinh", OpId::kSinh, {}, -9.0f, 9.0f},
        {"cosh", OpId::kCosh, {}, -9.0f, 9.0f},
        {"asinh", OpId::kAsinh, {}, -9.0f, 9.0f},
        {"acosh", OpId::kAcosh, {}, 0.9f, 9.0f},
        {"atanh", OpId::kAtanh, {}, -1.1f, 1.1f},
        {"elu", OpId::kElu, {word(1.0)}, -5.0f, 5.0f},
        {"elu alpha 0.3, small x", OpId::kElu, {word(0.3)}, -0.5f, 0.5f},
        {"selu", OpId::kSelu, {word(1.6732632423543772), word(1.0507009873554805)}, -5.0f, 5.0f},
        {"celu alpha 2", OpId::kCelu, {word(2.0)}, -5.0f, 5.0f},
        {"mish", OpId::kMish, {}, -9.0f, 9.0f},
        {"softsign", OpId::kSoftsign, {}, -9.0f, 9.0f},
        {"thresholded_relu", OpId::kThresholdedRelu, {word(1.0)}, -3.0f, 3.0f},
        {"shrink", OpId::kShrink, {word(1.5), word(0.5)}, -3.0f, 3.0f},
        {"is_inf", OpId::kIsInf, {1, 1}, -3.0f, 3.0f},
        {"is_inf positive only", OpId::kIsInf, {1, 0}, -3.0f, 3.0f},
        {"is_inf negative only", OpId::kIsInf, {0, 1}, -3.0f, 3.0f},
        {"is_nan", OpId::kIsNaN, {}, -3.0f, 3.0f},
    };
    uint32_t s = 2100;
    for (const Math& m : maths) {
      HostTensor x = with_specials(random_f32({3, 129}, s++, m.lo, m.hi));
      x.at(5) = 0.0f;
      x.at(6) = -0.0f;
      cases.push_back({m.name, m.id, {x}, m.params});
      if (m.id != OpId::kIsInf && m.id != OpId::kIsNaN)  // bool results never take the input's storage
        cases.push_back({m.name + " in place", m.id, {random_f32({70}, s++, 0.1f, 0.9f)}, m.params, true});
    }
  }
  cases.push_back({"prelu same shape",
                   OpId::kPRelu,
                   {with_specials(random_f32({6, 11}, 2150)), random_f32({6, 11}, 2151)},
                   {}});
  cases.push_back({"prelu slope per channel", OpId::kPRelu,
                   {random_f32({2, 3, 4, 5}, 2152), random_f32({3, 1, 1}, 2153)}, {}});
  cases.push_back({"prelu scalar slope", OpId::kPRelu, {random_f32({37}, 2154), random_f32({}, 2155)}, {}});
  cases.push_back(
      {"prelu in place", OpId::kPRelu, {random_f32({4, 8}, 2156), random_f32({8}, 2157)}, {}, true});
  auto group_norm = [&](std::string n, std::vector<int64_t> dims, int64_t groups, uint32_t s) {
    cases.push_back({"group_norm " + n,
                     OpId::kGroupNorm,
                     {random_f32(dims, s), random_f32({dims[1]}, s + 1), random_f32({dims[1]}, s + 2)},
                     {groups, std::bit_cast<int64_t>(1e-5)}});
  };
  group_norm("3 groups", {2, 6, 5, 7}, 3, 2160);
  group_norm("instance (a group per channel)", {2, 4, 9}, 4, 2163);
  group_norm("one group, wide rows", {1, 8, 40, 40}, 1, 2166);
  group_norm("rank 2", {3, 8}, 2, 2169);
  // Bounded dynamic shapes: the result up to its extent, zeros past it, the
  // extent as the last result; every byte compared.
  auto sparse = [](HostTensor t, int every) {  // zeros (and a -0.0) between the values
    for (int64_t i = 0; i < t.count(); ++i)
      if (i % every != 0) t.at(i) = i % (2 * every) == 1 ? -0.0f : 0.0f;
    return t;
  };
  exact("nonzero f32 with -0.0, NaN and inf", OpId::kNonZero, {sparse(with_specials(random_f32({3, 5, 4}, 2100)), 3)},
        {});
  exact("nonzero bool", OpId::kNonZero, {mask({7, 9}, 2)}, {});
  exact("nonzero i64 1-D", OpId::kNonZero, {indices(DType::kI64, {6}, {0, 3, 0, -1, 0, 0})}, {});
  exact("nonzero all zeros", OpId::kNonZero, {HostTensor(DType::kU8, {4, 2})}, {});
  exact("nonzero i64 1-D under a given bound 3", OpId::kNonZero, {indices(DType::kI64, {6}, {0, 3, 0, -1, 0, 0})},
        {3});
  HostTensor two_of_four(DType::kBool, {4});
  two_of_four.bytes = {0, 1, 0, 1};
  exact("compress i64 axis 0 under a given bound 2", OpId::kCompress, {iota_bytes(DType::kI64, {4, 3}), two_of_four},
        {0, 2});
  exact("compress f32 axis 1", OpId::kCompress, {random_f32({3, 5, 2}, 2110), mask({4}, 1)}, {1});
  exact("compress i64 flattened", OpId::kCompress, {iota_bytes(DType::kI64, {3, 4}), mask({12}, 2)}, {-1});
  auto scalar_i64 = [&](int64_t v) { return indices(DType::kI64, {}, {v}); };
  auto scalar_f32 = [](float v) {
    HostTensor t(DType::kF32, {});
    t.at(0) = v;
    return t;
  };
  // Boxes near each other (so some overlap), scores with ties.
  auto boxes = [](std::vector<int64_t> dims, uint32_t seed, bool center) {
    HostTensor t = random_f32(dims, seed, 0.0f, 1.0f);
    for (int64_t i = 0; i < t.count(); i += 4) {
      if (center) {
        t.at(i + 2) = 0.2f + t.at(i + 2) * 0.3f;
        t.at(i + 3) = 0.2f + t.at(i + 3) * 0.3f;
      } else {
        t.at(i + 2) = t.at(i) + 0.3f;
        t.at(i + 3) = t.at(i + 1) - 0.3f;  // a flipped diagonal
      }
    }
    return t;
  };
  auto nms_scores = [](std::vector<int64_t> dims, uint32_t seed) {
    HostTensor t = random_f32(dims, seed, 0.0f, 1.0f);
    if (t.count() > 2) t.at(2) = t.at(1);
    return t;
  };
  exact("non_max_suppression corners, 2 batches x 3 classes", OpId::kNonMaxSuppression,
        {boxes({2, 17, 4}, 2120, false), nms_scores({2, 3, 17}, 2121), scalar_i64(5), scalar_f32(0.3f),
         scalar_f32(0.2f)},
        {0, 6});
  exact("non_max_suppression under a given bound of 4 rows", OpId::kNonMaxSuppression,
        {boxes({1, 9, 4}, 2124, false), nms_scores({1, 2, 9}, 2125), scalar_i64(2), scalar_f32(0.3f),
         scalar_f32(0.2f)},
        {0, 2, 4});
  exact("non_max_suppression center boxes, max above the bound", OpId::kNonMaxSuppression,
        {boxes({1, 23, 4}, 2122, true), nms_scores({1, 2, 23}, 2123), scalar_i64(100), scalar_f32(0.5f),
         scalar_f32(-1.0f)},
        {1, 23});
  {
    // Hundreds kept (a candidate tested against 16 or 8 kept boxes at once,
    // then a tail), a NaN corner and a box of no area among them.
    HostTensor many = random_f32({1, 400, 4}, 2126, 0.0f, 1.0f);
    for (int64_t i = 0; i < many.count(); i += 4) many.at(i + 2) = many.at(i) + 0.04f, many.at(i + 3) = many.at(i + 1) + 0.04f;
    many.at(4 * 7 + 1) = std::numeric_limits<float>::quiet_NaN();
    many.at(4 * 9 + 2) = many.at(4 * 9);
    exact("non_max_suppression of 400 small boxes, hundreds kept", OpId::kNonMaxSuppression,
          {many, nms_scores({1, 1, 400}, 2127), scalar_i64(1000), scalar_f32(0.1f), scalar_f32(0.0f)}, {0, 400});
  }
  HostTensor padded = iota_bytes(DType::kI64, {3, 5});
  padded.bounded = 1;
  exact("compact i64 [3,<=5] at extent 2", OpId::kCompact, {padded, scalar_i64(2)}, {});
  exact("unbound i64 [3,<=5]: the stored elements", OpId::kUnbound, {padded}, {});
  exact("bound f32 [3,5] dim 1 at extent 2", OpId::kBound, {random_f32({3, 5}, 2130), scalar_i64(2)}, {1});
  exact("bound u8 [7,3] dim 0 at its whole size", OpId::kBound, {iota_bytes(DType::kU8, {7, 3}), scalar_i64(7)},
        {0});
  exact("bound f16 [2,4,3] dim 1 at extent 0", OpId::kBound, {iota_bytes(DType::kF16, {2, 4, 3}), scalar_i64(0)},
        {1});
  add_half_cases(cases);
  return cases;
}

}  // namespace hexir::hal::conformance
