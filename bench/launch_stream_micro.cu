// Whether a kernel launch makes the next pass over the weights slower: every SM streams its contiguous slice of a
// weight-sized buffer (2.4 GB as one allocation or 32, a grid barrier between them) once per pass, by plain 16-byte
// loads (optionally touching every 2 MiB page of its slice first) or as the GEMV tiles do (a cp.async ring of 4 x 2
// KiB stages per warp, 3 in flight, with or without L2::evict_first), either one pass per launch (weft's one launch
// per decode step) or all passes in one launch with a grid barrier between them (weft's multi-step loop). Per pass,
// from %globaltimer stamps of every block: the span (first block start to last block end) and the gap since the
// previous pass; medians over the passes after the first. Then each pass cut into 8 parts of ~70 us (ops), after 0 /
// 15 / 100 us of quiet: the first part against the later ones. Round 37's traces put a launch's first step 12-43 us
// slower than the loop's later steps, its first layers' gate/up projections streaming up to 12% slower at the same SM
// clock (docs/perf.md).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o launch_stream_micro bench/launch_stream_micro.cu && ./launch_stream_micro
#include "micro_common.cuh"

namespace {

constexpr int kPasses = 12;
constexpr long long kPage = 2ll << 20;
// More than half an SM's shared memory: one block per SM, as the megakernel.
constexpr int kBlockSmem = 120 * 1024;

// Streams this block's slice of `words` 16-byte words, 8 loads in flight per thread; with `touch`, first one load
// per 2 MiB page of the slice, spread over the block's threads.
__device__ unsigned stream_slice(const uint4* src, long long words, bool touch) {
  const long long per = (words + gridDim.x - 1) / gridDim.x;
  const long long begin = per * blockIdx.x, end = min(words, begin + per);
  unsigned acc = 0;
  if (touch) {
    const long long page_words = kPage / 16;
    for (long long w = (begin / page_words + threadIdx.x) * page_words; w < end; w += kMicroThreads * page_words)
      if (w >= begin) acc ^= __ldcs(src + w).x;
    if (threadIdx.x == 0) acc ^= __ldcs(src + begin).x;
  }
  for (long long w = begin + threadIdx.x; w < end; w += 8ll * kMicroThreads) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const long long at = w + static_cast<long long>(u) * kMicroThreads;
      v[u] = at < end ? __ldcs(src + at) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += v[u].x ^ v[u].w;
  }
  return acc;
}

// The GEMV tiles' way: each warp streams its share of the block's slice through a ring of 4 x 2 KiB cp.async stages
// (3 in flight), optionally with the L2::evict_first policy the weights get.
__device__ unsigned stream_slice_ring(const uint4* src, long long words, bool evict_first, char* smem) {
  const long long per = (words + gridDim.x - 1) / gridDim.x;
  const long long begin = per * blockIdx.x, end = min(words, begin + per);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const long long wper = (end - begin + 7) / 8, wb = begin + wper * warp, we = min(end, wb + wper);
  char* ring = smem + warp * 4 * 2048;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  auto issue = [&](long long stage, int slot) {
    const long long w0 = wb + stage * 128;  // 128 words = 2 KiB per stage
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(ring + slot * 2048));
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long w = w0 + u * 32 + lane;
      if (w < we) {
        if (evict_first)
          asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + (u * 32 + lane) * 16),
                       "l"(src + w), "l"(policy) : "memory");
        else
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + (u * 32 + lane) * 16), "l"(src + w) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  const long long stages = (we - wb + 127) / 128;
  unsigned acc = 0;
  for (int s = 0; s < 3; ++s) issue(s, s);
  for (long long s = 0; s < stages; ++s) {
    issue(s + 3, static_cast<int>((s + 3) % 4));
    asm volatile("cp.async.wait_group 3;" ::: "memory");
    const uint4* mine = reinterpret_cast<const uint4*>(ring + (s % 4) * 2048);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += mine[u * 32 + lane].x;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  return acc;
}

__device__ void stamp(unsigned long long* stamps, int pass, unsigned long long t0) {
  __syncthreads();
  if (threadIdx.x == 0) {
    stamps[(static_cast<size_t>(pass) * gridDim.x + blockIdx.x) * 2] = t0;
    stamps[(static_cast<size_t>(pass) * gridDim.x + blockIdx.x) * 2 + 1] = global_ns();
  }
}

