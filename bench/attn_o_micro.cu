// Microbenchmark: a chain of batch-1 decoder attention -> o projection (+ residual) steps on every SM, run the
// megakernel's way and fused, to price the attention -> o boundary as a layer's time (docs/perf.md round 57).
//
//   two-op  the megakernel's way: one attention task per kv head (blocks 0..NKV-1; its G q heads) reads q from the
//           residual row, attends over T cached positions (the head's K/V requested into shared memory before the
//           wait), stores the attention row and releases a counter; o's tiles (every block its rows of Wo [H, NQ*D],
//           requested into shared memory before the wait) poll it, load the row, add the residual, store the next
//           residual row and release a second counter, which the next layer's attention polls.
//   two-op, a task per q head  the same with one attention task per q head (blocks 0..NQ-1): the fused form's
//           attention tasks, so the fair baseline of the fused form (here an attention task's time grows with its
//           heads; round 18 found the product's latency-bound instead).
//   fused   one op of NQ * S tasks: task (h, s) attends for q head h alone (its kv head's K/V in shared memory) and
//           multiplies its D outputs by Wo's columns of head h for rows slice s (H / S rows, in shared memory before
//           the wait), adding the partial rows into the next layer's f32 accumulator (red.add.v4.f32); the tasks of
//           head 0 add the residual (this layer's accumulator) as well. One counter; the next layer's tasks read the
//           accumulator. Accumulators rotate over three buffers; after its wait a block zeroes its slice of the one
//           two layers ahead (every reader of it is past its own wait). "fused, no adds" skips the adds (wrong sums:
//           what the adds cost). "fused, ordered sums" is the deterministic form: each task stores its partial rows
//           into a scratch [NQ][H] and takes a ticket of its slice; the slice's last task adds the residual and the NQ
//           partials in head order and stores the next residual row (bf16, as the o linear does) before releasing.
//   fused per kv head, ordered sums  the fused form with the product's attention tasks: 128 tasks, task (g, s) the
//           attention of kv head g's G q heads (as the two-op form's attention task) and then its G * D columns of Wo
//           for slice s of 128 / NKV slices of the rows; the partials of the NKV kv heads added in order by the slice's
//           last task. Every slice's tasks repeat the same attention (K/V from L2), so this one prices the boundary
//           against the two-op form itself.
// The attention here is the arithmetic alone (scores, softmax, weighted sum): no rope, head norms or cache append, so
// every form carries less attention latency than the product; what differs between a fused form and the two-op
// form with the same attention tasks is the boundary and where o runs. Every wait has a watchdog (trap after 2 s).
// Time per layer = a launch's time over steps x layers (CUDA events, median of the launches after the first).
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o attn_o_micro bench/attn_o_micro.cu && ./attn_o_micro
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = kMicroThreads;
constexpr int kWarps = kThreads / 32;
constexpr unsigned long long kWatchdogNs = 2000000000ull;
enum Mode { kTwoOp = 0, kTwoOpHeads = 1, kFused = 2, kFusedNoAdds = 3, kFusedOrdered = 4, kFusedKv = 5 };
constexpr int kModes = 6;
const char* const kModeNames[kModes] = {"two-op",         "two-op, a task per q head", "fused",
                                        "fused, no adds", "fused, ordered sums",       "fused per kv head, ordered sums"};
constexpr int kMaxSlices = 32;  // tickets: one per slice

struct Params {
  const __nv_bfloat16* wo;  // per layer [H, NQ * D]
  const __nv_bfloat16* k;   // per layer [NKV, T, D]
  const __nv_bfloat16* v;
  int layers, steps, t;
  __nv_bfloat16* x;     // two-op: [2][H] the residual row by layer parity
  __nv_bfloat16* attn;  // two-op: [NQ * D]
  float* acc;           // fused: [3][H]
  float* parts;         // fused, ordered sums: [NQ][H] each head's partial rows
  unsigned* counters;   // [2], then a ticket per slice
};

using micro::bf_hi;
using micro::bf_lo;
using micro::round_bf16;
using micro::warp_sum;
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ void red_add_v4(float* a, float4 v) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w)
               : "memory");
}
__device__ __forceinline__ void share(int n, int part, int parts, int& r0, int& r1) {
  r0 = static_cast<int>(1ll * part * n / parts);
  r1 = static_cast<int>(1ll * (part + 1) * n / parts);
}

