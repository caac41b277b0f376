// rmsnorm, head_rmsnorm, layernorm. Statistics in f32 over the whole row (or head); the weight (and bias)
// are applied in f32 before the single rounding to dtype, in the reference's order of operations
// (x * inv * w; (x - mean) * inv * w + b), with __f*_rn so that no multiply-add gets fused.
#ifndef WEFT_DEVICE_OPS_NORM_CUH
#define WEFT_DEVICE_OPS_NORM_CUH

#include "common.cuh"

namespace weft_dev {

// Rows up to this length are normalized by one warp each (8 rows at a time); longer ones by the whole block.
constexpr long long kNormWarpMaxCols = 1024;

// o[j] = fn(x[j], w[j], b[j]) for j in [c0, c1); b == nullptr passes 0.
template <typename T, typename Fn>
__device__ __forceinline__ void write_norm_row(T* o, const T* x, const T* w, const T* b, i64 c0, i64 c1, int t, int nt,
                                               Fn fn) {
  constexpr int N = Vec<T>::N;
  const i64 n = c1 - c0;
  o += c0;
  x += c0;
  w += c0;
  if (b != nullptr) b += c0;
  i64 done = 0;
  if (aligned16(o) && aligned16(x) && aligned16(w) && (b == nullptr || aligned16(b))) {
    const i64 nv = n / N;
    for (i64 v = t; v < nv; v += nt) {
      float xv[N], wv[N], bv[N], ov[N];
      load_vec(x + v * N, xv);
      load_vec(w + v * N, wv);
      if (b != nullptr) {
        load_vec(b + v * N, bv);
      } else {
#pragma unroll
        for (int k = 0; k < N; ++k) bv[k] = 0.0f;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) ov[k] = fn(xv[k], wv[k], bv[k]);
      store_vec(o + v * N, ov);
    }
    done = nv * N;
  }
  for (i64 j = done + t; j < n; j += nt) o[j] = from_f<T>(fn(to_f(x[j]), to_f(w[j]), b != nullptr ? to_f(b[j]) : 0.0f));
}

// Normalizes one row of n values (x, w, b, o at the row's start), writing columns [c0, c1). The group is one
// warp (kBlock false: t = lane, nt = 32) or the whole block. Every x is read before any o is written, so o
// may alias x.
template <typename T, bool kBlock, bool kLayer>
__device__ __forceinline__ void norm_row(const T* x, const T* w, const T* b, T* o, i64 n, float eps, i64 c0, i64 c1,
                                         int t, int nt, float* scratch) {
  const float fn = static_cast<float>(n);
  float mean = 0.0f;
  if constexpr (kLayer) {
    float s = 0.0f;
    visit_row(x, n, t, nt, [&](i64, float v) { s += v; });
    mean = group_reduce_sum<kBlock>(s, scratch) / fn;
  }
  float ss = 0.0f;
  visit_row(x, n, t, nt, [&](i64, float v) {
    const float dv = kLayer ? v - mean : v;
    ss = fmaf(dv, dv, ss);
  });
  ss = group_reduce_sum<kBlock>(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / fn + eps);
  if constexpr (!kBlock) __syncwarp();  // the block variant's reduction already ends with a barrier
  write_norm_row(o, x, w, kLayer ? b : nullptr, c0, c1, t, nt, [&](float xv, float wv, float bv) {
    if constexpr (kLayer) return __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xv, mean), inv), wv), bv);
    return __fmul_rn(__fmul_rn(xv, inv), wv);
  });
}

// rmsnorm of a row of n values in shared memory, in place, by one warp, with norm_row's arithmetic (the same
// sums in the same order as its warp form); w: the norm weight, also in shared memory. Both 16-byte aligned, n a
// multiple of Vec<T>::N.
template <typename T>
__device__ __forceinline__ void rmsnorm_row_in_place(T* row, const T* w, i64 n, float eps) {
  constexpr int N = Vec<T>::N;
  float ss = 0.0f;
  visit_row<T, 1>(row, n, lane(), WEFT_WARP_THREADS, [&](i64, float v) { ss = fmaf(v, v, ss); });
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  __syncwarp();
  for (i64 v = lane(); v < n / N; v += WEFT_WARP_THREADS) {
    float xv[N], wv[N];
    load_vec(row + v * N, xv);
    load_vec(w + v * N, wv);
#pragma unroll
    for (int k = 0; k < N; ++k) xv[k] = __fmul_rn(__fmul_rn(xv[k], inv), wv[k]);
    store_vec(row + v * N, xv);
  }
}

