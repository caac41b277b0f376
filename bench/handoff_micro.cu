// Microbenchmark of an op boundary with no arithmetic: what it costs every SM of the GPU to hand a decode step's
// activation row (every block writes a slice; every block then needs the whole row in shared memory) to the next
// op, by several protocols, in a chain of `iters` such boundaries inside one persistent launch.
//
//   counter  the megakernel's (sync.cuh): the slice stored, a block barrier, thread 0 adds 1 to a counter with
//            release semantics; the consumer's thread 0 polls the counter with acquire loads (backing off as
//            weft_poll_event does), a block barrier, then every thread loads its part of the row.
//   tagged   each 32-bit word carries a bf16 value and a 16-bit tag of the boundary that wrote it (NCCL's LL
//            protocol, narrowed to 16 bits): the producer stores the words with relaxed stores, no barrier or
//            counter; the consumer's threads load their words and load again until every tag is current, then one
//            block barrier. The poll and the data are one round trip, and nothing waits for a release; but nothing
//            the producer did besides the words is ordered before the consumer either.
//   tagged, ordered  the same with the counter protocol's ordering: the producer's threads store their slice's
//            plain values too, then each makes one release fence before its word stores (release), and/or the
//            consumer's loads are acquires (acquire), or it spins relaxed and reloads its words once with acquires.
//   counter, row in tagged words loaded with the poll  the counter protocol, the row also written as tagged words:
//            the consumer's threads request their words before thread 0 polls, so that the row's load is not a
//            round trip after the poll's.
// Each is run idle and under a weight flood: after its slice, every block requests 16 or 32 KiB of a 1 GiB buffer by
// cp.async, as a decode task's prologue requests its first weight stages right at the boundary (task_loop.cuh),
// landed at the boundary's end or during the next one (the stream going on through the hand-off).
//
// The time per boundary is the launch's time over `iters` (CUDA events, median of several launches).
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o handoff_micro bench/handoff_micro.cu && ./handoff_micro
#include <cuda_runtime.h>

#include "micro_common.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>



// Block b's slice of boundary i's row as tagged words: word e is (value << 16) | tag.
__device__ __forceinline__ void store_tagged_slice(unsigned* r, int n, int per, unsigned acc, int i, unsigned tag) {
  for (int j = threadIdx.x; j < per; j += kMicroThreads) {
    const int e = blockIdx.x * per + j;
    if (e < n) st_relaxed(r + e, (static_cast<unsigned>(static_cast<unsigned short>(acc + i + j)) << 16) | tag);
  }
}
// Whether all 8 words of a thread's two 16-byte loads carry boundary tag `tag`.
__device__ __forceinline__ bool all_tagged(const uint4& a, const uint4& b, unsigned tag) {
  return (a.x & 0xffffu) == tag && (a.y & 0xffffu) == tag && (a.z & 0xffffu) == tag && (a.w & 0xffffu) == tag &&
         (b.x & 0xffffu) == tag && (b.y & 0xffffu) == tag && (b.z & 0xffffu) == tag && (b.w & 0xffffu) == tag;
}
// The values of those 8 words into xs[e, e + 8).
__device__ __forceinline__ void untag_into(unsigned short* xs, int e, const uint4& a, const uint4& b) {
  const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int k = 0; k < 8; ++k) xs[e + k] = static_cast<unsigned short>(w[k] >> 16);
}

// The same chain with tagged words: word e of boundary i is (value << 16) | (i & 0xffff).
__global__ void __launch_bounds__(kMicroThreads, 1) tagged_chain(unsigned* row, int n, int iters, unsigned* sink,
                                                            const char* flood, long long flood_src_bytes, int flood_bytes,
                                                            bool lazy, int ordered, unsigned short* plain) {
  // ordered: 0 relaxed; 1 release fence + acquire loads; 2 release fence only; 3 acquire loads only; 4 release fence,
  // relaxed spin, then one acquire reload of the words.
  __shared__ unsigned short xs[8192];
  const int per = (n + gridDim.x - 1) / gridDim.x;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned* r = row + (i & 1) * n;
    const unsigned tag = static_cast<unsigned>(i) & 0xffffu;
    if (ordered) {  // the plain row first, then one release fence per thread before its words
      for (int j = threadIdx.x; j < per; j += kMicroThreads) {
        const int e = blockIdx.x * per + j;
        if (e < n) plain[(i & 1) * n + e] = static_cast<unsigned short>(acc + i + j);
      }
      if (threadIdx.x < per && ordered != 3) fence_acq_rel_gpu();
    }
    store_tagged_slice(r, n, per, acc, i, tag);
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    // Each thread's 8 words (two 16-byte loads), reloaded until all 8 carry this boundary's tag.
    const bool acq = ordered == 1 || ordered == 3;
    for (int e = threadIdx.x * 8; e < n; e += kMicroThreads * 8) {
      uint4 a, b;
      for (;;) {
        a = acq ? ld_acquire_v4(r + e) : ld_relaxed_v4(r + e);
        b = acq ? ld_acquire_v4(r + e + 4) : ld_relaxed_v4(r + e + 4);
        if (all_tagged(a, b, tag)) break;
      }
      if (ordered == 4) {
        a = ld_acquire_v4(r + e);
        b = ld_acquire_v4(r + e + 4);
      }
      untag_into(xs, e, a, b);
    }
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
    __syncthreads();  // xs is rewritten by the next boundary
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}


