// The streamed GEMV of decode-sized linear tiles: every warp streams its own contiguous run of weight rows
// through a ring of cp.async stages in shared memory (kGemvStages deep, 8 KiB per warp, 64 KiB per block in
// flight), so that the block keeps enough bytes in flight to run at HBM bandwidth and a row boundary never
// drains the pipe. The first stages are issued before the task waits for its input (weights depend on no
// event): the weights stream in while the producer of x finishes.
//
// Each lane reads back only the 16-byte units it copied itself, so no barrier guards the ring: cp.async's
// wait_group makes a thread's own copies visible to it. The one exception, warp 0's first stages of a one-row tile
// (requested by the last warp, gemv_prologue_poller_free), are published by the x stage's barrier.
#ifndef WEFT_DEVICE_GEMV_STREAM_CUH
#define WEFT_DEVICE_GEMV_STREAM_CUH

#include "common.cuh"
#include "weight_ring.cuh"

namespace weft_dev {

constexpr int kGemvStages = 4;
constexpr int kGemvMaxUnits = 4;  // 16-byte units per lane and stage
constexpr int kGemvMaxStageBytes = WEFT_WARP_THREADS * 16 * kGemvMaxUnits;
constexpr int kGemvRingBytes = WEFT_GEMV_RING_BYTES;
// Stages of the stream requested before the task's wait; the run requests the rest of the ring once x is staged.
// The CUDA-core library (batch-1 decode) requests 2, not 3. The task's polls of its event and its x stage queue
// behind those requests: with every SM requesting at once, an L2 round trip of 0.15-0.2 us took 1.5 us behind
// 48 KiB per SM (3.0 behind 112 KiB; behind bulk copies about as long, in the memory system instead of the SM's
// load queue: bench/gemv_micro.cu `queue`). Qwen3-0.6B -2.3 to -3.3% per token, Llama-3.2-1B +0.1 to +1.4% (its
// large tiles want the third stage in flight), Qwen3-8B unchanged (H200, docs/perf.md round 20). The tensor-core
// libraries keep 3, and their code as it was (the catch-up loop below exists only where there is one to run).
// A measurement build may set it (scripts/devlib-build.sh with DEVLIB_NVCC_FLAGS=-DWEFT_GEMV_PROLOGUE_STAGES=n).
#ifndef WEFT_GEMV_PROLOGUE_STAGES
#if defined(WEFT_DEVLIB_TENSOR_CORES) && !WEFT_DEVLIB_TENSOR_CORES
#define WEFT_GEMV_PROLOGUE_STAGES 2
#else
#define WEFT_GEMV_PROLOGUE_STAGES 3
#endif
#endif
constexpr int kGemvPrologueStages = WEFT_GEMV_PROLOGUE_STAGES;

// The CUDA-core library (batch-1 decode) inlines into the task loop only the one-row tiles of one dtype
// (WEFT_DEVLIB_ONE_ROW_DTYPE: bf16 in "<arch>_simt", f16 in "<arch>_simt_f16") whose weight rows take
// kGemvOneRowUnits units per lane and stage (rows of 2 KiB multiples: every projection of the models we run), through
// one stream loop (gemv_one_row.cuh); any other tile runs its op's general body out of line (WEFT_GEMV_OP_RUN,
// ops_linear.cuh). With every dtype and unit count inlined (18 GEMV loops) the task loop was 17,912 instructions;
// with 3, 7,424, and a decode step 2-3% faster (Qwen3-0.6B, Llama-3.2-1B; bf16 and f16 each inlined, 12,088: half
// the gain); with 1, 6,144, ~0.5% more (H200, docs/perf.md round 27): the loop's code, not its work, cost time.
#ifndef WEFT_DEVLIB_ONE_ROW_DTYPE
#define WEFT_DEVLIB_ONE_ROW_DTYPE WEFT_DEV_BF16
#endif
#if WEFT_DEVLIB_ONE_ROW_DTYPE == WEFT_DEV_F16
using OneRowT = f16;
#elif WEFT_DEVLIB_ONE_ROW_DTYPE == WEFT_DEV_BF16
using OneRowT = bf16;
#else
#error "WEFT_DEVLIB_ONE_ROW_DTYPE is WEFT_DEV_BF16 or WEFT_DEV_F16"
#endif
constexpr int kGemvOneRowUnits = 4;
static_assert(kGemvPrologueStages >= 1 && kGemvPrologueStages <= kGemvStages - 1, "the ring holds them");
static_assert(kGemvStages == 4, "`WEFT_GEMV_PROLOGUE_STAGES < 3` in gemv_stream_units stands for < kGemvStages - 1");
constexpr int kGemvStreamRows = 8;  // x rows a streamed tile may have (one accumulator each)
constexpr int kGemvScratchBytes = WEFT_GEMV_SCRATCH_BYTES;
static_assert(kGemvRingBytes >= WEFT_BLOCK_WARPS * kGemvStages * kGemvMaxStageBytes, "the ring holds every warp's stages");
static_assert(kGemvRingBytes < WEFT_SMEM_BYTES, "the GEMV ring must leave room for x");

// What one warp streams: weight rows [n0, n1) of the tile, each `spr` stages of `units` 16-byte units per lane.
struct GemvStream {
  int units;     // 0: the tile does not take the streamed path; else 1, 2 or 4
  i64 n0, n1;    // this warp's output columns (= weight rows)
  i64 spr;       // stages per weight row
};

// The streamed path needs rows of whole stages (K * sizeof(T) a multiple of 512 bytes: K % 256 == 0 for bf16),
// 16-byte aligned weights, at most kGemvStreamRows x rows, and room for all of them next to the ring. A stage
// is as large as the row allows, up to 4 units per lane (2 KiB per warp), to spread the stage's bookkeeping
// over more bytes.
template <typename T>
__device__ __forceinline__ GemvStream gemv_stream_plan(const weft_task_args* a, const T* w, int wi = warp()) {
  GemvStream s{0, 0, 0, 0};
  const i64 k = a->d[0], row_bytes = k * static_cast<i64>(sizeof(T)), rows = a->row1 - a->row0;
  constexpr i64 unit_row = WEFT_WARP_THREADS * 16;
  if (k <= 0 || row_bytes % unit_row != 0 || !aligned16(w) || rows < 1 || rows > kGemvStreamRows ||
      rows * row_bytes > WEFT_SMEM_BYTES - kGemvRingBytes - kGemvScratchBytes)
    return s;
  s.units = row_bytes % (4 * unit_row) == 0 ? 4 : row_bytes % (2 * unit_row) == 0 ? 2 : 1;
  // Columns split evenly over the warps, the first (n % warps) warps taking one more.
  const i64 n = a->col1 - a->col0, per = n / WEFT_BLOCK_WARPS, extra = n % WEFT_BLOCK_WARPS;
  s.n0 = a->col0 + wi * per + (wi < extra ? wi : extra);
  s.n1 = s.n0 + per + (wi < extra ? 1 : 0);
  // row_bytes / (512 * units) as shifts: a 64-bit division is a ~100-instruction subroutine call on the GPU, and
  // every streamed task's plan runs twice (prologue and run), the second after its wait.
  s.spr = row_bytes >> (9 + (s.units == 4 ? 2 : s.units == 2 ? 1 : 0));
  return s;
}

// An L2 policy that evicts these lines first. A decode step streams every weight once (gigabytes through a
// 50 MB L2): without it they push out what is reused within the step — activations, the KV cache, the task
// tables and event counters — and every small op on the critical path pays HBM latency for them.
__device__ __forceinline__ u64 l2_evict_first_policy() {
  u64 policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ void cp_async16(unsigned int smem_dst, const void* gmem_src, u64 policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_dst), "l"(gmem_src),
               "l"(policy)
               : "memory");
}
// 16 bytes into shared memory with the default L2 policy (activations, reused by every tile of an op).
__device__ __forceinline__ void cp_async16_keep(unsigned int smem_dst, const void* gmem_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_dst), "l"(gmem_src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// The ring of this warp: slot i of stage s at ring + (s % kGemvStages) * kGemvMaxStageBytes + (i * 32 + lane) * 16
// (the warp's 16-byte units side by side, so the copies and the reads back are both conflict-free).
__device__ __forceinline__ char* gemv_ring(char* smem) { return smem + warp() * kGemvStages * kGemvMaxStageBytes; }

// Walks a warp's stream one stage at a time without divisions: stage (row, part) of weight row n0 + row.
struct GemvCursor {
  i64 row = 0, part = 0;
  __device__ __forceinline__ void next(i64 spr) {
    if (++part == spr) {
      part = 0;
      ++row;
    }
  }
};

// Copies `rows` rows of `width` elements (16-byte aligned, width a multiple of Vec<T>::N) from src (row stride
// lds) into shared memory at dst (row stride ldx) with cp.async, every unit in flight at once without registers,
// then waits for them (and for this thread's weight stages requested before the task's wait: they have landed
// or are about to). The caller's barrier publishes the rows to the block.
template <typename T>
__device__ __forceinline__ void stage_rows_async(T* dst, i64 ldx, const T* src, i64 lds, i64 width, i64 rows) {
  constexpr int N = Vec<T>::N;
  const int per_row = static_cast<int>(width / N), n = static_cast<int>(rows) * per_row;
  for (int e = tid(); e < n; e += WEFT_BLOCK_THREADS) {
    const int r = e / per_row, v = e - r * per_row;
    cp_async16_keep(static_cast<unsigned int>(__cvta_generic_to_shared(dst + r * ldx + v * N)), src + r * lds + v * N);
  }
  cp_async_commit();
  cp_async_wait<0>();
}

// Issues the stage at cursor c into ring slot `slot` (or nothing past the end), then commits a group: empty
// groups too, since wait_group counts groups and every stage must be one.
template <typename T, int U>
__device__ __forceinline__ void gemv_issue(char* ring, int slot, const T* w, const GemvStream& st, i64 k,
                                           const GemvCursor& c) {
  if (st.n0 + c.row < st.n1) {
    const char* src = reinterpret_cast<const char*>(w + (st.n0 + c.row) * k) + c.part * (U * 512) + lane() * 16;
    const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(ring + slot * kGemvMaxStageBytes)) + lane() * 16;
    const u64 policy = l2_evict_first_policy();
#pragma unroll
    for (int i = 0; i < U; ++i) cp_async16(dst + i * 512, src + i * 512, policy);
  }
  cp_async_commit();
}

