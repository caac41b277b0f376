// attention_decode_qkv: attention_decode fed by the packed q | k | v projection. The task splits its q heads,
// its k head and its v head out of qkv, applies the optional per-head RMS norms (Qwen3's q_norm / k_norm) and
// rope, stages the results at the end of shared memory (AttnIo::reserve) and then runs the attention paths of
// ops_attention.cuh on them unchanged. Four ops of a decoder layer (slices, head norms, rope) and their event
// boundaries become part of one task, and the rope table (cos / sin at the row's position, in double, as the
// rope op computes it) is built before the task's wait, off the critical path.
#ifndef WEFT_DEVICE_OPS_ATTENTION_QKV_CUH
#define WEFT_DEVICE_OPS_ATTENTION_QKV_CUH

#include "attention_split.cuh"
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

// `bytes`: the shared memory the tile's team has from smem (half of it in a tile of two kv heads).
template <typename T>
__device__ __forceinline__ QkvStage<T> qkv_stage(const weft_task_args* a, char* smem, int bytes = WEFT_SMEM_BYTES) {
  const int hd = static_cast<int>(a->d[2]), group = static_cast<int>(a->d[0] / a->d[1]);
  constexpr int esize = static_cast<int>(sizeof(T));
  const int tab = WEFT_ROUND16(hd / 2 * 4), qb = WEFT_ROUND16(group * hd * esize), hb = WEFT_ROUND16(hd * esize);
  QkvStage<T> st;
  st.bytes = WEFT_QKV_STAGE_BYTES(hd, group, esize);
  char* base = smem + bytes - st.bytes;
  st.cs = reinterpret_cast<float*>(base);
  st.sn = reinterpret_cast<float*>(base + tab);
  st.pos_used = reinterpret_cast<long long*>(base + 2 * tab);
  st.q = reinterpret_cast<T*>(base + 2 * tab + 16);
  st.k = reinterpret_cast<T*>(base + 2 * tab + 16 + qb);
  st.v = reinterpret_cast<T*>(base + 2 * tab + 16 + qb + hb);
  return st;
}

