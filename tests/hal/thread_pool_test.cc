// The cpu backend's thread pool (hal/cpu/thread_pool.h): every task of a job
// runs once, and each participant starts on its own share of the task
// numbers (the contiguous run [p * tasks / size(), (p + 1) * tasks / size())),
// which is what keeps a thread on the rows it wrote in the kernel before.
#include "thread_pool.h"

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

TEST_CASE("thread pool: a worker the system refuses is a status; the started ones are joined") {
  const int before = thread_count();
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

}  // namespace
}  // namespace hexir::hal::cpu
