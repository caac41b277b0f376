// attention_decode for short contexts (the decode case): the K and V rows of the tile's (row, kv head) are copied
// whole into shared memory with cp.async, issued before the task waits for q (the rows [0, p) were written by
// earlier steps and depend on no event of this one). After the wait the block adds row p from k_new / v_new,
// and every later phase (scores, softmax, weighted sum of V) reads shared memory only: one memory round trip
// after the wait instead of one per phase and chunk.
#ifndef WEFT_DEVICE_ATTENTION_SMEM_CUH
#define WEFT_DEVICE_ATTENTION_SMEM_CUH

#include "common.cuh"
#include "gemv_stream.cuh"

namespace weft_dev {

// Layout in smem: [0] the position the prologue used (int), then K rows [cap][hd], V rows [cap][hd] (T), then
// q as f32 [group][hd], then scores f32 [group][cap], then m / l per head.
struct AttnSmemPlan {
  bool ok;
  i64 cap;  // timesteps that fit
  char *k, *v;
  float *q, *score, *l;
};

template <typename T>
__device__ __forceinline__ AttnSmemPlan attn_smem_plan(const weft_task_args* a, char* smem) {
  AttnSmemPlan s{};
  const i64 hq = a->d[0], hkv = a->d[1], hd = a->d[2];
  if (hq <= 0 || hkv <= 0 || hd <= 0 || hq % hkv != 0) return s;
  const i64 group = hq / hkv, esize = static_cast<i64>(sizeof(T));
  // One (row, kv head) per tile, 16-byte rows, head_dim a multiple of 8 elements (cp.async units, lane groups).
  if (a->row1 - a->row0 != 1 || a->col1 - a->col0 != group * hd || (hd * esize) % 16 != 0 || hd > 256) return s;
  const i64 fixed = 16 + group * hd * 4 + group * 4;
  const i64 per_t = 2 * hd * esize + group * 4;
  s.cap = (WEFT_SMEM_BYTES - fixed) / per_t;
  if (s.cap < 1) return s;
  s.ok = true;
  s.k = smem + 16;
  s.v = s.k + s.cap * hd * esize;
  s.q = reinterpret_cast<float*>(s.v + s.cap * hd * esize);
  s.score = s.q + group * hd;
  s.l = s.score + group * s.cap;
  return s;
}

// Copies K and V rows [t0, t1) of (row b, kv head kvh) into the smem rows, 16 bytes per thread and step.
template <typename T>
__device__ __forceinline__ void attn_copy_rows(const AttnSmemPlan& s, const T* kc, const T* vc, i64 base, i64 row_kv,
                                               i64 hd, i64 t0, i64 t1) {
  const i64 units = hd * static_cast<i64>(sizeof(T)) / 16, n = (t1 - t0) * units;
  const u64 policy = l2_evict_first_policy();
  for (i64 e = tid(); e < n; e += WEFT_BLOCK_THREADS) {
    const i64 t = t0 + e / units, u = e % units;
    const i64 g = base + t * row_kv;
    const unsigned int off = static_cast<unsigned int>((t * units + u) * 16);
    cp_async16(static_cast<unsigned int>(__cvta_generic_to_shared(s.k)) + off, reinterpret_cast<const char*>(kc + g) + u * 16, policy);
    cp_async16(static_cast<unsigned int>(__cvta_generic_to_shared(s.v)) + off, reinterpret_cast<const char*>(vc + g) + u * 16, policy);
  }
  cp_async_commit();
}

__device__ __forceinline__ i64 attn_clamp_pos(i64 p, i64 s_dim) { return p < 0 ? -1 : p >= s_dim ? -1 : p; }

// Before the wait: rows [0, p) into smem, p from positions (an input in decode graphs; if the graph computes
// it, the value read here may be stale, which the main part notices and corrects).
// Returns whether the tile takes this path (else the caller prefetches the rows into L2 instead).
template <typename T>
__device__ bool attention_smem_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  const AttnSmemPlan s = attn_smem_plan<T>(a, smem);
  if (!s.ok) return false;
  const void* pos = in_ptr<void>(a, env, 5);
  const i64 hq = a->d[0], hkv = a->d[1], hd = a->d[2], s_dim = a->d[3];
  const i64 p = attn_clamp_pos(load_int(pos, a->i[0], a->row0), s_dim);
  if (tid() == 0) *reinterpret_cast<int*>(smem) = p >= 0 && p <= s.cap - 1 ? static_cast<int>(p) : -1;
  if (p < 0 || p > s.cap - 1) return false;
  const i64 kvh = a->col0 / (hq / hkv * hd), row_kv = hkv * hd;
  attn_copy_rows<T>(s, in_ptr<T>(a, env, 3), in_ptr<T>(a, env, 4), a->row0 * s_dim * row_kv + kvh * hd, row_kv, hd, 0, p);
  return true;
}