// The prologue's plan of a tile that takes the shared-memory path, for its run (attention_qkv_whole_prologue, in
// prefetch.cuh): after the task's wait, on the critical path of every layer, the run went through ~1,100
// instructions of checks, dispatch and planning (~2 us, diagnostic stamps) before its first load of q, k and v; with
// the record, the plan is a few shared-memory loads. Tagged with the task's index: every attention_decode_qkv
// prologue writes the tag (-1: no plan), so a tag that matches is this task's in this step. The last
// WEFT_ATTN_RUN_RECORD_BYTES of shared memory, past the staging.
template <typename T>
struct QkvRunRecord {
  int task;
  int pad;
  QkvStage<T> st;
  AttnIo<T> io;
  AttnSmemPlan s;
  const T *qkv, *wq, *wk;  // the tile's row of qkv, the q and k norm weights (or null)
};
// The one thread that writes a task's run record: its tag -1 at the prologue's start, then the plan where there is
// one (no barrier orders two threads' writes before the wait). Warp 1's first lane: warp 0 builds the rope table
// meanwhile (attention_qkv_whole_prologue, prefetch.cuh).
constexpr int kQkvNoteThread = WEFT_WARP_THREADS;
template <typename T>
__device__ __forceinline__ QkvRunRecord<T>* qkv_run_record(char* smem, int bytes = WEFT_SMEM_BYTES) {
  static_assert(sizeof(QkvRunRecord<T>) <= WEFT_ATTN_RUN_RECORD_BYTES, "the record fits its bytes");
  return reinterpret_cast<QkvRunRecord<T>*>(smem + bytes - WEFT_ATTN_RUN_RECORD_BYTES);
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

// The tile's row of the rope table operand (cos | sin of its position, ROPE_TABLE's output), or null where the op
// has none.
__device__ __forceinline__ const float* qkv_rope_row(const weft_task_args* a, const weft_env* env) {
  return a->d[13] < 0 ? nullptr : global_slot<const float>(env, static_cast<int>(a->d[13])) + a->row0 * a->d[2];
}

// What QkvStage::pos_used holds where no table was built before the wait (the op has a rope table operand, which the
// prologue may not read): no position, valid or not (attn_clamp_pos gives -1), matches it.
constexpr long long kRopeNotBuilt = -0x7fffffffffffffffLL - 1;

// The tile's row of the qkv operand.
template <typename T>
__device__ __forceinline__ const T* qkv_row(const weft_task_args* a, const weft_env* env, const AttnIo<T>& io) {
  return in_ptr<T>(a, env, 0) + a->row0 * (io.hq + 2 * io.hkv) * io.hd;
}

// The shared-memory path's plan of this task from its staging and operands: what the prologue records for the run
// (attention_qkv_whole_prologue), and what a run without the record computes itself.
template <typename T>
__device__ __forceinline__ QkvRunRecord<T> qkv_plan(const weft_task_args* a, const weft_env* env, const QkvStage<T>& st,
                                                    const AttnIo<T>& io, const AttnSmemPlan& s) {
  QkvRunRecord<T> r;
  r.task = env->task_index;
  r.pad = 0;
  r.st = st;
  r.io = io;
  r.s = s;
  r.qkv = qkv_row<T>(a, env, io);
  r.wq = in_ptr<T>(a, env, 4);
  r.wk = in_ptr<T>(a, env, 5);
  return r;
}
template <typename T>
__device__ __forceinline__ QkvRunRecord<T> qkv_plan(const weft_task_args* a, const weft_env* env, char* smem,
                                                    const QkvStage<T>& st, const AttnIo<T>& io) {
  return qkv_plan<T>(a, env, st, io, attn_smem_plan<T>(a, io, smem));
}

// Whether the run has its prologue's plan (attention_qkv_whole_prologue): the record is this task's, and the loop's
// wait came between the prologue that wrote it and the run (its barrier shows the record to every thread;
// WEFT_TUNE_LATE_PREFETCH's prologue runs after the wait, with no barrier before the run).
template <typename T>
__device__ __forceinline__ bool qkv_run_planned(const weft_task_args* a, const weft_env* env, char* smem,
                                                int bytes = WEFT_SMEM_BYTES) {
  return !(env->tuning & WEFT_TUNE_LATE_PREFETCH) && task_of(a)->wait_count > 0 &&
         qkv_run_record<T>(smem, bytes)->task == env->task_index;
}

// cos / sin of every pair index at position p, exactly as rope_impl computes them, by threads t of nt (thread 0 notes
// the position).
template <typename T>
__device__ __forceinline__ void qkv_rope_table(const weft_task_args* a, const QkvStage<T>& st, i64 p, int t = tid(),
                                               int nt = WEFT_BLOCK_THREADS) {
  const RopeParams rp = rope_params_of(a);
  for (i64 i = t; i < rp.hd / 2; i += nt) rope_cos_sin(rp, static_cast<double>(p), i, st.cs[i], st.sn[i]);
  if (t == 0) *st.pos_used = p;
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
  block_sync();  // the prologue's table (a task without waits has no barrier in between)
  if (*st.pos_used != p) {  // the prologue read another position (one the graph computes) or none
    block_sync();
    qkv_rope_table<T>(a, st, p);
    block_sync();
  }
  const float eps = a->f[1];
  const bool interleaved = a->i[2] == 1;
  for (i64 h = warp(); h < group + 2; h += WEFT_BLOCK_WARPS) {
    if (h != warp()) qkv_load_head<T>(head_src(h), hd, xr);
    T* dst = h < group ? st.q + h * hd : h == group ? st.k : st.v;
    const T* w = h < group ? wq : h == group ? wk : nullptr;
    qkv_stage_head<T>(head_src(h), xr, dst, w, h <= group, st, hd, eps, interleaved);
  }
  block_sync();
}

// Head h of the fused path's tile (q heads, then k, then v; the tile's kv head kvh) from qkv's row: element
// lane + 32 k into xr[k], and its norm weight into wr[k] where it has one. Returns that weight (or nullptr).
template <typename T, int D>
__device__ __forceinline__ const T* qkv_fused_head(const T* qkv, const T* wq, const T* wk, int h, int group, int hq,
                                                   int hkv, int kvh, T (&xr)[D], T (&wr)[D]) {
  const T* src = qkv + (h < group ? kvh * group + h : hq + (h - group) * hkv + kvh) * (32 * D);
  const T* w = h < group ? wq : h == group ? wk : nullptr;
#pragma unroll
  for (int k = 0; k < D; ++k) xr[k] = src[lane() + 32 * k];
  if (w != nullptr)
#pragma unroll
    for (int k = 0; k < D; ++k) wr[k] = w[lane() + 32 * k];
  return w;
}

// After the wait: the shared-memory path of attention (attention_smem.cuh) fed straight from qkv. Warp h takes
// head h of the tile (its q heads, then k, then v), element lane + 32 k in register k; the norm and rope run
// there, rounded to T after each as head_rmsnorm and rope store them; q goes to the plan's f32 q, k and v to the
// caches' row p and the plan's row p. The position, the heads and the norm weights are loaded together (one
// global round trip) and one barrier precedes the scores, where staging q, k and v in shared memory first took
// another phase and two more barriers. Returns false, having written nothing, when the position does not fit.
// SPLIT (attention_split.cuh): a part of a split tile in split mode (plan: attn_split_plan; `whole_cap` the unsplit
// plan's rows). It stages q, attends over its timesteps only, leaves k and v (the caches' row p) to the part that
// holds p, and merges if it arrives last; at a position where the tile is not split it does nothing (true).
// qkv is the tile's row of the qkv operand, wq and wk the norm weights (or null).
// TABLE (unsplit only): rope is the tile's row of the rope table operand (ROPE_TABLE's output), whose cos and sin are
// loaded with the heads into the registers of the lanes that rotate by them, instead of the table the prologue
// builds in shared memory: no chain of double math in the task's set-up (~2 us of every attention task's, on the
// critical path at batch 8 and 32, docs/perf.md round 35). Without it the code is as it was, for batch 1.
// W (TABLE only): the warps of the team that runs the tile's kv head (team_warp: the block, or half of a tile of two
// kv heads, whose `smem` is then the team's half and s its plan there).
template <typename T, int D, int G, bool SPLIT = false, bool TABLE = false, int W = WEFT_BLOCK_WARPS>
__device__ __forceinline__ bool attention_qkv_smem(const weft_task_args* a, const QkvStage<T>& st, const AttnIo<T>& io,
                                                   const AttnSmemPlan& s, char* smem, const T* qkv, const T* wq,
                                                   const T* wk, const AttnSplit& sp = AttnSplit{}, int whole_cap = 0,
                                                   const float* rope = nullptr, bool block_phases = false) {
  static_assert(!(SPLIT && TABLE), "split parts build their table");
  static_assert(W == WEFT_BLOCK_WARPS || TABLE, "a team of half the block takes its rope from the table");
  const int tw = team_warp<W>();
  constexpr int HD = 32 * D;
  attn_smem_assume_shared(s);
  const int group = s.group, hq = static_cast<int>(io.hq), hkv = static_cast<int>(io.hkv), kvh = s.kvh;
  const i64 b = a->row0;
  const T* w = nullptr;
  T xr[D], wr[D];
  const i64 pg = load_int(io.pos, io.pos_dtype, b);
  if (tw < group + 2) w = qkv_fused_head<T, D>(qkv, wq, wk, tw, group, hq, hkv, kvh, xr, wr);
  // TABLE: cos / sin for register k, of pair lane + 32 k (half style, k < D / 2) or (lane + 32 k) / 2 (interleaved).
  float rc[D], rs[D];
  if constexpr (TABLE) {
#pragma unroll
    for (int k = 0; k < D; ++k) {
      const int i = a->i[2] == 1 ? (lane() + 32 * k) >> 1 : lane() + 32 * (k % (D / 2));
      rc[k] = rope[i];
      rs[k] = rope[HD / 2 + i];
    }
  }
  team_sync<W>();  // the prologue's rope table and note of its position are visible
  const i64 p = attn_clamp_pos(pg, io.s_dim);
  AttnPart r{};
  if constexpr (SPLIT) {
    r = attn_split_part(p, sp, whole_cap, s.cap);
    if (r.mode == kAttnWhole) {  // part 0 runs the tile through the unsplit path; parts above 0 have nothing to do
      cp_async_wait<0>();
      return true;
    }
    if (r.mode == kAttnGeneral) {  // the prologue's copies land before the general path reuses smem
      cp_async_wait<0>();
      block_sync();
      return false;
    }
  } else {
    if (attn_smem_outside<W>(p, s)) return false;
  }
  const int pi = static_cast<int>(p);
  // The prologue read another position (one the graph computes) or none (a split part without timesteps needs none).
  if (!TABLE && (!SPLIT || r.steps > 0) && *st.pos_used != p) {
    block_sync();
    qkv_rope_table<T>(a, st, p);
    block_sync();
  }
  const i64 row_kv = static_cast<i64>(hkv) * HD, base = b * io.s_dim * row_kv + kvh * HD;
  int own = pi, heads = group + 2;  // row p among the smem rows; the heads to stage (q, then k and v)
  if constexpr (SPLIT) {
    attn_split_missing_rows<T>(a, io, s, r, smem, pg, pi);
    own = pi - r.t0;
    heads = r.steps == 0 ? 0 : own < r.steps ? group + 2 : group;  // k and v by the part that holds p
  } else {
    attn_copy_missing_rows<T>(s, io.kc, io.vc, smem, base, row_kv, pi, team_tid<W>(), W * WEFT_WARP_THREADS);
  }
  const float eps = a->f[1];
  const bool interleaved = a->i[2] == 1;
  for (int h = tw; h < heads; h += W) {  // uniform per warp
    if (h != tw) w = qkv_fused_head<T, D>(qkv, wq, wk, h, group, hq, hkv, kvh, xr, wr);
    T out[D];
    if (h == group + 1) {  // v: as it is
#pragma unroll
      for (int k = 0; k < D; ++k) out[k] = xr[k];
    } else {
      float x[D];
#pragma unroll
      for (int k = 0; k < D; ++k) x[k] = to_f(xr[k]);
      if (w != nullptr) {  // the same sum, in the same order, as qkv_stage_head
        float ss = 0.0f;
#pragma unroll
        for (int k = 0; k < D; ++k) ss = fmaf(x[k], x[k], ss);
        ss = warp_sum(ss);
        const float inv = 1.0f / sqrtf(ss / static_cast<float>(HD) + eps);
#pragma unroll
        for (int k = 0; k < D; ++k) x[k] = to_f(from_f<T>(__fmul_rn(__fmul_rn(x[k], inv), to_f(wr[k]))));
      }
      // rope_pair's arithmetic: half style pairs (i, i + HD/2) are registers k and k + D/2 of one lane,
      // interleaved pairs (2i, 2i+1) the same register of lanes 2i and 2i+1.
      if (!interleaved) {
#pragma unroll
        for (int k = 0; k < D / 2; ++k) {
          const int i = lane() + 32 * k;
          const float c = TABLE ? rc[k] : st.cs[i], sn = TABLE ? rs[k] : st.sn[i], xa = x[k], xb = x[k + D / 2];
          out[k] = from_f<T>(__fsub_rn(__fmul_rn(xa, c), __fmul_rn(xb, sn)));
          out[k + D / 2] = from_f<T>(__fadd_rn(__fmul_rn(xb, c), __fmul_rn(xa, sn)));
        }
      } else {
#pragma unroll
        for (int k = 0; k < D; ++k) {
          const int i = (lane() + 32 * k) >> 1;
          const float other = __shfl_xor_sync(WEFT_FULL_MASK, x[k], 1), c = TABLE ? rc[k] : st.cs[i],
                      sn = TABLE ? rs[k] : st.sn[i];
          out[k] = from_f<T>((lane() & 1) == 0 ? __fsub_rn(__fmul_rn(x[k], c), __fmul_rn(other, sn))
                                               : __fadd_rn(__fmul_rn(x[k], c), __fmul_rn(other, sn)));
        }
      }
    }
    if (h < group) {
#pragma unroll
      for (int k = 0; k < D; ++k) s.q[h * HD + lane() + 32 * k] = to_f(out[k]);
    } else {
      const bool is_k = h == group;
      T* cache = (is_k ? io.kc : io.vc) + base + p * row_kv;
      T* row = reinterpret_cast<T*>(is_k ? s.k : s.v) + own * HD;
      constexpr int N = Vec<T>::N;
#pragma unroll
      for (int k = 0; k < D; ++k) {
        const int e = lane() + 32 * k;  // K's units permuted (attn_k_unit)
        cache[e] = out[k];
        row[is_k ? attn_k_unit(own, e / N) * N + e % N : e] = out[k];
      }
    }
  }
  cp_async_wait<0>();
  team_sync<W>();
  if constexpr (SPLIT) {
    if (r.steps > 0)
      attn_smem_attend_any<T, D, G, true>(io, s, b, r.steps - 1, block_phases, sp.block + sp.part * (2 * group * HD));
    attn_split_merge<T, HD>(io, sp, r, group, kvh, b, pi);
  } else {
    attn_smem_attend_any<T, D, G, false, W>(io, s, b, pi, block_phases);
  }
  return true;
}

// attention_decode_qkv's instance of the shared-memory path (attention_qkv_smem), set up from its arguments.
// TABLE: the tile has a rope table operand (d13) and the prologue planned the run (attention_decode_qkv_impl): an
// instance of its own, so that batch 1's (no table) keeps its code and registers (with both paths in one function
// one-row steps ran 0.5-1% slower, docs/perf.md round 35). Elsewhere a tile with a table runs the plain instance,
// which builds the table itself.
template <typename T, int D, int G, bool TABLE = false>
__device__ __noinline__ bool attention_qkv_smem_instance(const weft_task_args* a, const weft_env* env, char* smem) {
  QkvRunRecord<T> p;
  if (qkv_run_planned<T>(a, env, smem)) {
    p = *qkv_run_record<T>(smem);  // the prologue's plan (attention_qkv_whole_prologue)
  } else {
    const QkvStage<T> st = qkv_stage<T>(a, smem);
    p = qkv_plan<T>(a, env, smem, st, attn_io_qkv<T>(a, env, st));
  }
  if (!p.s.ok || p.s.hd != 32 * D || p.s.group % G != 0) return false;
  const bool block_phases = (env->tuning & WEFT_TUNE_ATTN_BLOCK_PHASES) != 0;
  if constexpr (TABLE)
    return attention_qkv_smem<T, D, G, false, true>(a, p.st, p.io, p.s, smem, p.qkv, p.wq, p.wk, AttnSplit{}, 0,
                                                    qkv_rope_row(a, env), block_phases);
  else
    return attention_qkv_smem<T, D, G>(a, p.st, p.io, p.s, smem, p.qkv, p.wq, p.wk, AttnSplit{}, 0, nullptr,
                                       block_phases);
}
struct AttnQkvSmemInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    return attention_qkv_smem_instance<T, D, G>(a, env, smem);
  }
};
struct AttnQkvTableInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    return attention_qkv_smem_instance<T, D, G, true>(a, env, smem);
  }
};

