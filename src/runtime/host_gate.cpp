#include "runtime/host_gate.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <vector>

#include "core/error.hpp"
#include "device/task_abi.h"
#include "runtime/driver.hpp"

namespace weft {

namespace {

constexpr size_t kHeaderWords = WEFT_GATE_HEADER_WORDS;

std::atomic_ref<unsigned int> word(unsigned int* w) { return std::atomic_ref<unsigned int>(*w); }

}  // namespace

void HostGate::release() noexcept {
  if (host_) driver().mem_free_host(host_);
  host_ = nullptr;
  dev_ = 0;
  capacity_ = 0;
}

unsigned int* HostGate::prepare(size_t n) {
  if (n > capacity_ || !host_) {
    const DriverApi& d = driver();
    if (host_) d.mem_free_host(host_);
    host_ = nullptr;
    capacity_ = 0;
    void* p = nullptr;
    check_cu(d.mem_host_alloc(&p, (kHeaderWords + n) * sizeof(unsigned int), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
             "cuMemHostAlloc (resident loop gate)");
    host_ = static_cast<unsigned int*>(p);
    capacity_ = n;
    check_cu(d.mem_host_get_device_pointer(&dev_, p, 0), "cuMemHostGetDevicePointer (resident loop gate)");
  }
  std::memset(host_, 0, (kHeaderWords + capacity_) * sizeof(unsigned int));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return reinterpret_cast<unsigned int*>(dev_);
}

int32_t HostGate::serve(int32_t steps, size_t n, bool rewrites, CUstream stream, const PassCallback& on_pass,
                        std::exception_ptr& thrown) {
  const DriverApi& d = driver();
  auto* values = reinterpret_cast<int32_t*>(host_ + kHeaderWords);
  std::vector<int32_t> mine(n);
  for (int32_t s = 1; s < steps; ++s) {
    // Spin: the kernel waits on this thread, and a sleeping thread would add its wake-up to every token. The
    // stream is asked now and then whether the kernel has ended without publishing (a device error).
    auto next_query = std::chrono::steady_clock::now();
    while (static_cast<int32_t>(word(host_).load(std::memory_order_acquire)) < s) {
      const auto now = std::chrono::steady_clock::now();
      if (now < next_query) continue;
      next_query = now + std::chrono::microseconds(200);
      const CUresult q = d.stream_query(stream);
      if (q == CUDA_SUCCESS) {
        // Published before the end (the last boundary needs no answer in look-ahead) but seen only now, say after
        // this thread was descheduled: serve it. Otherwise the kernel ended on an error.
        if (static_cast<int32_t>(word(host_).load(std::memory_order_acquire)) >= s) break;
        return s;
      }
      if (q != CUDA_ERROR_NOT_READY) check_cu(q, "cuStreamQuery (resident loop)");
    }
    std::memcpy(mine.data(), values, n * sizeof(int32_t));
    bool go_on = false;
    try {
      go_on = on_pass(s - 1, mine.data(), static_cast<int32_t>(n));
    } catch (...) {
      thrown = std::current_exception();
    }
    unsigned int flags = go_on ? 0u : WEFT_GATE_STOP;
    if (go_on && rewrites && std::memcmp(mine.data(), values, n * sizeof(int32_t)) != 0) {
      std::memcpy(values, mine.data(), n * sizeof(int32_t));
      flags |= WEFT_GATE_REPLACED;
    }
    // Release: the rewritten values are in memory before the answer that says so.
    word(host_ + 1).store((static_cast<unsigned int>(s) << 2) | flags, std::memory_order_release);
    if (!go_on) return s;
  }
  return steps;
}

}  // namespace weft
