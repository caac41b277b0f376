// Constants every part of the megakernel agrees on. No headers: this file is included by the generated
// kernel (through weft_device.h), by the device library and may be included by host code.
#ifndef WEFT_DEVICE_CONFIG_CUH
#define WEFT_DEVICE_CONFIG_CUH

#include "task_abi.h"

// Every device op is called by all threads of a block of exactly this many threads (the weight loader's kernel has
// a warp more, WEFT_LOADER_LAUNCH_THREADS, below: its ops still run on this many).
#define WEFT_BLOCK_THREADS 256
#define WEFT_LAUNCH_THREADS 256
#define WEFT_WARP_THREADS 32
#define WEFT_BLOCK_WARPS (WEFT_BLOCK_THREADS / WEFT_WARP_THREADS)

// Registers per thread the device library is compiled for (nvcc -maxrregcount, read by CMakeLists.txt):
// 65536 / (256 threads * 1 block), so that a kernel with __launch_bounds__(WEFT_BLOCK_THREADS,
// WEFT_MIN_BLOCKS_PER_SM) links (nvJitLink refuses callees that need more registers than the kernel may use).
// One block per SM (its shared memory alone allows no second one): a cap of 128 made attention, argmax and the
// GEMV spill to local memory (ncu: 1.9 million spill requests per Llama-1B decode step), and every spill
// is a memory round trip on the critical path.
#define WEFT_MIN_BLOCKS_PER_SM 1
#define WEFT_MAX_REGISTERS 255

// The most dynamic shared memory a device op uses through its `smem` argument; the kernel is launched with
// this much (one block per SM: the streamed GEMV keeps 64 KiB of weights in flight next to its x rows).
// WEFT_SMEM_BYTES_BASE fits the 163 KiB an sm_80 block may opt into. On sm_90 and later (227 KiB per block, less
// the task loop's static shared memory) a kernel whose tensor-core tiles then need fewer row blocks links the
// device library built with WEFT_DEVLIB_WIDE_SMEM ("<arch>_wide") and runs with WEFT_SMEM_BYTES_WIDE: 8 x rows
// of K 8192 fit beside the ring, so batched decode streams the down projection's weights once per 8 rows instead
// of once per 4. Only where it cuts row blocks (lower_for_device): the larger carve-out leaves L1, which holds the
// task loop's spills, ~28 KiB instead of ~92 (Qwen3-0.6B at batch 8, whose tiles fit either way, ran 0-3% slower).
#define WEFT_SMEM_BYTES_BASE (160 * 1024)
#define WEFT_SMEM_BYTES_WIDE (220 * 1024)
#define WEFT_SMEM_WIDE_MIN_SM 90  // compute capability (x10) from which WEFT_SMEM_BYTES_WIDE fits a block
// The weight loader (WEFT_DEVLIB_LOADER=1, the CUDA-core library "<arch>_simt_loader", sm_90 on; weight_loader.cuh):
// a 9th warp per block copies the one-row GEMV tiles' weights into a ring of WEFT_LOADER_SLOTS slots that lies past
// the ops' shared memory, streaming on through the tasks' boundaries, while the ops run on the first 8 warps as
// everywhere else. A block of 9 warps caps every thread at 168 registers (the register file's four quarters each
// hold 3 of its warps: 65536 / 4 / 96 = 170: WEFT_LOADER_MAX_REGISTERS, that library's nvcc -maxrregcount), where
// the task loop, compiled apart, takes ~222; compiled into the kernel entry it fits 168 (with fewer spills than the
// 255-register loop: docs/perf.md round 43). So that library holds its own kernel entry (loader_entry.cuh), linked
// alone: the generated part is not used. Its slot table holds at most WEFT_LOADER_ENTRY_SLOTS pointers. The ops get
// WEFT_SMEM_BYTES_LOADER_OPS (the ring, its mbarriers and the op warps' ring positions beside it fill the block's
// 227 KiB, less the task loop's static shared memory); the kernel is launched with WEFT_SMEM_BYTES_LOADER.
#define WEFT_LOADER_LAUNCH_THREADS (WEFT_BLOCK_THREADS + WEFT_WARP_THREADS)
#define WEFT_LOADER_MAX_REGISTERS 168
#define WEFT_LOADER_ENTRY_SLOTS 1024
#define WEFT_LOADER_KERNEL_NAME "weft_megakernel_loader"
#define WEFT_LOADER_SLOTS 8
#define WEFT_LOADER_SLOT_BYTES (8 * 2048)  // a 2 KiB stage per op warp, at most 8 of them
#define WEFT_LOADER_RING_BYTES (WEFT_LOADER_SLOTS * WEFT_LOADER_SLOT_BYTES)
#define WEFT_LOADER_CONTROL_BYTES (2 * WEFT_LOADER_SLOTS * 8 + 16 + 4 * 8)
#define WEFT_SMEM_BYTES_LOADER_OPS (88 * 1024)
#define WEFT_SMEM_BYTES_LOADER (WEFT_SMEM_BYTES_LOADER_OPS + WEFT_LOADER_RING_BYTES + WEFT_LOADER_CONTROL_BYTES)
#define WEFT_LOADER_MIN_SM 90
#if defined(WEFT_DEVLIB_LOADER) && WEFT_DEVLIB_LOADER
#define WEFT_DEV_LOADER 1
#else
#define WEFT_DEV_LOADER 0
#endif
// Tagged hand-offs (device/tagged.cuh, lower/tagged_handoffs.hpp) are compiled only into "<arch>_simt_tagged"
// (WEFT_DEVLIB_TAGGED=1, from sm_90 on), so that every other library's task loop is the code it was: its allocation
// alone moves a decode step by ~1% (docs/perf.md round 38).
#define WEFT_TAGGED_MIN_SM 90
#if defined(WEFT_DEVLIB_TAGGED) && WEFT_DEVLIB_TAGGED
#define WEFT_DEV_TAGGED 1
#else
#define WEFT_DEV_TAGGED 0
#endif
// In the CUDA-core libraries' one-row GEMV tiles the poller's warp requests no weights before its wait
// (gemv_prologue_poller_free, gemv_stream.cuh): 0.3-1.9% per token (docs/perf.md round 47). A measurement build can
// turn it off (scripts/devlib-build.sh with DEVLIB_NVCC_FLAGS=-DWEFT_DEV_POLLER_WARP_FREE=0).
#ifndef WEFT_DEV_POLLER_WARP_FREE
#define WEFT_DEV_POLLER_WARP_FREE 1
#endif
#if WEFT_DEV_LOADER
#define WEFT_SMEM_BYTES WEFT_SMEM_BYTES_LOADER_OPS
#elif defined(WEFT_DEVLIB_WIDE_SMEM) && WEFT_DEVLIB_WIDE_SMEM
#define WEFT_SMEM_BYTES WEFT_SMEM_BYTES_WIDE
#else
#define WEFT_SMEM_BYTES WEFT_SMEM_BYTES_BASE
#endif

