// Loading hardened: what was verified cannot change after load, the
// weights can be read into owned memory, and the limits of LoadOptions bound
// what a small file can make the VM allocate; files whose arena values
// overlap while live are refused before anything runs.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "hexir/format/verifier.h"
#include "hexir/vm.h"
#include "hxe_test_builder.h"
#include "vm_impl.h"

namespace hexir::vm {
namespace {

using hexir::testing::AlignedBytes;
using hexir::testing::ModuleSpec;
using hexir::testing::SectionSpec;
using hexir::testing::write_hxe;

std::unique_ptr<hal::Device> cpu_device() {
  Result<std::unique_ptr<hal::Device>> device = hal::create_device("cpu");
  REQUIRE_MESSAGE(device.ok(), device.status().to_string());
  return std::move(device).value();
}

// A file on disk, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const AlignedBytes& bytes) {
    char name[] = "/tmp/hexir_hardening_test_XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
    path = name;
  }
  ~TempFile() { std::remove(path.c_str()); }
  // Rewrites bytes in place, as another process would (not through any mapping).
  void rewrite(uint64_t offset, const void* data, size_t size) const {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, data, size, static_cast<off_t>(offset)) == static_cast<ssize_t>(size));
    ::close(fd);
  }
  void truncate() const { REQUIRE(::truncate(path.c_str(), 0) == 0); }
};

const std::array<float, 4> kGamma{1.0f, 2.0f, 3.0f, 4.0f};
const std::array<float, 4> kBeta{0.5f, -0.5f, 0.25f, -0.25f};
const TensorType kRows{DType::kF32, {2, 4}};

// func @main(%x: f32[2,4]) -> (f32[2,4]) { y = layernorm(x, @gamma, @beta) {axis = 1, epsilon = 1e-5} }
ModuleSpec layernorm_spec() {
  ModuleSpec m;
  m.name = "ln";
  SectionSpec rodata;
  rodata.bytes.resize(128);
  std::memcpy(rodata.bytes.data(), kGamma.data(), 16);
  std::memcpy(rodata.bytes.data() + 64, kBeta.data(), 16);
  m.sections.push_back(rodata);
  m.constants.push_back({"gamma", fb::DType::F32, {4}, 16, fb::ConstantStorage::Rodata, 0, 0, {}, 0});
  m.constants.push_back({"beta", fb::DType::F32, {4}, 16, fb::ConstantStorage::Rodata, 0, 64, {}, 0});
  m.kernels = {"layernorm"};
  m.slots = {
      {"x", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"gamma", fb::DType::F32, {4}, 16, fb::StorageKind::Constant, fb::SlotUsage::Constant, 0, 0},
      {"beta", fb::DType::F32, {4}, 16, fb::StorageKind::Constant, fb::SlotUsage::Constant, 0, 1},
      {"y", fb::DType::F32, {2, 4}, 32, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 2, 3};
  m.param_pool = {1, std::bit_cast<int64_t>(1e-5)};
  m.instructions = {{0, 0, 4, 3, 0, 2, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 1, 0, 0});
  m.arena_size = 0;
  return m;
}

const std::array<float, 8> kX{1, 2, 3, 4, -1, 0, 5, 2};

std::array<float, 8> layernorm_expected() {
  std::array<float, 8> y{};
  for (size_t r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < 4; ++i) mean += kX[r * 4 + i];
    mean /= 4;
    for (size_t i = 0; i < 4; ++i) var += (kX[r * 4 + i] - mean) * (kX[r * 4 + i] - mean);
    var /= 4;
    for (size_t i = 0; i < 4; ++i)
      y[r * 4 + i] =
          static_cast<float>((kX[r * 4 + i] - mean) / std::sqrt(var + 1e-5) * kGamma[i] + kBeta[i]);
  }
  return y;
}

