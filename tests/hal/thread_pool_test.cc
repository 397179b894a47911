// The cpu backend's thread pool (hal/cpu/thread_pool.h): every task of a job
// runs once, and each participant starts on its own share of the task
// numbers (the contiguous run [p * tasks / size(), (p + 1) * tasks / size())),
// which is what keeps a thread on the rows it wrote in the kernel before.
#include "thread_pool.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "doctest/doctest.h"

namespace hexir::hal::cpu {
namespace {

struct Record {
  std::vector<std::atomic<int>> runs;      // per task: how many times it ran
  std::atomic<int64_t> first[2];           // per participant: its first task, or -1
  explicit Record(int64_t tasks) : runs(static_cast<size_t>(tasks)) {}
};

TEST_CASE("thread pool: every task once; each participant's first task is in its own share") {
  auto created = ThreadPool::create(2);
  REQUIRE(created.ok());
  ThreadPool& pool = **created;
  REQUIRE(pool.size() == 2);
  for (int64_t tasks : {2, 3, 17, 64}) {
    for (int job = 0; job < 50; ++job) {
      Record record(tasks);
      record.first[0] = record.first[1] = -1;
      pool.run(
          tasks,
          [](void* context, int64_t t, int participant) {
            Record& r = *static_cast<Record*>(context);
            int64_t none = -1;
            r.first[participant].compare_exchange_strong(none, t);
            r.runs[static_cast<size_t>(t)].fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(20));
          },
          &record);
      INFO(tasks << " tasks, job " << job);
      for (int64_t t = 0; t < tasks; ++t) CHECK(record.runs[static_cast<size_t>(t)].load() == 1);
      // A participant only leaves its share once that share is used up, and
      // the caller's share is used up only after its first task started.
      const int64_t half = tasks / 2;
      const int64_t first0 = record.first[0].load(), first1 = record.first[1].load();
      if (first0 >= 0) CHECK(first0 < half);
      if (first1 >= 0) CHECK(first1 >= half);
    }
  }
}

// The threads this process has (/proc/self/status).
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// The same once it reaches `expected`, or after a bounded number of looks: a
// joined thread may linger in the kernel's list for a moment after join.
int thread_count_settled(int expected) {
  int threads = thread_count();
  for (int look = 0; look < 100000 && threads != expected; ++look) {
    std::this_thread::yield();
    threads = thread_count();
  }
  return threads;
}

// The count once it has stayed the same for 20 looks 1 ms apart (at most
// about 2 s): threads joined by an earlier test may not have left yet. Under
// qemu-aarch64 the count is the emulator's, whose host thread for a joined
// guest thread leaves a few milliseconds after the join.
int thread_count_steady() {
  int threads = thread_count();
  for (int look = 0, same = 0; look < 2000 && same < 20; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const int now = thread_count();
    same = now == threads ? same + 1 : 0;
    threads = now;
  }
  return threads;
}

TEST_CASE("thread pool: the scratch is faulted in when the pool is created, not by the first invoke's kernels") {
  const size_t bytes = 2 * kScratchFloatsPerParticipant * sizeof(float);
  void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((bytes + page - 1) / page);
  auto resident_pages = [&] {
    REQUIRE(mincore(mapped, bytes, resident.data()) == 0);
    size_t n = 0;
    for (unsigned char r : resident) n += r & 1;
    return n;
  };
  CHECK(resident_pages() == 0);  // a fresh anonymous mapping
  {
    auto created = ThreadPool::create(2, static_cast<float*>(mapped));
    REQUIRE(created.ok());
    CHECK(resident_pages() == resident.size());
  }
  munmap(mapped, bytes);
}

TEST_CASE("thread pool: created on a thread with a small stack (64 KiB), it faults in only what that stack has") {
  // 64 KiB, or the system's least stack where that is more (128 KiB on
  // aarch64's glibc, which allows 64 KiB pages).
  const long least = sysconf(_SC_THREAD_STACK_MIN);
  const size_t stack = std::max<size_t>(64 * 1024, least > 0 ? static_cast<size_t>(least) : 0);
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, stack) == 0);
  struct Outcome {
    bool created = false;
    std::atomic<int> ran{0};
  } outcome;
  pthread_t thread;
  REQUIRE(pthread_create(
              &thread, &attr,
              [](void* arg) -> void* {
                Outcome& o = *static_cast<Outcome*>(arg);
                auto created = ThreadPool::create(2);
                o.created = created.ok();
                if (created.ok())
                  (*created)->run(
                      8, [](void* c, int64_t, int) { static_cast<Outcome*>(c)->ran.fetch_add(1); }, &o);
                return nullptr;
              },
              &outcome) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  CHECK(outcome.created);
  CHECK(outcome.ran == 8);
}

