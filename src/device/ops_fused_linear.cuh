// rmsnorm_linear and silu_mul_linear: a streamed GEMV tile whose x rows are staged transformed — normalized, or
// SwiGLU-activated — with the same arithmetic as the rmsnorm and silu_mul device ops, rounded to the dtype as
// their outputs are (a norm's sum of squares may be added in another order: per warp or over the block). Each
// tile does this for itself while its weights stream in (see prefetch_op).
#ifndef WEFT_DEVICE_OPS_FUSED_LINEAR_CUH
#define WEFT_DEVICE_OPS_FUSED_LINEAR_CUH

#include "common.cuh"
#include "ops_elementwise.cuh"
#include "ops_linear.cuh"
#include "ops_norm.cuh"

namespace weft_dev {

// Lowering makes every tile of these ops a streamed one; a tile that is not (weights bound unaligned) records
// an error instead of computing something else.
__device__ __forceinline__ void fused_linear_unsupported(const weft_task_args* a, const weft_env* env, int op) {
  if (tid() == 0) weft_dev::record_error(env, WEFT_DEV_ERR_BAD_TASK, static_cast<unsigned int>(op), 1u, 0u);
  (void)a;
}

// Every tile of the op, out of line (see WEFT_GEMV_OP_RUN, ops_linear.cuh).
static __device__ __noinline__ void rmsnorm_linear_general(const weft_task_args* a, const weft_env* env,
                                                           char* smem);
static __device__ __noinline__ void silu_mul_linear_general(const weft_task_args* a, const weft_env* env,
                                                            char* smem);

// rmsnorm of one row by the whole block into o (shared memory), the batch-1 x stage: every thread requests its x
// vectors into registers and its norm weight vectors into o (cp.async) at once; after the reduction it reads back
// the weight it copied itself (visible to it after its wait, which also covers the ring's earlier stages, issued
// before the task's wait). norm_row reads the weight only after the reduction: one more L2 round trip on the
// critical path of every qkv and gate_up tile (0.4-0.5 us per task; batch 1 1.2-2.7% faster, H200, docs/perf.md
// round 19). Same sums in the same order as norm_row<T, true, false>, so the same values. False, with nothing done,
// where the row takes more than kMaxV vectors per thread or is not made of aligned 16-byte vectors.
// With `tenv` set, x is a tagged tensor's words (tagged.cuh, bf16 only; slot `tslot`), each vector loaded once
// current.
// (Only "<arch>_simt_tagged" has tagged tensors: elsewhere tenv is always null.)
template <typename T, int kMaxV>
__device__ __forceinline__ bool rmsnorm_row_weight_async(const T* x, const T* w, T* o, i64 n, float eps,
                                                         float* scratch, const weft_env* tenv = nullptr,
                                                         int tslot = -1) {
  constexpr int N = Vec<T>::N;
  if (n % N != 0 || n / N > static_cast<i64>(kMaxV) * WEFT_BLOCK_THREADS || !aligned16(x) || !aligned16(w) ||
      !aligned16(o))
    return false;
  const int nv = static_cast<int>(n / N);
  uint4 xr[kMaxV];
#pragma unroll
  for (int u = 0; u < kMaxV; ++u) {
    const int v = tid() + u * WEFT_BLOCK_THREADS;
    if (v < nv) {
      cp_async16_keep(static_cast<unsigned int>(__cvta_generic_to_shared(o + v * N)), w + v * N);
      if (!WEFT_DEV_TAGGED || tenv == nullptr) xr[u] = *reinterpret_cast<const uint4*>(x + v * N);
    }
  }
  cp_async_commit();
#if WEFT_DEV_TAGGED
  if (tenv != nullptr) {  // every vector's words requested before the first is checked
    static_assert(kMaxV <= 2, "the tagged words of kMaxV vectors are held at once");
    const unsigned int tag = step_tag(tenv);
    const unsigned int* xw = reinterpret_cast<const unsigned int*>(x);
    uint4 wr[kMaxV][2];
#pragma unroll
    for (int u = 0; u < kMaxV; ++u) {
      const int v = tid() + u * WEFT_BLOCK_THREADS;
      if (v < nv) {
        wr[u][0] = ld_relaxed_v4(xw + v * 8);
        wr[u][1] = ld_relaxed_v4(xw + v * 8 + 4);
      }
    }
#pragma unroll
    for (int u = 0; u < kMaxV; ++u) {
      const int v = tid() + u * WEFT_BLOCK_THREADS;
      if (v < nv) {
        if (!(tags_current(wr[u][0], tag) && tags_current(wr[u][1], tag)))
          tagged_retry<2>(xw + v * 8, tag, wr[u], tenv, tslot, static_cast<i64>(v) * 8);
        xr[u] = tagged_values(wr[u]);
      }
    }
  }
#endif
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kMaxV; ++u) {
    if (tid() + u * WEFT_BLOCK_THREADS < nv) {
      float xv[N];
      unpack_vec<T>(xr[u], xv);
#pragma unroll
      for (int k = 0; k < N; ++k) ss = fmaf(xv[k], xv[k], ss);
    }
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  cp_async_wait<0>();
#pragma unroll
  for (int u = 0; u < kMaxV; ++u) {
    const int v = tid() + u * WEFT_BLOCK_THREADS;
    if (v < nv) {
      float xv[N], wv[N];
      unpack_vec<T>(xr[u], xv);
      load_vec(o + v * N, wv);
#pragma unroll
      for (int k = 0; k < N; ++k) xv[k] = __fmul_rn(__fmul_rn(xv[k], inv), wv[k]);
      store_vec(o + v * N, xv);
    }
  }
  return true;
}

// The block-wide norm of one row, out of line: rmsnorm_one_row_x's fallback, for rows no decode step has.
template <typename T>
__device__ __noinline__ void rmsnorm_one_row_general(const T* x_row, const T* nw, T* xs, i64 k, float eps,
                                                     float* scratch) {
  norm_row<T, true, false>(x_row, nw, nullptr, xs, k, eps, 0, k, tid(), WEFT_BLOCK_THREADS, scratch);
}

// rmsnorm_linear's x stage for a tile of one row (x_row) by the whole block into xs (one_row_gemv). With `tenv`, x_row
// is tagged words (lowering tags only rows the fast path takes: tagged_handoffs.cpp); false for a tagged row it does
// not take.
template <typename T>
__device__ __forceinline__ bool rmsnorm_one_row_x(const T* x_row, const T* nw, T* xs, i64 k, float eps, float* scratch,
                                                  const weft_env* tenv = nullptr, int tslot = -1) {
  if (rmsnorm_row_weight_async<T, 2>(x_row, nw, xs, k, eps, scratch, tenv, tslot)) return true;
  if (tenv != nullptr) return false;
  rmsnorm_one_row_general<T>(x_row, nw, xs, k, eps, scratch);
  return true;
}

#if WEFT_DEV_TAGGED
// silu_mul_linear's x stage of one row from tagged gate/up words g ([2K], tagged.cuh) into xs, by the whole block:
// the same arithmetic as silu_mul_x_rows. Each thread requests the words of up to 2 vectors of gate and of up before
// it checks the first.
__device__ __forceinline__ void silu_mul_tagged_x(bf16* xs, const unsigned int* g, i64 k, const weft_env* env,
                                                  int slot) {
  constexpr int N = 8, kBatch = 2;
  const unsigned int tag = step_tag(env);
  const int nv = static_cast<int>(k / N);
  for (int base = tid(); base < nv; base += kBatch * WEFT_BLOCK_THREADS) {
    uint4 gw[kBatch][2], uw[kBatch][2];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int v = base + b * WEFT_BLOCK_THREADS;
      if (v < nv) {
        gw[b][0] = ld_relaxed_v4(g + v * N);
        gw[b][1] = ld_relaxed_v4(g + v * N + 4);
        uw[b][0] = ld_relaxed_v4(g + k + v * N);
        uw[b][1] = ld_relaxed_v4(g + k + v * N + 4);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int v = base + b * WEFT_BLOCK_THREADS;
      if (v >= nv) continue;
      if (!(tags_current(gw[b][0], tag) && tags_current(gw[b][1], tag)))
        tagged_retry<2>(g + v * N, tag, gw[b], env, slot, static_cast<i64>(v) * N);
      if (!(tags_current(uw[b][0], tag) && tags_current(uw[b][1], tag)))
        tagged_retry<2>(g + k + v * N, tag, uw[b], env, slot, k + static_cast<i64>(v) * N);
      float gv[N], uv[N], ov[N];
      unpack_vec<bf16>(tagged_values(gw[b]), gv);
      unpack_vec<bf16>(tagged_values(uw[b]), uv);
#pragma unroll
      for (int j = 0; j < N; ++j) ov[j] = __fmul_rn(silu_f(gv[j]), uv[j]);
      store_vec(xs + v * N, ov);
    }
  }
}
#endif  // WEFT_DEV_TAGGED

// silu_mul_linear's x stage: rows [row0, row0 + rows) of gate/up g ([.., 2K]) activated into xs (row stride ldx).
// Rows of k are whole 16-byte vectors here (the streamed path needs 512-byte weight rows).
template <typename T>
__device__ __forceinline__ void silu_mul_x_rows(T* xs, i64 ldx, const T* g, i64 row0, i64 rows, i64 k) {
  constexpr int N = Vec<T>::N;
  const int per_row = static_cast<int>(k / N);
  load_batched<2>(
      static_cast<int>(rows) * per_row, tid(), WEFT_BLOCK_THREADS,
      [&](int e) {
        const T* gr = g + (row0 + e / per_row) * 2 * k + (e % per_row) * N;
        return uint4_pair{*reinterpret_cast<const uint4*>(gr), *reinterpret_cast<const uint4*>(gr + k)};
      },
      [&](int e, const uint4_pair& gu) {
        float gv[N], uv[N], ov[N];
        unpack_vec<T>(gu.first, gv);
        unpack_vec<T>(gu.second, uv);
#pragma unroll
        for (int j = 0; j < N; ++j) ov[j] = __fmul_rn(silu_f(gv[j]), uv[j]);
        store_vec(xs + (e / per_row) * ldx + (e % per_row) * N, ov);
      });
}

// The x stage of a tensor-core tile that normalizes its rows (rmsnorm_linear; linear_silu_mul with a norm weight), by
// the whole block: the rows of x (bulk copies where stage_x_rows takes them) into xs at stride ldx, then every row
// normalized in place with the rmsnorm op's arithmetic (its sum of squares in another order): each thread sums its
// vectors of four rows at a time, the warps' sums meet in `red` (rows x (warps + 1) floats: the tile's partial-sum
// region, unused until its stream ends), and every thread scales its vectors. The norm weight nw is requested into
// w (shared memory) beside x, its copies covered by the stage's wait, or, with w null, read from nw, the thread's
// first vector requested before the stage so that its round trip overlaps x's. The warp-per-row form copied x and
// the weight one after the other (two round trips) and left each warp a row of 2048 alone: +4.5 us in every
// batch-32 q/k/v tile (docs/perf.md round 35). x, nw and w 16-byte aligned, k a multiple of Vec<T>::N.
template <typename T>
__device__ __forceinline__ void rmsnorm_rows_staged(T* xs, i64 ldx, const T* x0, const T* nw, T* w, i64 k, i64 rows,
                                                    float eps, float* red, char* smem) {
  constexpr int N = Vec<T>::N, kGroup = 4;
  const int per_row = static_cast<int>(k / N), nrows = static_cast<int>(rows);
  float w0[N];
  if (w != nullptr) {
    for (int v = tid(); v < per_row; v += WEFT_BLOCK_THREADS)
      cp_async16_keep(static_cast<unsigned int>(__cvta_generic_to_shared(w + v * N)), nw + v * N);
    cp_async_commit();
  } else if (tid() < per_row) {
    load_vec(nw + tid() * N, w0);
  }
  stage_x_rows(xs, ldx, x0, k, k, rows, smem);  // ends with cp_async_wait<0>: the weight has landed too
  block_sync();  // the rows (thread 0 waited for the bulk copies) and the weight, seen by every thread
  for (int r0 = 0; r0 < nrows; r0 += kGroup) {
    float ss[kGroup] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int v = tid(); v < per_row; v += WEFT_BLOCK_THREADS) {
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        if (r0 + i >= nrows) break;
        float xv[N];
        load_vec(xs + (r0 + i) * ldx + v * N, xv);
#pragma unroll
        for (int j = 0; j < N; ++j) ss[i] = fmaf(xv[j], xv[j], ss[i]);
      }
    }
#pragma unroll
    for (int off = WEFT_WARP_THREADS / 2; off > 0; off >>= 1)
#pragma unroll
      for (int i = 0; i < kGroup; ++i) ss[i] += __shfl_xor_sync(0xffffffffu, ss[i], off);
    if (lane() == 0)
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        if (r0 + i < nrows) red[(r0 + i) * WEFT_BLOCK_WARPS + warp()] = ss[i];
  }
  block_sync();
  float* inv = red + nrows * WEFT_BLOCK_WARPS;
  if (tid() < nrows) {
    float t = 0.0f;
#pragma unroll
    for (int i = 0; i < WEFT_BLOCK_WARPS; ++i) t += red[tid() * WEFT_BLOCK_WARPS + i];
    inv[tid()] = 1.0f / sqrtf(t / static_cast<float>(k) + eps);
  }
  block_sync();
  for (int v = tid(); v < per_row; v += WEFT_BLOCK_THREADS) {
    float wv[N];
    if (w != nullptr) {
      load_vec(w + v * N, wv);
    } else if (v == static_cast<int>(tid())) {
#pragma unroll
      for (int j = 0; j < N; ++j) wv[j] = w0[j];
    } else {
      load_vec(nw + v * N, wv);
    }
    for (int r = 0; r < nrows; ++r) {
      const float f = inv[r];
      float xv[N];
      load_vec(xs + r * ldx + v * N, xv);
#pragma unroll
      for (int j = 0; j < N; ++j) xv[j] = __fmul_rn(__fmul_rn(xv[j], f), wv[j]);
      store_vec(xs + r * ldx + v * N, xv);
    }
  }
}

