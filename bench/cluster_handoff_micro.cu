// Microbenchmark: what an op boundary costs inside a thread-block cluster (distributed shared memory and the
// cluster's hardware barrier) against the megakernel's grid-wide counter boundary, idle and under a decode task's
// weight flood — the premise of a tensor-parallel layout of a decode layer inside one GPU (docs/perf.md round 47):
// each cluster owns some kv heads and a slice of the MLP's intermediate dim, so that of a layer's five boundaries
// only the two after the row-parallel projections (o, down) cross the grid, as an all-reduce; q/k/v → attention,
// attention → o and gate/up → down stay inside a cluster.
//
// Chains of `iters` boundaries in one persistent launch (every block one SM), each boundary a true dependency (the
// next slice's values depend on the row read):
//   grid      the megakernel's counter protocol (micro_common.cuh's counter_chain): every block stores a slice of a
//             row of n bf16 to global memory, a block barrier, thread 0's release add; thread 0 polls with acquire
//             loads, a barrier, then every block loads the whole row.
//   pull      inside a cluster of S blocks: each block stores its n / S slice into its own shared memory, the
//             cluster barrier (barrier.cluster.arrive.release / wait.acquire), then each block loads the whole row
//             from its S peers' shared memory (ld.shared::cluster through map_shared_rank).
//   push      inside a cluster: each block stores its slice into every peer's shared memory with st.async, which
//             completes bytes on the peer's mbarrier; each block waits on its own mbarrier (acquire, cluster scope)
//             for the whole row. No barrier and no round trip to L2: the data is the signal.
//   allreduce the grid boundary a tensor-parallel layer keeps: each of the G clusters holds a partial row of n f32
//             (block r of a cluster its slice r), stored to global memory, the grid counter released and polled as
//             in `grid`; then block r sums the G partials of its slice r (G × n / S f32 from L2), stores the sum
//             into its own shared memory, the cluster barrier, and loads the whole row from its peers as in `pull`.
//   allreduce, push gather  the same, but block r pushes its summed slice into every peer's shared memory with
//             st.async (as `push`) instead of the cluster barrier and loads.
//   allreduce, red.add  block r of cluster c adds its slice of the cluster's partial into one f32 row in global memory
//             (red.global.add.v4.f32, every element G adds), a block barrier, the grid counter released and polled,
//             then every block loads the whole f32 row: one grid boundary and no cluster step, in a summation order
//             that changes from run to run (exact here: the partials are small integers). Three accumulator rows in
//             turn, each zeroed by its blocks two boundaries before its next use.
//   grid, poller floods none  `grid` with warp 0 (thread 0 polls) requesting none of the flood, warps 1-7 all of it;
//             and the same polling with relaxed loads and one acquire fence after the last.
//   flood alone  no hand-off: each boundary only requests its flood and waits for it (the floor under a flood).
// flood: after its release (or its stores, in `push`) each block requests that many bytes of a 1 GiB buffer by
// cp.async (a decode task's first weight stages, task_loop.cuh), landed at the boundary's end or (lazy) during the
// next boundary; the DSMEM hand-offs do not touch L2, the grid ones queue behind the flood.
//
// Each chain's result is checked against the host's replay of it (every block must end with the same value), so a
// protocol that raced would be reported, not timed. Time per boundary = a launch's time over `iters` (CUDA events,
// median of 6 launches after one warm-up).
//
// Build and run on the GPU machine (sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o cluster_handoff_micro bench/cluster_handoff_micro.cu && ./cluster_handoff_micro
#include <cooperative_groups.h>
#include <cuda/ptx>

#include "micro_common.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int kMaxRow = 4096;  // bf16 elements of a row