// The streamed GEMV's shared memory (gemv_stream.cuh, gemv_mma.cuh): a ring of weight stages, then the tile's
// x rows, and the last bytes block-reduction scratch of a fused x stage. Lowering sizes tiles with the same numbers.
#define WEFT_GEMV_RING_BYTES (64 * 1024)
#define WEFT_GEMV_SCRATCH_BYTES 64
// The one-row tiles' plan record per warp below the scratch (GemvPlanRecord, gemv_one_row.cuh).
#define WEFT_GEMV_PLAN_RECORD_BYTES 40

// Tensor-core tiles (gemv_mma.cuh): bf16/f16 weights with K a multiple of WEFT_MMA_K_MULTIPLE and
// WEFT_MMA_MIN_ROWS..WEFT_MMA_MAX_ROWS x rows per tile. Each x row takes K + 8 elements of shared memory (the
// pad puts the 8 rows an ldmatrix reads in distinct banks) and 512 bytes of partial sums, and a fused x stage may
// keep one more row of K (rmsnorm's weight); WEFT_MMA_ROWS_FIT is how many rows fit beside the ring.
#define WEFT_MMA_MIN_ROWS 2
#define WEFT_MMA_MAX_ROWS 32
#define WEFT_MMA_K_MULTIPLE 128
#define WEFT_MMA_X_PAD 8
#define WEFT_MMA_PARTIAL_BYTES_PER_ROW 512
#define WEFT_MMA_ROW_BYTES(k, esize) (((k) + WEFT_MMA_X_PAD) * (esize) + WEFT_MMA_PARTIAL_BYTES_PER_ROW)
#define WEFT_MMA_ROWS_FIT_IN(smem, k, esize) \
  (((smem) - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES - (k) * (esize)) / WEFT_MMA_ROW_BYTES(k, esize))
#define WEFT_MMA_ROWS_FIT(k, esize) WEFT_MMA_ROWS_FIT_IN(WEFT_SMEM_BYTES, k, esize)

