// linear_silu_mul: a gate/up projection with SwiGLU in its epilogue, silu(x · gateᵀ) * (x · upᵀ) for a weight
// [2F, K] whose rows [0, F) are the gate's and [F, 2F) the up's. A batched decoder step otherwise runs the
// projection, an op boundary, then silu_mul as an op of its own (~9 us of a Llama-3.2-1B layer at 32 rows).
// Both products are rounded to the dtype before the SwiGLU, as the two ops round them, so the result is theirs. With
// a norm weight (in[2]) the tile normalizes its x rows first, as rmsnorm_linear's do (rmsnorm_rows_staged).
//
// Tensor-core tiles (2..32 rows, bf16 / f16) stream the tile's gate and up rows as one paired stream
// (gemv_mma.cuh): the 8 gate rows of a column group, then its 8 up rows, so one plan and one ring serve both and
// no second stream starts from an empty ring (the form measured in docs/perf.md round 16 paid that). The sums
// wait in shared memory until the block has them all, then every thread stores SwiGLU outputs. Other tiles
// (one row, f32, weights bound unaligned, rows that do not fit) take a warp per column over x in global memory.
#ifndef WEFT_DEVICE_OPS_LINEAR_SILU_MUL_CUH
#define WEFT_DEVICE_OPS_LINEAR_SILU_MUL_CUH

#include "common.cuh"
#include "gemv_mma.cuh"
#include "ops_elementwise.cuh"
#include "ops_fused_linear.cuh"
#include "ops_linear.cuh"
#include "ops_norm.cuh"

namespace weft_dev {

// The tensor-core tile's shared memory: the ring, x rows (K + pad each), the partial sums, then the gate and up
// sums of its columns (weft_mma_swiglu_fits): row r's at ob + r * ld, column 8 p + c's gate at 16 p + c, its up 8
// further (the paired stream's group order, gemv_mma_blocks' n).
template <typename T>
struct SwigluTile {
  T* xs;
  float* parts;
  T* ob;
  i64 ldx;
  int ld;
  __device__ __forceinline__ SwigluTile(const weft_task_args* a, char* smem) {
    const i64 rows = a->row1 - a->row0;
    ldx = a->d[0] + WEFT_MMA_X_PAD;
    xs = reinterpret_cast<T*>(smem + kGemvRingBytes);
    parts = reinterpret_cast<float*>(xs + rows * ldx);  // 16-byte aligned: ldx * 2 is a multiple of 16
    ob = reinterpret_cast<T*>(parts + rows * (WEFT_MMA_PARTIAL_BYTES_PER_ROW / 4));
    ld = static_cast<int>((a->col1 - a->col0 + kMmaGroupRows - 1) / kMmaGroupRows * 2 * kMmaGroupRows);
  }
};

// Before the task's wait: the paired stream's first stages (the same plan as the run's), where the tile takes it.
// Out of line, one call site in the task loop's prefetch_op.
template <typename T>
__device__ __forceinline__ void linear_silu_mul_prologue_t(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* w = in_ptr<T>(a, env, 1);
  const MmaStream ms = gemv_mma_plan<T, false, true>(a, w);
  if (ms.on) gemv_mma_prologue<T, true>(a, w, ms, smem);
}
__device__ __noinline__ void linear_silu_mul_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->dtype == WEFT_DEV_BF16) linear_silu_mul_prologue_t<bf16>(a, env, smem);
  else if (a->dtype == WEFT_DEV_F16) linear_silu_mul_prologue_t<f16>(a, env, smem);
}

// The tensor-core tile; false (nothing done) where the tile does not take it.
template <typename T>
__device__ __forceinline__ bool linear_silu_mul_mma(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* w = in_ptr<T>(a, env, 1);
  const MmaStream ms = gemv_mma_plan<T, false, true>(a, w);
  if (!ms.on) return false;
  const T* x = in_ptr<T>(a, env, 0);
  T* o = out_ptr<T>(a, env);
  const i64 k = a->d[0], f = a->d[1];
  const int rows = static_cast<int>(a->row1 - a->row0), cols = static_cast<int>(a->col1 - a->col0);
  const SwigluTile<T> t(a, smem);
  const T* nw = in_ptr<T>(a, env, 2);  // the norm weight, or null
  if (nw == nullptr) {
    stage_x_rows(t.xs, t.ldx, x + a->row0 * k, k, k, rows, smem);
  } else if (aligned16(x) && aligned16(nw)) {
    rmsnorm_rows_staged<T>(t.xs, t.ldx, x + a->row0 * k, nw, nullptr, k, rows, a->f[0], t.parts, smem);
  } else {  // rows the decoder never has: staged as they are, then normalized a row at a time by the block
    stage_x_rows(t.xs, t.ldx, x + a->row0 * k, k, k, rows, smem);
    block_sync();
    float* scratch = reinterpret_cast<float*>(smem + WEFT_SMEM_BYTES - kGemvScratchBytes);
    for (int r = 0; r < rows; ++r)
      norm_row<T, true, false>(t.xs + r * t.ldx, nw, nullptr, t.xs + r * t.ldx, k, a->f[0], 0, k, tid(),
                               WEFT_BLOCK_THREADS, scratch);
  }
  block_sync();
  T* ob = t.ob;
  const i64 row0 = a->row0;
  const int ld = t.ld;
  auto keep = [=](i64 row, i64 n, float v) { ob[static_cast<int>(row - row0) * ld + static_cast<int>(n)] = from_f<T>(v); };
  gemv_mma_run<T, decltype(keep), true>(a, w, ms, t.xs, t.ldx, t.parts, smem, keep);
  block_sync();  // every sum is in ob: stored from the loop, or by the cut groups' reduction
  for (int e = tid(); e < rows * cols; e += WEFT_BLOCK_THREADS) {
    const int r = static_cast<int>(static_cast<unsigned>(e) / static_cast<unsigned>(cols)), c = e - r * cols;
    const T* gu = ob + r * ld + (c / kMmaGroupRows) * 2 * kMmaGroupRows + c % kMmaGroupRows;
    o[(row0 + r) * f + a->col0 + c] = from_f<T>(__fmul_rn(silu_f(to_f(gu[0])), to_f(gu[kMmaGroupRows])));
  }
  return true;
}