// Rows [r0, r1) of `bytes_per_row` contiguous bytes at src (row stride src_stride) into shared memory at dst (row
// stride dst_stride), 16 bytes per cp.async from every thread; one commit group (landed by land()).
__device__ __forceinline__ void request_rows(char* dst, int dst_stride, const char* src, long long src_stride,
                                             int rows, int bytes_per_row) {
  const int units = bytes_per_row / 16, n = rows * units;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const int r = i / units, u = i % units;
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + r * dst_stride + u * 16));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + r * src_stride + u * 16) : "memory");
  }
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void land() {
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
}

__device__ __forceinline__ void wait_for(const unsigned* c, unsigned target) {
  if (threadIdx.x == 0) {
    const unsigned long long t0 = global_ns();
    unsigned ns = 16;
    while (static_cast<int>(ld_acquire(c) - target) < 0) {
      __nanosleep(ns);
      if (ns < 256) ns *= 2;
      if (global_ns() - t0 > kWatchdogNs) asm volatile("trap;");
    }
  }
  __syncthreads();
}
__device__ __forceinline__ void release(unsigned* c) {
  __syncthreads();
  if (threadIdx.x == 0) red_release_add(c, 1u);
}

// Attention of `gq` q heads (qs [gq][D] floats) over T positions of one kv head (ks, vs [T][D] bf16 in shared memory)
// into out [gq][D] (rounded to bf16 as the op's output is). sc: [gq][T] floats; part: [256] floats.
template <int kD>
__device__ void attend(const float* qs, const __nv_bfloat16* ks, const __nv_bfloat16* vs, int t, int gq, float* sc,
                       float* part, float* out) {
  constexpr int per_lane = kD / 32;  // 2 or 4 dims of a row per lane
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float scale = rsqrtf(static_cast<float>(kD));
  for (int i = warp; i < gq * t; i += kWarps) {
    const int g = i / t, p = i - g * t;
    const __nv_bfloat16* kr = ks + p * kD + lane * per_lane;
    float d = 0.0f;
#pragma unroll
    for (int j = 0; j < per_lane; j += 2) {
      const unsigned w = *reinterpret_cast<const unsigned*>(kr + j);
      d += bf_lo(w) * qs[g * kD + lane * per_lane + j] + bf_hi(w) * qs[g * kD + lane * per_lane + j + 1];
    }
    d = warp_sum(d);
    if (lane == 0) sc[g * t + p] = d * scale;
  }
  __syncthreads();
  if (warp < gq) {  // softmax of head `warp`, its 1 / sum kept in part[248 + warp]
    float m = -INFINITY;
    for (int p = lane; p < t; p += 32) m = fmaxf(m, sc[warp * t + p]);
    m = warp_max(m);
    float s = 0.0f;
    for (int p = lane; p < t; p += 32) {
      const float e = __expf(sc[warp * t + p] - m);
      sc[warp * t + p] = e;
      s += e;
    }
    s = warp_sum(s);
    if (lane == 0) part[248 + warp] = 1.0f / s;
  }
  __syncthreads();
  // Weighted sum: thread (slot, g, d) sums positions slot, slot + parts, ...; the slots meet in shared memory.
  const int cols = gq * kD, parts = kThreads / cols, slot = threadIdx.x / cols, c = threadIdx.x - slot * cols;
  const int g = c / kD, dd = c - g * kD;
  float a = 0.0f;
  if (slot < parts)
    for (int p = slot; p < t; p += parts) a += sc[g * t + p] * __bfloat162float(vs[p * kD + dd]);
  float inv = part[248 + g];
  __syncthreads();
  if (slot > 0 && slot < parts) part[(slot - 1) * cols + c] = a;
  __syncthreads();
  if (slot == 0) {
    for (int q = 1; q < parts; ++q) a += part[(q - 1) * cols + c];
    out[c] = round_bf16(a * inv);
  }
  __syncthreads();
}

