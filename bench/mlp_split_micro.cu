// Microbenchmarks of what a decoder MLP split over its intermediate dim (F) across the SMs would need, outside the
// megakernel: each SM computes gate/up for its slice of F, then that slice's share of the down projection for
// every output (a partial sum of the whole row), and the partial rows are added up across the SMs.
//
//   slice    every SM reads its K slice of a down weight [H, F] (row-major, as checkpoints hold it: a slice is a
//            few 16-byte units of each of H rows, 2F bytes apart) against the same bytes read contiguously (its
//            rows of the transposed weight [F, H]); several layers' weights in turn, so nothing is in L2. GB/s of
//            the whole GPU, and the slowest block's time per layer.
//   reduce   a chain of boundaries where every block adds a whole f32 row of partial sums into one accumulator
//            (red.global.add, 4 floats each), takes a ticket, and the block with the last ticket of the boundary
//            rounds the row to bf16, stores it, zeroes the accumulator and releases a counter that every block
//            polls before loading the row: the split's reduction and hand-off, against the megakernel's plain
//            hand-off (every block stores a slice of the row; bench/handoff_micro.cu's counter protocol).
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o mlp_split_micro bench/mlp_split_micro.cu && ./mlp_split_micro
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <cstdio>
#include <vector>

constexpr int kThreads = kMicroThreads;

__device__ __forceinline__ float dot8(uint4 u, float x) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) s += __uint_as_float(w[i] << 16) * x + __uint_as_float(w[i] & 0xffff0000u);
  return s;
}

// The slice of F (in 8-element chunks) block b owns: chunks spread evenly, the first ones taking one more.
__device__ __forceinline__ void chunk_range(int f, int b, int blocks, int& c0, int& c1) {
  const int chunks = f / 8, per = chunks / blocks, extra = chunks % blocks;
  c0 = b * per + (b < extra ? b : extra);
  c1 = c0 + per + (b < extra ? 1 : 0);
}

