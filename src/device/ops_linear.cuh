// linear (x · Wᵀ + bias + residual) and matmul (batched a · b), accumulating in f32.
//
// Four paths:
//  - Tensor-core streamed GEMV (gemv_mma.cuh): 2..32 rows of bf16/f16, K a multiple of 128, batched decode.
//  - Streamed GEMV (gemv_stream.cuh): up to 8 rows, K a multiple of 256 (bf16), the decode case.
//  - GEMV (linear with at most kGemvMaxRows rows in the tile: the decode case). One warp per output column:
//    the weight row streams through 16-byte loads, kGemvUnroll of them in flight per lane (a persistent
//    block has only 8 warps to cover memory latency), against up to kGemvRows x rows staged in shared
//    memory; a butterfly shuffle sums each dot product.
//  - Tiled (linear with more rows, and matmul): 64 x 64 output tiles, K in steps of 16 staged in shared memory
//    as f32, 4 x 4 outputs per thread (plain SIMT FMA).
#ifndef WEFT_DEVICE_OPS_LINEAR_CUH
#define WEFT_DEVICE_OPS_LINEAR_CUH

#include "common.cuh"
#include "gemv_mma.cuh"
#if WEFT_DEV_TAGGED
#include "tagged.cuh"
#endif

namespace weft_dev {

constexpr int kGemvRows = 8;
constexpr int kGemvUnroll = 8;  // 4 measured the same on an H100, 16 slower (register cap)
constexpr long long kGemvMaxRows = 16;

// kTileM: 64 rows of 16 x 16 threads; 56 of the weight loader's 14 x 16 op threads (WEFT_DEV_LOADER).
constexpr int kTileM = WEFT_BLOCK_THREADS / 16 * 4, kTileN = 64, kTileK = 16, kTilePad = 4;
constexpr int kTileLdA = kTileM + kTilePad, kTileLdB = kTileN + kTilePad;  // float4-aligned rows
static_assert(WEFT_BLOCK_THREADS % 16 == 0, "the tiled GEMM maps rows of 16 threads to 4 x 4 outputs each");
static_assert((kTileK * (kTileLdA + kTileLdB)) * 4 <= WEFT_SMEM_BYTES, "GEMM tiles exceed WEFT_SMEM_BYTES");

// ---- GEMV ----

// A 16-byte load of weights: no kernel writes them, so the non-coherent path is safe; they are read once per
// step, so they skip L1, and the L2 hint fetches the whole 256-byte sector group a warp is about to read.
// They are also evicted from L2 first (see l2_evict_first_policy).
__device__ __forceinline__ uint4 load_weight16(const void* p, u64 policy) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p), "l"(policy));
  return r;
}

// Dot products of weight row wr with `rows` rows of xs (row stride k); every lane of the warp gets all sums.
// vec: wr and xs are 16-byte aligned and k * sizeof(T) is a multiple of 16.
// R (1, 2, 4 or 8) bounds `rows` at compile time: a decode row needs one accumulator and one reduction, not 8.
template <typename T, int R>
__device__ __forceinline__ void gemv_column(const T* xs, const T* wr, i64 k, int rows, bool vec, float (&acc)[R]) {
  constexpr int N = Vec<T>::N;
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  i64 done = 0;
  if (vec) {
    const u64 policy = l2_evict_first_policy();
    const i64 nv = k / N;
    for (i64 v0 = lane(); v0 < nv; v0 += WEFT_WARP_THREADS * kGemvUnroll) {
      // Issue every weight load of this step before using any.
      uint4 raw[kGemvUnroll];
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) {
        const i64 v = v0 + static_cast<i64>(u) * WEFT_WARP_THREADS;
        raw[u] = v < nv ? load_weight16(wr + v * N, policy) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) {
        const i64 v = v0 + static_cast<i64>(u) * WEFT_WARP_THREADS;
        if (v >= nv) break;
        float wv[N];
        unpack_vec<T>(raw[u], wv);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r < rows) {
            float xv[N];
            load_vec(xs + r * k + v * N, xv);
#pragma unroll
            for (int e = 0; e < N; ++e) acc[r] = fmaf(xv[e], wv[e], acc[r]);
          }
        }
      }
    }
    done = nv * N;
  }
  for (i64 j = done + lane(); j < k; j += WEFT_WARP_THREADS) {
    const float wv = to_f(wr[j]);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < rows) acc[r] = fmaf(to_f(xs[r * k + j]), wv, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
}

