// Microbenchmarks of the batch-1 GEMV's building blocks, outside the megakernel: what one SM can do with a
// bf16 weight stream when nothing else (the task loop's registers, waits, other ops) is in the way. A decode
// step's ops are measured inside the megakernel by bench/ab_decode.py --trace; this isolates the parts.
//
//   stream   every SM streams its share of a 1 GiB weight matrix through a per-warp cp.async ring (2 KiB stages,
//            S slots, S - 1 in flight), one x row: the steady-state rate of gemv_stream.cuh's loop, by ring depth.
//   consume  the weights already in shared memory (4 rows of K per warp, 128 KiB per SM): the dot products alone,
//            one row at a time (gemv_stream.cuh's order) or 2 / 4 rows interleaved, cycles per SM, as GB/s/SM.
//   land     every SM requests P bytes into shared memory at once (cp.async by all threads, or one bulk copy
//            per warp and chunk on an mbarrier) and waits: the time to issue and to land, all SMs together.
//   queue    every SM (or one) requests P bytes, then times 4 dependent acquire loads of a flag in L2 (a task's
//            poll of its event): whether the SM's own requests in flight delay its latency-bound loads.
//   l2       one 96 KiB tile per SM (Qwen3-0.6B's gate/up) streamed as `stream` does, from HBM, from L2, and after
//            an L2 prefetch of it: what requesting a later op's weights into L2 could save its tiles.
//
// In-kernel times are SM cycles converted at the maximum SM clock.
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o gemv_micro bench/gemv_micro.cu && ./gemv_micro
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>


constexpr int kThreads = 256, kWarps = kThreads / 32, kStageBytes = 2048, kUnits = 4;

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
// SM cycles (the global timer ticks too coarsely here, ~1 us); converted to us at the SM clock by the host.
__device__ __forceinline__ unsigned long long cycles() { return static_cast<unsigned long long>(clock64()); }
__device__ __forceinline__ void unpack(uint4 u, float* f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- stream: rows [warp's run) of W (K bf16 each) dotted with x, through an S-slot ring per warp.
template <int S>
__global__ void __launch_bounds__(kThreads, 1) stream_kernel(const __nv_bfloat16* w, const __nv_bfloat16* x, int k,
                                                             int rows_per_warp, float* y, long long* cyc = nullptr) {
  extern __shared__ __align__(16) char smem[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem + kWarps * S * kStageBytes);
  for (int i = threadIdx.x * 8; i < k; i += kThreads * 8) *reinterpret_cast<uint4*>(xs + i) = *reinterpret_cast<const uint4*>(x + i);
  __syncthreads();
  const long long t0 = clock64();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, spr = k * 2 / kStageBytes;
  const long long row0 = (static_cast<long long>(blockIdx.x) * kWarps + warp) * rows_per_warp;
  char* ring = smem + warp * S * kStageBytes;
  const int total = rows_per_warp * spr;
  auto issue = [&](int s) {
    if (s < total) {
      const char* src = reinterpret_cast<const char*>(w + (row0 + s / spr) * k) + (s % spr) * kStageBytes + lane * 16;
      const unsigned dst = smem_u32(ring + (s % S) * kStageBytes) + lane * 16;
#pragma unroll
      for (int i = 0; i < kUnits; ++i) cp_async16(dst + i * 512, src + i * 512);
    }
    commit();
  };
  for (int s = 0; s < S - 1; ++s) issue(s);
  float acc = 0.0f;
  for (int s = 0; s < total; ++s) {
    issue(s + S - 1);
    wait_groups<S - 1>();
    const char* mine = ring + (s % S) * kStageBytes + lane * 16;
    const __nv_bfloat16* xc = xs + (s % spr) * (kStageBytes / 2) + lane * 8;
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      float wv[8], xv[8];
      unpack(*reinterpret_cast<const uint4*>(mine + i * 512), wv);
      unpack(*reinterpret_cast<const uint4*>(xc + i * 256), xv);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc = fmaf(xv[e], wv[e], acc);
    }
    if (s % spr == spr - 1) {
      const float v = warp_sum(acc);
      acc = 0.0f;
      if (lane == 0) y[row0 + s / spr] = v;
    }
  }
  wait_groups<0>();
  if (cyc) {
    __syncthreads();
    if (threadIdx.x == 0) cyc[blockIdx.x] = clock64() - t0;
  }
}

// ---- l2: every line of [w, w + bytes) requested into L2 by all blocks, one 128-byte prefetch per thread and line,
// or (bulk) one cp.async.bulk.prefetch.L2 of 4 KiB per warp and chunk; then a kernel that spins `ns` so they land.
__global__ void __launch_bounds__(kThreads, 1) prefetch_kernel(const char* w, long long bytes, int bulk) {
  if (bulk) {
    const long long warps = static_cast<long long>(gridDim.x) * kWarps, wi = blockIdx.x * kWarps + threadIdx.x / 32;
    if (threadIdx.x % 32 == 0)
      for (long long off = wi * 4096; off < bytes; off += warps * 4096)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], 4096;" ::"l"(w + off) : "memory");
    return;
  }
  for (long long off = (static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x) * 128; off < bytes;
       off += static_cast<long long>(gridDim.x) * kThreads * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(w + off));
}
__global__ void spin_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) __nanosleep(100);
}

