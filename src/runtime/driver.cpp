#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "core/error.hpp"

namespace weft {

namespace {

struct Loaded {
  DriverApi api;
  std::string error;  // non-empty when the driver could not be used
};

template <typename Fn>
void resolve(decltype(&::cuGetProcAddress_v2) get_proc, const char* name, Fn& out, std::string& error) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult found{};
  // 12000: the API versions this code was written against (the _v2 entry points where they exist).
  const CUresult r = get_proc(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  if (r != CUDA_SUCCESS || p == nullptr) {
    if (error.empty()) error = std::string("the CUDA driver has no entry point ") + name;
    return;
  }
  out = reinterpret_cast<Fn>(p);
}

Loaded load() {
  Loaded l;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.error = std::string("no CUDA driver (libcuda.so.1 could not be loaded: ") + dlerror() + ")";
    return l;
  }
  auto get_proc = reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    l.error = "the CUDA driver is older than 12.0 (no cuGetProcAddress_v2); weft needs driver 525 or newer";
    return l;
  }
  DriverApi& a = l.api;
  std::string& e = l.error;
  resolve(get_proc, "cuInit", a.init, e);
  resolve(get_proc, "cuDriverGetVersion", a.driver_get_version, e);
  resolve(get_proc, "cuGetErrorName", a.get_error_name, e);
  resolve(get_proc, "cuGetErrorString", a.get_error_string, e);
  resolve(get_proc, "cuDeviceGetCount", a.device_get_count, e);
  resolve(get_proc, "cuDeviceGet", a.device_get, e);
  resolve(get_proc, "cuDeviceGetName", a.device_get_name, e);
  resolve(get_proc, "cuDeviceGetAttribute", a.device_get_attribute, e);
  resolve(get_proc, "cuDevicePrimaryCtxRetain", a.primary_ctx_retain, e);
  resolve(get_proc, "cuDevicePrimaryCtxRelease", a.primary_ctx_release, e);
  resolve(get_proc, "cuCtxGetCurrent", a.ctx_get_current, e);
  resolve(get_proc, "cuCtxGetDevice", a.ctx_get_device, e);
  resolve(get_proc, "cuCtxPushCurrent", a.ctx_push_current, e);
  resolve(get_proc, "cuCtxPopCurrent", a.ctx_pop_current, e);
  resolve(get_proc, "cuCtxSynchronize", a.ctx_synchronize, e);
  resolve(get_proc, "cuModuleLoadData", a.module_load_data, e);
  resolve(get_proc, "cuModuleUnload", a.module_unload, e);
  resolve(get_proc, "cuModuleGetFunction", a.module_get_function, e);
  resolve(get_proc, "cuFuncSetAttribute", a.func_set_attribute, e);
  resolve(get_proc, "cuOccupancyMaxActiveBlocksPerMultiprocessor", a.occupancy_max_blocks, e);
  resolve(get_proc, "cuMemAlloc", a.mem_alloc, e);
  resolve(get_proc, "cuMemFree", a.mem_free, e);
  resolve(get_proc, "cuMemHostAlloc", a.mem_host_alloc, e);
  resolve(get_proc, "cuMemFreeHost", a.mem_free_host, e);
  resolve(get_proc, "cuMemHostGetDevicePointer", a.mem_host_get_device_pointer, e);
  resolve(get_proc, "cuMemcpyHtoD", a.memcpy_htod, e);
  resolve(get_proc, "cuMemcpyDtoH", a.memcpy_dtoh, e);
  resolve(get_proc, "cuMemcpyHtoDAsync", a.memcpy_htod_async, e);
  resolve(get_proc, "cuMemcpyDtoHAsync", a.memcpy_dtoh_async, e);
  resolve(get_proc, "cuMemcpyDtoDAsync", a.memcpy_dtod_async, e);
  resolve(get_proc, "cuMemsetD8", a.memset_d8, e);
  resolve(get_proc, "cuMemsetD8Async", a.memset_d8_async, e);
  resolve(get_proc, "cuLaunchKernel", a.launch_kernel, e);
  resolve(get_proc, "cuStreamSynchronize", a.stream_synchronize, e);
  resolve(get_proc, "cuStreamQuery", a.stream_query, e);
  resolve(get_proc, "cuStreamCreate", a.stream_create, e);
  resolve(get_proc, "cuStreamDestroy", a.stream_destroy, e);
  resolve(get_proc, "cuEventCreate", a.event_create, e);
  resolve(get_proc, "cuEventRecord", a.event_record, e);
  resolve(get_proc, "cuEventSynchronize", a.event_synchronize, e);
  resolve(get_proc, "cuEventElapsedTime", a.event_elapsed_time, e);
  resolve(get_proc, "cuEventDestroy", a.event_destroy, e);
  if (!e.empty()) return l;
  const CUresult r = a.init(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    a.get_error_name(r, &name);
    e = std::string("cuInit failed: ") + (name ? name : "unknown error") + " (no usable GPU?)";
  }
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();  // thread-safe once
  return l;
}

}  // namespace

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) fail(Status::cuda, l.error);
  return l.api;
}

bool cuda_available(std::string* why_not) {
  const Loaded& l = loaded();
  if (!l.error.empty()) {
    if (why_not) *why_not = l.error;
    return false;
  }
  int count = 0;
  if (l.api.device_get_count(&count) != CUDA_SUCCESS || count == 0) {
    if (why_not) *why_not = "the CUDA driver sees no device";
    return false;
  }
  return true;
}

void check_cu(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const DriverApi& d = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  d.get_error_name(r, &name);
  d.get_error_string(r, &text);
  fail(r == CUDA_ERROR_OUT_OF_MEMORY ? Status::out_of_memory : Status::cuda,
       what + ": " + (name ? name : "CUDA error " + std::to_string(static_cast<int>(r))) + " (" + (text ? text : "") + ")");
}

}  // namespace weft
