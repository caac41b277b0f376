// A plain linear's tile split over K (LINEAR with d2 = P parts, task_abi.h; lowering: weft_mma_split_parts): P
// tasks share the output tile, task p staging x columns [p K / P, (p + 1) K / P) once and streaming the same columns
// of the tile's weight rows on tensor cores (gemv_mma.cuh). Each writes its f32 sums to the tile's partial block
// (d4) and adds 1 to the tile's arrival counter (d5); the part that brings the counter to a multiple of P adds the P
// blocks in order (a chunked tile's sums, in the same order), then bias and residual, and stores the tile. The
// counter grows by P per launch (P a power of two: still a multiple of P where it wraps); the runtime zeroes it with
// the event counters. Memory order as for events (sync.cuh): the block's writes, a barrier, thread 0's release;
// thread 0's acquire, a barrier, the reads (from L2: other SMs wrote them).
//
// Included by device_library.cu after the task loop, which calls it out of line (gemv_mma.cuh). No __shared__
// variable here: the static shared block's size sets where the dynamic block starts, and 16 bytes more cost
// batched kernels 4-6% (device_compile_test holds it). Index math in 32 bits where the plan has bounded it: a
// 64-bit division is a subroutine call on the GPU.
#ifndef WEFT_DEVICE_LINEAR_SPLIT_CUH
#define WEFT_DEVICE_LINEAR_SPLIT_CUH

#include "gemv_mma.cuh"
#include "ops_linear.cuh"
#include "sync.cuh"

namespace weft_dev {

// The part's K range and stream; off (on == false) for a table that breaks lowering's rules.
struct SplitPart {
  MmaStream ms;
  unsigned int kc = 0, k0 = 0, part = 0, parts = 0;
};

template <typename T>
__device__ __forceinline__ SplitPart split_part(const weft_task_args* a, const T* w) {
  SplitPart s;
  const i64 k = a->d[0], parts = a->d[2], part = a->d[3], rows = a->row1 - a->row0, cols = a->col1 - a->col0;
  if (sizeof(T) != 2 || !WEFT_DEVLIB_TENSOR_CORES || parts < 2 || parts > WEFT_MMA_MAX_SPLIT ||
      (parts & (parts - 1)) != 0 || part < 0 || part >= parts || k <= 0 || k > (i64{1} << 30) || cols <= 0 ||
      cols > (i64{1} << 30) || rows < WEFT_MMA_MIN_ROWS || rows > WEFT_MMA_MAX_ROWS || !aligned16(w) ||
      a->d[4] == 0 || a->d[5] == 0)  // no scratch address: a table the runtime did not relocate
    return s;
  const unsigned int uk = static_cast<unsigned int>(k), up = static_cast<unsigned int>(parts);
  const unsigned int kc = uk / up;
  if (kc * up != uk || kc % kMmaStageK != 0 || !weft_mma_split_fits(WEFT_SMEM_BYTES, kc, rows, 2)) return s;
  s.ms = mma_stream_of(cols, kc);
  s.kc = kc;
  s.part = static_cast<unsigned int>(part);
  s.k0 = kc * s.part;
  s.parts = up;
  return s;
}

template <typename T>
__device__ __forceinline__ void split_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* w = in_ptr<T>(a, env, 1);
  const SplitPart sp = split_part<T>(a, w);
  if (sp.ms.on) gemv_mma_prologue<T>(a, w + sp.k0, sp.ms, smem);
}

template <typename T>
__device__ __forceinline__ void split_run(const weft_task_args* a, const weft_env* env, char* smem) {
  const T* w = in_ptr<T>(a, env, 1);
  const SplitPart sp = split_part<T>(a, w);
  if (!sp.ms.on) {
    if (tid() == 0) record_error(env, WEFT_DEV_ERR_BAD_TASK, WEFT_DEV_OP_LINEAR, static_cast<unsigned int>(a->d[2]), 1u);
    return;
  }
  const T* x = in_ptr<T>(a, env, 0);
  const LinearOut<T> out{in_ptr<T>(a, env, 2), in_ptr<T>(a, env, 3), out_ptr<T>(a, env), a->d[1]};
  const i64 k = a->d[0], ldx = sp.kc + WEFT_MMA_X_PAD;
  const unsigned int rows = static_cast<unsigned int>(a->row1 - a->row0), cols = static_cast<unsigned int>(a->col1 - a->col0);
  const unsigned int block = rows * cols;
  T* xs = reinterpret_cast<T*>(smem + kGemvRingBytes);
  float* psum = reinterpret_cast<float*>(xs + rows * ldx);  // 16-byte aligned: ldx * 2 is a multiple of 16
  float* blocks = reinterpret_cast<float*>(a->d[4]);
  float* mine = blocks + static_cast<size_t>(sp.part) * block;
  stage_x_rows(xs, ldx, x + a->row0 * k + sp.k0, k, sp.kc, rows, smem);
  block_sync();
  gemv_mma_run<T>(a, w + sp.k0, sp.ms, xs, ldx, psum, smem, [&](i64 row, i64 n, float v) {
    mine[static_cast<unsigned int>(row - a->row0) * cols + static_cast<unsigned int>(n - a->col0)] = v;
  });
  block_sync();  // every thread's sums are written before thread 0 releases them
  if (!arrive_last_of(reinterpret_cast<unsigned int*>(a->d[5]), sp.parts)) return;
  for (unsigned int e = tid(); e < block; e += WEFT_BLOCK_THREADS) {
    float v = __ldcg(blocks + e);
    for (unsigned int p = 1; p < sp.parts; ++p) v += __ldcg(blocks + static_cast<size_t>(p) * block + e);
    out(a->row0 + e / cols, a->col0 + e % cols, v);
  }
}

// Before the task's wait: the first stages of its part (nothing for a table the plan refuses: the run then records
// the error). Always true: the tile takes no other stream.
__device__ __noinline__ bool linear_split_prologue(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->dtype == WEFT_DEV_BF16) split_prologue<bf16>(a, env, smem);
  else if (a->dtype == WEFT_DEV_F16) split_prologue<f16>(a, env, smem);
  return true;
}

__device__ __noinline__ void linear_split_run(const weft_task_args* a, const weft_env* env, char* smem) {
  if (a->dtype == WEFT_DEV_BF16) split_run<bf16>(a, env, smem);
  else if (a->dtype == WEFT_DEV_F16) split_run<f16>(a, env, smem);
  else if (tid() == 0) record_error(env, WEFT_DEV_ERR_BAD_TASK, WEFT_DEV_OP_LINEAR, static_cast<unsigned int>(a->d[2]), 2u);
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_LINEAR_SPLIT_CUH