// A tile of two kv heads (a->i[3] == 2; lowering: attention_pairs): team t of WEFT_ATTN_PAIR_WARPS warps runs kv head t
// of it through the shared-memory path, in its half of shared memory, as an unsplit tile of its own with a rope
// table operand would run on the whole block ("side by side"). Where tiles outnumber the SMs (batch 32: 256 tiles of
// one (row, kv head) on 132 SMs) the second wave's tiles waited for the first's to end, each a chain of
// latency-bound phases; paired, a block runs two of them at once. At a position past what a half holds, the block
// runs the kv heads "one by one" on the whole-block path, the first with its rows copied before the wait as a tile
// of one (attention_decode_qkv_pair).
constexpr int kQkvPairBytes = WEFT_ATTN_PAIR_BYTES(WEFT_SMEM_BYTES);
__device__ __forceinline__ int qkv_pair_team() { return warp() / WEFT_ATTN_PAIR_WARPS; }

// Which way the prologue set a pair tile up, tagged with the task's index, at smem + 4: the 12 bytes between the
// whole-block plan's note (smem's first word) and its K rows, which a half's plan at team 0 leaves alone too.
constexpr int kQkvPairSideBySide = 1, kQkvPairOneByOne = 2;
__device__ __forceinline__ int* qkv_pair_mode_word(char* smem) { return reinterpret_cast<int*>(smem + 4); }
__device__ __forceinline__ int qkv_pair_mode_tag(const weft_env* env, int mode) { return env->task_index * 4 + mode; }
// After the wait: whether the prologue set the tile up `mode`'s way (the loop's wait was the barrier that shows its
// notes; see qkv_run_planned).
__device__ __forceinline__ bool qkv_pair_noted(const weft_task_args* a, const weft_env* env, char* smem, int mode) {
  return !(env->tuning & WEFT_TUNE_LATE_PREFETCH) && task_of(a)->wait_count > 0 &&
         *qkv_pair_mode_word(smem) == qkv_pair_mode_tag(env, mode);
}