// Prepares `module` on the cpu, runs it once and compares with layernorm_expected().
void run_layernorm(const Module& module) {
  auto device = cpu_device();
  Result<Program> program = Program::prepare(module, *device);
  REQUIRE_MESSAGE(program.ok(), program.status().to_string());
  Result<Context> context = Context::create(*program);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  std::array<float, 8> x = kX, y{};
  TensorRef in{x.data(), 32, kRows}, out{y.data(), 32, kRows};
  Status status = context->invoke(0, {&in, 1}, {&out, 1});
  REQUIRE_MESSAGE(status.ok(), status.to_string());
  const std::array<float, 8> expected = layernorm_expected();
  for (size_t i = 0; i < 8; ++i) CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-5));
}

// File offset of parameter word `index` (located by verifying the bytes).
uint64_t param_offset(const AlignedBytes& bytes, size_t index) {
  Result<format::VerifiedModule> v = format::verify_executable(bytes.span());
  REQUIRE(v.ok());
  const auto* word = reinterpret_cast<const uint8_t*>(v->module->param_pool()->data() + index);
  return v->prelude.metadata_offset + static_cast<uint64_t>(word - v->metadata.data());
}

TEST_CASE("verified parameters cannot change after load: rewriting the file on disk is not seen") {
  const AlignedBytes bytes = write_hxe(layernorm_spec());
  run_layernorm(Module::load_buffer(bytes.span()).value());

  SUBCASE("epsilon rewritten to 1e30 (would flatten every row)") {
    TempFile file(bytes);
    Result<Module> module = Module::load_file(file.path);
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    const int64_t huge = std::bit_cast<int64_t>(1e30);
    file.rewrite(param_offset(bytes, 1), &huge, 8);
    run_layernorm(*module);
  }
  SUBCASE("axis rewritten to 0 (gamma no longer fits the rows)") {
    TempFile file(bytes);
    Result<Module> module = Module::load_file(file.path);
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    const int64_t axis = 0;
    file.rewrite(param_offset(bytes, 0), &axis, 8);
    run_layernorm(*module);
  }
  SUBCASE("caller memory of load_buffer rewritten after load") {
    AlignedBytes copy = bytes.copy();
    Result<Module> module = Module::load_buffer(copy.span());
    REQUIRE(module.ok());
    const int64_t axis = 0;
    std::memcpy(copy.data() + param_offset(bytes, 0), &axis, 8);
    run_layernorm(*module);
  }
}

TEST_CASE("copy_weights: the file may be rewritten or truncated after load") {
  const AlignedBytes bytes = write_hxe(layernorm_spec());
  LoadOptions options;
  options.copy_weights = true;
  {
    TempFile file(bytes);
    Result<Module> module = Module::load_file(file.path, options);
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    CHECK(module->impl().mapping.empty());  // nothing of the file is kept
    // New weights on disk, then no file at all: neither is seen.
    Result<format::VerifiedModule> v = format::verify_executable(bytes.span());
    REQUIRE(v.ok());
    const uint64_t gamma_offset = v->module->sections()->Get(0)->offset();
    const std::array<float, 4> other{9, 9, 9, 9};
    file.rewrite(gamma_offset, other.data(), 16);
    file.truncate();
    run_layernorm(*module);
  }
  {
    // load_buffer: the caller's bytes may be overwritten (and need no alignment).
    AlignedBytes unaligned(bytes.size() + 8);
    std::memcpy(unaligned.data() + 8, bytes.data(), bytes.size());
    std::span<const uint8_t> span{unaligned.data() + 8, bytes.size()};
    CHECK(Module::load_buffer(span).status().code() == StatusCode::kInvalidArgument);
    Result<Module> module = Module::load_buffer(span, options);
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    std::memset(unaligned.data(), 0xff, unaligned.size());
    run_layernorm(*module);
  }
  // Errors still name the file.
  Result<Module> missing = Module::load_file("/nonexistent/hexir.hxe", options);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message().find("/nonexistent/hexir.hxe") != std::string::npos);
  Result<Module> directory = Module::load_file("/tmp", options);
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().message().find("not a regular file") != std::string::npos);
}

