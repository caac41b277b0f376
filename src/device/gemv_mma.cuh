// The streamed GEMV of batched decode tiles (2..32 x rows, bf16/f16) on tensor cores. The CUDA-core stream
// (gemv_stream.cuh) reads every x row from shared memory once per weight element and row: at 8 rows that, not
// HBM, bounds it. Here each warp streams stages of 8 weight rows x 128 k (2 KiB, the ring of gemv_stream.cuh)
// and multiplies them with mma.sync m16n8k16 (A = x rows, B = the 8 weight rows, f32 accumulators), so a
// stage costs a few ldmatrix and mma instructions whatever the number of rows, and every weight is streamed
// once per tile.
//
// Work split: the tile's G = ceil(C / 8) groups of weight rows times K / 128 stages per group form one flat
// sequence (group-major), cut evenly into 8 per-warp ranges, so a tile of 2 groups keeps all 8 warps
// streaming. A group whose stages lie in one warp's range is stored from that warp's accumulators; a group cut
// by a range boundary leaves each warp's part in shared memory, and after a barrier the block sums the parts
// in warp order (deterministic) and stores them.
//
// Paired tiles (kPaired; linear_silu_mul, ops_linear_silu_mul.cuh) stream two weight rows per output column: the
// tile's groups alternate between 8 gate rows (rows col0 + 8 p ..) and the 8 up rows F further, so that the same
// plan, ring and reduction serve both halves of a SwiGLU and each column's two sums end in one tile.
#ifndef WEFT_DEVICE_GEMV_MMA_CUH
#define WEFT_DEVICE_GEMV_MMA_CUH

#include "common.cuh"
#include "gemv_stream.cuh"