__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// Slice value of element j of the block's slice at boundary i, after a row whose check value was acc.
__host__ __device__ __forceinline__ unsigned short slice_value(unsigned acc, int i, int j) {
  return static_cast<unsigned short>(acc + static_cast<unsigned>(i) + static_cast<unsigned>(j));
}
// Cluster c's partial of element j of a slice (allreduce): small integers, so that the f32 sum is exact.
__host__ __device__ __forceinline__ float partial_value(unsigned acc, int i, int j, int c) {
  return static_cast<float>((acc + static_cast<unsigned>(i) + static_cast<unsigned>(j) + static_cast<unsigned>(c)) & 0xffu);
}

// Loads the whole row (n bf16, slices of `per` in the S blocks' `buf`) from the cluster's shared memory into xs.
__device__ __forceinline__ void pull_row(cg::cluster_group& cluster, unsigned short* buf, unsigned short* xs, int n, int per) {
  for (int e = threadIdx.x * 8; e < n; e += kMicroThreads * 8) {
    const unsigned rank = static_cast<unsigned>(e / per);
    const uint4* src = reinterpret_cast<const uint4*>(cluster.map_shared_rank(buf + e % per, rank));
    *reinterpret_cast<uint4*>(xs + e) = *src;
  }
}

__global__ void __launch_bounds__(kMicroThreads, 1) pull_chain(int n, int iters, unsigned* sink, const char* flood,
                                                          long long flood_src_bytes, int flood_bytes, bool lazy) {
  __shared__ __align__(16) unsigned short buf[2][kMaxRow];
  __shared__ __align__(16) unsigned short xs[kMaxRow];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const int per = n / S;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned short* b = buf[i & 1];  // two buffers: boundary i's while peers may still read boundary i - 1's
    for (int j = threadIdx.x; j < per; j += kMicroThreads) b[j] = slice_value(acc, i, j);
    cluster_arrive_release();
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    cluster_wait_acquire();
    pull_row(cluster, b, xs, n, per);
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
    __syncthreads();  // xs is rewritten by the next boundary
  }
  cluster.sync();  // no block leaves while a peer may still read its shared memory
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

__global__ void __launch_bounds__(kMicroThreads, 1) push_chain(int n, int iters, unsigned* sink, const char* flood,
                                                          long long flood_src_bytes, int flood_bytes, bool lazy) {
  __shared__ __align__(16) unsigned short buf[2][kMaxRow];
  __shared__ __align__(8) uint64_t bar[2];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const unsigned me = cluster.block_rank();
  const int per = n / S;
  if (threadIdx.x == 0) {
    cuda::ptx::mbarrier_init(&bar[0], 1);
    cuda::ptx::mbarrier_init(&bar[1], 1);
    // Boundaries 0 and 1 expect their rows: the peers may push before this block gets there.
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar[0], n * 2);
    cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar[1], n * 2);
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  cluster.sync();  // every barrier initialized before any peer completes bytes on it
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    const int k = i & 1;
    // Slice values, 8 bf16 (16 bytes) per thread and peer: thread t pushes unit t % units to peer t / units.
    const int units = per / 8;
    for (int t = threadIdx.x; t < units * S; t += kMicroThreads) {
      const int u = t % units, peer = t / units;
      uint32_t w[4];
      for (int q = 0; q < 4; ++q)
        w[q] = static_cast<uint32_t>(slice_value(acc, i, u * 8 + 2 * q)) |
               (static_cast<uint32_t>(slice_value(acc, i, u * 8 + 2 * q + 1)) << 16);
      uint32_t* dst = reinterpret_cast<uint32_t*>(cluster.map_shared_rank(&buf[k][me * per + u * 8], peer));
      uint64_t* rbar = cluster.map_shared_rank(&bar[k], peer);
      cuda::ptx::st_async(dst, w, rbar);
    }
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    if (threadIdx.x == 0)
      while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, &bar[k],
                                                  static_cast<uint32_t>((i >> 1) & 1))) {
      }
    __syncthreads();
    acc = buf[k][(i * 7) % n] + buf[k][n - 1];
    __syncthreads();  // every thread has read buf[k] before it is armed for boundary i + 2
    // Boundary i + 2 writes this buffer again; its peers push it only after every block's boundary i + 1 slice,
    // which each block computes after reading boundary i: buf[k] is free by then.
    if (threadIdx.x == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar[k], n * 2);
    flood_drain(lazy);
  }
  cluster.sync();
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