// One zstd frame of `blocks` RLE blocks of 128 KiB (4 stored bytes each)
// that records its content size: a few KB declaring blocks x 128 KiB.
std::vector<uint8_t> rle_frame(uint64_t blocks) {
  std::vector<uint8_t> f = {0x28, 0xb5, 0x2f, 0xfd, 0xe0};  // magic; 8-byte content size, single segment
  const uint64_t content = blocks << 17;
  for (int i = 0; i < 8; ++i) f.push_back(static_cast<uint8_t>(content >> (8 * i)));
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint32_t header = (b + 1 == blocks ? 1u : 0u) | (1u << 1) | (uint32_t{1} << 17 << 3);
    f.push_back(static_cast<uint8_t>(header));
    f.push_back(static_cast<uint8_t>(header >> 8));
    f.push_back(static_cast<uint8_t>(header >> 16));
    f.push_back(0x3c);  // the byte repeated
  }
  return f;
}

ModuleSpec with_zstd_section(uint64_t blocks) {
  ModuleSpec m = hexir::testing::tiny_module_spec();
  SectionSpec s;
  s.bytes = rle_frame(blocks);
  s.compression = fb::Compression::Zstd;
  s.raw_size = blocks << 17;
  m.sections.push_back(s);
  return m;
}

void expect_limit(const Result<Module>& module, const std::string& limit) {
  REQUIRE_FALSE(module.ok());
  INFO("message: " << module.status().message());
  CHECK(module.status().code() == StatusCode::kResourceExhausted);
  CHECK(module.status().message().find("LoadOptions." + limit) != std::string::npos);
}

TEST_CASE("limits: decompressed section bytes") {
  // A 256 KiB frame decompresses fine (the frame is real).
  const AlignedBytes small = write_hxe(with_zstd_section(2));
  Result<Module> ok = Module::load_buffer(small.span());
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK(ok->impl().verified.sections[1].size() == 256 * 1024);
  CHECK(ok->impl().verified.sections[1][1000] == 0x3c);
  LoadOptions tight;
  tight.max_decompressed_bytes = 128 * 1024;
  expect_limit(Module::load_buffer(small.span(), tight), "max_decompressed_bytes");

  // 33 KB of file declaring 1 GiB: refused by default, before allocating it.
  const AlignedBytes bomb = write_hxe(with_zstd_section(8192));
  CHECK(bomb.size() < 48 * 1024);
  expect_limit(Module::load_buffer(bomb.span()), "max_decompressed_bytes");
  // The same bound for other users of decompress_sections (hexir-dump).
  Result<format::VerifiedModule> verified = format::verify_executable(bomb.span());
  REQUIRE(verified.ok());
  std::vector<format::SectionBuffer> owned;
  Status status = format::decompress_sections(*verified, owned, uint64_t{256} << 20);
  CHECK(status.code() == StatusCode::kResourceExhausted);
  CHECK(status.message().find("limit of 268435456 bytes") != std::string::npos);
  CHECK(owned.empty());
}

TEST_CASE("limits: fill bytes") {
  // A file of a few hundred bytes whose fill constant is 1 GiB.
  ModuleSpec m = hexir::testing::tiny_module_spec();
  m.constants[1].shape = {int64_t{1} << 28};
  m.constants[1].byte_size = uint64_t{1} << 30;
  m.constants[1].fill_count = uint64_t{1} << 28;
  const AlignedBytes bytes = write_hxe(m);
  expect_limit(Module::load_buffer(bytes.span()), "max_fill_bytes");
  LoadOptions loose;
  loose.max_fill_bytes = uint64_t{1} << 30;
  CHECK(Module::load_buffer(bytes.span(), loose).ok());
  LoadOptions tight;
  tight.max_fill_bytes = 15;  // the tiny module's own fill is 16 bytes
  expect_limit(Module::load_buffer(write_hxe(hexir::testing::tiny_module_spec()).span(), tight),
               "max_fill_bytes");
}