// The plan of kv head `head` of a pair tile: in the calling team's half of shared memory (`region`, WARPS the team's)
// or, one by one, in the whole of it.
template <typename T, int WARPS>
__device__ __forceinline__ QkvRunRecord<T> qkv_pair_plan(const weft_task_args* a, const weft_env* env, char* region,
                                                         int head) {
  constexpr int bytes = WARPS == WEFT_BLOCK_WARPS ? WEFT_SMEM_BYTES : kQkvPairBytes;
  const QkvStage<T> st = qkv_stage<T>(a, region, bytes);
  const AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  return qkv_plan<T>(a, env, st, io, attn_smem_plan<T>(a, io, region, 0, 2, bytes, WARPS, head));
}

// After the wait, both teams, side by side: false (in both, having written nothing) where the tile does not take
// that path — the plan does not fit, or the position lies past what a half holds.
template <typename T, int D, int G>
__device__ __noinline__ bool attention_qkv_pair_instance(const weft_task_args* a, const weft_env* env, char* smem) {
  const int team = qkv_pair_team();
  char* region = smem + team * kQkvPairBytes;
  const bool planned = qkv_pair_noted(a, env, smem, kQkvPairSideBySide) && qkv_run_planned<T>(a, env, region, kQkvPairBytes);
  const QkvRunRecord<T> p = planned ? *qkv_run_record<T>(region, kQkvPairBytes)
                                    : qkv_pair_plan<T, WEFT_ATTN_PAIR_WARPS>(a, env, region, team);
  if (!p.s.ok || p.s.hd != 32 * D || p.s.group != G || p.s.cap < WEFT_ATTN_PAIR_WARPS * WEFT_WARP_THREADS / 2 ||
      a->d[13] < 0)
    return false;
  return attention_qkv_smem<T, D, G, false, true, WEFT_ATTN_PAIR_WARPS>(a, p.st, p.io, p.s, region, p.qkv, p.wq, p.wk,
                                                                       AttnSplit{}, 0, qkv_rope_row(a, env));
}
struct AttnQkvPairInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    if constexpr (G < 2) return false;  // the per-warp phases need 2, 4 or 8 q heads (lowering pairs no other group)
    else return attention_qkv_pair_instance<T, D, G>(a, env, smem);
  }
};