// The tile's columns for x rows [r0, r0 + rows), rows <= R; one warp per column.
template <typename T, int R>
__device__ __forceinline__ void gemv_columns(const weft_task_args* a, const T* xs, const T* w, const T* bias,
                                             const T* res, T* o, i64 k, i64 n_dim, i64 r0, int rows, bool vec) {
  for (i64 n = a->col0 + warp(); n < a->col1; n += WEFT_BLOCK_WARPS) {
    float acc[R];
    gemv_column<T, R>(xs, w + n * k, k, rows, vec, acc);
    // Lane r writes row r.
    float mine = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (lane() == r) mine = acc[r];
    if (lane() < rows) {
      const i64 row = r0 + lane();
      if (bias != nullptr) mine += to_f(bias[n]);
      if (res != nullptr) mine += to_f(res[row * n_dim + n]);
      o[row * n_dim + n] = from_f<T>(mine);
    }
  }
}

template <typename T>
__device__ void linear_gemv(const weft_task_args* a, const T* x, const T* w, const T* bias, const T* res, T* o,
                            i64 k, i64 n_dim, char* smem) {
  const i64 row_bytes = k * static_cast<i64>(sizeof(T));
  const bool w_vec = aligned16(w) && row_bytes % 16 == 0;
  // Stage x rows in shared memory when a row fits (every warp reads them once per column).
  const i64 fit = row_bytes == 0 ? kGemvRows : WEFT_SMEM_BYTES / row_bytes;
  const bool stage = fit > 0 && aligned16(smem);
  const int chunk = stage ? static_cast<int>(fit < kGemvRows ? fit : kGemvRows) : kGemvRows;
  for (i64 r0 = a->row0; r0 < a->row1; r0 += chunk) {
    const int rows = static_cast<int>(a->row1 - r0 < chunk ? a->row1 - r0 : chunk);
    const T* xs = x + r0 * k;
    if (stage) {
      block_sync();  // the previous chunk's readers are done with smem
      copy_bytes(smem, xs, rows * row_bytes, static_cast<int>(sizeof(T)), tid(), WEFT_BLOCK_THREADS);
      block_sync();
      xs = reinterpret_cast<const T*>(smem);
    }
    const bool vec = w_vec && aligned16(xs);
    if (rows == 1) gemv_columns<T, 1>(a, xs, w, bias, res, o, k, n_dim, r0, rows, vec);
    else if (rows == 2) gemv_columns<T, 2>(a, xs, w, bias, res, o, k, n_dim, r0, rows, vec);
    else if (rows <= 4) gemv_columns<T, 4>(a, xs, w, bias, res, o, k, n_dim, r0, rows, vec);
    else gemv_columns<T, kGemvRows>(a, xs, w, bias, res, o, k, n_dim, r0, rows, vec);
  }
}

// ---- tiled GEMM ----

// Accumulates a [rows x cols] (<= 64 x 64) block of A · B into acc: A rows at a_rows (row stride k); B(kk, n)
// = b[n * k + kk] when kBT (linear's weight [N, K]) else b[kk * ldb + n] (matmul's [K, N]); b points at the
// block's first column. Thread (ty, tx) = (tid / 16, tid % 16) owns rows ty*4.. and columns tx*4...
template <typename T, bool kBT>
__device__ void gemm_block(const T* a_rows, const T* b, i64 k, i64 ldb, int rows, int cols, float (&acc)[4][4],
                           float* as, float* bs) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  const int t = tid(), tx = t % 16, ty = t / 16;
  for (i64 k0 = 0; k0 < k; k0 += kTileK) {
    block_sync();  // the previous step's readers are done
    // A tile, k fastest (coalesced along A's rows), stored k-major for float4 reads below.
    for (int idx = t; idx < kTileM * kTileK; idx += WEFT_BLOCK_THREADS) {
      const int m = idx / kTileK, kk = idx % kTileK;
      const i64 kg = k0 + kk;
      as[kk * kTileLdA + m] = (m < rows && kg < k) ? to_f(a_rows[m * k + kg]) : 0.0f;
    }
    for (int idx = t; idx < kTileN * kTileK; idx += WEFT_BLOCK_THREADS) {
      int n, kk;
      if constexpr (kBT) {
        n = idx / kTileK;
        kk = idx % kTileK;
      } else {
        kk = idx / kTileN;
        n = idx % kTileN;
      }
      const i64 kg = k0 + kk;
      float v = 0.0f;
      if (n < cols && kg < k) v = to_f(kBT ? b[n * k + kg] : b[kg * ldb + n]);
      bs[kk * kTileLdB + n] = v;
    }
    block_sync();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 av = *reinterpret_cast<const float4*>(&as[kk * kTileLdA + ty * 4]);
      const float4 bv = *reinterpret_cast<const float4*>(&bs[kk * kTileLdB + tx * 4]);
      const float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
    }
  }
}

