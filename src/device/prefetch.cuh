// What a task reads that no event guards, requested before the task waits for its inputs: a linear tile's
// weights start streaming into shared memory (gemv_stream.cuh, gemv_mma.cuh); a norm's weight vector and the KV-cache rows
// that attention will read (written by earlier steps) are prefetched into L2. The loads then hit L2, and the
// address translation is warm: a decode step streams gigabytes of weights, which evicts the TLB entries of
// everything else, and a page walk costs microseconds on the critical path of the small ops.
#ifndef WEFT_DEVICE_PREFETCH_CUH
#define WEFT_DEVICE_PREFETCH_CUH

#include "common.cuh"
#include "attention_smem.cuh"
#include "ops_attention_qkv.cuh"
#include "gemv_mma.cuh"
#include "gemv_one_row.cuh"
#include "ops_linear_silu_mul.cuh"

namespace weft_dev {

__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// [p, p + bytes) into L2, one 128-byte line per thread (t of nt) and step (prefetches never fault).
__device__ __forceinline__ void prefetch_l2_range(const void* p, i64 bytes, int t = tid(),
                                                  int nt = WEFT_BLOCK_THREADS) {
  const char* c = static_cast<const char*>(p);
  if (c == nullptr) return;
  for (i64 off = static_cast<i64>(t) * 128; off < bytes; off += static_cast<i64>(nt) * 128) prefetch_l2(c + off);
}

// Attention of a tile too long for the shared-memory path (attention_smem.cuh): K and V cache rows [0, p) of
// its kv heads for each row's position p, into L2. positions is read
// before its event may have fired: if the graph computes it, a stale value only prefetches other rows.
// `skip`: the tile's first kv heads to leave out (their rows go to shared memory).
template <typename T>
__device__ void attention_prefetch(const weft_task_args* a, const AttnIo<T>& io, int skip = 0) {
  const i64 hq = io.hq, hkv = io.hkv, hd = io.hd, s_dim = io.s_dim;
  if (hq <= 0 || hkv <= 0 || hd <= 0 || hq % hkv != 0 || io.pos == nullptr) return;
  const i64 unit_cols = hq / hkv * hd, kv0 = a->col0 / unit_cols + skip, kv1 = a->col1 / unit_cols;
  const i64 row_kv = hkv * hd, head_bytes = hd * static_cast<i64>(sizeof(T)), lines = (head_bytes + 127) / 128;
  for (i64 b = a->row0; b < a->row1; ++b) {
    i64 p = load_int(io.pos, io.pos_dtype, b);
    p = p < 0 ? 0 : p > s_dim ? s_dim : p;
    const i64 per_t = (kv1 - kv0) * lines, n = p * per_t;
    for (i64 e = tid(); e < n; e += WEFT_BLOCK_THREADS) {
      const i64 t = e / per_t, kvh = kv0 + (e % per_t) / lines, line = e % lines;
      const i64 at = (b * s_dim + t) * row_kv + kvh * hd;
      prefetch_l2(reinterpret_cast<const char*>(io.kc + at) + line * 128);
      prefetch_l2(reinterpret_cast<const char*>(io.vc + at) + line * 128);
    }
  }
}

// Before the wait, an attention_decode_qkv tile that runs whole (unsplit, or part 0 of a split tile, whole mode): the
// rope table at `raw` (the position as loaded), the K/V rows [0, p) into shared memory where the tile takes that
// path (its note of p at smem's first word, else -1) with the run's plan (the run record), and the norm weights into
// L2. Three serial chains, each on warps of its own: warp 0 builds the table (pow and sincos in double, ~1.9 us),
// warp 1's first lane writes the note and the record (~1 us of one thread), the other warps copy the rows. Done in
// turn by every thread, they took ~5.9 us, on the critical path wherever a block's previous task ends when the
// tile's inputs are ready: at batch 32 both waves of a layer's 256 tiles (docs/perf.md round 34).
// Returns whether the tile takes the shared-memory path, the same in every thread. `s`: the tile's plan (of one kv
// head of a pair tile, attention_qkv_pair_prologue).
template <typename T>
__device__ __forceinline__ bool attention_qkv_whole_prologue(const weft_task_args* a, const weft_env* env, char* smem,
                                                             const QkvStage<T>& st, const AttnIo<T>& io, i64 raw,
                                                             const AttnSmemPlan& s) {
  static_assert(WEFT_BLOCK_WARPS >= 3 && kQkvNoteThread == WEFT_WARP_THREADS, "warps 0, 1 and the rest");
  const i64 p = attn_clamp_pos(raw, io.s_dim);
  const bool whole = s.ok && p >= 0 && p <= s.cap - 1;
  if (warp() == 0) {
    // With a rope table operand (ready only after the wait) the run loads its row instead.
    if (a->d[13] < 0) qkv_rope_table<T>(a, st, raw, lane(), WEFT_WARP_THREADS);
    else if (lane() == 0) *st.pos_used = kRopeNotBuilt;
  } else if (warp() == 1) {
    if (tid() == kQkvNoteThread) {
      *reinterpret_cast<int*>(smem) = whole ? static_cast<int>(p) : -1;
      if (whole) *qkv_run_record<T>(smem) = qkv_plan<T>(a, env, st, io, s);
    }
    const i64 wbytes = a->d[2] * static_cast<i64>(sizeof(T));
    prefetch_l2_range(in_ptr<char>(a, env, 4), wbytes, lane(), WEFT_WARP_THREADS);
    prefetch_l2_range(in_ptr<char>(a, env, 5), wbytes, lane(), WEFT_WARP_THREADS);
  } else if (whole) {
    constexpr int kFirst = 2 * WEFT_WARP_THREADS;
    const i64 row_kv = io.hkv * s.hd;
    attn_copy_rows<T>(s, io.kc, io.vc, a->row0 * io.s_dim * row_kv + s.kvh * s.hd, row_kv, 0, static_cast<int>(p), 0,
                      tid() - kFirst, WEFT_BLOCK_THREADS - kFirst);
  }
  return whole;
}
template <typename T>
__device__ __forceinline__ bool attention_qkv_whole_prologue(const weft_task_args* a, const weft_env* env, char* smem,
                                                             const QkvStage<T>& st, const AttnIo<T>& io, i64 raw) {
  return attention_qkv_whole_prologue<T>(a, env, smem, st, io, raw, attn_smem_plan<T>(a, io, smem));
}

// Both attention prologues out of line: the task loop holds no attention code (see attention_decode_qkv_impl).
template <typename T>
__device__ __noinline__ void attention_plain_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  const AttnIo<T> io = attn_io_plain<T>(a, env);
  if (!attention_smem_prologue<T>(a, io, smem)) attention_prefetch<T>(a, io);
}

