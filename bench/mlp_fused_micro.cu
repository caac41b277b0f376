// Microbenchmark: a chain of batch-1 decoder MLPs (gate/up, SwiGLU, down, residual; bf16 weights) on every SM, run
// the megakernel's way and fused, to price the gate/up -> down boundary as one layer's time, not as its parts.
//
//   two-op   the megakernel's way: gate/up's tiles (every block its slice of F, gate and up rows) store the
//            activations and release a counter; down's tiles (every block its rows of W [H, F]) poll it, load all F
//            activations, add the residual, store their outputs and release; the next layer's gate/up polls that.
//   fused    one op: every block computes gate/up and SwiGLU for its slice of F, then that slice's share of the down
//            projection for every output from the transposed weight (its rows of Wt [F, H], contiguous), and adds
//            the partial row into the layer's accumulator; a counter release, and the next layer's blocks read the
//            accumulator itself (no block rounds or republishes it), each adding it to its own copy of the residual.
//            Accumulators rotate over three buffers; a block zeroes its slice of the one two layers back (all its
//            readers are past it).
//   f32 / fx  the accumulator adds: red.add.v4.f32 (the order of the adds varies run to run) or red.add.u64 of
//            fixed-point values (2^-32 units: integer adds, so the sum is the same whatever the order); f32 into R
//            copies of the accumulator (block b into copy b mod R, readers add the R copies: 132 / R adds per word);
//            and no adds at all (wrong sums), which leaves what the adds cost.
//
// Round 27 (bench/mlp_split_micro.cu) priced the pieces apart — a strided K slice of W [H, F] reads at half the
// bandwidth, and a reduction whose last block rounds, stores and releases the row costs 2-3 us more than the plain
// hand-off — and did not build it (docs/perf.md). Here the next layer reads the accumulator directly and the down
// weight is the transposed one, in a whole chain with the weights streaming.
//
// Every weight load is a 16-byte ld.global.nc with L2::evict_first, 16 per lane in flight; before each wait a block
// asks L2 for the first `--prefetch` KiB (default 32) of its next weights (cp.async.bulk.prefetch.L2), as a task's
// prologue does. Time per layer = a launch's time over steps x layers (CUDA events, median of the launches after the
// first); the floor is the layer's weight bytes over a device-to-device copy's bandwidth measured in the same run.
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o mlp_fused_micro bench/mlp_fused_micro.cu && ./mlp_fused_micro [--prefetch 32]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kThreads = kMicroThreads;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxH = 4096, kMaxF = 12288;
constexpr unsigned long long kWatchdogNs = 2000000000ull;

enum Mode { kTwoOp = 0, kFusedF32 = 1, kFusedFixed = 2, kFusedNoAdds = 3, kFusedF32R4 = 4, kFusedF32R16 = 5 };
constexpr int kModes = 6;
constexpr int kMaxReplicas = 16;
// Copies of each accumulator that the f32 forms add into (block b into copy b mod R; readers add the R copies).
__host__ __device__ constexpr int replicas(int mode) { return mode == kFusedF32R4 ? 4 : mode == kFusedF32R16 ? 16 : 1; }

struct Params {
  const __nv_bfloat16* gu;    // per layer [2F, H]: gate rows, then up rows
  const __nv_bfloat16* down;  // per layer [H, F] (two-op) or, read as Wt [F, H], the fused op's
  int layers, steps;  // H and F are the kernel's template arguments
  int prefetch_bytes;
  __nv_bfloat16* x;    // two-op: [2][H] the residual stream, by layer parity
  __nv_bfloat16* act;  // two-op: [F]
  float* acc;          // fused f32: [3][R][H]
  unsigned long long* accx;  // fused fixed point: [3][H]
  unsigned* counter;
  unsigned* error;  // host-mapped: set where a wait ran past the watchdog
  float* sink;
};

