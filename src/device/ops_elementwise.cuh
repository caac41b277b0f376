// Elementwise ops: add, mul (broadcast over a 4-D view), silu, gelu, silu_mul. f32 math in the reference's
// order of operations (__f*_rn where a multiply-add could otherwise be fused), one rounding to dtype.
#ifndef WEFT_DEVICE_OPS_ELEMENTWISE_CUH
#define WEFT_DEVICE_OPS_ELEMENTWISE_CUH

#include "common.cuh"

namespace weft_dev {

// o[j] = fn(x[j]) for j in [0, n), block-wide.
template <typename T, typename Fn>
__device__ __forceinline__ void map_span(T* o, const T* x, i64 n, Fn fn) {
  map_row(o, x, n, tid(), WEFT_BLOCK_THREADS, fn);
}

// o[j] = fn(x[j * sx], y[j * sy]) for j in [0, n), block-wide. Strides are 1 (dense) or 0 (broadcast); others
// take the scalar path.
template <typename T, typename Fn>
__device__ __forceinline__ void map_span2(T* o, const T* x, i64 sx, const T* y, i64 sy, i64 n, Fn fn) {
  constexpr int N = Vec<T>::N;
  const int t = tid(), nt = WEFT_BLOCK_THREADS;
  i64 done = 0;
  const bool vx = sx == 0 || (sx == 1 && aligned16(x)), vy = sy == 0 || (sy == 1 && aligned16(y));
  if (aligned16(o) && vx && vy) {
    const i64 nv = n / N;
    const float x0 = sx == 0 && n > 0 ? to_f(x[0]) : 0.0f, y0 = sy == 0 && n > 0 ? to_f(y[0]) : 0.0f;
    for (i64 v = t; v < nv; v += nt) {
      float xv[N], yv[N];
      if (sx != 0) {
        load_vec(x + v * N, xv);
      } else {
#pragma unroll
        for (int e = 0; e < N; ++e) xv[e] = x0;
      }
      if (sy != 0) {
        load_vec(y + v * N, yv);
      } else {
#pragma unroll
        for (int e = 0; e < N; ++e) yv[e] = y0;
      }
#pragma unroll
      for (int e = 0; e < N; ++e) xv[e] = fn(xv[e], yv[e]);
      store_vec(o + v * N, xv);
    }
    done = nv * N;
  }
  for (i64 j = done + t; j < n; j += nt) o[j] = from_f<T>(fn(to_f(x[j * sx]), to_f(y[j * sy])));
}

// ---- add / mul ----
// Output dims d0..d3 (leading 1s), a's element strides d4..d7 and b's d8..d11 (0 where broadcast). The 2-D
// view's C is d3, so row r of the view is the 3-D index (r / (d1*d2), (r / d2) % d1, r % d2).
template <typename T, typename Fn>
__device__ void broadcast_impl(const weft_task_args* a, const weft_env* env, Fn fn) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* y = in_ptr<T>(a, env, 1);
  T* o = out_ptr<T>(a, env);
  const i64 d1 = a->d[1], d2 = a->d[2], c = a->d[3];
  const i64 *sa = &a->d[4], *sb = &a->d[8];
  if (a->row1 <= a->row0 || a->col1 <= a->col0 || d1 <= 0 || d2 <= 0) return;
  const i64 nc = a->col1 - a->col0;
  auto base = [&](const i64* s, i64 r) { return (r / (d1 * d2)) * s[0] + ((r / d2) % d1) * s[1] + (r % d2) * s[2]; };
  if (nc >= WEFT_BLOCK_THREADS) {
    // Long rows: the block sweeps one row at a time, vectorized where the strides allow.
    for (i64 r = a->row0; r < a->row1; ++r)
      map_span2(o + r * c + a->col0, x + base(sa, r) + a->col0 * sa[3], sa[3], y + base(sb, r) + a->col0 * sb[3],
                sb[3], nc, fn);
    return;
  }
  // Short rows: every thread takes whole elements of the tile.
  const i64 total = (a->row1 - a->row0) * nc;
  for (i64 e = tid(); e < total; e += WEFT_BLOCK_THREADS) {
    const i64 r = a->row0 + e / nc, col = a->col0 + e % nc;
    o[r * c + col] = from_f<T>(fn(to_f(x[base(sa, r) + col * sa[3]]), to_f(y[base(sb, r) + col * sb[3]])));
  }
}

