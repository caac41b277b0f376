// The CUDA Driver API, loaded at run time (dlopen of libcuda.so.1, entry points through cuGetProcAddress), so
// libweft loads and its CPU parts work on machines without a GPU or driver; GPU calls then fail with a
// message saying so.
#pragma once

#include <cuda.h>

#include <string>

namespace weft {

struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease_v2) primary_ctx_release = nullptr;
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&::cuCtxPushCurrent_v2) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent_v2) ctx_pop_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy_max_blocks = nullptr;
  decltype(&::cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&::cuMemFree_v2) mem_free = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemHostGetDevicePointer_v2) mem_host_get_device_pointer = nullptr;
  decltype(&::cuMemcpyHtoD_v2) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH_v2) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyHtoDAsync_v2) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoHAsync_v2) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) memcpy_dtod_async = nullptr;
  decltype(&::cuMemsetD8_v2) memset_d8 = nullptr;
  decltype(&::cuMemsetD8Async) memset_d8_async = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamQuery) stream_query = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy_v2) stream_destroy = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime_v2) event_elapsed_time = nullptr;
  decltype(&::cuEventDestroy_v2) event_destroy = nullptr;
};

// The driver, loaded and initialized once per process. Throws weft::Error (Status::cuda) when there is no
// driver or cuInit fails (e.g. no GPU), with the reason.
const DriverApi& driver();

// True when a driver loads and at least one device is visible (never throws).
bool cuda_available(std::string* why_not = nullptr);

// Throws weft::Error (Status::cuda) with "<what>: CUDA_ERROR_X (message)" unless r is CUDA_SUCCESS;
// CUDA_ERROR_OUT_OF_MEMORY maps to Status::out_of_memory.
void check_cu(CUresult r, const std::string& what);

}  // namespace weft