__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
  if (bytes >= 16) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes & ~15) : "memory");
}
using micro::bf_hi;
using micro::bf_lo;
using micro::round_bf16;
using micro::warp_sum;
// 8 bf16 weights against 8 floats of x in shared memory.
__device__ __forceinline__ float dot8(uint4 u, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x), b = *reinterpret_cast<const float4*>(x + 4);
  return bf_lo(u.x) * a.x + bf_hi(u.x) * a.y + bf_lo(u.y) * a.z + bf_hi(u.y) * a.w + bf_lo(u.z) * b.x +
         bf_hi(u.z) * b.y + bf_lo(u.w) * b.z + bf_hi(u.w) * b.w;
}

// Rows [r0, r1) of a block's share of n rows, spread as evenly as integers allow.
__device__ __forceinline__ void share(int n, int part, int parts, int& r0, int& r1) {
  r0 = static_cast<int>(1ll * part * n / parts);
  r1 = static_cast<int>(1ll * (part + 1) * n / parts);
}

// The dot products of weight rows [r0, r1) of w (k bf16 each, k / 8 a multiple of 32) with x (k floats in shared
// memory) by one warp: lane l takes units l + 32 m of each row in turn, 16 loads in flight; each row's sum, added
// across the lanes, goes to out(row, sum) on every lane.
template <int K, typename Out>
__device__ __forceinline__ void warp_dots(const __nv_bfloat16* w, int r0, int r1, const float* x,
                                          unsigned long long policy, Out out) {
  constexpr int k = K, per_lane = K / 256;
  const int lane = threadIdx.x & 31, items = (r1 - r0) * per_lane;
  float acc = 0.0f;
  int lr = r0, lm = 0, cr = r0, cm = 0;  // the load and consume cursors (row, unit of the lane), no divisions
  for (int i0 = 0; i0 < items; i0 += 16) {
    uint4 v[16];
#pragma unroll
    for (int q = 0; q < 16; ++q)
      if (i0 + q < items) {
        v[q] = ld_weight(w + static_cast<size_t>(lr) * k + (lm * 32 + lane) * 8, policy);
        if (++lm == per_lane) {
          lm = 0;
          ++lr;
        }
      }
#pragma unroll
    for (int q = 0; q < 16; ++q)
      if (i0 + q < items) {
        acc += dot8(v[q], x + (cm * 32 + lane) * 8);
        if (++cm == per_lane) {
          out(cr, warp_sum(acc));
          acc = 0.0f;
          cm = 0;
          ++cr;
        }
      }
  }
}

__device__ __forceinline__ void wait_for(const Params& p, unsigned target) {
  if (threadIdx.x == 0) {
    const unsigned long long t0 = global_ns();
    unsigned ns = 16;
    while (static_cast<int>(ld_acquire(p.counter) - target) < 0) {
      __nanosleep(ns);
      if (ns < 256) ns *= 2;
      if (global_ns() - t0 > kWatchdogNs) {
        *reinterpret_cast<volatile unsigned*>(p.error) = 1u;
        __threadfence_system();
        asm volatile("trap;");
      }
    }
  }
  __syncthreads();
}
__device__ __forceinline__ void release(const Params& p) {
  __syncthreads();
  if (threadIdx.x == 0) red_release_add(p.counter, 1u);
}

__device__ __forceinline__ void red_add_v4(float* a, float4 v) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}
__device__ __forceinline__ void red_add_u64(unsigned long long* a, float v) {
  const long long q = __float2ll_rn(v * 4294967296.0f);
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(a), "l"(static_cast<unsigned long long>(q)) : "memory");
}
__device__ __forceinline__ float fixed_to_float(unsigned long long q) {
  return static_cast<float>(static_cast<double>(static_cast<long long>(q)) * (1.0 / 4294967296.0));
}