// Output tile [row0,row1) x [col0,col1) of an [R, n_dim] result in 64 x 64 blocks. Rows of one block never
// straddle a batch of m_rows rows (B changes there when b_batch_stride != 0). epi(row, col, acc) stores.
template <typename T, bool kBT, typename Epi>
__device__ void gemm_tiles(const weft_task_args* a, const T* x, const T* b, i64 k, i64 ldb, i64 m_rows,
                           i64 b_batch_stride, char* smem, Epi epi) {
  float* as = reinterpret_cast<float*>(smem);
  float* bs = as + kTileK * kTileLdA;
  const int t = tid(), tx = t % 16, ty = t / 16;
  for (i64 r0 = a->row0; r0 < a->row1;) {
    i64 r1 = r0 + kTileM < a->row1 ? r0 + kTileM : a->row1;
    const i64 batch = m_rows > 0 ? r0 / m_rows : 0;
    if (m_rows > 0 && (batch + 1) * m_rows < r1) r1 = (batch + 1) * m_rows;
    const T* bb = b + batch * b_batch_stride;
    for (i64 c0 = a->col0; c0 < a->col1; c0 += kTileN) {
      const i64 c1 = c0 + kTileN < a->col1 ? c0 + kTileN : a->col1;
      float acc[4][4];
      gemm_block<T, kBT>(x + r0 * k, kBT ? bb + c0 * k : bb + c0, k, ldb, static_cast<int>(r1 - r0),
                         static_cast<int>(c1 - c0), acc, as, bs);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const i64 row = r0 + ty * 4 + i;
        if (row >= r1) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const i64 col = c0 + tx * 4 + j;
          if (col < c1) epi(row, col, acc[i][j]);
        }
      }
    }
    r0 = r1;
  }
}

// Stores one output of a linear: x · w + bias + residual, summed in that order in f32, rounded once.
template <typename T>
struct LinearOut {
  const T* bias;
  const T* res;
  T* o;
  i64 n_dim;
  __device__ __forceinline__ void operator()(i64 row, i64 n, float v) const {
    if (bias != nullptr) v += to_f(bias[n]);
    if (res != nullptr) v += to_f(res[row * n_dim + n]);
    o[row * n_dim + n] = from_f<T>(v);
  }
  // The same in three parts, for a caller that loads an output's bias and residual ahead of its sum and stores
  // several outputs at once (gemv_stream.cuh): pre loads, value adds, put rounds and stores.
  // Tagged hand-offs (WEFT_DEV_TAGGED, tagged.cuh; the one-row tiles only, which use pre and put): WEFT_TAGGED_RES /
  // _OUT in `tagged` make the residual / the output words of bf16 value and tag; env and res_slot name the residual in
  // a watchdog error.
#if WEFT_DEV_TAGGED
  unsigned int tagged = 0, tag = 0, out_tag = 0;  // out_tag: the outputs' (tag, but for WEFT_TUNE_TAGGED_STALE)
  const weft_env* env = nullptr;
  int res_slot = -1;
#endif
  struct Pre {
    float b, r;
  };
  __device__ __forceinline__ Pre pre(i64 row, i64 n) const {
#if WEFT_DEV_TAGGED
    float r = 0.0f;
    if (res != nullptr) {
      const i64 e = row * n_dim + n;
      r = (tagged & WEFT_TAGGED_RES) ? load_tagged1(reinterpret_cast<const unsigned int*>(res) + e, tag, env, res_slot, e)
                                     : to_f(res[e]);
    }
    return Pre{bias != nullptr ? to_f(bias[n]) : 0.0f, r};
#else
    return Pre{bias != nullptr ? to_f(bias[n]) : 0.0f, res != nullptr ? to_f(res[row * n_dim + n]) : 0.0f};
#endif
  }
  __device__ __forceinline__ float value(float v, const Pre& p) const {
    if (bias != nullptr) v += p.b;
    if (res != nullptr) v += p.r;
    return v;
  }
  __device__ __forceinline__ void put(i64 row, i64 n, float v) const {
#if WEFT_DEV_TAGGED
    const T r = from_f<T>(v);
    if (tagged & WEFT_TAGGED_OUT)
      st_relaxed_u32(reinterpret_cast<unsigned int*>(o) + row * n_dim + n, tagged_word(r, out_tag));
    else
      o[row * n_dim + n] = r;
#else
    o[row * n_dim + n] = from_f<T>(v);
#endif
  }
};

