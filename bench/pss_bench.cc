// Many processes on one .hxe (docs/embedding.md): N = 1, 2, 4, 8
// processes each load the same model (~256 MiB of f32 weights) through the C
// API, prepare it on the cpu (one thread), run it once and check the result
// against a reference; then, with every process alive, the summed PSS
// (proportional set size: a page shared by k processes counts 1/k in each)
// from /proc/PID/smaps_rollup is compared with N x the weights.
//
// Two models over the same weight file W [rows, 4096], after a baseline
// ("none": processes of this program that load nothing), and the first
// loaded without mapping ("copy-a": LoadOptions::copy_weights, the file read
// into memory of each process, as a loader that reads instead of mmaps would):
//   gemv-a   y = W x     W is the matmul's A: read in place from the mapping
//   gemm-b   y = x W     W is the matmul's B: packed at prepare into memory of
//                        the process (the GEMM's tile order), and the mapped
//                        pages handed back (MADV_DONTNEED)
//   gemm-b-unpacked      the same on "cpu?pack_weights=0": B read from the
//                        mapping by every call, so its pages are shared
//
// usage: pss_bench [--rows R] [--processes 1,2,4,8] [--dir DIR]
//   --rows 16384 (default) makes W 256 MiB. DIR (default: a new temporary
//   directory, removed at the end) holds w.npy and the two .hxe files.
// Output: one table row per (model, N); exit 1 when a process computed a
// wrong result or could not be measured.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hexir/base/npy.h"
#include "hexir/compiler/compiler.h"
#include "hexir/hexir.h"

namespace {

namespace fs = std::filesystem;

constexpr int64_t kCols = 4096;

// Deterministic weights and inputs, regenerated where needed instead of kept.
float weight(int64_t r, int64_t c) {
  uint32_t h = static_cast<uint32_t>(r * 2654435761u) ^ static_cast<uint32_t>(c * 40503u + 0x9e3779b9u);
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  return (static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * 0.02f;
}
float input_value(int64_t i) { return std::sin(0.01f * static_cast<float>(i)); }

struct Model {
  std::string name;
  fs::path hxe;
  std::vector<float> x;
  std::vector<float> reference;
  bool copy_weights = false;  // read the file into memory of the process instead of mapping it
  const char* device = "cpu";  // "cpu?pack_weights=0": B read from the mapping, not packed at prepare
};

struct Memory {
  uint64_t rss = 0, pss = 0, pss_anon = 0, pss_file = 0;  // KiB
};

bool read_rollup(pid_t pid, Memory& m) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  if (!in) return false;
  bool pss = false;
  for (std::string line; std::getline(in, line);) {  // "Pss:   1234 kB"; the first line is the range
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "Rss:") m.rss += kib;
    if (key == "Pss:") m.pss += kib, pss = true;
    if (key == "Pss_Anon:") m.pss_anon += kib;
    if (key == "Pss_File:") m.pss_file += kib;
  }
  return pss;
}

// The child: load, prepare, run, check; report on `ready`, then wait for `go` to close.
[[noreturn]] void child(const Model& model, int ready, int go) {
  auto fail = [&](const char* what, hexir_status_t* s) {
    std::fprintf(stderr, "pss_bench child %d: %s: %s\n", ::getpid(), what, hexir_status_message(s));
    char bad = 'x';
    (void)!::write(ready, &bad, 1);
    ::_exit(1);
  };
  if (model.hxe.empty()) {  // the baseline: a process of this program that loads nothing
    char verdict = 'k';
    (void)!::write(ready, &verdict, 1);
    char c;
    while (::read(go, &c, 1) > 0) {
    }
    ::_exit(0);
  }
  hexir_device_options_t options;
  hexir_device_options_init(&options);
  options.threads = 1;
  hexir_device_t* device = nullptr;
  hexir_module_t* module = nullptr;
  hexir_program_t* program = nullptr;
  hexir_context_t* context = nullptr;
  if (hexir_status_t* s = hexir_device_create(model.device, &options, &device)) fail("device", s);
  hexir_load_options_t load_options;
  hexir_load_options_init(&load_options);
  load_options.copy_weights = model.copy_weights ? 1 : 0;
  if (hexir_status_t* s = hexir_module_load_file(model.hxe.c_str(), &load_options, &module)) fail("load", s);
  if (hexir_status_t* s = hexir_program_prepare(module, device, &program)) fail("prepare", s);
  if (hexir_status_t* s = hexir_context_create(program, &context)) fail("context", s);
  std::vector<float> y(model.reference.size());
  hexir_tensor_t in{const_cast<float*>(model.x.data()), model.x.size() * 4, HEXIR_DTYPE_F32, 0, nullptr};
  hexir_tensor_t out{y.data(), y.size() * 4, HEXIR_DTYPE_F32, 0, nullptr};
  if (hexir_status_t* s = hexir_context_invoke(context, 0, &in, 1, &out, 1)) fail("invoke", s);
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (!(std::fabs(y[i] - model.reference[i]) <= 1e-3f + 1e-3f * std::fabs(model.reference[i]))) ++bad;
  char verdict = bad == 0 ? 'k' : 'x';
  if (bad) std::fprintf(stderr, "pss_bench child %d: %zu of %zu values wrong\n", ::getpid(), bad, y.size());
  (void)!::write(ready, &verdict, 1);
  char c;
  while (::read(go, &c, 1) > 0) {
  }
  ::_exit(bad == 0 ? 0 : 1);
}