TEST_CASE("thread pool: a worker the system refuses is a status; the started ones are joined") {
  const int before = thread_count_steady();
  for (int startable : {0, 1, 5}) {
    INFO("workers that may start: " << startable);
    auto pool = ThreadPool::create(8, nullptr, startable);
    REQUIRE_FALSE(pool.ok());
    CHECK(pool.status().code() == StatusCode::kResourceExhausted);
    CHECK(pool.status().message() == "cpu thread pool: started " + std::to_string(startable) +
                                         " of the 7 worker threads asked for (threads=8, the calling thread "
                                         "included): " +
                                         std::strerror(EAGAIN));
    CHECK(thread_count_settled(before) == before);  // joined, none left running
  }
  // As many as may start: the pool works.
  auto pool = ThreadPool::create(8, nullptr, 7);
  REQUIRE(pool.ok());
  CHECK((*pool)->size() == 8);
  CHECK(thread_count_settled(before + 7) == before + 7);
  std::atomic<int64_t> sum{0};
  (*pool)->run(
      100, [](void* context, int64_t t, int) { static_cast<std::atomic<int64_t>*>(context)->fetch_add(t); },
      &sum);
  CHECK(sum.load() == 4950);
}

// Many short jobs back to back, as an invoke's kernels run: each job rewrites
// a plain (non-atomic) array in ranges, one per task, from what the previous
// job's participants wrote, so a result published without the pool's
// release/acquire pairs (a task's writes before its done count, the caller's
// before it opens a job) shows as a wrong value here (and to TSan). Pauses
// between some jobs let the workers fall asleep on the condition variable, so
// both wake-ups (spinning and sleeping) are taken. Runs on aarch64 under
// qemu-aarch64 too (scripts/test.sh), where a schedule differs from x86's.
TEST_CASE("thread pool stress: short jobs back to back hand their results over at 2, 3 and 4 threads") {
  constexpr int64_t kElements = 128;
  constexpr int kJobs = 1500;
  for (int threads : {2, 3, 4}) {
    INFO(threads << " threads");
    auto created = ThreadPool::create(threads);
    REQUIRE(created.ok());
    ThreadPool& pool = **created;
    struct Job {
      uint64_t values[kElements] = {};  // unsigned: wraps, never overflows
      std::atomic<int> runs[kElements] = {};
      int64_t tasks = 0, job = 0;
    } state;
    uint64_t expected[kElements] = {};
    int wrong = 0, runs_wrong = 0;
    for (int job = 0; job < kJobs; ++job) {
      state.tasks = 1 + (job * 7) % kElements;  // 1 (the caller alone) to 128, one element per task at most
      state.job = job;
      pool.run(
          state.tasks,
          [](void* context, int64_t t, int) {
            Job& s = *static_cast<Job*>(context);
            s.runs[t].fetch_add(1, std::memory_order_relaxed);
            // Reads what another participant may have written in the last job.
            for (int64_t i = t * kElements / s.tasks; i < (t + 1) * kElements / s.tasks; ++i)
              s.values[i] = s.values[i] * 3 + static_cast<uint64_t>(i + s.job);
          },
          &state);
      for (int64_t i = 0; i < kElements; ++i) {
        expected[i] = expected[i] * 3 + static_cast<uint64_t>(i + job);
        wrong += state.values[i] != expected[i];
      }
      for (int64_t t = 0; t < state.tasks; ++t) runs_wrong += state.runs[t].exchange(0) != 1;
      if (job % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK(wrong == 0);
    CHECK(runs_wrong == 0);
  }
}

// Pools started and joined in a loop, each running one job: start-up and
// shutdown never hang or lose a task (the first thread a process starts is
// where a mismatched arm64 loader and libc hung: docs/aarch64.md).
TEST_CASE("thread pool stress: pools created, used once and destroyed in a loop") {
  for (int round = 0; round < 40; ++round) {
    const int threads = 2 + round % 3;
    auto created = ThreadPool::create(threads);
    REQUIRE(created.ok());
    std::atomic<int64_t> sum{0};
    (*created)->run(
        64,
        [](void* context, int64_t t, int) { static_cast<std::atomic<int64_t>*>(context)->fetch_add(t + 1); },
        &sum);
    CHECK(sum.load() == 64 * 65 / 2);
  }
}

}  // namespace
}  // namespace hexir::hal::cpu