struct AddOp {
  __device__ __forceinline__ float operator()(float p, float q) const { return __fadd_rn(p, q); }
};
struct MulOp {
  __device__ __forceinline__ float operator()(float p, float q) const { return __fmul_rn(p, q); }
};

template <typename T>
__device__ void add_impl(const weft_task_args* a, const weft_env* env, char*) {
  broadcast_impl<T>(a, env, AddOp());
}
template <typename T>
__device__ void mul_impl(const weft_task_args* a, const weft_env* env, char*) {
  broadcast_impl<T>(a, env, MulOp());
}

// ---- unary ----

// x / (1 + e^-x) with the SFU's exp2 and reciprocal: a few instructions where expf and an IEEE division take
// ~40. A block runs only 8 warps, so the SwiGLU stage of a fused down projection (32 of these per thread at
// K 8192) waits on dependent instructions on the critical path of every layer (1.3 us of it, H200). Relative
// error below 1e-5 for |x| < 80 (__expf: 2 + 1.16 |x| ulps), which the rounding to bf16 / f16 hides; for
// x < -87 the result is 0 or -0 where the exact value is below 1e-36 in magnitude.
__device__ __forceinline__ float silu_f(float v) { return __fdividef(v, 1.0f + __expf(-v)); }

__device__ __forceinline__ float gelu_tanh_f(float v) {
  const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, v), v), v);
  const float th = tanhf(__fmul_rn(0.7978845608028654f, __fadd_rn(v, cube)));
  return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, th));
}
__device__ __forceinline__ float gelu_erf_f(float v) {
  return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, 0.7071067811865476f))));
}

template <typename T, typename Fn>
__device__ __forceinline__ void unary_impl(const weft_task_args* a, const weft_env* env, Fn fn) {
  const T* x = in_ptr<T>(a, env, 0);
  T* o = out_ptr<T>(a, env);
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) { map_span(o + begin, x + begin, n, fn); });
}

template <typename T>
__device__ void silu_impl(const weft_task_args* a, const weft_env* env, char*) {
  unary_impl<T>(a, env, [](float v) { return silu_f(v); });
}

template <typename T>
__device__ void gelu_impl(const weft_task_args* a, const weft_env* env, char*) {
  if (a->i[0] == 1)
    unary_impl<T>(a, env, [](float v) { return gelu_tanh_f(v); });
  else
    unary_impl<T>(a, env, [](float v) { return gelu_erf_f(v); });
}

// silu(gate) * up; without `up`, gate rows are [gate | up] of 2F values.
template <typename T>
__device__ void silu_mul_impl(const weft_task_args* a, const weft_env* env, char*) {
  const T* g = in_ptr<T>(a, env, 0);
  const T* u = in_ptr<T>(a, env, 1);
  T* o = out_ptr<T>(a, env);
  const i64 f = a->d[0];
  auto fn = [](float gv, float uv) { return __fmul_rn(silu_f(gv), uv); };
  if (u != nullptr) {
    for_each_span(a, f, [&](i64 begin, i64 n) { map_span2(o + begin, g + begin, 1, u + begin, 1, n, fn); });
    return;
  }
  const i64 nc = a->col1 - a->col0;
  if (nc <= 0) return;
  for (i64 r = a->row0; r < a->row1; ++r) {
    const T* gr = g + r * 2 * f + a->col0;
    map_span2(o + r * f + a->col0, gr, 1, gr + f, 1, nc, fn);
  }
}

}  // namespace weft_dev

// ADD, MUL: in a, b broadcast to the output, all seen as 4-D: d0..d3 output dims, d4..d7 a's strides, d8..d11
// b's strides (0 where broadcast). The view's C is d3.
WEFT_DEV_OP_BODY(add) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::add_impl, a, env, smem);
}
WEFT_DEV_OP_BODY(mul) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::mul_impl, a, env, smem);
}

// SILU: in x. Elementwise; C = d[WEFT_D_VIEW_COLS] or col1 (whole rows).
WEFT_DEV_OP_BODY(silu) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::silu_impl, a, env, smem);
}

// GELU: in x. i0=1 tanh form, 0 erf. C as for SILU.
WEFT_DEV_OP_BODY(gelu) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::gelu_impl, a, env, smem);
}

// SILU_MUL: in gate, up or -1. d0=F (= C). Without up, gate is [R, 2F]: gate cols [0,F), up [F,2F).
WEFT_DEV_OP_BODY(silu_mul) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::silu_mul_impl, a, env, smem);
}

#endif  // WEFT_DEVICE_OPS_ELEMENTWISE_CUH
