// attention_decode_qkv: attention_decode fed by the packed q | k | v projection. The task splits its q heads,
// its k head and its v head out of qkv, applies the optional per-head RMS norms (Qwen3's q_norm / k_norm) and
// rope, stages the results at the end of shared memory (AttnIo::reserve) and then runs the attention paths of
// ops_attention.cuh on them unchanged. Four ops of a decoder layer (slices, head norms, rope) and their event
// boundaries become part of one task, and the rope table (cos / sin at the row's position, in double, as the
// rope op computes it) is built before the task's wait, off the critical path.
#ifndef WEFT_DEVICE_OPS_ATTENTION_QKV_CUH
#define WEFT_DEVICE_OPS_ATTENTION_QKV_CUH

#include "ops_attention.cuh"

namespace weft_dev {

// Staging at the end of smem (WEFT_QKV_STAGE_BYTES; lowering bounds it): cos [hd/2] f32, sin [hd/2] f32, the
// position the table is for (16 bytes), q heads [group][hd], k [hd], v [hd] (T), 16-byte aligned pieces.
template <typename T>
struct QkvStage {
  float *cs, *sn;
  long long* pos_used;
  T *q, *k, *v;
  int bytes;
};

template <typename T>
__device__ __forceinline__ QkvStage<T> qkv_stage(const weft_task_args* a, char* smem) {
  const int hd = static_cast<int>(a->d[2]), group = static_cast<int>(a->d[0] / a->d[1]);
  constexpr int esize = static_cast<int>(sizeof(T));
  const int tab = WEFT_ROUND16(hd / 2 * 4), qb = WEFT_ROUND16(group * hd * esize), hb = WEFT_ROUND16(hd * esize);
  QkvStage<T> st;
  st.bytes = WEFT_QKV_STAGE_BYTES(hd, group, esize);
  char* base = smem + WEFT_SMEM_BYTES - st.bytes;
  st.cs = reinterpret_cast<float*>(base);
  st.sn = reinterpret_cast<float*>(base + tab);
  st.pos_used = reinterpret_cast<long long*>(base + 2 * tab);
  st.q = reinterpret_cast<T*>(base + 2 * tab + 16);
  st.k = reinterpret_cast<T*>(base + 2 * tab + 16 + qb);
  st.v = reinterpret_cast<T*>(base + 2 * tab + 16 + qb + hb);
  return st;
}

template <typename T>
__device__ __forceinline__ AttnIo<T> attn_io_qkv(const weft_task_args* a, const weft_env* env, const QkvStage<T>& st) {
  AttnIo<T> io = attn_io_common<T>(a, env, 1, 3);
  io.q = st.q;  // the tile's one (row, kv head): no strides
  io.kn = st.k;
  io.vn = st.v;
  io.q_row = io.q_kv = io.kv_row = io.kv_head = 0;
  io.reserve = st.bytes;
  return io;
}

// cos / sin of every pair index at position p, exactly as rope_impl computes them.
template <typename T>
__device__ __forceinline__ void qkv_rope_table(const weft_task_args* a, const QkvStage<T>& st, i64 p) {
  RopeParams rp;
  rp.hd = a->d[2];
  rp.old_len = static_cast<double>(a->d[4]);
  rp.theta = __longlong_as_double(a->d[5]);
  rp.factor = __longlong_as_double(a->d[6]);
  rp.low = __longlong_as_double(a->d[7]);
  rp.high = __longlong_as_double(a->d[8]);
  rp.scaling = a->i[1];
  for (i64 i = tid(); i < rp.hd / 2; i += WEFT_BLOCK_THREADS) rope_cos_sin(rp, static_cast<double>(p), i, st.cs[i], st.sn[i]);
  if (tid() == 0) *st.pos_used = p;
}

constexpr int kQkvPer = 8;  // elements per lane of a head held in registers (head_dim <= 256 in one pass)

// A warp's registers of one head: element lane + 32 k of src.
template <typename T>
__device__ __forceinline__ void qkv_load_head(const T* src, i64 hd, T (&xr)[kQkvPer]) {
#pragma unroll
  for (int k = 0; k < kQkvPer; ++k) {
    const i64 j = lane() + k * WEFT_WARP_THREADS;
    xr[k] = j < hd ? src[j] : from_f<T>(0.0f);
  }
}

// One head of qkv (src, its first 256 elements already in xr) into dst: optionally RMS-normed with weight w
// (rounded to T, as head_rmsnorm stores it), then optionally rotated (rounded again, as rope stores it).
// Called by one whole warp.
template <typename T>
__device__ __forceinline__ void qkv_stage_head(const T* src, const T (&xr)[kQkvPer], T* dst, const T* w, bool rotate,
                                               const QkvStage<T>& st, i64 hd, float eps, bool interleaved) {
  constexpr i64 kHeld = kQkvPer * WEFT_WARP_THREADS;
  if (w != nullptr) {
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kQkvPer; ++k) ss = fmaf(to_f(xr[k]), to_f(xr[k]), ss);
    for (i64 j = lane() + kHeld; j < hd; j += WEFT_WARP_THREADS) ss = fmaf(to_f(src[j]), to_f(src[j]), ss);
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(hd) + eps);
#pragma unroll
    for (int k = 0; k < kQkvPer; ++k) {
      const i64 j = lane() + k * WEFT_WARP_THREADS;
      if (j < hd) dst[j] = from_f<T>(__fmul_rn(__fmul_rn(to_f(xr[k]), inv), to_f(w[j])));
    }
    for (i64 j = lane() + kHeld; j < hd; j += WEFT_WARP_THREADS)
      dst[j] = from_f<T>(__fmul_rn(__fmul_rn(to_f(src[j]), inv), to_f(w[j])));
  } else {
#pragma unroll
    for (int k = 0; k < kQkvPer; ++k) {
      const i64 j = lane() + k * WEFT_WARP_THREADS;
      if (j < hd) dst[j] = xr[k];
    }
    for (i64 j = lane() + kHeld; j < hd; j += WEFT_WARP_THREADS) dst[j] = src[j];
  }
  if (!rotate) return;
  __syncwarp();  // every lane's element is staged before pairs mix them
  const i64 half = hd / 2;
  for (i64 i = lane(); i < half; i += WEFT_WARP_THREADS) rope_pair(dst, dst, i, half, interleaved, st.cs[i], st.sn[i]);
}

