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

// Where one attention task finds its operands: the plain op reads q / k_new / v_new from tensors; the fused
// attention_decode_qkv stages them (split, normed, rotated) at the end of shared memory first (`reserve` bytes
// the attention paths leave alone). The q heads of (row b, kv head h) start at q + b * q_row + h * q_kv, k_new's
// and v_new's row at kn / vn + b * kv_row + h * kv_head.
template <typename T>
struct AttnIo {
  const T *q, *kn, *vn;
  i64 q_row, q_kv, kv_row, kv_head;
  T *kc, *vc, *o;
  const void* pos;
  int pos_dtype;
  const long long* pos_staged;  // after the wait, the tile's position from here instead of pos (shared memory)
  i64 hq, hkv, hd, s_dim;  // q heads, kv heads, head_dim, cache length S
  float scale;
  int reserve;
};

// What attention_decode and attention_decode_qkv lay out alike (d0..d3, f0, i0): sizes, the caches (operands
// k_cache_in and k_cache_in + 1), positions, the output, the scale. q, k_new and v_new are the caller's.
template <typename T>
__device__ __forceinline__ AttnIo<T> attn_io_common(const weft_task_args* a, const weft_env* env, int k_cache_in,
                                                    int positions_in) {
  AttnIo<T> io;
  io.hq = a->d[0];
  io.hkv = a->d[1];
  io.hd = a->d[2];
  io.s_dim = a->d[3];
  io.kc = in_mut_ptr<T>(a, env, k_cache_in);
  io.vc = in_mut_ptr<T>(a, env, k_cache_in + 1);
  io.o = out_ptr<T>(a, env);
  io.pos = in_ptr<void>(a, env, positions_in);
  io.pos_dtype = a->i[0];
  io.pos_staged = nullptr;
  io.scale = a->f[0];
  io.reserve = 0;
  return io;
}

// attention_decode's operands (see weft_dev_attention_decode).
template <typename T>
__device__ __forceinline__ AttnIo<T> attn_io_plain(const weft_task_args* a, const weft_env* env) {
  AttnIo<T> io = attn_io_common<T>(a, env, 3, 5);
  io.q = in_ptr<T>(a, env, 0);
  io.kn = in_ptr<T>(a, env, 1);
  io.vn = in_ptr<T>(a, env, 2);
  io.q_row = io.hq * io.hd;
  io.q_kv = io.hkv > 0 ? io.hq / io.hkv * io.hd : 0;
  io.kv_row = io.hkv * io.hd;
  io.kv_head = io.hd;
  return io;
}

// Layout in smem: [0] the position the prologue used (int), then K rows [cap][hd], V rows [cap][hd] (T), then
// q as f32 [group][hd], the per-warp partial outputs f32 [warps][group][hd], 1/l per head, then scores f32
// [group][cap].
struct AttnSmemPlan {
  bool ok;
  int hd, group, kvh;  // head_dim, q heads per kv head, the tile's kv head
  int cap;             // timesteps that fit
  char *k, *v;
  float *q, *part, *inv_l, *score;
};

// K row r of the plan keeps its 16-byte unit u at unit attn_k_unit(r, u): in the per-warp path (attn_smem_attend_warps)
// each lane reads a row of its own, and rows 128 or 256 bytes apart would otherwise all fall on the same banks
// (an 8-way conflict per load). V rows are read a whole row per warp and keep their order.
__device__ __forceinline__ int attn_k_unit(int r, int u) { return u ^ (r & 7); }

// A team of W warps of the block that attends one tile's kv head: the whole block (W = WEFT_BLOCK_WARPS), or one half
// of a tile of two kv heads (WEFT_ATTN_PAIR_WARPS). Its warp and thread indices, and a barrier over its threads only:
// named barriers 2 and 3 (0 is __syncthreads', 1 the weight loader's block_sync).
template <int W>
__device__ __forceinline__ int team_warp() {
  return W == WEFT_BLOCK_WARPS ? warp() : warp() % W;
}
template <int W>
__device__ __forceinline__ int team_tid() {
  return W == WEFT_BLOCK_WARPS ? tid() : tid() % (W * WEFT_WARP_THREADS);
}
template <int W>
__device__ __forceinline__ void team_sync() {
  static_assert(W == WEFT_BLOCK_WARPS || 2 * W == WEFT_BLOCK_WARPS, "the block or one half of it");
  if constexpr (W == WEFT_BLOCK_WARPS) block_sync();
  else asm volatile("bar.sync %0, %1;" ::"r"(2 + warp() / W), "n"(W * WEFT_WARP_THREADS) : "memory");
}

