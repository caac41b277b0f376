// Microbenchmark: a batch-1 decode layer chain (q/k/v, attention, o, gate/up, down; Llama-3.2-1B's, Qwen3-0.6B's
// and Qwen3-8B's shapes, bf16) on every SM, to measure what the op boundaries cost when the weight stream stops at
// them (the megakernel's way) and when it runs on through them.
//
// Every block owns an even share of each GEMV op's output rows; its weight rows are copied into a ring of 16 KiB
// shared-memory slots by a loader (the last warp: one `cp.async.bulk` per slot completing on the slot's mbarrier, or
// with `cp.async` its 32 lanes' 16-byte copies) and consumed in order by the other warps, which wait for the op's
// input, stage it in shared memory, take the dot products (a warp per row, the row's sums added across its lanes),
// store their rows and release the op. Attention is a stand-in on 8 blocks (one per kv head): its K / V read from
// memory and the rest of a fixed run (`--attn-ns`).
//
// The loader:
//   gated    the megakernel's way (task_loop.cuh): an op's first 2 slots only after the block's previous op is done,
//            the rest only after the op's input is staged; 3 in flight, a ring of 4.
//   free     walks the block's ops waiting for nothing but ring space: the next ops' weights land while the block
//            waits at a boundary or runs attention, with at most `inflight` slots requested and not landed (as few
//            requests in the memory system, which every poll and input load queues behind, as the gated ring's)
//            and `slots` slots of shared memory.
//   paused   free, but idle while the block's compute warps wait for an input.
//   stream   free, with no boundary waits and no attention: what this code streams on its own (and, with `skip`,
//            without the dot products, the input stage or the weight copies).
// The hand-off:
//   counter  the megakernel's (sync.cuh): the rows stored, a block barrier, thread 0's release add; the consumer's
//            thread 0 polls with acquire loads, a block barrier, then the row's loads.
//   tagged   each output a 32-bit word, bf16 value and the 16-bit tag of the op instance that wrote it (NCCL's LL
//            idea, bench/handoff_micro.cu): relaxed stores, no barrier before them, no fence, no counter; the
//            consumer's threads reload their words until every tag is the one they expect, the wait and the input
//            stage in one.
// Per op it reports thread 0's mean SM cycles per block in the wait (poll and barrier), the input stage, the weights
// (from the input staged to the rows stored) and the release: a counter release's fence held thread 0 ~770 cycles
// with nothing in flight, 1,200-2,500 with a free loader's bulk copies in flight, 800-1,200 with its cp.async ones
// (H200, docs/perf.md round 41).
//
// Time per layer = a launch's time over steps × layers (CUDA events, median of several launches); the floor is the
// layer's weight bytes over a device-to-device copy's bandwidth measured in the same run (2 × bytes / time, as
// bench/decode.py). Blocks of 8 warps are the megakernel's shape; -DLPM_WARPS=16 doubles the compute warps so that
// the dot products keep up with the stream (with 8 they do not, here).
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a [-DLPM_WARPS=16] -o layer_pipeline_micro bench/layer_pipeline_micro.cu
//   ./layer_pipeline_micro [--attn-ns 3000] [--steps 4] [--reps 7] [--variant I] [--shape 0|1|2]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

#ifndef LPM_WARPS
#define LPM_WARPS 8  // warps per block (-DLPM_WARPS=16: twice the compute warps, for a faster consumer)
#endif
constexpr int kThreads = 32 * LPM_WARPS;
constexpr int kComputeThreads = kThreads - 32;  // the last warp is the loader
constexpr int kComputeWarps = kComputeThreads / 32;
constexpr int kSlotBytes = 16384;
constexpr int kMaxSlots = 12;
constexpr int kOps = 5;  // q/k/v, attention, o, gate/up, down
constexpr int kAttnBlocks = 8;
constexpr int kMaxRows = 256;
constexpr unsigned long long kWatchdogNs = 2000000000ull;

struct Shape {
  const char* name;
  int h, nqkv, dq, f, hd, layers;
};