template <typename T, int U>
__device__ __forceinline__ void gemv_prologue_units(const weft_task_args* a, const T* w, const GemvStream& st,
                                                    char* smem) {
  char* ring = gemv_ring(smem);
  GemvCursor c;
  for (int s = 0; s < kGemvPrologueStages; ++s) {
    gemv_issue<T, U>(ring, s, w, st, a->d[0], c);
    c.next(st.spr);
  }
}

#if WEFT_DEV_POLLER_WARP_FREE
// The one-row tiles' prologue (linear_stream_prologue_hot) with the poller's warp (warp 0: wait_all's thread i polls
// wait i) requesting nothing before the wait, so that its polls do not queue behind its own copies: an L2 round trip
// behind 4 KiB of the warp's own cp.async came back ~0.2 us later under the boundary's flood
// (bench/cluster_handoff_micro.cu), and a decode step ran 0.3-1.9% faster (H200, docs/perf.md round 47). The last warp
// requests warp 0's stages into warp 0's ring, lane for lane (the units each lane of warp 0 reads back), and warp 0
// commits as many empty groups, so that its group counts stay the stream's. Warp 0 reads those units only after the
// x stage's barrier, before which the last warp waits for all of its groups (one_row_gemv).
template <typename T, int U>
__device__ __forceinline__ void gemv_prologue_poller_free(const weft_task_args* a, const T* w, const GemvStream& st,
                                                          char* smem) {
  if (warp() == 0) {
    for (int s = 0; s < kGemvPrologueStages; ++s) cp_async_commit();
    return;
  }
  gemv_prologue_units<T, U>(a, w, st, smem);
  if (warp() != WEFT_BLOCK_WARPS - 1) return;
  const GemvStream st0 = gemv_stream_plan<T>(a, w, 0);
  GemvCursor c;
  for (int s = 0; s < kGemvPrologueStages; ++s) {
    gemv_issue<T, U>(smem, s, w, st0, a->d[0], c);  // warp 0's ring starts at smem (gemv_ring)
    c.next(st0.spr);
  }
}
#endif