// The all-reduce's grid step of boundary i: block r of cluster c stores its slice of the cluster's partial row into
// partials [G][n] (two boundaries' worth), releases the grid counter, requests its flood, polls, then sums the G
// partials of its slice r into dst (u16; coherent loads: the acquire ordered the producers' stores).
__device__ __forceinline__ void allreduce_grid_step(float* partials, unsigned* counter, int n, int G, int c, int r, int per,
                                                    unsigned acc, int i, unsigned short* dst, const char* flood,
                                                    long long flood_src_bytes, int flood_bytes) {
  float* p = partials + static_cast<size_t>(i & 1) * G * n;
  for (int j = threadIdx.x; j < per; j += kMicroThreads) p[static_cast<size_t>(c) * n + r * per + j] = partial_value(acc, i, j, c);
  __syncthreads();
  if (threadIdx.x == 0) red_release_add(counter, 1u);
  flood_issue(flood, flood_src_bytes, flood_bytes, i);
  if (threadIdx.x == 0) wait_counter(counter, gridDim.x * static_cast<unsigned>(i + 1));
  __syncthreads();
  for (int j = threadIdx.x * 4; j < per; j += kMicroThreads * 4) {
    float sum[4] = {0.f, 0.f, 0.f, 0.f};
    for (int g = 0; g < G; ++g) {
      const uint4 v = ld_relaxed_v4(reinterpret_cast<const unsigned*>(p + static_cast<size_t>(g) * n + r * per + j));
      sum[0] += __uint_as_float(v.x);
      sum[1] += __uint_as_float(v.y);
      sum[2] += __uint_as_float(v.z);
      sum[3] += __uint_as_float(v.w);
    }
    for (int q = 0; q < 4; ++q) dst[j + q] = static_cast<unsigned short>(sum[q]);
  }
}

__global__ void __launch_bounds__(kMicroThreads, 1) allreduce_chain(float* partials, unsigned* counter, int n, int iters,
                                                               unsigned* sink, const char* flood, long long flood_src_bytes,
                                                               int flood_bytes, bool lazy) {
  __shared__ __align__(16) unsigned short buf[2][kMaxRow];
  __shared__ __align__(16) unsigned short xs[kMaxRow];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const int G = static_cast<int>(gridDim.x) / S, c = static_cast<int>(blockIdx.x) / S;
  const int r = static_cast<int>(cluster.block_rank());
  const int per = n / S;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned short* b = buf[i & 1];
    allreduce_grid_step(partials, counter, n, G, c, r, per, acc, i, b, flood, flood_src_bytes, flood_bytes);
    cluster_arrive_release();
    cluster_wait_acquire();
    pull_row(cluster, b, xs, n, per);
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
    __syncthreads();
  }
  cluster.sync();
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}


// Block r's summed slice (per f32 -> u16) pushed into every peer's buffer with st.async (16 bytes per thread and peer).
__device__ __forceinline__ void push_slice(cg::cluster_group& cluster, unsigned short* buf, uint64_t* bar,
                                           const unsigned short* mine, int per, int S, unsigned me) {
  const int units = per / 8;
  for (int t = threadIdx.x; t < units * S; t += kMicroThreads) {
    const int u = t % units, peer = t / units;
    const uint4 v = *reinterpret_cast<const uint4*>(mine + u * 8);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t* dst = reinterpret_cast<uint32_t*>(cluster.map_shared_rank(buf + me * per + u * 8, peer));
    cuda::ptx::st_async(dst, w, cluster.map_shared_rank(bar, peer));
  }
}