// After the wait, one by one: kv head HEAD of a pair tile on the whole block's shared-memory path (the first with
// the prologue's plan where it made one), or false (having written nothing) where the position does not fit it.
template <typename T, int D, int G, int HEAD>
__device__ __noinline__ bool attention_qkv_pair_head_instance(const weft_task_args* a, const weft_env* env, char* smem) {
  const bool planned = HEAD == 0 && qkv_pair_noted(a, env, smem, kQkvPairOneByOne) && qkv_run_planned<T>(a, env, smem);
  const QkvRunRecord<T> p = planned ? *qkv_run_record<T>(smem) : qkv_pair_plan<T, WEFT_BLOCK_WARPS>(a, env, smem, HEAD);
  if (!p.s.ok || p.s.hd != 32 * D || p.s.group % G != 0 || a->d[13] < 0) return false;
  return attention_qkv_smem<T, D, G, false, true>(a, p.st, p.io, p.s, smem, p.qkv, p.wq, p.wk, AttnSplit{}, 0,
                                                  qkv_rope_row(a, env), (env->tuning & WEFT_TUNE_ATTN_BLOCK_PHASES) != 0);
}
template <int HEAD>
struct AttnQkvPairHeadInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    return attention_qkv_pair_head_instance<T, D, G, HEAD>(a, env, smem);
  }
};

