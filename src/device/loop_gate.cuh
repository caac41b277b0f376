// Resident mode's device half (weft_loop in task_abi.h): at the boundary before step s (s >= 1), after the grid
// barrier that ends step s - 1, block 0 publishes step s - 1's feedback output to host-mapped memory, waits for
// the host's answer (go on, go on with the tokens it rewrote, or stop) and releases the other blocks through a
// device counter, so that only one block polls across PCIe. The kernel stays resident: what one launch per step
// costs (launch, kernel entry, a first step whose weights stream slower: 22-60 us per token, docs/perf.md round
// 37) becomes one host round trip.
#ifndef WEFT_DEVICE_LOOP_GATE_CUH
#define WEFT_DEVICE_LOOP_GATE_CUH

#include <cuda/atomic>

#include "sync.cuh"

namespace weft_dev {

typedef cuda::atomic_ref<unsigned int, cuda::thread_scope_system> system_atomic_u32;

// Thread 0 of block 0: waits until the host has answered boundary `step` (host[1] >> 2 >= step) and returns
// the answer's flags, or WEFT_GATE_STOP after recording a watchdog error when the host took longer than
// timeout_cycles (or when another block has recorded an error).
__device__ __forceinline__ unsigned int gate_wait_host(unsigned int* host, unsigned int step, long long timeout_cycles,
                                                       const weft_env* env) {
  system_atomic_u32 answer(host[1]);
  const long long start = clock64();
  for (unsigned int spin = 1;; ++spin) {
    // Each load is a round trip over PCIe (~1 us): no back-off needed to spare the memory system.
    const unsigned int a = answer.load(cuda::memory_order_acquire);
    if (static_cast<int>((a >> 2) - step) >= 0) return a & (WEFT_GATE_REPLACED | WEFT_GATE_STOP);
    if (timeout_cycles > 0 && clock64() - start > timeout_cycles) {
      record_error(env, WEFT_DEV_ERR_DEADLOCK, WEFT_DEV_WAIT_HOST, step, a >> 2);
      return WEFT_GATE_STOP;
    }
    if ((spin & 15u) == 0u && error_raised(env)) return WEFT_GATE_STOP;
  }
}

// Called by every thread of every block at the boundary before step `step` >= 1 of a resident loop, after the
// grid barrier. Returns true when the step is to run; false when the host asked to stop or a wait failed (the
// kernel then ends; a failed wait has recorded its error). Out of line: it runs once per step, and inlined it
// would cost the task loop registers.
__device__ __noinline__ bool loop_gate(const weft_loop& loop, int step, long long timeout_cycles, const weft_env* env) {
  __shared__ unsigned int flags;
  unsigned int* host = loop.gate_host;
  int* tokens = loop.tokens + static_cast<size_t>(step) * loop.feed_n;
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < loop.feed_n; i += blockDim.x)
      reinterpret_cast<volatile int*>(host + 4)[i] = tokens[i];
    __syncthreads();
    if (threadIdx.x == 0) {
      // The barrier ordered every thread's stores before this thread's; the fence makes them visible to the host
      // before the count that says they are there.
      __threadfence_system();
      system_atomic_u32(host[0]).store(static_cast<unsigned int>(step), cuda::memory_order_release);
      flags = gate_wait_host(host, static_cast<unsigned int>(step), timeout_cycles, env);
    }
    __syncthreads();
    if (flags == WEFT_GATE_REPLACED)
      for (int i = threadIdx.x; i < loop.feed_n; i += blockDim.x)
        tokens[i] = reinterpret_cast<volatile const int*>(host + 4)[i];
    if (threadIdx.x == 0)
      reinterpret_cast<volatile unsigned int*>(loop.gate_words)[1] = (flags & WEFT_GATE_STOP) ? 1u : 0u;
    event_notify(loop.gate_words);  // the barrier in it orders the token stores and the flag before the release
  }
  // Block 0 always releases (its own wait is bounded), so the others' bound only guards against a kernel bug.
  const long long bound = timeout_cycles > 0 ? 2 * timeout_cycles : timeout_cycles;
  if (!event_wait(loop.gate_words, loop.gate_base + static_cast<unsigned int>(step), bound, env, -1)) return false;
  return reinterpret_cast<volatile const unsigned int*>(loop.gate_words)[1] == 0u;
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_LOOP_GATE_CUH
