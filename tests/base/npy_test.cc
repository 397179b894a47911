// base/npy.cc: numpy .npy reading, writing and every rejection.
#include "hexir/base/npy.h"

#include <doctest/doctest.h>

#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "scratch_dir.h"

namespace hexir {
namespace {

using testing::ScratchDir;

// The .npy files numpy wrote, in tests/data/npy (the compiler tests
// read them too: constants, and read_npy_header over every one of them).
std::string fixture(const char* name) { return std::string(HEXIR_TEST_NPY_DIR) + "/" + name; }

std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

template <typename T>
std::vector<T> as(const NpyArray& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), out.size() * sizeof(T));
  return out;
}

std::vector<uint8_t> with_header(const std::string& header, size_t data_bytes, uint8_t major = 1) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  if (major == 1) {
    out.push_back(static_cast<uint8_t>(header.size()));
    out.push_back(static_cast<uint8_t>(header.size() >> 8));
  } else {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data_bytes, 0);
  return out;
}

TEST_CASE("npy: reads numpy's f32 file") {
  Result<NpyArray> a = read_npy(fixture("f32_2x3.npy"));
  REQUIRE(a.ok());
  CHECK(a->type == TensorType{DType::kF32, {2, 3}});
  CHECK(as<float>(*a) == std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5});
}

TEST_CASE("npy: reads every supported numpy dtype") {
  Result<NpyArray> f16 = read_npy(fixture("f16_4.npy"));
  REQUIRE(f16.ok());
  CHECK(f16->type == TensorType{DType::kF16, {4}});
  CHECK(as<uint16_t>(*f16) == std::vector<uint16_t>{0x3c00, 0xc000, 0x3800, 0x7bff});

  Result<NpyArray> i64 = read_npy(fixture("i64_3.npy"));
  REQUIRE(i64.ok());
  CHECK(as<int64_t>(*i64) == std::vector<int64_t>{1, -2, int64_t{1} << 40});

  Result<NpyArray> i32 = read_npy(fixture("i32_scalar.npy"));
  REQUIRE(i32.ok());
  CHECK(i32->type == TensorType{DType::kI32, {}});
  CHECK(as<int32_t>(*i32) == std::vector<int32_t>{7});

  Result<NpyArray> b = read_npy(fixture("bool_4.npy"));
  REQUIRE(b.ok());
  CHECK(b->type == TensorType{DType::kBool, {4}});
  CHECK(b->data == std::vector<uint8_t>{1, 0, 1, 1});

  Result<NpyArray> u8 = read_npy(fixture("u8_2x2.npy"));
  REQUIRE(u8.ok());
  CHECK(u8->type == TensorType{DType::kU8, {2, 2}});
  CHECK(u8->data == std::vector<uint8_t>{0, 255, 1, 2});

  Result<NpyArray> i8 = read_npy(fixture("i8_2.npy"));
  REQUIRE(i8.ok());
  CHECK(i8->type == TensorType{DType::kI8, {2}});
  CHECK(as<int8_t>(*i8) == std::vector<int8_t>{-128, 127});
}

TEST_CASE("npy: reads format versions 2 and 3") {
  Result<NpyArray> v2 = read_npy(fixture("v2_f32_2.npy"));
  REQUIRE(v2.ok());
  CHECK(as<float>(*v2) == std::vector<float>{1.5f, 2.5f});
  Result<NpyArray> v3 = read_npy(fixture("v3_f32_2.npy"));
  REQUIRE(v3.ok());
  CHECK(as<float>(*v3) == std::vector<float>{3.5f, 4.5f});
}

TEST_CASE("npy: reads an empty array") {
  Result<NpyArray> a = read_npy(fixture("empty_f32_0x3.npy"));
  REQUIRE(a.ok());
  CHECK(a->type == TensorType{DType::kF32, {0, 3}});
  CHECK(a->data.empty());
}

TEST_CASE("npy: encode then parse round-trips every dtype and rank") {
  for (int d = 0; d < kDTypeCount; ++d) {
    for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {5}, {2, 3}, {1, 0, 4}, {2, 1, 2, 1}}) {
      TensorType type{static_cast<DType>(d), dims};
      std::vector<uint8_t> data(*byte_size(type));
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
      if (type.dtype == DType::kBool)
        for (auto& x : data) x &= 1;
      std::vector<uint8_t> bytes = encode_npy(type, data);
      // numpy requires the data to start 64-byte aligned (for mmap).
      size_t header_len = bytes[8] | bytes[9] << 8;
      CHECK((10 + header_len) % 64 == 0);
      Result<NpyArray> back = parse_npy(bytes, "roundtrip.npy");
      INFO(type.to_string(), " ", back.status().to_string());
      REQUIRE(back.ok());
      CHECK(back->type == type);
      CHECK(back->data == data);
    }
  }
}

TEST_CASE("npy: encoded header is what numpy writes") {
  std::vector<uint8_t> bytes = encode_npy({DType::kF32, {3}}, f32_bytes({1, 2, 3}));
  std::string header(bytes.begin() + 10, bytes.begin() + 10 + (bytes[8] | bytes[9] << 8));
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 0) == 0);
  CHECK(header.back() == '\n');
}

