// What the standalone GPU microbenchmarks of bench/ (gemv_micro.cu, handoff_micro.cu) share: a CUDA error check
// that exits with the failing call, and the median of a sample.
#ifndef WEFT_BENCH_MICRO_COMMON_CUH
#define WEFT_BENCH_MICRO_COMMON_CUH

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

inline float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

#endif  // WEFT_BENCH_MICRO_COMMON_CUH