// A part of a split tile (attention_split.cuh), set up from its arguments: attention_qkv_smem<..., true>.
template <typename T, int D, int G>
__device__ __noinline__ bool attention_qkv_split_instance(const weft_task_args* a, const weft_env* env, char* smem) {
  const QkvStage<T> st = qkv_stage<T>(a, smem);
  const AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  const AttnSmemPlan s = attn_split_plan<T>(a, io, smem);
  AttnSplit sp;
  if (!s.ok || s.hd != 32 * D || s.group % G != 0 || !attn_split_of(a, sp) || sp.parts < 2) return false;
  return attention_qkv_smem<T, D, G, true>(a, st, io, s, smem, qkv_row<T>(a, env, io), in_ptr<T>(a, env, 4),
                                           in_ptr<T>(a, env, 5), sp, attn_smem_plan<T>(a, io, smem).cap, nullptr,
                                           (env->tuning & WEFT_TUNE_ATTN_BLOCK_PHASES) != 0);
}
struct AttnQkvSplitInstance {
  template <typename T, int D, int G>
  __device__ __forceinline__ static bool run(const weft_task_args* a, const weft_env* env, char* smem) {
    return attention_qkv_split_instance<T, D, G>(a, env, smem);
  }
};

// Long contexts, f32, other head sizes: q, k and v staged in shared memory for the general path.
template <typename T>
__device__ __noinline__ void attention_decode_qkv_general(const weft_task_args* a, const weft_env* env, char* smem) {
  const QkvStage<T> st = qkv_stage<T>(a, smem);
  AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  qkv_stage_inputs<T>(a, env, st);
  io.pos_staged = st.pos_used;  // the position the staging used: no second read of positions
  attention_general<T>(a, env, io, smem);
}

