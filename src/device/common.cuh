// Helpers shared by the device ops: dtype conversions, 16-byte vector loads/stores, warp and block
// reductions, block-wide copies and the task's tile geometry. Everything here is internal to the device
// library (namespace weft_dev); only the extern "C" weft_* entry points of weft_device.h are its interface.
#ifndef WEFT_DEVICE_COMMON_CUH
#define WEFT_DEVICE_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "config.cuh"
#include "sync.cuh"

namespace weft_dev {

typedef long long i64;
typedef unsigned long long u64;
typedef __nv_bfloat16 bf16;
typedef __half f16;

#define WEFT_FULL_MASK 0xffffffffu

__device__ __forceinline__ int tid() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int lane() { return static_cast<int>(threadIdx.x) & (WEFT_WARP_THREADS - 1); }
__device__ __forceinline__ int warp() { return static_cast<int>(threadIdx.x) / WEFT_WARP_THREADS; }

// ---- slots ----

// Tensors always live in global memory; saying so lets the compiler use global loads and stores instead of
// generic ones (which check the address space on every access).
template <typename T>
__device__ __forceinline__ T* global_slot(const weft_env* env, int s) {
  T* p = static_cast<T*>(env->slots[s]);
  __builtin_assume(__isGlobal(p));
  return p;
}
template <typename T>
__device__ __forceinline__ const T* in_ptr(const weft_task_args* a, const weft_env* env, int k) {
  const int s = a->in[k];
  return s < 0 ? nullptr : global_slot<const T>(env, s);
}
template <typename T>
__device__ __forceinline__ T* in_mut_ptr(const weft_task_args* a, const weft_env* env, int k) {
  const int s = a->in[k];
  return s < 0 ? nullptr : global_slot<T>(env, s);
}
template <typename T>
__device__ __forceinline__ T* out_ptr(const weft_task_args* a, const weft_env* env) {
  return global_slot<T>(env, a->out);
}

// C of the output's 2-D view for ops whose d[] layout does not carry it (see WEFT_D_VIEW_COLS).
__device__ __forceinline__ i64 view_cols(const weft_task_args* a) {
  return a->d[WEFT_D_VIEW_COLS] > 0 ? a->d[WEFT_D_VIEW_COLS] : a->col1;
}

// ---- conversions: to f32 exactly, back with one round-to-nearest-even ----

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(f16 v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ f16 from_f<f16>(float v) { return __float2half_rn(v); }

// ---- 16-byte vectors ----

template <typename T>
struct Vec {
  static constexpr int N = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte access
};

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<u64>(p) & 15u) == 0; }

// The N = Vec<T>::N elements held by 16 raw bytes, as floats.
template <typename T>
__device__ __forceinline__ void unpack_vec(uint4 raw, float (&v)[Vec<T>::N]) {
  alignas(16) T t[Vec<T>::N];
  *reinterpret_cast<uint4*>(t) = raw;
#pragma unroll
  for (int k = 0; k < Vec<T>::N; ++k) v[k] = to_f(t[k]);
}
// bf16 is the high half of an f32: one shift or one mask per element, the same values. Element by element the
// compiler moved each odd element down and shifted it back up (PRMT + SHF), a third more instructions in the
// GEMV loops' conversions (docs/perf.md, round 29).
template <>
__device__ __forceinline__ void unpack_vec<bf16>(uint4 raw, float (&v)[Vec<bf16>::N]) {
  const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}

// Loads N = Vec<T>::N elements at p (16-byte aligned) as floats.
template <typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&v)[Vec<T>::N]) {
  unpack_vec<T>(*reinterpret_cast<const uint4*>(p), v);
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[Vec<T>::N]) {
  alignas(16) T t[Vec<T>::N];
#pragma unroll
  for (int k = 0; k < Vec<T>::N; ++k) t[k] = from_f<T>(v[k]);
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(t);
}

