// softmax (last dim), argmax (last dim) and reduce (sum / max / mean over one axis), in f32.
// NaN: a softmax row holding a NaN is all NaN; argmax takes the first NaN as the maximum; reduce max
// propagates NaN; sum and mean propagate it naturally (as the reference does).
#ifndef WEFT_DEVICE_OPS_REDUCE_CUH
#define WEFT_DEVICE_OPS_REDUCE_CUH

#include "common.cuh"

namespace weft_dev {

// Rows up to this length are handled by one warp each; longer ones by the whole block.
constexpr long long kRowWarpMaxCols = 1024;

// ---- softmax ----

template <typename T, bool kBlock>
__device__ __forceinline__ void softmax_row(const T* x, T* o, i64 n, int t, int nt, float* scratch) {
  float m = neg_inf();
  visit_row(x, n, t, nt, [&](i64, float v) { m = nan_max(m, v); });
  m = group_reduce_max<kBlock>(m, scratch);
  float s = 0.0f;
  visit_row(x, n, t, nt, [&](i64, float v) { s += expf(v - m); });
  s = group_reduce_sum<kBlock>(s, scratch);
  if constexpr (!kBlock) __syncwarp();
  map_row(o, x, n, t, nt, [&](float v) { return __fdiv_rn(expf(v - m), s); });
}

template <typename T>
__device__ void softmax_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  T* o = out_ptr<T>(a, env);
  const i64 c = view_cols(a);
  float* scratch = reinterpret_cast<float*>(smem);
  if (c <= 0) return;
  if (c <= kRowWarpMaxCols) {
    for (i64 r = a->row0 + warp(); r < a->row1; r += WEFT_BLOCK_WARPS)
      softmax_row<T, false>(x + r * c, o + r * c, c, lane(), WEFT_WARP_THREADS, scratch);
  } else {
    for (i64 r = a->row0; r < a->row1; ++r)
      softmax_row<T, true>(x + r * c, o + r * c, c, tid(), WEFT_BLOCK_THREADS, scratch);
  }
}

// ---- argmax ----

struct ArgBest {
  float v;
  i64 i;
};

// Whether `c` beats `b`: NaN beats every number, and between equals (or two NaNs) the lower index wins. Being
// symmetric in order, it gives the first maximum whatever order the candidates are combined in.
__device__ __forceinline__ bool arg_better(float cv, i64 ci, float bv, i64 bi) {
  const bool cn = cv != cv, bn = bv != bv;
  if (bn) return cn && ci < bi;
  if (cn) return true;
  return cv > bv || (cv == bv && ci < bi);
}

__device__ __forceinline__ ArgBest warp_argbest(ArgBest b) {
#pragma unroll
  for (int off = WEFT_WARP_THREADS / 2; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(WEFT_FULL_MASK, b.v, off);
    const i64 oi = __shfl_xor_sync(WEFT_FULL_MASK, b.i, off);
    if (arg_better(ov, oi, b.v, b.i)) {
      b.v = ov;
      b.i = oi;
    }
  }
  return b;
}

template <typename T, bool kBlock>
__device__ __forceinline__ i64 argmax_row(const T* x, i64 n, int t, int nt, ArgBest* scratch) {
  ArgBest b{neg_inf(), 0x7fffffffffffffffll};
  visit_row(x, n, t, nt, [&](i64 j, float v) {
    if (arg_better(v, j, b.v, b.i)) {
      b.v = v;
      b.i = j;
    }
  });
  b = warp_argbest(b);
  if constexpr (kBlock) {
    block_sync();
    if (lane() == 0) scratch[warp()] = b;
    block_sync();
    b = lane() < WEFT_BLOCK_WARPS ? scratch[lane()] : ArgBest{neg_inf(), 0x7fffffffffffffffll};
    b = warp_argbest(b);
  }
  return n > 0 ? b.i : 0;
}

// A long row on the whole block: the candidates as 32-bit order keys and indices (a 64-bit index and the NaN
// tests of arg_better cost ~3x the instructions per element, and this loop is the whole task). Each thread
// visits its elements in increasing index order, so a strictly greater key keeps the first maximum; the key
// orders numbers as floats do (-0 as +0) and puts every NaN above them. n < 2^31.
__device__ __forceinline__ int arg_key(float v) {
  const int b = __float_as_int(v + 0.0f);
  return v != v ? 0x7fffffff : b >= 0 ? b : b ^ 0x7fffffff;
}