// A tile of two kv heads (attention_qkv_pair_instance): side by side where the prologue set it up so (or, without its
// notes, where the position fits a half), else one by one — each kv head on the whole block's shared-memory path, or
// past what that holds on the general path, as a tile of one (a copy of the task with that kv head's columns).
template <typename T>
__device__ __noinline__ void attention_decode_qkv_pair(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->d[0] <= 0 || a->d[1] <= 0 || a->d[2] <= 0 || a->d[0] % a->d[1] != 0 || a->row1 <= a->row0 ||
      a->col1 <= a->col0 || a->d[9] > 1)
    return;
  const bool one_by_one = qkv_pair_noted(a, env, smem, kQkvPairOneByOne);
  if (!one_by_one && attn_smem_run<T, AttnQkvPairInstance>(a, env, smem)) return;
  cp_async_wait<0>();  // the prologue's copies, if any, have landed before the block reuses shared memory
  // Shared memory as no prologue left it: no K/V rows, no plan, no rope table.
  auto forget = [&] {
    block_sync();  // every thread is done with what lies there
    if (tid() == 0) *reinterpret_cast<int*>(smem) = -1;
    if (tid() == kQkvNoteThread) qkv_run_record<T>(smem)->task = -1;
    if (tid() == 2 * WEFT_WARP_THREADS) *qkv_stage<T>(a, smem).pos_used = kRopeNotBuilt;
    block_sync();
  };
  for (int k = 0; k < 2; ++k) {
    if (k > 0 || !one_by_one) forget();  // the first kv head keeps what the prologue copied one by one
    if (k == 0 ? attn_smem_run<T, AttnQkvPairHeadInstance<0>>(a, env, smem)
               : attn_smem_run<T, AttnQkvPairHeadInstance<1>>(a, env, smem))
      continue;
    forget();
    weft_task task = *task_of(a);  // a whole task: the general path reads its waits (task_of)
    const i64 width = (a->col1 - a->col0) / 2;
    task.args.i[3] = 1;
    task.args.col0 = a->col0 + k * width;
    task.args.col1 = task.args.col0 + width;
    attention_decode_qkv_general<T>(&task.args, env, smem);
  }
}