// gate/up for the block's slice [f0, f1) of F: g and u by the warps (rows spread over them), then SwiGLU into act.
template <int kH, int kF>
__device__ __forceinline__ void gate_up(const Params& p, const __nv_bfloat16* gu, int f0, int f1, const float* xs,
                                        float* gs, float* act, unsigned long long policy) {
  const int w = f1 - f0, warp = threadIdx.x >> 5;
  int r0, r1;
  share(2 * w, warp, kWarps, r0, r1);  // rows 0..w-1 gate, w..2w-1 up of the slice
  // Two calls (gate rows, up rows) keep each warp's rows contiguous in memory.
  const int g1 = min(r1, w), u0 = max(r0, w);
  if (r0 < g1)
    warp_dots<kH>(gu + static_cast<size_t>(f0) * kH, r0, g1, xs, policy,
              [&](int r, float s) { if ((threadIdx.x & 31) == 0) gs[r] = s; });
  if (u0 < r1)
    warp_dots<kH>(gu + static_cast<size_t>(kF + f0 - w) * kH, u0, r1, xs, policy,
              [&](int r, float s) { if ((threadIdx.x & 31) == 0) gs[r] = s; });
  __syncthreads();
  for (int j = threadIdx.x; j < w; j += kThreads) {
    const float g = round_bf16(gs[j]), u = round_bf16(gs[w + j]);
    act[j] = round_bf16(g / (1.0f + __expf(-g)) * u);
  }
  __syncthreads();
}

