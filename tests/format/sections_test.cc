// zstd-compressed sections: the compress/decompress functions, the verifier's
// checks, the VM's decompression at load and hexir-dump's report, on the
// samples compiled with and without --compress=zstd.
#include "hexir/format/sections.h"

#include <doctest/doctest.h>
#include <zstd.h>

#include <algorithm>

#include "sample_util.h"
#include "vm_impl.h"

namespace hexir::format {
namespace {

using testing::AlignedBytes;

std::vector<uint8_t> pattern_bytes(size_t n) {
  std::vector<uint8_t> raw(n);
  for (size_t i = 0; i < n; ++i) raw[i] = static_cast<uint8_t>((i * 7) % 13);
  return raw;
}

void expect_data_loss(const Result<SectionBuffer>& result, const std::string& needle) {
  REQUIRE_FALSE(result.ok());
  INFO("message: " << result.status().message());
  CHECK(result.status().code() == StatusCode::kDataLoss);
  CHECK(testing::contains(result.status().message(), "section 3: "));
  CHECK(testing::contains(result.status().message(), needle));
}

TEST_CASE("zstd: compress_section and decompress_section round trip into aligned memory") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{300000}}) {
    const std::vector<uint8_t> raw = pattern_bytes(n);
    auto stored = compress_section(raw);
    REQUIRE(stored.ok());
    if (n >= 4096) CHECK(stored->size() < n / 10);
    auto back = decompress_section(*stored, n, 3);
    REQUIRE_MESSAGE(back.ok(), back.status().to_string());
    CHECK(back->size() == n);
    CHECK(reinterpret_cast<uintptr_t>(back->data()) % 64 == 0);
    CHECK(std::equal(raw.begin(), raw.end(), back->data()));
  }
  CHECK_FALSE(compress_section(pattern_bytes(10), 99).ok());
}

TEST_CASE("zstd: corrupt, short, lying and foreign frames are kDataLoss naming the section") {
  const std::vector<uint8_t> raw = pattern_bytes(200000);
  std::vector<uint8_t> stored = compress_section(raw).value();

  expect_data_loss(decompress_section(stored, raw.size() + 1, 3), "raw_size is 200001");
  expect_data_loss(decompress_section(stored, raw.size() - 1, 3), "holds 200000 bytes");
  expect_data_loss(decompress_section({stored.data(), stored.size() - 5}, raw.size(), 3), "zstd frame");
  expect_data_loss(decompress_section({stored.data(), 3}, raw.size(), 3), "zstd frame");
  expect_data_loss(decompress_section({}, 0, 3), "zstd frame");

  std::vector<uint8_t> trailing = stored;
  trailing.resize(stored.size() + 16, 0);
  expect_data_loss(decompress_section(trailing, raw.size(), 3), "but the section stores");

  std::vector<uint8_t> not_zstd(64, 0x5a);
  expect_data_loss(decompress_section(not_zstd, 64, 3), "zstd frame");

  // Every single-byte flip past the header is caught (zstd's content checksum
  // is on), and none crashes.
  int caught = 0, flips = 0;
  for (size_t pos = 16; pos < stored.size(); pos += 97) {
    std::vector<uint8_t> bad = stored;
    bad[pos] ^= 0x41;
    ++flips;
    if (!decompress_section(bad, raw.size(), 3).ok()) ++caught;
  }
  CHECK(caught == flips);

  // A frame that does not record its content size is refused before allocating.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  REQUIRE(ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0) == 0);
  std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
  ZSTD_inBuffer in{raw.data(), raw.size(), 0};
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  REQUIRE(ZSTD_compressStream2(cctx, &ob, &in, ZSTD_e_end) == 0);
  ZSTD_freeCCtx(cctx);
  out.resize(ob.pos);
  expect_data_loss(decompress_section(out, raw.size(), 3), "does not record its content size");
}

compiler::CompileOptions zstd_options(bool data_checksum = false) {
  compiler::CompileOptions options;
  options.compression = compiler::SectionCompression::kZstd;
  options.data_checksum = data_checksum;
  return options;
}

struct SampleCase {
  const char* name;
  const char* input;
};
constexpr SampleCase kSamples[] = {{"mlp.hxir", "mlp/input_x.npy"},
                                   {"transformer.hxir", "transformer/input_x.npy"}};

