// The clocks of the per-task timestamp trace of the persistent kernel (WEFT_TRACE), inlined into the task loop.
#ifndef WEFT_DEVICE_TRACE_CUH
#define WEFT_DEVICE_TRACE_CUH

#include "config.cuh"

namespace weft_dev {

// Nanoseconds on the GPU's global timer (the same clock on every SM, so blocks can be lined up).
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ unsigned int sm_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_TRACE_CUH