// ---- consume: the warp's rows already in shared memory in the ring's layout (stage s of row r at
// (r * spr + s) * 2 KiB, lane j's units at j * 16 + i * 512); G rows' dot products interleaved.
template <int G>
__global__ void __launch_bounds__(kThreads, 1) consume_kernel(const __nv_bfloat16* w, const __nv_bfloat16* x, int k,
                                                              int rows_per_warp, int reps, float* y,
                                                              long long* cycles) {
  extern __shared__ __align__(16) char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, spr = k * 2 / kStageBytes;
  const int warp_bytes = rows_per_warp * k * 2;
  char* mine_base = smem + warp * warp_bytes;
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem + kWarps * warp_bytes);
  const long long row0 = (static_cast<long long>(blockIdx.x) * kWarps + warp) * rows_per_warp;
  for (int i = lane * 16; i < warp_bytes; i += 512)
    *reinterpret_cast<uint4*>(mine_base + i) = *reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(w + row0 * k) + i);
  for (int i = threadIdx.x * 8; i < k; i += kThreads * 8) *reinterpret_cast<uint4*>(xs + i) = *reinterpret_cast<const uint4*>(x + i);
  __syncthreads();
  const long long t0 = clock64();
  float total = 0.0f;
  for (int rep = 0; rep < reps; ++rep) {
    for (int r = 0; r < rows_per_warp; r += G) {
      float acc[G];
#pragma unroll
      for (int g = 0; g < G; ++g) acc[g] = 0.0f;
      for (int s = 0; s < spr; ++s) {
        const __nv_bfloat16* xc = xs + s * (kStageBytes / 2) + lane * 8;
#pragma unroll
        for (int i = 0; i < kUnits; ++i) {
          float xv[8];
          unpack(*reinterpret_cast<const uint4*>(xc + i * 256), xv);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            float wv[8];
            unpack(*reinterpret_cast<const uint4*>(mine_base + ((r + g) * spr + s) * kStageBytes + lane * 16 + i * 512), wv);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc[g] = fmaf(xv[e], wv[e], acc[g]);
          }
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float v = warp_sum(acc[g]);
        total += v;
        if (lane == 0 && rep == 0) y[row0 + r + g] = v;
      }
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  if (total == 12345.678f) y[0] = total;  // keeps the repetitions
}

// A warp's mbarrier (one arrival: lane 0's, with the bytes to expect) and the bulk copies completing on it.
__device__ __forceinline__ void bar_init(unsigned bar) {
  asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(bar));
  asm volatile("fence.mbarrier_init.release.cluster;");
}
// [dst, dst + bytes) from src in copies of at most `chunk` bytes, completing on bar (lane 0 only).
__device__ __forceinline__ void bulk_request(unsigned dst, const char* src, int bytes, int chunk, unsigned bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  for (int off = 0; off < bytes; off += chunk)
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst + off),
                 "l"(src + off), "r"(min(chunk, bytes - off)), "r"(bar)
                 : "memory");
}
// The calling warp's mbarrier, initialized by its lane 0; every thread of the block calls it (it has a barrier).
__device__ __forceinline__ unsigned warp_bar() {
  __shared__ __align__(8) unsigned long long bar[kWarps];
  const unsigned b32 = smem_u32(&bar[threadIdx.x / 32]);
  if (threadIdx.x % 32 == 0) bar_init(b32);
  __syncthreads();
  return b32;
}
__device__ __forceinline__ void bar_wait(unsigned bar) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar)
                 : "memory");
}

