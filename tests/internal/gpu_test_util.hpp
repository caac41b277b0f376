// GPU test helpers: skip with a printed reason without a GPU; run a graph as a program on random data and
// compare every output and state with the CPU reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "reference/interpreter.hpp"
#include "runtime/driver.hpp"
#include "runtime/program.hpp"

namespace weft::test {

#define WEFT_REQUIRE_GPU()                                                   \
  do {                                                                       \
    std::string why_;                                                        \
    if (!::weft::cuda_available(&why_)) GTEST_SKIP() << "no GPU: " << why_;  \
  } while (0)

// The device's context, current on this thread for the scope's lifetime (test allocations need one).
class GpuSession {
 public:
  GpuSession() : ctx_(DeviceContext::open(0)), scope_(*ctx_) {}
  const std::shared_ptr<DeviceContext>& context() const { return ctx_; }

 private:
  std::shared_ptr<DeviceContext> ctx_;
  DeviceContext::Scope scope_;
};

// Device memory holding one tensor, freed at scope exit.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(size_t bytes) : bytes_(bytes) { check_cu(driver().mem_alloc(&ptr_, bytes ? bytes : 16), "cuMemAlloc"); }
  ~DeviceTensor() {
    if (ptr_) driver().mem_free(ptr_);
  }
  DeviceTensor(DeviceTensor&& o) noexcept : ptr_(std::exchange(o.ptr_, 0)), bytes_(o.bytes_) {}
  DeviceTensor& operator=(DeviceTensor&&) = delete;
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  void upload(const std::vector<uint8_t>& host) const { check_cu(driver().memcpy_htod(ptr_, host.data(), host.size()), "cuMemcpyHtoD"); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> h(bytes_);
    check_cu(driver().memcpy_dtoh(h.data(), ptr_, bytes_), "cuMemcpyDtoH");
    return h;
  }
  void fill(uint8_t byte) const { check_cu(driver().memset_d8(ptr_, byte, bytes_), "cuMemsetD8"); }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Buffer <-> raw bytes in the tensor's dtype.
inline std::vector<uint8_t> to_bytes(const Buffer& b) {
  const size_t es = dtype_size(b.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(b.numel()) * es);
  for (int64_t k = 0; k < b.numel(); ++k) {
    uint8_t* p = out.data() + static_cast<size_t>(k) * es;
    const size_t i = static_cast<size_t>(k);
    switch (b.dtype) {
      case DType::bf16: { const uint16_t h = f32_to_bf16(b.f[i]); std::memcpy(p, &h, 2); break; }
      case DType::f16: { const uint16_t h = f32_to_f16(b.f[i]); std::memcpy(p, &h, 2); break; }
      case DType::f32: std::memcpy(p, &b.f[i], 4); break;
      case DType::i32: { const auto v = static_cast<int32_t>(b.i[i]); std::memcpy(p, &v, 4); break; }
      case DType::i64: std::memcpy(p, &b.i[i], 8); break;
    }
  }
  return out;
}

inline Buffer from_bytes(DType dt, const std::vector<int64_t>& shape, const std::vector<uint8_t>& bytes) {
  Buffer b(dt, shape);
  const size_t es = dtype_size(dt);
  for (int64_t k = 0; k < b.numel(); ++k) {
    const uint8_t* p = bytes.data() + static_cast<size_t>(k) * es;
    const size_t i = static_cast<size_t>(k);
    switch (dt) {
      case DType::bf16: { uint16_t h; std::memcpy(&h, p, 2); b.f[i] = bf16_to_f32(h); break; }
      case DType::f16: { uint16_t h; std::memcpy(&h, p, 2); b.f[i] = f16_to_f32(h); break; }
      case DType::f32: std::memcpy(&b.f[i], p, 4); break;
      case DType::i32: { int32_t v; std::memcpy(&v, p, 4); b.i[i] = v; break; }
      case DType::i64: std::memcpy(&b.i[i], p, 8); break;
    }
  }
  return b;
}

struct GpuCompareOptions {
  double rtol = 0, atol_scale = 0;  // 0: chosen from the dtype
  uint32_t seed = 1;
  int64_t max_index = 0;            // integer inputs are drawn from [0, max_index) (0: 2)
  int runs = 1;                     // launches (states carry over, like decode steps)
  Program* program = nullptr;       // run on this program (made from the same graph); nullptr: a new one
};

// Runs `g` with the symbols at `values` on random data both on the CPU reference and as a program on the GPU;
// returns a description of every mismatch (empty when all outputs and states agree).
std::vector<std::string> compare_with_reference(const Graph& g, const SymbolValues& values, const GpuCompareOptions& o);

}  // namespace weft::test