// Any tile: a warp per column, its gate and up dot products with up to kGemvRows x rows at a time (read from global
// memory: this path is for shapes a decoder does not have, or a bucket's tile cut to one row, not for speed); with a
// norm weight a row at a time, normalized into shared memory first by the block. Out of line: the task loop inlines
// the tensor-core tile only.
template <typename T>
__device__ __noinline__ void linear_silu_mul_columns(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* w = in_ptr<T>(a, env, 1);
  const T* nw = in_ptr<T>(a, env, 2);
  T* o = out_ptr<T>(a, env);
  const i64 k = a->d[0], f = a->d[1];
  T* xn = reinterpret_cast<T*>(smem);  // a normalized row (no stream runs on this path: nothing else is in flight)
  float* scratch = reinterpret_cast<float*>(smem + WEFT_SMEM_BYTES - kGemvScratchBytes);
  const int step = nw != nullptr ? 1 : kGemvRows;
  for (i64 r0 = a->row0; r0 < a->row1; r0 += step) {
    const int rows = static_cast<int>(a->row1 - r0 < step ? a->row1 - r0 : step);
    const T* xr = x + r0 * k;
    if (nw != nullptr) {
      block_sync();  // every warp is done with the previous row
      norm_row<T, true, false>(xr, nw, nullptr, xn, k, a->f[0], 0, k, tid(), WEFT_BLOCK_THREADS, scratch);
      block_sync();
      xr = xn;
    }
    const bool vec = aligned16(xr) && aligned16(w) && (k * static_cast<i64>(sizeof(T))) % 16 == 0;
    for (i64 n = a->col0 + warp(); n < a->col1; n += WEFT_BLOCK_WARPS) {
      float g[kGemvRows], u[kGemvRows];
      gemv_column<T, kGemvRows>(xr, w + n * k, k, rows, vec, g);
      gemv_column<T, kGemvRows>(xr, w + (f + n) * k, k, rows, vec, u);
      float mine = 0.0f;  // lane r stores row r
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r)
        if (lane() == r) mine = __fmul_rn(silu_f(to_f(from_f<T>(g[r]))), to_f(from_f<T>(u[r])));
      if (lane() < rows) o[(r0 + lane()) * f + n] = from_f<T>(mine);
    }
  }
}

template <typename T>
__device__ void linear_silu_mul_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->row1 <= a->row0 || a->col1 <= a->col0) return;
  if constexpr (sizeof(T) == 2) {
    if (linear_silu_mul_mma<T>(a, env, smem)) return;
  }
  linear_silu_mul_columns<T>(a, env, smem);
}

// Every tile of the op, out of line (see WEFT_GEMV_OP_RUN, ops_linear.cuh).
static __device__ __noinline__ void linear_silu_mul_general(const weft_task_args* a, const weft_env* env, char* smem) {
  WEFT_DISPATCH_FLOAT(a->dtype, linear_silu_mul_impl, a, env, smem);
}

}  // namespace weft_dev

// LINEAR_SILU_MUL: see task_abi.h. The tensor-core library inlines its tiles into the task loop, as a linear's: out of
// line, a batch-32 tile of Llama-3.2-1B's ran ~1.6 us longer and the step gained nothing (docs/perf.md round 33).
WEFT_DEV_OP_BODY(linear_silu_mul) {
  WEFT_GEMV_OP_RUN(weft_dev::linear_silu_mul_impl, weft_dev::linear_silu_mul_general);
}

#endif  // WEFT_DEVICE_OPS_LINEAR_SILU_MUL_CUH