template <int kMode, int kH, int kNQ, int kNKV, int kD, int kS>
__global__ void __launch_bounds__(kThreads, 1) attn_o_chain(Params p) {
  extern __shared__ __align__(16) char smem[];
  constexpr int kG = kNQ / kNKV, kK = kNQ * kD, kS2 = 128 / kNKV;
  const int t = p.t, blocks = gridDim.x, b = blockIdx.x;
  const size_t wo_elems = static_cast<size_t>(kH) * kK, kv_elems = static_cast<size_t>(kNKV) * t * kD;
  // Shared memory: K, V [T][D] bf16 each; q [G][D], out [G][D], part [256], scores [G][T] floats; the Wo slice.
  __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(smem);
  __nv_bfloat16* vs = ks + t * kD;
  float* qs = reinterpret_cast<float*>(vs + t * kD);
  float* out = qs + kG * kD;
  float* part = out + kG * kD;
  float* sc = part + 256;
  char* wos = reinterpret_cast<char*>(sc + kG * t);  // 16-byte aligned: every piece above is a multiple of 16 bytes
  unsigned* c_attn = p.counters;
  unsigned* c_o = p.counters + 1;
  for (int s = 0; s < p.steps; ++s)
    for (int l = 0; l < p.layers; ++l) {
      const int g = s * p.layers + l;
      const __nv_bfloat16* wo = p.wo + l * wo_elems;
      const __nv_bfloat16* kc = p.k + l * kv_elems;
      const __nv_bfloat16* vc = p.v + l * kv_elems;
      if (kMode == kTwoOp || kMode == kTwoOpHeads) {
        const __nv_bfloat16* x = p.x + (g & 1) * kH;
        // Attention of kv head b (its G q heads), or (a task per q head) of q head b alone.
        constexpr bool heads = kMode == kTwoOpHeads;
        constexpr int natt = heads ? kNQ : kNKV, gq = heads ? 1 : kG;
        if (b < natt) {
          const int kvh = heads ? b / kG : b, q0 = b * gq * kD;
          request_rows(reinterpret_cast<char*>(ks), kD * 2, reinterpret_cast<const char*>(kc + kvh * t * kD), kD * 2, t, kD * 2);
          request_rows(reinterpret_cast<char*>(vs), kD * 2, reinterpret_cast<const char*>(vc + kvh * t * kD), kD * 2, t, kD * 2);
          commit();
          wait_for(c_o, static_cast<unsigned>(g) * blocks);
          for (int i = threadIdx.x; i < gq * kD; i += kThreads) qs[i] = __bfloat162float(__ldcg(x + (q0 + i) % kH));
          land();
          attend<kD>(qs, ks, vs, t, gq, sc, part, out);
          for (int i = threadIdx.x; i < gq * kD; i += kThreads) p.attn[q0 + i] = __float2bfloat16_rn(out[i]);
          release(c_attn);
        }
        // o's tile: the block's rows of Wo, the whole attention row in, the residual added.
        int r0, r1;
        share(kH, b, blocks, r0, r1);
        constexpr int stride = kK * 2 + 16;
        request_rows(wos, stride, reinterpret_cast<const char*>(wo + static_cast<size_t>(r0) * kK), kK * 2LL, r1 - r0, kK * 2);
        commit();
        float* xs = reinterpret_cast<float*>(wos + ((kH + blocks - 1) / blocks) * stride);
        wait_for(c_attn, static_cast<unsigned>(g + 1) * natt);
        for (int i = threadIdx.x; i < kK; i += kThreads) xs[i] = __bfloat162float(__ldcg(p.attn + i));
        land();
        __nv_bfloat16* xn = p.x + ((g + 1) & 1) * kH;
        const int lane = threadIdx.x & 31;
        for (int r = r0 + (threadIdx.x >> 5); r < r1; r += kWarps) {
          const char* row = wos + (r - r0) * stride;
          float d = 0.0f;
          for (int u = lane; u < kK / 8; u += 32) {
            const uint4 w = *reinterpret_cast<const uint4*>(row + u * 16);
            const float* xx = xs + u * 8;
            d += bf_lo(w.x) * xx[0] + bf_hi(w.x) * xx[1] + bf_lo(w.y) * xx[2] + bf_hi(w.y) * xx[3] + bf_lo(w.z) * xx[4] +
                 bf_hi(w.z) * xx[5] + bf_lo(w.w) * xx[6] + bf_hi(w.w) * xx[7];
          }
          d = warp_sum(d);
          if (lane == 0) xn[r] = __float2bfloat16_rn(__bfloat162float(__ldcg(x + r)) + round_bf16(d));
        }
        release(c_o);
      } else {
        // A task per (q head, slice of kS) or, per kv head, per (kv head, slice of kS2): its heads' attention, then
        // its columns of Wo for the slice's rows.
        constexpr bool kv = kMode == kFusedKv;
        constexpr bool ordered = kMode == kFusedOrdered || kv;
        constexpr int gq = kv ? kG : 1, slices = kv ? kS2 : kS, rows = kH / slices, parts = kv ? kNKV : kNQ;
        constexpr int tasks = parts * slices, cols = gq * kD, stride = cols * 2 + 16;
        if (b >= tasks) continue;
        const int h = b / slices, sl = b % slices, kvh = kv ? h : h / kG;
        request_rows(reinterpret_cast<char*>(ks), kD * 2, reinterpret_cast<const char*>(kc + kvh * t * kD), kD * 2, t, kD * 2);
        request_rows(reinterpret_cast<char*>(vs), kD * 2, reinterpret_cast<const char*>(vc + kvh * t * kD), kD * 2, t, kD * 2);
        request_rows(wos, stride, reinterpret_cast<const char*>(wo + static_cast<size_t>(sl) * rows * kK + h * cols),
                     kK * 2LL, rows, cols * 2);
        commit();
        wait_for(c_o, static_cast<unsigned>(g) * tasks);
        const float* acc = p.acc + (g % 3) * kH;
        float* next = p.acc + ((g + 1) % 3) * kH;
        float* ahead = p.acc + ((g + 2) % 3) * kH;
        if (!ordered) {
          int z0, z1;
          share(kH, b, tasks, z0, z1);
          for (int i = z0 + threadIdx.x; i < z1; i += kThreads) ahead[i] = 0.0f;
        }
        if (ordered) {
          const __nv_bfloat16* x = p.x + (g & 1) * kH;
          for (int i = threadIdx.x; i < cols; i += kThreads) qs[i] = __bfloat162float(__ldcg(x + (h * cols + i) % kH));
        } else {
          for (int i = threadIdx.x; i < cols; i += kThreads) qs[i] = round_bf16(__ldcg(acc + (h * cols + i) % kH));
        }
        land();
        attend<kD>(qs, ks, vs, t, gq, sc, part, out);
        // The partial rows of the slice: thread r takes rows r, r + 256, ... (16-byte units of a padded row: no bank
        // conflicts), into shared memory (the scores are spent).
        float* prow = sc;
        for (int r = threadIdx.x; r < rows; r += kThreads) {
          const char* row = wos + r * stride;
          float d = 0.0f;
#pragma unroll 8
          for (int u = 0; u < cols / 8; ++u) {
            const uint4 w = *reinterpret_cast<const uint4*>(row + u * 16);
            const float* oo = out + u * 8;
            d += bf_lo(w.x) * oo[0] + bf_hi(w.x) * oo[1] + bf_lo(w.y) * oo[2] + bf_hi(w.y) * oo[3] + bf_lo(w.z) * oo[4] +
                 bf_hi(w.z) * oo[5] + bf_lo(w.w) * oo[6] + bf_hi(w.w) * oo[7];
          }
          prow[r] = d;
        }
        __syncthreads();
        if (kMode == kFused)  // 4-row groups added into the next accumulator; head 0's tasks add the residual
          for (int j = threadIdx.x; j < rows / 4; j += kThreads) {
            float4 v = *reinterpret_cast<const float4*>(prow + 4 * j);
            if (h == 0) {
              const float4 a = __ldcg(reinterpret_cast<const float4*>(acc + sl * rows + 4 * j));
              v.x += a.x, v.y += a.y, v.z += a.z, v.w += a.w;
            }
            red_add_v4(next + sl * rows + 4 * j, v);
          }
        if (ordered) {
          float* mine = p.parts + static_cast<size_t>(h) * kH + sl * rows;
          for (int j = threadIdx.x; j < rows / 4; j += kThreads)
            __stcg(reinterpret_cast<float4*>(mine + 4 * j), *reinterpret_cast<const float4*>(prow + 4 * j));
          __syncthreads();
          __shared__ unsigned last;
          if (threadIdx.x == 0) {
            __threadfence();
            last = (atomicAdd(p.counters + 2 + sl, 1u) + 1) % parts == 0;
            __threadfence();
          }
          __syncthreads();
          if (last) {  // the slice's last task: residual + the partials in order, rounded as the linear rounds
            const __nv_bfloat16* x = p.x + (g & 1) * kH;
            __nv_bfloat16* xn = p.x + ((g + 1) & 1) * kH;
            for (int r = sl * rows + threadIdx.x; r < (sl + 1) * rows; r += kThreads) {
              float parts_r[parts];
#pragma unroll
              for (int q = 0; q < parts; ++q) parts_r[q] = __ldcg(p.parts + static_cast<size_t>(q) * kH + r);
              float d = 0.0f;
#pragma unroll
              for (int q = 0; q < parts; ++q) d += parts_r[q];
              xn[r] = __float2bfloat16_rn(__bfloat162float(__ldcg(x + r)) + round_bf16(d));
            }
          }
        }
        release(c_o);
      }
    }
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, float scale, unsigned seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16_rn(scale * ((h & 0xffff) / 32768.0f - 1.0f));
  }
}

