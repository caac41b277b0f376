// The one header a generated megakernel includes: the task ABI, the shared constants, and the declarations
// of the device library (its task loop, event primitives, error record). The definitions live in
// the precompiled device library that nvJitLink links in, so this header stays cheap for NVRTC to parse (it
// includes no CUDA headers).
#ifndef WEFT_DEVICE_H
#define WEFT_DEVICE_H

#include "config.cuh"

extern "C" {

// Event primitives (sync.cuh). Called by every thread of the block.
__device__ bool weft_event_wait(unsigned int* counter, unsigned int target, long long timeout_cycles,
                                const weft_env* env, int event);
__device__ void weft_event_notify(unsigned int* counter);
// Records the first device error (WEFT_DEV_ERR_*): error_info[0] = env->task_index, [1..3] = info1..3.
__device__ void weft_dev_record_error(const weft_env* env, unsigned int code, unsigned int info1, unsigned int info2,
                                      unsigned int info3);
// True once any block has recorded an error.
__device__ bool weft_dev_error_raised(const weft_env* env);

// The persistent loop over the task tables (task_loop.cuh), every device op inlined into it: called once per
// launch by all WEFT_BLOCK_THREADS threads of every block of a one-block-per-SM grid whose dynamic shared
// memory is WEFT_SMEM_BYTES. Returns when the block's queue is done, or early after a device error (recorded
// in queues->error).
__device__ void weft_dev_run_queues(const weft_queues* queues);

}  // extern "C"

#endif  // WEFT_DEVICE_H
