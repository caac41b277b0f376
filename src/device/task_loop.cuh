// The persistent loop of the megakernel: block b runs queue b of the task tables in order; a task requests what
// no event guards (prefetch_op), waits for its events (counters reach count * epoch), runs its device op
// and notifies its events. The generated kernel calls it once per launch.
//
// It lives in the device library, not in the generated kernel, so that every op is inlined into it: an op
// called across the library boundary is an ABI call, and the callee saved and restored ~60 registers through
// local memory on every task, which cost 2-3 us per task on the critical path of a decode step (measured with
// WEFT_TRACE and ncu: a GEMV task that returned at once still took 2.8 us). Exceptions, called out of line with
// pointer operands, where inlining cost every task more than the call costs the op: the attention bodies and
// prologues (ops_attention_qkv.cuh), the GEMV tiles a batch-1 kernel does not run (ops_linear.cuh), the ops
// of op_inlined below, and in the CUDA-core library every op and prefetch but the one-row GEMV tiles' and
// attention's (run_cold_op, prefetch_cold_op).
#ifndef WEFT_DEVICE_TASK_LOOP_CUH
#define WEFT_DEVICE_TASK_LOOP_CUH

#include "config.cuh"
#include "loop_gate.cuh"
#include "sync.cuh"
#include "trace.cuh"

// Every op, for the switch below (each file defines its weft_dev::op_* inline body).
#include "ops_attention.cuh"
#include "ops_attention_qkv.cuh"
#include "ops_elementwise.cuh"
#include "gemv_one_row.cuh"
#include "ops_fused_linear.cuh"
#include "ops_layout.cuh"
#include "ops_linear.cuh"
#include "ops_linear_silu_mul.cuh"
#include "ops_norm.cuh"
#include "ops_reduce.cuh"
#include "prefetch.cuh"
#include "weight_loader.cuh"

namespace weft_dev {

// The dynamic shared memory of the launch, seen as shared (not generic) memory by every inlined op.
extern __shared__ __align__(16) char weft_smem[];

// All blocks arrive, then wait for all: barrier number `n` (counted across launches) is complete at
// n * gridDim.x arrivals.
__device__ __forceinline__ bool grid_barrier(const weft_loop& loop, unsigned int n, long long timeout_cycles,
                                             const weft_env* env) {
  event_notify(loop.barrier);
  return event_wait(loop.barrier, n * gridDim.x, timeout_cycles, env, -1);
}

// The ops that run once per layer of a decode step are inlined; the rest are called out of line, with pointer
// operands (~0.6 us per call). Inlined code costs every task of the loop registers and set-up whether it runs or
// not (docs/perf.md, rounds 12-14), and inlining every op made the library's build ~5x slower. The embedding and
// argmax run once per step; the plain norms, rope, add and silu_mul only in graphs without fused linear inputs —
// batched steps of many rows (fused_linear_inputs_pay), whose measurements in docs/perf.md round 14 include the
// call.
// The attention ops' bodies are out of line themselves (ops_attention_qkv.cuh); the GEMV ops inline only their
// hot tiles (WEFT_GEMV_OP_RUN, ops_linear.cuh).
__device__ constexpr bool op_inlined(int op) {
  return op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_ATTENTION_DECODE || op == WEFT_DEV_OP_RMSNORM_LINEAR ||
         op == WEFT_DEV_OP_SILU_MUL_LINEAR || op == WEFT_DEV_OP_ATTENTION_DECODE_QKV || op == WEFT_DEV_OP_LINEAR_SILU_MUL;
}

namespace {
// Internal linkage: the wrappers of inlined ops are never called, so they are not emitted.
#define WEFT_DEV_OP_OUT_OF_LINE(E, f)                                                           \
  __device__ __noinline__ void out_of_line_##f(const weft_task_args* a, const weft_env* env, char* smem) { \
    op_##f(a, env, smem);                                                                       \
  }
WEFT_DEV_OP_LIST(WEFT_DEV_OP_OUT_OF_LINE)
#undef WEFT_DEV_OP_OUT_OF_LINE
}  // namespace