TEST_CASE("npy: write_npy and read_npy round-trip through a file") {
  ScratchDir dir;
  std::string path = dir / "x.npy";
  REQUIRE(write_npy(path, {DType::kF32, {2, 2}}, f32_bytes({1, 2, 3, 4})).ok());
  Result<NpyArray> a = read_npy(path);
  REQUIRE(a.ok());
  CHECK(a->type == TensorType{DType::kF32, {2, 2}});
  CHECK(as<float>(*a) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("npy: write_npy rejects data of the wrong size") {
  ScratchDir dir;
  Status s = write_npy(dir / "x.npy", {DType::kF32, {3}}, f32_bytes({1, 2}));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("needs 12 bytes, got 8") != std::string::npos);
}

TEST_CASE("npy: missing file names the file") {
  Result<NpyArray> a = read_npy("/nonexistent/dir/w.npy");
  CHECK(a.status().code() == StatusCode::kNotFound);
  CHECK(a.status().message().find("/nonexistent/dir/w.npy") != std::string::npos);
}

TEST_CASE("npy: rejects fortran order") {
  Result<NpyArray> a = read_npy(fixture("fortran_f32_2x3.npy"));
  REQUIRE(!a.ok());
  CHECK(a.status().message().find("fortran_f32_2x3.npy") != std::string::npos);
  CHECK(a.status().message().find("fortran_order") != std::string::npos);
}

TEST_CASE("npy: rejects big-endian data") {
  Result<NpyArray> a = read_npy(fixture("big_endian_f32_3.npy"));
  REQUIRE(!a.ok());
  CHECK(a.status().message().find("big_endian_f32_3.npy") != std::string::npos);
  CHECK(a.status().message().find("big-endian dtype '>f4'") != std::string::npos);
}

TEST_CASE("npy: rejects dtypes Hexir does not have") {
  Result<NpyArray> a = read_npy(fixture("f64_2.npy"));
  REQUIRE(!a.ok());
  CHECK(a.status().message().find("unsupported dtype '<f8'") != std::string::npos);
}

TEST_CASE("npy: rejects bad magic and tiny files") {
  CHECK(parse_npy({}, "e.npy").status().message() == "e.npy: not a .npy file (bad magic)");
  std::vector<uint8_t> junk = {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(parse_npy(junk, "z.npy").status().code() == StatusCode::kDataLoss);
}

TEST_CASE("npy: rejects an unknown format version") {
  std::vector<uint8_t> bytes = with_header("{}", 0, 1);
  bytes[6] = 9;
  CHECK(parse_npy(bytes, "v.npy").status().message().find("unsupported .npy format version 9.0") !=
        std::string::npos);
}

TEST_CASE("npy: rejects truncated data and headers") {
  std::vector<uint8_t> full = encode_npy({DType::kF32, {4}}, f32_bytes({1, 2, 3, 4}));
  std::vector<uint8_t> short_data(full.begin(), full.end() - 1);
  Result<NpyArray> a = parse_npy(short_data, "t.npy");
  CHECK(a.status().message() == "t.npy: truncated .npy data: f32[4] needs 16 bytes, file has 15");
  std::vector<uint8_t> short_header(full.begin(), full.begin() + 30);
  CHECK(parse_npy(short_header, "t.npy").status().message().find("truncated .npy header") !=
        std::string::npos);
}

TEST_CASE("npy: rejects trailing bytes") {
  std::vector<uint8_t> bytes = encode_npy({DType::kU8, {2}}, std::vector<uint8_t>{1, 2});
  bytes.push_back(0);
  CHECK(parse_npy(bytes, "t.npy").status().message().find("1 unexpected bytes") != std::string::npos);
}

TEST_CASE("npy: rejects malformed header dicts") {
  struct Case {
    const char* header;
    const char* message;
  };
  const Case cases[] = {
      {"'descr': '<f4'", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
      {"{'fortran_order': False, 'shape': ()}", "no 'descr'"},
      {"{'descr': '<f4', 'shape': ()}", "no 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
       "unexpected header key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", "duplicate key 'descr'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}", "structured dtypes"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': ()}", "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': ()}", "expected ':' after key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", "after the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", "expected ',' or ')'"},
  };
  for (const Case& c : cases) {
    Result<NpyArray> a = parse_npy(with_header(c.header, 0), "h.npy");
    INFO(c.header, " -> ", a.status().to_string());
    REQUIRE(!a.ok());
    CHECK(a.status().message().rfind("h.npy: ", 0) == 0);
    CHECK(a.status().message().find(c.message) != std::string::npos);
  }
}

TEST_CASE("npy: a shape whose byte size overflows is rejected, not allocated") {
  std::vector<uint8_t> bytes =
      with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 0);
  Result<NpyArray> a = parse_npy(bytes, "huge.npy");
  REQUIRE(!a.ok());
  CHECK(a.status().message().find("overflow") != std::string::npos);
}

TEST_CASE("npy: hostile bytes never crash the parser") {
  std::vector<uint8_t> good = encode_npy({DType::kF32, {2, 3}}, std::vector<uint8_t>(24, 1));
  // Every truncation.
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    CHECK(!parse_npy(cut, "cut.npy").ok());
  }
  // Random byte flips in preamble and header.
  std::mt19937 rng(1234);
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> bytes = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % 128] = static_cast<uint8_t>(rng());
    Result<NpyArray> a = parse_npy(bytes, "fuzz.npy");
    if (a.ok()) CHECK(a->data.size() == *byte_size(a->type));
  }
  // A v2 header length pointing far past the end.
  std::vector<uint8_t> v2 = with_header("{}", 0, 2);
  v2[8] = v2[9] = v2[10] = v2[11] = 0xff;
  CHECK(parse_npy(v2, "v2.npy").status().message().find("truncated .npy header") != std::string::npos);
}

}  // namespace
}  // namespace hexir
