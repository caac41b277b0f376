// What the standalone GPU microbenchmarks of bench/ (*_micro.cu) share: a CUDA error check that exits with the
// failing call, the median of a sample, the global timer, the memory-order primitives of the megakernel's events and
// its plain op boundary as a chain (counter_chain).
#ifndef WEFT_BENCH_MICRO_COMMON_CUH
#define WEFT_BENCH_MICRO_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// Prints the device's name and SM count (the first line of every micro's output) and returns the SM count.
inline int print_device() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n\n", prop.name, sms);
  return sms;
}

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The device-to-device copy bandwidth in TB/s, as bench/decode.py measures it: 2 x 1 GiB over the median time of
// `reps` copies after the first `warmup` (CUDA events).
inline double copy_bandwidth_tbs(int reps = 6, int warmup = 1) {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float m = 0.0f;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    if (r >= warmup) ms.push_back(m);
  }
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * bytes / (median(ms) * 1e-3) / 1e12;
}

constexpr int kMicroThreads = 256;

// A launch of `blocks` blocks of kMicroThreads in clusters of `cluster` blocks with `smem` bytes of dynamic shared
// memory (cudaLaunchKernelEx, cudaOccupancyMaxActiveClusters); `attr` holds the cluster attribute and must outlive it.
inline cudaLaunchConfig_t cluster_config(int blocks, int cluster, int smem, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kMicroThreads);
  cfg.dynamicSmemBytes = smem;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// bf16 arithmetic of the GEMV-shaped micros: the two bf16 halves of a 32-bit word as floats, a float rounded to bf16
// and back, a warp's sum.
namespace micro {
__device__ __forceinline__ float bf_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
}  // namespace micro

// Nanoseconds on the GPU's global timer (the same clock on every SM, so blocks and launches can be lined up).
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 16 bytes of a weight streamed once: no L1 allocation, the L2 policy `policy` (evict_first()).
__device__ __forceinline__ uint4 ld_weight(const void* p, unsigned long long policy) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p), "l"(policy));
  return r;
}
// An L2 policy that evicts the lines it loads first (the megakernel's weight stream's).
__device__ __forceinline__ unsigned long long evict_first() {
  unsigned long long p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// 16 bytes of 32-bit words at GPU scope: relaxed loads, or acquires (each invalidates the SM's L1 after it).
#define WEFT_MICRO_LD_V4(SEM)                                                                           \
  uint4 v;                                                                                             \
  asm volatile("ld." SEM ".gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"                                  \
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                                           \
               : "l"(p)                                                                               \
               : "memory");                                                                           \
  return v;
__device__ __forceinline__ uint4 ld_relaxed_v4(const unsigned* p) { WEFT_MICRO_LD_V4("relaxed") }
__device__ __forceinline__ uint4 ld_acquire_v4(const unsigned* p) { WEFT_MICRO_LD_V4("acquire") }
#undef WEFT_MICRO_LD_V4
__device__ __forceinline__ void st_relaxed(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// A release fence at GPU scope: what this thread did before it is visible to whoever sees what it does after.
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Thread polls *c with acquire loads until it reaches target (wrapping), backing off as weft_poll_event does; or
// (relaxed) with relaxed loads and one acquire fence after the last (MEMBAR.ALL.GPU: it waits for the thread's own
// loads in flight, so it pays only where the poller's warp has none).
__device__ __forceinline__ void wait_counter(const unsigned* c, unsigned target, bool relaxed = false) {
  unsigned ns = 16;
  while (static_cast<int>((relaxed ? ld_relaxed(c) : ld_acquire(c)) - target) < 0) {
    __nanosleep(ns);
    if (ns < 256) ns *= 2;
  }
  if (relaxed) fence_acq_rel_gpu();
}

// A decode task's prologue: `bytes` of a large weight buffer `src` (`src_bytes`, far past L2) requested into dynamic
// shared memory (half i % 2 of 2 * bytes) by cp.async from every thread, the block's share for boundary i.
// flood_drain(lazy) lands it at the end of the boundary, or (lazy) lands the previous boundary's, so that the
// weights stream on through the next handoff as a decode step's do.
// Threads below `first` issue none of it (a poller whose own warp has nothing in flight: cluster_handoff_micro.cu).
__device__ __forceinline__ void flood_issue(const char* src, long long src_bytes, int bytes, int i, int first = 0) {
  if (bytes <= 0) return;
  extern __shared__ __align__(16) char flood_smem[];
  const long long base = ((static_cast<long long>(i) * gridDim.x + blockIdx.x) * bytes) % src_bytes;
  if (static_cast<int>(threadIdx.x) < first) {
    asm volatile("cp.async.commit_group;" ::: "memory");  // an empty group: flood_drain's counts stay right
    return;
  }
  for (int o = (threadIdx.x - first) * 16; o < bytes; o += (kMicroThreads - first) * 16) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(flood_smem + (i & 1) * bytes + o));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + base + o) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void flood_drain(bool lazy) {
  if (lazy) asm volatile("cp.async.wait_group 1;" ::: "memory");
  else asm volatile("cp.async.wait_group 0;" ::: "memory");
}

// The megakernel's op boundary with no arithmetic (sync.cuh's counter protocol), chained `iters` times:
// row: `n` bf16 (as u16) values; block b writes [b * per, (b + 1) * per). Each boundary i produces value
// (sum of the block's view of the previous row's first words + i) so the chain is a true dependency.
// flood_bytes > 0: after its release each block requests that much of `flood` (the next task's weight prologue,
// task_loop.cuh), so the poll and the row's loads queue behind it as a decode step's do. poll_mode 1: warp 0 (the
// poller's) requests none of the flood, the other warps all of it; 2: the same, polling relaxed with one acquire
// fence after (wait_counter).
__global__ void __launch_bounds__(kMicroThreads, 1) counter_chain(unsigned short* row, unsigned* counter, int n, int iters,
                                                             unsigned* sink, const char* flood = nullptr,
                                                             long long flood_src_bytes = 0, int flood_bytes = 0,
                                                             bool lazy = false, int poll_mode = 0) {
  __shared__ unsigned short xs[8192];
  const int per = (n + gridDim.x - 1) / gridDim.x;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned short* r = row + (i & 1) * n;  // two rows: boundary i writes one while nobody reads it
    for (int j = threadIdx.x; j < per; j += kMicroThreads) {
      const int e = blockIdx.x * per + j;
      if (e < n) r[e] = static_cast<unsigned short>(acc + i + j);
    }
    __syncthreads();
    if (threadIdx.x == 0) red_release_add(counter, 1u);
    flood_issue(flood, flood_src_bytes, flood_bytes, i, poll_mode > 0 ? 32 : 0);
    if (threadIdx.x == 0) wait_counter(counter, static_cast<unsigned>(gridDim.x) * (i + 1), poll_mode == 2);
    __syncthreads();
    for (int e = threadIdx.x * 8; e < n; e += kMicroThreads * 8) {
      // Coherent (not .nc) loads: the acquire before the barrier made the producers' stores visible.
      *reinterpret_cast<uint4*>(xs + e) = ld_relaxed_v4(reinterpret_cast<const unsigned*>(r + e));
    }
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

#endif  // WEFT_BENCH_MICRO_COMMON_CUH