__global__ void __launch_bounds__(kMicroThreads, 1) allreduce_push_chain(float* partials, unsigned* counter, int n, int iters,
                                                                    unsigned* sink, const char* flood,
                                                                    long long flood_src_bytes, int flood_bytes, bool lazy) {
  __shared__ __align__(16) unsigned short buf[2][kMaxRow];
  __shared__ __align__(16) unsigned short mine[kMaxRow];
  __shared__ __align__(8) uint64_t bar[2];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const int G = static_cast<int>(gridDim.x) / S, c = static_cast<int>(blockIdx.x) / S;
  const unsigned me = cluster.block_rank();
  const int r = static_cast<int>(me);
  const int per = n / S;
  if (threadIdx.x == 0) {
    for (int k = 0; k < 2; ++k) {
      cuda::ptx::mbarrier_init(&bar[k], 1);
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar[k], n * 2);
    }
    cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  }
  cluster.sync();
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    const int k = i & 1;
    allreduce_grid_step(partials, counter, n, G, c, r, per, acc, i, mine, flood, flood_src_bytes, flood_bytes);
    __syncthreads();
    push_slice(cluster, buf[k], &bar[k], mine, per, S, me);
    if (threadIdx.x == 0)
      while (!cuda::ptx::mbarrier_try_wait_parity(cuda::ptx::sem_acquire, cuda::ptx::scope_cluster, &bar[k],
                                                  static_cast<uint32_t>((i >> 1) & 1))) {
      }
    __syncthreads();
    acc = buf[k][(i * 7) % n] + buf[k][n - 1];
    __syncthreads();
    if (threadIdx.x == 0)
      cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cluster, cuda::ptx::space_shared, &bar[k], n * 2);
    flood_drain(lazy);
  }
  cluster.sync();
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

__device__ __forceinline__ void red_add_v4(float* p, float a, float b, float c, float d) {
  asm volatile("red.relaxed.gpu.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// accum: three rows of n f32, zeroed before the launch.
__global__ void __launch_bounds__(kMicroThreads, 1) allreduce_red_chain(float* accum, unsigned* counter, int n, int iters,
                                                                   unsigned* sink, const char* flood,
                                                                   long long flood_src_bytes, int flood_bytes, bool lazy) {
  __shared__ __align__(16) unsigned short xs[kMaxRow];
  cg::cluster_group cluster = cg::this_cluster();
  const int S = static_cast<int>(cluster.num_blocks());
  const int c = static_cast<int>(blockIdx.x) / S, r = static_cast<int>(cluster.block_rank());
  const int per = n / S;
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    float* a = accum + static_cast<size_t>(i % 3) * n;
    for (int j = threadIdx.x * 4; j < per; j += kMicroThreads * 4)
      red_add_v4(a + r * per + j, partial_value(acc, i, j, c), partial_value(acc, i, j + 1, c),
                 partial_value(acc, i, j + 2, c), partial_value(acc, i, j + 3, c));
    __syncthreads();
    if (threadIdx.x == 0) red_release_add(counter, 1u);
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    if (threadIdx.x == 0) wait_counter(counter, gridDim.x * static_cast<unsigned>(i + 1));
    __syncthreads();
    for (int e = threadIdx.x * 4; e < n; e += kMicroThreads * 4) {
      const uint4 v = ld_relaxed_v4(reinterpret_cast<const unsigned*>(a + e));
      xs[e] = static_cast<unsigned short>(__uint_as_float(v.x));
      xs[e + 1] = static_cast<unsigned short>(__uint_as_float(v.y));
      xs[e + 2] = static_cast<unsigned short>(__uint_as_float(v.z));
      xs[e + 3] = static_cast<unsigned short>(__uint_as_float(v.w));
    }
    // Every block has read row (i - 1) % 3 (it released boundary i after that): zero this block's share of it
    // for boundary i + 2, whose adds come after every block's release of boundary i + 1, after this.
    float* z = accum + static_cast<size_t>((i + 2) % 3) * n;
    const int share = (n + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
    for (int e = static_cast<int>(blockIdx.x) * share + threadIdx.x; e < min(n, (static_cast<int>(blockIdx.x) + 1) * share);
         e += kMicroThreads)
      z[e] = 0.f;
    __syncthreads();
    acc = xs[(i * 7) % n] + xs[n - 1];
    flood_drain(lazy);
    __syncthreads();
  }
  cluster.sync();
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}


__global__ void __launch_bounds__(kMicroThreads, 1) flood_only_chain(int iters, unsigned* sink, const char* flood,
                                                                long long flood_src_bytes, int flood_bytes, bool lazy) {
  for (int i = 0; i < iters; ++i) {
    flood_issue(flood, flood_src_bytes, flood_bytes, i);
    flood_drain(lazy);
    __syncthreads();
  }
  if (threadIdx.x == 0) sink[blockIdx.x] = 0;
}

// The host's replay of each chain: the value every block must end with.
unsigned replay_slices(int n, int per, int iters) {
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    const int e0 = (i * 7) % n, e1 = n - 1;
    acc = static_cast<unsigned>(slice_value(acc, i, e0 % per)) + slice_value(acc, i, e1 % per);
  }
  return acc;
}
unsigned replay_allreduce(int n, int per, int groups, int iters) {
  unsigned acc = 0;
  for (int i = 0; i < iters; ++i) {
    auto x = [&](int e) {
      float s = 0.f;
      for (int g = 0; g < groups; ++g) s += partial_value(acc, i, e % per, g);
      return static_cast<unsigned>(static_cast<unsigned short>(s));
    };
    acc = x((i * 7) % n) + x(n - 1);
  }
  return acc;
}

template <typename Kernel, typename... Args>
void launch(Kernel k, int blocks, int cluster, int smem, Args... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(blocks, cluster, smem, &attr);
  CHECK(cudaLaunchKernelEx(&cfg, k, args...));
}

// Clusters of `size` blocks of this kernel (with `smem` dynamic bytes) that fit the GPU at once.
template <typename Kernel>
int max_clusters(Kernel k, int size, int smem) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(size * 64, size, smem, &attr);
  int clusters = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, k, &cfg));
  return clusters;
}

