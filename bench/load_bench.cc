// Load-time benchmark: an executable with a large RODATA section (random,
// non-splat constants), loaded by mmap (Module::load_file: map + verify the
// metadata, O(metadata)) versus reading the whole file into memory with
// std::ifstream and Module::load_buffer (O(file)). Run at a small and a large
// size to show that the mmap load does not depend on the size of the weights.
//
//   load_bench [--size-mb N] [--small-mb M] [--reps R]
//
// Defaults: N = 1024, M = 16, R = 5. Needs about 2x N MiB of temporary disk
// and 3-4x N MiB of memory while compiling. Times are with a warm page cache
// (the file was just written); everything is removed at the end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hal/device.h"
#include "hexir/vm.h"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kCols = 16;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int fail(const char* what, const hexir::Status& status) {
  std::fprintf(stderr, "load_bench: %s: %s\n", what, status.to_string().c_str());
  return 1;
}

// Removes its directory (and everything in it) when it goes out of scope.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("hexir_load_bench_" + std::to_string(::getpid()) + "_" + tag);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

// Writes `count` constants of `rows` x 16 random floats as .npy files and a
// .hxir using all of them; returns the .hxir path.
hexir::Result<fs::path> write_model(const fs::path& dir, int count, int64_t rows, uint64_t seed) {
  std::string src = "module @big\n\n";
  for (int c = 0; c < count; ++c) {
    std::string file = "w" + std::to_string(c) + ".npy";
    src += "const @w" + std::to_string(c) + " : f32[" + std::to_string(rows) + "," + std::to_string(kCols) +
           "] = file \"" + file + "\"\n";
    hexir::TensorType type{hexir::DType::kF32, {rows, kCols}};
    std::vector<float> data(static_cast<size_t>(rows * kCols));
    for (float& f : data) {  // xorshift64*: cheap, and nothing repeats, so no splat
      seed ^= seed >> 12;
      seed ^= seed << 25;
      seed ^= seed >> 27;
      uint64_t r = seed * 0x2545F4914F6CDD1Dull;
      f = static_cast<float>(static_cast<double>(r >> 40) / static_cast<double>(1ull << 24) - 0.5);
    }
    HEXIR_RETURN_IF_ERROR(hexir::write_npy(
        (dir / file).string(), type,
        std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size() * sizeof(float))));
  }
  // Every constant is used, so none can be dropped.
  src += "\nfunc @main(%x: f32[16]) -> (f32[16]) {\n";
  std::string acc = "%x";
  for (int c = 0; c < count; ++c) {
    std::string s = "%s" + std::to_string(c), a = "%a" + std::to_string(c);
    src += "  " + s + " = call @reduce_sum(@w" + std::to_string(c) + ") {axes = [0]} : f32[16]\n";
    src += "  " + a + " = call @add(" + acc + ", " + s + ") : f32[16]\n";
    acc = a;
  }
  src += "  return " + acc + "\n}\n";
  fs::path hxir = dir / "big.hxir";
  std::ofstream out(hxir);
  out << src;
  out.close();
  if (!out) return hexir::internal_error("cannot write " + hxir.string());
  return hxir;
}

#define HEXIR_RETURN_IF_ERROR_MAIN(expr)             \
  do {                                               \
    ::hexir::Status status_ = (expr);                \
    if (!status_.ok()) return fail("read", status_); \
  } while (0)

// Reads a whole file with std::ifstream into 64-byte aligned memory. With
// `prefault`, the memory is touched first and only the read is timed (into *ms).
hexir::Status read_file(const fs::path& path, AlignedBuffer* buffer, size_t* size, bool prefault,
                        double* ms = nullptr) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return hexir::not_found("cannot open " + path.string());
  *size = static_cast<size_t>(in.tellg());
  in.seekg(0);
  buffer->reset(static_cast<uint8_t*>(std::aligned_alloc(64, (*size + 63) / 64 * 64)));
  if (!*buffer) return hexir::resource_exhausted("cannot allocate the file buffer");
  if (prefault) std::memset(buffer->get(), 0, *size);
  auto t0 = Clock::now();
  in.read(reinterpret_cast<char*>(buffer->get()), static_cast<std::streamsize>(*size));
  if (!in) return hexir::data_loss("short read of " + path.string());
  if (ms) *ms = ms_since(t0);
  return hexir::ok_status();
}

