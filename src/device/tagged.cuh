// Tagged hand-offs (task_abi.h, WEFT_TAGGED_*): a tensor stored as 32-bit words, its bf16 value in the low half and
// the writing step's tag in the high half. The producer stores words with relaxed stores and needs no fence or event
// for them; a reader loads its words until every tag is the step's. Each 32-bit word is written and read whole
// (single-copy atomic), so a word whose tag is current holds this step's value. So a consumer's wait and its load of
// the data are one L2 round trip, not two (a poll of a counter, then the data: docs/perf.md round 44 measured the
// second at 0.7-1.35 us of every one-row GEMV tile's run). Loads bypass L1 (.relaxed.gpu), or a stale line would be
// read back for ever.
//
// Why no stale word can carry the current tag: every step of every launch writes every word of a tagged tensor once
// (lowering tags only one-row tiles that no symbol value cuts or skips), epochs grow by one per step, and the arena is
// zeroed when allocated and after a device error (tag 0 is epoch 65536's, by when the words hold epoch 65535's).
// Compiled only into "<arch>_simt_tagged" (WEFT_DEV_TAGGED, config.cuh).
#ifndef WEFT_DEVICE_TAGGED_CUH
#define WEFT_DEVICE_TAGGED_CUH

#include "common.cuh"

namespace weft_dev {

__device__ __forceinline__ unsigned int step_tag(const weft_env* env) { return env->epoch & 0xffffu; }

__device__ __forceinline__ uint4 ld_relaxed_v4(const unsigned int* p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ unsigned int ld_relaxed_u32(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_u32(unsigned int* p, unsigned int v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// A value's word: its bits in the low half, the tag in the high half (bf16 only: no other dtype is tagged).
__device__ __forceinline__ unsigned int tagged_word(bf16 v, unsigned int tag) {
  return static_cast<unsigned int>(__bfloat16_as_ushort(v)) | (tag << 16);
}
template <typename T>
__device__ __forceinline__ unsigned int tagged_word(T, unsigned int tag) {
  return tag << 16;
}

// Whether all four words carry `tag` (their high halves).
__device__ __forceinline__ bool tags_current(const uint4& v, unsigned int tag) {
  return (((v.x ^ (tag << 16)) | (v.y ^ (tag << 16)) | (v.z ^ (tag << 16)) | (v.w ^ (tag << 16))) >> 16) == 0u;
}

// The low halves of two words side by side: the bf16 values of elements i and i + 1.
__device__ __forceinline__ unsigned int tagged_pair(unsigned int lo, unsigned int hi) { return __byte_perm(lo, hi, 0x5410); }
// Eight words' values as one 16-byte vector of bf16.
__device__ __forceinline__ uint4 tagged_values(const uint4 (&w)[2]) {
  return make_uint4(tagged_pair(w[0].x, w[0].y), tagged_pair(w[0].z, w[0].w), tagged_pair(w[1].x, w[1].y),
                    tagged_pair(w[1].z, w[1].w));
}

// The back-off's cap between reloads: a measurement build may set it (DEVLIB_NVCC_FLAGS=-DWEFT_TAGGED_POLL_CAP_NS=n).
#ifndef WEFT_TAGGED_POLL_CAP_NS
#define WEFT_TAGGED_POLL_CAP_NS 256u
#endif
// Waits until `got` (W x 4 words at p, already loaded once) is current, reloading with the event polls' back-off
// (weft_poll_event); false when the watchdog's bound passed (WEFT_DEV_ERR_DEADLOCK naming the tensor's slot and the
// element: WEFT_DEV_WAIT_TAGGED) or another block recorded an error, and `got` is then what was last seen.
template <int W>
__device__ __forceinline__ bool tagged_retry(const unsigned int* p, unsigned int tag, uint4 (&got)[W], const weft_env* env,
                                             int slot, i64 elem) {
  const long long timeout = env->queues->timeout_cycles;
  const long long start = clock64();
  unsigned int sleep_ns = 16;
  for (unsigned int spin = 1;; ++spin) {
    __nanosleep(sleep_ns);
    if (sleep_ns < WEFT_TAGGED_POLL_CAP_NS) sleep_ns *= 2u;
    bool ok = true;
#pragma unroll
    for (int i = 0; i < W; ++i) {
      got[i] = ld_relaxed_v4(p + 4 * i);
      ok = ok && tags_current(got[i], tag);
    }
    if (ok) return true;
    if (timeout > 0 && clock64() - start > timeout) {
      record_error(env, WEFT_DEV_ERR_DEADLOCK, WEFT_DEV_WAIT_TAGGED, static_cast<unsigned int>(slot),
                   static_cast<unsigned int>(elem));
      return false;
    }
    if ((spin & 63u) == 0u && error_raised(env)) return false;
  }
}

// Eight consecutive elements (p: their first word, 16-byte aligned) as one 16-byte vector of bf16, once their words
// are current. False as tagged_retry (the vector is then what was last seen).
__device__ __forceinline__ bool load_tagged8(const unsigned int* p, unsigned int tag, uint4& out, const weft_env* env,
                                             int slot, i64 elem) {
  uint4 w[2];
  w[0] = ld_relaxed_v4(p);
  w[1] = ld_relaxed_v4(p + 4);
  bool ok = true;
  if (!(tags_current(w[0], tag) && tags_current(w[1], tag))) ok = tagged_retry<2>(p, tag, w, env, slot, elem);
  out = tagged_values(w);
  return ok;
}

// One element's value once its word is current (a residual, read long after its producer ran: the first load is
// current but for a race the task graph's order already excludes).
__device__ __forceinline__ float load_tagged1(const unsigned int* p, unsigned int tag, const weft_env* env, int slot,
                                              i64 elem) {
  unsigned int v = ld_relaxed_u32(p);
  if ((v >> 16) != tag) {
    const long long timeout = env->queues->timeout_cycles;
    const long long start = clock64();
    for (unsigned int spin = 1; (v >> 16) != tag; ++spin) {
      __nanosleep(64);
      v = ld_relaxed_u32(p);
      if (timeout > 0 && clock64() - start > timeout) {
        record_error(env, WEFT_DEV_ERR_DEADLOCK, WEFT_DEV_WAIT_TAGGED, static_cast<unsigned int>(slot),
                     static_cast<unsigned int>(elem));
        break;
      }
      if ((spin & 63u) == 0u && error_raised(env)) break;
    }
  }
  return __uint_as_float(v << 16);  // bf16 bits are f32's high half
}

// A one-row x (k elements, k a multiple of 8) of tagged words into xs (bf16) by the whole block, once current; the
// caller's barrier publishes xs.
__device__ __forceinline__ void stage_tagged_x(bf16* xs, const unsigned int* x, i64 k, const weft_env* env, int slot) {
  const unsigned int tag = step_tag(env);
  for (i64 v = tid(); v < k / 8; v += WEFT_BLOCK_THREADS) {
    uint4 u;
    load_tagged8(x + v * 8, tag, u, env, slot, v * 8);
    *reinterpret_cast<uint4*>(xs + v * 8) = u;
  }
}

}  // namespace weft_dev

#endif  // WEFT_DEVICE_TAGGED_CUH