// After the wait. Returns false when the tile does not fit this path (the caller runs the general one).
template <typename T>
__device__ bool attention_smem_run(const weft_task_args* a, const weft_env* env, char* smem) {
  constexpr int N = Vec<T>::N;
  const AttnSmemPlan s = attn_smem_plan<T>(a, smem);
  if (!s.ok) return false;
  __syncthreads();  // the prologue's note of its position is visible (it may have run just before, without a wait)
  const i64 hq = a->d[0], hkv = a->d[1], hd = a->d[2], s_dim = a->d[3];
  const i64 b = a->row0, group = hq / hkv, kvh = a->col0 / (group * hd), row_kv = hkv * hd;
  const i64 p = attn_clamp_pos(load_int(in_ptr<void>(a, env, 5), a->i[0], b), s_dim);
  if (p < 0 || p > s.cap - 1) {
    cp_async_wait<0>();  // a prologue may have copies in flight into smem the general path reuses
    __syncthreads();
    return false;
  }
  const int early = *reinterpret_cast<volatile int*>(smem);
  const T* kn = in_ptr<T>(a, env, 1) + b * row_kv + kvh * hd;
  const T* vn = in_ptr<T>(a, env, 2) + b * row_kv + kvh * hd;
  T* kc = in_mut_ptr<T>(a, env, 3);
  T* vc = in_mut_ptr<T>(a, env, 4);
  const i64 base = b * s_dim * row_kv + kvh * hd;
  // Rows the prologue did not copy (it saw another position, or none).
  const i64 have = early < 0 ? 0 : (early < p ? early : p);
  if (have < p) attn_copy_rows<T>(s, kc, vc, base, row_kv, hd, have, p);
  // Row p: from k_new / v_new into the caches and into smem; q as f32.
  const i64 esize = static_cast<i64>(sizeof(T));
  copy_bytes(kc + base + p * row_kv, kn, hd * esize, static_cast<int>(esize), tid(), WEFT_BLOCK_THREADS);
  copy_bytes(vc + base + p * row_kv, vn, hd * esize, static_cast<int>(esize), tid(), WEFT_BLOCK_THREADS);
  copy_bytes(s.k + p * hd * esize, kn, hd * esize, static_cast<int>(esize), tid(), WEFT_BLOCK_THREADS);
  copy_bytes(s.v + p * hd * esize, vn, hd * esize, static_cast<int>(esize), tid(), WEFT_BLOCK_THREADS);
  const T* qh = in_ptr<T>(a, env, 0) + b * hq * hd + kvh * group * hd;
  for (i64 e = tid(); e < group * hd; e += WEFT_BLOCK_THREADS) s.q[e] = to_f(qh[e]);
  cp_async_wait<0>();
  __syncthreads();

  // 1. Scores: lane groups of gs lanes share a timestep (16-byte pieces of the row each), a warp covers 32 / gs
  //    timesteps at a time; the group's q heads all use the K row once it is loaded.
  const i64 steps = p + 1, units = hd / N;
  int gs = 1;
  while (gs < units && gs < WEFT_WARP_THREADS) gs *= 2;
  const int per_warp = WEFT_WARP_THREADS / gs, sub = lane() / gs, gl = lane() % gs;
  const float scale = a->f[0];
  const T* ks = reinterpret_cast<const T*>(s.k);
  for (i64 t0 = static_cast<i64>(warp()) * per_warp; t0 < steps; t0 += static_cast<i64>(WEFT_BLOCK_WARPS) * per_warp) {
    const i64 t = t0 + sub;
    for (i64 g = 0; g < group; ++g) {  // group is uniform across the block: every lane reaches the shuffles
      float acc = 0.0f;
      if (t < steps)
        for (i64 u = gl; u < units; u += gs) {
          float kv[N];
          load_vec(ks + t * hd + u * N, kv);
          const float* qg = s.q + g * hd + u * N;
#pragma unroll
          for (int e = 0; e < N; ++e) acc = fmaf(qg[e], kv[e], acc);
        }
      acc = group_sum(acc, gs);
      if (t < steps && gl == 0) s.score[g * s.cap + t] = __fmul_rn(scale, acc);
    }
  }
  __syncthreads();
  // 2. Softmax per head (one warp per head; heads beyond the warps loop).
  for (i64 g = warp(); g < group; g += WEFT_BLOCK_WARPS) {
    float* sc = s.score + g * s.cap;
    const float sum = warp_exp_sum(sc, steps, warp_max_of(sc, steps));
    if (lane() == 0) s.l[g] = sum;
  }
  __syncthreads();
  // 3. Output (g, j) = sum_t p[g][t] * V[t][j] / l[g], one thread per output, timesteps in order.
  const T* vs = reinterpret_cast<const T*>(s.v);
  T* o = out_ptr<T>(a, env) + b * hq * hd + kvh * group * hd;
  for (i64 e = tid(); e < group * hd; e += WEFT_BLOCK_THREADS) {
    const i64 g = e / hd, j = e % hd;
    const float* w = s.score + g * s.cap;
    // Four independent sums (timesteps t mod 4) keep four FMAs in flight; added in a fixed order.
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    i64 t = 0;
    for (; t + 4 <= steps; t += 4)
#pragma unroll
      for (int u = 0; u < 4; ++u) acc[u] = fmaf(w[t + u], to_f(vs[(t + u) * hd + j]), acc[u]);
    for (; t < steps; ++t) acc[0] = fmaf(w[t], to_f(vs[t * hd + j]), acc[0]);
    o[e] = from_f<T>(((acc[0] + acc[1]) + (acc[2] + acc[3])) / s.l[g]);
  }
  return true;
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_ATTENTION_SMEM_CUH
