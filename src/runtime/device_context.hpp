// One GPU as weft uses it: a CUDA context (the device's primary context, retained, or the caller's current one)
// and the properties that drive specialization (SM count, shared memory, compute capability -> target arch).
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

namespace weft {

class DeviceContext {
 public:
  // ordinal >= 0: that device's primary context. ordinal < 0: the context current on the calling thread, or
  // device 0's primary context when none is current. Throws weft::Error (Status::cuda) without a usable GPU.
  static std::shared_ptr<DeviceContext> open(int ordinal);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  CUcontext context() const { return ctx_; }
  CUdevice device() const { return dev_; }
  int ordinal() const { return ordinal_; }
  int sm_count() const { return sm_count_; }
  int clock_khz() const { return clock_khz_; }
  int max_smem_per_block() const { return max_smem_optin_; }
  const std::string& arch() const { return arch_; }  // "sm_90a"
  const std::string& name() const { return name_; }

  // Makes the context current on this thread for the scope's lifetime.
  class Scope {
   public:
    explicit Scope(const DeviceContext& c);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool pushed_ = false;
  };

 private:
  DeviceContext() = default;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int ordinal_ = 0;
  bool primary_ = false;
  int sm_count_ = 0, clock_khz_ = 0, max_smem_optin_ = 0;
  std::string arch_, name_;
};

}  // namespace weft