// The path takes one (row, kv head) per tile of a 16-bit dtype with head_dim 64 or 128 (attention_smem_fast's
// instances), every pointer 16-byte aligned (then every row start is). 32-bit arithmetic: a 64-bit division is
// ~100 instructions, and this runs on the critical path of every layer. `stat` more floats after 1/l: a part of a
// split tile keeps its max and sum per head there (attention_split.cuh). A tile of two kv heads (`heads` 2) plans
// kv head `head` of it in that team's `bytes` of shared memory from `smem`, with `warps` warps' partial outputs.
template <typename T>
__device__ __forceinline__ AttnSmemPlan attn_smem_plan(const weft_task_args* a, const AttnIo<T>& io, char* smem,
                                                       int stat = 0, int heads = 1, int bytes = WEFT_SMEM_BYTES,
                                                       int warps = WEFT_BLOCK_WARPS, int head = 0) {
  AttnSmemPlan s{};
  if (sizeof(T) != 2 || io.hq <= 0 || io.hkv <= 0 || io.hq > 4096 || (io.hd != 64 && io.hd != 128)) return s;
  const int hq = static_cast<int>(io.hq), hkv = static_cast<int>(io.hkv), hd = static_cast<int>(io.hd);
  if (hq % hkv != 0) return s;
  const int group = hq / hkv;
  if (a->row1 - a->row0 != 1 || a->col1 - a->col0 != static_cast<i64>(heads) * group * hd || a->col0 % hd != 0) return s;
  if (!aligned16(io.q) || !aligned16(io.kn) || !aligned16(io.vn) || !aligned16(io.kc) || !aligned16(io.vc) ||
      !aligned16(io.o))
    return s;
  const int fixed = WEFT_ATTN_SMEM_FIXED_W(hd, group, warps) + stat * 4 + io.reserve;
  const int per_t = WEFT_ATTN_SMEM_PER_STEP(hd, group, static_cast<int>(sizeof(T)));
  if (fixed + per_t > bytes) return s;
  s.cap = (bytes - fixed) / per_t;
  s.ok = true;
  s.hd = hd;
  s.group = group;
  s.kvh = static_cast<int>(a->col0 / hd) / group + head;
  s.k = smem + 16;
  s.v = s.k + s.cap * hd * static_cast<int>(sizeof(T));
  s.q = reinterpret_cast<float*>(s.v + s.cap * hd * static_cast<int>(sizeof(T)));
  s.part = s.q + group * hd;
  s.inv_l = s.part + warps * group * hd;
  s.score = s.inv_l + group + stat;
  return s;
}

// Copies K and V rows [t0, t1) of (row b, the plan's kv head) into smem rows [t0 - first, t1 - first), 16 bytes
// per thread and step, by threads th of nth.
template <typename T>
__device__ __forceinline__ void attn_copy_rows(const AttnSmemPlan& s, const T* kc, const T* vc, i64 base, i64 row_kv,
                                               int t0, int t1, int first = 0, int th = tid(),
                                               int nth = WEFT_BLOCK_THREADS) {
  const int units = s.hd * static_cast<int>(sizeof(T)) / 16, n = (t1 - t0) * units;
  const u64 policy = l2_evict_first_policy();
  const unsigned int ks = static_cast<unsigned int>(__cvta_generic_to_shared(s.k));
  const unsigned int vs = static_cast<unsigned int>(__cvta_generic_to_shared(s.v));
  for (int e = th; e < n; e += nth) {
    const int tr = e / units, u = e - tr * units;
    const int t = t0 + tr, r = t - first;
    const i64 g = base + t * row_kv;
    const unsigned int off = static_cast<unsigned int>((r * units + u) * 16);
    cp_async16(ks + static_cast<unsigned int>((r * units + attn_k_unit(r, u)) * 16),
               reinterpret_cast<const char*>(kc + g) + u * 16, policy);
    cp_async16(vs + off, reinterpret_cast<const char*>(vc + g) + u * 16, policy);
  }
  cp_async_commit();
}