// Calls fn(j, value_as_float) for every j in [0, n) that thread t of nt owns: 16-byte loads when p is
// aligned, kInFlight of them issued before the first is used (a long row is latency-bound otherwise), then the
// tail element by element. (Same j -> thread mapping for a given p, n, t, nt.) I: the index type (int where n
// fits: 64-bit index math is several instructions per element on a row of 100k+ elements).
template <typename T, int kInFlight = 8, typename I = i64, typename Fn>
__device__ __forceinline__ void visit_row(const T* p, I n, int t, int nt, Fn fn) {
  constexpr int N = Vec<T>::N;
  I done = 0;
  if (aligned16(p)) {
    const I nv = n / N;
    I v = t;
    for (; v + (kInFlight - 1) * static_cast<I>(nt) < nv; v += kInFlight * static_cast<I>(nt)) {
      uint4 raw[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) raw[u] = *reinterpret_cast<const uint4*>(p + (v + u * static_cast<I>(nt)) * N);
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        float x[N];
        unpack_vec<T>(raw[u], x);
#pragma unroll
        for (int k = 0; k < N; ++k) fn((v + u * static_cast<I>(nt)) * N + k, x[k]);
      }
    }
    for (; v < nv; v += nt) {
      float x[N];
      load_vec(p + v * N, x);
#pragma unroll
      for (int k = 0; k < N; ++k) fn(v * N + k, x[k]);
    }
    done = nv * N;
  }
  for (I j = done + t; j < n; j += nt) fn(j, to_f(p[j]));
}

struct uint4_pair {
  uint4 first, second;
};

// For every e in [0, n) that thread t of nt owns: use(e, load(e)), with kInFlight loads issued before the first
// use. Staging a tile's inputs from L2 while the weight streams load HBM takes ~1 us per round trip: one load at
// a time per thread made an 8-row x stage cost several of them.
template <int kInFlight, typename Load, typename Use>
__device__ __forceinline__ void load_batched(int n, int t, int nt, Load load, Use use) {
  using R = decltype(load(0));
  for (int e0 = t; e0 < n; e0 += kInFlight * nt) {
    R raw[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (e0 + u * nt < n) raw[u] = load(e0 + u * nt);
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      if (e0 + u * nt < n) use(e0 + u * nt, raw[u]);
  }
}

// o[j] = fn(x[j]) for j in [0, n) with threads t, t+nt, ...; 16-byte accesses when both pointers are aligned.
// Each j is read and written by the same thread, so o may alias x.
template <typename T, typename Fn>
__device__ __forceinline__ void map_row(T* o, const T* x, i64 n, int t, int nt, Fn fn) {
  constexpr int N = Vec<T>::N;
  i64 done = 0;
  if (aligned16(o) && aligned16(x)) {
    const i64 nv = n / N;
    for (i64 v = t; v < nv; v += nt) {
      float xv[N];
      load_vec(x + v * N, xv);
#pragma unroll
      for (int e = 0; e < N; ++e) xv[e] = fn(xv[e]);
      store_vec(o + v * N, xv);
    }
    done = nv * N;
  }
  for (i64 j = done + t; j < n; j += nt) o[j] = from_f<T>(fn(to_f(x[j])));
}

// ---- reductions ----
// Butterfly (xor) shuffles: every lane ends with the same bits, since each step adds the same two values.

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = WEFT_WARP_THREADS / 2; o > 0; o >>= 1) v += __shfl_xor_sync(WEFT_FULL_MASK, v, o);
  return v;
}

// NaN-propagating max (torch.amax): fmaxf would drop a NaN.
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a) ? a : ((b != b || b > a) ? b : a); }

__device__ __forceinline__ float neg_inf() { return __int_as_float(static_cast<int>(0xff800000u)); }

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = WEFT_WARP_THREADS / 2; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(WEFT_FULL_MASK, v, o));
  return v;
}

