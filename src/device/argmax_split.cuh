// A long row's argmax split over its columns (ARGMAX with d2 = P parts, task_abi.h; lowering: argmax_parts). A
// decode step's logits row (128-152k columns) scanned by one block took 18-20 us per token; P parts scan ~2k
// columns each on P SMs, each as soon as the producer tiles of its own columns are done, and the last part to
// arrive picks among the P candidates. Part p writes its best (order key, index) to entry p of the tile's block
// (d4) and adds 1 to the tile's arrival counter (d5); the part that brings the counter to a multiple of P (P a
// power of two: still a multiple of P where the counter wraps) reads every entry and stores the best: the highest
// key, the lowest index among equal keys — the first maximum, NaN above every number, as the whole-row scan.
// Memory order as in linear_split.cuh: the entry, thread 0's release; thread 0's acquire, a barrier, the reads.
//
// Included by device_library.cu after the task loop, which reaches it out of line through op_argmax. No
// __shared__ variable (see linear_split.cuh).
#ifndef WEFT_DEVICE_ARGMAX_SPLIT_CUH
#define WEFT_DEVICE_ARGMAX_SPLIT_CUH

#include "ops_reduce.cuh"
#include "sync.cuh"

namespace weft_dev {

static_assert(WEFT_DEV_LOADER || WEFT_ARGMAX_MAX_SPLIT <= WEFT_BLOCK_THREADS, "the last part reads one entry per thread");

template <typename T>
__device__ __forceinline__ void argmax_split(const weft_task_args* a, const weft_env* env, char* smem) {
  const i64 n = a->d[0], parts = a->d[2], part = a->d[3], c0 = a->d[6], c1 = a->d[7];
  if (parts < 2 || parts > WEFT_ARGMAX_MAX_SPLIT || (parts & (parts - 1)) != 0 || part < 0 || part >= parts ||
      n <= 0 || n >= (i64{1} << 31) || c0 < 0 || c0 > c1 || c1 > n || a->row1 - a->row0 != 1 || a->d[4] == 0 ||
      a->d[5] == 0) {  // a table lowering did not write (or the runtime did not relocate)
    if (tid() == 0) record_error(env, WEFT_DEV_ERR_BAD_TASK, WEFT_DEV_OP_ARGMAX, static_cast<unsigned int>(parts), 1u);
    return;
  }
  ArgKey* scratch = reinterpret_cast<ArgKey*>(smem);
  int* entries = reinterpret_cast<int*>(a->d[4]);
  ArgKey b = argkey_row_block(in_ptr<T>(a, env, 0) + a->row0 * n + c0, static_cast<int>(c1 - c0), scratch);
  if (c1 > c0) b.i += static_cast<int>(c0);
  if (tid() == 0) {
    entries[2 * part] = b.key;
    entries[2 * part + 1] = b.i;
  }
  if (!arrive_last_of(reinterpret_cast<unsigned int*>(a->d[5]), static_cast<unsigned int>(parts))) return;
  ArgKey c = no_arg_key();
  if (tid() < parts) c = ArgKey{__ldcg(entries + 2 * tid()), __ldcg(entries + 2 * tid() + 1)};
#if WEFT_DEV_LOADER
  for (int e = tid() + WEFT_BLOCK_THREADS; e < parts; e += WEFT_BLOCK_THREADS) {  // fewer op threads than parts
    const ArgKey o{__ldcg(entries + 2 * e), __ldcg(entries + 2 * e + 1)};
    if (key_better(o, c)) c = o;
  }
#endif
  c = block_argkey(c, scratch);
  if (tid() == 0) {
    void* o = env->slots[a->out];
    if (a->i[0] == WEFT_DEV_I32) static_cast<int*>(o)[a->row0] = c.i;
    else static_cast<i64*>(o)[a->row0] = c.i;
  }
}

__device__ __noinline__ void argmax_split_run(const weft_task_args* a, const weft_env* env, char* smem) {
  WEFT_DISPATCH_FLOAT(a->dtype, argmax_split, a, env, smem);
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_ARGMAX_SPLIT_CUH