__device__ __forceinline__ i64 attn_clamp_pos(i64 p, i64 s_dim) { return p < 0 ? -1 : p >= s_dim ? -1 : p; }

// After the wait, position p (clamped) outside the plan's rows: true once the prologue's copies into shared
// memory have landed (the general path the caller then runs reuses it), having written nothing.
template <int W = WEFT_BLOCK_WARPS>
__device__ __forceinline__ bool attn_smem_outside(i64 p, const AttnSmemPlan& s) {
  if (p >= 0 && p <= s.cap - 1) return false;
  cp_async_wait<0>();
  team_sync<W>();
  return true;
}

// After the wait, at position pi: copies the kv head's rows [0, pi) that the prologue did not (it saw another
// position, or none; its note of the position is smem's first word).
template <typename T>
__device__ __forceinline__ void attn_copy_missing_rows(const AttnSmemPlan& s, const T* kc, const T* vc,
                                                       const char* smem, i64 base, i64 row_kv, int pi, int th = tid(),
                                                       int nth = WEFT_BLOCK_THREADS) {
  const int early = *reinterpret_cast<const volatile int*>(smem);
  const int have = early < 0 ? 0 : (early < pi ? early : pi);
  if (have < pi) attn_copy_rows<T>(s, kc, vc, base, row_kv, have, pi, 0, th, nth);
}

// Before the wait: rows [0, p) into smem, p from positions (an input in decode graphs; if the graph computes
// it, the value read here may be stale, which the main part notices and corrects).
// Returns whether the tile takes this path (else the caller prefetches the rows into L2 instead).
template <typename T>
__device__ bool attention_smem_prologue(const weft_task_args* a, const AttnIo<T>& io, char* smem) {
  const AttnSmemPlan s = attn_smem_plan<T>(a, io, smem);
  if (!s.ok) return false;
  const i64 p = attn_clamp_pos(load_int(io.pos, io.pos_dtype, a->row0), io.s_dim);
  if (tid() == 0) *reinterpret_cast<int*>(smem) = p >= 0 && p <= s.cap - 1 ? static_cast<int>(p) : -1;
  if (p < 0 || p > s.cap - 1) return false;
  const i64 row_kv = io.hkv * s.hd;
  attn_copy_rows<T>(s, io.kc, io.vc, a->row0 * io.s_dim * row_kv + s.kvh * s.hd, row_kv, 0, static_cast<int>(p));
  return true;
}

// D elements of T at p (D * sizeof(T) bytes, aligned to that) as floats.
template <typename T, int D>
__device__ __forceinline__ void load_elems(const T* p, float (&v)[D]) {
  static_assert(D * sizeof(T) == 16 || D * sizeof(T) == 8 || D * sizeof(T) == 4, "4, 8 or 16 bytes");
  alignas(16) T t[D];
  if constexpr (D * sizeof(T) == 16) *reinterpret_cast<uint4*>(t) = *reinterpret_cast<const uint4*>(p);
  else if constexpr (D * sizeof(T) == 8) *reinterpret_cast<uint2*>(t) = *reinterpret_cast<const uint2*>(p);
  else *reinterpret_cast<unsigned int*>(t) = *reinterpret_cast<const unsigned int*>(p);
#pragma unroll
  for (int k = 0; k < D; ++k) v[k] = to_f(t[k]);
}

// Unit e (16 bytes) of the tile's new inputs: q's units first, then k_new's, then v_new's.
template <int UNITS>
__device__ __forceinline__ uint4 attn_new_unit(const uint4* q, const uint4* kn, const uint4* vn, int qu, int e) {
  return e < qu ? q[e] : e < qu + UNITS ? kn[e - qu] : vn[e - qu - UNITS];
}

// The plan's pointers lie in shared memory (smem is the launch's); said, the compiler emits LDS / STS for them
// instead of generic loads and stores: attention 8.5 -> 7.9 us per task (docs/perf.md, round 12).
__device__ __forceinline__ void attn_smem_assume_shared(const AttnSmemPlan& s) {
  __builtin_assume(__isShared(s.k));
  __builtin_assume(__isShared(s.v));
  __builtin_assume(__isShared(s.q));
  __builtin_assume(__isShared(s.part));
  __builtin_assume(__isShared(s.inv_l));
  __builtin_assume(__isShared(s.score));
}

