// The clocks of the per-task timestamp trace of the persistent kernel (WEFT_TRACE). Compiled once
// into the device library; the generated kernel sees the declarations in weft_device.h.
#ifndef WEFT_DEVICE_TRACE_CUH
#define WEFT_DEVICE_TRACE_CUH

#include "config.cuh"

// Nanoseconds on the GPU's global timer (the same clock on every SM, so blocks can be lined up).
extern "C" __device__ unsigned long long weft_global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __device__ unsigned int weft_sm_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

#endif  // WEFT_DEVICE_TRACE_CUH