template <typename Kernel>
void allow_clusters(Kernel k, int smem) {
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
}

}  // namespace

int main() {
  const int sms = print_device();
  const int iters = 2000;
  const long long flood_src_bytes = 1ll << 30;
  char* flood;
  CHECK(cudaMalloc(&flood, flood_src_bytes));
  CHECK(cudaMemset(flood, 1, flood_src_bytes));
  // Dynamic shared memory: two flood halves of 32 KiB, and at least enough that one block fills an SM.
  const int smem = 120 * 1024;
  allow_clusters(counter_chain, smem);
  allow_clusters(pull_chain, smem);
  allow_clusters(push_chain, smem);
  allow_clusters(allreduce_chain, smem);
  allow_clusters(allreduce_push_chain, smem);
  allow_clusters(allreduce_red_chain, smem);
  allow_clusters(flood_only_chain, smem);
  std::printf("| cluster size | clusters at once (pull kernel, %d KiB dynamic) | blocks |\n|---|---|---|\n", smem / 1024);
  for (int s : {1, 2, 4, 8, 16}) {
    const int c = max_clusters(pull_chain, s, smem);
    std::printf("| %d | %d | %d |\n", s, c, c * s);
  }
  unsigned short* row16;
  unsigned *counter, *sink;
  float* partials;
  CHECK(cudaMalloc(&row16, 2 * kMaxRow * 2));
  CHECK(cudaMalloc(&counter, 4));
  CHECK(cudaMalloc(&sink, 1024 * 4));
  CHECK(cudaMalloc(&partials, 2ll * 64 * kMaxRow * 4));
  float* accum;
  CHECK(cudaMalloc(&accum, 3ll * kMaxRow * 4));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::printf("\n| protocol | cluster | blocks | row (bf16) | flood per SM | per boundary | check |\n|---|---|---|---|---|---|---|\n");
  const char* const names[] = {"grid (counter)", "pull (cluster barrier, DSMEM loads)", "push (st.async, mbarrier)",
                               "allreduce (partials, counter, cluster gather)",
                               "allreduce, push gather", "allreduce, red.add (one grid boundary)",
                               "grid, poller's warp floods none", "grid, poller's warp floods none, relaxed poll + fence",
                               "flood alone (no hand-off)"};
  for (int s : {2, 4, 8, 16}) {
    const int blocks = max_clusters(pull_chain, s, smem) * s;
    if (blocks == 0) continue;
    for (int lazy = 0; lazy < 1; ++lazy)  // landing during the next boundary measured the same (round 47)
      for (int fl : {0, 16 * 1024, 32 * 1024})
        for (int n : {1024, 2048, 4096}) {
          if (lazy && fl == 0) continue;
          for (int proto = 0; proto < 9; ++proto) {
            // The grid protocol once per flood and row, on every SM (the megakernel's grid) and on the clusters' blocks.
            for (int whole = 0; whole < (proto == 0 || proto >= 6 ? 2 : 1); ++whole) {
              if (proto == 0 && s != 8) break;
              if (proto >= 3 && proto <= 5 && s < 4) break;  // an all-reduce over 66 clusters is not the layout in question
              if ((proto == 6 || proto == 7) && (s != 8 || !whole)) continue;
              if (proto == 8 && (s != 8 || n != 1024)) continue;
              const int nb = (proto == 0 || proto == 8) && whole ? sms : proto == 6 || proto == 7 ? sms : blocks;
              std::vector<float> us;
              unsigned got = 0;
              bool same = true;
              for (int rep = 0; rep < 7; ++rep) {
                CHECK(cudaMemset(counter, 0, 4));
                CHECK(cudaMemset(accum, 0, 3ll * kMaxRow * 4));
                CHECK(cudaEventRecord(e0));
                if (proto == 0) launch(counter_chain, nb, 1, smem, row16, counter, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy, 0);
                else if (proto == 1) launch(pull_chain, nb, s, smem, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                else if (proto == 2) launch(push_chain, nb, s, smem, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                else if (proto == 6 || proto == 7) launch(counter_chain, nb, 1, smem, row16, counter, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy, proto - 5);
                else if (proto == 8) launch(flood_only_chain, nb, 1, smem, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                else if (proto == 4) launch(allreduce_push_chain, nb, s, smem, partials, counter, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                else if (proto == 5) launch(allreduce_red_chain, nb, s, smem, accum, counter, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                else launch(allreduce_chain, nb, s, smem, partials, counter, n, iters, sink, (const char*)flood, flood_src_bytes, fl, (bool)lazy);
                CHECK(cudaEventRecord(e1));
                CHECK(cudaEventSynchronize(e1));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, e0, e1));
                if (rep > 0) us.push_back(ms * 1e3f / iters);
                std::vector<unsigned> h(nb);
                CHECK(cudaMemcpy(h.data(), sink, nb * 4, cudaMemcpyDeviceToHost));
                got = h[0];
                for (unsigned v : h) same = same && v == h[0];
              }
              const bool grid = proto == 0 || proto == 6 || proto == 7;
              const int per = grid ? (n + nb - 1) / nb : n / s;
              const unsigned want = proto == 8 ? 0u : proto >= 3 && !grid ? replay_allreduce(n, per, nb / s, iters) : replay_slices(n, per, iters);
              std::printf("| %s | %d | %d | %d | %d KiB%s | %.3f us | %s |\n", names[proto], grid || proto == 8 ? 1 : s, nb, n,
                          fl / 1024, lazy ? ", landing during the next boundary" : "", median(us),
                          same && got == want ? "ok" : "MISMATCH");
            }
          }
        }
  }
  CHECK(cudaGetLastError());
  return 0;
}
