#include "runtime/device_context.hpp"

#include "core/error.hpp"
#include "runtime/driver.hpp"

namespace weft {

std::shared_ptr<DeviceContext> DeviceContext::open(int ordinal) {
  const DriverApi& d = driver();
  std::shared_ptr<DeviceContext> c(new DeviceContext());
  CUcontext current = nullptr;
  if (ordinal < 0) check_cu(d.ctx_get_current(&current), "cuCtxGetCurrent");
  if (current) {
    c->ctx_ = current;
    check_cu(d.ctx_get_device(&c->dev_), "cuCtxGetDevice");
    c->ordinal_ = static_cast<int>(c->dev_);
  } else {
    int count = 0;
    check_cu(d.device_get_count(&count), "cuDeviceGetCount");
    const int want = ordinal < 0 ? 0 : ordinal;
    if (want >= count)
      fail(Status::invalid_argument, "device ordinal " + std::to_string(want) + " does not exist; this machine has " +
                                         std::to_string(count) + " CUDA device(s)");
    check_cu(d.device_get(&c->dev_, want), "cuDeviceGet");
    check_cu(d.primary_ctx_retain(&c->ctx_, c->dev_), "cuDevicePrimaryCtxRetain");
    c->primary_ = true;
    c->ordinal_ = want;
  }
  auto attr = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    check_cu(d.device_get_attribute(&v, a, c->dev_), std::string("cuDeviceGetAttribute(") + what + ")");
    return v;
  };
  c->sm_count_ = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
  c->clock_khz_ = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate");
  c->max_smem_optin_ = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory");
  const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  // The arch-specific (a) targets: a cubin for sm_90a runs on compute capability 9.0 exactly.
  if (major == 8 && minor == 0) c->arch_ = "sm_80";
  else if (major == 9 && minor == 0) c->arch_ = "sm_90a";
  else if (major == 10 && minor == 0) c->arch_ = "sm_100a";
  else
    fail(Status::unsupported, "GPU compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                                  " is not a weft target (sm_80, sm_90a, sm_100a)");
  char name[256] = {};
  check_cu(d.device_get_name(name, sizeof name, c->dev_), "cuDeviceGetName");
  c->name_ = name;
  return c;
}

DeviceContext::~DeviceContext() {
  if (primary_) driver().primary_ctx_release(dev_);
}

DeviceContext::Scope::Scope(const DeviceContext& c) {
  // Usually the caller's thread already has it current (every run of a program does this): skipping the
  // push/pop pair saves part of a run's host time.
  CUcontext current = nullptr;
  if (driver().ctx_get_current(&current) == CUDA_SUCCESS && current == c.context()) return;
  check_cu(driver().ctx_push_current(c.context()), "cuCtxPushCurrent");
  pushed_ = true;
}
DeviceContext::Scope::~Scope() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver().ctx_pop_current(&popped);
}

}  // namespace weft
