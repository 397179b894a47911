// The CPU backend's thread pool: one per queue (so per VM context), started
// when the queue is created (at context creation, never on invoke) and
// joined when it is destroyed. A kernel splits its work into tasks; the
// calling thread runs tasks too. run() never allocates and never throws.
//
// Which thread runs which task varies; kernels make each task own its
// outputs and sum in a fixed order, so results do not depend on the thread
// count or on the schedule.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "hexir/hal/device.h"

namespace hexir::hal::cpu {

// Floats of scratch each participant of a pool may have (256 KiB): the
// GEMM's A block packed once per K block (up to 192 rows x 256 deep), which
// would otherwise be packed again for every chunk of B's strips; a
// separable_conv2d's depthwise rows (mnasnet's 1152 channels of 7 x 7 fit
// whole: one GEMM of 49 columns, not three of 21, 14 and 14; mnasnet1_0
// 12.3 -> 10.9 ms at 1 thread).
inline constexpr int64_t kScratchFloatsPerParticipant = 256 * 256;

class ThreadPool {
 public:
  // A pool of `threads` participants in all, the caller included (1: no
  // worker threads). `scratch`: kScratchFloatsPerParticipant floats per
  // participant, 64-byte aligned, owned by the caller and outliving the pool;
  // null: no scratch. The pool zeroes it (faults it in) when it is created. kResourceExhausted, naming how many workers were asked
  // for and how many started, when the system refuses a worker thread; the
  // ones started are joined before it returns.
  // `startable_workers` is a fault injection for tests: creating worker
  // number startable_workers + 1 fails as the system's refusal would (-1:
  // only the system limits them).
  static Result<std::unique_ptr<ThreadPool>> create(int threads, float* scratch = nullptr,
                                                    int startable_workers = -1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Participant p's scratch (p in [0, size()), 0 is the caller): no other
  // participant touches it while a task of p runs. Null when the pool has none.
  float* scratch(int participant) const {
    return scratch_ ? scratch_ + participant * kScratchFloatsPerParticipant : nullptr;
  }

  using TaskFn = void (*)(void* context, int64_t task);
  // A task told which participant runs it (to use that one's scratch).
  using ParticipantTaskFn = void (*)(void* context, int64_t task, int participant);
  // Runs fn(context, t, participant) for every t in [0, tasks) and returns
  // when all have finished. Participant p first takes the tasks of its own
  // share, [p * tasks / size(), (p + 1) * tasks / size()), in order, then
  // helps with the others' shares: kernels that number their tasks by rows
  // (every one of them, the same way) keep a thread on the rows it wrote in
  // the kernel before. Not reentrant: one run at a time (a queue is used by
  // one thread).
  void run(int64_t tasks, ParticipantTaskFn fn, void* context);

 private:
  ThreadPool(int threads, float* scratch);
  // Starts worker `participant`; the system's reason when it cannot.
  std::string start_worker(int participant, int startable_workers);
  void work(ParticipantTaskFn fn, void* context, int participant);
  void worker_loop(int participant);

  std::vector<std::thread> workers_;
  std::mutex mutex_;  // guards the job fields and open_/stop_; workers join a job under it
  std::condition_variable wake_;
  // A participant's share of the open job: its next task and its end.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  // Each counter on a cache line of its own: the line an idle worker polls
  // (generation_) and the ones tasks are taken from (shares_) do not move
  // between the cores when the other counters change.
  std::unique_ptr<Share[]> shares_;  // size() of them
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int64_t> done_tasks_{0};  // added to once per participant and job
  alignas(64) std::atomic<int> joined_workers_{0};  // workers inside the open job
  alignas(64) float* scratch_ = nullptr;
  ParticipantTaskFn fn_ = nullptr;
  void* context_ = nullptr;
  bool open_ = false;  // a job may still be joined
  bool stop_ = false;
};

// The pool a kernel may split its work over; null when the kernel runs
// without one (a direct call with an empty KernelContext): run serially then.
inline ThreadPool* pool_of(const KernelContext& context) { return static_cast<ThreadPool*>(context.backend); }

// Runs fn over [0, tasks) on the context's pool, or serially (as participant
// 0, the caller) without one.
inline void parallel_for_participants(const KernelContext& context, int64_t tasks,
                                      ThreadPool::ParticipantTaskFn fn, void* arg) {
  ThreadPool* pool = pool_of(context);
  if (pool == nullptr || pool->size() == 1 || tasks <= 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(arg, t, 0);
    return;
  }
  pool->run(tasks, fn, arg);
}

// The same for tasks that need not know who runs them.
inline void parallel_for(const KernelContext& context, int64_t tasks, ThreadPool::TaskFn fn, void* arg) {
  struct Job {
    ThreadPool::TaskFn fn;
    void* arg;
  } job{fn, arg};
  parallel_for_participants(
      context, tasks, [](void* j, int64_t t, int) { static_cast<Job*>(j)->fn(static_cast<Job*>(j)->arg, t); },
      &job);
}

// Runs f(begin, end) over [0, n) cut into ranges of at least `min_range`
// (about 4 per thread), on the context's pool; serially when the work is
// small or there is no pool. For kernels whose elements are independent, so
// the split never changes a result. No allocation: f stays on the caller's stack.
template <typename F>
inline void parallel_ranges(const KernelContext& context, int64_t n, int64_t min_range, F&& f) {
  ThreadPool* pool = pool_of(context);
  const int threads = pool ? pool->size() : 1;
  const int64_t ranges = std::min<int64_t>(4 * threads, min_range > 0 ? n / min_range : n);
  if (threads == 1 || ranges <= 1) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  struct Job {
    std::remove_reference_t<F>* f;
    int64_t n, size;
  } job{&f, n, (n + ranges - 1) / ranges};
  pool->run(
      (n + job.size - 1) / job.size,
      [](void* context, int64_t t, int) {
        const Job& j = *static_cast<const Job*>(context);
        const int64_t begin = t * j.size;
        (*j.f)(begin, std::min(j.n, begin + j.size));
      },
      &job);
}

// The cores this process may run on (its affinity mask), at least 1.
int available_cores();

}  // namespace hexir::hal::cpu
