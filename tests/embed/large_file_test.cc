// Files past 4 GiB and offsets near 2^32 and 2^64. The large file
// is sparse: a RODATA section of 4 GiB + 128 bytes starting past 2^32, of
// which only the page holding the one constant (itself at an offset past
// 2^32 inside the section) is written, so it takes a few KiB of disk. It is
// mapped, verified and run through the C API. Offsets near 2^32 and 2^64 in
// the prelude, the section table and a constant are refused with DATA_LOSS
// naming the offset, never a crash or a wrapped range.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hexir/hexir.h"
#include "hxe_test_builder.h"

namespace {

using namespace hexir;
using namespace hexir::testing;

constexpr uint64_t kGiB = uint64_t{1} << 30;

std::string take(hexir_status_t* status) {
  if (!status) return "OK";
  std::string message = std::string(hexir_status_code_name(hexir_status_code(status))) + ": " +
                        hexir_status_message(status);
  hexir_status_free(status);
  return message;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// tiny_module_spec with its RODATA section at `section_offset`, `section_size`
// bytes long, and constant b at `constant_offset` inside it. Returns the
// prelude and metadata (the file's first bytes) and where b's bytes go.
struct Layout {
  std::vector<uint8_t> head;
  uint64_t constant_at = 0;
  uint64_t file_size = 0;
};

Layout layout(uint64_t section_offset, uint64_t section_size, uint64_t constant_offset) {
  ModuleSpec spec = tiny_module_spec();
  spec.sections[0].offset = section_offset;
  spec.sections[0].size = section_size;
  spec.sections[0].raw_size = section_size;
  spec.constants[0].offset = constant_offset;
  const std::vector<uint8_t> metadata = build_metadata(spec, {section_offset});
  format::Prelude prelude{};
  std::memcpy(prelude.magic, format::kMagic, sizeof(format::kMagic));
  prelude.format_version = format::kFormatVersion;
  prelude.metadata_offset = 64;
  prelude.metadata_size = metadata.size();
  prelude.data_offset = round_up(64 + metadata.size(), format::kPageSize);
  prelude.data_size = section_offset + section_size - prelude.data_offset;
  prelude.metadata_checksum = format::checksum64(metadata);
  Layout out;
  out.head.resize(64 + metadata.size());
  std::memcpy(out.head.data(), &prelude, sizeof prelude);
  std::memcpy(out.head.data() + 64, metadata.data(), metadata.size());
  out.constant_at = section_offset + constant_offset;
  out.file_size = section_offset + section_size;
  return out;
}

// A small in-memory file with the given layout: only offsets that lie in a
// real file of this size can be honoured, so anything past its end must be
// refused by the verifier.
AlignedBytes small_file(Layout l, uint64_t size = 3 * format::kPageSize) {
  AlignedBytes file(size);
  std::memcpy(file.data(), l.head.data(), l.head.size());
  return file;
}

std::string load_buffer(const AlignedBytes& file) {
  hexir_module_t* module = nullptr;
  std::string message = take(hexir_module_load_buffer(file.data(), file.size(), nullptr, &module));
  CHECK(module == nullptr);
  hexir_module_release(module);
  return message;
}

// A temporary file removed on destruction.
struct TempFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("hexir_large_" + std::to_string(::getpid()) + ".hxe");
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

bool write_at(int fd, const void* data, size_t size, uint64_t offset) {
  return ::pwrite(fd, data, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size);
}

}  // namespace

TEST_CASE("large file: a sparse 8 GiB file with RODATA and a constant past 2^32 loads, verifies and runs") {
  const uint64_t section_offset = 4 * kGiB + format::kPageSize;  // past 2^32
  const uint64_t section_size = 4 * kGiB + 128;
  const uint64_t constant_offset = 4 * kGiB + 64;  // past 2^32 inside the section
  const Layout l = layout(section_offset, section_size, constant_offset);
  REQUIRE(l.file_size > 8 * kGiB);

  TempFile tmp;
  const int fd = ::open(tmp.path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  // Holes first: a file system without them would write gigabytes. Skip there.
  REQUIRE(::ftruncate(fd, static_cast<off_t>(l.file_size)) == 0);
  struct stat st;
  REQUIRE(::fstat(fd, &st) == 0);
  if (static_cast<uint64_t>(st.st_blocks) * 512 > (uint64_t{1} << 20)) {
    ::close(fd);
    std::printf("HEXIR_SKIP: %s has no sparse files\n", tmp.path.parent_path().c_str());
    return;
  }
  const float b[4] = {1.0f, -2.0f, 3.0f, -4.0f};
  REQUIRE(write_at(fd, l.head.data(), l.head.size(), 0));
  REQUIRE(write_at(fd, b, sizeof b, l.constant_at));
  REQUIRE(::fstat(fd, &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) == l.file_size);
  CHECK(static_cast<uint64_t>(st.st_blocks) * 512 < (uint64_t{1} << 20));  // still sparse

  for (int via_fd : {0, 1}) {
    CAPTURE(via_fd);
    hexir_module_t* module = nullptr;
    REQUIRE(take(via_fd ? hexir_module_load_fd(fd, nullptr, &module)
                        : hexir_module_load_file(tmp.path.c_str(), nullptr, &module)) == "OK");
    hexir_module_memory_t memory{};
    hexir_module_memory(module, &memory);
    CHECK(memory.constant_bytes == 32);
    hexir_device_t* device = nullptr;
    REQUIRE(take(hexir_device_create("cpu", nullptr, &device)) == "OK");
    hexir_program_t* program = nullptr;
    REQUIRE(take(hexir_program_prepare(module, device, &program)) == "OK");
    hexir_context_t* context = nullptr;
    REQUIRE(take(hexir_context_create(program, &context)) == "OK");
    float x[4] = {1, 1, 1, 1}, y[4] = {};
    hexir_tensor_t in{x, 16, HEXIR_DTYPE_F32, 0, nullptr}, out{y, 16, HEXIR_DTYPE_F32, 0, nullptr};
    REQUIRE(take(hexir_context_invoke(context, 0, &in, 1, &out, 1)) == "OK");
    for (size_t i = 0; i < 4; ++i) CHECK(y[i] == tiny_expected(1.0f, i));
    hexir_context_release(context);
    hexir_program_release(program);
    hexir_module_release(module);
    hexir_device_release(device);
  }
  ::close(fd);
}

TEST_CASE("large file: offsets near 2^32 and 2^64 are refused, naming them") {
  const uint64_t page = format::kPageSize;
  const uint64_t top = ~uint64_t{0};
  SUBCASE("a data region reaching 2^32 in a 12 KiB file") {
    const Layout l = layout(uint64_t{1} << 32, 16, 0);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS: data region [4096, +4294963216) extends past the end of the 12288-byte file"));
  }
  SUBCASE("a section at 2^32 outside a data region that fits the file") {
    Layout l = layout(uint64_t{1} << 32, 16, 0);
    format::Prelude prelude;
    std::memcpy(&prelude, l.head.data(), sizeof prelude);
    prelude.data_size = 3 * page - prelude.data_offset;
    std::memcpy(l.head.data(), &prelude, sizeof prelude);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
    CHECK(has(message, "bytes [4294967296, +16) are outside the data region"));
  }
  SUBCASE("a section ending at 2^32 + 16") {
    const Layout l = layout(2 * page, (uint64_t{1} << 32) - 2 * page + 16, 0);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
  }
  SUBCASE("a section at 2^64 - 4096 whose end wraps") {
    const Layout l = layout(top - page + 1, 2 * page, 0);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
    CHECK(has(message, std::to_string(top - page + 1)));
  }
  SUBCASE("a constant at 2^32 in a 16-byte section") {
    const Layout l = layout(2 * page, 16, uint64_t{1} << 32);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
    CHECK(has(message, "4294967296"));
  }
  SUBCASE("a constant at 2^64 - 64 whose end wraps") {
    const Layout l = layout(2 * page, 16, top - 63);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
    CHECK(has(message, std::to_string(top - 63)));
  }
  SUBCASE("a prelude whose data region wraps past 2^64") {
    Layout l = layout(2 * page, 16, 0);
    format::Prelude prelude;
    std::memcpy(&prelude, l.head.data(), sizeof prelude);
    prelude.data_size = top - prelude.data_offset + 2;
    std::memcpy(l.head.data(), &prelude, sizeof prelude);
    CHECK(has(load_buffer(small_file(l)), "DATA_LOSS"));
  }
  SUBCASE("a prelude whose metadata lies at 2^64 - 8") {
    Layout l = layout(2 * page, 16, 0);
    format::Prelude prelude;
    std::memcpy(&prelude, l.head.data(), sizeof prelude);
    prelude.metadata_offset = top - 7;
    std::memcpy(l.head.data(), &prelude, sizeof prelude);
    std::string message = load_buffer(small_file(l));
    CHECK(has(message, "DATA_LOSS"));
    CHECK(has(message, std::to_string(top - 7)));
  }
  SUBCASE("a prelude whose data region is 2^32 past the file's end") {
    Layout l = layout(2 * page, 16, 0);
    format::Prelude prelude;
    std::memcpy(&prelude, l.head.data(), sizeof prelude);
    prelude.data_size += uint64_t{1} << 32;
    std::memcpy(l.head.data(), &prelude, sizeof prelude);
    CHECK(has(load_buffer(small_file(l)), "DATA_LOSS"));
  }
}