// Softmax helpers of attention, called by one whole warp on sc[0, n) in shared memory.
// The NaN-propagating max of sc[0, n); every lane gets it.
__device__ __forceinline__ float warp_max_of(const float* sc, long long n) {
  float mx = neg_inf();
  for (long long t = lane(); t < n; t += WEFT_WARP_THREADS) mx = nan_max(mx, sc[t]);
  return warp_max(mx);
}
// Replaces sc[t] by exp(sc[t] - m) and returns their sum; every lane gets it.
__device__ __forceinline__ float warp_exp_sum(float* sc, long long n, float m) {
  float sum = 0.0f;
  for (long long t = lane(); t < n; t += WEFT_WARP_THREADS) {
    const float e = expf(sc[t] - m);
    sc[t] = e;
    sum += e;
  }
  return warp_sum(sum);
}

// Sum within groups of `width` lanes (a power of two <= 32) aligned to multiples of width.
__device__ __forceinline__ float group_sum(float v, int width) {
  for (int o = width / 2; o > 0; o >>= 1) v += __shfl_xor_sync(WEFT_FULL_MASK, v, o);
  return v;
}

// Block-wide reductions over all WEFT_BLOCK_THREADS threads; every thread gets the result. `scratch` holds
// WEFT_BLOCK_WARPS floats of shared memory; the leading barrier makes back-to-back calls safe.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  block_sync();
  if (lane() == 0) scratch[warp()] = v;
  block_sync();
  return warp_sum(lane() < WEFT_BLOCK_WARPS ? scratch[lane()] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  block_sync();
  if (lane() == 0) scratch[warp()] = v;
  block_sync();
  return warp_max(lane() < WEFT_BLOCK_WARPS ? scratch[lane()] : neg_inf());
}

// Sum over a group that is either one warp (block == false) or the whole block.
template <bool kBlock>
__device__ __forceinline__ float group_reduce_sum(float v, float* scratch) {
  return kBlock ? block_sum(v, scratch) : warp_sum(v);
}
template <bool kBlock>
__device__ __forceinline__ float group_reduce_max(float v, float* scratch) {
  return kBlock ? block_max(v, scratch) : warp_max(v);
}

// ---- copies ----

template <typename U>
__device__ __forceinline__ void copy_units(char* dst, const char* src, i64 n_units, int t, int nt) {
  U* d = reinterpret_cast<U*>(dst);
  const U* s = reinterpret_cast<const U*>(src);
  for (i64 k = t; k < n_units; k += nt) d[k] = s[k];
}

// Copies `bytes` bytes (a whole number of `esize`-byte elements; both pointers aligned to esize) with threads
// t, t+nt, ...: the widest access both pointers' alignment allows, then the tail element by element.
__device__ inline void copy_bytes(void* dst_v, const void* src_v, i64 bytes, int esize, int t, int nt) {
  char* dst = static_cast<char*>(dst_v);
  const char* src = static_cast<const char*>(src_v);
  const u64 al = reinterpret_cast<u64>(dst) | reinterpret_cast<u64>(src);
  const int unit = (al & 15u) == 0 ? 16 : (al & 7u) == 0 ? 8 : (al & 3u) == 0 ? 4 : 2;
  const int u = unit > esize ? unit : esize;  // pointers are at least esize-aligned
  const i64 n_units = bytes / u;
  switch (u) {
    case 16: copy_units<uint4>(dst, src, n_units, t, nt); break;
    case 8: copy_units<unsigned long long>(dst, src, n_units, t, nt); break;
    case 4: copy_units<unsigned int>(dst, src, n_units, t, nt); break;
    default: copy_units<unsigned short>(dst, src, n_units, t, nt); break;
  }
  const i64 done = n_units * u;
  const i64 tail = (bytes - done) / esize;  // < 16 bytes
  switch (esize) {
    case 8: copy_units<unsigned long long>(dst + done, src + done, tail, t, nt); break;
    case 4: copy_units<unsigned int>(dst + done, src + done, tail, t, nt); break;
    default: copy_units<unsigned short>(dst + done, src + done, tail, t, nt); break;
  }
}