template <int kMode, int kH, int kF>
__global__ void __launch_bounds__(kThreads, 1) mlp_chain(Params p) {
  // Dynamic shared memory (smem_floats): x [H]; two-op's activations [F] or fused's gate / up sums; the block's
  // activations [256]; fused, H < 2048: the second row group's partial sums [H].
  extern __shared__ __align__(16) float dyn[];
  float* xs = dyn;
  float* big = xs + kH;
  float* act = big + kF;
  float* part = act + 256;
  constexpr int kR = replicas(kMode);
  const unsigned long long policy = evict_first();
  const int blocks = gridDim.x, b = blockIdx.x;
  int f0, f1, h0, h1;
  share(kF, b, blocks, f0, f1);
  share(kH, b, blocks, h0, h1);
  const size_t gu_elems = 2ull * kF * kH, down_elems = 1ull * kH * kF;
  for (int e = threadIdx.x; e < kH; e += kThreads) xs[e] = round_bf16(1.0f + 0.001f * (e % 97));
  __syncthreads();
  unsigned ops = 0;
  for (int s = 0; s < p.steps; ++s)
    for (int l = 0; l < p.layers; ++l) {
      const int g = s * p.layers + l;
      const __nv_bfloat16* gu = p.gu + l * gu_elems;
      const __nv_bfloat16* dw = p.down + l * down_elems;
      if (kMode == kTwoOp) {
        // gate/up: x from the previous layer's down (or the initial row), activations out.
        if (threadIdx.x == 0) prefetch_l2(gu + static_cast<size_t>(f0) * kH, min(p.prefetch_bytes, (f1 - f0) * kH * 2));
        const __nv_bfloat16* x = p.x + (g & 1) * kH;
        if (g > 0) {
          wait_for(p, ops * blocks);
          for (int e = threadIdx.x; e < kH; e += kThreads) xs[e] = __bfloat162float(__ldcg(x + e));
          __syncthreads();
        }
        gate_up<kH, kF>(p, gu, f0, f1, xs, big, act, policy);
        for (int j = threadIdx.x; j < f1 - f0; j += kThreads) p.act[f0 + j] = __float2bfloat16_rn(act[j]);
        release(p);
        ++ops;
        // down: all of F's activations in, the block's rows of W [H, F] out, plus the residual.
        if (threadIdx.x == 0) prefetch_l2(dw + static_cast<size_t>(h0) * kF, min(p.prefetch_bytes, (h1 - h0) * kF * 2));
        wait_for(p, ops * blocks);
        for (int e = threadIdx.x; e < kF; e += kThreads) big[e] = __bfloat162float(__ldcg(p.act + e));
        __syncthreads();
        int r0, r1;
        share(h1 - h0, threadIdx.x >> 5, kWarps, r0, r1);
        __nv_bfloat16* xn = p.x + ((g + 1) & 1) * kH;
        warp_dots<kF>(dw, h0 + r0, h0 + r1, big, policy, [&](int r, float sum) {
          if ((threadIdx.x & 31) == 0) xn[r] = __float2bfloat16_rn(xs[r] + round_bf16(sum));
        });
        release(p);
        ++ops;
      } else {
        if (threadIdx.x == 0) {
          prefetch_l2(gu + static_cast<size_t>(f0) * kH, min(p.prefetch_bytes, (f1 - f0) * kH * 2));
          prefetch_l2(dw + static_cast<size_t>(f0) * kH, min(p.prefetch_bytes, (f1 - f0) * kH * 2));
        }
        if (g > 0) {  // the previous layer's accumulator, added to this block's copy of the residual
          wait_for(p, ops * blocks);
          const int prev = (g - 1) % 3;
          for (int e = threadIdx.x; e < kH; e += kThreads) {
            float a = 0.0f;
            if (kMode == kFusedFixed) a = fixed_to_float(__ldcg(p.accx + prev * kH + e));
            else
#pragma unroll
              for (int r = 0; r < kR; ++r) a += __ldcg(p.acc + (prev * kR + r) * kH + e);
            xs[e] = round_bf16(xs[e] + round_bf16(a));
          }
          __syncthreads();
        }
        gate_up<kH, kF>(p, gu, f0, f1, xs, big, act, policy);
        // The slice's share of down for every output: thread t takes unit t % U of the rows t / U, t / U + groups, ...
        // (U = H / 8 units of 8 outputs), or units t, t + 256, ... of every row where U >= 256.
        constexpr int units = kH / 8, groups = units < kThreads ? kThreads / units : 1, upt = units < kThreads ? 1 : units / kThreads;
        const int grp = units < kThreads ? threadIdx.x / units : 0, u0 = units < kThreads ? threadIdx.x % units : threadIdx.x;
        const __nv_bfloat16* wt = dw + static_cast<size_t>(f0) * kH;  // rows f0.. of Wt [F, H]
        const int w = f1 - f0, my_rows = grp < w ? (w - grp + groups - 1) / groups : 0, items = my_rows * upt;
        float sum[2][8] = {};
        for (int i0 = 0; i0 < items; i0 += 16) {
          uint4 v[16];
#pragma unroll
          for (int q = 0; q < 16; ++q) {
            const int i = i0 + q;
            if (i < items)
              v[q] = ld_weight(wt + static_cast<size_t>(grp + (i / upt) * groups) * kH + (u0 + (i % upt) * kThreads) * 8, policy);
          }
#pragma unroll
          for (int q = 0; q < 16; ++q) {
            const int i = i0 + q;
            if (i < items) {
              const float a = act[grp + (i / upt) * groups];
              const unsigned wd[4] = {v[q].x, v[q].y, v[q].z, v[q].w};
              // i0 is a multiple of 16, so unit i % upt (upt 1 or 2) is known from q: no indexing of registers.
              if (upt == 2 && (q & 1)) {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                  sum[1][2 * c] += a * bf_lo(wd[c]);
                  sum[1][2 * c + 1] += a * bf_hi(wd[c]);
                }
              } else {
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                  sum[0][2 * c] += a * bf_lo(wd[c]);
                  sum[0][2 * c + 1] += a * bf_hi(wd[c]);
                }
              }
            }
          }
        }
        if (groups > 1) {  // row groups above 0 hand their sums to group 0
          for (int gg = 1; gg < groups; ++gg) {
            if (grp == gg)
              for (int c = 0; c < 8; ++c) part[u0 * 8 + c] = sum[0][c];
            __syncthreads();
            if (grp == 0)
              for (int c = 0; c < 8; ++c) sum[0][c] += part[u0 * 8 + c];
            __syncthreads();
          }
        }
        // Zero this block's slice of the accumulator two layers back (its readers passed the last wait), then add.
        const int cur = g % 3, stale = (g + 1) % 3;
        for (int e = h0 + threadIdx.x; e < h1; e += kThreads) {
          if (kMode == kFusedFixed) p.accx[stale * kH + e] = 0ull;
          else
#pragma unroll
            for (int r = 0; r < kR; ++r) p.acc[(stale * kR + r) * kH + e] = 0.0f;
        }
        if (grp == 0 && kMode != kFusedNoAdds)
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            if (k >= upt) break;
            const int c0 = (u0 + k * kThreads) * 8;
            if (kMode != kFusedFixed) {
              float* acc = p.acc + (cur * kR + b % kR) * kH + c0;
              red_add_v4(acc, make_float4(sum[k][0], sum[k][1], sum[k][2], sum[k][3]));
              red_add_v4(acc + 4, make_float4(sum[k][4], sum[k][5], sum[k][6], sum[k][7]));
            } else {
              for (int c = 0; c < 8; ++c) red_add_u64(p.accx + cur * kH + c0 + c, sum[k][c]);
            }
          }
        release(p);
        ++ops;
      }
    }
  float v = 0.0f;
  for (int e = threadIdx.x; e < kH; e += kThreads) v += xs[e];
  p.sink[b * kThreads + threadIdx.x] = v;
}

