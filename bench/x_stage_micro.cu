// Microbenchmark: a batched decode step's x stage — every SM copying the same activation rows (batch × K bf16,
// 16–192 KiB) from L2 into its shared memory at once, as each tensor-core tile does before its weight loop
// (docs/perf.md round 32: 5–6 µs of every batch-32 op, ~22 µs of a ~130 µs Llama-3.2-1B layer) — by the tiles'
// way and by bulk copies, and multicast inside thread-block clusters, so that each cluster reads x from L2 once:
//   cp.async   every thread copies its 16-byte units (cp.async.cg), waits for its group, a block barrier.
//   bulk       thread 0 requests x in 16 KiB bulk copies (cp.async.bulk) completing on one mbarrier.
//   multicast  block r of a cluster of S requests chunks r, r + S, … with .multicast::cluster to all S blocks;
//              each block's mbarrier counts the whole row's bytes.
//   barrier    none of it: what the iteration's barriers cost alone.
// Sources: the same x for every block (the real case, L2-resident after the first iteration), or a distinct x per
// block (L2-resident too: 132 × 192 KiB < L2), to tell one line read by all SMs from bandwidth.
// Then, in the order question (x_after_weights): the tile's own weight prologue (48 KiB per SM from a 1 GiB buffer
// in HBM, three cp.async groups) issued before x, as the tensor-core tiles do (prologue before the wait, x after,
// one wait_group 0 for both), against x issued first and waited for alone (wait_group 3, its group the oldest),
// and against the weights issued ~1 µs before x (a prologue that had part of a wait to land); thread 0's clock64
// from x's first request to x landed in every thread (a barrier), mean per block, median over blocks.
// Each iteration ends with a cluster barrier in every mode (cluster sizes 1, 2, 4; a multicast must not overwrite a
// peer's x before the peer is done), so the modes differ only in how x lands. Time per iteration = a launch's time
// over `iters` (CUDA events, median of 6 launches after one warm-up); the first 16 bytes of every block's copy are
// checked against the source after the last iteration.
//
// Build and run on the GPU machine (sm_90a: multicast bulk copies):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o x_stage_micro bench/x_stage_micro.cu && ./x_stage_micro
#include <cooperative_groups.h>
#include <cuda/ptx>

#include <cstring>

#include "micro_common.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kChunk = 16 * 1024;

enum Mode { kCpAsync, kBulk, kMulticast, kBarrier };

__global__ void __launch_bounds__(kMicroThreads, 1) x_stage(const char* x, long long per_block_stride, int bytes, int iters,
                                                       int mode, uint4* check) {
  extern __shared__ __align__(128) char xs[];
  __shared__ __align__(8) uint64_t bar;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned S = cluster.num_blocks(), me = cluster.block_rank();
  const char* src = x + per_block_stride * blockIdx.x;
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(&bar, 1);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  cluster.sync();
  for (int i = 0; i < iters; ++i) {
    if (mode == kCpAsync) {
      for (int o = threadIdx.x * 16; o < bytes; o += kMicroThreads * 16) {
        const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(xs + o));
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + o) : "memory");
      }
      asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
      __syncthreads();
    } else if (mode == kBulk || mode == kMulticast) {
      if (threadIdx.x == 0) {
        cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar,
                                             static_cast<uint32_t>(bytes));
        const int chunks = (bytes + kChunk - 1) / kChunk;
        for (int c = mode == kBulk ? 0 : static_cast<int>(me); c < chunks; c += mode == kBulk ? 1 : static_cast<int>(S)) {
          const uint32_t n = static_cast<uint32_t>(min(kChunk, bytes - c * kChunk));
          if (mode == kBulk)
            cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, xs + c * kChunk, src + c * kChunk, n, &bar);
          else
            cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, xs + c * kChunk, src + c * kChunk, n, &bar,
                                     static_cast<uint16_t>((1u << S) - 1u));
        }
        while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, &bar,
                                                    static_cast<uint32_t>(i & 1))) {
        }
      }
      __syncthreads();
    }
    cluster.sync();  // nobody's x is overwritten (a multicast's) before its block is done with it
  }
  if (threadIdx.x == 0 && mode != kBarrier) check[blockIdx.x] = *reinterpret_cast<const uint4*>(xs);
}


enum Order { kXAlone, kWeightsThenX, kXThenWeights, kWeightsEarly };

// Requests `bytes` of src into dst by 16-byte cp.async from every thread, as `groups` groups.
__device__ __forceinline__ void request(char* dst, const char* src, int bytes, int groups) {
  const int per = bytes / groups;
  for (int g = 0; g < groups; ++g) {
    for (int o = threadIdx.x * 16; o < per; o += kMicroThreads * 16) {
      const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst + g * per + o));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + g * per + o) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
}