// Zeros `bytes` bytes (a whole number of esize-byte elements at an esize-aligned address).
__device__ inline void zero_bytes(void* dst_v, i64 bytes, int esize, int t, int nt) {
  char* dst = static_cast<char*>(dst_v);
  i64 done = 0;
  if (aligned16(dst)) {
    const i64 n16 = bytes / 16;
    for (i64 k = t; k < n16; k += nt) reinterpret_cast<uint4*>(dst)[k] = make_uint4(0u, 0u, 0u, 0u);
    done = n16 * 16;
  }
  const i64 n = (bytes - done) / esize;
  switch (esize) {
    case 8: for (i64 k = t; k < n; k += nt) reinterpret_cast<unsigned long long*>(dst + done)[k] = 0ull; break;
    case 4: for (i64 k = t; k < n; k += nt) reinterpret_cast<unsigned int*>(dst + done)[k] = 0u; break;
    default: for (i64 k = t; k < n; k += nt) reinterpret_cast<unsigned short*>(dst + done)[k] = 0u; break;
  }
}

__device__ __forceinline__ int dtype_size(int dtype) {
  return dtype == WEFT_DEV_F32 || dtype == WEFT_DEV_I32 ? 4 : dtype == WEFT_DEV_I64 ? 8 : 2;
}

// An integer tensor element (positions, ids) of dtype i32 or i64.
__device__ __forceinline__ i64 load_int(const void* p, int dtype, i64 k) {
  return dtype == WEFT_DEV_I32 ? static_cast<i64>(static_cast<const int*>(p)[k]) : static_cast<const i64*>(p)[k];
}

// ---- tile geometry ----
// Visits the tile [row0,row1) x [col0,col1) of a row-major [*, C] view as contiguous spans of flat indices:
// one span when the tile covers whole rows, else one per row. fn(flat_begin, count).
template <typename Fn>
__device__ __forceinline__ void for_each_span(const weft_task_args* a, i64 cols, Fn fn) {
  if (a->row1 <= a->row0 || a->col1 <= a->col0) return;
  if (a->col0 == 0 && a->col1 == cols) {
    fn(a->row0 * cols, (a->row1 - a->row0) * cols);
    return;
  }
  for (i64 r = a->row0; r < a->row1; ++r) fn(r * cols + a->col0, a->col1 - a->col0);
}

}  // namespace weft_dev

// Calls body<T>() with T the float type of `dtype` (bf16, f16 or f32); other codes do nothing.
#define WEFT_DISPATCH_FLOAT(dtype, FN, ...)                                   \
  do {                                                                        \
    switch (dtype) {                                                          \
      case WEFT_DEV_BF16: FN<weft_dev::bf16>(__VA_ARGS__); break;             \
      case WEFT_DEV_F16: FN<weft_dev::f16>(__VA_ARGS__); break;               \
      case WEFT_DEV_F32: FN<float>(__VA_ARGS__); break;                       \
      default: break;                                                         \
    }                                                                         \
  } while (0)

// Starts the definition of device op f: weft_dev::op_f(a, env, smem), run by all WEFT_BLOCK_THREADS threads of
// the block, inlined into the task loop (task_loop.cuh). It computes the task's output tile and uses at most
// WEFT_SMEM_BYTES of smem (16-byte aligned dynamic shared memory).
#define WEFT_DEV_OP_BODY(f) \
  __device__ __forceinline__ void weft_dev::op_##f(const weft_task_args* a, const weft_env* env, char* smem)

namespace weft_dev {
#define WEFT_DECLARE_DEV_OP(E, f) \
  __device__ __forceinline__ void op_##f(const weft_task_args* a, const weft_env* env, char* smem);
WEFT_DEV_OP_LIST(WEFT_DECLARE_DEV_OP)
#undef WEFT_DECLARE_DEV_OP
}  // namespace weft_dev

#endif  // WEFT_DEVICE_COMMON_CUH
