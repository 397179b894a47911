// A scratch directory for a test, whole files read and written as strings,
// and FIFOs.
#pragma once

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace hexir::testing {

// A fresh directory under the system temp dir (named by the process and a
// counter), removed with everything in it at scope exit.
struct ScratchDir {
  std::filesystem::path path;

  ScratchDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("hexir-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // The path of `name` in the directory.
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The file's bytes; empty when it cannot be read.
inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Creates or replaces the file with `bytes`.
inline void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A FIFO named `name` in `dir`: its path.
inline std::string make_fifo(const ScratchDir& dir, const std::string& name) {
  const std::string path = dir / name;
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  return path;
}

}  // namespace hexir::testing