struct ArgKey {
  int key, i;
};

__device__ __forceinline__ bool key_better(ArgKey c, ArgKey b) { return c.key > b.key || (c.key == b.key && c.i < b.i); }

__device__ __forceinline__ ArgKey warp_argkey(ArgKey b) {
#pragma unroll
  for (int off = WEFT_WARP_THREADS / 2; off > 0; off >>= 1) {
    const ArgKey o{__shfl_xor_sync(WEFT_FULL_MASK, b.key, off), __shfl_xor_sync(WEFT_FULL_MASK, b.i, off)};
    if (key_better(o, b)) b = o;
  }
  return b;
}

// Below every element's key (-inf's is 0x807fffff): what a thread that saw no element holds.
__device__ __forceinline__ ArgKey no_arg_key() { return ArgKey{static_cast<int>(0x80000000u), 0x7fffffff}; }

// The block's best of every thread's candidate, in every thread. Called by all threads of the block.
__device__ __forceinline__ ArgKey block_argkey(ArgKey b, ArgKey* scratch) {
  b = warp_argkey(b);
  block_sync();
  if (lane() == 0) scratch[warp()] = b;
  block_sync();
  return warp_argkey(lane() < WEFT_BLOCK_WARPS ? scratch[lane()] : no_arg_key());
}

// The best (key, index) of x[0, n) on the whole block; no_arg_key() for n == 0.
template <typename T>
__device__ __forceinline__ ArgKey argkey_row_block(const T* x, int n, ArgKey* scratch) {
  ArgKey b = no_arg_key();
  auto take = [&](int j, float v) {
    const int k = arg_key(v);
    if (k > b.key) b = ArgKey{k, j};
  };
  visit_row<T, 16, int>(x, n, tid(), WEFT_BLOCK_THREADS, take);
  return block_argkey(b, scratch);
}

template <typename T>
__device__ __forceinline__ int argmax_row_block(const T* x, int n, ArgKey* scratch) {
  return argkey_row_block(x, n, scratch).i;
}

// A long row's argmax split over its columns (ARGMAX with d2 = P parts, task_abi.h), argmax_split.cuh; out of line.
__device__ __noinline__ void argmax_split_run(const weft_task_args* a, const weft_env* env, char* smem);

template <typename T>
__device__ void argmax_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  void* o = env->slots[a->out];
  const i64 n = a->d[0];
  const bool out32 = a->i[0] == WEFT_DEV_I32;
  ArgBest* scratch = reinterpret_cast<ArgBest*>(smem);
  auto store = [&](i64 r, i64 idx) {
    if (out32)
      static_cast<int*>(o)[r] = static_cast<int>(idx);
    else
      static_cast<i64*>(o)[r] = idx;
  };
  if (n <= kRowWarpMaxCols * 2) {
    for (i64 r = a->row0 + warp(); r < a->row1; r += WEFT_BLOCK_WARPS) {
      const i64 idx = argmax_row<T, false>(x + r * n, n, lane(), WEFT_WARP_THREADS, scratch);
      if (lane() == 0) store(r, idx);
    }
  } else {
    for (i64 r = a->row0; r < a->row1; ++r) {
      const i64 idx = n < 0x7fffffffll ? argmax_row_block<T>(x + r * n, static_cast<int>(n), reinterpret_cast<ArgKey*>(smem))
                                       : argmax_row<T, true>(x + r * n, n, tid(), WEFT_BLOCK_THREADS, scratch);
      if (tid() == 0) store(r, idx);
    }
  }
}

// ---- reduce ----

struct SumAcc {
  __device__ __forceinline__ static float init() { return 0.0f; }
  __device__ __forceinline__ static float add(float acc, float v) { return acc + v; }
};
struct MaxAcc {
  __device__ __forceinline__ static float init() { return neg_inf(); }
  __device__ __forceinline__ static float add(float acc, float v) { return nan_max(acc, v); }
};

