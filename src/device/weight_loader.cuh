// The weight loader (WEFT_DEV_LOADER, the CUDA-core library "<arch>_simt_loader"): a warp of its own per block that
// walks the block's queue ahead of the op warps and copies the weights of every one-row GEMV tile into the
// ring of weight_ring.cuh by bulk copies, at most a few slots in flight, on through the tiles' boundaries: weights
// depend on no event, so the stream need not stop where a tile waits for its input or releases its output. Measured
// outside the megakernel (bench/layer_pipeline_micro.cu, docs/perf.md round 41): a stream that stops at every op
// boundary, as the per-warp cp.async rings' prologues do, cost a decode layer 10-17%. Measured in the megakernel
// (round 42, its ops then on 7 warps): slower than the default, and each release's fence waits for the ring's copies in
// flight; opt-in ($WEFT_WEIGHT_LOADER) while the pieces that would pay are built.
//
// The loader and the op warps agree on which tiles it streams by the same test (loader_tile below, and the plan
// record of the tile's prologue that one_row_gemv reads), on each tile's slots (one_row_slots) and on the order (the
// queue's): the loader never waits for an event, only for free slots.
#ifndef WEFT_DEVICE_WEIGHT_LOADER_CUH
#define WEFT_DEVICE_WEIGHT_LOADER_CUH

#include "gemv_one_row.cuh"
#include "weight_ring.cuh"