// Batched tiles stage x by bulk copies (stage_rows_bulk) in the tensor-core libraries of sm_90 and later: Llama-3.2-1B
// batch 32 -4.5 / -4.4%, batch 8 -1.8 / -2.5% per token (step / loop, both allocation tickets of each side; H200,
// docs/perf.md round 52). The CUDA-core libraries (one-row steps) keep their code as it was; sm_80 has no bulk
// copies. A measurement build may set it (scripts/devlib-build.sh with DEVLIB_NVCC_FLAGS=-DWEFT_X_STAGE_BULK=0|1).
#ifndef WEFT_X_STAGE_BULK
#if (defined(WEFT_DEVLIB_TENSOR_CORES) && !WEFT_DEVLIB_TENSOR_CORES) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900)
#define WEFT_X_STAGE_BULK 0
#else
#define WEFT_X_STAGE_BULK 1
#endif
#endif

#if WEFT_X_STAGE_BULK
// x rows of a batched tile (rows > 1) by one bulk copy per row (the TMA unit), issued by thread 0 and completing on
// one mbarrier in the GEMV scratch (no other part of a linear tile uses it during the stage): at most 32
// instructions instead of 32 16-byte cp.async per thread, which at batch 32 took 2.8-3.6 us to issue behind the SM's
// other requests (docs/perf.md round 51). Thread 0 waits for the phase; the caller's barrier publishes the rows (the
// mbarrier's completion makes the copies visible to thread 0, the barrier orders them before the other threads'
// reads). Every thread still waits for its own weight stages requested before the task's wait, as
// stage_rows_async does. Rows and widths of whole 16-byte units, 16-byte aligned (the caller checks x0).
template <typename T>
__device__ __forceinline__ void stage_rows_bulk(T* dst, i64 ldx, const T* src, i64 lds, i64 width, i64 rows,
                                                char* smem) {
  if (tid() == 0) {
    const unsigned int bar = smem_u32(smem + WEFT_SMEM_BYTES - kGemvScratchBytes);
    const unsigned int bytes = static_cast<unsigned int>(width * static_cast<i64>(sizeof(T)));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                 "r"(bytes * static_cast<unsigned int>(rows))
                 : "memory");
    for (i64 r = 0; r < rows; ++r)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(dst + r * ldx)),
                   "l"(src + r * lds), "r"(bytes), "r"(bar)
                   : "memory");
    // Not weight_ring.cuh's mbar_test: with its parity in a register the task loop's code came out another way
    // (114,896 -> 114,888 instructions, another allocation) than the one measured here; this is that one.
    unsigned int done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(bar)
          : "memory");
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
  }
  cp_async_wait<0>();
}
#endif

// A plain linear's x rows (`width` elements each, `lds` apart) into shared memory at row stride ldx: by cp.async
// where x is 16-byte aligned (the streamed paths take rows of whole 16-byte units), else element-wise.
template <typename T>
__device__ __forceinline__ void stage_x_rows(T* xs, i64 ldx, const T* x0, i64 lds, i64 width, i64 rows,
                                             char* smem = nullptr) {
  if (!aligned16(x0)) {
    for (i64 r = 0; r < rows; ++r)
      copy_bytes(xs + r * ldx, x0 + r * lds, width * static_cast<i64>(sizeof(T)), static_cast<int>(sizeof(T)), tid(),
                 WEFT_BLOCK_THREADS);
    return;
  }
#if WEFT_X_STAGE_BULK
  if (smem != nullptr && rows > 1 && (lds * static_cast<i64>(sizeof(T))) % 16 == 0 &&
      (ldx * static_cast<i64>(sizeof(T))) % 16 == 0 && aligned16(xs)) {
    stage_rows_bulk(xs, ldx, x0, lds, width, rows, smem);
    return;
  }
#else
  (void)smem;
#endif
  stage_rows_async(xs, ldx, x0, lds, width, rows);
}