// Phases 1-3 of the shared-memory path and its output, block-wide (tiles whose group is not 2, 4 or 8:
// attn_smem_attend_any), once q (f32) and K/V rows [0, pi] of (row b, the plan's
// kv head) are in the plan's shared memory and a barrier has published them. Head dims per lane in the weighted
// sum of V: D (head_dim = 32 D); q heads per pass: G (a divisor of the group, <= 8: register arrays). Everything
// shape-like is a compile-time constant, so there are no divisions and no guards per head; every phase reads
// shared memory only and is spread over all warps:
//   1. scores: GS lanes (one 16-byte unit of the head each) per timestep, q held in registers, a shuffle
//      sum per head; 32 / GS timesteps per warp and pass.
//   2. softmax statistics: one warp per head.
//   3. weighted sum of V: warp w takes timesteps w, w + 8, ..., lane l dims [l*D, l*D + D) of G heads; the
//      warps' partial sums are then added in warp order (deterministic).
// Inlined into its caller: called on its own, the operands (AttnIo, the plan) went through the stack and the
// call cost ~1.8 us per task between the staging of q and the first phase (WEFT_TUNE early returns, H100).
// SPLIT: a part of a split tile over its rows [0, pi] (plan with 2 * group stat floats), whose output goes to its
// `entry` of the tile's block (f32: the part's output, then its max and exp-sum per head; attn_split_merge).
template <typename T, int D, int G, bool SPLIT = false>
__device__ __forceinline__ void attn_smem_attend(const AttnIo<T>& io, const AttnSmemPlan& s, i64 b, int pi,
                                                 float* entry = nullptr) {
  constexpr int N = Vec<T>::N, HD = 32 * D, UNITS = HD / N, GS = UNITS, PER_WARP = WEFT_WARP_THREADS / GS;
  static_assert(GS <= WEFT_WARP_THREADS && (GS & (GS - 1)) == 0, "a head's units fit one warp");
  attn_smem_assume_shared(s);
  const int group = s.group;
  // 1. Scores.
  const int steps = pi + 1, sub = lane() / GS, gl = lane() % GS;
  const float scale = io.scale;
  const T* ks = reinterpret_cast<const T*>(s.k);
  for (int g0 = 0; g0 < group; g0 += G) {
    float qr[G][N];
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int k = 0; k < N; ++k) qr[g][k] = s.q[(g0 + g) * HD + gl * N + k];
    float* sc = s.score + g0 * s.cap;
    // Two passes' timesteps per iteration: their loads, dot products and shuffle sums are independent and
    // overlap (one pass at a time left each shuffle chain's latency exposed).
    constexpr int kStride = WEFT_BLOCK_WARPS * PER_WARP;
    for (int t0 = warp() * PER_WARP; t0 < steps; t0 += 2 * kStride) {  // uniform per warp
      const int t[2] = {t0 + sub, t0 + kStride + sub};
      float kv[2][N];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (t[h] < steps) load_vec(ks + t[h] * HD + attn_k_unit(t[h], gl) * N, kv[h]);
        else
#pragma unroll
          for (int k = 0; k < N; ++k) kv[h][k] = 0.0f;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float acc[2] = {0.0f, 0.0f};
#pragma unroll
        for (int k = 0; k < N; ++k)
#pragma unroll
          for (int h = 0; h < 2; ++h) acc[h] = fmaf(qr[g][k], kv[h][k], acc[h]);
#pragma unroll
        for (int o = GS / 2; o > 0; o >>= 1)
#pragma unroll
          for (int h = 0; h < 2; ++h) acc[h] += __shfl_xor_sync(WEFT_FULL_MASK, acc[h], o);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (t[h] < steps && gl == 0) sc[g * s.cap + t[h]] = __fmul_rn(scale, acc[h]);
      }
    }
  }
  block_sync();
  // 2. Softmax statistics per head: scores become exp(s - max), inv_l = 1 / their sum.
  for (int g = warp(); g < group; g += WEFT_BLOCK_WARPS) {
    float* sc = s.score + g * s.cap;
    if constexpr (SPLIT) {
      const float mx = warp_max_of(sc, steps), sum = warp_exp_sum(sc, steps, mx);
      if (lane() == 0) {
        s.inv_l[g] = 1.0f / sum;
        s.inv_l[group + g] = mx;
        s.inv_l[2 * group + g] = sum;
      }
    } else {
      const float sum = warp_exp_sum(sc, steps, warp_max_of(sc, steps));
      if (lane() == 0) s.inv_l[g] = 1.0f / sum;
    }
  }
  block_sync();
  // 3. Weighted sum of V.
  const T* vs = reinterpret_cast<const T*>(s.v) + lane() * D;
  for (int g0 = 0; g0 < group; g0 += G) {
    float acc[G][D];
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int k = 0; k < D; ++k) acc[g][k] = 0.0f;
    const float* sc = s.score + g0 * s.cap;