TEST_CASE("limits: arena bytes") {
  ModuleSpec m = hexir::testing::tiny_module_spec();
  m.arena_size = uint64_t{1} << 40;  // 1 TiB of arena for 16 bytes of values
  expect_limit(Module::load_buffer(write_hxe(m).span()), "max_arena_bytes");
  m = hexir::testing::tiny_module_spec();
  m.workspace_size = uint64_t{1} << 40;
  expect_limit(Module::load_buffer(write_hxe(m).span()), "max_arena_bytes");
  LoadOptions tight;
  tight.max_arena_bytes = 63;  // the tiny module's arena is 64 bytes
  expect_limit(Module::load_buffer(write_hxe(hexir::testing::tiny_module_spec()).span(), tight),
               "max_arena_bytes");
  tight.max_arena_bytes = 64;
  CHECK(Module::load_buffer(write_hxe(hexir::testing::tiny_module_spec()).span(), tight).ok());

  // Free-at-last-use: the most bytes live at once (h, then h2 in place over it).
  m = hexir::testing::tiny_module_spec();
  m.arena_strategy = static_cast<uint8_t>(fb::PlanStrategy::FreeAtLastUse);
  m.arena_size = 0;
  m.functions[0].arena_size = 0;
  m.slots[3].last_use = 1;
  m.slots[4].last_use = 2;
  const AlignedBytes dynamic = write_hxe(m);
  Result<Module> module = Module::load_buffer(dynamic.span());
  REQUIRE_MESSAGE(module.ok(), module.status().to_string());
  CHECK(module->impl().verified.dynamic_peak_bytes == 16);
  tight.max_arena_bytes = 15;
  expect_limit(Module::load_buffer(dynamic.span(), tight), "max_arena_bytes");
}

// a = relu(x); b = neg(x); c = sub(a, b) = relu(x) + x, with b at `b_offset` (a at 0).
ModuleSpec relu_neg_sub(uint64_t b_offset) {
  ModuleSpec m;
  m.kernels = {"relu", "neg", "sub"};
  m.slots = {
      {"x", fb::DType::F32, {4}, 16, fb::StorageKind::Input, fb::SlotUsage::ExternalInput, 0, 0},
      {"a", fb::DType::F32, {4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, 0, 0},
      {"b", fb::DType::F32, {4}, 16, fb::StorageKind::Arena, fb::SlotUsage::Transient, b_offset, 0},
      {"c", fb::DType::F32, {4}, 16, fb::StorageKind::Output, fb::SlotUsage::ExternalOutput, 0, 0},
  };
  m.operand_pool = {0, 1, 0, 2, 1, 2, 3};
  m.instructions = {{0, 0, 2, 1, 0, 0, 0, 0}, {1, 2, 2, 1, 0, 0, 0, 0}, {2, 4, 3, 2, 0, 0, 0, 0}};
  m.functions.push_back({"main", {{"x", 0, -1}}, {{"0", 3, -1}}, 0, 3, 128, 32});
  m.arena_size = 128;
  return m;
}

TEST_CASE("overlapping live arena values: refused at load instead of computing zeros") {
  const TensorType vec{DType::kF32, {4}};
  {
    Result<Module> module = Module::load_buffer(write_hxe(relu_neg_sub(64)).span());
    REQUIRE_MESSAGE(module.ok(), module.status().to_string());
    auto device = cpu_device();
    Result<Program> program = Program::prepare(*module, *device);
    REQUIRE(program.ok());
    Result<Context> context = Context::create(*program);
    REQUIRE(context.ok());
    std::array<float, 4> x{-2, -1, 1, 2}, c{};
    TensorRef in{x.data(), 16, vec}, out{c.data(), 16, vec};
    REQUIRE(context->invoke(0, {&in, 1}, {&out, 1}).ok());
    for (size_t i = 0; i < 4; ++i) CHECK(c[i] == std::max(x[i], 0.0f) + x[i]);
  }
  Result<Module> bad = Module::load_buffer(write_hxe(relu_neg_sub(0)).span());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kDataLoss);
  CHECK(bad.status().message().find("overlaps slot 1 ('a')") != std::string::npos);
}

}  // namespace
}  // namespace hexir::vm