struct Params {
  const __nv_bfloat16* w;  // per layer: qkv [nqkv, h], o [h, dq], gate/up [2f, h] (rows interleaved), down [h, f]
  long long layer_elems;
  const __nv_bfloat16* kv;  // [layers][8][ctx][hd][2]
  int ctx;
  __nv_bfloat16 *qkv_out, *attn_out, *o_out, *gu_out, *down_out;
  // tagged: the same rows as 32-bit words (bf16 value << 16 | 16-bit tag of the op instance that wrote it): no
  // counter, no release fence and no poll; a consumer reloads its words until every tag is the one it expects.
  unsigned *t_qkv, *t_attn, *t_o, *t_gu, *t_down;
  int tagged;
  int cpasync;  // the loader warp's 32 lanes copy each slot by cp.async (16 bytes a lane and instruction) instead
                // of one cp.async.bulk: each lane arrives on the slot's barrier when its copies land
  unsigned tag_base;  // this launch's first tag
  unsigned* counters;  // one per op instance: (step * layers + layer) * 5 + op
  Shape s;
  int steps, slots, inflight, gated, boundaries;
  int skip;  // 1: no dot products, 2: no input stage, 4: no weight copies
  long long attn_ns;
  unsigned* error;  // host-mapped: the watchdog code of a spin that ran past kWatchdogNs
  unsigned long long* stats;  // [op][wait, input stage, weights, release] SM cycles of thread 0, summed over blocks
};

struct OpGeom {
  int n, k, r0, r1, rows_per_chunk, chunks;
  int parts;  // slots per row: rows longer than a slot (Qwen3-8B's down, K 12288) go in parts, one per slot
  long long woff;  // the op's weight, elements from the layer's start
};

__device__ __forceinline__ OpGeom op_geom(const Shape& s, int op, int b, int blocks) {
  OpGeom g{};
  switch (op) {
    case 0: g.n = s.nqkv; g.k = s.h; g.woff = 0; break;
    case 2: g.n = s.h; g.k = s.dq; g.woff = 1ll * s.nqkv * s.h; break;
    case 3: g.n = 2 * s.f; g.k = s.h; g.woff = 1ll * s.nqkv * s.h + 1ll * s.h * s.dq; break;
    default: g.n = s.h; g.k = s.f; g.woff = 1ll * s.nqkv * s.h + 1ll * s.h * s.dq + 2ll * s.f * s.h; break;
  }
  g.r0 = static_cast<int>(1ll * b * g.n / blocks);
  g.r1 = static_cast<int>(1ll * (b + 1) * g.n / blocks);
  g.rows_per_chunk = max(1, kSlotBytes / (g.k * 2));
  g.parts = (g.k * 2 + kSlotBytes - 1) / kSlotBytes;
  g.chunks = g.parts > 1 ? (g.r1 - g.r0) * g.parts : (g.r1 - g.r0 + g.rows_per_chunk - 1) / g.rows_per_chunk;
  return g;
}

// A spin past the watchdog (a bug of this file: every wait here is satisfied within microseconds) leaves its code
// in host-mapped memory, which the host can still read once the trap has ended the context, and traps.
__device__ __forceinline__ void guard(unsigned long long t0, unsigned* error, unsigned code) {
  if (global_ns() - t0 > kWatchdogNs) {
    *reinterpret_cast<volatile unsigned*>(error) = code;
    __threadfence_system();
    asm volatile("trap;");
  }
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ bool mbar_test(unsigned bar, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity, unsigned long long t0, unsigned* error,
                                          unsigned code) {
  for (unsigned i = 1; !mbar_test(bar, parity); ++i)
    if (i % 1024 == 0) guard(t0, error, code);
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar,
                                          unsigned long long policy) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
      ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}
// A position in the ring: slot and the parity of its use, advanced without divisions (a 64-bit one per slot
// took more time than the dot products).
struct RingPos {
  int slot = 0;
  unsigned parity = 0;
  __device__ __forceinline__ void next(int slots) {
    if (++slot == slots) {
      slot = 0;
      parity ^= 1u;
    }
  }
};

__device__ __forceinline__ void compute_barrier() { asm volatile("bar.sync 1, %0;" ::"n"(kComputeThreads) : "memory"); }