// rmsnorm / layernorm over whole rows of [R, D]; writes the tile's columns.
template <typename T, bool kLayer>
__device__ void norm_rows_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* w = in_ptr<T>(a, env, 1);
  const T* b = kLayer ? in_ptr<T>(a, env, 2) : nullptr;
  T* o = out_ptr<T>(a, env);
  const i64 d = a->d[0];
  const float eps = a->f[0];
  float* scratch = reinterpret_cast<float*>(smem);
  if (d <= 0 || a->col1 <= a->col0) return;
  if (d <= kNormWarpMaxCols) {
    for (i64 r = a->row0 + warp(); r < a->row1; r += WEFT_BLOCK_WARPS)
      norm_row<T, false, kLayer>(x + r * d, w, b, o + r * d, d, eps, a->col0, a->col1, lane(), WEFT_WARP_THREADS,
                                 scratch);
  } else {
    for (i64 r = a->row0; r < a->row1; ++r)
      norm_row<T, true, kLayer>(x + r * d, w, b, o + r * d, d, eps, a->col0, a->col1, tid(), WEFT_BLOCK_THREADS,
                                scratch);
  }
}

template <typename T>
__device__ void rmsnorm_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  norm_rows_impl<T, false>(a, env, smem);
}
template <typename T>
__device__ void layernorm_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  norm_rows_impl<T, true>(a, env, smem);
}

// head_rmsnorm: every hd-sized head of the tile's rows and columns is one rmsnorm row.
template <typename T>
__device__ void head_rmsnorm_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* w = in_ptr<T>(a, env, 1);
  T* o = out_ptr<T>(a, env);
  const i64 c = a->d[0], hd = a->d[1];
  const float eps = a->f[0];
  float* scratch = reinterpret_cast<float*>(smem);
  if (hd <= 0 || a->row1 <= a->row0 || a->col1 <= a->col0) return;
  const i64 h0 = a->col0 / hd, nh = (a->col1 - a->col0) / hd;
  const i64 segs = (a->row1 - a->row0) * nh;
  if (hd <= kNormWarpMaxCols) {
    for (i64 s = warp(); s < segs; s += WEFT_BLOCK_WARPS) {
      const i64 off = (a->row0 + s / nh) * c + (h0 + s % nh) * hd;
      norm_row<T, false, false>(x + off, w, nullptr, o + off, hd, eps, 0, hd, lane(), WEFT_WARP_THREADS, scratch);
    }
  } else {
    for (i64 s = 0; s < segs; ++s) {
      const i64 off = (a->row0 + s / nh) * c + (h0 + s % nh) * hd;
      norm_row<T, true, false>(x + off, w, nullptr, o + off, hd, eps, 0, hd, tid(), WEFT_BLOCK_THREADS, scratch);
    }
  }
}

}  // namespace weft_dev

// RMSNORM: in x [R, D], weight [D]. d0=D. f0=eps. Whole rows (the reduction always spans the row; only the
// tile's columns are written).
WEFT_DEV_OP_BODY(rmsnorm) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::rmsnorm_impl, a, env, smem);
}

// HEAD_RMSNORM: in x [R, C], weight [hd]. d0=C, d1=hd. f0=eps. col0/col1 multiples of hd.
WEFT_DEV_OP_BODY(head_rmsnorm) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::head_rmsnorm_impl, a, env, smem);
}

// LAYERNORM: in x [R, D], weight [D], bias [D] or -1. d0=D. f0=eps. Two-pass (mean, then squared deviations).
WEFT_DEV_OP_BODY(layernorm) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::layernorm_impl, a, env, smem);
}

#endif  // WEFT_DEVICE_OPS_NORM_CUH