// The batched rmsnorm_linear x stage: 1 (the default) the block-wide one above, 0 a warp per row as it was
// (docs/perf.md round 56: Qwen3-0.6B batch 8 -2.1% a token step, even loop). A measurement build may set it
// (scripts/devlib-build.sh with DEVLIB_NVCC_FLAGS=-DWEFT_NORM_STAGE_BLOCK=0|1).
#ifndef WEFT_NORM_STAGE_BLOCK
#define WEFT_NORM_STAGE_BLOCK 1
#endif

template <typename T>
__device__ void rmsnorm_linear_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* nw = in_ptr<T>(a, env, 1);
  const i64 k = a->d[0];
  const float eps = a->f[0];
  if (a->row1 <= a->row0 || a->col1 <= a->col0) return;
  float* scratch = reinterpret_cast<float*>(smem + WEFT_SMEM_BYTES - kGemvScratchBytes);
  const bool ok = linear_streamed<T>(a, env, smem, 2, [&](T* xs, i64 rows, i64 ldx, T* spare) {
    // With the rmsnorm op's arithmetic. Tensor-core tiles (several rows): the rows and the norm weight copied into
    // shared memory at once, then normalized there in place by the whole block (rmsnorm_rows_staged). Else as the
    // rmsnorm op does it: a warp per row up to kNormWarpMaxCols, else the whole block per row; a single row
    // (batch-1 decode) by the whole block too: one warp of eight normalizing Qwen3-0.6B's 1024 columns alone kept
    // the other seven waiting on the critical path (1.30 -> 1.25 ms per token, H200).
    if (WEFT_NORM_STAGE_BLOCK && spare != nullptr && aligned16(x) && aligned16(nw)) {
      // The tile's partial sums lie right behind its x rows (linear_streamed).
      rmsnorm_rows_staged<T>(xs, ldx, x + a->row0 * k, nw, spare, k, rows, eps,
                             reinterpret_cast<float*>(xs + rows * ldx), smem);
    } else if (spare != nullptr && aligned16(x) && aligned16(nw)) {
      stage_rows_async(xs, ldx, x + a->row0 * k, k, k, rows);
      stage_rows_async(spare, k, nw, k, k, 1);
      block_sync();
      for (i64 r = warp(); r < rows; r += WEFT_BLOCK_WARPS) rmsnorm_row_in_place<T>(xs + r * ldx, spare, k, eps);
    } else if (k <= kNormWarpMaxCols && rows > 1) {
      for (i64 r = warp(); r < rows; r += WEFT_BLOCK_WARPS)
        norm_row<T, false, false>(x + (a->row0 + r) * k, nw, nullptr, xs + r * ldx, k, eps, 0, k, lane(),
                                  WEFT_WARP_THREADS, scratch);
    } else {
      for (i64 r = 0; r < rows; ++r)
        norm_row<T, true, false>(x + (a->row0 + r) * k, nw, nullptr, xs + r * ldx, k, eps, 0, k, tid(),
                                 WEFT_BLOCK_THREADS, scratch);
    }
  });
  if (!ok) fused_linear_unsupported(a, env, WEFT_DEV_OP_RMSNORM_LINEAR);
}