// A plain linear's tensor-core tile whose plan is chunked (weft_mma_chunk_k): each chunk's x columns staged in
// turn, its products summed per output in f32 (`sums`, after the partial sums), the outputs stored once at the
// end. The next chunk's first weight stages are requested before its x is staged, as the prologue does for the
// first. Out of line with pointer operands: inlined, it cost every task of the loop ~0.5 us of set-up (the loop's
// stack 544 -> 624 bytes, H200 trace, round 15).
template <typename T>
__device__ __noinline__ bool linear_chunked(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->d[2] > 1) {  // split over K instead (the same tiles: x rows that do not fit whole)
    linear_split_run(a, env, smem);
    return true;
  }
  const T* x = in_ptr<T>(a, env, 0);
  const T* w = in_ptr<T>(a, env, 1);
  const LinearOut<T> out{in_ptr<T>(a, env, 2), in_ptr<T>(a, env, 3), out_ptr<T>(a, env), a->d[1]};
  const MmaStream ms = gemv_mma_plan<T, true>(a, w);
  if (!ms.on) return false;  // no chunk fits (linear_chunked_prologue issued nothing either)
  const i64 k = a->d[0], kc = ms.kc, ldx = kc + WEFT_MMA_X_PAD, rows = a->row1 - a->row0, cols = a->col1 - a->col0;
  T* xs = reinterpret_cast<T*>(smem + kGemvRingBytes);
  float* parts = reinterpret_cast<float*>(xs + rows * ldx);  // 16-byte aligned: ldx * 2 is a multiple of 16
  float* sums = parts + rows * (WEFT_MMA_PARTIAL_BYTES_PER_ROW / 4);
  for (i64 k0 = 0; k0 < k; k0 += kc) {
    if (k0 > 0) {
      gemv_mma_prologue<T>(a, w + k0, ms, smem);  // this warp's ring is drained and no other warp reads it
      block_sync();                             // every warp is done with the last chunk's x, parts and sums
    }
    stage_x_rows(xs, ldx, x + a->row0 * k + k0, k, kc, rows, smem);
    block_sync();
    const bool first = k0 == 0;
    gemv_mma_run<T>(a, w + k0, ms, xs, ldx, parts, smem, [&](i64 row, i64 n, float v) {
      float& s = sums[(row - a->row0) * cols + (n - a->col0)];  // one thread per output and chunk
      s = first ? v : s + v;
    });
  }
  block_sync();
  for (i64 e = tid(); e < rows * cols; e += WEFT_BLOCK_THREADS) out(a->row0 + e / cols, a->col0 + e % cols, sums[e]);
  return true;
}

// A streamed GEMV tile (prefetch_op has started the stream): stage(xs, rows, ldx, spare) writes the tile's x rows
// ([rows][K] at row stride ldx, dtype T) into shared memory behind the ring (spare: room for K more elements on
// the tensor-core path, else nullptr), then the stream is consumed on tensor cores (gemv_mma.cuh) or CUDA cores
// (gemv_stream.cuh); out = x · w + bias + residual. Returns false when the tile takes neither.
template <typename T, typename Stage>
__device__ bool linear_streamed(const weft_task_args* a, const weft_env* env, char* smem, int w_in, Stage stage) {
  const T* w = in_ptr<T>(a, env, w_in);
  const T* bias = in_ptr<T>(a, env, w_in + 1);
  const T* res = in_ptr<T>(a, env, w_in + 2);
  T* o = out_ptr<T>(a, env);
  const i64 k = a->d[0], n_dim = a->d[1], rows = a->row1 - a->row0;
  T* xs = reinterpret_cast<T*>(smem + kGemvRingBytes);
  const LinearOut<T> out{bias, res, o, n_dim};
  if constexpr (sizeof(T) == 2) {
    const MmaStream ms = gemv_mma_plan<T, false>(a, w);
    if (ms.on) {
      const i64 ldx = k + WEFT_MMA_X_PAD;
      float* parts = reinterpret_cast<float*>(xs + rows * ldx);  // 16-byte aligned: ldx * 2 is a multiple of 16
      T* spare = reinterpret_cast<T*>(parts + rows * (WEFT_MMA_PARTIAL_BYTES_PER_ROW / 4));
      stage(xs, rows, ldx, spare);
      block_sync();
      gemv_mma_run<T>(a, w, ms, xs, ldx, parts, smem, out);
      return true;
    }
  }
  const GemvStream st = gemv_stream_plan<T>(a, w);
  if (st.units == 0) return false;
  stage(xs, rows, k, static_cast<T*>(nullptr));
  block_sync();
  if (rows == 1) gemv_stream_run<T, 1>(a, w, st, xs, smem, out);
  else if (rows == 2) gemv_stream_run<T, 2>(a, w, st, xs, smem, out);
  else if (rows <= 4) gemv_stream_run<T, 4>(a, w, st, xs, smem, out);
  else gemv_stream_run<T, kGemvStreamRows>(a, w, st, xs, smem, out);
  return true;
}

