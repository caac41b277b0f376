// Resident mode's device half (weft_loop in task_abi.h): at the boundary before step s (s >= 1), after the grid
// barrier that ends step s - 1, block 0 publishes step s - 1's feedback output to host-mapped memory. Strict: it
// waits for the host's answer (go on, go on with the tokens it rewrote, or stop) and releases the other blocks
// through a device counter, so that only one block polls across PCIe. Look-ahead: nobody waits there; block 0
// reads the answer before the next barrier, a step later. The kernel stays resident: what one launch per step
// costs (launch, kernel entry, a first step whose weights stream slower: 22-60 us per token, docs/perf.md round
// 37) becomes one host round trip per step (strict) or nearly nothing (look-ahead).
#ifndef WEFT_DEVICE_LOOP_GATE_CUH
#define WEFT_DEVICE_LOOP_GATE_CUH

#include <cuda/atomic>

#include "sync.cuh"

namespace weft_dev {

typedef cuda::atomic_ref<unsigned int, cuda::thread_scope_system> system_atomic_u32;

// Thread 0 of block 0: waits until the host has answered boundary `boundary` (host[1] >> 2 >= boundary) and
// returns the answer's flags, or WEFT_GATE_STOP after recording a watchdog error when the host took longer than
// timeout_cycles (or when another block has recorded an error).
__device__ __forceinline__ unsigned int gate_wait_host(unsigned int* host, unsigned int boundary, long long timeout_cycles,
                                                       const weft_env* env) {
  system_atomic_u32 answer(host[1]);
  const long long start = clock64();
  for (unsigned int spin = 1;; ++spin) {
    // Each load is a round trip over PCIe (~1 us): no back-off needed to spare the memory system.
    const unsigned int a = answer.load(cuda::memory_order_acquire);
    if (static_cast<int>((a >> 2) - boundary) >= 0) return a & (WEFT_GATE_REPLACED | WEFT_GATE_STOP);
    if (timeout_cycles > 0 && clock64() - start > timeout_cycles) {
      record_error(env, WEFT_DEV_ERR_DEADLOCK, WEFT_DEV_WAIT_HOST, boundary - 1, a >> 2);
      return WEFT_GATE_STOP;
    }
    if ((spin & 15u) == 0u && error_raised(env)) return WEFT_GATE_STOP;
  }
}

// Every thread of block 0: hands the host step - 1's output (boundary `step`). The barrier orders every thread's
// stores before thread 0's release of the count, which makes them visible to the host first.
__device__ __forceinline__ void gate_publish(const weft_loop& loop, int step) {
  unsigned int* host = loop.gate_host;
  const int* tokens = loop.tokens + static_cast<size_t>(step) * loop.feed_n;
  volatile int* published = reinterpret_cast<volatile int*>(host + WEFT_GATE_HEADER_WORDS);
  for (int i = threadIdx.x; i < loop.feed_n; i += op_threads()) published[i] = tokens[i];
  block_sync();
  if (threadIdx.x == 0) system_atomic_u32(host[0]).store(static_cast<unsigned int>(step), cuda::memory_order_release);
}

// Look-ahead mode, block 0, before its arrival at the barrier that ends step - 1 (step >= 1): the host has had
// step - 1 to answer boundary step - 1 (step - 2's output); a stop there ends the kernel at this barrier. Thread
// 0 waits and sets the stop word, which the barrier's release publishes. It waits half the watchdog's time: the
// other blocks wait for its arrival with the whole, and the error must name the host, not the barrier.
__device__ __noinline__ void loop_gate_arrive(const weft_loop& loop, int step, long long timeout_cycles, const weft_env* env) {
  if (threadIdx.x != 0) return;
  const long long bound = timeout_cycles > 0 ? timeout_cycles / 2 : timeout_cycles;
  const unsigned int flags =
      step >= 2 ? gate_wait_host(loop.gate_host, static_cast<unsigned int>(step - 1), bound, env) : 0u;
  reinterpret_cast<volatile unsigned int*>(loop.gate_words)[1] = (flags & WEFT_GATE_STOP) ? 1u : 0u;
}

// Called by every thread of every block at the boundary before step `step` >= 1 of a resident loop, after the
// grid barrier. Returns true when the step is to run; false when the host asked to stop or a wait failed (the
// kernel then ends; a failed wait has recorded its error). Out of line, like loop_gate_arrive: they run once per
// step, and inlined they would cost the task loop registers.
__device__ __noinline__ bool loop_gate(const weft_loop& loop, int step, long long timeout_cycles, const weft_env* env) {
  volatile const unsigned int* stop_word = loop.gate_words + 1;
  if (loop.gate_lookahead) {
    // The stop word was set before the barrier; block 0 hands over the output and goes on without an answer.
    if (*stop_word != 0u) return false;
    if (blockIdx.x == 0) gate_publish(loop, step);
    return true;
  }
  if (blockIdx.x == 0) {
    gate_publish(loop, step);
    unsigned int flags = 0;
    if (threadIdx.x == 0) flags = gate_wait_host(loop.gate_host, static_cast<unsigned int>(step), timeout_cycles, env);
    // The answer reaches the block through barriers, not a __shared__ word: static shared memory in the library
    // moves the launch's dynamic block and costs every task (device_compile_test, docs/perf.md rounds 17 and 40).
    const bool stop = block_sync_or(flags & WEFT_GATE_STOP) != 0;
    const bool replaced = block_sync_or(flags & WEFT_GATE_REPLACED) != 0;
    int* tokens = loop.tokens + static_cast<size_t>(step) * loop.feed_n;
    if (replaced && !stop)
      for (int i = threadIdx.x; i < loop.feed_n; i += op_threads())
        tokens[i] = reinterpret_cast<volatile const int*>(loop.gate_host + WEFT_GATE_HEADER_WORDS)[i];
    if (threadIdx.x == 0) *const_cast<volatile unsigned int*>(stop_word) = stop ? 1u : 0u;
    event_notify(loop.gate_words);  // the barrier in it orders the token stores and the stop word before the release
  }
  // Block 0 always releases (its own wait is bounded), so the others' bound only guards against a kernel bug.
  const long long bound = timeout_cycles > 0 ? 2 * timeout_cycles : timeout_cycles;
  if (!event_wait(loop.gate_words, loop.gate_base + static_cast<unsigned int>(step), bound, env, -1)) return false;
  return *stop_word == 0u;
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_LOOP_GATE_CUH