// mode 0: W [H, F] row-major, block b reads units [c0, c1) of every row (thread t: rows t, t + 256, ...).
// mode 1: Wt [F, H], block b reads rows [8 c0, 8 c1) whole (thread t: units t, t + 256, ... of the slice).
template <int kMode>
__global__ void __launch_bounds__(kThreads, 1) slice_kernel(const __nv_bfloat16* w, int h, int f, int layers,
                                                            float* sink, unsigned long long* cycles) {
  int c0, c1;
  chunk_range(f, blockIdx.x, gridDim.x, c0, c1);
  const unsigned long long policy = evict_first();
  float acc = 0.0f;
  const long long t0 = clock64();
  for (int l = 0; l < layers; ++l) {
    const __nv_bfloat16* wl = w + static_cast<size_t>(l) * h * f;
    if (kMode == 0) {
      // Thread t's items: (row t + 256 j, unit u) for j < rows per thread, u < units; 16 loads in flight at a time.
      const int units = c1 - c0, items = ((h - threadIdx.x + kThreads - 1) / kThreads) * units;
      for (int i0 = 0; i0 < items; i0 += 16) {
        uint4 v[16];
#pragma unroll
        for (int q = 0; q < 16; ++q) {
          const int i = i0 + q, r = threadIdx.x + (i / units) * kThreads, u = i % units;
          if (i < items) v[q] = ld_weight(wl + static_cast<size_t>(r) * f + (c0 + u) * 8, policy);
        }
#pragma unroll
        for (int q = 0; q < 16; ++q)
          if (i0 + q < items) acc += dot8(v[q], 1.0f + q);
      }
    } else {
      const int per_row = h / 8, total = (c1 - c0) * 8 * per_row;
      const __nv_bfloat16* base = wl + static_cast<size_t>(c0) * 8 * h;
      for (int e = threadIdx.x; e < total; e += kThreads * 16) {
        uint4 v[16];
#pragma unroll
        for (int u = 0; u < 16; ++u)
          if (e + u * kThreads < total) v[u] = ld_weight(base + static_cast<size_t>(e + u * kThreads) * 8, policy);
#pragma unroll
        for (int u = 0; u < 16; ++u)
          if (e + u * kThreads < total) acc += dot8(v[u], 1.0f + u);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
  sink[blockIdx.x * kThreads + threadIdx.x] = acc;
}

__device__ __forceinline__ unsigned atom_acq_rel_add(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void red_add_v4(float* p, float4 v) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}

// One boundary per iteration: every block's partial row (n floats, from what it loaded at the previous one) added
// into `accum`; the last ticket holder rounds, stores `row`, zeroes `accum` and releases `counter`.
__global__ void __launch_bounds__(kThreads, 1) reduce_chain(float* accum, unsigned short* row, unsigned* ticket,
                                                            unsigned* counter, int n, int iters, unsigned* sink) {
  __shared__ unsigned short xs[8192];
  __shared__ int last;
  unsigned acc = blockIdx.x;
  for (int i = 0; i < iters; ++i) {
    for (int e = threadIdx.x * 4; e < n; e += kThreads * 4)
      red_add_v4(accum + e, make_float4(acc + e, 1.0f, 2.0f, static_cast<float>(i)));
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();  // the block's adds land before its ticket
      const unsigned t = atom_acq_rel_add(ticket, 1u);
      last = (t + 1) % gridDim.x == 0;
    }
    __syncthreads();
    if (last) {
      for (int e = threadIdx.x * 4; e < n; e += kThreads * 4) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(accum + e));
        __stcg(reinterpret_cast<float4*>(accum + e), make_float4(0.f, 0.f, 0.f, 0.f));
        const __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
        uint2 out;
        out.x = *reinterpret_cast<const unsigned*>(&a);
        out.y = *reinterpret_cast<const unsigned*>(&b);
        *reinterpret_cast<uint2*>(row + e) = out;
      }
      __syncthreads();
      if (threadIdx.x == 0) red_release_add(counter, 1u);
    }
    if (threadIdx.x == 0) wait_counter(counter, i + 1);
    __syncthreads();
    for (int e = threadIdx.x * 8; e < n; e += kThreads * 8) *reinterpret_cast<uint4*>(xs + e) = __ldcg(reinterpret_cast<const uint4*>(row + e));
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

int main() {
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n\n", prop.name, sms);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  float* sink;
  unsigned long long* cyc;
  CHECK(cudaMalloc(&sink, sms * kThreads * 4));
  CHECK(cudaMalloc(&cyc, sms * 8));

  std::printf("| slice of F per SM | H x F, layers | GB/s (whole GPU) | slowest block per layer |\n|---|---|---|---|\n");
  struct Shape { const char* name; int h, f, layers; };
  for (const Shape s : {Shape{"Qwen3-0.6B", 1024, 3072, 28}, Shape{"Llama-3.2-1B", 2048, 8192, 16},
                        Shape{"Qwen3-8B", 4096, 12288, 8}}) {
    const size_t elems = static_cast<size_t>(s.h) * s.f * s.layers;
    __nv_bfloat16* w;
    CHECK(cudaMalloc(&w, elems * 2));
    CHECK(cudaMemset(w, 0x3c, elems * 2));
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<float> us, slow;
      for (int rep = 0; rep < 9; ++rep) {
        CHECK(cudaEventRecord(e0));
        if (mode == 0) slice_kernel<0><<<sms, kThreads>>>(w, s.h, s.f, s.layers, sink, cyc);
        else slice_kernel<1><<<sms, kThreads>>>(w, s.h, s.f, s.layers, sink, cyc);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        std::vector<unsigned long long> c(sms);
        CHECK(cudaMemcpy(c.data(), cyc, sms * 8, cudaMemcpyDeviceToHost));
        const unsigned long long mx = *std::max_element(c.begin(), c.end());
        if (rep > 0) {
          us.push_back(ms * 1e3f);
          slow.push_back(static_cast<float>(mx) / (clock_khz * 1e-3f) / s.layers);
        }
      }
      std::printf("| %s | %s %d x %d, %d | %.0f | %.2f us |\n", mode == 0 ? "units of each row of W [H, F]" : "rows of Wt [F, H]",
                  s.name, s.h, s.f, s.layers, elems * 2 / (median(us) * 1e3f), median(slow));
    }
    CHECK(cudaFree(w));
  }

  std::printf("\n| hand-off | row | blocks | per boundary |\n|---|---|---|---|\n");
  const int iters = 2000;
  float* accum;
  unsigned short* row;
  unsigned *ticket, *counter, *isink;
  CHECK(cudaMalloc(&accum, 8192 * 4));
  CHECK(cudaMalloc(&row, 2 * 8192 * 2));
  CHECK(cudaMalloc(&ticket, 4));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMalloc(&isink, sms * 4));
  for (int n : {1024, 2048, 4096}) {
    for (int proto = 0; proto < 2; ++proto) {
      std::vector<float> us;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaMemset(accum, 0, 8192 * 4));
        CHECK(cudaMemset(ticket, 0, 4));
        CHECK(cudaMemset(counter, 0, 4));
        CHECK(cudaEventRecord(e0));
        if (proto == 0) counter_chain<<<sms, kThreads>>>(row, counter, n, iters, isink);
        else reduce_chain<<<sms, kThreads>>>(accum, row, ticket, counter, n, iters, isink);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) us.push_back(ms * 1e3f / iters);
      }
      std::printf("| %s | %d | %d | %.3f us |\n",
                  proto == 0 ? "plain (slices stored, release add, acquire poll, load)"
                             : "reduce (f32 row added by every block, last ticket rounds and releases)",
                  n, sms, median(us));
    }
  }
  CHECK(cudaGetLastError());
  return 0;
}