// Which tiles of the streamed-GEMV ops (linear, rmsnorm_linear, silu_mul_linear) run inlined in the task loop.
// Code inlined there costs every task of the loop registers and set-up, whether it runs or not (docs/perf.md,
// rounds 12-14), and time for its size alone (round 27). The tensor-core library (batched decode, every path hot)
// inlines every tile (IMPL). The CUDA-core library serves batch-1 kernels: its task loop runs a decode step's tiles
// (one x row of its dtype) through one_row_gemv (gemv_one_row.cuh), one stream loop for the three ops, and calls
// the op's general body (GENERAL, out of line with pointer operands, ~0.6 us per call) for any other tile.
#if WEFT_DEVLIB_TENSOR_CORES
#define WEFT_GEMV_OP_RUN(IMPL, GENERAL) WEFT_DISPATCH_FLOAT(a->dtype, IMPL, a, env, smem)
#else
#define WEFT_GEMV_OP_RUN(IMPL, GENERAL) GENERAL(a, env, smem)
#endif

// Every tile of the op, out of line (see WEFT_GEMV_OP_RUN).
static __device__ __noinline__ void linear_general(const weft_task_args* a, const weft_env* env, char* smem);

template <typename T>
__device__ void linear_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* w = in_ptr<T>(a, env, 1);
  const T* bias = in_ptr<T>(a, env, 2);
  const T* res = in_ptr<T>(a, env, 3);
  T* o = out_ptr<T>(a, env);
  const i64 k = a->d[0], n_dim = a->d[1];
  if (a->row1 <= a->row0 || a->col1 <= a->col0) return;
  if constexpr (sizeof(T) == 2) {
    if (mma_tile_chunked(a) && linear_chunked<T>(a, env, smem)) return;
  }
  const bool streamed = linear_streamed<T>(a, env, smem, 1, [&](T* xs, i64 rows, i64 ldx, T* spare) {
    (void)spare;
    stage_x_rows(xs, ldx, x + a->row0 * k, k, k, rows, smem);
  });
  if (streamed) return;
  if (a->row1 - a->row0 <= kGemvMaxRows) {
    linear_gemv<T>(a, x, w, bias, res, o, k, n_dim, smem);
    return;
  }
  gemm_tiles<T, true>(a, x, w, k, k, 0, 0, smem, [&](i64 row, i64 col, float v) {
    if (bias != nullptr) v += to_f(bias[col]);
    if (res != nullptr) v += to_f(res[row * n_dim + col]);
    o[row * n_dim + col] = from_f<T>(v);
  });
}

template <typename T>
__device__ void matmul_impl(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* x = in_ptr<T>(a, env, 0);
  const T* b = in_ptr<T>(a, env, 1);
  T* o = out_ptr<T>(a, env);
  const i64 m = a->d[0], k = a->d[1], n_dim = a->d[2];
  const bool batched = a->d[3] != 0;
  if (a->row1 <= a->row0 || a->col1 <= a->col0 || m <= 0) return;
  gemm_tiles<T, false>(a, x, b, k, n_dim, m, batched ? k * n_dim : 0, smem,
                       [&](i64 row, i64 col, float v) { o[row * n_dim + col] = from_f<T>(v); });
}

}  // namespace weft_dev

// LINEAR: in x [R, K], weight [N, K], bias [N] or -1, residual [R, N] or -1. d0=K, d1=N.
// out = (x · w) + bias + residual, summed in that order in f32, rounded once.
__device__ __noinline__ void weft_dev::linear_general(const weft_task_args* a, const weft_env* env, char* smem) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::linear_impl, a, env, smem);
}
WEFT_DEV_OP_BODY(linear) {
  WEFT_GEMV_OP_RUN(weft_dev::linear_impl, weft_dev::linear_general);
}

// MATMUL: in a [B, M, K], b [B, K, N] or [K, N]. R = B*M, C = N. d0=M, d1=K, d2=N, d3=1 if b is batched.
WEFT_DEV_OP_BODY(matmul) {
  WEFT_DISPATCH_FLOAT(a->dtype, weft_dev::matmul_impl, a, env, smem);
}

#endif  // WEFT_DEVICE_OPS_LINEAR_CUH
