#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace hexir::hal::cpu {
namespace {

// How long an idle worker polls before it sleeps: long enough to cover the
// gap between two kernels of one invoke, short enough not to burn a core
// between invokes.
constexpr int kSpinRounds = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Faults in the top of the calling thread's stack below this frame: the
// kernels keep buffers of up to 96 KiB there (patch rows, pool planes,
// depthwise rows), which the first invoke would otherwise fault in page by
// page (2-5 us a page on a shadow-paged guest; shufflenet's first invoke had
// ~35 such faults). A thread's stack stays resident once touched. At most
// half of what is left below this frame: an embedding application's thread
// may have a small stack (musl's default is 128 KiB).
constexpr size_t kStackFaultInBytes = 256 * 1024;
size_t stack_left() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* low = nullptr;
  size_t size = 0;
  const bool known = pthread_attr_getstack(&attr, &low, &size) == 0;
  pthread_attr_destroy(&attr);
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), bottom = reinterpret_cast<uintptr_t>(low);
  return known && here > bottom ? here - bottom : 0;
}
[[gnu::noinline]] void fault_in_stack() {
  const size_t bytes = std::min(kStackFaultInBytes, stack_left() / 2);
  if (bytes == 0) return;
  volatile unsigned char* frame = static_cast<volatile unsigned char*>(__builtin_alloca(bytes));
  for (size_t i = 0; i < bytes; i += 4096) frame[i] = 0;
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

ThreadPool::ThreadPool(int threads, float* scratch) : scratch_(scratch) {
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(threads));
  workers_.reserve(static_cast<size_t>(threads - 1));
  // What the first invoke would fault in otherwise (the pool is created with
  // its context, by the thread that usually invokes it): the scratch, which
  // the GEMM's packed A and the separable convolutions' rows use, and the
  // caller's stack (each worker faults in its own when it starts).
  if (scratch_ != nullptr)
    std::memset(scratch_, 0, static_cast<size_t>(threads) * kScratchFloatsPerParticipant * sizeof(float));
  fault_in_stack();
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(int threads, float* scratch, int startable_workers) {
  threads = std::max(threads, 1);
  std::unique_ptr<ThreadPool> pool(new ThreadPool(threads, scratch));
  for (int i = 1; i < threads; ++i) {
    const std::string refused = pool->start_worker(i, startable_workers);
    if (refused.empty()) continue;
    // Freeing the pool joins the workers started so far.
    return resource_exhausted("cpu thread pool: started " + std::to_string(i - 1) + " of the " +
                              std::to_string(threads - 1) + " worker threads asked for (threads=" +
                              std::to_string(threads) + ", the calling thread included): " + refused);
  }
  return pool;
}

std::string ThreadPool::start_worker(int participant, int startable_workers) {
  if (startable_workers >= 0 && participant > startable_workers) return std::strerror(EAGAIN);
  try {
    workers_.emplace_back([this, participant] { worker_loop(participant); });
  } catch (const std::system_error& e) {  // EAGAIN: a thread or memory limit
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  }
  return {};
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

void ThreadPool::work(ParticipantTaskFn fn, void* context, int participant) {
  int64_t done = 0;  // published once, when this participant finds no task left
  const int participants = size();
  for (int q = 0; q < participants; ++q) {  // its own share, then the others' in turn
    Share& share = shares_[static_cast<size_t>((participant + q) % participants)];
    for (;;) {
      const int64_t t = share.next.fetch_add(1, std::memory_order_relaxed);
      if (t >= share.end) break;
      fn(context, t, participant);
      ++done;
    }
  }
  if (done > 0) done_tasks_.fetch_add(done, std::memory_order_acq_rel);
}

void ThreadPool::worker_loop(int participant) {
  fault_in_stack();
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinRounds; ++spin) {
      cpu_relax();
      now = generation_.load(std::memory_order_acquire);
    }
    ParticipantTaskFn fn;
    void* context;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (now == seen) wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      // A worker that wakes after the caller closed the job stays out of it:
      // the caller never waits for a thread that was asleep or descheduled.
      if (!open_) continue;
      joined_workers_.fetch_add(1, std::memory_order_relaxed);
      fn = fn_, context = context_;
    }
    work(fn, context, participant);
    joined_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

// Spins briefly, then yields: on a loaded machine the thread being waited
// for may need this core.
template <typename Done>
void wait_until(Done done) {
  for (int spin = 0; !done(); ++spin) {
    if (spin < 2000)
      cpu_relax();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::run(int64_t tasks, ParticipantTaskFn fn, void* context) {
  if (workers_.empty() || tasks <= 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(context, t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = fn;
    context_ = context;
    const int participants = size();
    for (int p = 0; p < participants; ++p) {
      shares_[static_cast<size_t>(p)].next.store(tasks * p / participants, std::memory_order_relaxed);
      shares_[static_cast<size_t>(p)].end = tasks * (p + 1) / participants;
    }
    done_tasks_.store(0, std::memory_order_relaxed);
    open_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  work(fn, context, 0);
  wait_until([&] { return done_tasks_.load(std::memory_order_acquire) == tasks; });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  // Joined workers only have an out-of-range task index left to see.
  wait_until([&] { return joined_workers_.load(std::memory_order_acquire) == 0; });
}

}  // namespace hexir::hal::cpu