__device__ __forceinline__ float warp_sum(float d) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) d += __shfl_xor_sync(0xffffffffu, d, o);
  return d;
}
__device__ __forceinline__ float lo(unsigned v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float hi(unsigned v) { return __uint_as_float(v & 0xffff0000u); }
// 8 bf16 weights against 8 bf16 inputs, in f32, two chains.
__device__ __forceinline__ float dot8(uint4 w, uint4 x) {
  const float a = lo(w.x) * lo(x.x) + hi(w.x) * hi(x.x) + lo(w.y) * lo(x.y) + hi(w.y) * hi(x.y);
  const float b = lo(w.z) * lo(x.z) + hi(w.z) * hi(x.z) + lo(w.w) * lo(x.w) + hi(w.w) * hi(x.w);
  return a + b;
}
// A warp's dot product of `n` 16-byte units of weights (a row, or a part of one) with the input's: lane l takes
// units l, l + 32, ... four at a time (n is a multiple of 128 for every shape here), summed across the lanes.
__device__ __forceinline__ float row_dot(const uint4* w, const uint4* x, int n, int lane) {
  float d0 = 0.0f, d1 = 0.0f;
  for (int col = lane; col < n; col += 128) {
    uint4 wv[4], xv[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      wv[k] = w[col + 32 * k];
      xv[k] = x[col + 32 * k];
    }
    d0 += dot8(wv[0], xv[0]) + dot8(wv[2], xv[2]);
    d1 += dot8(wv[1], xv[1]) + dot8(wv[3], xv[3]);
  }
  return warp_sum(d0 + d1);
}
__device__ __forceinline__ float bf(const __nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float squash(float v) { return v / (1.0f + fabsf(v)); }

__device__ __forceinline__ unsigned tag_of(const Params& p, int inst) { return (p.tag_base + inst) & 0xffffu; }
__device__ __forceinline__ bool tagged_as(const uint4& v, unsigned tag) {
  return ((v.x ^ tag) & 0xffffu) == 0 && ((v.y ^ tag) & 0xffffu) == 0 && ((v.z ^ tag) & 0xffffu) == 0 &&
         ((v.w ^ tag) & 0xffffu) == 0;
}
// 4 tagged words, reloaded until all carry `tag` (inst 0 of a launch has no producer: any tag).
__device__ __forceinline__ uint4 ld_tagged(const unsigned* w, unsigned tag, bool any, unsigned long long t0,
                                           unsigned* error) {
  uint4 v = ld_relaxed_v4(w);
  for (unsigned i = 1; !any && !tagged_as(v, tag); ++i) {
    v = ld_relaxed_v4(w);
    if (i % 1024 == 0) guard(t0, error, 9);
  }
  return v;
}

__device__ __forceinline__ void poll(const unsigned* c, unsigned target, unsigned long long t0, unsigned* error) {
  unsigned ns = 16;
  while (static_cast<int>(ld_acquire(c) - target) < 0) {
    __nanosleep(ns);
    if (ns < 256) ns *= 2;
    guard(t0, error, 3);
  }
}

__global__ void __launch_bounds__(kThreads, 1) layer_chain(Params p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Shape s = p.s;
  const int blocks = gridDim.x, b = blockIdx.x;
  unsigned char* ring = smem;
  uint4* xs = reinterpret_cast<uint4*>(smem + p.slots * kSlotBytes);  // the op's input, bf16, 8 to a unit
  const int max_k = max(max(s.h, s.dq), s.f);
  float* part = reinterpret_cast<float*>(xs + max_k / 8);  // the op's row sums
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(part + kMaxRows);  // full[slots], empty[slots]
  volatile int* started = reinterpret_cast<volatile int*>(bars + 2 * kMaxSlots);
  volatile int* finished = started + 1;
  volatile int* waiting = started + 2;  // the compute warps wait for an op's input
  // Thread 0's cycles, as p.stats.
  unsigned long long* st = reinterpret_cast<unsigned long long*>(bars + 2 * kMaxSlots + 2);
  const unsigned long long t0 = global_ns();

  if (threadIdx.x == 0) {
    for (int i = 0; i < p.slots; ++i) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bars + i)), "r"(p.cpasync ? 32 : 1)
                   : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bars + kMaxSlots + i)),
                   "r"(kComputeWarps)
                   : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    *started = -1;
    *finished = -1;
    *waiting = 0;
    for (int i = 0; i < 4 * kOps; ++i) st[i] = 0;
  }
  __syncthreads();

  const int instances = p.steps * s.layers * kOps;
  if (threadIdx.x >= kComputeThreads) {  // the loader
    const int loader_lane = threadIdx.x - kComputeThreads;
    if (loader_lane != 0 && !p.cpasync) return;
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    long long c = 0;
    int prev = -1;
    RingPos at, landed;  // the slot to fill; the one requested `inflight` slots before it
    for (int inst = 0; inst < instances; ++inst) {
      const int op = inst % kOps, layer = (inst / kOps) % s.layers;
      if (op == 1) continue;
      const OpGeom g = op_geom(s, op, b, blocks);
      const __nv_bfloat16* w = p.w + layer * p.layer_elems + g.woff;
      for (int j = 0; j < g.chunks; ++j, ++c, at.next(p.slots)) {
        const int slot = at.slot;
        if (c >= p.slots) mbar_wait(smem_addr(bars + kMaxSlots + slot), at.parity ^ 1u, t0, p.error, 1);
        if (c >= p.inflight) {
          mbar_wait(smem_addr(bars + landed.slot), landed.parity, t0, p.error, 2);
          landed.next(p.slots);
        }
        if (p.gated == 2) {
          while (*waiting) guard(t0, p.error, 8);
        } else if (p.gated) {
          if (j < 2) {
            while (*finished < prev) guard(t0, p.error, 4);
          } else {
            while (*started < inst) guard(t0, p.error, 5);
          }
        }
        const int row = g.parts > 1 ? g.r0 + j / g.parts : g.r0 + j * g.rows_per_chunk;
        const int rows = g.parts > 1 ? 1 : min(g.rows_per_chunk, g.r1 - row);
        const long long part_off = g.parts > 1 ? 1ll * (j % g.parts) * (g.k / g.parts) : 0;  // elements
        const int bytes = g.parts > 1 ? g.k * 2 / g.parts : rows * g.k * 2;
        if (p.skip & 4) {  // the slot as it is: what the compute warps take without the stream
          mbar_arrive(smem_addr(bars + slot));
        } else if (p.cpasync) {
          const char* src = reinterpret_cast<const char*>(w + 1ll * row * g.k + part_off);
          const unsigned dst = smem_addr(ring + slot * kSlotBytes);
          for (int o = loader_lane * 16; o < bytes; o += 512)
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + o), "l"(src + o),
                         "l"(policy)
                         : "memory");
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bars + slot))
                       : "memory");
        } else
          bulk_load(smem_addr(ring + slot * kSlotBytes), w + 1ll * row * g.k + part_off, static_cast<unsigned>(bytes),
                    smem_addr(bars + slot), policy);
      }
      prev = inst;
    }
    return;
  }

  // The compute warps.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  RingPos at;
  for (int inst = 0; inst < instances; ++inst) {
    const int op = inst % kOps, layer = (inst / kOps) % s.layers;
    if (op == 1) {  // attention stand-in
      if (!p.boundaries || b >= kAttnBlocks) continue;
      if (threadIdx.x == 0 && !p.tagged) {
        *waiting = 1;
        poll(p.counters + inst - 1, blocks, t0, p.error);
        *waiting = 0;
      }
      compute_barrier();
      const unsigned long long start = global_ns();
      const int per_head = p.ctx * s.hd * 2;
      const __nv_bfloat16* kv = p.kv + (1ll * layer * kAttnBlocks + b) * per_head;
      float part = 0.0f;
      for (int e = threadIdx.x * 8; e < per_head; e += kComputeThreads * 8) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(kv + e));
        part += __uint_as_float(u.x << 16) + __uint_as_float(u.w & 0xffff0000u);
      }
      const int outs = s.dq / kAttnBlocks;
      for (int i = threadIdx.x * 4; i < outs; i += kComputeThreads * 4) {  // 4 outputs a thread
        float q[4];
        if (p.tagged) {
          const uint4 v = ld_tagged(p.t_qkv + b * outs + i, tag_of(p, inst - 1), false, t0, p.error);
          q[0] = hi(v.x), q[1] = hi(v.y), q[2] = hi(v.z), q[3] = hi(v.w);
        } else {
          for (int k = 0; k < 4; ++k) q[k] = bf(__ldcg(p.qkv_out + b * outs + i + k));
        }
        for (int k = 0; k < 4; ++k) {
          const __nv_bfloat16 r = __float2bfloat16(squash(q[k] + part));
          if (p.tagged)
            st_relaxed(p.t_attn + b * outs + i + k,
                       static_cast<unsigned>(__bfloat16_as_ushort(r)) << 16 | tag_of(p, inst));
          else
            p.attn_out[b * outs + i + k] = r;
        }
      }
      if (threadIdx.x == 0)
        while (global_ns() - start < static_cast<unsigned long long>(p.attn_ns)) guard(t0, p.error, 6);
      compute_barrier();
      if (threadIdx.x == 0 && !p.tagged) red_release_add(p.counters + inst, 1u);
      continue;
    }
    const OpGeom g = op_geom(s, op, b, blocks);
    long long c0 = clock64();
    if (p.boundaries && !p.tagged && inst > 0 && threadIdx.x == 0) {
      // Each op waits for the instance before it (q/k/v for the previous layer's down; o for attention's 8 blocks).
      *waiting = 1;
      poll(p.counters + inst - 1, op == 2 ? kAttnBlocks : blocks, t0, p.error);
      *waiting = 0;
    }
    compute_barrier();
    long long c1 = clock64();
    if (threadIdx.x == 0) st[op * 4 + 0] += c1 - c0;
    if (!(p.skip & 2) && p.tagged) {
      // The input's tagged words (4 a load): the wait and the stage in one.
      const unsigned* in = op == 0 ? p.t_down : op == 2 ? p.t_attn : op == 3 ? p.t_o : p.t_gu;
      const int units = (op == 4 ? 2 * s.f : g.k) / 4;
      const unsigned tag = tag_of(p, inst - 1);
      const bool any = !p.boundaries || inst == 0;
      unsigned* x32 = reinterpret_cast<unsigned*>(xs);
      for (int u = threadIdx.x; u < units; u += kComputeThreads) {
        const uint4 v = ld_tagged(in + 4 * u, tag, any, t0, p.error);
        if (op == 4) {  // words: gate, up, gate, up
          const float g0 = hi(v.x), g1 = hi(v.z);
          const float a0 = g0 / (1.0f + __expf(-g0)) * hi(v.y), a1 = g1 / (1.0f + __expf(-g1)) * hi(v.w);
          x32[u] = static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16(a0))) |
                   static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16(a1))) << 16;
        } else {
          x32[2 * u] = (v.x >> 16) | (v.y & 0xffff0000u);
          x32[2 * u + 1] = (v.z >> 16) | (v.w & 0xffff0000u);
        }
      }
    } else if (!(p.skip & 2)) {
    // The input row into shared memory, 16 bytes per load and 4 loads in flight per thread (the down projection's:
    // SwiGLU of gate/up's interleaved rows). L2 loads: the rows are rewritten every layer.
    {
      const __nv_bfloat16* in = op == 0 ? p.down_out : op == 2 ? p.attn_out : op == 3 ? p.o_out : p.gu_out;
      const int units = (op == 4 ? 2 * s.f : g.k) / 8;
      const uint4* src = reinterpret_cast<const uint4*>(in);
      for (int base = threadIdx.x; base < units; base += 4 * kComputeThreads) {
        uint4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (base + k * kComputeThreads < units) v[k] = __ldcg(src + base + k * kComputeThreads);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int u = base + k * kComputeThreads;
          if (u >= units) break;
          if (op == 4) {  // word e: gate (low half), up (high half) of input 4 u + e
            const unsigned w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
            unsigned short* x16 = reinterpret_cast<unsigned short*>(xs);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float gv = lo(w[e]), uv = hi(w[e]);
              x16[u * 4 + e] = __bfloat16_as_ushort(__float2bfloat16(gv / (1.0f + __expf(-gv)) * uv));
            }
          } else {
            xs[u] = v[k];
          }
        }
      }
    }
    }
    compute_barrier();
    if (threadIdx.x == 0) *started = inst;  // the op's input is here: a gated loader may request the rest
    c0 = clock64();
    if (threadIdx.x == 0) st[op * 4 + 1] += c0 - c1;
    // Warp w takes the op's rows w, w + W, ... whole (W compute warps; its lanes every 32nd unit of a row, 4 units
    // in flight), so that each warp goes through the slots at its own pace; every warp waits for every slot before
    // releasing it.
    const int upr = g.k / 8;
    for (int j = 0; j < g.chunks; ++j, at.next(p.slots)) {
      const int slot = at.slot;
      mbar_wait(smem_addr(bars + slot), at.parity, t0, p.error, 7);
      const uint4* units = reinterpret_cast<const uint4*>(ring + slot * kSlotBytes);
      if (g.parts > 1) {  // part j % parts of row j / parts, which the row's warp adds up
        const int i = j / g.parts, pj = j % g.parts, pu = upr / g.parts;
        if (warp == i % kComputeWarps && !(p.skip & 1)) {
          const float d = row_dot(units, xs + pj * pu, pu, lane);
          if (lane == 0) part[i] = pj == 0 ? d : part[i] + d;
        }
      } else {  // rows [first, end) whole
        const int first = j * g.rows_per_chunk, end = min(first + g.rows_per_chunk, g.r1 - g.r0);
        for (int i = first + (warp - first % kComputeWarps + kComputeWarps) % kComputeWarps;
             i < (p.skip & 1 ? 0 : end); i += kComputeWarps) {
          const float d = row_dot(units + (i - first) * upr, xs, upr, lane);
          if (lane == 0) part[i] = d;
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_addr(bars + kMaxSlots + slot));
    }
    compute_barrier();
    __nv_bfloat16* out = op == 0 ? p.qkv_out : op == 2 ? p.o_out : op == 3 ? p.gu_out : p.down_out;
    unsigned* tout = op == 0 ? p.t_qkv : op == 2 ? p.t_o : op == 3 ? p.t_gu : p.t_down;
    for (int r = threadIdx.x; r < g.r1 - g.r0; r += kComputeThreads) {
      const __nv_bfloat16 v = __float2bfloat16(squash(part[r]));
      if (p.tagged)
        st_relaxed(tout + g.r0 + r, static_cast<unsigned>(__bfloat16_as_ushort(v)) << 16 | tag_of(p, inst));
      else
        out[g.r0 + r] = v;
    }
    compute_barrier();
    if (threadIdx.x == 0) {
      c1 = clock64();
      st[op * 4 + 2] += c1 - c0;
      if (!p.tagged) red_release_add(p.counters + inst, 1u);
      *finished = inst;
      st[op * 4 + 3] += clock64() - c1;  // the release's fence holds the thread until it is done
    }
  }
  if (threadIdx.x == 0)
    for (int i = 0; i < 4 * kOps; ++i) atomicAdd(p.stats + i, st[i]);
}