// ---- land: P bytes per SM requested at once; t[2 * block + {0,1}] = cycles to issue, cycles to land.
__global__ void __launch_bounds__(kThreads, 1) land_cp_async(const char* w, int bytes, unsigned long long* t) {
  extern __shared__ __align__(16) char smem[];
  const char* src = w + static_cast<long long>(blockIdx.x) * bytes;
  __syncthreads();
  const unsigned long long a = cycles();
  for (int i = threadIdx.x * 16; i < bytes; i += kThreads * 16) cp_async16(smem_u32(smem + i), src + i);
  commit();
  const unsigned long long b = cycles();
  wait_groups<0>();
  __syncthreads();
  const unsigned long long c = cycles();
  if (threadIdx.x == 0) {
    t[2 * blockIdx.x] = b - a;
    t[2 * blockIdx.x + 1] = c - a;
  }
}

__global__ void __launch_bounds__(kThreads, 1) land_bulk(const char* w, int bytes, int chunk, unsigned long long* t) {
  extern __shared__ __align__(16) char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, per_warp = bytes / kWarps;
  const unsigned b32 = warp_bar();
  const char* src = w + static_cast<long long>(blockIdx.x) * bytes + warp * per_warp;
  const unsigned long long a = cycles();
  if (lane == 0) bulk_request(smem_u32(smem + warp * per_warp), src, per_warp, chunk, b32);
  const unsigned long long b = cycles();
  bar_wait(b32);
  __syncthreads();
  const unsigned long long c = cycles();
  if (threadIdx.x == 0) {
    t[2 * blockIdx.x] = b - a;
    t[2 * blockIdx.x + 1] = c - a;
  }
}

// ---- queue: P bytes per SM requested (cp.async by all threads, or bulk copies by lane 0 of each warp), then
// thread 0 times 4 dependent acquire loads of a flag in L2 (a task's poll of its event): does a prefetch in flight
// delay the SM's own latency-bound loads behind it? t[4 * block + {0..3}] = cycles of each load.
__global__ void __launch_bounds__(kThreads, 1) queue_kernel(const char* w, int bytes, int bulk, const unsigned* flag,
                                                            unsigned long long* t) {
  extern __shared__ __align__(16) char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, per_warp = bytes / kWarps;
  const unsigned b32 = warp_bar();
  const char* src = w + static_cast<long long>(blockIdx.x) * bytes;
  if (bytes > 0 && !bulk) {
    for (int i = threadIdx.x * 16; i < bytes; i += kThreads * 16) cp_async16(smem_u32(smem + i), src + i);
    commit();
  } else if (bytes > 0 && lane == 0) {
    bulk_request(smem_u32(smem + warp * per_warp), src + warp * per_warp, per_warp, 16384, b32);
  }
  if (threadIdx.x == 0) {
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned long long a = cycles();
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag + (v & 1) * 64) : "memory");
      // Read once v has arrived (a branch on it): the time to issue the load and for its value to return.
      unsigned long long b = a;
      if (v != 0xffffffffu) b = cycles();
      t[4 * blockIdx.x + i] = b - a;
    }
  }
  if (bytes > 0 && !bulk) wait_groups<0>();
  if (bytes > 0 && bulk) bar_wait(b32);
  __syncthreads();
}