#pragma unroll 2
    for (int t = warp(); t < steps; t += WEFT_BLOCK_WARPS) {
      float v[D];
      load_elems<T, D>(vs + t * HD, v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float w = sc[g * s.cap + t];
#pragma unroll
        for (int k = 0; k < D; ++k) acc[g][k] = fmaf(w, v[k], acc[g][k]);
      }
    }
    float* part = s.part + (warp() * group + g0) * HD + lane() * D;
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int k = 0; k < D; ++k) part[g * HD + k] = acc[g][k];
  }
  block_sync();
  if constexpr (SPLIT) {
    for (int i = tid(); i < group * HD; i += WEFT_BLOCK_THREADS) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < WEFT_BLOCK_WARPS; ++w) sum += s.part[w * group * HD + i];
      entry[i] = sum * s.inv_l[i / HD];
    }
    if (tid() < 2 * group) entry[group * HD + tid()] = s.inv_l[group + tid()];
    return;
  }
  T* o = io.o + (b * io.hkv + s.kvh) * group * HD;
  for (int i = tid(); i < group * HD; i += WEFT_BLOCK_THREADS) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < WEFT_BLOCK_WARPS; ++w) sum += s.part[w * group * HD + i];
    o[i] = from_f<T>(sum * s.inv_l[i / HD]);
  }
}

