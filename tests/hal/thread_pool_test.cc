// The cpu backend's thread pool (hal/cpu/thread_pool.h): every task of a job
// runs once, and each participant starts on its own share of the task
// numbers (the contiguous run [p * tasks / size(), (p + 1) * tasks / size())),
// which is what keeps a thread on the rows it wrote in the kernel before.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "doctest/doctest.h"
#include "thread_pool.h"

namespace hexir::hal::cpu {
namespace {

struct Record {
  std::vector<std::atomic<int>> runs;      // per task: how many times it ran
  std::atomic<int64_t> first[2];           // per participant: its first task, or -1
  explicit Record(int64_t tasks) : runs(static_cast<size_t>(tasks)) {}
};

TEST_CASE("thread pool: every task once; each participant's first task is in its own share") {
  ThreadPool pool(2);
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

}  // namespace
}  // namespace hexir::hal::cpu