namespace weft_dev {

#if WEFT_DEV_LOADER

// Slots requested and not yet seen landed, at most: WEFT_TUNE bits 8..11 (WEFT_TUNE_LOADER_INFLIGHT_SHIFT) give n,
// clamped to 1..WEFT_LOADER_SLOTS - 1; 0 means 2.
__device__ __forceinline__ int loader_inflight(unsigned int tuning) {
  const int n = static_cast<int>((tuning >> WEFT_TUNE_LOADER_INFLIGHT_SHIFT) & 15u);
  return n < 1 ? 2 : n >= WEFT_LOADER_SLOTS ? WEFT_LOADER_SLOTS - 1 : n;
}

// What the loader streams of a task: its weight and columns, or nothing (w null). The task's bounds clipped as the
// op warps clip them (clip_task, task_loop.cuh); the test is one_row_gemv's with its prologue's record
// (linear_stream_prologue_hot): a GEMV op's tile of one x row of the library's dtype whose stream plan takes
// kGemvOneRowUnits units and whose x row fits below the record.
struct LoaderTile {
  const char* w = nullptr;
  i64 col0 = 0, n = 0, k = 0, spr = 0;
};
__device__ __forceinline__ LoaderTile loader_tile(const weft_task* t, void* const* slots, const weft_symbol_values& sym) {
  LoaderTile tile;
  const int op = __ldg(&t->op);
  if (!is_gemv_op(op)) return tile;
  const weft_task_args* a = &t->args;
  i64 row0 = __ldg(&a->row0), row1 = __ldg(&a->row1), col0 = __ldg(&a->col0), col1 = __ldg(&a->col1);
  const int clip = __ldg(&t->clip);
  if (clip >= 0) {
    const i64 lim = sym.v[clip & 0xff] * __ldg(&t->clip_unit);
    const bool cols = (clip >> 8) != 0;
    if ((cols ? col0 : row0) >= lim) return tile;
    if (cols && col1 > lim) col1 = lim;
    if (!cols && row1 > lim) row1 = lim;
  }
  const i64 k = __ldg(&a->d[0]);
  if (__ldg(&a->dtype) != WEFT_DEVLIB_ONE_ROW_DTYPE || row1 - row0 != 1 || col1 <= col0) return tile;
  const int s = __ldg(&a->in[op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1]);
  if (s < 0) return tile;
  const char* w = static_cast<const char*>(slots[s]);
  // The plan's test on the clipped bounds (its columns are the calling warp's: the loader takes only units and spr).
  weft_task_args clipped;
  clipped.d[0] = k;
  clipped.row0 = row0;
  clipped.row1 = row1;
  clipped.col0 = col0;
  clipped.col1 = col1;
  const GemvStream st = gemv_stream_plan<OneRowT>(&clipped, reinterpret_cast<const OneRowT*>(w));
  if (st.units != kGemvOneRowUnits || !gemv_plan_record_fits(k)) return tile;
  tile.w = w;
  tile.col0 = col0;
  tile.n = col1 - col0;
  tile.k = k;
  tile.spr = st.spr;
  return tile;
}

// Waits (the whole warp) until `bar` completes the phase of `parity`, or the op warps are done (false). Every lane
// polls, and a vote keeps them together: a phase once seen complete stays so until the loader's next use of the
// slot, which comes after this wait. (Lane 0 polling alone, the others parked at a shuffle, made Llama-3.2-1B's
// tokens 30-40% slower, docs/perf.md rounds 42-43: the lone lane's spin seems to take issue slots the
// hardware's suspended try_wait of a whole warp leaves to the op warps on its scheduler.)
__device__ __forceinline__ bool loader_wait(unsigned int bar, unsigned int parity, const volatile int* stop) {
  while (!__all_sync(0xffffffffu, mbar_test(bar, parity)))
    if (__any_sync(0xffffffffu, *stop != 0)) return false;
  return true;
}

// The loader's whole run, on every lane of its warp: every step's queue entries of this block, in order. Each slot's
// stages are requested by as many lanes at once (lane i: op warp i's stage), lane 0 having announced their bytes.
// Returns when its last slot has landed, or once the op warps are done, after the copies it requested have landed (a
// block must not retire with bulk copies into its shared memory in flight).
__device__ __forceinline__ void run_weight_loader(const weft_queues& q, char* smem) {
  if (q.tuning & (WEFT_TUNE_LOADER_OFF | WEFT_TUNE_LOADER_STALL)) return;
  const weft_loop& loop = *q.loop;
  const int steps = loop.steps > 0 ? loop.steps : 1;
  const int begin = q.queue_offsets[blockIdx.x], end = q.queue_offsets[blockIdx.x + 1];
  LoaderControl* c = loader_control(smem);
  const volatile int* stop = &c->stop;
  const unsigned int ring = smem_u32(loader_ring(smem));
  const u64 policy = l2_evict_first_policy();
  const int inflight = loader_inflight(q.tuning);
  const int wi = lane();
  RingPos at, landed;
  long long issued = 0;
  bool run = true;
  for (int step = 0; run && step < steps; ++step) {
    void* const* slots = loop.steps > 0 ? loop.step_slots + static_cast<size_t>(step) * q.num_slots : q.slots;
    for (int e = begin; run && e < end; ++e) {
      const LoaderTile tile = loader_tile(q.tasks + __ldg(q.queue_tasks + e), slots, *q.symbols);
      if (tile.w == nullptr) continue;
      // Op warp wi's columns (gemv_stream_plan): n0 + [0, per) and one more for wi < extra, a contiguous run of
      // weight rows, so its stages are consecutive 2 KiB; every warp has stage j below full_parts, warps < extra
      // the rest.
      const i64 per = tile.n / WEFT_BLOCK_WARPS, extra = tile.n % WEFT_BLOCK_WARPS;
      const i64 row_bytes = tile.k * static_cast<i64>(sizeof(OneRowT));
      const i64 slots_n = one_row_slots(tile.n, tile.spr), full_parts = per * tile.spr;
      const char* src = tile.w + (tile.col0 + wi * per + (wi < extra ? wi : extra)) * row_bytes;
      for (i64 j = 0; j < slots_n; ++j) {
        const unsigned int full = smem_u32(&c->full[at.slot]), empty = smem_u32(&c->empty[at.slot]);
        // The slot's previous use freed by every op warp, and no more than `inflight` slots in flight.
        if (issued >= WEFT_LOADER_SLOTS && !loader_wait(empty, at.parity ^ 1u, stop)) {
          run = false;
          break;
        }
        if (issued >= inflight) {
          if (!loader_wait(smem_u32(&c->full[landed.slot]), landed.parity, stop)) {
            run = false;
            break;
          }
          landed.next();
        }
        const int parts = j < full_parts ? WEFT_BLOCK_WARPS : static_cast<int>(extra);
        if (wi == 0)
          asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full),
                       "r"(parts * kLoaderStageBytes)
                       : "memory");
        if (wi < parts)
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
              "%4;" ::"r"(ring + at.slot * WEFT_LOADER_SLOT_BYTES + wi * kLoaderStageBytes),
              "l"(src + j * kLoaderStageBytes), "r"(kLoaderStageBytes), "r"(full), "l"(policy)
              : "memory");
        at.next();
        ++issued;
      }
    }
  }
  // Whatever was requested lands before the block may retire.
  for (; landed.slot != at.slot || landed.parity != at.parity; landed.next())
    while (!__all_sync(0xffffffffu, mbar_test(smem_u32(&c->full[landed.slot]), landed.parity))) {
    }
}

// Before the warps part: the ring's mbarriers and positions, by thread 0 (the block's barrier after it publishes
// them, and fence.mbarrier_init makes the initialized barriers visible to the bulk copies' completions).
__device__ __forceinline__ void init_weight_loader(char* smem) {
  if (threadIdx.x != 0) return;
  LoaderControl* c = loader_control(smem);
  for (int i = 0; i < WEFT_LOADER_SLOTS; ++i) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(&c->full[i])), "r"(1) : "memory");
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(&c->empty[i])), "r"(WEFT_BLOCK_WARPS)
                 : "memory");
  }
  c->stop = 0;
  for (int w = 0; w < WEFT_BLOCK_WARPS; ++w) c->pos[w] = 0;
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

#endif  // WEFT_DEV_LOADER

}  // namespace weft_dev

#endif  // WEFT_DEVICE_WEIGHT_LOADER_CUH