// Before the wait, a part of a split tile (attention_split.cuh): its mode at the position it sees, noted; a part
// with nothing to do requests nothing (no rope table either: a run that finds work after all builds it). Whole
// mode: part 0 as an unsplit tile; split mode: the part's rows; general: part 0's L2 prefetch.
// Part 0 first does what an unsplit tile's prologue does (whole mode, the short contexts, is the common case, and
// on the critical path: deciding the mode first made part 0's prologue ~3 us longer, docs/perf.md round 25).
template <typename T>
__device__ __noinline__ void attention_split_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  AttnSplit sp;
  if (!attn_split_of(a, sp)) return;  // the run records the bad table
  const QkvStage<T> st = qkv_stage<T>(a, smem);
  const AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  const i64 raw = load_int(io.pos, io.pos_dtype, a->row0), p = attn_clamp_pos(raw, io.s_dim);
  const i64 wbytes = a->d[2] * static_cast<i64>(sizeof(T));
  if (sp.part == 0) {
    const bool whole = attention_qkv_whole_prologue<T>(a, env, smem, st, io, raw);  // notes its rows at smem (or -1)
    attn_split_note(smem, whole ? kAttnNoteWhole : 0, raw);
    if (whole) return;
  }
  const AttnSmemPlan part = attn_split_plan<T>(a, io, smem);
  const AttnPart r = attn_split_part(p, sp, attn_smem_plan<T>(a, io, smem).cap, part.cap);
  if (sp.part == 0) {  // rope table and norm weights requested; not whole after all
    if (r.mode == kAttnSplit) {
      attn_split_note(smem, kAttnNoteCopied, raw);
      attn_split_copy<T>(a, io, part, r, p);
    } else {
      attention_prefetch<T>(a, io);
    }
    return;
  }
  if (tid() == kQkvNoteThread) *reinterpret_cast<int*>(smem) = -1;  // no unsplit rows
  const bool idle = r.mode != kAttnSplit;
  attn_split_note(smem, idle ? kAttnNoteIdle : kAttnNoteCopied, raw);
  if (idle || r.steps == 0) {
    if (tid() == 0) *st.pos_used = -1;
    return;
  }
  qkv_rope_table<T>(a, st, raw);
  attn_split_copy<T>(a, io, part, r, p);
  prefetch_l2_range(in_ptr<char>(a, env, 4), wbytes);
  prefetch_l2_range(in_ptr<char>(a, env, 5), wbytes);
}