// Phases 1-3 and the output for a tile of exactly G q heads per kv head (G = 2, 4 or 8; attn_smem_attend_any),
// warp by warp. Warp w takes timesteps [w * 16, w * 16 + 16) of every 128, two lanes per timestep and all G heads
// per lane (each lane half a K row: the rows are read once; attn_k_unit and the halves' rotation below keep a
// quarter warp's eight loads on distinct banks). The warp computes its timesteps' scores (one shuffle per head),
// their max per head (the warp's), exp(score - max) in place, and its part of the weighted sum of V (lane l dims
// [l*D, l*D + D)) with the exp-sum beside it; after the one barrier each output adds the 8 warps' parts rescaled to
// their common max, in warp order (deterministic). SPLIT: a part writes its entry as attn_smem_attend's does. W: the
// warps of the team that attends the tile (team_warp; the whole block, or half of a tile of two kv heads).
// attn_smem_attend's block-wide phases take three barriers and a shuffle tree per timestep and head (round 31: ~3 us
// of a ~4.5 us task on the critical path of every layer); these, Qwen3-0.6B 2.2-2.7% per token (docs/perf.md round
// 39). The warp's max and exp-sum per head go to its first two score slots, its own (16 * 8 <= cap, checked by the
// caller).
template <typename T, int D, int G, bool SPLIT = false, int W = WEFT_BLOCK_WARPS>
__device__ __forceinline__ void attn_smem_attend_warps(const AttnIo<T>& io, const AttnSmemPlan& s, i64 b, int pi,
                                                       float* entry = nullptr) {
  constexpr int N = Vec<T>::N, HD = 32 * D, UNITS = HD / N, UL = UNITS / 2;  // units per lane
  constexpr int TPW = WEFT_WARP_THREADS / 2, PASS = TPW * W;  // timesteps per warp, per team pass
  static_assert(G >= 2 && G <= 8 && N == 8 && (UL == 4 || UL == 8), "16-bit rows of 64 or 128");
  attn_smem_assume_shared(s);
  const int tw = team_warp<W>();
  const int steps = pi + 1, half = lane() & 1, tl = lane() >> 1, w0 = tw * TPW;
  const T* ks = reinterpret_cast<const T*>(s.k);
  const float scale = io.scale;
  // 1. Scores: lane (tl, half) takes units half * UL + ((i + 4 * half) mod UL) of row t, i < UL; the rotation
  // puts the two halves of a quarter warp's four rows on different banks where a row spans two bank rows (UL 8).
  float mx[G];
#pragma unroll
  for (int g = 0; g < G; ++g) mx[g] = neg_inf();
  for (int t0 = w0; t0 < steps; t0 += PASS) {  // uniform per warp
    const int t = t0 + tl, r = t < steps ? t : pi;  // a lane past the end reads a real row and keeps nothing
    float acc[G][2];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = 0.0f;
#pragma unroll
    for (int i = 0; i < UL; ++i) {
      const int u = half * UL + ((i + 4 * half) & (UL - 1));
      float kv[N];
      load_vec(ks + r * HD + attn_k_unit(r, u) * N, kv);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float4 qa = *reinterpret_cast<const float4*>(s.q + g * HD + u * N);
        const float4 qb = *reinterpret_cast<const float4*>(s.q + g * HD + u * N + 4);
        const float qv[N] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
        for (int k = 0; k < N; ++k) acc[g][k & 1] = fmaf(qv[k], kv[k], acc[g][k & 1]);
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float v = acc[g][0] + acc[g][1];
      v += __shfl_xor_sync(WEFT_FULL_MASK, v, 1);
      v = __fmul_rn(scale, v);
      if (t < steps) {
        if (half == 0) s.score[g * s.cap + t] = v;
        mx[g] = nan_max(mx[g], v);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) mx[g] = warp_max(mx[g]);
  // 2. exp(score - the warp's max), in place, by the lanes that wrote them.
  for (int t = w0 + tl; t < steps; t += PASS)
    if (half == 0)
#pragma unroll
      for (int g = 0; g < G; ++g) s.score[g * s.cap + t] = expf(s.score[g * s.cap + t] - mx[g]);
  __syncwarp();  // the weights are visible to the warp
  // 3. The warp's part of the weighted sum of V, and of the exp-sums.
  float acc[G][D], sum[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    sum[g] = 0.0f;
#pragma unroll
    for (int k = 0; k < D; ++k) acc[g][k] = 0.0f;
  }
  const T* vs = reinterpret_cast<const T*>(s.v) + lane() * D;
  for (int t0 = w0; t0 < steps; t0 += PASS) {  // uniform per warp
    const int n = steps - t0 < TPW ? steps - t0 : TPW;
#pragma unroll 4
    for (int j = 0; j < n; ++j) {
      const int t = t0 + j;
      float v[D];
      load_elems<T, D>(vs + t * HD, v);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = s.score[g * s.cap + t];
        sum[g] += p;
#pragma unroll
        for (int k = 0; k < D; ++k) acc[g][k] = fmaf(p, v[k], acc[g][k]);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int k = 0; k < D; ++k) s.part[(tw * G + g) * HD + lane() * D + k] = acc[g][k];
  __syncwarp();  // every lane has read the weights before lane 0 overwrites the first two
  if (lane() < G) {  // a warp without timesteps: max -inf, sum 0
    float m = mx[0], l = sum[0];
#pragma unroll
    for (int g = 1; g < G; ++g)
      if (lane() == g) {
        m = mx[g];
        l = sum[g];
      }
    s.score[lane() * s.cap + w0] = m;
    s.score[lane() * s.cap + w0 + 1] = l;
  }
  team_sync<W>();
  // 4. Each output from the W warps' parts of its head at their common max; a warp without timesteps weighs 0.
  T* o = io.o + (b * io.hkv + s.kvh) * G * HD;
  for (int i = team_tid<W>(); i < G * HD; i += W * WEFT_WARP_THREADS) {
    const int g = i / HD, d = i - g * HD;
    const float* st = s.score + g * s.cap;
    float m = neg_inf();
#pragma unroll
    for (int w = 0; w < W; ++w) m = nan_max(m, st[w * TPW]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float f = expf(st[w * TPW] - m);
      num = fmaf(f, s.part[(w * G + g) * HD + d], num);
      den = fmaf(f, st[w * TPW + 1], den);
    }
    if constexpr (SPLIT) {
      entry[i] = num / den;
      if (d == 0) {
        entry[G * HD + g] = m;
        entry[G * HD + G + g] = den;
      }
    } else {
      o[i] = from_f<T>(num / den);
    }
  }
}

// The phases of a tile or split part: warp by warp where the group is the instance's G (2, 4 or 8), else (and under
// WEFT_TUNE_ATTN_BLOCK_PHASES, for measurements) block-wide. A team of half the block (W) takes only the first: its
// caller checked the group and that the plan holds a pass of its warps.
template <typename T, int D, int G, bool SPLIT = false, int W = WEFT_BLOCK_WARPS>
__device__ __forceinline__ void attn_smem_attend_any(const AttnIo<T>& io, const AttnSmemPlan& s, i64 b, int pi,
                                                     bool block_phases, float* entry = nullptr) {
  if constexpr (W != WEFT_BLOCK_WARPS) {
    static_assert(G >= 2 && !SPLIT, "a team of half the block attends one unsplit tile of 2, 4 or 8 q heads");
    asm volatile("// weft: attn_smem_attend_warps");  // for tests/device/check_attention_ptx.sh, as below
    attn_smem_attend_warps<T, D, G, false, W>(io, s, b, pi);
    return;
  } else if constexpr (G >= 2) {
    if (s.group == G && s.cap >= WEFT_BLOCK_WARPS * WEFT_WARP_THREADS / 2 && !block_phases) {
      // A PTX comment, no instruction: tests/device/check_attention_ptx.sh looks for it in every unsplit instance of
      // groups 2, 4 and 8, so that CI (no GPU) notices if NVVM drops this path as it once dropped another (round
      // 23). Not in the split parts: there it moved ptxas's schedule of the G = 2 instances (their SASS is unchanged).
      if constexpr (!SPLIT) asm volatile("// weft: attn_smem_attend_warps");
      attn_smem_attend_warps<T, D, G, SPLIT>(io, s, b, pi, entry);
      return;
    }
  }
  attn_smem_attend<T, D, G, SPLIT>(io, s, b, pi, entry);
}

// After the wait, for attention_decode (q, k_new and v_new in tensors): phase 0 — q, k_new and v_new, one
// 16-byte load per thread, all in flight at once; row p into the caches and smem — then attn_smem_attend_any.
template <typename T, int D, int G>
__device__ __forceinline__ bool attention_smem_fast(const weft_task_args* a, const AttnIo<T>& io, char* smem,
                                                 const AttnSmemPlan& s, bool block_phases) {
  constexpr int N = Vec<T>::N, HD = 32 * D, UNITS = HD / N;
  attn_smem_assume_shared(s);
  const int group = s.group;
  const i64 s_dim = io.s_dim, b = a->row0, row_kv = io.hkv * HD;
  const T* kn = io.kn + b * io.kv_row + s.kvh * io.kv_head;
  const T* vn = io.vn + b * io.kv_row + s.kvh * io.kv_head;
  const T* qh = io.q + b * io.q_row + s.kvh * io.q_kv;
  T* kc = io.kc;
  T* vc = io.vc;
  // The position and this thread's first unit of the new rows: independent loads, in flight together.
  const i64 p = attn_clamp_pos(load_int(io.pos, io.pos_dtype, b), s_dim);
  const int qu = group * UNITS, nu = qu + 2 * UNITS, e0 = tid();
  const uint4* q4 = reinterpret_cast<const uint4*>(qh);
  const uint4* kn4 = reinterpret_cast<const uint4*>(kn);
  const uint4* vn4 = reinterpret_cast<const uint4*>(vn);
  uint4 first = make_uint4(0u, 0u, 0u, 0u);
  if (e0 < nu) first = attn_new_unit<UNITS>(q4, kn4, vn4, qu, e0);
  block_sync();  // the prologue's note of its position is visible
  if (attn_smem_outside(p, s)) return false;
  const i64 base = b * s_dim * row_kv + s.kvh * HD;
  const int pi = static_cast<int>(p);
  attn_copy_missing_rows<T>(s, kc, vc, smem, base, row_kv, pi);
  for (int e = e0; e < nu; e += WEFT_BLOCK_THREADS) {
    const uint4 raw = e == e0 ? first : attn_new_unit<UNITS>(q4, kn4, vn4, qu, e);
    if (e < qu) {
      float f[N];
      unpack_vec<T>(raw, f);
#pragma unroll
      for (int k = 0; k < N; ++k) s.q[e * N + k] = f[k];
    } else {
      const bool is_k = e < qu + UNITS;
      const int u = is_k ? e - qu : e - qu - UNITS;
      *reinterpret_cast<uint4*>((is_k ? kc : vc) + base + p * row_kv + u * N) = raw;
      *reinterpret_cast<uint4*>((is_k ? s.k : s.v) + (pi * HD + (is_k ? attn_k_unit(pi, u) : u) * N) *
                                                          static_cast<int>(sizeof(T))) = raw;
    }
  }
  cp_async_wait<0>();
  block_sync();
  attn_smem_attend_any<T, D, G>(io, s, b, pi, block_phases);
  return true;
}

// The shared-memory path's instances: I::run<T, D, G>(a, env, smem) for head_dim 32 D and the largest G of 8, 4, 2,
// 1 that divides the group, each an out-of-line function that sets itself up from the task's arguments and returns
// false when the tile does not fit the path (having written nothing; the caller then runs the general path).
// Pointers for their only operands (operands passed by reference went through the stack: round 5 measured ~1.8 us).
// Out of line, not inlined into one function per op: with all eight instances and the general path in it,
// attention_decode_qkv_impl<bf16> was ~22,000 SASS instructions; as functions of their own (~2,500-3,700 each)
// behind a dispatcher that keeps only its three pointers across the call, Qwen3-0.6B ran ~1% faster (H100;
// docs/perf.md, round 23). Whoever changes these paths: check the SASS still holds each instance's phases
// (MUFU.EX2, SHFL) — under attn_smem_assume_shared's assumptions NVVM has dropped whole paths (round 23).
template <typename T, int D, typename I>
__device__ __forceinline__ bool attn_smem_by_group(int group, const weft_task_args* a, const weft_env* env,
                                                   char* smem) {
  if (group % 8 == 0) return I::template run<T, D, 8>(a, env, smem);
  if (group % 4 == 0) return I::template run<T, D, 4>(a, env, smem);
  if (group % 2 == 0) return I::template run<T, D, 2>(a, env, smem);
  return I::template run<T, D, 1>(a, env, smem);
}

// After the wait: the shared-memory path of a tile (instance I::run, see attn_smem_by_group), or false when the tile
// does not fit it. Picks the instance from the sizes alone; the instance's attn_smem_plan checks the rest.
template <typename T, typename I>
__device__ __forceinline__ bool attn_smem_run(const weft_task_args* a, const weft_env* env, char* smem) {
  if constexpr (sizeof(T) != 2) {
    return false;
  } else {
    const i64 hq = a->d[0], hkv = a->d[1], hd = a->d[2];
    if (hkv <= 0 || hkv > hq || hq > 4096 || (hd != 64 && hd != 128)) return false;
    const int group = static_cast<int>(hq) / static_cast<int>(hkv);  // 32-bit: see attn_smem_plan
    return hd == 64 ? attn_smem_by_group<T, 2, I>(group, a, env, smem) : attn_smem_by_group<T, 4, I>(group, a, env, smem);
  }
}

// attention_decode's instance of the shared-memory path (attention_smem_fast), set up from its arguments.
template <typename T, int D, int G>
__device__ __noinline__ bool attention_smem_fast_instance(const weft_task_args* a, const weft_env* env, char* smem) {
  const AttnIo<T> io = attn_io_plain<T>(a, env);
  const AttnSmemPlan s = attn_smem_plan<T>(a, io, smem);
  if (!s.ok || s.hd != 32 * D || s.group % G != 0) return false;
  return attention_smem_fast<T, D, G>(a, io, smem, s, (env->tuning & WEFT_TUNE_ATTN_BLOCK_PHASES) != 0);
}
struct AttnSmemFastInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    return attention_smem_fast_instance<T, D, G>(a, env, smem);
  }
};

}  // namespace weft_dev

#endif  // WEFT_DEVICE_ATTENTION_SMEM_CUH