template <int kH, int kF>
void allow_smem(int bytes) {
  CHECK(cudaFuncSetAttribute(mlp_chain<kTwoOp, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CHECK(cudaFuncSetAttribute(mlp_chain<kFusedF32, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CHECK(cudaFuncSetAttribute(mlp_chain<kFusedFixed, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CHECK(cudaFuncSetAttribute(mlp_chain<kFusedNoAdds, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CHECK(cudaFuncSetAttribute(mlp_chain<kFusedF32R4, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  CHECK(cudaFuncSetAttribute(mlp_chain<kFusedF32R16, kH, kF>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}
template <int kH, int kF>
void launch(int mode, int blocks, int smem, const Params& p) {
  if (mode == kTwoOp) mlp_chain<kTwoOp, kH, kF><<<blocks, kThreads, smem>>>(p);
  else if (mode == kFusedF32) mlp_chain<kFusedF32, kH, kF><<<blocks, kThreads, smem>>>(p);
  else if (mode == kFusedFixed) mlp_chain<kFusedFixed, kH, kF><<<blocks, kThreads, smem>>>(p);
  else if (mode == kFusedNoAdds) mlp_chain<kFusedNoAdds, kH, kF><<<blocks, kThreads, smem>>>(p);
  else if (mode == kFusedF32R4) mlp_chain<kFusedF32R4, kH, kF><<<blocks, kThreads, smem>>>(p);
  else mlp_chain<kFusedF32R16, kH, kF><<<blocks, kThreads, smem>>>(p);
}

struct Shape {
  const char* name;
  int h, f, layers;
};

}  // namespace

int main(int argc, char** argv) {
  int prefetch_kib = 32, steps = 4, reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--prefetch")) prefetch_kib = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  const int sms = print_device();
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  const double copy_tbs = copy_bandwidth_tbs();
  std::printf("copy bandwidth %.3f TB/s; %d steps x layers per launch, median of %d launches; L2 prefetch %d KiB\n\n",
              copy_tbs, steps, reps - 1, prefetch_kib);

  const int smem_max = (2 * kMaxH + kMaxF + 256) * 4;
  allow_smem<1024, 3072>(smem_max);
  allow_smem<2048, 8192>(smem_max);
  allow_smem<4096, 12288>(smem_max);
  unsigned* error;
  CHECK(cudaHostAlloc(&error, 4, cudaHostAllocMapped));
  *error = 0;
  unsigned* error_dev;
  CHECK(cudaHostGetDevicePointer(&error_dev, error, 0));

  std::printf("| shape (H x F, layers) | floor per layer | two-op | fused, f32 adds | fused, fixed-point adds | fused, no adds "
              "(wrong sums: the adds' cost) | fused, f32 adds into 4 copies | into 16 copies |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Shape s : {Shape{"Qwen3-0.6B", 1024, 3072, 28}, Shape{"Llama-3.2-1B", 2048, 8192, 16},
                        Shape{"Qwen3-8B", 4096, 12288, 8}}) {
    const size_t gu_elems = 2ull * s.f * s.h * s.layers, down_elems = 1ull * s.h * s.f * s.layers;
    Params p{};
    __nv_bfloat16 *gu, *down;
    CHECK(cudaMalloc(&gu, gu_elems * 2));
    CHECK(cudaMalloc(&down, down_elems * 2));
    CHECK(cudaMemset(gu, 0x3a, gu_elems * 2));  // 0x3a3a: bf16 ~0.00071
    CHECK(cudaMemset(down, 0xb8, down_elems * 2));  // 0xb8b8: bf16 ~-8.8e-5 (x shrinks layer by layer, stays finite)
    p.gu = gu;
    p.down = down;
    p.layers = s.layers;
    p.steps = steps;
    p.prefetch_bytes = prefetch_kib * 1024;
    CHECK(cudaMalloc(&p.x, 2 * s.h * 2));
    CHECK(cudaMalloc(&p.act, s.f * 2));
    CHECK(cudaMalloc(&p.acc, 3 * kMaxReplicas * s.h * 4));
    CHECK(cudaMalloc(&p.accx, 3 * s.h * 8));
    CHECK(cudaMalloc(&p.counter, 4));
    CHECK(cudaMalloc(&p.sink, sms * kThreads * 4));
    p.error = error_dev;
    const int smem = (2 * s.h + s.f + 256) * 4;
    const double floor_us = (gu_elems + down_elems) * 2.0 / s.layers / (copy_tbs * 1e12) * 1e6;
    float per_layer[kModes];
    float sink_check[kModes];
    for (int mode = 0; mode < kModes; ++mode) {
      std::vector<float> us;
      for (int r = 0; r < reps; ++r) {
        CHECK(cudaMemset(p.counter, 0, 4));
        CHECK(cudaMemset(p.acc, 0, 3 * kMaxReplicas * s.h * 4));
        CHECK(cudaMemset(p.accx, 0, 3 * s.h * 8));
        CHECK(cudaMemset(p.x, 0, 2 * s.h * 2));
        CHECK(cudaEventRecord(e0));
        if (s.h == 1024) launch<1024, 3072>(mode, sms, smem, p);
        else if (s.h == 2048) launch<2048, 8192>(mode, sms, smem, p);
        else launch<4096, 12288>(mode, sms, smem, p);
        CHECK(cudaEventRecord(e1));
        const cudaError_t err = cudaEventSynchronize(e1);
        if (err != cudaSuccess || *error != 0) {
          std::fprintf(stderr, "%s mode %d: %s (watchdog %u)\n", s.name, mode, cudaGetErrorString(err), *error);
          return 1;
        }
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) us.push_back(ms * 1e3f / (steps * s.layers));
      }
      per_layer[mode] = median(us);
      float first;
      CHECK(cudaMemcpy(&first, p.sink, 4, cudaMemcpyDeviceToHost));
      sink_check[mode] = first;
    }
    std::printf("| %s (%d x %d, %d) | %.2f us | %.2f us", s.name, s.h, s.f, s.layers, floor_us, per_layer[0]);
    for (int mode = 1; mode < kModes; ++mode)
      std::printf(" | %.2f us (%+.1f%%)", per_layer[mode], 100.0 * (per_layer[mode] / per_layer[0] - 1.0));
    std::printf(" |\n  (block 0 thread 0's final sum of x, per form:");
    for (int mode = 0; mode < kModes; ++mode) std::printf(" %g", sink_check[mode]);
    std::printf(")\n");
    CHECK(cudaFree(gu));
    CHECK(cudaFree(down));
    CHECK(cudaFree(p.x));
    CHECK(cudaFree(p.act));
    CHECK(cudaFree(p.acc));
    CHECK(cudaFree(p.accx));
    CHECK(cudaFree(p.counter));
    CHECK(cudaFree(p.sink));
  }
  return 0;
}