// Before the wait, a tile of two kv heads (attention_qkv_pair_instance). Side by side where the position fits a half
// of shared memory: each team notes its kv head's rows and plan in its half and copies the rows there (its first
// warp writes the note and the record and requests the norm weights into L2, the other three copy). Else one by one:
// the first kv head set up as a tile of one on the whole block (attention_qkv_whole_prologue), the second's rows
// into L2. Either way, the way taken at smem + 4 (qkv_pair_mode_word).
template <typename T>
__device__ __noinline__ void attention_qkv_pair_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  const int team = qkv_pair_team(), tw = team_warp<WEFT_ATTN_PAIR_WARPS>();
  if (a->d[0] <= 0 || a->d[1] <= 0 || a->d[2] <= 0 || a->d[0] % a->d[1] != 0) {
    if (tid() == 0) *qkv_pair_mode_word(smem) = 0;  // neither way: the run sets itself up
    return;
  }
  char* region = smem + team * kQkvPairBytes;
  const QkvStage<T> st = qkv_stage<T>(a, region, kQkvPairBytes);
  const AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  const AttnSmemPlan s = attn_smem_plan<T>(a, io, region, 0, 2, kQkvPairBytes, WEFT_ATTN_PAIR_WARPS, team);
  const i64 raw = load_int(io.pos, io.pos_dtype, a->row0), p = attn_clamp_pos(raw, io.s_dim);
  if (!(s.ok && p >= 0 && p <= s.cap - 1)) {  // the same in both teams
    const QkvStage<T> fst = qkv_stage<T>(a, smem);
    const AttnIo<T> fio = attn_io_qkv<T>(a, env, fst);
    const AttnSmemPlan first = attn_smem_plan<T>(a, fio, smem, 0, 2, WEFT_SMEM_BYTES, WEFT_BLOCK_WARPS, 0);
    if (tid() == 0) *qkv_pair_mode_word(smem) = qkv_pair_mode_tag(env, kQkvPairOneByOne);
    if (tid() == kQkvNoteThread) qkv_run_record<T>(smem)->task = -1;  // no plan unless the whole prologue writes one
    const bool whole = attention_qkv_whole_prologue<T>(a, env, smem, fst, fio, raw, first);
    attention_prefetch<T>(a, fio, whole ? 1 : 0);
    return;
  }
  if (tid() == 0) *qkv_pair_mode_word(smem) = qkv_pair_mode_tag(env, kQkvPairSideBySide);
  if (tw == 0) {
    if (lane() == 0) {
      *reinterpret_cast<int*>(region) = static_cast<int>(p);
      *qkv_run_record<T>(region, kQkvPairBytes) = qkv_plan<T>(a, env, st, io, s);
    }
    if (team == 0) {
      const i64 wbytes = a->d[2] * static_cast<i64>(sizeof(T));
      prefetch_l2_range(in_ptr<char>(a, env, 4), wbytes, lane(), WEFT_WARP_THREADS);
      prefetch_l2_range(in_ptr<char>(a, env, 5), wbytes, lane(), WEFT_WARP_THREADS);
    }
  } else {
    constexpr int kFirst = WEFT_WARP_THREADS, kTeam = WEFT_ATTN_PAIR_WARPS * WEFT_WARP_THREADS;
    const i64 row_kv = io.hkv * s.hd;
    attn_copy_rows<T>(s, io.kc, io.vc, a->row0 * io.s_dim * row_kv + s.kvh * s.hd, row_kv, 0, static_cast<int>(p), 0,
                      team_tid<WEFT_ATTN_PAIR_WARPS>() - kFirst, kTeam - kFirst);
  }
}

// Before the wait: the rope table, the K/V rows (shared-memory path) or their L2 prefetch, the norm weights.
template <typename T>
__device__ __noinline__ void attention_qkv_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->i[3] == 2) {  // a tile of two kv heads: its records lie in the halves of shared memory
    attention_qkv_pair_prologue<T>(a, env, smem);
    return;
  }
  if (tid() == kQkvNoteThread) qkv_run_record<T>(smem)->task = -1;  // no plan for the run, unless noted below
  if (a->d[0] <= 0 || a->d[1] <= 0 || a->d[2] <= 0 || a->d[0] % a->d[1] != 0) return;
  if (a->d[9] > 1) {
    attention_split_prologue<T>(a, env, smem);
    return;
  }
  const QkvStage<T> st = qkv_stage<T>(a, smem);
  const AttnIo<T> io = attn_io_qkv<T>(a, env, st);
  if (!attention_qkv_whole_prologue<T>(a, env, smem, st, io, load_int(io.pos, io.pos_dtype, a->row0)))
    attention_prefetch<T>(a, io);
}

