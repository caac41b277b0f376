// Event primitives of the persistent kernel and the device error record. Compiled once, into the device
// library (device_library.cu is the only file that includes this one): the generated kernel only sees their
// declarations in weft_device.h, so it never parses <cuda/atomic>, which costs NVRTC ~0.6 s per compile.
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
extern "C" __device__ void weft_dev_record_error(const weft_env* env, unsigned int code, unsigned int info1,
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
extern "C" __device__ bool weft_dev_error_raised(const weft_env* env) {
  if (env == nullptr || env->error == nullptr) return false;
  weft_device_atomic_u32 err(*env->error);
  return err.load(cuda::memory_order_relaxed) != WEFT_DEV_OK;
}

// Called by every thread of the block. Waits until *counter >= target, comparing as a signed difference so
// that monotonic counters may wrap around 2^32. Returns true when the event is reached; false when the wait
// ran longer than timeout_cycles (clock64 cycles; <= 0 waits forever), which records WEFT_DEV_ERR_DEADLOCK
// (error_info: [1]=event, [2]=target, [3]=the last counter value seen), or when another block has already
// recorded an error (then nothing is recorded: the first error is the one to report). On false the caller
// must not run the task; it should stop.
extern "C" __device__ bool weft_event_wait(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                           const weft_env* env, int event) {
  int failed = 0;
  if (threadIdx.x == 0) {
    weft_device_atomic_u32 c(*counter);
    unsigned int seen = c.load(cuda::memory_order_acquire);
    if (static_cast<int>(seen - target) < 0) {
      const long long start = clock64();
      unsigned int sleep_ns = 32;
      for (unsigned int spin = 1;; ++spin) {
        // Backing off leaves the memory system to the producers; 1 us keeps the wake-up latency small.
        __nanosleep(sleep_ns);
        if (sleep_ns < 1024u) sleep_ns *= 2u;
        seen = c.load(cuda::memory_order_acquire);
        if (static_cast<int>(seen - target) >= 0) break;
        if (timeout_cycles > 0 && clock64() - start > timeout_cycles) {
          weft_dev_record_error(env, WEFT_DEV_ERR_DEADLOCK, static_cast<unsigned int>(event), target, seen);
          failed = 1;
          break;
        }
        if ((spin & 63u) == 0u && weft_dev_error_raised(env)) {
          failed = 1;
          break;
        }
      }
    }
  }
  // Also the barrier that hands thread 0's acquire on to the whole block.
  return __syncthreads_or(failed) == 0;
}

// Called by every thread of the block after it wrote its part of the task's output.
extern "C" __device__ void weft_event_notify(unsigned int* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    weft_device_atomic_u32 c(*counter);
    c.fetch_add(1u, cuda::memory_order_release);
  }
}

#endif  // WEFT_DEVICE_SYNC_CUH