__global__ void fill_bf16(__nv_bfloat16* p, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * 1ll * blockDim.x + threadIdx.x; i < n; i += 1ll * gridDim.x * blockDim.x) {
    unsigned x = static_cast<unsigned>(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = __float2bfloat16(((x & 0xffff) / 65535.0f - 0.5f) * scale);
  }
}

struct Variant {
  const char* name;
  int slots, inflight, gated, boundaries, skip, tagged, cpasync;
};

}  // namespace

int main(int argc, char** argv) {
  int steps = 4, reps = 7, only_variant = -1, only_shape = -1;
  long long attn_ns = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--attn-ns")) attn_ns = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--variant")) only_variant = std::atoi(argv[i + 1]);  // index into the table below
    if (!std::strcmp(argv[i], "--shape")) only_shape = std::atoi(argv[i + 1]);
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int blocks = prop.multiProcessorCount;
  std::printf("device %s, %d SMs; %d steps, %d launches per variant (median), attention stand-in %lld ns\n", prop.name,
              blocks, steps, reps, attn_ns);

  const double copy_bw = copy_bandwidth_tbs(12, 2) * 1e12;
  std::printf("copy %.3f TB/s\n\n", copy_bw / 1e12);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  const Shape shapes[] = {{"Llama-3.2-1B", 2048, 3072, 2048, 8192, 64, 16},
                          {"Qwen3-0.6B", 1024, 4096, 2048, 3072, 128, 28},
                          {"Qwen3-8B", 4096, 6144, 4096, 12288, 128, 36}};
  // --variant takes the index in this table.
  const Variant variants[] = {
      {"stream, no copies (compute only) 8/4", 8, 4, 0, 0, 4},  // 0
      {"stream, loads only 8/4", 8, 4, 0, 0, 3},  // 1
      {"stream, loads only 11/8", 11, 8, 0, 0, 3},  // 2
      {"stream, no input stage 8/4", 8, 4, 0, 0, 2},  // 3
      {"stream, no dot products 8/4", 8, 4, 0, 0, 1},  // 4
      {"stream (no waits) 8/2", 8, 2, 0, 0},  // 5
      {"stream (no waits) 8/4", 8, 4, 0, 0},  // 6
      {"gated 4/3", 4, 3, 1, 1},  // 7
      {"free 4/2", 4, 2, 0, 1},  // 8
      {"free 4/3", 4, 3, 0, 1},  // 9
      {"free 8/2", 8, 2, 0, 1},  // 10
      {"free 8/3", 8, 3, 0, 1},  // 11
      {"free 11/1", 11, 1, 0, 1},  // 12
      {"free 11/2", 11, 2, 0, 1},  // 13
      {"free 11/3", 11, 3, 0, 1},  // 14
      {"free 11/6", 11, 6, 0, 1},  // 15
      {"paused 8/2", 8, 2, 2, 1},  // 16
      {"paused 11/2", 11, 2, 2, 1},  // 17
      {"paused 11/3", 11, 3, 2, 1},  // 18
      {"paused 11/4", 11, 4, 2, 1},  // 19
      {"tagged: gated 4/3", 4, 3, 1, 1, 0, 1},  // 20
      {"tagged: free 8/2", 8, 2, 0, 1, 0, 1},  // 21
      {"tagged: free 11/1", 11, 1, 0, 1, 0, 1},  // 22
      {"tagged: free 11/2", 11, 2, 0, 1, 0, 1},  // 23
      {"tagged: free 11/3", 11, 3, 0, 1, 0, 1},  // 24
      {"cp.async: gated 4/3", 4, 3, 1, 1, 0, 0, 1},  // 25
      {"cp.async: free 11/2", 11, 2, 0, 1, 0, 0, 1},  // 26
      {"cp.async: free 11/3", 11, 3, 0, 1, 0, 0, 1},  // 27
      {"cp.async, tagged: free 11/2", 11, 2, 0, 1, 0, 1, 1},  // 28
      {"cp.async: stream (no waits) 8/4", 8, 4, 0, 0, 0, 0, 1}  // 29
  };
  const int ctx = 128;
  long long launches = 0;
  for (int si = 0; si < 3; ++si) {
    const Shape& s = shapes[si];
    if (only_shape >= 0 && si != only_shape) continue;
    Params p{};
    p.s = s;
    p.ctx = ctx;
    p.steps = steps;
    p.attn_ns = attn_ns;
    p.layer_elems = 1ll * s.nqkv * s.h + 1ll * s.h * s.dq + 2ll * s.f * s.h + 1ll * s.h * s.f;
    __nv_bfloat16 *w = nullptr, *kv = nullptr, *bufs = nullptr;
    CHECK(cudaMalloc(&w, p.layer_elems * s.layers * 2));
    const long long kv_elems = 1ll * s.layers * kAttnBlocks * ctx * s.hd * 2;
    CHECK(cudaMalloc(&kv, kv_elems * 2));
    const long long buf_elems = s.nqkv + s.dq + s.h + 2ll * s.f + s.h;
    CHECK(cudaMalloc(&bufs, buf_elems * 2));
    unsigned* tbufs = nullptr;
    CHECK(cudaMalloc(&tbufs, buf_elems * 4));
    CHECK(cudaMemset(tbufs, 0, buf_elems * 4));  // tag 0: a launch's first tag is never 0 (later ones wrap past it)
    p.t_qkv = tbufs;
    p.t_attn = p.t_qkv + s.nqkv;
    p.t_o = p.t_attn + s.dq;
    p.t_gu = p.t_o + s.h;
    p.t_down = p.t_gu + 2ll * s.f;
    fill_bf16<<<1024, 256>>>(w, p.layer_elems * s.layers, 7u, 0.05f);
    fill_bf16<<<256, 256>>>(kv, kv_elems, 11u, 1.0f);
    fill_bf16<<<64, 256>>>(bufs, buf_elems, 13u, 1.0f);
    CHECK(cudaGetLastError());
    p.w = w;
    p.kv = kv;
    p.qkv_out = bufs;
    p.attn_out = p.qkv_out + s.nqkv;
    p.o_out = p.attn_out + s.dq;
    p.gu_out = p.o_out + s.h;
    p.down_out = p.gu_out + 2ll * s.f;
    const int instances = steps * s.layers * kOps;
    CHECK(cudaMalloc(&p.counters, instances * sizeof(unsigned)));
    unsigned* error_host = nullptr;  // host-mapped: readable after a trap
    CHECK(cudaHostAlloc(&error_host, sizeof(unsigned), cudaHostAllocMapped));
    *error_host = 0;
    CHECK(cudaHostGetDevicePointer(&p.error, error_host, 0));
    CHECK(cudaMalloc(&p.stats, 4 * kOps * sizeof(unsigned long long)));
    const double layer_bytes = p.layer_elems * 2.0;
    const double floor_us = layer_bytes / copy_bw * 1e6;
    std::printf("%s: %d layers, %.1f MB of weights per layer, floor %.2f us per layer (%.1f us for the layers)\n",
                s.name, s.layers, layer_bytes / 1e6, floor_us, floor_us * s.layers);
    std::printf("| variant (slots / in flight) | us per layer | floor / time | us per token's layers | per op, mean "
                "cycles of a block's thread 0: wait / input stage / weights / release |\n|---|---|---|---|---|\n");
    for (int vi = 0; vi < static_cast<int>(sizeof(variants) / sizeof(variants[0])); ++vi) {
      const Variant& v = variants[vi];
      if (only_variant >= 0 && vi != only_variant) continue;
      p.slots = v.slots;
      p.inflight = v.inflight;
      p.gated = v.gated;
      p.boundaries = v.boundaries;
      p.skip = v.skip;
      p.tagged = v.tagged;
      p.cpasync = v.cpasync;
      const int max_k = std::max(std::max(s.h, s.dq), s.f);
      const size_t smem = v.slots * kSlotBytes + max_k * 2 + kMaxRows * 4 + 2 * kMaxSlots * 8 + 16 + 8 * 4 * kOps;
      CHECK(cudaFuncSetAttribute(layer_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      CHECK(cudaMemset(p.stats, 0, 4 * kOps * sizeof(unsigned long long)));
      std::vector<float> ms_all;
      for (int r = 0; r < reps + 1; ++r) {
        CHECK(cudaMemset(p.counters, 0, instances * sizeof(unsigned)));
        // Consecutive launches' first tags differ (by instances mod 65,534) and are never 0.
        p.tag_base = 1u + static_cast<unsigned>(launches++ * instances % 65534);
        CHECK(cudaEventRecord(e0));
        layer_chain<<<blocks, kThreads, smem>>>(p);
        CHECK(cudaEventRecord(e1));
        const cudaError_t done = cudaEventSynchronize(e1);
        if (done != cudaSuccess) {  // codes: 1, 2 loader's ring; 3 poll; 4, 5, 8 gated / paused loader; 6 attention;
                                    // 7 a compute warp's slot; 9 tagged input
          std::fprintf(stderr, "%s: %s, watchdog code %u\n", v.name, cudaGetErrorString(done),
                       *static_cast<volatile unsigned*>(error_host));
          return 1;
        }
        CHECK(cudaGetLastError());
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0) ms_all.push_back(ms);
      }
      const double us = median(ms_all) * 1e3 / (steps * s.layers);
      unsigned long long stats[4 * kOps];
      CHECK(cudaMemcpy(stats, p.stats, sizeof(stats), cudaMemcpyDeviceToHost));
      // Mean cycles per block and op instance: the launches' steps × layers, every block's thread 0.
      const double per = static_cast<double>(reps + 1) * steps * s.layers * blocks;
      char detail[256];
      int at = 0;
      const char* names[kOps] = {"qkv", "", "o", "gu", "down"};
      for (int op : {0, 2, 3, 4})
        at += std::snprintf(detail + at, sizeof(detail) - at, " %s %.0f/%.0f/%.0f/%.0f", names[op],
                            stats[op * 4] / per, stats[op * 4 + 1] / per, stats[op * 4 + 2] / per,
                            stats[op * 4 + 3] / per);
      std::printf("| %s | %.2f | %.1f%% | %.1f |%s |\n", v.name, us, 100.0 * floor_us / us, us * s.layers, detail);
    }
    std::printf("\n");
    CHECK(cudaFree(w));
    CHECK(cudaFree(kv));
    CHECK(cudaFree(bufs));
    CHECK(cudaFree(tbufs));
    CHECK(cudaFree(p.counters));
    CHECK(cudaFreeHost(error_host));
    CHECK(cudaFree(p.stats));
  }
  return 0;
}