TEST_CASE("zstd: compressed samples load, decompress once, and run exactly like uncompressed ones") {
  for (const SampleCase& sample : kSamples) {
    INFO(std::string(sample.name));
    AlignedBytes plain = testing::aligned(testing::compile_sample(sample.name));
    AlignedBytes packed = testing::aligned(testing::compile_sample(sample.name, zstd_options()));

    const fb::Section& ps = *testing::module_of(plain).sections()->Get(0);
    const fb::Section& zs = *testing::module_of(packed).sections()->Get(0);
    CHECK(ps.compression() == fb::Compression::None);
    REQUIRE(zs.compression() == fb::Compression::Zstd);
    CHECK(zs.raw_size() == ps.raw_size());
    CHECK(zs.size() < zs.raw_size());
    CHECK(packed.size() < plain.size());
    MESSAGE(std::string(sample.name) << ": RODATA " << zs.raw_size() << " raw bytes stored as " << zs.size()
                                     << " (zstd)");

    // The VM holds the raw bytes in memory it owns, 64-byte aligned; the
    // uncompressed file's RODATA stays in the mapping.
    auto module = vm::Module::load_buffer(packed.span());
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    const vm::ModuleImpl& impl = module->impl();
    REQUIRE(impl.owned_sections.size() == 1);
    CHECK(impl.verified.sections[0].data() == impl.owned_sections[0].data());
    CHECK(impl.verified.sections[0].size() == zs.raw_size());
    CHECK(reinterpret_cast<uintptr_t>(impl.verified.sections[0].data()) % 64 == 0);
    auto plain_module = vm::Module::load_buffer(plain.span());
    REQUIRE(plain_module.ok());
    CHECK(plain_module->impl().owned_sections.empty());
    CHECK(plain_module->impl().verified.sections[0].data() == plain.data() + ps.offset());

    const std::string input = testing::kSamplesDir + "/" + sample.input;
    CHECK(testing::run_sample(packed, input) == testing::run_sample(plain, input));
  }
}

TEST_CASE("zstd: uncompressed stays the default; small sections are never compressed") {
  AlignedBytes plain = testing::aligned(testing::compile_sample("mlp.hxir"));
  CHECK(testing::module_of(plain).sections()->Get(0)->compression() == fb::Compression::None);
  AlignedBytes tiny = testing::aligned(testing::compile_text(R"(module @t
const @w : f32[4] = dense [1, 2, 3, 4]
func @main(%x: f32[4]) -> (f32[4]) {
  %y = call @add(%x, @w) : f32[4]
  return %y
}
)",
                                                             zstd_options()));
  CHECK(testing::module_of(tiny).sections()->Get(0)->compression() == fb::Compression::None);
}

TEST_CASE("zstd: hexir-dump shows stored and raw sizes") {
  testing::ScratchDir dir;
  std::vector<uint8_t> bytes = testing::compile_sample("mlp.hxir", zstd_options());
  testing::write_file(dir / "mlp.hxe", bytes.data(), bytes.size());
  AlignedBytes file = testing::aligned(bytes);
  const fb::Section& s = *testing::module_of(file).sections()->Get(0);
  const std::string size = std::to_string(s.size()), raw = std::to_string(s.raw_size());

  auto text = testing::run_command(testing::kDumpTool + " " + dir / "mlp.hxe");
  INFO(text.output);
  CHECK(text.exit_code == 0);
  CHECK(testing::contains(text.output, "size " + size + " raw " + raw));
  CHECK(testing::contains(text.output, "zstd"));
  auto json = testing::run_command(testing::kDumpTool + " " + dir / "mlp.hxe --json");
  CHECK(json.exit_code == 0);
  CHECK(testing::contains(json.output, "\"size\":" + size + ","));
  CHECK(testing::contains(json.output, "\"raw_size\":" + raw + ","));
  CHECK(testing::contains(json.output, "\"compression\":\"zstd\""));
}

// Flips bytes in the middle of the compressed payload.
void corrupt_payload(AlignedBytes& file) {
  const fb::Section& s = *testing::module_of(file).sections()->Get(0);
  for (uint64_t k = 0; k < 8; ++k) file.data()[s.offset() + s.size() / 2 + k * 31] ^= 0x5a;
}

Status load_status(const AlignedBytes& file, bool verify_data_checksum) {
  vm::LoadOptions options;
  options.verify_data_checksum = verify_data_checksum;
  return vm::Module::load_buffer(file.span(), options).status();
}

