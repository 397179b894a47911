// Issue 9 (hardening), files: every reader opens without blocking and takes
// only regular files (a FIFO used to hang MappedFile::open and read_npy,
// /dev/zero as an .npy grew memory until killed); .npy reading checks the
// header before allocating and reads exactly the declared bytes; writers
// never follow a planted link or replace a device node (hexir/base/file_io.h).
#include "hexir/base/file_io.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "hexir/base/mapped_file.h"
#include "hexir/base/npy.h"
#include "scratch_dir.h"

namespace hexir {
namespace {

namespace fs = std::filesystem;

using testing::make_fifo;
using testing::read_all;
using testing::ScratchDir;
using testing::write_all;

// Runs `body` in a child process that is killed after `seconds` and may map
// at most 1 GiB: a reader that blocks or grows without bound fails the test
// instead of hanging or exhausting the machine. The child's exit code is
// body's result (0 = what the test expected), 128 + signal when killed.
int bounded_child(const std::function<int()>& body, unsigned seconds = 10) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit limit{uint64_t{1} << 30, uint64_t{1} << 30};
    ::setrlimit(RLIMIT_AS, &limit);
    ::alarm(seconds);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

constexpr int kHung = 128 + SIGALRM;

// 0 when `status` failed with `code` and a message containing `needle`.
int refused(const Status& status, StatusCode code, const std::string& needle) {
  if (status.ok()) return 2;
  if (status.code() != code) return 3;
  return status.message().find(needle) != std::string::npos ? 0 : 4;
}

TEST_CASE("file io: a FIFO is refused at once by every reader") {
  ScratchDir scratch;
  const std::string fifo = make_fifo(scratch, "in.fifo");
  CHECK(bounded_child([&] {
          return refused(open_input_file(fifo).status(), StatusCode::kInvalidArgument,
                         "'" + fifo + "' is not a regular file (a FIFO)");
        }) == 0);
  CHECK(bounded_child([&] {
          return refused(MappedFile::open(fifo).status(), StatusCode::kInvalidArgument, "(a FIFO)");
        }) == 0);
  CHECK(bounded_child(
            [&] { return refused(read_npy(fifo).status(), StatusCode::kInvalidArgument, "(a FIFO)"); }) == 0);
  CHECK(bounded_child([&] {
          return refused(read_npy_header(fifo).status(), StatusCode::kInvalidArgument, "(a FIFO)");
        }) == 0);
  CHECK(bounded_child([&] {
          return refused(read_file_limited(fifo, 1 << 20, "limit").status(), StatusCode::kInvalidArgument,
                         "(a FIFO)");
        }) == 0);
  // The harness itself: a reader that blocks is reported as hung, not waited on forever.
  CHECK(bounded_child(
            [&] {
              const int fd = ::open(fifo.c_str(), O_RDONLY);
              return fd >= 0 ? 0 : 1;
            },
            1) == kHung);
}

TEST_CASE("file io: devices and directories are refused without reading") {
  CHECK(bounded_child([] {
          return refused(read_npy("/dev/zero").status(), StatusCode::kInvalidArgument,
                         "'/dev/zero' is not a regular file (a character device)");
        }) == 0);
  CHECK(bounded_child([] {
          return refused(read_npy_header("/dev/zero").status(), StatusCode::kInvalidArgument,
                         "(a character device)");
        }) == 0);
  CHECK(bounded_child([] {
          return refused(MappedFile::open("/dev/zero").status(), StatusCode::kInvalidArgument,
                         "(a character device)");
        }) == 0);
  ScratchDir scratch;
  Result<InputFile> dir = open_input_file(scratch.path.string());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().message() == "'" + scratch.path.string() + "' is not a regular file (a directory)");
  Result<InputFile> missing = open_input_file(scratch / "missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

TEST_CASE("file io: a regular file opens blocking, with its size") {
  ScratchDir scratch;
  write_all(scratch / "a.bin", "hexir!");
  Result<InputFile> file = open_input_file(scratch / "a.bin");
  REQUIRE(file.ok());
  CHECK(file->size == 6);
  CHECK((::fcntl(file->fd.get(), F_GETFL) & O_NONBLOCK) == 0);
  uint8_t bytes[4];
  REQUIRE(read_exact(*file, 2, bytes, scratch / "a.bin").ok());
  CHECK(std::memcmp(bytes, "xir!", 4) == 0);
  Status past = read_exact(*file, 4, bytes, scratch / "a.bin");
  CHECK(past.code() == StatusCode::kDataLoss);
  CHECK(past.message().find("ended after 6 bytes, 8 expected") != std::string::npos);

  Result<std::string> text = read_file_limited(scratch / "a.bin", 6, "text limit");
  REQUIRE(text.ok());
  CHECK(*text == "hexir!");
  Result<std::string> over = read_file_limited(scratch / "a.bin", 5, "text limit");
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
  CHECK(over.status().message().find("more than the text limit of 5") != std::string::npos);
}

// An .npy header declaring f32[dims], followed by `data_bytes` bytes (a
// sparse file when large: nothing is written to disk).
std::string npy_with_data(const ScratchDir& scratch, const std::string& name, const std::string& shape,
                          uint64_t data_bytes) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  const std::string path = scratch / name;
  write_all(path, bytes);
  fs::resize_file(path, bytes.size() + data_bytes);
  return path;
}

TEST_CASE("npy: data is read only after the header is checked, exactly as declared") {
  ScratchDir scratch;
  // 400 GB declared and present (sparse): refused by the limit, never allocated.
  const std::string huge = npy_with_data(scratch, "huge.npy", "100000000000,", 400000000000ull);
  CHECK(bounded_child([&] {
          return refused(read_npy(huge).status(), StatusCode::kResourceExhausted,
                         "more than the .npy data limit of " + std::to_string(kDefaultMaxNpyBytes));
        }) == 0);
  // The header alone reads fine: weights stay on disk.
  Result<NpyHeader> header = read_npy_header(huge);
  REQUIRE_MESSAGE(header.ok(), header.status().to_string());
  CHECK(header->type.dims == std::vector<int64_t>{100000000000});
  // A raised limit is honoured; a lowered one refuses small arrays.
  const std::string small = npy_with_data(scratch, "small.npy", "4,", 16);
  Result<NpyArray> array = read_npy(small, 16);
  REQUIRE_MESSAGE(array.ok(), array.status().to_string());
  CHECK(array->data.size() == 16);
  CHECK(read_npy(small, 15).status().code() == StatusCode::kResourceExhausted);
  // Short and long data are refused before allocation.
  const std::string short_data = npy_with_data(scratch, "short.npy", "4,", 12);
  CHECK(read_npy(short_data).status().message().find("truncated .npy data") != std::string::npos);
  const std::string long_data = npy_with_data(scratch, "long.npy", "4,", 20);
  CHECK(read_npy(long_data).status().message().find("4 unexpected bytes") != std::string::npos);
}

TEST_CASE("output file: written beside the target and renamed over it") {
  ScratchDir scratch;
  const std::string target = scratch / "out.bin";
  const std::string data = "new bytes";
  REQUIRE(write_output_file(target, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}).ok());
  CHECK(read_all(target) == data);
  // Replaces an existing file; leaves no temporary behind.
  REQUIRE(write_output_file(target, {reinterpret_cast<const uint8_t*>("v2"), 2}).ok());
  CHECK(read_all(target) == "v2");
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(scratch.path))
    entries += entry.path().filename() != "" ? 1 : 0;
  CHECK(entries == 1);
  // Not committed: the target is untouched and the temporary removed.
  {
    Result<OutputFile> out = OutputFile::create(target);
    REQUIRE(out.ok());
    REQUIRE(out->write(std::string_view("abandoned")).ok());
    CHECK(fs::exists(out->temp_path()));
    CHECK(fs::path(out->temp_path()).parent_path() == scratch.path);
  }
  CHECK(read_all(target) == "v2");
  entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(scratch.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("output file: a planted symlink is never followed") {
  ScratchDir scratch;
  const std::string victim = scratch / "victim.txt";
  write_all(victim, "precious");
  const std::string target = scratch / "out.hxe";
  // The name the old writer used for its temporary, and a link as the target's temporary.
  fs::create_symlink(victim, target + ".tmp");
  REQUIRE(write_output_file(target, {reinterpret_cast<const uint8_t*>("compiled"), 8}).ok());
  CHECK(read_all(victim) == "precious");
  CHECK(read_all(target) == "compiled");
  CHECK(fs::is_symlink(target + ".tmp"));
}

TEST_CASE("output file: a FIFO or a device is written through, never replaced") {
  ScratchDir scratch;
  const std::string fifo = make_fifo(scratch, "out.fifo");
  std::string received;
  std::thread reader([&] { received = read_all(fifo); });
  Status written = write_output_file(fifo, {reinterpret_cast<const uint8_t*>("streamed"), 8});
  reader.join();
  REQUIRE_MESSAGE(written.ok(), written.to_string());
  CHECK(received == "streamed");
  struct stat st;
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  // /dev/null stays the device (the temporary lives in the temp directory, not /dev).
  REQUIRE(::stat("/dev/null", &st) == 0);
  const dev_t rdev = st.st_rdev;
  REQUIRE(write_output_file("/dev/null", {reinterpret_cast<const uint8_t*>("x"), 1}).ok());
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  CHECK(st.st_rdev == rdev);
  // A directory is refused; a missing directory is named.
  Status dir = write_output_file(scratch.path.string(), {reinterpret_cast<const uint8_t*>("x"), 1});
  CHECK(dir.code() == StatusCode::kInvalidArgument);
  CHECK(dir.message().find("is a directory") != std::string::npos);
  Status missing = write_output_file(scratch / "no/such/dir/out", {reinterpret_cast<const uint8_t*>("x"), 1});
  CHECK(missing.code() == StatusCode::kNotFound);
  CHECK(missing.message().find(scratch / "no/such/dir/out") != std::string::npos);
}

TEST_CASE("write_npy goes through the output file") {
  ScratchDir scratch;
  const std::string victim = scratch / "victim.txt";
  write_all(victim, "precious");
  const std::string target = scratch / "a.npy";
  fs::create_symlink(victim, target + ".tmp");
  const float values[2] = {1, 2};
  REQUIRE(
      write_npy(target, TensorType{DType::kF32, {2}}, {reinterpret_cast<const uint8_t*>(values), 8}).ok());
  CHECK(read_all(victim) == "precious");
  Result<NpyArray> back = read_npy(target);
  REQUIRE(back.ok());
  CHECK(back->data.size() == 8);
}

}  // namespace
}  // namespace hexir