struct Figures {
  double rodata_mib = 0;
  double file_mib = 0;
  double mmap_ms = 0;
  double read_ms = 0;
  double prefaulted_ms = 0;
  double checksum_ms = 0;
  double prepare_ms = 0;
};

int bench_size(int size_mb, int reps, Figures* fig) {
  TempDir dir(std::to_string(size_mb) + "mb");
  const uint64_t total = static_cast<uint64_t>(size_mb) << 20;
  const int count = size_mb >= 64 ? 4 : 1;
  const int64_t rows = static_cast<int64_t>(total / count / (kCols * sizeof(float)));

  auto t0 = Clock::now();
  auto hxir = write_model(dir.path, count, rows, 0x9E3779B97F4A7C15ull + size_mb);
  if (!hxir.ok()) return fail("writing the model", hxir.status());
  double gen_ms = ms_since(t0);

  fs::path hxe_path = dir.path / "big.hxe";
  t0 = Clock::now();
  {
    hexir::compiler::CompileOptions options;
    options.data_checksum = true;  // lets the O(weights) verification be timed too
    auto hxe = hexir::compiler::compile_file(*hxir, options);
    if (!hxe.ok()) return fail("compile", hxe.status());
    hexir::Status s = hexir::compiler::write_binary_file(hxe_path, *hxe);
    if (!s.ok()) return fail("write", s);
  }
  double compile_ms = ms_since(t0);
  for (int c = 0; c < count; ++c) fs::remove(dir.path / ("w" + std::to_string(c) + ".npy"));
  const uint64_t file_size = fs::file_size(hxe_path);
  fig->rodata_mib = static_cast<double>(total) / (1 << 20);
  fig->file_mib = static_cast<double>(file_size) / (1 << 20);
  std::printf(
      "load_bench: %d MiB of RODATA in %d constant(s); file %.1f MiB (generated in %.0f ms, compiled in %.0f "
      "ms)\n",
      size_mb, count, fig->file_mib, gen_ms, compile_ms);

  std::vector<double> mmap_ms, read_ms, read_only_ms, prefaulted_ms, checksum_ms, prepare_ms;
  for (int r = 0; r < reps; ++r) {
    // (a) mmap + verify metadata.
    t0 = Clock::now();
    {
      auto module = hexir::vm::Module::load_file(hxe_path.string());
      if (!module.ok()) return fail("load_file", module.status());
      mmap_ms.push_back(ms_since(t0));
      if (module->constant_bytes() < total) {
        std::fprintf(stderr, "load_bench: module has %llu constant bytes, expected %llu\n",
                     static_cast<unsigned long long>(module->constant_bytes()),
                     static_cast<unsigned long long>(total));
        return 1;
      }
      // Preparing on the cpu device (extra figure: constants imported or copied once).
      auto device = hexir::hal::create_device("cpu");
      if (!device.ok()) return fail("device", device.status());
      auto t1 = Clock::now();
      auto program = hexir::vm::Program::prepare(*module, **device);
      if (!program.ok()) return fail("prepare", program.status());
      prepare_ms.push_back(ms_since(t1));
    }

    // (b) read the whole file into fresh (64-byte aligned) memory, then
    // load_buffer: what an application without mmap does.
    t0 = Clock::now();
    {
      AlignedBuffer buffer;
      size_t size = 0;
      HEXIR_RETURN_IF_ERROR_MAIN(read_file(hxe_path, &buffer, &size, /*prefault=*/false));
      read_only_ms.push_back(ms_since(t0));
      auto module = hexir::vm::Module::load_buffer({buffer.get(), size});
      if (!module.ok()) return fail("load_buffer", module.status());
      read_ms.push_back(ms_since(t0));
    }
    // (b') the same into memory that was already touched (allocation and page
    // faults not timed): the best case for reading, a pure copy.
    {
      AlignedBuffer buffer;
      size_t size = 0;
      double copy_ms = 0;
      HEXIR_RETURN_IF_ERROR_MAIN(read_file(hxe_path, &buffer, &size, /*prefault=*/true, &copy_ms));
      auto t1 = Clock::now();
      auto module = hexir::vm::Module::load_buffer({buffer.get(), size});
      if (!module.ok()) return fail("load_buffer", module.status());
      prefaulted_ms.push_back(copy_ms + ms_since(t1));
    }

    // (c) mmap + verify the data checksum as well: O(weights), for comparison.
    t0 = Clock::now();
    {
      hexir::vm::LoadOptions options;
      options.verify_data_checksum = true;
      auto module = hexir::vm::Module::load_file(hxe_path.string(), options);
      if (!module.ok()) return fail("load_file(verify_data_checksum)", module.status());
      checksum_ms.push_back(ms_since(t0));
    }
  }
  fig->mmap_ms = median(mmap_ms);
  fig->read_ms = median(read_ms);
  const double read_only = median(read_only_ms);
  fig->prefaulted_ms = median(prefaulted_ms);
  fig->checksum_ms = median(checksum_ms);
  fig->prepare_ms = median(prepare_ms);
  std::printf("  Module::load_file (mmap + verify metadata)   : %10.3f ms\n", fig->mmap_ms);
  std::printf("  ifstream read + Module::load_buffer          : %10.3f ms  (read %.3f ms, %.2f GiB/s)\n",
              fig->read_ms, read_only, static_cast<double>(file_size) / (1 << 30) / (read_only / 1e3));
  std::printf("  ifstream read into touched memory + load_buf: %10.3f ms  (%.2f GiB/s)\n", fig->prefaulted_ms,
              static_cast<double>(file_size) / (1 << 30) / (fig->prefaulted_ms / 1e3));
  std::printf("  load_file + verify_data_checksum (O(weights)): %10.3f ms\n", fig->checksum_ms);
  std::printf("  Program::prepare on cpu after mmap load      : %10.3f ms\n", fig->prepare_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int size_mb = 1024, small_mb = 16, reps = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (arg == "--size-mb")
      size_mb = next();
    else if (arg == "--small-mb")
      small_mb = next();
    else if (arg == "--reps")
      reps = next();
    else {
      std::fprintf(stderr, "usage: %s [--size-mb N] [--small-mb M] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (size_mb < 1 || small_mb < 1 || reps < 1) {
    std::fprintf(stderr, "load_bench: sizes and reps must be positive\n");
    return 2;
  }

  Figures small, big;
  if (int rc = bench_size(small_mb, reps, &small)) return rc;
  if (int rc = bench_size(size_mb, reps, &big)) return rc;

  std::printf("\nload_bench summary (median of %d, warm page cache):\n", reps);
  std::printf("  %-10s %14s %18s %22s %16s\n", "RODATA", "mmap load", "ifstream+buffer",
              "(into touched memory)", "mmap+checksum");
  for (const Figures* f : {&small, &big})
    std::printf("  %7.0f MiB %11.3f ms %15.3f ms %19.3f ms %13.3f ms\n", f->rodata_mib, f->mmap_ms,
                f->read_ms, f->prefaulted_ms, f->checksum_ms);
  std::printf("  mmap load at %d MiB / at %d MiB: %.2fx (size ratio %.0fx)\n", size_mb, small_mb,
              big.mmap_ms / small.mmap_ms, big.rodata_mib / small.rodata_mib);
  return 0;
}
