#include "thread_pool.h"

#include <sched.h>

namespace hexir::hal::cpu {
namespace {

// How long an idle worker polls before it sleeps: long enough to cover the
// gap between two kernels of one invoke, short enough not to burn a core
// between invokes.
constexpr int kSpinRounds = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) threads = 1;
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::work() {
  for (;;) {
    const int64_t t = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (t >= tasks_) return;
    fn_(context_, t);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinRounds; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    work();
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(int64_t tasks, TaskFn fn, void* context) {
  if (workers_.empty() || tasks <= 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(context, t);
    return;
  }
  {
    // Under the lock so a worker about to sleep cannot miss the new generation.
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    context_ = context;
    tasks_ = tasks;
    next_task_.store(0, std::memory_order_relaxed);
    busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work();
  // Every worker finishes its last task (or finds none) before the job's
  // state may change again.
  while (busy_workers_.load(std::memory_order_acquire) != 0) cpu_relax();
}

}  // namespace hexir::hal::cpu
