// The CUDA-core library's one inlined GEMV: a streamed tile of one x row of the library's dtype (OneRowT) with
// kGemvOneRowUnits-unit stages, for all three streamed-GEMV ops — linear, rmsnorm_linear, silu_mul_linear — which
// differ only in their x stage. A decode step runs nothing else on its projections, and one stream loop in the task
// loop instead of one per op keeps the loop's code small: its instruction footprint costs time even where it does
// not run (docs/perf.md, round 27). The task loop calls it once, before its switch over the ops (task_loop.cuh);
// the tensor-core library inlines every tile in each op's body instead (WEFT_GEMV_OP_RUN, ops_linear.cuh).
#ifndef WEFT_DEVICE_GEMV_ONE_ROW_CUH
#define WEFT_DEVICE_GEMV_ONE_ROW_CUH

#include "ops_fused_linear.cuh"

namespace weft_dev {

// The plan of a one-row tile's stream (its weight and this warp's rows), left by its prologue
// (linear_stream_prologue_hot) for its run, per warp, below the reduction scratch: the run, after the task's wait
// and on the critical path, reads it back instead of planning again (a chain of shared-memory loads and 64-bit
// arithmetic; ~0.3 us pass from the wait to the x stage; Qwen3-0.6B -0.4% / -0.6% per token, H200, docs/perf.md
// round 28). Tagged with the task's index: the prologue of every tile of the library's dtype writes the record
// (task -1 where the run cannot use it) right before that task's run, so a tag that matches is this task's, and one
// that does not means the tile is not for this path.
struct GemvPlanRecord {
  const void* w;
  long long n0, n1, spr;
  int task, pad;
};
static_assert(sizeof(GemvPlanRecord) == WEFT_GEMV_PLAN_RECORD_BYTES, "lowering reserves this much per warp");
constexpr int kGemvPlanRecordOffset =
    WEFT_SMEM_BYTES - kGemvScratchBytes - WEFT_BLOCK_WARPS * static_cast<int>(sizeof(GemvPlanRecord));
__device__ __forceinline__ GemvPlanRecord* gemv_plan_record(char* smem) {
  return reinterpret_cast<GemvPlanRecord*>(smem + kGemvPlanRecordOffset) + warp();
}
// Whether a one-row tile of K `k` leaves the record alone: its x row ends below it.
__device__ __forceinline__ bool gemv_plan_record_fits(i64 k) {
  return kGemvRingBytes + k * static_cast<i64>(sizeof(OneRowT)) <= kGemvPlanRecordOffset;
}

// The slots of a one-row tile of n output columns in the weight loader's ring: its widest warp's stages (warps take
// n / WEFT_BLOCK_WARPS columns, the first n % WEFT_BLOCK_WARPS one more; gemv_stream_plan).
__device__ __forceinline__ i64 one_row_slots(i64 n, i64 spr) {
  return (n / WEFT_BLOCK_WARPS + (n % WEFT_BLOCK_WARPS != 0 ? 1 : 0)) * spr;
}

__device__ __forceinline__ bool is_gemv_op(int op) {
  return op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_RMSNORM_LINEAR || op == WEFT_DEV_OP_SILU_MUL_LINEAR;
}

// Runs task `a` of GEMV op `op` (is_gemv_op) and returns true when it is such a tile; false, having done nothing,
// for any other (the op's general body runs it). The same arithmetic as the ops' bodies (ops_linear.cuh,
// ops_fused_linear.cuh); prefetch_op started its stream (linear_stream_prologue_hot).
__device__ __forceinline__ bool one_row_gemv(int op, const weft_task_args* a, const weft_env* env, char* smem) {
  using T = OneRowT;
  if (a->row1 - a->row0 != 1 || a->dtype != WEFT_DEVLIB_ONE_ROW_DTYPE || a->col1 <= a->col0) return false;
  const int w_in = op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1;
  // The prologue's plan; none (a tile without kGemvOneRowUnits stages, or an x row reaching the record): the op's
  // general body runs it.
  const GemvPlanRecord* r = gemv_plan_record(smem);
#if !WEFT_DEV_TAGGED
  if (r->task != env->task_index) return false;
#else
  const unsigned int tags = static_cast<unsigned int>(a->i[WEFT_TAGGED_ARG]);
  if (r->task != env->task_index) {
    // Lowering tags only tiles this path takes but for their weights' alignment, which only the run sees: no other
    // body reads tagged words.
    if (tags != 0u) {
      if (tid() == 0)
        record_error(env, WEFT_DEV_ERR_BAD_TASK, static_cast<unsigned int>(op), WEFT_DEV_BAD_TAGGED_TILE, 0u);
      return true;
    }
    return false;
  }
#endif
  const T* w = static_cast<const T*>(r->w);
  const GemvStream st{kGemvOneRowUnits, r->n0, r->n1, r->spr};
  const i64 k = a->d[0];
  const T* x = in_ptr<T>(a, env, 0) + a->row0 * (op == WEFT_DEV_OP_SILU_MUL_LINEAR ? 2 * k : k);
  T* xs = reinterpret_cast<T*>(smem + kGemvRingBytes);
#if WEFT_DEV_TAGGED && WEFT_DEVLIB_ONE_ROW_DTYPE == WEFT_DEV_BF16  // only bf16 is tagged
  if (tags & WEFT_TAGGED_X) {  // x is tagged words (tagged.cuh): twice the elements' bytes per row
    const unsigned int* xw = reinterpret_cast<const unsigned int*>(in_ptr<T>(a, env, 0)) +
                             a->row0 * (op == WEFT_DEV_OP_SILU_MUL_LINEAR ? 2 * k : k);
    if (op == WEFT_DEV_OP_RMSNORM_LINEAR) {
      if (!rmsnorm_one_row_x<T>(reinterpret_cast<const T*>(xw), in_ptr<T>(a, env, 1), xs, k, a->f[0],
                                reinterpret_cast<float*>(smem + WEFT_SMEM_BYTES - kGemvScratchBytes), env, a->in[0]) &&
          tid() == 0)
        record_error(env, WEFT_DEV_ERR_BAD_TASK, static_cast<unsigned int>(op), WEFT_DEV_BAD_TAGGED_TILE, 1u);
    } else if (op == WEFT_DEV_OP_SILU_MUL_LINEAR) {
      silu_mul_tagged_x(xs, xw, k, env, a->in[0]);
    } else {
      stage_tagged_x(xs, xw, k, env, a->in[0]);
    }
  } else
#endif
  if (op == WEFT_DEV_OP_RMSNORM_LINEAR)
    rmsnorm_one_row_x<T>(x, in_ptr<T>(a, env, 1), xs, k, a->f[0],
                         reinterpret_cast<float*>(smem + WEFT_SMEM_BYTES - kGemvScratchBytes));
  else if (op == WEFT_DEV_OP_SILU_MUL_LINEAR)
    silu_mul_x_rows<T>(xs, k, x, 0, 1, k);
  else
    stage_x_rows(xs, k, x, k, k, 1);
#if WEFT_DEV_POLLER_WARP_FREE
  if (warp() == WEFT_BLOCK_WARPS - 1) cp_async_wait<0>();  // warp 0's prologue stages, for warp 0 after the barrier
#endif
  block_sync();
#if WEFT_DEV_TAGGED
  LinearOut<T> out{in_ptr<T>(a, env, w_in + 1), in_ptr<T>(a, env, w_in + 2), out_ptr<T>(a, env), a->d[1]};
  out.tagged = tags;
  out.tag = step_tag(env);
  out.out_tag = (out.tag - ((env->tuning & WEFT_TUNE_TAGGED_STALE) ? 1u : 0u)) & 0xffffu;
  out.env = env;
  out.res_slot = a->in[w_in + 2];
#else
  const LinearOut<T> out{in_ptr<T>(a, env, w_in + 1), in_ptr<T>(a, env, w_in + 2), out_ptr<T>(a, env), a->d[1]};
#endif
#if WEFT_DEV_LOADER
  // The weight loader's stream (weight_loader.cuh): every warp walks the tile's slots, as many as its widest warp's
  // stages. A failed wait has recorded its error; the launch reports it.
  if (env->tuning & WEFT_TUNE_LOADER_OFF)
    gemv_stream_units<T, 1, kGemvOneRowUnits>(a, w, st, xs, smem, out);
  else
    gemv_stream_units<T, 1, kGemvOneRowUnits, LinearOut<T>, true>(a, w, st, xs, smem, out, env,
                                                                   one_row_slots(a->col1 - a->col0, st.spr));
#else
  gemv_stream_units<T, 1, kGemvOneRowUnits>(a, w, st, xs, smem, out);
#endif
  return true;
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_GEMV_ONE_ROW_CUH