// A split tile (attention_split.cuh): part 0 tries the unsplit path first (whole mode), then every part its part of
// the split path; where neither takes the tile, part 0 runs the general path whole. A part whose prologue saw
// another position forgets its copies (waited for), so that neither path trusts them. Out of line: the unsplit
// dispatcher below keeps its own code.
template <typename T>
__device__ __noinline__ void attention_decode_qkv_split(const weft_task_args* a, const weft_env* env, char* smem) {
  AttnSplit sp;
  if (!attn_split_of(a, sp)) {
    if (tid() == 0)
      record_error(env, WEFT_DEV_ERR_BAD_TASK, WEFT_DEV_OP_ATTENTION_DECODE_QKV, static_cast<unsigned int>(a->d[9]), 1u);
    return;
  }
  // An idle part touches nothing and returns. Where its waits are its own, the positions are ready at launch
  // (lowering), so its prologue's note stands: it returns without a wait or a second read of the position. Every
  // other part waits before it reads q, k, v or writes a row, a block or the output.
  if (waits_in_op(a) && attn_split_noted_mode(smem) == kAttnNoteIdle) return;
  if (!wait_in_op(a, env)) return;
  const int noted = attn_split_noted(smem, load_int(in_ptr<void>(a, env, 3), a->i[0], a->row0));
  if (noted == kAttnNoteIdle) return;
  if (noted < 0) {  // uniform
    cp_async_wait<0>();
    block_sync();
    attn_split_note(smem, 0, -1);
    if (tid() == 0) *reinterpret_cast<int*>(smem) = -1;
    block_sync();
  }
  if (sp.part == 0 && attn_smem_run<T, AttnQkvSmemInstance>(a, env, smem)) return;
  if (attn_smem_run<T, AttnQkvSplitInstance>(a, env, smem) || sp.part != 0) return;
  attention_decode_qkv_general<T>(a, env, smem);
}

// Out of line, with pointers for its only operands: inlined into the task loop, the fused path moved the loop's
// register allocation (ptxas: stack 744 -> 864-872 bytes, spill loads 604 -> 1300) and every task's set-up paid
// 0.3-0.4 us for it. Called, it costs this task ~0.6 us, and the loop, holding no attention code at all (this, the
// plain op and both prologues), keeps less (544 bytes) and sets every task up faster (docs/perf.md, round 13).
// A dispatcher to the shared-memory path's instances (attn_smem_by_group says why they are functions of their
// own) and the general path: it keeps only its three pointers across those calls, so the second call level saves
// and restores few registers. A tile split over its timesteps (d9 > 1) goes to attention_decode_qkv_split, but for
// part 0 where its prologue found the tile whole: that runs the unsplit instance from here, one call level deep like
// an unsplit tile (the unsplit instance declines, having written nothing, a position that does not fit after all).
template <typename T>
__device__ __noinline__ void attention_decode_qkv_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->i[3] == 2) {  // a tile of two kv heads: its own records, in the halves of shared memory
    attention_decode_qkv_pair<T>(a, env, smem);
    return;
  }
  // Where the prologue planned the shared-memory path (attention_qkv_whole_prologue; the loop's wait was the barrier
  // that shows the record), straight there: no checks or notes to read again. A position that no longer fits falls
  // through.
  if (qkv_run_planned<T>(a, env, smem) &&
      (a->d[13] >= 0 ? attn_smem_run<T, AttnQkvTableInstance>(a, env, smem) : attn_smem_run<T, AttnQkvSmemInstance>(a, env, smem)))
    return;
  if (a->d[0] <= 0 || a->d[1] <= 0 || a->d[2] <= 0 || a->d[0] % a->d[1] != 0 || a->row1 <= a->row0 || a->col1 <= a->col0)
    return;
  if (a->d[9] <= 1) {  // unsplit, as the prologue reads it (attention_qkv_prologue)
    if (attn_smem_run<T, AttnQkvSmemInstance>(a, env, smem)) return;
    attention_decode_qkv_general<T>(a, env, smem);
    return;
  }
  if (a->d[10] == 0 && attn_split_noted_mode(smem) == kAttnNoteWhole &&
      attn_smem_run<T, AttnQkvSmemInstance>(a, env, smem))
    return;
  attention_decode_qkv_split<T>(a, env, smem);
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