#if !WEFT_DEVLIB_TENSOR_CORES
// The weight stream's first stages of a streamed GEMV tile (operand w_in the weight), for every dtype, out of line:
// the CUDA-core library's linear_stream_prologue_hot inlines only the tiles its task loop inlines.
__device__ __noinline__ void linear_stream_prologue_any(const weft_task_args* a, const weft_env* env, char* smem,
                                                        int w_in) {
  WEFT_DISPATCH_FLOAT(a->dtype, linear_stream_prologue, a, env, smem, w_in);
}
#endif
// The first stages of a streamed GEMV tile's weights, inlined where the task loop inlines the tile.
__device__ __forceinline__ void linear_stream_prologue_hot(const weft_task_args* a, const weft_env* env, char* smem,
                                                           int w_in) {
#if WEFT_DEVLIB_TENSOR_CORES
  WEFT_DISPATCH_FLOAT(a->dtype, linear_stream_prologue, a, env, smem, w_in);
#else
  if (a->dtype == WEFT_DEVLIB_ONE_ROW_DTYPE) {  // see OneRowT (gemv_stream.cuh); the same stages as the general one
    const OneRowT* w = in_ptr<OneRowT>(a, env, w_in);
    const GemvStream st = gemv_stream_plan<OneRowT>(a, w);
    // The plan for one_row_gemv, or (task -1) none: what lies there is another task's.
    const bool record = st.units == kGemvOneRowUnits && a->row1 - a->row0 == 1 && gemv_plan_record_fits(a->d[0]);
    if (lane() == 0) *gemv_plan_record(smem) = GemvPlanRecord{w, st.n0, st.n1, st.spr, record ? env->task_index : -1, 0};
    __syncwarp();  // seen by the warp's other lanes also where no barrier comes before the run (a task without waits)
#if WEFT_DEV_LOADER
    if (record && !(env->tuning & WEFT_TUNE_LOADER_OFF)) return;  // the weight loader streams it (weight_loader.cuh)
#endif
    if (st.units == kGemvOneRowUnits) {
#if WEFT_DEV_POLLER_WARP_FREE
      // Only tiles one_row_gemv runs (it makes the wait and barrier this needs); `record` is the same in every warp.
      if (record) {
        gemv_prologue_poller_free<OneRowT, kGemvOneRowUnits>(a, w, st, smem);
        return;
      }
#endif
      gemv_prologue_units<OneRowT, kGemvOneRowUnits>(a, w, st, smem);
      return;
    }
  }
  linear_stream_prologue_any(a, env, smem, w_in);
#endif
}

// Requests what task `a` (of device op `op`) reads that no event guards. The task loop runs it, with all
// threads, once per task before the task's waits (the CUDA-core library: its GEMV and attention cases inlined,
// the rest out of line; prefetch_task, task_loop.cuh); the streamed GEMV ops expect it to have run for the same
// task (it starts the weight stream they consume).
__device__ __forceinline__ void prefetch_op(int op, const weft_task_args* a, const weft_env* env, char* smem) {
  const i64 esize = a->dtype == WEFT_DEV_F32 ? 4 : 2;
  switch (op) {
    case WEFT_DEV_OP_LINEAR:
      if (mma_tile_chunked(a) && linear_chunked_prologue(a, env, smem)) break;
      [[fallthrough]];
    case WEFT_DEV_OP_SILU_MUL_LINEAR:
    case WEFT_DEV_OP_RMSNORM_LINEAR:
      linear_stream_prologue_hot(a, env, smem, op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1);
      break;
    case WEFT_DEV_OP_LINEAR_SILU_MUL:
      linear_silu_mul_prologue(a, env, smem);
      break;
    case WEFT_DEV_OP_ATTENTION_DECODE:
      WEFT_DISPATCH_FLOAT(a->dtype, attention_plain_prologue, a, env, smem);
      break;
    case WEFT_DEV_OP_ATTENTION_DECODE_QKV:
      WEFT_DISPATCH_FLOAT(a->dtype, attention_qkv_prologue, a, env, smem);
      break;
    case WEFT_DEV_OP_RMSNORM:
    case WEFT_DEV_OP_LAYERNORM:
      prefetch_l2_range(in_ptr<char>(a, env, 1), a->d[0] * esize);
      if (op == WEFT_DEV_OP_LAYERNORM) prefetch_l2_range(in_ptr<char>(a, env, 2), a->d[0] * esize);
      break;
    case WEFT_DEV_OP_HEAD_RMSNORM:
      prefetch_l2_range(in_ptr<char>(a, env, 1), a->d[1] * esize);
      break;
    default:
      break;
  }
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_PREFETCH_CUH