// The counter protocol with the row carried in tagged words as well: the producer stores its slice's words (relaxed),
// then releases the counter as counter_chain does; the consumer's threads load their words, thread 0 polls the
// counter, each thread reloads its words until every tag is current, one barrier. The ordering is the counter's;
// the row's load goes out with the poll instead of after it.
__global__ void __launch_bounds__(kMicroThreads, 1) counter_tagged_chain(unsigned* row, unsigned* counter, int n, int iters,
                                                                    unsigned* sink, const char* flood,
                                                                    long long flood_src_bytes, int flood_bytes, bool lazy) {
  __shared__ unsigned short xs[8192];
  const int per = (n + gridDim.x - 1) / gridDim.x;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned* r = row + (i & 1) * n;
    const unsigned tag = static_cast<unsigned>(i) & 0xffffu;
    store_tagged_slice(r, n, per, acc, i, tag);
    __syncthreads();
    if (threadIdx.x == 0) red_release_add(counter, 1u);
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    // Up to two chunks of 8 words per thread (rows up to 4096).
    uint4 a[2] = {}, b[2] = {};
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int e = (threadIdx.x + c * kMicroThreads) * 8;
      if (e < n) {
        a[c] = ld_relaxed_v4(r + e);
        b[c] = ld_relaxed_v4(r + e + 4);
      }
    }
    if (threadIdx.x == 0) wait_counter(counter, static_cast<unsigned>(gridDim.x) * (i + 1));
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int e = (threadIdx.x + c * kMicroThreads) * 8;
      if (e >= n) continue;
      for (;;) {
        if (all_tagged(a[c], b[c], tag)) break;
        a[c] = ld_relaxed_v4(r + e);
        b[c] = ld_relaxed_v4(r + e + 4);
      }
      untag_into(xs, e, a[c], b[c]);
    }
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
    __syncthreads();
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

const char* const kProto[] = {"counter (release add, acquire poll, load)", "tagged words", "tagged, release/acquire",
                              "tagged, release only", "tagged, acquire only", "tagged, release, relaxed spin, acquire reload",
                              "counter, row in tagged words loaded with the poll"};

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n\n| protocol | row (bf16) | flood per SM | per boundary |\n|---|---|---|---|\n", prop.name, sms);
  const int iters = 2000;
  const long long flood_src_bytes = 1ll << 30;
  char* flood;
  CHECK(cudaMalloc(&flood, flood_src_bytes));
  CHECK(cudaMemset(flood, 1, flood_src_bytes));
  const int max_flood = 2 * 48 * 1024;
  CHECK(cudaFuncSetAttribute(counter_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, max_flood));
  CHECK(cudaFuncSetAttribute(tagged_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, max_flood));
  CHECK(cudaFuncSetAttribute(counter_tagged_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, max_flood));
  unsigned short* row16;
  unsigned *row32, *counter, *sink;
  CHECK(cudaMalloc(&row16, 2 * 8192 * 2));
  CHECK(cudaMalloc(&row32, 2 * 8192 * 4));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMalloc(&sink, sms * 4));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int lazy = 0; lazy < 2; ++lazy)
  for (int fl : {0, 16 * 1024, 32 * 1024})
  for (int n : {1024, 2048, 4096}) {
    if (lazy && fl == 0) continue;
    for (int proto = 0; proto < 7; ++proto) {
      std::vector<float> us;
      for (int rep = 0; rep < 7; ++rep) {
        CHECK(cudaMemset(counter, 0, 4));
        // Tags of 0xffff everywhere: no boundary of the first 65535 matches before it is written.
        CHECK(cudaMemset(row32, 0xff, 2 * 8192 * 4));
        CHECK(cudaEventRecord(e0));
        if (proto == 6) counter_tagged_chain<<<sms, kMicroThreads, 2 * fl>>>(row32, counter, n, iters, sink, flood, flood_src_bytes, fl, lazy);
        else if (proto == 0) counter_chain<<<sms, kMicroThreads, 2 * fl>>>(row16, counter, n, iters, sink, flood, flood_src_bytes, fl, lazy);
        else tagged_chain<<<sms, kMicroThreads, 2 * fl>>>(row32, n, iters, sink, flood, flood_src_bytes, fl, lazy,
                                                          proto - 1, row16);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) us.push_back(ms * 1e3f / iters);
      }
      std::printf("| %s | %d | %d KiB%s | %.3f us |\n", kProto[proto],
                  n, fl / 1024, lazy ? ", landing during the next boundary" : "", median(us));
    }
  }
  CHECK(cudaGetLastError());
  return 0;
}