__global__ void __launch_bounds__(kMicroThreads, 1) x_after_weights(const char* x, int bytes, const char* weights,
                                                               long long weight_bytes, int wbytes, int iters, int order,
                                                               long long* cycles) {
  extern __shared__ __align__(128) char xs[];
  char* ws = xs + bytes;
  long long sum = 0;
  for (int i = 0; i < iters; ++i) {
    // Whole wbytes pieces of the buffer, in turn (48 KiB does not divide 1 GiB: a byte offset modulo it would run past the end).
    const char* w = weights + ((static_cast<long long>(i) * gridDim.x + blockIdx.x) % (weight_bytes / wbytes)) * wbytes;
    if (order == kWeightsThenX || order == kWeightsEarly) request(ws, w, wbytes, 3);
    if (order == kWeightsEarly) {
      const long long t = clock64();
      while (clock64() - t < 2000) {
      }
    }
    __syncthreads();
    const long long t0 = clock64();
    request(xs, x, bytes, 1);
    if (order == kXThenWeights) {
      request(ws, w, wbytes, 3);
      asm volatile("cp.async.wait_group 3;" ::: "memory");  // x's group, the oldest
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();
    sum += clock64() - t0;
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
  }
  if (threadIdx.x == 0) cycles[blockIdx.x] = sum / iters;
}

}  // namespace

int main() {
  const int sms = print_device();
  const int max_bytes = 192 * 1024, smem = max_bytes, iters = 200;
  CHECK(cudaFuncSetAttribute(x_stage, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(x_stage, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  char* x;
  const long long stride = max_bytes;
  CHECK(cudaMalloc(&x, stride * sms));
  std::vector<unsigned char> hx(static_cast<size_t>(stride) * sms);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  CHECK(cudaMemcpy(x, hx.data(), hx.size(), cudaMemcpyHostToDevice));
  uint4* check;
  CHECK(cudaMalloc(&check, sms * sizeof(uint4)));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const char* const names[] = {"cp.async", "bulk", "multicast", "barrier only"};
  std::printf("| x per SM | source | cluster | blocks | mode | per x stage | per SM | over the chip | check |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int bytes : {16 * 1024, 32 * 1024, 64 * 1024, 128 * 1024, 192 * 1024})
    for (int distinct = 0; distinct < 2; ++distinct)
      for (int s : {1, 2, 4})
        for (int mode = 0; mode < 4; ++mode) {
          if (mode == kMulticast && (s == 1 || distinct)) continue;
          if (mode == kBarrier && distinct) continue;
          cudaLaunchAttribute attr;
          cudaLaunchConfig_t cfg = cluster_config(s * 64, s, smem, &attr);
          int clusters = 0;
          CHECK(cudaOccupancyMaxActiveClusters(&clusters, x_stage, &cfg));
          const int blocks = clusters * s;
          cfg.gridDim = dim3(blocks);
          std::vector<float> us;
          for (int rep = 0; rep < 7; ++rep) {
            CHECK(cudaMemset(check, 0, sms * sizeof(uint4)));
            CHECK(cudaEventRecord(e0));
            CHECK(cudaLaunchKernelEx(&cfg, x_stage, static_cast<const char*>(x), distinct ? stride : 0ll, bytes, iters, mode, check));
            CHECK(cudaEventRecord(e1));
            CHECK(cudaEventSynchronize(e1));
            float ms;
            CHECK(cudaEventElapsedTime(&ms, e0, e1));
            if (rep > 0) us.push_back(ms * 1e3f / iters);
          }
          bool ok = true;
          if (mode != kBarrier) {
            std::vector<uint4> h(blocks);
            CHECK(cudaMemcpy(h.data(), check, blocks * sizeof(uint4), cudaMemcpyDeviceToHost));
            for (int b = 0; b < blocks; ++b)
              ok = ok && std::memcmp(&h[b], hx.data() + (distinct ? stride * b : 0), sizeof(uint4)) == 0;
          }
          const float t = median(us);
          std::printf("| %d KiB | %s | %d | %d | %s | %.3f us | %.1f GB/s | %.2f TB/s | %s |\n", bytes / 1024,
                      distinct ? "distinct" : "same", s, blocks, names[mode], t, bytes / (t * 1e3f),
                      bytes * static_cast<float>(blocks) / (t * 1e6f), mode == kBarrier ? "-" : ok ? "ok" : "MISMATCH");
        }
  // The order question: x behind the tile's own weight prologue, or ahead of it.
  const long long weight_bytes = 1ll << 30;
  char* weights;
  CHECK(cudaMalloc(&weights, weight_bytes));
  CHECK(cudaMemset(weights, 1, weight_bytes));
  const int wbytes = 48 * 1024;
  CHECK(cudaFuncSetAttribute(x_after_weights, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024 + wbytes));
  long long* cycles;
  CHECK(cudaMalloc(&cycles, sms * sizeof(long long)));
  const char* const orders[] = {"x alone", "weights (48 KiB) then x, wait for all", "x then weights, wait for x",
                                "weights ~1 us before x, wait for all"};
  std::printf("\n| x per SM | order | x landed (thread 0's clock64, median block) | at 1.98 GHz |\n|---|---|---|---|\n");
  for (int bytes : {32 * 1024, 128 * 1024})
    for (int order = 0; order < 4; ++order) {
      std::vector<float> med;
      for (int rep = 0; rep < 4; ++rep) {
        x_after_weights<<<sms, kMicroThreads, bytes + wbytes>>>(x, bytes, weights, weight_bytes, wbytes, iters, order, cycles);
        CHECK(cudaDeviceSynchronize());
        std::vector<long long> h(sms);
        CHECK(cudaMemcpy(h.data(), cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost));
        std::vector<float> f(h.begin(), h.end());
        if (rep > 0) med.push_back(median(f));
      }
      const float c = median(med);
      std::printf("| %d KiB | %s | %.0f cycles | %.2f us |\n", bytes / 1024, orders[order], c, c / 1980.0f);
    }
  CHECK(cudaGetLastError());
  return 0;
}