template <typename T>
__device__ void silu_mul_linear_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* g = in_ptr<T>(a, env, 0);
  const i64 k = a->d[0];
  if (a->row1 <= a->row0 || a->col1 <= a->col0) return;
  const bool ok = linear_streamed<T>(a, env, smem, 1, [&](T* xs, i64 rows, i64 ldx, T*) {
    silu_mul_x_rows<T>(xs, ldx, g, a->row0, rows, k);
  });
  if (!ok) fused_linear_unsupported(a, env, WEFT_DEV_OP_SILU_MUL_LINEAR);
}

}  // namespace weft_dev

// RMSNORM_LINEAR: see task_abi.h.
__device__ __noinline__ void weft_dev::rmsnorm_linear_general(const weft_task_args* a, const weft_env* env,
                                                             char* smem) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::rmsnorm_linear_impl, a, env, smem);
}
WEFT_DEV_OP_BODY(rmsnorm_linear) {
  WEFT_GEMV_OP_RUN(weft_dev::rmsnorm_linear_impl, weft_dev::rmsnorm_linear_general);
}

// SILU_MUL_LINEAR: see task_abi.h.
__device__ __noinline__ void weft_dev::silu_mul_linear_general(const weft_task_args* a, const weft_env* env,
                                                              char* smem) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::silu_mul_linear_impl, a, env, smem);
}
WEFT_DEV_OP_BODY(silu_mul_linear) {
  WEFT_GEMV_OP_RUN(weft_dev::silu_mul_linear_impl, weft_dev::silu_mul_linear_general);
}

#endif  // WEFT_DEVICE_OPS_FUSED_LINEAR_CUH
