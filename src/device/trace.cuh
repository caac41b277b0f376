// The clocks of the per-task timestamp trace of the persistent kernel (WEFT_TRACE), inlined into the task loop;
// the extern "C" ones are the library's ABI (weft_device.h).
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

extern "C" __device__ unsigned long long weft_global_ns() { return weft_dev::global_ns(); }
extern "C" __device__ unsigned int weft_sm_id() { return weft_dev::sm_id(); }

#endif  // WEFT_DEVICE_TRACE_CUH
