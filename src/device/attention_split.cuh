// attention_decode_qkv split over its timesteps (split-KV; ATTENTION_DECODE_QKV with d9 = P >= 2 parts, task_abi.h).
// The shared-memory path (attention_smem.cuh) holds a few hundred timesteps per tile; a longer context went to the
// general path, one block per kv head walking the cache in chunks from memory (Qwen3-0.6B at 1500 timesteps: 5.8 ms
// per token). Lowering gives a tile whose cache is longer than that P tasks; at each step the device picks a mode
// from the position p alone, so that every part picks alike:
//   whole:   p + 1 timesteps fit the unsplit path: part 0 runs it (its code unchanged, attention_qkv_smem<..., false>)
//            and the others have nothing to do. A part costs about as much as a short whole tile (docs/perf.md
//            round 24), so short contexts are not split.
//   split:   2^k parts (k >= 1), k the largest whose share per = ceil((p + 1) / 2^k) keeps kAttnMinPartSteps
//            timesteps, but at least the fewest whose share fits the split plan (a part's prologue copies its rows
//            and its run walks them: both ~proportional, on the critical path; docs/perf.md round 25): part j takes
//            timesteps [j per, min((j + 1) per, p + 1)), writes its entry of the tile's block (its normalized
//            output, max and exp-sum per head), and every part adds 1 to the tile's arrival counter; the last to
//            arrive merges (attn_split_merge).
//   general: not even that (or a bad position): part 0 runs the general path whole, the others nothing.
// A part with nothing to do notes it before its wait (attn_split_note), so that its run returns at once. Where the
// positions are ready at launch, lowering leaves the waits of parts above 0 to the op (weft_task::wait_count < 0):
// an idle part then neither polls its producer's events nor holds up its block's next task, and notifies at once.
#ifndef WEFT_DEVICE_ATTENTION_SPLIT_CUH
#define WEFT_DEVICE_ATTENTION_SPLIT_CUH

#include "attention_smem.cuh"
#include "sync.cuh"