namespace weft_dev {

constexpr int kMmaGroupRows = 8;                     // weight rows of a group (mma's n)
// The device library is built twice per architecture (CMakeLists.txt): with the tensor-core tiles, and with
// WEFT_DEVLIB_TENSOR_CORES=0 for kernels none of whose tasks can take them (lower: may_use_tensor_core_tiles).
// Every op is inlined into the task loop, so code that a kernel never runs still costs it registers and
// spills; without this path the loop's stack frame is 744 bytes instead of 792 (ptxas, sm_90a).
#ifndef WEFT_DEVLIB_TENSOR_CORES
#define WEFT_DEVLIB_TENSOR_CORES 1
#endif

constexpr int kMmaStageK = WEFT_MMA_K_MULTIPLE;      // k per stage: 8 rows x 256 bytes = 2 KiB per warp
constexpr int kMmaUnitsPerRow = kMmaStageK * 2 / 16;  // 16-byte units per weight row of a stage
static_assert(kMmaGroupRows * kMmaStageK * 2 <= kGemvMaxStageBytes, "an mma stage fits a ring slot");
static_assert(WEFT_MMA_PARTIAL_BYTES_PER_ROW >= WEFT_BLOCK_WARPS * 2 * kMmaGroupRows * 4,
              "each warp keeps two partial groups per x row");

template <typename T>
struct MmaType;  // the mma.sync instruction of a 16-bit element type
template <>
struct MmaType<bf16> {
  __device__ __forceinline__ static void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaType<f16> {
  __device__ __forceinline__ static void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// cp.async of 16 bytes that reads src_bytes (16, or 0 to fill zeros without touching memory).
__device__ __forceinline__ void cp_async16_zfill(unsigned int dst, const void* src, int src_bytes, u64 policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}

// A tile's plan: flat stage f is (group f / spk, part f % spk); this warp's range is [f0, f1). The stages cover
// kc of the weight rows' K: all of it, or one chunk of a chunked tile (weft_mma_chunk_k), the caller offsetting
// the weights by the chunk's first k (rows stay K apart).
// Stage counts are 32-bit (the plan refuses a tile of kMmaMaxStages or more): a 64-bit division is a subroutine
// call of ~100 instructions on the GPU, and the cursors divide by spk at every task's set-up.
constexpr int kMmaMaxStages = 1 << 27;
struct MmaStream {
  bool on = false;
  int spk = 0, total = 0, f0 = 0, f1 = 0;
  i64 kc = 0;
  __device__ __forceinline__ int begin(int w) const {
    return static_cast<int>(static_cast<unsigned>(w * total) / WEFT_BLOCK_WARPS);
  }
};

// Walks a warp's range one stage at a time without divisions: flat stage f = (group g, part).
struct MmaCursor {
  int f, g, part;
  __device__ __forceinline__ explicit MmaCursor(const MmaStream& st)
      : f(st.f0), g(static_cast<int>(static_cast<unsigned>(st.f0) / static_cast<unsigned>(st.spk))), part(st.f0 - g * st.spk) {}
  __device__ __forceinline__ void next(const MmaStream& st) {
    ++f;
    if (++part == st.spk) {
      part = 0;
      ++g;
    }
  }
};

// rows <= WEFT_MMA_ROWS_FIT(k, 2) without its 64-bit division (a ~100-instruction subroutine on the GPU), which
// every batched GEMV task's plan evaluated twice (prologue and run).
__device__ __forceinline__ bool mma_rows_fit(i64 rows, i64 k) {
  return rows * WEFT_MMA_ROW_BYTES(k, 2) <= WEFT_SMEM_BYTES - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES - k * 2;
}

// weft_mma_chunk_k for this library's shared memory and 16-bit elements, out of line: the task loop inlines the
// plan, and its register allocation pays for every line of code there (docs/perf.md, round 15).
static __device__ __noinline__ i64 mma_chunk_k_of(i64 k, i64 rows, i64 cols) {
  return weft_mma_chunk_k(WEFT_SMEM_BYTES, k, rows, cols, 2);
}

// The stream of a tile of `cols` output columns over kc columns of K, `halves` weight rows per column (2: paired,
// see the top of the file), off when it has too many stages.
__device__ __forceinline__ MmaStream mma_stream_of(i64 cols, i64 kc, int halves = 1) {
  MmaStream s;
  const i64 total = (cols + kMmaGroupRows - 1) / kMmaGroupRows * halves * (kc / kMmaStageK);
  if (total >= kMmaMaxStages) return s;
  s.on = true;
  s.kc = kc;
  s.spk = static_cast<int>(kc / kMmaStageK);
  s.total = static_cast<int>(total);
  s.f0 = s.begin(warp());
  s.f1 = s.begin(warp() + 1);
  return s;
}

// A plain linear's tile split over K (LINEAR, d2 = parts: weft_mma_split_parts), linear_split.cuh: the first stages
// of the task's part (before its wait), and the part itself. Out of line, so that the task loop's code is the same
// with them as without (its SASS was compared, docs/perf.md round 17).
__device__ __noinline__ bool linear_split_prologue(const weft_task_args* a, const weft_env* env, char* smem);
__device__ __noinline__ void linear_split_run(const weft_task_args* a, const weft_env* env, char* smem);

// Whether the tile takes the tensor-core path: 16-bit T, WEFT_MMA_MIN_ROWS..WEFT_MMA_ROWS_FIT rows, K a multiple
// of the stage, 16-byte aligned weights. kChunked (a plain linear's tile): rows that do not fit whole may be
// staged in K chunks. A template parameter so that the other ops' plans are compiled without it. Lowering sizes
// tiles with the same rules. kPaired: a linear_silu_mul tile, which also keeps its gate and up sums in shared memory
// (weft_mma_swiglu_fits) and is never chunked.
template <typename T, bool kChunked, bool kPaired = false>
__device__ __forceinline__ MmaStream gemv_mma_plan(const weft_task_args* a, const T* w) {
  MmaStream s;
  if constexpr (sizeof(T) == 2 && WEFT_DEVLIB_TENSOR_CORES) {
    const i64 k = a->d[0], rows = a->row1 - a->row0, cols = a->col1 - a->col0;
    if (rows < WEFT_MMA_MIN_ROWS || rows > WEFT_MMA_MAX_ROWS || k <= 0 || k % kMmaStageK != 0 || !aligned16(w) ||
        cols <= 0)  // a decode row (rows == 1) leaves at the first test
      return s;
    if constexpr (kPaired) {
      if (!weft_mma_swiglu_fits(WEFT_SMEM_BYTES, k, rows, cols, 2)) return s;
      return mma_stream_of(cols, k, 2);
    }
    i64 kc = k;
    if (!mma_rows_fit(rows, k)) {
      if constexpr (!kChunked) return s;
      kc = mma_chunk_k_of(k, rows, cols);
      if (kc <= 0) return s;
    }
    return mma_stream_of(cols, kc);
  }
  (void)a;
  (void)w;
  return s;
}

// Issues stage c (nothing past the warp's range) into ring slot `slot` and commits a group. Unit u = lane + 32 i
// of the stage is weight row u / 16's 16-byte unit u % 16, stored at row * 16 + (unit ^ row): the 8 rows one
// ldmatrix reads then lie in distinct banks. Rows past the tile's columns are filled with zeros. Paired: group g is
// half g % 2 (gate, up: d1 = F rows further) of pair g / 2.
template <typename T, bool kPaired = false>
__device__ __forceinline__ void gemv_mma_issue(char* ring, int slot, const T* w, const weft_task_args* a,
                                               const MmaStream& st, const MmaCursor& c) {
  if (c.f < st.f1) {
    const i64 k = a->d[0], g = c.g, part = c.part;
    const unsigned int base = static_cast<unsigned int>(__cvta_generic_to_shared(ring + slot * kGemvMaxStageBytes));
    const u64 policy = l2_evict_first_policy();
    const int unit = lane() % kMmaUnitsPerRow;
#pragma unroll
    for (int i = 0; i < kMmaGroupRows * kMmaUnitsPerRow / WEFT_WARP_THREADS; ++i) {
      const int r = (lane() + i * WEFT_WARP_THREADS) / kMmaUnitsPerRow;
      const i64 n = a->col0 + (kPaired ? g >> 1 : g) * kMmaGroupRows + r;  // the output column
      const bool in = n < a->col1;
      const i64 wrow = kPaired && (g & 1) ? n + a->d[1] : n;
      const T* src = w + (in ? wrow : a->col0) * k + part * kMmaStageK + unit * 8;
      cp_async16_zfill(base + (r * kMmaUnitsPerRow + (unit ^ r)) * 16, src, in ? 16 : 0, policy);
    }
  }
  cp_async_commit();
}

// Stages of a tensor-core tile's stream requested before the task's wait (the run requests the rest of the ring's
// kGemvStages - 1 first, before its loop). Its poll and x stage queue behind them, as the one-row tiles' do
// (kGemvPrologueStages, gemv_stream.cuh), yet 2 measured slower than 3 (docs/perf.md round 57: Llama-3.2-1B batch 8
// +1.1 / +2.0%, batch 32 +0.8 / 0.0%). A measurement build may set it (scripts/devlib-build.sh with
// DEVLIB_NVCC_FLAGS=-DWEFT_MMA_PROLOGUE_STAGES=n).
#ifndef WEFT_MMA_PROLOGUE_STAGES
#define WEFT_MMA_PROLOGUE_STAGES 3
#endif
constexpr int kMmaPrologueStages = WEFT_MMA_PROLOGUE_STAGES;
static_assert(kMmaPrologueStages >= 1 && kMmaPrologueStages <= kGemvStages - 1, "the ring holds them");

// Before the task's wait: the first kMmaPrologueStages stages of this warp.
template <typename T, bool kPaired = false>
__device__ __forceinline__ void gemv_mma_prologue(const weft_task_args* a, const T* w, const MmaStream& st,
                                                  char* smem) {
  char* ring = gemv_ring(smem);
  MmaCursor c(st);
  for (int s = 0; s < kMmaPrologueStages; ++s) {
    gemv_mma_issue<T, kPaired>(ring, s, w, a, st, c);
    c.next(st);
  }
}

// The parts of group g that warps left in shared memory: a group is cut when a range boundary lies inside it.
// Its first warp's part is the group's head (slot 1 of that warp), every later warp's the tail (slot 0).
__device__ __forceinline__ float* mma_partial(float* parts, int w, int side, int col, int row, int rows) {
  return parts + ((w * 2 + side) * kMmaGroupRows + col) * rows + row;
}

// Consumes the stream of a tile whose x rows (at most 16 x MB: MB m16 blocks, each multiplied with every B
// fragment, so the weights stream once for all of them) are staged at xs (row stride ldx = K + WEFT_MMA_X_PAD) and
// stores out(row, n, v) for every output. parts: the partial sums. Paired tiles pass n = 8 g + c (group g's column c,
// counted from the tile's start: 16 p + c the gate's and 16 p + 8 + c the up's sum of the tile's column 8 p + c).
template <typename T, int MB, typename Out, bool kPaired = false>
__device__ __forceinline__ void gemv_mma_blocks(const weft_task_args* a, const T* w, const MmaStream& st, const T* xs,
                                                i64 ldx, float* parts, char* smem, Out out) {
  const int rows = static_cast<int>(a->row1 - a->row0);
  char* ring = gemv_ring(smem);
  // ldmatrix addresses. A (x) of block m: lane l gives row 16 m + l % 16 (clamped to the tile's rows: the extra
  // rows of an m16 block only feed outputs nobody stores) at k offset (l / 16) * 8. B (weights): row l % 8, unit
  // l / 8 + 4 j.
  unsigned int a_addr[MB];
#pragma unroll
  for (int m = 0; m < MB; ++m) {
    const int arow = m * 16 + lane() % 16;
    a_addr[m] = static_cast<unsigned int>(__cvta_generic_to_shared(xs + (arow < rows ? arow : rows - 1) * ldx)) +
                (lane() / 16) * 16;
  }
  const int brow = lane() % 8;
  // Two accumulators per output, for even and odd k steps: two chains of dependent mma instead of one.
  float acc[MB][2][4];
#pragma unroll
  for (int m = 0; m < MB; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][h][e] = 0.0f;
  int slot = 0;
  MmaCursor issue(st), use(st);
  const bool cut_start = use.part != 0 && st.f0 < st.total;  // this warp's range starts inside a group
  for (int s = 0; s < kMmaPrologueStages; ++s) issue.next(st);  // the prologue's stages
  if constexpr (kMmaPrologueStages < kGemvStages - 1) {  // the rest of the ring, one group each, as the loop expects
    for (int s = kMmaPrologueStages; s < kGemvStages - 1; ++s) {
      gemv_mma_issue<T, kPaired>(ring, s, w, a, st, issue);
      issue.next(st);
    }
  }
  for (; use.f < st.f1; use.next(st), issue.next(st)) {
    const i64 g = use.g;
    __syncwarp();  // every lane is done with the slot the next issue overwrites
    gemv_mma_issue<T, kPaired>(ring, (slot + kGemvStages - 1) % kGemvStages, w, a, st, issue);
    cp_async_wait<kGemvStages - 1>();
    __syncwarp();  // the stage's copies of every lane are visible to the warp's ldmatrix
    const unsigned int stage = static_cast<unsigned int>(__cvta_generic_to_shared(ring + slot * kGemvMaxStageBytes));
    const unsigned int xk = static_cast<unsigned int>(use.part * kMmaStageK * 2);
#pragma unroll
    for (int j = 0; j < kMmaUnitsPerRow / 4; ++j) {  // two k steps of 16 per ldmatrix of B
      unsigned b[4];
      ldmatrix_x4(b, stage + (brow * kMmaUnitsPerRow + ((4 * j + lane() / 8) ^ brow)) * 16);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int m = 0; m < MB; ++m) {
          unsigned x[4];
          ldmatrix_x4(x, a_addr[m] + xk + (2 * j + h) * 32);
          // ldmatrix order (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) is
          // mma's a0..a3.
          MmaType<T>::mma(acc[m][h], x, b[2 * h], b[2 * h + 1]);
        }
    }
    slot = slot + 1 == kGemvStages ? 0 : slot + 1;
    if (use.part + 1 == st.spk || use.f + 1 == st.f1) {  // this warp's share of group g is done
      const int g0 = static_cast<int>(g) * st.spk;
      const bool whole = st.f0 <= g0 && g0 + st.spk <= st.f1;
      const int side = st.f0 > g0 ? 0 : 1;  // tail of a cut group, or its head
      const i64 n_base = a->col0 + (kPaired ? g >> 1 : g) * kMmaGroupRows;  // the output column of c = 0
#pragma unroll
      for (int m = 0; m < MB; ++m)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          // mma's D: c0, c1 at (row l / 4, cols 2 (l % 4) + 0, 1); c2, c3 eight rows further.
          const int row = m * 16 + lane() / 4 + (e / 2) * 8, col = 2 * (lane() % 4) + e % 2;
          const float v = acc[m][0][e] + acc[m][1][e];
          if (row < rows && n_base + col < a->col1) {
            if (whole) out(a->row0 + row, kPaired ? g * kMmaGroupRows + col : n_base + col, v);
            else *mma_partial(parts, warp(), side, col, row, rows) = v;
          }
          acc[m][0][e] = 0.0f;
          acc[m][1][e] = 0.0f;
        }
    }
  }
  cp_async_wait<0>();  // nothing of this task is left in flight when the next one reuses the ring
  // The groups cut by a range boundary: boundary b (the start of warp b's range) inside group g. The first
  // boundary of a group stores it, summing the parts of warps b - 1 .. (the warp holding the group's end) that
  // have a range (a tile of fewer stages than warps leaves some empty). A tile whose ranges all start at a group's
  // first stage (evenly split: every boundary between groups) has none and skips the loop, whose divisions alone
  // took ~1 us (Llama-1B's gate/up tiles at batch 32: 26.0 -> 24.7 us; the step 2.2% faster, docs/perf.md round 32).
  if (!block_sync_or(cut_start)) return;
  const int per_group = kMmaGroupRows * rows;
  for (int e = tid(); e < (WEFT_BLOCK_WARPS - 1) * per_group; e += WEFT_BLOCK_THREADS) {
    const int b = e / per_group + 1, col = (e % per_group) / rows, row = e % rows;
    const int fb = st.begin(b), gb = static_cast<int>(static_cast<unsigned>(fb) / static_cast<unsigned>(st.spk)),
              g0 = gb * st.spk;
    if (fb == g0 || fb >= st.total) continue;      // not inside a group
    if (b > 1 && st.begin(b - 1) > g0) continue;  // a previous boundary of the same group stores it
    const i64 n = a->col0 + (kPaired ? gb >> 1 : gb) * kMmaGroupRows + col;
    if (n >= a->col1) continue;
    float v = *mma_partial(parts, b - 1, 1, col, row, rows);
    for (int wi = b; wi < WEFT_BLOCK_WARPS && st.begin(wi) < g0 + st.spk; ++wi)
      if (st.begin(wi + 1) > st.begin(wi)) v += *mma_partial(parts, wi, 0, col, row, rows);  // empty ranges store nothing
    out(a->row0 + row, kPaired ? gb * kMmaGroupRows + col : n, v);
  }
}

// A tile of up to 16 x rows takes one m16 block, a larger one two (WEFT_MMA_MAX_ROWS).
static_assert(WEFT_MMA_MAX_ROWS <= 32, "gemv_mma_run multiplies at most two m16 blocks of x rows");
template <typename T, typename Out, bool kPaired = false>
__device__ __forceinline__ void gemv_mma_run(const weft_task_args* a, const T* w, const MmaStream& st, const T* xs,
                                             i64 ldx, float* parts, char* smem, Out out) {
  if (a->row1 - a->row0 > 16) gemv_mma_blocks<T, 2, Out, kPaired>(a, w, st, xs, ldx, parts, smem, out);
  else gemv_mma_blocks<T, 1, Out, kPaired>(a, w, st, xs, ldx, parts, smem, out);
}

// Whether a plain linear's tile would be chunked: tensor-core rows that do not fit whole (gemv_mma_plan<T, true>
// then decides). A cheap test inlined into the task loop, so that chunked tiles are planned and run out of line
// (linear_chunked_prologue, linear_chunked) and every other tile's code stays as it was: code inlined into the
// loop costs every task set-up time (round 15: +0.3-0.5 us per task and 2-4% per token when it was inlined).
__device__ __forceinline__ bool mma_tile_chunked(const weft_task_args* a) {
  if constexpr (WEFT_DEVLIB_TENSOR_CORES) {
    const i64 k = a->d[0], rows = a->row1 - a->row0;
    return (a->dtype == WEFT_DEV_BF16 || a->dtype == WEFT_DEV_F16) && rows >= WEFT_MMA_MIN_ROWS &&
           rows <= WEFT_MMA_MAX_ROWS && k > 0 && k % kMmaStageK == 0 && !mma_rows_fit(rows, k);
  }
  (void)a;
  return false;
}

// Before the task's wait: the first stages of a chunked plain linear tile's first chunk. Returns false (nothing
// issued) when no chunk fits: the tile then takes the other paths.
template <typename T>
__device__ bool linear_chunked_prologue_t(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* w = in_ptr<T>(a, env, 1);
  const MmaStream ms = gemv_mma_plan<T, true>(a, w);
  if (ms.on) gemv_mma_prologue<T>(a, w, ms, smem);
  return ms.on;
}
static __device__ __noinline__ bool linear_chunked_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->d[2] > 1) return linear_split_prologue(a, env, smem);
  if (a->dtype == WEFT_DEV_BF16) return linear_chunked_prologue_t<bf16>(a, env, smem);
  if (a->dtype == WEFT_DEV_F16) return linear_chunked_prologue_t<f16>(a, env, smem);
  return false;
}

// Before the task's wait: the first stages of whichever stream the tile takes. w_in: the weight's operand index.
template <typename T>
__device__ __forceinline__ void linear_stream_prologue(const weft_task_args* a, const weft_env* env, char* smem,
                                                       int w_in) {
  const T* w = in_ptr<T>(a, env, w_in);
  const MmaStream ms = gemv_mma_plan<T, false>(a, w);
  if (ms.on) gemv_mma_prologue<T>(a, w, ms, smem);
  else gemv_stream_prologue<T>(a, w, smem);
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_GEMV_MMA_CUH