template <int kH, int kNQ, int kNKV, int kD, int kS>
size_t smem_bytes(int mode, int t, int blocks) {
  constexpr int kG = kNQ / kNKV, kK = kNQ * kD;
  const size_t base = 2ull * t * kD * 2 + (2 * kG * kD + 256 + static_cast<size_t>(kG) * t) * 4;
  if (mode == kTwoOp || mode == kTwoOpHeads) return base + static_cast<size_t>((kH + blocks - 1) / blocks) * (kK * 2 + 16) + kK * 4;
  if (mode == kFusedKv) return base + static_cast<size_t>(kH / (128 / kNKV)) * (kG * kD * 2 + 16);
  return base + static_cast<size_t>(kH / kS) * (kD * 2 + 16);
}

template <int kH, int kNQ, int kNKV, int kD, int kS>
void run_shape(const char* name, int layers, int t, int sms, double copy_tbs) {
  constexpr int kK = kNQ * kD;
  constexpr int kS2 = 128 / kNKV;  // the per-kv-head form's slices
  static_assert(kH % (4 * kS) == 0 && kNQ * kS <= 132 && kH % (4 * kS2) == 0 && kS <= kMaxSlices && kS2 <= kMaxSlices,
                "slices of whole 4-row groups, one task per SM");
  if (kNQ / kNKV * t < kH / kS) {  // the fused forms' partial rows reuse the scores' floats
    std::fprintf(stderr, "%s: T %d too short for %d rows a slice\n", name, t, kH / kS);
    std::exit(1);
  }
  const int steps = 8, launches = 7;
  const size_t wo_elems = static_cast<size_t>(kH) * kK * layers, kv_elems = static_cast<size_t>(kNKV) * t * kD * layers;
  __nv_bfloat16 *wo, *k, *v, *x, *attn;
  float* acc;
  unsigned* counters;
  CHECK(cudaMalloc(&wo, wo_elems * 2));
  CHECK(cudaMalloc(&k, kv_elems * 2));
  CHECK(cudaMalloc(&v, kv_elems * 2));
  CHECK(cudaMalloc(&x, 2 * kH * 2));
  CHECK(cudaMalloc(&attn, kK * 2));
  CHECK(cudaMalloc(&acc, 3 * kH * 4));
  CHECK(cudaMalloc(&counters, (2 + kMaxSlices) * sizeof(unsigned)));
  float* parts;
  CHECK(cudaMalloc(&parts, static_cast<size_t>(kNQ) * kH * 4));
  fill_bf16<<<1024, 256>>>(wo, wo_elems, 1.0f / std::sqrt(static_cast<float>(kK)), 1u);
  fill_bf16<<<1024, 256>>>(k, kv_elems, 1.0f, 2u);
  fill_bf16<<<1024, 256>>>(v, kv_elems, 1.0f, 3u);
  CHECK(cudaGetLastError());
  std::vector<__nv_bfloat16> x0(kH);
  std::vector<float> a0(kH);
  for (int i = 0; i < kH; ++i) {
    a0[i] = static_cast<float>(((i * 37) % 101) - 50) / 50.0f;
    x0[i] = __float2bfloat16_rn(a0[i]);
    a0[i] = __bfloat162float(x0[i]);
  }
  std::printf("| %s, T %d | %.2f |", name, t, wo_elems / layers * 2 / (copy_tbs * 1e6));
  float base = 0.0f, base_kv = 0.0f;
  for (int mode = 0; mode < kModes; ++mode) {
    void (*kern)(Params) = mode == kTwoOp        ? attn_o_chain<kTwoOp, kH, kNQ, kNKV, kD, kS>
                           : mode == kTwoOpHeads ? attn_o_chain<kTwoOpHeads, kH, kNQ, kNKV, kD, kS>
                           : mode == kFused      ? attn_o_chain<kFused, kH, kNQ, kNKV, kD, kS>
                           : mode == kFusedNoAdds ? attn_o_chain<kFusedNoAdds, kH, kNQ, kNKV, kD, kS>
                           : mode == kFusedOrdered ? attn_o_chain<kFusedOrdered, kH, kNQ, kNKV, kD, kS>
                                                   : attn_o_chain<kFusedKv, kH, kNQ, kNKV, kD, kS>;
    const size_t smem = smem_bytes<kH, kNQ, kNKV, kD, kS>(mode, t, sms);
    CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    Params p{wo, k, v, layers, steps, t, x, attn, acc, parts, counters};
    std::vector<float> ms;
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    float check = 0.0f;
    for (int r = 0; r < launches; ++r) {
      CHECK(cudaMemcpy(x, x0.data(), kH * 2, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(acc, a0.data(), kH * 4, cudaMemcpyHostToDevice));
      CHECK(cudaMemset(acc + kH, 0, 2 * kH * 4));
      CHECK(cudaMemset(counters, 0, (2 + kMaxSlices) * sizeof(unsigned)));
      CHECK(cudaEventRecord(e0));
      kern<<<sms, kThreads, smem>>>(p);
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float m = 0.0f;
      CHECK(cudaEventElapsedTime(&m, e0, e1));
      if (r > 0) ms.push_back(m);
    }
    // The last residual row: x of the last layer's parity (two-op), the accumulator after steps * layers (fused).
    if (mode == kTwoOp || mode == kTwoOpHeads || mode == kFusedOrdered || mode == kFusedKv) {
      __nv_bfloat16 h;
      CHECK(cudaMemcpy(&h, x + ((steps * layers) & 1) * kH, 2, cudaMemcpyDeviceToHost));
      check = __bfloat162float(h);
    } else {
      CHECK(cudaMemcpy(&check, acc + ((steps * layers) % 3) * kH, 4, cudaMemcpyDeviceToHost));
    }
    const float us = median(ms) * 1000.0f / (steps * layers);
    // Each fused form against the two-op form with the same attention tasks (a task per q head, or per kv head):
    // what the boundary and o cost.
    if (mode == kTwoOp) base_kv = us;
    if (mode == kTwoOpHeads) base = us;
    std::printf(" %.2f", us);
    const float ref = mode == kFusedKv ? base_kv : base;
    if (mode >= kFused) std::printf(" (%+.1f%%)", 100.0f * (us - ref) / ref);
    std::printf(" [x0 %.3f] |", check);
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
  }
  std::printf("\n");
  CHECK(cudaFree(wo));
  CHECK(cudaFree(k));
  CHECK(cudaFree(v));
  CHECK(cudaFree(x));
  CHECK(cudaFree(attn));
  CHECK(cudaFree(acc));
  CHECK(cudaFree(counters));
  CHECK(cudaFree(parts));
}

}  // namespace

int main() {
  const int sms = print_device();
  const double tbs = copy_bandwidth_tbs();
  std::printf("copy bandwidth %.3f TB/s; µs per layer (attention -> o + residual), 8 steps a launch, median of 6 launches\n\n", tbs);
  std::printf("| shape | Wo floor | %s | %s | %s (against a task per q head) | %s | %s | %s (against two-op) |\n"
              "|---|---|---|---|---|---|---|---|\n",
              kModeNames[0], kModeNames[1], kModeNames[2], kModeNames[3], kModeNames[4], kModeNames[5]);
  // Llama-3.2-1B: H 2048, 32 q heads of 64, 8 kv heads; Qwen3-0.6B: H 1024, 16 q heads of 128, 8 kv heads.
  for (int t : {160, 512}) run_shape<2048, 32, 8, 64, 4>("Llama-3.2-1B", 16, t, sms, tbs);
  for (int t : {160, 256}) run_shape<1024, 16, 8, 128, 8>("Qwen3-0.6B", 28, t, sms, tbs);
  return 0;
}
