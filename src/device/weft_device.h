// The one header a generated megakernel includes: the task ABI, the shared constants, and the declarations
// of the device library (event primitives, error record, one function per op). The definitions live in the
// precompiled device library that nvJitLink links in, so this header stays cheap for NVRTC to parse (it
// includes no CUDA headers).
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include "config.cuh"

extern "C" {

// Event primitives (sync.cuh). Called by every thread of the block.
__device__ bool weft_event_wait(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                const weft_env* env, int event);
__device__ void weft_event_notify(unsigned int* counter);
// All waits of a task at once (thread i polls waits[i]); all notifies at once.
__device__ bool weft_wait_all(const weft_wait* waits, int count, unsigned int* events, unsigned int epoch,
                              long long timeout_cycles, const weft_env* env);
__device__ void weft_notify_all(unsigned int* events, const int* notifies, int count);

// The trace's clock and SM id (trace.cuh).
__device__ unsigned long long weft_global_ns();
__device__ unsigned int weft_sm_id();

// Records the first device error (WEFT_DEV_ERR_*): error_info[0] = env->task_index, [1..3] = info1..3.
__device__ void weft_dev_record_error(const weft_env* env, unsigned int code, unsigned int info1, unsigned int info2,
                                      unsigned int info3);
// True once any block has recorded an error.
__device__ bool weft_dev_error_raised(const weft_env* env);

// Device ops: called by all WEFT_BLOCK_THREADS threads of a block; compute the task's output tile; use at
// most WEFT_SMEM_BYTES of `smem` (16-byte aligned dynamic shared memory).
#define WEFT_DECLARE_DEV_OP(E, f) __device__ void weft_dev_##f(const weft_task_args* a, const weft_env* env, char* smem);
WEFT_DEV_OP_LIST(WEFT_DECLARE_DEV_OP)
#undef WEFT_DECLARE_DEV_OP

// Requests what task `a` (of device op `op`) reads that no event guards (prefetch.cuh). The kernel calls it,
// with all threads, once per task, before the task's waits; LINEAR then expects it to have run for the same
// task (it starts the weight stream that weft_dev_linear consumes).
__device__ void weft_dev_prefetch(int op, const weft_task_args* a, const weft_env* env, char* smem);

}  // extern "C"

// Runs device op `op` (a weft_dev_op) on `a`. Unknown ids do nothing.
static __device__ __forceinline__ void weft_dev_run_op(int op, const weft_task_args* a, const weft_env* env,
                                                       char* smem) {
  switch (op) {
#define WEFT_DEV_OP_CASE(E, f) \
  case WEFT_DEV_OP_##E:        \
    weft_dev_##f(a, env, smem); \
    break;
    WEFT_DEV_OP_LIST(WEFT_DEV_OP_CASE)
#undef WEFT_DEV_OP_CASE
    default:
      break;
  }
}

#endif  // WEFT_DEVICE_H