bool measure(const Model& model, int n, double weight_mib) {
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) return false;
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      child(model, ready[1], go[0]);
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    char c = 0;
    if (::read(ready[0], &c, 1) != 1 || c != 'k') ok = false;
  }
  Memory sum;
  for (pid_t pid : pids)
    if (!read_rollup(pid, sum)) ok = false;
  ::close(go[1]);  // the children exit
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  }
  ::close(ready[0]);
  const double mib = 1024.0;
  std::printf("| %-6s | %d | %8.1f | %8.1f | %8.1f | %8.1f | %8.1f | %5.2f | %8.1f |%s\n", model.name.c_str(), n,
              sum.pss / mib, sum.pss_file / mib, sum.pss_anon / mib, sum.rss / mib, n * weight_mib,
              sum.pss / mib / (n * weight_mib), sum.pss / mib / n, ok ? "" : " FAILED");
  return ok;
}

std::string source(const std::string& name, int64_t rows, bool weights_as_a) {
  std::ostringstream s;
  s << "module @" << name << "\n";
  s << "const @w : f32[" << rows << "," << kCols << "] = file \"w.npy\"\n";
  if (weights_as_a)
    s << "func @main(%x: f32[" << kCols << ",1]) -> (f32[" << rows << ",1]) {\n"
      << "  %y = call @matmul(@w, %x) : f32[" << rows << ",1]\n";
  else
    s << "func @main(%x: f32[1," << rows << "]) -> (f32[1," << kCols << "]) {\n"
      << "  %y = call @matmul(%x, @w) : f32[1," << kCols << "]\n";
  s << "  return %y\n}\n";
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 16384;
  std::vector<int> counts = {1, 2, 4, 8};
  fs::path dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) {
      rows = std::atoll(argv[++i]);
    } else if (a == "--processes" && i + 1 < argc) {
      counts.clear();
      std::stringstream list(argv[++i]);
      for (std::string n; std::getline(list, n, ',');) counts.push_back(std::atoi(n.c_str()));
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--rows R] [--processes 1,2,4,8] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  if (rows <= 0 || counts.empty()) return 2;
  const bool own_dir = dir.empty();
  if (own_dir) dir = fs::temp_directory_path() / ("hexir_pss_" + std::to_string(::getpid()));
  fs::create_directories(dir);

  // The weights, written once; the references computed while they are in
  // memory, which is then freed (before any fork, so no child shares it).
  const double weight_mib = static_cast<double>(rows) * kCols * 4 / (1 << 20);
  Model a{"gemv-a", dir / "gemv_a.hxe", {}, {}}, b{"gemm-b", dir / "gemm_b.hxe", {}, {}};
  {
    std::vector<float> w(static_cast<size_t>(rows * kCols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < kCols; ++c) w[r * kCols + c] = weight(r, c);
    a.x.resize(kCols);
    for (int64_t c = 0; c < kCols; ++c) a.x[c] = input_value(c);
    b.x.resize(rows);
    for (int64_t r = 0; r < rows; ++r) b.x[r] = input_value(r + 7);
    a.reference.assign(rows, 0.0f);
    b.reference.assign(kCols, 0.0f);
    std::vector<double> acc_b(kCols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < kCols; ++c) {
        acc += double(w[r * kCols + c]) * a.x[c];
        acc_b[c] += double(b.x[r]) * w[r * kCols + c];
      }
      a.reference[r] = static_cast<float>(acc);
    }
    for (int64_t c = 0; c < kCols; ++c) b.reference[c] = static_cast<float>(acc_b[c]);
    hexir::Status s = hexir::write_npy((dir / "w.npy").string(), {hexir::DType::kF32, {rows, kCols}},
                                       {reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4});
    if (!s.ok()) {
      std::fprintf(stderr, "pss_bench: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  for (auto [model, as_a] : {std::pair<Model*, bool>{&a, true}, {&b, false}}) {
    const fs::path src = dir / (model->name + ".hxir");
    std::ofstream(src) << source(model->name == "gemv-a" ? "gemv_a" : "gemm_b", rows, as_a);
    auto compiled = hexir::compiler::compile_file_to(src, model->hxe);
    if (!compiled.ok()) {
      std::fprintf(stderr, "pss_bench: %s\n", compiled.status().to_string().c_str());
      return 1;
    }
  }
  fs::remove(dir / "w.npy");

  std::printf("weights %.1f MiB (f32[%lld,%lld]) in one .hxe per model; %s, 1 cpu thread per process\n", weight_mib,
              static_cast<long long>(rows), static_cast<long long>(kCols), hexir_version_string());
  std::printf("| model  | N | sum PSS MiB | of it file | of it anon | sum RSS MiB | N x weights MiB | PSS / (N x weights) "
              "| PSS per process MiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  bool ok = true;
  const Model none{"none", {}, {}, {}};
  Model copied = a;
  copied.name = "copy-a";
  copied.copy_weights = true;
  Model unpacked = b;
  unpacked.name = "gemm-b-unpacked";
  unpacked.device = "cpu?pack_weights=0";
  for (const Model* model : std::initializer_list<const Model*>{&none, &a, &copied, &b, &unpacked})
    for (int n : counts) ok = measure(*model, n, weight_mib) && ok;
  if (own_dir) fs::remove_all(dir);
  return ok ? 0 : 1;
}
