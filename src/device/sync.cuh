// Event primitives of the persistent kernel and the device error record. Compiled once, into the device
// library: the task loop (task_loop.cuh) inlines the weft_dev:: versions; the extern "C" ones are the
// library's ABI (weft_device.h) for other kernels. NVRTC never parses <cuda/atomic> (~0.6 s per compile).
//
// Memory ordering: a producer block writes its tile, then weft_event_notify runs __syncthreads (every
// thread's writes happen before thread 0's next step) and thread 0 adds 1 with release semantics at GPU
// scope. A consumer's thread 0 spins with acquire loads at GPU scope until the counter reaches its target,
// then __syncthreads: by cumulativity every thread of the consumer block sees the producer's data. Loads of
// that data must be ordinary (coherent) loads, never ld.global.nc / __ldg.
#ifndef WEFT_DEVICE_SYNC_CUH
#define WEFT_DEVICE_SYNC_CUH

#include <cuda/atomic>

#include "config.cuh"

typedef cuda::atomic_ref<unsigned int, cuda::thread_scope_device> weft_device_atomic_u32;

// Records the first device error: only the thread whose compare-and-swap turns *env->error from 0 into `code`
// writes error_info ([0] the running task, [1..3] the op's details), so the info always matches the code.
namespace weft_dev {

// Barriers over the threads that run the ops (WEFT_BLOCK_THREADS): the whole block, or all but the weight loader's
// warp (WEFT_DEV_LOADER, weight_loader.cuh), which runs ahead of them and never joins their barriers.
__device__ __forceinline__ void block_sync() {
#if WEFT_DEV_LOADER
  asm volatile("bar.sync 1, %0;" ::"n"(WEFT_BLOCK_THREADS) : "memory");
#else
  __syncthreads();
#endif
}
__device__ __forceinline__ int block_sync_or(int p) {
#if WEFT_DEV_LOADER
  int r;
  asm volatile(
      "{ .reg .pred p, q; setp.ne.s32 p, %1, 0; bar.red.or.pred q, 1, %2, p; selp.s32 %0, 1, 0, q; }"
      : "=r"(r)
      : "r"(p), "n"(WEFT_BLOCK_THREADS)
      : "memory");
  return r;
#else
  return __syncthreads_or(p);
#endif
}
// The stride of a loop over the op threads (blockDim.x where they are the whole block: the code as it was).
__device__ __forceinline__ unsigned int op_threads() {
#if WEFT_DEV_LOADER
  return WEFT_BLOCK_THREADS;
#else
  return blockDim.x;
#endif
}

__device__ __forceinline__ void record_error(const weft_env* env, unsigned int code, unsigned int info1,
                                             unsigned int info2, unsigned int info3) {
  if (env == nullptr || env->error == nullptr) return;
  weft_device_atomic_u32 err(*env->error);
  unsigned int expected = WEFT_DEV_OK;
  if (!err.compare_exchange_strong(expected, code, cuda::memory_order_relaxed)) return;
  if (env->error_info != nullptr) {
    env->error_info[0] = static_cast<unsigned int>(env->task_index);
    env->error_info[1] = info1;
    env->error_info[2] = info2;
    env->error_info[3] = info3;
  }
}

// True once any device error has been recorded (relaxed: only used to stop waiting early).
__device__ __forceinline__ bool error_raised(const weft_env* env) {
  if (env == nullptr || env->error == nullptr) return false;
  weft_device_atomic_u32 err(*env->error);
  return err.load(cuda::memory_order_relaxed) != WEFT_DEV_OK;
}

// Spins (one thread) until *counter >= target, comparing as a signed difference so that monotonic counters may
// wrap around 2^32. Returns true when the event is reached; false when the wait ran longer than timeout_cycles
// (clock64 cycles; <= 0 waits forever), which records WEFT_DEV_ERR_DEADLOCK (error_info: [1]=event, [2]=target,
// [3]=the last counter value seen), or when another block has already recorded an error (then nothing is
// recorded: the first error is the one to report).
__device__ __forceinline__ bool weft_poll_event(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                                const weft_env* env, int event) {
  weft_device_atomic_u32 c(*counter);
  unsigned int seen = c.load(cuda::memory_order_acquire);
  if (static_cast<int>(seen - target) >= 0) return true;
  const long long start = clock64();
  unsigned int sleep_ns = 16;
  const unsigned int cap = env && (env->tuning & WEFT_TUNE_SLOW_POLL) ? 2048u
                           : env && (env->tuning & WEFT_TUNE_FAST_POLL) ? 32u : 256u;
  for (unsigned int spin = 1;; ++spin) {
    // Backing off leaves the memory system to the producers; a cap of 256 ns keeps the wake-up latency
    // small next to a decode task (a few microseconds).
    __nanosleep(sleep_ns);
    if (sleep_ns < cap) sleep_ns *= 2u;
    seen = c.load(cuda::memory_order_acquire);
    if (static_cast<int>(seen - target) >= 0) return true;
    if (timeout_cycles > 0 && clock64() - start > timeout_cycles) {
      record_error(env, WEFT_DEV_ERR_DEADLOCK, static_cast<unsigned int>(event), target, seen);
      return false;
    }
    if ((spin & 63u) == 0u && error_raised(env)) return false;
  }
}

// Called by every thread of the block: thread 0 waits for *counter >= target (see weft_poll_event). On false
// the caller must not run the task; it should stop.
__device__ __forceinline__ bool event_wait(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                           const weft_env* env, int event) {
  const int failed = threadIdx.x == 0 && !weft_poll_event(counter, target, timeout_cycles, env, event);
  // Also the barrier that hands thread 0's acquire on to the whole block.
  return block_sync_or(failed) == 0;
}

// Called by every thread of the block: waits for all `count` waits of a task at once, thread i polling wait i,
// so that a task with several inputs pays one round trip to L2, not one per input. `mine` is waits[threadIdx.x]
// when threadIdx.x < count, loaded by the caller ahead of time so that the poll needs no table read. Same result
// as weft_event_wait on each in turn.
__device__ __forceinline__ bool wait_all(const weft_wait& mine, const weft_wait* waits, int count, unsigned int* events,
                                         unsigned int epoch, long long timeout_cycles, const weft_env* env) {
  int failed = 0;
  for (int w = threadIdx.x; w < count; w += op_threads()) {
    const weft_wait wt = w == static_cast<int>(threadIdx.x) ? mine : waits[w];
    if (!weft_poll_event(&events[wt.event], wt.count * epoch, timeout_cycles, env, wt.event)) failed = 1;
  }
  // The barrier hands each polling thread's acquire on to the whole block.
  return block_sync_or(failed) == 0;
}

// The staged task whose arguments an op runs on: the task loop hands every op &weft_task::args.
__device__ __forceinline__ const weft_task* task_of(const weft_task_args* a) {
  return reinterpret_cast<const weft_task*>(reinterpret_cast<const char*>(a) - offsetof(weft_task, args));
}
// Whether the op makes its task's waits itself (its table's wait_count < 0; task_abi.h).
__device__ __forceinline__ bool waits_in_op(const weft_task_args* a) { return task_of(a)->wait_count < 0; }

// Called by every thread of the block, by an op whose task leaves its waits to it (weft_task::wait_count < 0),
// before it reads or writes anything they guard. A task whose loop waited already returns true at once. False as
// wait_all: the op stops (an error is recorded; the loop still notifies, and the launch reports the error).
__device__ __forceinline__ bool wait_in_op(const weft_task_args* a, const weft_env* env) {
  const weft_task* t = task_of(a);
  const int count = -t->wait_count;
  if (count <= 0) return true;
  const weft_queues& q = *env->queues;
  const weft_wait* waits = q.waits + t->wait_begin;
  weft_wait mine{0, 0u};
  if (static_cast<int>(threadIdx.x) < count) mine = waits[threadIdx.x];
  return wait_all(mine, waits, count, q.events, env->epoch, q.timeout_cycles, env);
}

// Called by every thread of the block after it wrote its part of the task's output.
__device__ __forceinline__ void event_notify(unsigned int* counter) {
  block_sync();
  if (threadIdx.x == 0) {
    weft_device_atomic_u32 c(*counter);
    c.fetch_add(1u, cuda::memory_order_release);
  }
}

// Called by every thread of the block after it wrote the task's output: adds 1 to each of the task's `count`
// event counters, thread i releasing counter i (the barrier first orders every thread's writes before them).
// `mine` is notifies[threadIdx.x] when threadIdx.x < count, loaded by the caller ahead of time.
__device__ __forceinline__ void notify_all(unsigned int* events, int mine, const int* notifies, int count) {
  block_sync();
  for (int i = threadIdx.x; i < count; i += op_threads()) {
    weft_device_atomic_u32 c(events[i == static_cast<int>(threadIdx.x) ? mine : notifies[i]]);
    c.fetch_add(1u, cuda::memory_order_release);
  }
}

// Called by every thread of the block when one part of a split tile has written its results and they are ordered
// before thread 0 (a barrier, or thread 0 wrote them itself): thread 0 adds 1 to the tile's arrival counter (acq_rel:
// it releases this part's results and acquires the other parts'); true, in every thread, for the block whose add
// completed a multiple of `parts` (a power of two: the test survives the counter's wrap), which then reads the other
// parts' results from L2. No __shared__ flag: the barrier hands thread 0's acquire and answer on to the block (static
// shared memory moves the dynamic block's base, and the loop's speed with it: docs/perf.md round 17).
__device__ __forceinline__ bool arrive_last_of(unsigned int* counter, unsigned int parts) {
  int last = 0;
  if (threadIdx.x == 0) {
    weft_device_atomic_u32 arrived(*counter);
    last = ((arrived.fetch_add(1u, cuda::memory_order_acq_rel) + 1u) & (parts - 1u)) == 0u;
  }
  return block_sync_or(last) != 0;
}

}  // namespace weft_dev

extern "C" __device__ void weft_dev_record_error(const weft_env* env, unsigned int code, unsigned int info1,
                                                 unsigned int info2, unsigned int info3) {
  weft_dev::record_error(env, code, info1, info2, info3);
}
extern "C" __device__ bool weft_dev_error_raised(const weft_env* env) { return weft_dev::error_raised(env); }
extern "C" __device__ bool weft_event_wait(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                           const weft_env* env, int event) {
  return weft_dev::event_wait(counter, target, timeout_cycles, env, event);
}
extern "C" __device__ void weft_event_notify(unsigned int* counter) { weft_dev::event_notify(counter); }

#endif  // WEFT_DEVICE_SYNC_CUH