// Before the task's wait: the first kGemvPrologueStages stages of the CUDA-core stream.
template <typename T>
__device__ __forceinline__ void gemv_stream_prologue(const weft_task_args* a, const T* w, char* smem) {
  const GemvStream st = gemv_stream_plan<T>(a, w);
  if (st.units == 4) gemv_prologue_units<T, 4>(a, w, st, smem);
  else if (st.units == 2) gemv_prologue_units<T, 2>(a, w, st, smem);
  else if (st.units == 1) gemv_prologue_units<T, 1>(a, w, st, smem);
}

// After the wait, with x rows staged in shared memory at xs (row stride K): consumes the stream. out(row, n, acc)
// stores one result; with R == 1, out.pre(row, n) loads what an output adds (an Out::Pre) ahead of its sum,
// out.value(acc, pre) adds it and out.put(row, n, value) stores it (LinearOut, ops_linear.cuh). R >= the tile's x
// rows. Loaded (WEFT_DEV_LOADER's one-row tiles): the stages come from the weight loader's ring (weight_ring.cuh)
// instead of this warp's own cp.async ring, `slots` of them (the tile's most stages of any warp); false when a wait
// for one failed (an error is recorded: ring_wait_full).
template <typename T, int R, int U, typename Out, bool Loaded = false>
__device__ __forceinline__ bool gemv_stream_units(const weft_task_args* a, const T* w, const GemvStream& st,
                                                  const T* xs, char* smem, Out out, const weft_env* env = nullptr,
                                                  i64 slots = 0) {
  constexpr int N = Vec<T>::N;
  const i64 k = a->d[0];
  const int rows = static_cast<int>(a->row1 - a->row0);
  char* ring = gemv_ring(smem);
  GemvCursor issue, use;
#if WEFT_DEV_LOADER
  RingPos at;
  if constexpr (Loaded) {
    static_assert(R == 1 && U == 4, "the loader streams the one-row tiles");
    ring = loader_ring(smem) + warp() * kLoaderStageBytes;
    at = RingPos::of(loader_control(smem)->pos[warp()]);
  }
#endif
  if constexpr (!Loaded) {
    for (int s = 0; s < kGemvPrologueStages; ++s) issue.next(st.spr);  // the prologue's stages
#if WEFT_GEMV_PROLOGUE_STAGES < 3
    for (int s = kGemvPrologueStages; s < kGemvStages - 1; ++s) {  // the rest of the ring, now that x is staged
      gemv_issue<T, U>(ring, s, w, st, k, issue);
      issue.next(st.spr);
    }
#endif
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  // R == 1: one accumulator per unit of the stage, added when the row is done: four chains of 8 FMAs instead of one
  // of 32 (a row's last stage is on the tile's critical path, docs/perf.md round 29).
  float unit_acc[U];
#pragma unroll
  for (int i = 0; i < U; ++i) unit_acc[i] = 0.0f;
  // One x row: lane j holds the bias and residual of this warp's output row 32 * i + j, loaded a batch of 32 rows
  // ahead. Loaded when a row's sum was done, each cost the warp an L2 round trip while its ring drained.
  typename Out::Pre pre{};
  float done = 0.0f;  // R == 1: lane j's output of row 32 * i + j, stored with the batch's last
  if constexpr (R == 1) {
    if (st.n0 + lane() < st.n1) pre = out.pre(a->row0, st.n0 + lane());
  }
  int slot = 0;
  while (st.n0 + use.row < st.n1) {
    const char* mine;
#if WEFT_DEV_LOADER
    if constexpr (Loaded) {
      if (!ring_wait_full(smem, at, env)) return false;
      mine = ring + at.slot * WEFT_LOADER_SLOT_BYTES + lane() * 16;
    }
#endif
    if constexpr (!Loaded) {
      gemv_issue<T, U>(ring, (slot + kGemvStages - 1) % kGemvStages, w, st, k, issue);
      issue.next(st.spr);
      cp_async_wait<kGemvStages - 1>();
      mine = ring + slot * kGemvMaxStageBytes + lane() * 16;
    }
    const T* xc = xs + use.part * (U * 512 / static_cast<i64>(sizeof(T))) + lane() * N;
#pragma unroll
    for (int i = 0; i < U; ++i) {
      float wv[N];
      unpack_vec<T>(*reinterpret_cast<const uint4*>(mine + i * 512), wv);
      if constexpr (R == 1) {  // one row; a test per unit cost a branch and kept the loads apart
        float xv[N];
        load_vec(xc + i * (512 / static_cast<i64>(sizeof(T))), xv);
#pragma unroll
        for (int e = 0; e < N; ++e) unit_acc[i] = fmaf(xv[e], wv[e], unit_acc[i]);
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r < rows) {
            float xv[N];
            load_vec(xc + r * k + i * (512 / static_cast<i64>(sizeof(T))), xv);
#pragma unroll
            for (int e = 0; e < N; ++e) acc[r] = fmaf(xv[e], wv[e], acc[r]);
          }
        }
      }
    }
#if WEFT_DEV_LOADER
    if constexpr (Loaded) {
      ring_release(smem, at);
      at.next();
      --slots;
    }
#endif
    if constexpr (!Loaded) slot = slot + 1 == kGemvStages ? 0 : slot + 1;
    if (R == 1 && use.part + 1 == st.spr) {  // a weight row is done: lane (row % 32) keeps it
      float part = 0.0f;
      if constexpr (U == 4) {
        part = (unit_acc[0] + unit_acc[1]) + (unit_acc[2] + unit_acc[3]);
      } else {
#pragma unroll
        for (int i = 0; i < U; ++i) part += unit_acc[i];
      }
#pragma unroll
      for (int i = 0; i < U; ++i) unit_acc[i] = 0.0f;
      const float v = warp_sum(part);
      const int j = static_cast<int>(use.row & 31);
      if (lane() == j) done = out.value(v, pre);
      // A batch of 32 rows (or the warp's last) done: one coalesced store of them all, not a 2-byte store per
      // row (32x fewer store instructions; batch 1 per token within -0.9% .. +0.7% of row-at-a-time stores, 0.3%
      // faster on average over two H200 runs, docs/perf.md round 26).
      if (j == 31 || st.n0 + use.row + 1 == st.n1) {
        if (lane() <= j) out.put(a->row0, st.n0 + use.row - j + lane(), done);
        const i64 next = st.n0 + use.row + 1 + lane();
        if (next < st.n1) pre = out.pre(a->row0, next);
      }
    } else if (use.part + 1 == st.spr) {  // a weight row is done: its dot products, lane r storing row r
      float res = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float v = warp_sum(acc[r]);
        if (lane() == r) res = v;
        acc[r] = 0.0f;
      }
      if (lane() < rows) out(a->row0 + lane(), st.n0 + use.row, res);
    }
    use.next(st.spr);
  }
#if WEFT_DEV_LOADER
  if constexpr (Loaded) {
    for (; slots > 0; --slots) {  // the slots past this warp's rows: other warps' stages
      if (!ring_wait_full(smem, at, env)) return false;
      ring_release(smem, at);
      at.next();
    }
    if (lane() == 0) loader_control(smem)->pos[warp()] = at.word();
    return true;
  }
#endif
  cp_async_wait<0>();  // nothing of this task is left in flight when the next one reuses the ring
  return true;
}

template <typename T, int R, typename Out>
__device__ __forceinline__ void gemv_stream_run(const weft_task_args* a, const T* w, const GemvStream& st,
                                                const T* xs, char* smem, Out out) {
  if (st.units == 4) gemv_stream_units<T, R, 4>(a, w, st, xs, smem, out);
  else if (st.units == 2) gemv_stream_units<T, R, 2>(a, w, st, xs, smem, out);
  else gemv_stream_units<T, R, 1>(a, w, st, xs, smem, out);
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_GEMV_STREAM_CUH