TEST_CASE("zstd: a corrupt compressed payload is rejected with a clear error") {
  SUBCASE("data checksum on: the checksum catches it first") {
    AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options(true)));
    corrupt_payload(file);
    Status status = load_status(file, true);
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_MESSAGE(testing::contains(status.message(), "data checksum mismatch"), status.message());
    // Without checking the checksum, decompression at load still catches it.
    status = load_status(file, false);
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_MESSAGE(testing::contains(status.message(), "section 0: "), status.message());

    testing::ScratchDir dir;
    testing::write_file(dir / "bad.hxe", file.data(), file.size());
    auto dump = testing::run_command(testing::kDumpTool + " " + dir / "bad.hxe");
    CHECK(dump.exit_code == 1);
    CHECK_MESSAGE(testing::contains(dump.output, "data checksum mismatch"), dump.output);
  }
  SUBCASE("checksum recomputed over the corrupt bytes: zstd catches it") {
    AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options(true)));
    corrupt_payload(file);
    testing::reseal_data(file);
    Status status = load_status(file, true);
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_MESSAGE(testing::contains(status.message(), "section 0: corrupt zstd data"), status.message());
  }
  SUBCASE("no data checksum: zstd catches it") {
    AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options()));
    corrupt_payload(file);
    Status status = load_status(file, false);
    CHECK(status.code() == StatusCode::kDataLoss);
    CHECK_MESSAGE(testing::contains(status.message(), "section 0: corrupt zstd data"), status.message());

    testing::ScratchDir dir;
    testing::write_file(dir / "bad.hxe", file.data(), file.size());
    auto dump = testing::run_command(testing::kDumpTool + " " + dir / "bad.hxe --json");
    CHECK(dump.exit_code == 1);
    CHECK_MESSAGE(testing::contains(dump.output, "section 0: corrupt zstd data"), dump.output);
  }
}

// Rewrites one field of section 0 and reseals the metadata checksum, then
// expects the load to fail with `needle`.
void expect_patched_failure(size_t field, uint64_t value, const std::string& needle) {
  AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options()));
  testing::patch_u64(testing::section_bytes(file, 0) + field, value);
  testing::reseal_metadata(file);
  Status status = load_status(file, false);
  INFO("value " << value << ": " << status.message());
  CHECK(status.code() == StatusCode::kDataLoss);
  CHECK(testing::contains(status.message(), needle));
}

TEST_CASE("zstd: a raw_size lie is rejected") {
  AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options()));
  const fb::Section& s = *testing::module_of(file).sections()->Get(0);
  const uint64_t raw = s.raw_size(), size = s.size();
  // Larger than the frame: decompression refuses before allocating.
  expect_patched_failure(testing::kSectionRawSizeField, raw + 4096,
                         "section 0: the zstd frame holds " + std::to_string(raw) + " bytes");
  // Smaller than the constants that point into it: the verifier refuses.
  expect_patched_failure(testing::kSectionRawSizeField, raw - 64, "outside section 0");
  expect_patched_failure(testing::kSectionRawSizeField, 0, "outside section 0");
  // Absurd sizes never reach an allocation.
  expect_patched_failure(testing::kSectionRawSizeField, uint64_t{1} << 41, "exceeds the limit");
  expect_patched_failure(testing::kSectionRawSizeField, ~uint64_t{0}, "exceeds the limit");
  expect_patched_failure(testing::kSectionRawSizeField, size * kMaxZstdExpansion + 1,
                         "more than zstd can expand");
}

TEST_CASE("zstd: a truncated frame is rejected") {
  AlignedBytes file = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options()));
  const uint64_t size = testing::module_of(file).sections()->Get(0)->size();
  expect_patched_failure(testing::kSectionSizeField, size - 100, "section 0: not a complete zstd frame");
  expect_patched_failure(testing::kSectionSizeField, 64, "section 0: not a complete zstd frame");
  expect_patched_failure(testing::kSectionSizeField, 5, "more than zstd can expand 5 stored bytes");
  expect_patched_failure(testing::kSectionSizeField, 0, "stores no bytes");
  // The file itself cut short inside the payload: the data region check refuses.
  AlignedBytes whole = testing::aligned(testing::compile_sample("mlp.hxir", zstd_options()));
  Status cut = vm::Module::load_buffer(whole.prefix(whole.size() - 1000)).status();
  CHECK(cut.code() == StatusCode::kDataLoss);
  CHECK_MESSAGE(testing::contains(cut.message(), "truncated"), cut.message());
}

}  // namespace
}  // namespace hexir::format