namespace weft_dev {

// Part `part` of `parts` (a power of two, 1 << shift), the tile's block (entries of 2 group hd f32 words) and
// arrival counter. The default: an unsplit tile.
struct AttnSplit {
  int parts = 1, shift = 0, part = 0;
  float* block = nullptr;
  unsigned int* counter = nullptr;
};

// ATTENTION_DECODE_QKV's split from d9..d12 (0 or 1 parts: none). False for a table lowering did not write (or the
// runtime did not relocate).
__device__ __forceinline__ bool attn_split_of(const weft_task_args* a, AttnSplit& sp) {
  const i64 parts = a->d[9], part = a->d[10];
  if (parts <= 1) return true;
  if (parts > WEFT_ATTN_MAX_SPLIT || (parts & (parts - 1)) != 0 || part < 0 || part >= parts || a->d[11] == 0 ||
      a->d[12] == 0)
    return false;
  sp.parts = static_cast<int>(parts);
  sp.shift = __ffs(sp.parts) - 1;
  sp.part = static_cast<int>(part);
  sp.block = reinterpret_cast<float*>(a->d[11]);
  sp.counter = reinterpret_cast<unsigned int*>(a->d[12]);
  return true;
}

// A part's plan: the unsplit one with each head's max and sum beside 1/l.
template <typename T>
__device__ __forceinline__ AttnSmemPlan attn_split_plan(const weft_task_args* a, const AttnIo<T>& io, char* smem) {
  const int group = io.hkv > 0 ? static_cast<int>(io.hq) / static_cast<int>(io.hkv) : 0;
  return attn_smem_plan<T>(a, io, smem, 2 * group);
}

enum AttnSplitMode { kAttnWhole, kAttnSplit, kAttnGeneral };

// The fewest timesteps a part of a split tile is given where more parts would take fewer (a part costs about a
// short whole tile's time however few it has: docs/perf.md round 24).
constexpr int kAttnMinPartSteps = 64;

// The mode at position p (clamped: -1 when bad) for plans holding cap_whole / cap_split timesteps, and in split
// mode the part's timesteps [t0, t0 + steps) of at most `per`. Shifts, not 64-bit divisions.
struct AttnPart {
  AttnSplitMode mode;
  int per, t0, steps;
};
__device__ __forceinline__ AttnPart attn_split_part(i64 p, const AttnSplit& sp, int cap_whole, int cap_split) {
  AttnPart r{kAttnGeneral, 0, 0, 0};
  if (p < 0) return r;
  if (p + 1 <= cap_whole) {
    r.mode = kAttnWhole;
    return r;
  }
  i64 per = 0;
  for (int k = 1; k <= sp.shift; ++k) {
    const i64 share = (p + (i64{1} << k)) >> k;  // ceil((p + 1) / 2^k)
    if (share > cap_split) continue;             // more parts
    if (per != 0 && share < kAttnMinPartSteps) break;
    per = share;                                 // the first that fits, then more parts while each keeps enough
  }
  if (per == 0) return r;
  const int end = static_cast<int>(p) + 1;
  r.mode = kAttnSplit;
  r.per = static_cast<int>(per);
  r.t0 = sp.part * r.per;
  r.steps = r.t0 + r.per < end ? r.per : end > r.t0 ? end - r.t0 : 0;
  return r;
}

// What a split part's prologue leaves at smem + 4 / + 8 (below the plan's K rows at smem + 16; smem's first word
// is the unsplit path's note): what it found at the position it loaded (as loaded).
constexpr int kAttnNoteMode = 4, kAttnNotePos = 8;
// Idle: nothing to do; copied: split mode, the part's rows requested; whole: part 0 in whole mode, its rows
// requested as an unsplit tile's; else 0: nothing copied, work to do.
constexpr int kAttnNoteIdle = 1, kAttnNoteCopied = 2, kAttnNoteWhole = 3;

// The mode the prologue noted (after a barrier that publishes it), whatever position it saw.
__device__ __forceinline__ int attn_split_noted_mode(const char* smem) {
  block_sync();  // the prologue's note (a task without waits has no barrier in between)
  return *reinterpret_cast<const volatile int*>(smem + kAttnNoteMode);
}

__device__ __forceinline__ void attn_split_note(char* smem, int what, i64 raw) {
  if (tid() == 0) {
    *reinterpret_cast<int*>(smem + kAttnNoteMode) = what;
    *reinterpret_cast<long long*>(smem + kAttnNotePos) = raw;
  }
}

// After the wait, with the position `raw` loaded now: what the prologue noted, or -1 when it saw another position.
__device__ __forceinline__ int attn_split_noted(const char* smem, i64 raw) {
  block_sync();  // the prologue's note (a task without waits has no barrier in between)
  if (*reinterpret_cast<const volatile long long*>(smem + kAttnNotePos) != raw) return -1;
  return *reinterpret_cast<const volatile int*>(smem + kAttnNoteMode);
}

// Before the wait, split mode: the part's K/V rows before p into its plan's rows. Part 0's plan and the whole
// path's share their K rows, and the whole path waits for these copies before it declines the tile.
template <typename T>
__device__ __forceinline__ void attn_split_copy(const weft_task_args* a, const AttnIo<T>& io, const AttnSmemPlan& s,
                                                const AttnPart& r, i64 p) {
  const i64 row_kv = io.hkv * s.hd;
  const int end = r.t0 + r.steps < p ? r.t0 + r.steps : static_cast<int>(p);
  if (r.t0 < end) attn_copy_rows<T>(s, io.kc, io.vc, a->row0 * io.s_dim * row_kv + s.kvh * s.hd, row_kv, r.t0, end, r.t0);
}

// After the wait, split mode at position pi: the part's rows before pi, unless its prologue copied them for pi
// (else its copies, for another range, are waited for first).
template <typename T>
__device__ __forceinline__ void attn_split_missing_rows(const weft_task_args* a, const AttnIo<T>& io,
                                                        const AttnSmemPlan& s, const AttnPart& r, const char* smem,
                                                        i64 raw, int pi) {
  const bool copied = *reinterpret_cast<const volatile int*>(smem + kAttnNoteMode) == kAttnNoteCopied &&
                      *reinterpret_cast<const volatile long long*>(smem + kAttnNotePos) == raw;
  if (copied) return;  // uniform: every thread reads the same note
  cp_async_wait<0>();
  block_sync();
  attn_split_copy<T>(a, io, s, r, pi);
}

// A part of a split tile, its entry written (or none: no timesteps): the part that arrives last at the tile's
// counter merges the non-empty parts' entries (each its own softmax's output o, max m and exp-sum l per head) as
// sum_j l_j e^(m_j - M) o_j / sum_j l_j e^(m_j - M), M the largest m, and stores the tile. Memory order as in
// linear_split.cuh: the entries, a barrier, thread 0's release; thread 0's acquire, a barrier, reads from L2.
template <typename T, int HD>
__device__ __forceinline__ void attn_split_merge(const AttnIo<T>& io, const AttnSplit& sp, const AttnPart& r,
                                                 int group, int kvh, i64 b, int pi) {
  block_sync();  // every thread's entry words are written before thread 0 releases them
  if (!arrive_last_of(sp.counter, static_cast<unsigned int>(sp.parts))) return;
  const int words = 2 * group * HD;
  T* o = io.o + (b * io.hkv + kvh) * group * HD;
  for (int i = tid(); i < group * HD; i += WEFT_BLOCK_THREADS) {
    const int h = i / HD;
    float m[WEFT_ATTN_MAX_SPLIT], l[WEFT_ATTN_MAX_SPLIT], v[WEFT_ATTN_MAX_SPLIT];
    float top = neg_inf();
#pragma unroll
    for (int j = 0; j < WEFT_ATTN_MAX_SPLIT; ++j) {  // every load in flight at once
      m[j] = neg_inf();
      l[j] = 0.0f;
      v[j] = 0.0f;
      if (j < sp.parts && j * r.per <= pi) {  // part j has timesteps
        const float* e = sp.block + j * words;
        v[j] = __ldcg(e + i);
        m[j] = __ldcg(e + group * HD + h);
        l[j] = __ldcg(e + group * HD + group + h);
      }
      top = fmaxf(top, m[j]);
    }
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int j = 0; j < WEFT_ATTN_MAX_SPLIT; ++j) {
      const float wj = l[j] > 0.0f ? l[j] * expf(m[j] - top) : 0.0f;
      num = fmaf(wj, v[j], num);
      den += wj;
    }
    o[i] = from_f<T>(num / den);
  }
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_ATTENTION_SPLIT_CUH