// A plain linear's tensor-core tile whose x rows do not fit at once stages them in K chunks (gemv_mma.cuh): per
// chunk KC columns of every row (KC + WEFT_MMA_X_PAD elements each) and the partial sums, plus an f32 sum per
// output of the tile across chunks. Without it such a tile takes several row blocks and every block streams
// the whole weight again (Llama-1B's down projection at batch 32: four times). Returns the K per chunk: K itself
// when the rows fit whole (as WEFT_MMA_ROWS_FIT_IN counts), else the largest K / d (d = 2, 3, ...; a multiple
// of WEFT_MMA_K_MULTIPLE) that fits, else 0. Lowering and the device take the same value.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif
static inline WEFT_HOST_DEVICE long long weft_mma_chunk_k(long long smem, long long k, long long rows,
                                                          long long cols, long long esize) {
  if (rows < WEFT_MMA_MIN_ROWS || rows > WEFT_MMA_MAX_ROWS || cols <= 0 || k <= 0 || k % WEFT_MMA_K_MULTIPLE != 0)
    return 0;
  if (rows <= WEFT_MMA_ROWS_FIT_IN(smem, k, esize)) return k;
  const long long room = smem - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES - rows * cols * 4;
  for (long long d = 2; k / d >= WEFT_MMA_K_MULTIPLE; ++d) {
    const long long kc = k / d;
    if (k % d == 0 && kc % WEFT_MMA_K_MULTIPLE == 0 && rows * WEFT_MMA_ROW_BYTES(kc, esize) <= room) return kc;
  }
  return 0;
}

// Whether a linear_silu_mul tile of `rows` x rows and `cols` output columns takes the tensor-core path: its x rows
// (all of K) and partial sums fit beside the ring together with the gate and up sums of its columns (two per column
// and row, rounded to the dtype), which it keeps until both halves of a column are done (ops_linear_silu_mul.cuh).
// Lowering and the device take the same value.
static inline WEFT_HOST_DEVICE bool weft_mma_swiglu_fits(long long smem, long long k, long long rows, long long cols,
                                                         long long esize) {
  return rows * WEFT_MMA_ROW_BYTES(k, esize) + rows * 2 * ((cols + 7) / 8 * 8) * esize <=
         smem - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES;
}

// Whether `rows` x rows of kc columns and their partial sums fit beside the ring (a split tile's part).
static inline WEFT_HOST_DEVICE bool weft_mma_split_fits(long long smem, long long kc, long long rows, long long esize) {
  return rows * WEFT_MMA_ROW_BYTES(kc, esize) <= smem - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES;
}
// A plain linear's tensor-core tile whose x rows do not fit whole may instead be split over K (LINEAR in
// task_abi.h): P tasks, each staging x columns [p K / P, (p + 1) K / P) once and streaming the same columns of the
// tile's weight rows, their f32 sums added by the last to finish. Unlike a chunked tile, x is read once per task,
// not once per chunk of every tile. Returns 1 when the rows fit whole, else the smallest power of two P <=
// WEFT_MMA_MAX_SPLIT whose part (K / P, a multiple of WEFT_MMA_K_MULTIPLE) fits beside the ring, else 0.
// Powers of two: an arrival counter that grows by P per launch stays a multiple of P when it wraps. Lowering and
// the device take the same value.
#define WEFT_MMA_MAX_SPLIT 16
static inline WEFT_HOST_DEVICE long long weft_mma_split_parts(long long smem, long long k, long long rows,
                                                              long long esize) {
  if (rows < WEFT_MMA_MIN_ROWS || rows > WEFT_MMA_MAX_ROWS || k <= 0 || k % WEFT_MMA_K_MULTIPLE != 0) return 0;
  if (rows <= WEFT_MMA_ROWS_FIT_IN(smem, k, esize)) return 1;
  for (long long p = 2; p <= WEFT_MMA_MAX_SPLIT && k / p >= WEFT_MMA_K_MULTIPLE; p *= 2)
    if (k % p == 0 && (k / p) % WEFT_MMA_K_MULTIPLE == 0 && weft_mma_split_fits(smem, k / p, rows, esize)) return p;
  return 0;
}

// ARGMAX over long rows may be split over columns (task_abi.h): at most this many parts, a power of two; the last
// part to arrive reads one candidate per thread.
#define WEFT_ARGMAX_MAX_SPLIT 256