// x seen as [outer, A, inner] -> out [outer, inner]; output flat elements of the tile, in spans.
template <typename T, typename Acc>
__device__ void reduce_kind(const weft_task_args* a, const T* x, T* o, bool mean, float* scratch) {
  const i64 len = a->d[1], inner = a->d[2];
  const float flen = static_cast<float>(len);
  auto finish = [&](float acc) { return mean ? acc / flen : acc; };
  if (inner <= 0) return;
  for_each_span(a, view_cols(a), [&](i64 begin, i64 n) {
    if (inner == 1) {
      // Contiguous rows of A values: one warp (or the block, for long rows) per output element.
      if (len <= kRowWarpMaxCols) {
        for (i64 e = begin + warp(); e < begin + n; e += WEFT_BLOCK_WARPS) {
          float acc = Acc::init();
          visit_row(x + e * len, len, lane(), WEFT_WARP_THREADS, [&](i64, float v) { acc = Acc::add(acc, v); });
          for (int off = WEFT_WARP_THREADS / 2; off > 0; off >>= 1)
            acc = Acc::add(acc, __shfl_xor_sync(WEFT_FULL_MASK, acc, off));
          if (lane() == 0) o[e] = from_f<T>(finish(acc));
        }
      } else {
        for (i64 e = begin; e < begin + n; ++e) {
          float acc = Acc::init();
          visit_row(x + e * len, len, tid(), WEFT_BLOCK_THREADS, [&](i64, float v) { acc = Acc::add(acc, v); });
          for (int off = WEFT_WARP_THREADS / 2; off > 0; off >>= 1)
            acc = Acc::add(acc, __shfl_xor_sync(WEFT_FULL_MASK, acc, off));
          block_sync();
          if (lane() == 0) scratch[warp()] = acc;
          block_sync();
          if (tid() == 0) {
            float r = scratch[0];
            for (int w = 1; w < WEFT_BLOCK_WARPS; ++w) r = Acc::add(r, scratch[w]);
            o[e] = from_f<T>(finish(r));
          }
        }
      }
      return;
    }
    // Strided: one thread per output element, consecutive threads on consecutive inner indices (coalesced).
    for (i64 e = begin + tid(); e < begin + n; e += WEFT_BLOCK_THREADS) {
      const i64 outer_i = e / inner, in_i = e % inner;
      const T* p = x + outer_i * len * inner + in_i;
      float acc = Acc::init();
      for (i64 k = 0; k < len; ++k) acc = Acc::add(acc, to_f(p[k * inner]));
      o[e] = from_f<T>(finish(acc));
    }
  });
}

template <typename T>
__device__ void reduce_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  T* o = out_ptr<T>(a, env);
  float* scratch = reinterpret_cast<float*>(smem);
  if (a->i[0] == 1)
    reduce_kind<T, MaxAcc>(a, x, o, false, scratch);
  else
    reduce_kind<T, SumAcc>(a, x, o, a->i[0] == 2, scratch);
}

}  // namespace weft_dev

// SOFTMAX: in x [R, C]. Whole rows (C = d[WEFT_D_VIEW_COLS] or col1). Max-subtracted, f32.
WEFT_DEV_OP_BODY(softmax) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::softmax_impl, a, env, smem);
}

// ARGMAX: in x [R, N]; output [R] (view R x 1). d0=N. i0=output dtype (i32 / i64); dtype is x's float dtype.
// First maximum; NaN counts as the maximum.
WEFT_DEV_OP_BODY(argmax) {
  if (a->d[2] > 1) {  // split over columns: its own code, out of line
    weft_dev::argmax_split_run(a, env, smem);
    return;
  }
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::argmax_impl, a, env, smem);
}

// REDUCE: in x seen as [outer, A, inner]; output [outer, inner]. d0=outer, d1=A, d2=inner. i0=kind (0 sum,
// 1 max, 2 mean). Whole rows of the output view (C = d[WEFT_D_VIEW_COLS] or col1).
WEFT_DEV_OP_BODY(reduce) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::reduce_impl, a, env, smem);
}

#endif  // WEFT_DEVICE_OPS_REDUCE_CUH