template <int S>
static void run_stream(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y, int sms, int k, int rpw) {
  const int smem = kWarps * S * kStageBytes + k * 2;
  CHECK(cudaFuncSetAttribute(stream_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int it = 0; it < 23; ++it) {
    CHECK(cudaEventRecord(e0));
    stream_kernel<S><<<sms, kThreads, smem>>>(w, x, k, rpw, y);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (it >= 3) ms.push_back(t);
  }
  const double bytes = static_cast<double>(sms) * kWarps * rpw * k * 2, t = median(ms);
  std::printf("| stream | ring %d slots (%d KiB per SM, %d in flight) | %.3f ms | %.2f TB/s | %.1f GB/s per SM |\n", S,
              S * kWarps * kStageBytes / 1024, S - 1, t, bytes / t / 1e9, bytes / t / 1e6 / sms);
}

template <int G>
static void run_consume(const __nv_bfloat16* w, const __nv_bfloat16* x, float* y, long long* cyc, int sms, int k,
                        int rpw, double ghz) {
  const int smem = kWarps * rpw * k * 2 + k * 2, reps = 50;
  CHECK(cudaFuncSetAttribute(consume_kernel<G>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::vector<float> per;
  for (int it = 0; it < 5; ++it) {
    consume_kernel<G><<<sms, kThreads, smem>>>(w, x, k, rpw, reps, y, cyc);
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<long long> c(sms);
  CHECK(cudaMemcpy(c.data(), cyc, sms * sizeof(long long), cudaMemcpyDeviceToHost));
  for (long long v : c) per.push_back(static_cast<float>(v) / reps);
  const double bytes = static_cast<double>(kWarps) * rpw * k * 2, cy = median(per);
  std::printf("| consume | %d row(s) at a time, %d rows of K %d per warp (%d KiB per SM) | %.0f cycles | %.2f us at %.2f GHz | %.1f GB/s per SM |\n",
              G, rpw, k, static_cast<int>(bytes / 1024), cy, cy / ghz / 1e3, ghz, bytes / (cy / ghz));
}

static void report_land(const char* what, int bytes, const unsigned long long* dt, int sms, double ghz) {
  std::vector<float> issue, land;
  for (int b = 0; b < sms; ++b) {
    issue.push_back(static_cast<float>(dt[2 * b] / ghz / 1e3));
    land.push_back(static_cast<float>(dt[2 * b + 1] / ghz / 1e3));
  }
  std::printf("| land | %s, %d KiB per SM | issue %.2f us | landed %.2f us (median), %.2f (slowest) | %.1f GB/s per SM |\n", what,
              bytes / 1024, median(issue), median(land), *std::max_element(land.begin(), land.end()),
              bytes / median(land) / 1e3);
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CHECK(cudaSetDevice(dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, max SM clock %.2f GHz\n\n", prop.name, sms, clock_khz / 1e6);
  const size_t wbytes = size_t(1) << 30;
  __nv_bfloat16* w;
  CHECK(cudaMalloc(&w, wbytes));
  {  // random bf16 in [-1, 1)
    std::vector<__nv_bfloat16> h(wbytes / 2);
    unsigned s = 12345u;
    for (auto& v : h) {
      s = s * 1664525u + 1013904223u;
      v = __float2bfloat16(static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
    }
    CHECK(cudaMemcpy(w, h.data(), wbytes, cudaMemcpyHostToDevice));
  }
  const int k = 2048;
  __nv_bfloat16* x;
  float* y;
  long long* cyc;
  unsigned long long* dt;
  CHECK(cudaMalloc(&x, k * 2));
  CHECK(cudaMemcpy(x, w + 4096, k * 2, cudaMemcpyDeviceToDevice));
  CHECK(cudaMalloc(&y, wbytes / k / 2 * sizeof(float)));
  CHECK(cudaMalloc(&cyc, sms * sizeof(long long)));
  CHECK(cudaMalloc(&dt, 4 * sms * sizeof(unsigned long long)));

  std::printf("| kind | variant | time | rate | per SM |\n|---|---|---|---|---|\n");
  const int rpw = static_cast<int>(wbytes / (static_cast<size_t>(sms) * kWarps * k * 2));
  run_stream<4>(w, x, y, sms, k, rpw);
  run_stream<6>(w, x, y, sms, k, rpw);
  run_stream<8>(w, x, y, sms, k, rpw);
  run_stream<4>(w, x, y, sms, k, rpw);

  // Cycles are converted at the maximum SM clock (the decode traces show the SMs at it, ~1.98 GHz on an H200).
  const double ghz = clock_khz / 1e6;
  run_consume<1>(w, x, y, cyc, sms, k, 4, ghz);
  run_consume<2>(w, x, y, cyc, sms, k, 4, ghz);
  run_consume<4>(w, x, y, cyc, sms, k, 4, ghz);
  run_consume<1>(w, x, y, cyc, sms, k, 4, ghz);

  const int sizes[] = {48 * 1024, 96 * 1024, 144 * 1024};
  size_t rot = 0;
  for (int bytes : sizes) {
    CHECK(cudaFuncSetAttribute(land_cp_async, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    CHECK(cudaFuncSetAttribute(land_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    std::vector<unsigned long long> h(2 * sms);
    auto next_src = [&]() {  // a region no earlier launch read lately, so the bytes come from HBM
      rot = (rot + static_cast<size_t>(sms) * bytes + 4096) % (wbytes - static_cast<size_t>(sms) * 160 * 1024);
      return reinterpret_cast<const char*>(w) + (rot & ~size_t(4095));
    };
    for (int it = 0; it < 3; ++it) land_cp_async<<<sms, kThreads, bytes>>>(next_src(), bytes, dt);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h.data(), dt, h.size() * 8, cudaMemcpyDeviceToHost));
    report_land("cp.async 16 B, all threads", bytes, h.data(), sms, ghz);
    for (int chunk : {4096, 16384, 0}) {
      const int c = chunk ? chunk : bytes / kWarps;
      for (int it = 0; it < 3; ++it) land_bulk<<<sms, kThreads, bytes>>>(next_src(), bytes, c, dt);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(h.data(), dt, h.size() * 8, cudaMemcpyDeviceToHost));
      char what[96];
      std::snprintf(what, sizeof what, "bulk copies of %d KiB, lane 0 of each warp", c / 1024);
      report_land(what, bytes, h.data(), sms, ghz);
    }
  }

  {  // a flag in L2; every block polls it after requesting its prefetch
    unsigned* flag;
    CHECK(cudaMalloc(&flag, 4096));
    CHECK(cudaMemset(flag, 0, 4096));
    std::printf("\n| queue | prefetch in flight per SM | blocks | acquire load 1 | load 2 | load 3 | load 4 |\n|---|---|---|---|---|---|---|\n");
    size_t off = 0;
    for (int blocks : {sms, 1}) {
      for (int cfg = 0; cfg < 5; ++cfg) {
        const int bytes = cfg == 0 ? 0 : cfg == 1 ? 48 * 1024 : cfg == 2 ? 112 * 1024 : 112 * 1024;
        const int bulk = cfg >= 3;
        const int b = cfg == 4 ? 48 * 1024 : bytes;
        CHECK(cudaFuncSetAttribute(queue_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024));
        std::vector<float> l[4];
        for (int it = 0; it < 7; ++it) {
          off = (off + static_cast<size_t>(sms) * 128 * 1024 + 4096) % (wbytes - static_cast<size_t>(sms) * 160 * 1024);
          queue_kernel<<<blocks, kThreads, 128 * 1024>>>(reinterpret_cast<const char*>(w) + (off & ~size_t(4095)), b, bulk, flag, dt);
          CHECK(cudaDeviceSynchronize());
          std::vector<unsigned long long> h(4 * blocks);
          CHECK(cudaMemcpy(h.data(), dt, h.size() * 8, cudaMemcpyDeviceToHost));
          if (it < 2) continue;
          for (int bl = 0; bl < blocks; ++bl)
            for (int i = 0; i < 4; ++i) l[i].push_back(static_cast<float>(h[4 * bl + i] / ghz / 1e3));
        }
        std::printf("| queue | %s %d KiB | %d | %.2f us | %.2f us | %.2f us | %.2f us |\n",
                    b == 0 ? "none" : bulk ? "bulk 16 KiB copies" : "cp.async", b / 1024, blocks, median(l[0]),
                    median(l[1]), median(l[2]), median(l[3]));
      }
    }
  }
  {  // l2: one Qwen3-0.6B gate/up tile per SM (K 1024, 6 rows per warp: 96 KiB) streamed from HBM, after the same
     // kernel read it (L2), and after an L2 prefetch of it (prefetch.global.L2, or bulk) and 20 us to land
    const int k2 = 1024, rpw2 = 6;
    const size_t region = static_cast<size_t>(sms) * kWarps * rpw2 * k2 * 2;
    char* flush;
    const size_t flush_bytes = size_t(256) << 20;
    CHECK(cudaMalloc(&flush, flush_bytes));
    constexpr int S = 4;
    const int smem2 = kWarps * S * kStageBytes + k2 * 2;
    CHECK(cudaFuncSetAttribute(stream_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem2));
    std::printf("\n| l2 | a 96 KiB tile per SM | median | slowest SM | per SM (median) |\n|---|---|---|---|---|\n");
    size_t off = 0;
    const char* names[] = {"from HBM (cold)", "from L2 (read just before)", "after prefetch.global.L2 + 20 us",
                           "after cp.async.bulk.prefetch.L2 + 20 us", "from HBM (cold), again"};
    for (int mode = 0; mode < 5; ++mode) {
      std::vector<float> med, mx;
      for (int it = 0; it < 9; ++it) {
        off = (off + region + 4096) % (wbytes - region - 4096);
        const __nv_bfloat16* src = reinterpret_cast<const __nv_bfloat16*>(reinterpret_cast<const char*>(w) + (off & ~size_t(4095)));
        CHECK(cudaMemset(flush, it, flush_bytes));  // evicts the region from L2
        if (mode == 1) stream_kernel<S><<<sms, kThreads, smem2>>>(src, x, k2, rpw2, y);
        if (mode == 2 || mode == 3) prefetch_kernel<<<sms, kThreads>>>(reinterpret_cast<const char*>(src), static_cast<long long>(region), mode == 3);
        spin_kernel<<<1, 32>>>(static_cast<long long>(20e3 * ghz));
        stream_kernel<S><<<sms, kThreads, smem2>>>(src, x, k2, rpw2, y, cyc);
        CHECK(cudaDeviceSynchronize());
        std::vector<long long> h(sms);
        CHECK(cudaMemcpy(h.data(), cyc, sms * sizeof(long long), cudaMemcpyDeviceToHost));
        if (it < 2) continue;
        std::vector<float> us(sms);
        for (int b = 0; b < sms; ++b) us[b] = static_cast<float>(h[b] / ghz / 1e3);
        med.push_back(median(us));
        mx.push_back(*std::max_element(us.begin(), us.end()));
      }
      const float m = median(med);
      std::printf("| l2 | %s | %.2f us | %.2f us | %.1f GB/s |\n", names[mode], m, median(mx),
                  region / static_cast<double>(sms) / (m * 1e3));
    }
    CHECK(cudaFree(flush));
  }
  CHECK(cudaGetLastError());
  return 0;
}