// After the wait: the tile's q heads, k and v, staged, one warp per head. The position and every warp's first
// head are loaded together, before anything waits on either: one memory round trip.
template <typename T>
__device__ void qkv_stage_inputs(const weft_task_args* a, const weft_env* env, const QkvStage<T>& st) {
  const i64 hq = a->d[0], hkv = a->d[1], hd = a->d[2], group = hq / hkv, b = a->row0, kvh = a->col0 / (group * hd);
  const T* qkv = in_ptr<T>(a, env, 0) + b * (hq + 2 * hkv) * hd;
  const T* wq = in_ptr<T>(a, env, 4);
  const T* wk = in_ptr<T>(a, env, 5);
  auto head_src = [&](i64 h) {
    return h < group ? qkv + (kvh * group + h) * hd : h == group ? qkv + (hq + kvh) * hd : qkv + (hq + hkv + kvh) * hd;
  };
  const i64 p = load_int(in_ptr<void>(a, env, 3), a->i[0], b);
  T xr[kQkvPer];
  if (warp() < group + 2) qkv_load_head<T>(head_src(warp()), hd, xr);
  __syncthreads();  // the prologue's table (a task without waits has no barrier in between)
  if (*st.pos_used != p) {  // the prologue read another position (one the graph computes) or none
    __syncthreads();
    qkv_rope_table<T>(a, st, p);
    __syncthreads();
  }
  const float eps = a->f[1];
  const bool interleaved = a->i[2] == 1;
  for (i64 h = warp(); h < group + 2; h += WEFT_BLOCK_WARPS) {
    if (h != warp()) qkv_load_head<T>(head_src(h), hd, xr);
    T* dst = h < group ? st.q + h * hd : h == group ? st.k : st.v;
    const T* w = h < group ? wq : h == group ? wk : nullptr;
    qkv_stage_head<T>(head_src(h), xr, dst, w, h <= group, st, hd, eps, interleaved);
  }
  __syncthreads();
}

template <typename T>
__device__ void attention_decode_qkv_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->d[0] <= 0 || a->d[1] <= 0 || a->d[2] <= 0 || a->d[0] % a->d[1] != 0 || a->row1 <= a->row0 || a->col1 <= a->col0)
    return;
  const QkvStage<T> st = qkv_stage<T>(a, smem);
  qkv_stage_inputs<T>(a, env, st);
  AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  io.pos_staged = st.pos_used;  // the position the staging used: no second read of positions
  if (attention_smem_run<T>(a, io, smem)) return;
  attention_general<T>(a, env, io, smem);
}

}  // namespace weft_dev

// ATTENTION_DECODE_QKV: in qkv [B, (Hq + 2 Hkv) * hd], k_cache, v_cache [B, S, Hkv, hd], positions [B], q_norm
// weight [hd] or -1, k_norm weight [hd] or -1. d0=Hq, d1=Hkv, d2=hd, d3=S, d4=original_max_position, d5..d8 =
// the bits of (double) theta, factor, low_freq_factor, high_freq_factor. f0=scale, f1=eps. i0=positions dtype,
// i1=rope scaling (0 none, 1 linear, 2 llama3), i2=rope style (0 half, 1 interleaved). Tile: one row x one kv
// head's group of q heads. Bad position: as attention_decode.
WEFT_DEV_OP_BODY(attention_decode_qkv) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::attention_decode_qkv_impl, a, env, smem);
}

#endif  // WEFT_DEVICE_OPS_ATTENTION_QKV_CUH