// One pass per launch (`pass` is the launch's index) or, with passes > 1, all passes with a grid barrier between.
// how: 0 plain loads, 1 with the pages touched first, 2 cp.async ring, 3 cp.async ring with L2::evict_first. The buffer
// is `parts` allocations of `words` each (a model's layers), streamed one after another with a grid barrier between
// (each barrier one arrival per block on `barrier`).
__global__ void __launch_bounds__(kMicroThreads, 1) streamer(const uint4* const* parts_src, int parts, long long words,
                                                             int pass, int passes, int how, unsigned* barrier,
                                                             unsigned long long* stamps, unsigned long long* part_ends,
                                                             unsigned long long idle_ns, unsigned* sink) {
  extern __shared__ __align__(16) char smem[];
  unsigned arrivals = 0;
  unsigned acc = 0;
  auto grid_sync = [&]() {
    __syncthreads();
    ++arrivals;
    if (threadIdx.x == 0) {
      red_release_add(barrier, 1u);
      wait_counter(barrier, arrivals * gridDim.x);
    }
    __syncthreads();
  };
  for (int p = 0; p < passes; ++p) {
    if (p > 0) grid_sync();
    // A decode step's quiet start (the argmax, the launch or barrier, the embedding: ~10-20 us of little traffic).
    for (const unsigned long long q0 = global_ns(); global_ns() - q0 < idle_ns;) {
    }
    const unsigned long long t0 = global_ns();
    for (int i = 0; i < parts; ++i) {
      if (i > 0) grid_sync();
      acc += how >= 2 ? stream_slice_ring(parts_src[i], words, how == 3, smem) : stream_slice(parts_src[i], words, how == 1);
      if (part_ends != nullptr && threadIdx.x == 0)
        part_ends[(static_cast<size_t>(pass + p) * parts + i) * gridDim.x + blockIdx.x] = global_ns();
    }
    stamp(stamps, pass + p, t0);
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
}

struct PassStats {
  float span_us, gap_us, first_span_us;
};

PassStats stats(const std::vector<unsigned long long>& h, int sms) {
  std::vector<float> spans, gaps;
  unsigned long long prev_end = 0;
  float first = 0;
  for (int p = 0; p < kPasses; ++p) {
    unsigned long long s = ~0ull, e = 0;
    for (int b = 0; b < sms; ++b) {
      s = std::min(s, h[(static_cast<size_t>(p) * sms + b) * 2]);
      e = std::max(e, h[(static_cast<size_t>(p) * sms + b) * 2 + 1]);
    }
    const float span = static_cast<float>(e - s) / 1000.0f;
    if (p == 0) first = span;
    else {
      spans.push_back(span);
      gaps.push_back(static_cast<float>(static_cast<long long>(s - prev_end)) / 1000.0f);
    }
    prev_end = e;
  }
  return {median(spans), median(gaps), first};
}

// `count` device allocations of `bytes` each (non-zero), and the device array of their addresses the kernel takes.
struct WeightParts {
  std::vector<uint4*> host;
  uint4** dev = nullptr;
  WeightParts(int count, long long bytes) : host(count) {
    for (uint4*& p : host) {
      CHECK(cudaMalloc(&p, bytes));
      CHECK(cudaMemset(p, 0x5a, bytes));
    }
    CHECK(cudaMalloc(&dev, count * sizeof(uint4*)));
    CHECK(cudaMemcpy(dev, host.data(), count * sizeof(uint4*), cudaMemcpyHostToDevice));
  }
  ~WeightParts() {
    for (uint4* p : host) CHECK(cudaFree(p));
    CHECK(cudaFree(dev));
  }
};

// kPasses passes over `parts` (`words` each), one per launch or all in one launch; twice, the first to warm up.
void run_passes(int sms, const WeightParts& parts, long long words, int how, bool one_launch, unsigned long long idle_ns,
                unsigned* barrier, unsigned long long* stamps, unsigned long long* part_ends, unsigned* sink) {
  const int n = static_cast<int>(parts.host.size());
  for (int rep = 0; rep < 2; ++rep) {
    CHECK(cudaMemset(barrier, 0, sizeof(unsigned)));
    if (one_launch)
      streamer<<<sms, kMicroThreads, kBlockSmem>>>(parts.dev, n, words, 0, kPasses, how, barrier, stamps, part_ends, idle_ns, sink);
    else
      for (int p = 0; p < kPasses; ++p) {
        CHECK(cudaMemsetAsync(barrier, 0, sizeof(unsigned)));
        streamer<<<sms, kMicroThreads, kBlockSmem>>>(parts.dev, n, words, p, 1, how, barrier, stamps, part_ends, idle_ns, sink);
      }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace

int main() {
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs\n\n", prop.name, sms);
  unsigned long long* stamps = nullptr;
  unsigned *barrier = nullptr, *sink = nullptr;
  CHECK(cudaMalloc(&stamps, static_cast<size_t>(kPasses) * sms * 2 * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&barrier, sizeof(unsigned)));
  CHECK(cudaMalloc(&sink, sms * sizeof(unsigned)));
  std::printf("| buffer (allocations) | passes | how | first pass span (us) | later pass span (us, median) | TB/s | gap before a pass (us) |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  CHECK(cudaFuncSetAttribute(streamer, cudaFuncAttributeMaxDynamicSharedMemorySize, kBlockSmem));
  const char* hows[] = {"plain loads", "plain loads, pages touched first", "cp.async ring", "cp.async ring, L2::evict_first"};
  struct Shape { long long mb; int parts; };
  for (Shape shape : {Shape{2400, 1}, Shape{2400, 32}}) {
    const long long bytes = (shape.mb << 20) / shape.parts, words = bytes / 16;
    const WeightParts parts(shape.parts, bytes);
    for (int how = 0; how < 4; ++how)
      for (int one_launch = 0; one_launch < 2; ++one_launch) {
        std::vector<unsigned long long> h(static_cast<size_t>(kPasses) * sms * 2);
        run_passes(sms, parts, words, how, one_launch != 0, 0, barrier, stamps, nullptr, sink);
        CHECK(cudaMemcpy(h.data(), stamps, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        const PassStats s = stats(h, sms);
        std::printf("| %lld MiB in %d | %s | %s | %.1f | %.1f | %.2f | %.2f |\n", shape.mb, shape.parts,
                    one_launch ? "one launch, grid barrier between" : "one launch each", hows[how],
                    s.first_span_us, s.span_us, static_cast<double>(bytes) * shape.parts / (s.span_us * 1e6), s.gap_us);
      }
  }

  // The first op of a step against the later ones: 2400 MiB in 8 parts (ops of ~70 us, a grid barrier between), each
  // pass after `idle` us of quiet, one pass per launch or all in one launch; the cp.async ring with evict_first.
  std::printf("\n| passes | quiet before a pass (us) | first part of a pass (us, median) | later parts (us, mean of medians) |\n");
  std::printf("|---|---|---|---|\n");
  {
    constexpr int kParts = 8;
    const long long bytes = (2400ll << 20) / kParts, words = bytes / 16;
    const WeightParts parts(kParts, bytes);
    unsigned long long* part_ends = nullptr;
    CHECK(cudaMalloc(&part_ends, static_cast<size_t>(kPasses) * kParts * sms * sizeof(unsigned long long)));
    for (unsigned long long idle : {0ull, 15000ull, 100000ull})
      for (int one_launch = 0; one_launch < 2; ++one_launch) {
        run_passes(sms, parts, words, 3, one_launch != 0, idle, barrier, stamps, part_ends, sink);
        std::vector<unsigned long long> st(static_cast<size_t>(kPasses) * sms * 2), pe(static_cast<size_t>(kPasses) * kParts * sms);
        CHECK(cudaMemcpy(st.data(), stamps, st.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(pe.data(), part_ends, pe.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        std::vector<std::vector<float>> span(kParts);
        for (int p = 1; p < kPasses; ++p) {
          unsigned long long prev = ~0ull;
          for (int b = 0; b < sms; ++b) prev = std::min(prev, st[(static_cast<size_t>(p) * sms + b) * 2]);
          for (int i = 0; i < kParts; ++i) {
            unsigned long long end = 0;
            for (int b = 0; b < sms; ++b) end = std::max(end, pe[(static_cast<size_t>(p) * kParts + i) * sms + b]);
            span[i].push_back(static_cast<float>(end - prev) / 1000.0f);
            prev = end;
          }
        }
        float later = 0;
        for (int i = 1; i < kParts; ++i) later += median(span[i]) / (kParts - 1);
        std::printf("| %s | %llu | %.2f | %.2f |\n", one_launch ? "one launch, grid barrier between" : "one launch each",
                    idle / 1000, median(span[0]), later);
      }
    CHECK(cudaFree(part_ends));
  }
  CHECK(cudaFree(stamps));
  CHECK(cudaFree(barrier));
  CHECK(cudaFree(sink));
  return 0;
}
