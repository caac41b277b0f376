// Microbenchmark: a batched decode step's x stage when x was just written by other SMs, as in a step (the previous
// op's tiles store it, then every SM copies all of it into shared memory), against the same copy of an x nobody
// rewrites (x_stage_micro.cu's case, round 47: 128 KiB in ~1 us). Round 51's stamps put the x stage of a batch-32
// tensor-core tile at ~5 us inside the step: is the difference that x is fresh?
//   stale     x written once before the first iteration; every iteration only copies it.
//   fresh     every iteration each of the 132 blocks stores its slice of x (two buffers in turn), then copies all.
//   fresh/32  the same, x stored by 32 blocks only (a row each of 4 KiB at 128 KiB: the rmsnorm op's tiles at batch 32).
// Every iteration: the stores, a grid-wide counter hand-off (sync.cuh's protocol: barrier, release add, acquire poll,
// barrier), then thread 0 stamps the global timer, x lands by 16-byte cp.async from every thread (the tiles' way,
// stage_rows_async), a barrier, a second stamp. Reported: the median over blocks and iterations (after 8) of the
// stamps' difference, and the launch's time per iteration (CUDA events, median of 5 launches after a warm-up).
// Every block checks the first and last 16 bytes it copied against what the iteration stored.
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -o x_fresh_micro bench/x_fresh_micro.cu && ./x_fresh_micro
#include <cstdio>
#include <vector>

#include "micro_common.cuh"

namespace {

enum Mode { kStale, kFresh, kFresh32 };
const char* const kModeNames[] = {"stale", "fresh", "fresh/32"};

// The 32-bit word at byte offset o of iteration i's x (i < 0: the stale x).
__device__ __forceinline__ unsigned x_word(int i, int o) { return static_cast<unsigned>(o) * 2654435761u + static_cast<unsigned>(i); }

__global__ void __launch_bounds__(kMicroThreads, 1) x_fresh(char* x, unsigned* counter, int bytes, int iters, int mode,
                                                         unsigned long long* spans, unsigned* bad) {
  extern __shared__ __align__(128) char xs[];
  const int writers = mode == kFresh32 ? 32 : static_cast<int>(gridDim.x);
  const int per = (bytes / 16 + writers - 1) / writers * 16;  // whole 16-byte units per writer
  for (int i = 0; i < iters; ++i) {
    char* buf = x + (mode == kStale ? 0 : (i & 1) * static_cast<long long>(bytes));
    const int tag = mode == kStale ? -1 : i;
    if (mode != kStale && static_cast<int>(blockIdx.x) < writers)
      for (int o = blockIdx.x * per + threadIdx.x * 16; o < min(bytes, static_cast<int>(blockIdx.x + 1) * per); o += kMicroThreads * 16)
        *reinterpret_cast<uint4*>(buf + o) = make_uint4(x_word(tag, o), x_word(tag, o + 4), x_word(tag, o + 8), x_word(tag, o + 12));
    __syncthreads();
    if (threadIdx.x == 0) {
      red_release_add(counter, 1u);
      wait_counter(counter, gridDim.x * static_cast<unsigned>(i + 1));
    }
    __syncthreads();
    unsigned long long t0 = 0;
    if (threadIdx.x == 0) t0 = global_ns();
    for (int o = threadIdx.x * 16; o < bytes; o += kMicroThreads * 16) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(xs + o));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(buf + o) : "memory");
    }
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      spans[static_cast<size_t>(i) * gridDim.x + blockIdx.x] = global_ns() - t0;
      const unsigned* w = reinterpret_cast<const unsigned*>(xs);
      const int last = bytes / 4 - 4;
      if (w[0] != x_word(tag, 0) || w[last] != x_word(tag, last * 4)) atomicAdd(bad, 1u);
    }
  }
}

__global__ void fill_stale(char* x, int bytes) {
  for (int o = (blockIdx.x * blockDim.x + threadIdx.x) * 4; o < bytes; o += gridDim.x * blockDim.x * 4)
    *reinterpret_cast<unsigned*>(x + o) = x_word(-1, o);
}

}  // namespace

int main() {
  const int sms = print_device();
  const int iters = 200, launches = 5;
  char* x = nullptr;
  unsigned *counter = nullptr, *bad = nullptr;
  unsigned long long* spans = nullptr;
  const int max_bytes = 128 * 1024;
  CHECK(cudaMalloc(&x, 2 * max_bytes));
  CHECK(cudaMalloc(&counter, sizeof(unsigned)));
  CHECK(cudaMalloc(&bad, sizeof(unsigned)));
  CHECK(cudaMalloc(&spans, sizeof(unsigned long long) * iters * sms));
  CHECK(cudaFuncSetAttribute(x_fresh, cudaFuncAttributeMaxDynamicSharedMemorySize, max_bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::printf("%-9s %8s %14s %14s %6s\n", "mode", "x per SM", "x stage us", "iteration us", "bad");
  for (int bytes : {32 * 1024, 64 * 1024, 128 * 1024})
    for (int mode : {kStale, kFresh, kFresh32}) {
      std::vector<float> per_iter, stage;
      unsigned bad_total = 0;
      for (int l = 0; l <= launches; ++l) {
        fill_stale<<<sms, 256>>>(x, bytes);
        CHECK(cudaMemset(counter, 0, sizeof(unsigned)));
        CHECK(cudaMemset(bad, 0, sizeof(unsigned)));
        CHECK(cudaEventRecord(e0));
        x_fresh<<<sms, kMicroThreads, bytes>>>(x, counter, bytes, iters, mode, spans, bad);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaGetLastError());
        if (l == 0) continue;  // warm-up
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        per_iter.push_back(ms * 1000.0f / iters);
        std::vector<unsigned long long> h(static_cast<size_t>(iters) * sms);
        CHECK(cudaMemcpy(h.data(), spans, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
        for (size_t k = static_cast<size_t>(8) * sms; k < h.size(); ++k) stage.push_back(static_cast<float>(h[k]) / 1000.0f);
        unsigned b = 0;
        CHECK(cudaMemcpy(&b, bad, sizeof(b), cudaMemcpyDeviceToHost));
        bad_total += b;
      }
      std::printf("%-9s %5d KiB %14.2f %14.2f %6u\n", kModeNames[mode], bytes / 1024, median(stage), median(per_iter),
                  bad_total);
    }
  return 0;
}
