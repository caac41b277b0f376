// What one launch per decode step costs between kernels: the GPU's idle time from the last block of a kernel to
// the first block of the next one on the same stream, for a grid shaped like weft's megakernel (one block of 256
// threads per SM, most of the SM's shared memory, a few KiB of __grid_constant__ parameters: the slot table), each
// kernel spinning for a fixed time. Measured from %globaltimer stamps taken by every block at its start and end,
// median over back-to-back launches; also per launch from CUDA events (elapsed / launches, less the spin).
// Variants: plain launches, or programmatic dependent launch (PDL: the launch attribute
// programmaticStreamSerialization, each kernel calling griddepcontrol.launch_dependents at its start and
// griddepcontrol.wait before its work), which lets the next grid be launched while the previous one runs; a timing
// event recorded after every launch (as weft_generate does per step) or not; a 640-byte local-memory frame per
// thread (the task loop spills ~560). The kernels with the slot table also reread 1 MiB that every launch reads
// (each block all of it) at their start, then once more: whether what a launch left in L2 is still there for the
// next (the tables, activations and KV rows a decode step rereads). Round 37 measured a step-mode token 22-60 us
// slower than a multi-step loop's (docs/perf.md).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o launch_gap_micro bench/launch_gap_micro.cu && ./launch_gap_micro
#include "micro_common.cuh"