// Runs device op `op` on `a`; false for an id the library does not have.
__device__ __forceinline__ bool run_op_switch(int op, const weft_task_args* a, const weft_env* env, char* smem) {
  switch (op) {
#define WEFT_DEV_OP_CASE(E, f)                                         \
  case WEFT_DEV_OP_##E:                                                \
    if constexpr (op_inlined(WEFT_DEV_OP_##E)) op_##f(a, env, smem);   \
    else out_of_line_##f(a, env, smem);                                \
    return true;
    WEFT_DEV_OP_LIST(WEFT_DEV_OP_CASE)
#undef WEFT_DEV_OP_CASE
    default:
      return false;
  }
}

#if !WEFT_DEVLIB_TENSOR_CORES
// The CUDA-core library's ops off a decode step's critical path, behind one call: the switch's ~35 call sites (each
// with its argument set-up and register saves) and the norms' unrolled prefetch loops made up a sizeable part of
// the task loop, whose code size costs every task (docs/perf.md, rounds 27-28).
__device__ __noinline__ bool run_cold_op(int op, const weft_task_args* a, const weft_env* env, char* smem) {
  return run_op_switch(op, a, env, smem);
}
__device__ __noinline__ void prefetch_cold_op(int op, const weft_task_args* a, const weft_env* env, char* smem) {
  prefetch_op(op, a, env, smem);
}
#endif

__device__ __forceinline__ bool run_op(int op, const weft_task_args* a, const weft_env* env, char* smem) {
#if WEFT_DEVLIB_TENSOR_CORES
  return run_op_switch(op, a, env, smem);
#else
  if (is_gemv_op(op) && one_row_gemv(op, a, env, smem)) return true;  // the decode step's tiles (gemv_one_row.cuh)
  if (op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) {  // on every layer's critical path: no call level more
    op_attention_decode_qkv(a, env, smem);
    return true;
  }
  return run_cold_op(op, a, env, smem);
#endif
}

// prefetch_op, with the CUDA-core library's rarely run cases out of line (see run_cold_op).
__device__ __forceinline__ void prefetch_task(int op, const weft_task_args* a, const weft_env* env, char* smem) {
#if WEFT_DEVLIB_TENSOR_CORES
  prefetch_op(op, a, env, smem);
#else
  if (is_gemv_op(op)) linear_stream_prologue_hot(a, env, smem, op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1);
  else if (op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) WEFT_DISPATCH_FLOAT(a->dtype, attention_qkv_prologue, a, env, smem);
  else prefetch_cold_op(op, a, env, smem);
#endif
}

// A kernel compiled for a bucket runs a smaller symbol value: a tile past it does nothing (but keeps its
// events), a tile across it is cut to it, in the block's own staged copy of the task. Returns the arguments to
// run, or nullptr to skip. Called by every thread (the branches are uniform: all read the same shared memory).
__device__ __forceinline__ const weft_task_args* clip_task(weft_task* t, const weft_symbol_values& symbols) {
  weft_task_args* a = &t->args;
  if (t->clip < 0) return a;
  const long long lim = symbols.v[t->clip & 0xff] * t->clip_unit;
  const bool cols = (t->clip >> 8) != 0;
  if ((cols ? a->col0 : a->row0) >= lim) return nullptr;
  if ((cols ? a->col1 : a->row1) <= lim) return a;
  block_sync();  // every thread has read the bounds before thread 0 changes them
  if (tid() == 0) {
    if (cols) a->col1 = lim;
    else a->row1 = lim;
  }
  block_sync();
  return a;
}

// The descriptor of a task (weft_task) as 32-bit words: thread i < kTaskWords loads and stores word i.
constexpr int kTaskWords = static_cast<int>(sizeof(weft_task) / sizeof(unsigned int));
static_assert(sizeof(weft_task) % sizeof(unsigned int) == 0 && kTaskWords <= WEFT_BLOCK_THREADS,
              "a task descriptor is staged one 32-bit word per thread");

// Slot tables up to this many entries are copied into shared memory at the start of each step; a larger one is
// read from global memory, and after each wait from L2 (Qwen3-0.6B's decode graph has 284 slots: 512 made its
// batch-1 token 0.7% and batch-8 1.1% faster, H200, docs/perf.md round 18). sm_80's 163 KiB per block leaves room
// for 256 beside WEFT_SMEM_BYTES_BASE (device_compile_test checks the sum on every arch).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kSharedSlots = 256;
#else
constexpr int kSharedSlots = 512;
#endif

__device__ __forceinline__ unsigned int task_word(const weft_task* tasks, int task, int w) {
  return __ldg(reinterpret_cast<const unsigned int*>(tasks + task) + w);
}

// Thread i's wait i and notify i of a staged task (read-only tables), for the task's wait and notify.
__device__ __forceinline__ void load_edges(const weft_task& t, const weft_queues& q, weft_wait& wait, int& notify) {
  if (tid() < t.wait_count) {
    const int2 w = __ldg(reinterpret_cast<const int2*>(q.waits + t.wait_begin + tid()));
    wait.event = w.x;
    wait.count = static_cast<unsigned int>(w.y);
  }
  if (tid() < t.notify_count) notify = __ldg(q.notifies + t.notify_begin + tid());
}

}  // namespace weft_dev

// Per task, everything the loop reads before the wait is already in shared memory or registers: while task k
// runs, its block loads task k+1's descriptor (one word per thread, queue entry k+2's index), stores it into
// the other half of a double buffer in shared memory when task k is done, and loads the next task's wait and
// notify entries right after task k's notify. The op itself reads its arguments there too, and the slot table
// from a shared copy: after a wait every global line in L1 is invalid (the acquire), and reading the
// descriptor, the tables and the slots from L2 then cost a few dependent round trips per task (~1-2 us of
// set-up measured with WEFT_TRACE), on the critical path whenever a task's inputs are ready before its set-up.
namespace weft_dev {
__device__ __forceinline__ void run_queues(const weft_queues* queues) {
  __shared__ __align__(16) weft_task staged[2];
  __shared__ void* shared_slots[kSharedSlots];
  const weft_queues q = *queues;
  char* smem = weft_smem;
  const weft_loop& loop = *q.loop;
  weft_env env;
  env.slots = q.slots;
  env.error = q.error;
  env.error_info = q.error_info;
  env.task_index = -1;
  env.tuning = q.tuning;
  env.queues = queues;
  env.epoch = q.epoch;
  const int steps = loop.steps > 0 ? loop.steps : 1;
  if (loop.steps > 0 && blockIdx.x == 0) {
    for (int i = threadIdx.x; i < loop.feed_n; i += op_threads()) loop.tokens[i] = loop.feed_src[i];
    for (int i = threadIdx.x; i < loop.steps * loop.feed_n; i += op_threads())
      loop.counters[i] = loop.counter_src[i % loop.feed_n] + i / loop.feed_n;
  }
  const int begin = q.queue_offsets[blockIdx.x], end = q.queue_offsets[blockIdx.x + 1];
  const int entries = q.queue_offsets[gridDim.x];
  const bool early = !(q.tuning & WEFT_TUNE_LATE_PREFETCH);
#if defined(WEFT_DEVLIB_TICKET) && WEFT_DEVLIB_TICKET > 0
  // Measurement builds only (scripts/devlib-build.sh with DEVLIB_NVCC_FLAGS=-DWEFT_DEVLIB_TICKET=n): n shared
  // stores that never run. They change nothing a task does, but ptxas allocates and schedules this whole loop anew
  // around them (bench/sass_diff.py), and that alone moves a decode step by ~1%: A/Bs of device code compare several
  // such tickets of each side, not one allocation against main's, which rounds of keeping the faster have selected
  // (docs/perf.md round 38).
  if (q.tuning & WEFT_TUNE_TICKET_NEVER) {
#pragma unroll
    for (int i = 0; i < WEFT_DEVLIB_TICKET; ++i)
      asm volatile("st.volatile.shared.u32 [%0], %1;" ::"r"(static_cast<unsigned int>(i * 4)), "r"(q.epoch + i)
                   : "memory");
  }
#endif
  for (int step = 0; step < steps; ++step) {
    void* const* slots = q.slots;
    if (loop.steps > 0) {
      env.task_index = -1;
      if (loop.gate_lookahead && step > 0 && blockIdx.x == 0) loop_gate_arrive(loop, step, q.timeout_cycles, &env);
      if (!grid_barrier(loop, loop.barrier_base + step + 1, q.timeout_cycles, &env)) return;
      if (loop.gate_host && step > 0 && !loop_gate(loop, step, q.timeout_cycles, &env)) return;
      slots = loop.step_slots + static_cast<size_t>(step) * q.num_slots;
    }
    if (begin == end) continue;
    if (q.num_slots <= kSharedSlots) {
      for (int i = tid(); i < q.num_slots; i += WEFT_BLOCK_THREADS) shared_slots[i] = slots[i];
      slots = shared_slots;
    }
    env.slots = slots;
    // Entry `begin` is staged here; every later one while the one before it runs.
    int cur = __ldg(q.queue_tasks + begin);
    int next = begin + 1 < end ? __ldg(q.queue_tasks + begin + 1) : -1;
    if (tid() < kTaskWords) reinterpret_cast<unsigned int*>(&staged[0])[tid()] = task_word(q.tasks, cur, tid());
    block_sync();
    weft_wait wait{0, 0u};
    int notify = 0;
    load_edges(staged[0], q, wait, notify);
    // Counters only grow: pass `e` of the queues needs count * e (wrapping like the counters do).
    const unsigned int e = q.epoch + static_cast<unsigned int>(step);
    env.epoch = e;
    for (int k = begin; k < end; ++k) {
      const int buf = (k - begin) & 1;
      // Shared memory belongs to one task at a time: the barrier at the end of task k-1 (notify's, or the one
      // beside it) is the boundary. None here: warps 1.. start this task's prologue while warp 0 releases the
      // last task's events.
      // Trace record of queue entry k of this step (WEFT_TRACE_RECORD_WORDS): the SM clock at run start and
      // end beside the global ns gives the clock the task ran at.
      unsigned long long* rec =
          q.trace ? q.trace + (static_cast<size_t>(step) * entries + k) * WEFT_TRACE_RECORD_WORDS : nullptr;
      if (rec && threadIdx.x == 0) rec[6] = global_ns();
      // Entry k+1's descriptor and entry k+2's index, requested now, used when this task is done.
      unsigned int next_word = 0;
      if (next >= 0 && tid() < kTaskWords) next_word = task_word(q.tasks, next, tid());
      const int after = k + 2 < end ? __ldg(q.queue_tasks + k + 2) : -1;
      weft_task* t = &staged[buf];
      env.task_index = cur;
      const int op = t->op;
      const weft_task_args* a = clip_task(t, *q.symbols);
      // What the task reads that no event guards (weights, earlier steps' KV rows) is requested first.
      if (early && a) prefetch_task(op, a, &env, smem);
      if (rec && threadIdx.x == 0) {
        rec[0] = global_ns();
        rec[3] = sm_id();
      }
      if (t->wait_count > 0 &&
          !wait_all(wait, q.waits + t->wait_begin, t->wait_count, q.events, e, q.timeout_cycles, &env))
        return;
      if (rec && threadIdx.x == 0) {
        rec[1] = global_ns();
        rec[4] = clock64();
      }
      if (!early && a) {  // WEFT_TUNE_LATE_PREFETCH, measurements only: not a second inlined copy
#if WEFT_DEVLIB_TENSOR_CORES
        prefetch_op(op, a, &env, smem);
#else
        prefetch_cold_op(op, a, &env, smem);
#endif
      }
      if (a && !run_op(op, a, &env, smem)) {
        if (threadIdx.x == 0) record_error(&env, WEFT_DEV_ERR_BAD_TASK, static_cast<unsigned int>(op), 0u, 0u);
        return;
      }
      if (rec) {
        block_sync();
        if (threadIdx.x == 0) {
          rec[2] = global_ns();
          rec[5] = clock64();
        }
      }
      // No one reads the other buffer during this task; notify's barrier (or this one) publishes it.
      if (next >= 0 && tid() < kTaskWords) reinterpret_cast<unsigned int*>(&staged[buf ^ 1])[tid()] = next_word;
      if (t->notify_count > 0) notify_all(q.events, notify, q.notifies + t->notify_begin, t->notify_count);
      else if (next >= 0) block_sync();
      if (rec && threadIdx.x == 0) rec[7] = global_ns();
      if (next >= 0) load_edges(staged[buf ^ 1], q, wait, notify);
      cur = next;
      next = after;
    }
  }
}
}  // namespace weft_dev

#if !WEFT_DEV_LOADER
// The weight loader's library has no such function: its kernel entry is its own (loader_entry.cuh).
extern "C" __device__ void weft_dev_run_queues(const weft_queues* queues) { weft_dev::run_queues(queues); }
#endif

#endif  // WEFT_DEVICE_TASK_LOOP_CUH
