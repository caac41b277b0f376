// What a task's notify costs the block that releases it: the megakernel's release (sync.cuh: a barrier, then thread
// 0's release add, which ptxas turns into MEMBAR.ALL.GPU + ATOM) timed by thread 0 from before the add to after it,
// while (a) nothing else runs, (b) the block's other warps have requested the next task's weights (32 KiB of cp.async,
// as the task loop's prologue does right after notify's barrier), issued before or after the barrier, (c) the
// block's own warp 0 has such requests outstanding too, and (d) the other SMs stream HBM at full rate, by plain
// loads or through GEMV-like cp.async rings (the other tiles of a big op still streaming when one finishes). Round 36
// traced Qwen3-8B's gate_up / down tiles' last notify at 1.4-2.5 us against 0.8-1.1 for q/k/v and o (docs/perf.md):
// which of these makes a release wait that long?
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o release_micro bench/release_micro.cu && ./release_micro
#include "micro_common.cuh"

namespace {

constexpr int kFloodBytes = 32 * 1024;
// Dynamic shared memory of both kernels: more than half an SM's, so that each SM holds one block of either.
constexpr int kBlockSmem = 120 * 1024;

// Streams `src` (`words` 16-byte words) across its blocks until *stop is set (the probes are done): plain 16-byte
// loads (`ring` 0), or as the GEMV tiles do, cp.async into a ring of 16 KiB stages with `ring` - 1 in flight.
__global__ void __launch_bounds__(kMicroThreads, 1) streamer(const uint4* src, long long words, const unsigned* stop,
                                                             unsigned* sink, int ring) {
  extern __shared__ __align__(16) char smem[];
  unsigned acc = 0;
  long long at = (static_cast<long long>(blockIdx.x) * kMicroThreads + threadIdx.x);
  const long long stride = static_cast<long long>(gridDim.x) * kMicroThreads;
  for (int round = 0; round < (1 << 20); ++round) {  // bounded: never a hang if the probes did not run beside it
    if (ring == 0) {
#pragma unroll 8
      for (int u = 0; u < 64; ++u) {
        const uint4 v = __ldcs(src + at);
        acc += v.x ^ v.w;
        at += stride;
        if (at >= words) at -= words;
      }
    } else {
      for (int u = 0; u < 16; ++u) {  // 16 stages of 4 x 16 bytes per thread
        char* stage = smem + ((round * 16 + u) % ring) * (kMicroThreads * 64);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(stage + (v * kMicroThreads + threadIdx.x) * 16));
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + at) : "memory");
          at += stride;
          if (at >= words) at -= words;
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        asm volatile("cp.async.wait_group 3;" ::: "memory");
      }
    }
    if ((round & 3) == 0 && ld_acquire(stop) != 0) break;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;
}

// mode bits: 1 = warps 1.. request kFloodBytes (their share) before the barrier, 2 = after it, 4 = warp 0 too.
__global__ void __launch_bounds__(kMicroThreads, 1) prober(unsigned* counter, unsigned short* out, const char* flood,
                                                           long long flood_src_bytes, int mode, int iters,
                                                           long long* cycles, unsigned* stop) {
  extern __shared__ __align__(16) char smem[];
  const int warp = threadIdx.x / 32;
  auto request = [&](int i) {
    const long long base = ((static_cast<long long>(i) * gridDim.x + blockIdx.x) * kFloodBytes) % flood_src_bytes;
    for (int o = threadIdx.x * 16; o < kFloodBytes; o += kMicroThreads * 16) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem + o));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(flood + base + o) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  const bool mine = warp > 0 || (mode & 4);
  for (int i = 0; i < iters; ++i) {
    if (warp == 0) out[(static_cast<long long>(i) * gridDim.x + blockIdx.x) * 32 + threadIdx.x] = static_cast<unsigned short>(i);
    if ((mode & 1) && mine) request(i);
    __syncthreads();
    if ((mode & 2) && mine && warp > 0) request(i);
    if (threadIdx.x == 0) {
      const long long t0 = clock64();
      red_release_add(counter, 1u);
      const long long t1 = clock64();
      cycles[static_cast<long long>(i) * gridDim.x + blockIdx.x] = t1 - t0;
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
    const long long until = clock64() + 4000;  // ~2 us apart: each release sees its own requests only
    while (clock64() < until) {
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(counter + 1, 1u) + 1 == gridDim.x) atomicExch(stop, 1u);
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("device: %s, %d SMs, clock attribute %.0f MHz\n\n", prop.name, sms, clock_khz / 1000.0);
  std::printf("| mode | probe SMs | streaming SMs (how) | release, cycles (median / p90) | us at the attribute clock |\n|---|---|---|---|---|\n");
  const long long src_bytes = 1ll << 30;
  char* flood;
  uint4* stream_src;
  CHECK(cudaMalloc(&flood, src_bytes));
  CHECK(cudaMemset(flood, 1, src_bytes));
  CHECK(cudaMalloc(&stream_src, src_bytes));
  CHECK(cudaMemset(stream_src, 2, src_bytes));
  const int iters = 400;
  unsigned *counter, *stop, *sink;
  unsigned short* out;
  long long* cycles;
  CHECK(cudaMalloc(&counter, 8));
  CHECK(cudaMalloc(&stop, 4));
  CHECK(cudaMalloc(&sink, 4 * sms));
  CHECK(cudaMalloc(&out, 2ll * iters * sms * 32));
  CHECK(cudaMalloc(&cycles, 8ll * iters * sms));
  CHECK(cudaFuncSetAttribute(prober, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmem));
  CHECK(cudaFuncSetAttribute(streamer, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmem));
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  const char* names[] = {"idle", "warps 1.. requested before the barrier", "warps 1.. request after the barrier",
                         "", "", "all warps requested before the barrier"};
  // streaming: none; half the SMs by plain loads; half, then all but 8, by a cp.async ring of 4 x 16 KiB (3 in
  // flight, a GEMV tile's depth).
  for (int streaming : {0, 1, 2, 3}) {
    const int streamers = streaming == 0 ? 0 : streaming == 3 ? sms - 8 : sms / 2, probes = sms - streamers;
    const int ring = streaming >= 2 ? 4 : 0;
    for (int mode : {0, 1, 2, 5}) {
      CHECK(cudaMemset(counter, 0, 8));
      CHECK(cudaMemset(stop, 0, 4));
      CHECK(cudaDeviceSynchronize());
      // Both kernels resident at once: one block per SM each (launch bounds, 1 block) on disjoint SMs.
      if (streamers) streamer<<<streamers, kMicroThreads, kBlockSmem, s1>>>(stream_src, src_bytes / 16, stop, sink, ring);
      prober<<<probes, kMicroThreads, kBlockSmem, s0>>>(counter, out, flood, src_bytes, mode, iters, cycles, stop);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<long long> c(static_cast<size_t>(iters) * probes);
      CHECK(cudaMemcpy(c.data(), cycles, c.size() * 8, cudaMemcpyDeviceToHost));
      std::vector<long long> kept(c.begin() + static_cast<long>(c.size() / 10), c.end());  // warm-up left out
      std::sort(kept.begin(), kept.end());
      const long long med = kept[kept.size() / 2], p90 = kept[kept.size() * 9 / 10];
      std::printf("| %s | %d | %d (%s) | %lld / %lld | %.2f / %.2f |\n", names[mode], probes, streamers,
                  streamers == 0 ? "-" : ring ? "cp.async ring" : "loads", med, p90,
                  med / (clock_khz / 1000.0), p90 / (clock_khz / 1000.0));
    }
  }
  return 0;
}