namespace {

constexpr int kLaunches = 64;

template <int N>
struct Params {
  void* p[N];
};

// Reads `words` 16-byte words of `warm` (every block all of them, dependent on nothing: many in flight) and returns
// the ns it took: from L2 when an earlier launch left them there, from HBM when something dropped them.
__device__ __forceinline__ unsigned long long read_all(const uint4* warm, int words, unsigned& acc) {
  const unsigned long long t0 = global_ns();
  for (int w = threadIdx.x; w < words; w += kMicroThreads) acc ^= __ldcg(warm + w).y;
  __syncthreads();
  return global_ns() - t0;
}

// Block b of launch `launch` records its start and end (ns) and spins until `spin_ns` after its start, what else it
// does (the rereads of `warm`, a local-memory frame) inside that time. With `pdl`, the next launch may be scheduled
// at once and waits for this one's completion (and memory) before its own work.
template <int N, int kLocalWords = 0>
__global__ void __launch_bounds__(kMicroThreads, 1) spinner(const __grid_constant__ Params<N> params, int launch,
                                                            unsigned long long spin_ns, unsigned long long* stamps,
                                                            int pdl, const uint4* warm, int warm_words,
                                                            unsigned long long* warm_ns) {
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  extern __shared__ __align__(16) char smem[];
  const unsigned long long t0 = global_ns();
  unsigned acc = 0;
  if (warm) {  // what the previous launch read, read again at once, then again (now surely from L2)
    const unsigned long long first = read_all(warm, warm_words, acc), again = read_all(warm, warm_words, acc);
    if (threadIdx.x == 0) {
      warm_ns[(static_cast<size_t>(launch) * gridDim.x + blockIdx.x) * 2] = first;
      warm_ns[(static_cast<size_t>(launch) * gridDim.x + blockIdx.x) * 2 + 1] = again + (acc == 0x1234567u ? 1 : 0);
    }
  }
  if constexpr (kLocalWords > 0) {  // a stack frame in local memory, as the megakernel's task loop has (~560 B)
    unsigned local[kLocalWords];
    for (int i = 0; i < kLocalWords; ++i) local[i] = i * static_cast<unsigned>(launch);
    acc ^= local[(threadIdx.x * 7 + launch) % kLocalWords];
  }
  if (threadIdx.x == 0) smem[0] = static_cast<char>(acc);
  if (threadIdx.x == 1) smem[0] = static_cast<char>(reinterpret_cast<size_t>(params.p[N - 1]));
  while (global_ns() - t0 < spin_ns) {
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long t1 = global_ns();
    stamps[(static_cast<size_t>(launch) * gridDim.x + blockIdx.x) * 2] = t0;
    stamps[(static_cast<size_t>(launch) * gridDim.x + blockIdx.x) * 2 + 1] = t1 + (smem[0] == 0x7f ? 1 : 0);
  }
}

struct Result {
  float gap_us, per_launch_us, warm_first_us, warm_again_us;
};

// `events`: a timing event recorded after every launch, as weft_generate does per step. `warm` (`warm_words`): a
// buffer every launch reads twice before its spin (the tables and activations a decode step rereads).
template <int N, int kLocalWords = 0>
Result run(int sms, int smem, unsigned long long spin_ns, bool pdl, bool events, const uint4* warm, int warm_words,
           unsigned long long* stamps, unsigned long long* warm_ns) {
  CHECK(cudaFuncSetAttribute(spinner<N, kLocalWords>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  Params<N> params{};
  for (int i = 0; i < N; ++i) params.p[i] = reinterpret_cast<void*>(static_cast<size_t>(i + 1) * 256);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> ev(kLaunches + 1);
  for (cudaEvent_t& e : ev) CHECK(cudaEventCreate(&e));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(sms);
  cfg.blockDim = dim3(kMicroThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = pdl ? &attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  const int flag = pdl ? 1 : 0;
  for (int w = 0; w < 4; ++w)
    CHECK(cudaLaunchKernelEx(&cfg, spinner<N, kLocalWords>, params, 0, spin_ns, stamps, flag, warm, warm_words, warm_ns));
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaEventRecord(ev[0], stream));
  for (int l = 0; l < kLaunches; ++l) {
    CHECK(cudaLaunchKernelEx(&cfg, spinner<N, kLocalWords>, params, l, spin_ns, stamps, flag, warm, warm_words, warm_ns));
    if (events || l + 1 == kLaunches) CHECK(cudaEventRecord(ev[l + 1], stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaGetLastError());
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, ev[0], ev[kLaunches]));
  std::vector<unsigned long long> h(static_cast<size_t>(kLaunches) * sms * 2);
  CHECK(cudaMemcpy(h.data(), stamps, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  std::vector<float> gaps;
  for (int l = 1; l < kLaunches; ++l) {
    unsigned long long prev_end = 0, next_start = ~0ull;
    for (int b = 0; b < sms; ++b) {
      prev_end = std::max(prev_end, h[(static_cast<size_t>(l - 1) * sms + b) * 2 + 1]);
      next_start = std::min(next_start, h[(static_cast<size_t>(l) * sms + b) * 2]);
    }
    gaps.push_back(static_cast<float>(static_cast<long long>(next_start - prev_end)) / 1000.0f);
  }
  Result r{median(gaps), ms * 1000.0f / kLaunches - static_cast<float>(spin_ns) / 1000.0f, 0, 0};
  if (warm) {
    CHECK(cudaMemcpy(h.data(), warm_ns, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::vector<float> first, again;
    for (size_t i = 0; i < h.size(); i += 2) {
      first.push_back(static_cast<float>(h[i]) / 1000.0f);
      again.push_back(static_cast<float>(h[i + 1]) / 1000.0f);
    }
    r.warm_first_us = median(first);
    r.warm_again_us = median(again);
  }
  for (cudaEvent_t& e : ev) CHECK(cudaEventDestroy(e));
  CHECK(cudaStreamDestroy(stream));
  return r;
}

}  // namespace

int main() {
  int dev = 0, sms = 0, smem_optin = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs, %d KiB shared memory per block at most\n\n", prop.name, sms, smem_optin / 1024);
  unsigned long long *stamps = nullptr, *warm_ns = nullptr;
  CHECK(cudaMalloc(&stamps, static_cast<size_t>(kLaunches) * sms * 2 * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&warm_ns, static_cast<size_t>(kLaunches) * sms * 2 * sizeof(unsigned long long)));
  constexpr int kWarmWords = 64 * 1024;  // 1 MiB, read by every block
  uint4* warm = nullptr;
  CHECK(cudaMalloc(&warm, kWarmWords * sizeof(uint4)));
  CHECK(cudaMemset(warm, 0x33, kWarmWords * sizeof(uint4)));
  std::printf("| dynamic smem | parameters | spin | launch | event per launch | gap, last block end -> first block start "
              "(us, median) | per launch over the spin (events, us) | 1 MiB reread at launch start / again (us) |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const int smems[] = {160 * 1024, std::min(220 * 1024, smem_optin)};
  for (int smem : smems)
    for (bool pdl : {false, true})
      for (bool events : {false, true}) {
        const unsigned long long spin = 500000ull;
        const Result small = run<4>(sms, smem, spin, pdl, events, nullptr, 0, stamps, warm_ns);
        const Result big = run<512>(sms, smem, spin, pdl, events, warm, kWarmWords, stamps, warm_ns);
        const Result local = run<512, 160>(sms, smem, spin, pdl, events, warm, kWarmWords, stamps, warm_ns);
        for (int p = 0; p < 3; ++p) {
          const Result& r = p == 0 ? small : p == 1 ? big : local;
          std::printf("| %d KiB | %s | %llu us | %s | %s | %.2f | %.2f | ", smem / 1024,
                      p == 0 ? "32 B" : p == 1 ? "4 KiB slot table" : "4 KiB, 640 B of local memory per thread",
                      spin / 1000, pdl ? "PDL" : "plain", events ? "yes" : "no", r.gap_us, r.per_launch_us);
          if (p >= 1) std::printf("%.2f / %.2f |\n", r.warm_first_us, r.warm_again_us);
          else std::printf("- |\n");
        }
      }
  CHECK(cudaFree(warm));
  CHECK(cudaFree(warm_ns));
  CHECK(cudaFree(stamps));
  return 0;
}