// ATTENTION_DECODE_QKV may be split over its timesteps (task_abi.h): at most this many parts, a power of two (the
// last part merges one entry per part, unrolled).
#define WEFT_ATTN_MAX_SPLIT 8

// The shared-memory attention path's plan (attention_smem.cuh, attn_smem_plan): bytes it takes whatever the
// timesteps (besides the op's staging), and bytes per timestep. Lowering splits a tile only where the cache holds
// more timesteps than fit.
#define WEFT_ATTN_SMEM_FIXED(hd, group) WEFT_ATTN_SMEM_FIXED_W(hd, group, WEFT_BLOCK_WARPS)
// The same for a team of `warps` warps (a tile of two kv heads attends one per half of the block: each half's plan
// keeps its warps' partial outputs only).
#define WEFT_ATTN_SMEM_FIXED_W(hd, group, warps) (16 + (group) * (hd) * 4 * (1 + (warps)) + (group) * 12)
#define WEFT_ATTN_SMEM_PER_STEP(hd, group, esize) (2 * (hd) * (esize) + (group) * 4)

// attention_decode_qkv tiles of two kv heads (lowering: attention_pairs; i3 = 2): warps [0, 4) attend the first kv
// head and warps [4, 8) the second, each team in its own half of the shared memory (smem bytes / 2, 16-aligned), as
// two tiles side by side. Where tiles outnumber the SMs a block then runs two latency-bound tiles at once.
#define WEFT_ATTN_PAIR_WARPS (WEFT_BLOCK_WARPS / 2)
#define WEFT_ATTN_PAIR_BYTES(smem) (((smem) / 2) & ~15)

// d[] index that holds C, the column count of the output's 2-D view, for ops whose d[] layout in task_abi.h
// has no C (silu, gelu, cast, reshape, softmax, reduce, slice, concat). 0 there means "the tile spans whole
// rows", so C = col1. Lowering only needs to fill it for tiles that cut rows.
#define WEFT_D_VIEW_COLS 15

// attention_decode keeps a float copy of q and the output accumulator of at least one q head in shared
// memory, which bounds head_dim; larger heads write zeros (lowering rejects them first).
#define WEFT_ATTN_MAX_HEAD_DIM 4096

// Bytes attention_decode_qkv stages at the end of shared memory (ops_attention_qkv.cuh): cos and sin [hd/2] f32,
// the position (16 bytes), q heads [group][hd], k [hd], v [hd], each piece 16-byte aligned, then the prologue's plan
// for the run (WEFT_ATTN_RUN_RECORD_BYTES, the last bytes). Lowering refuses a shape whose staging does not fit; the
// device lays it out with the same pieces.
#define WEFT_ROUND16(x) (((x) + 15) & ~15)
#define WEFT_ATTN_RUN_RECORD_BYTES 512
#define WEFT_QKV_STAGE_BYTES(hd, group, esize)                                                                   \
  (2 * WEFT_ROUND16((hd) / 2 * 4) + 16 + WEFT_ROUND16((group) * (hd) * (esize)) + 2 * WEFT_ROUND16((hd) * (esize)) + \
   WEFT_ATTN_RUN_RECORD_BYTES)

// Every device op, in weft_dev_op order: X(ENUM_SUFFIX, name). Op WEFT_DEV_OP_<E> runs weft_dev::op_<name>
// (the task loop's dispatch, task_loop.cuh) and is called "weft_dev_<name>" in traces and messages.
#define WEFT_DEV_OP_LIST(X)                                                                              \
  X(EMBEDDING, embedding) X(RMSNORM, rmsnorm) X(HEAD_RMSNORM, head_rmsnorm) X(LAYERNORM, layernorm)      \
  X(LINEAR, linear) X(MATMUL, matmul) X(ADD, add) X(MUL, mul) X(SILU, silu) X(GELU, gelu)                \
  X(SILU_MUL, silu_mul) X(ROPE, rope) X(ATTENTION_DECODE, attention_decode) X(SOFTMAX, softmax)          \
  X(ARGMAX, argmax) X(REDUCE, reduce) X(CAST, cast) X(RESHAPE, reshape) X(SLICE, slice) X(CONCAT, concat)  \
  X(RMSNORM_LINEAR, rmsnorm_linear) X(SILU_MUL_LINEAR, silu_mul_linear)                                  \
  X(ATTENTION_DECODE_QKV, attention_decode_qkv) X(LINEAR_SILU_MUL, linear_silu_mul) X(ROPE_TABLE, rope_table)

#endif  // WEFT_DEVICE_CONFIG_CUH
