// C API: version, status strings, errors, dtypes, contexts.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "capi/api_common.hpp"
#include "core/version.hpp"

using namespace weft;
using namespace weft::capi;

extern "C" {

int weft_version(void) { return WEFT_VERSION; }

const char* weft_version_string(void) { return kVersionString; }

const char* weft_status_string(weft_status status) {
  switch (status) {
    case WEFT_OK: return "WEFT_OK";
    case WEFT_ERROR_INVALID_ARGUMENT: return "WEFT_ERROR_INVALID_ARGUMENT";
    case WEFT_ERROR_INVALID_HANDLE: return "WEFT_ERROR_INVALID_HANDLE";
    case WEFT_ERROR_OUT_OF_MEMORY: return "WEFT_ERROR_OUT_OF_MEMORY";
    case WEFT_ERROR_UNSUPPORTED: return "WEFT_ERROR_UNSUPPORTED";
    case WEFT_ERROR_COMPILE: return "WEFT_ERROR_COMPILE";
    case WEFT_ERROR_CUDA: return "WEFT_ERROR_CUDA";
    case WEFT_ERROR_CACHE: return "WEFT_ERROR_CACHE";
    case WEFT_ERROR_DEADLOCK: return "WEFT_ERROR_DEADLOCK";
    case WEFT_ERROR_IO: return "WEFT_ERROR_IO";
    case WEFT_ERROR_INTERNAL: return "WEFT_ERROR_INTERNAL";
    default: break;
  }
  return "WEFT_STATUS_UNKNOWN";
}

const char* weft_last_error_message(void) { return last_error().c_str(); }

const char* weft_dtype_name(weft_dtype dtype) {
  if (!dtype_is_valid(static_cast<int32_t>(dtype))) return "unknown";
  return dtype_name(static_cast<DType>(dtype)).data();  // the names are static string literals
}

weft_status weft_context_create(const weft_context_options* options, weft_context** out) {
  return guard("weft_context_create", [&] {
    require_out(out, "out");
    auto ctx = std::make_shared<weft_context>();
    ctx->options = read_options(options, "weft_context_options");
    ctx->caller_ref = ctx;
    register_handle(ctx.get());
    *out = ctx.get();
  });
}

void weft_context_destroy(weft_context* context) {
  if (!context || !unregister_handle(context)) return;
  std::shared_ptr<weft_context> release = std::move(context->caller_ref);
}

}  // extern "C"
