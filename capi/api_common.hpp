// Shared by the C API translation units: the handle structs behind the opaque C types, the registry of
// live handles, and `guard`, which turns every C++ exception into a weft_status and a thread-local message.
#pragma once

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "core/error.hpp"
#include "graph/graph.hpp"
#include "graph/tensor_view.hpp"
#include "weft/weft.h"

struct weft_context : std::enable_shared_from_this<weft_context> {
  weft_context_options options{};
  std::shared_ptr<weft_context> caller_ref;  // the caller's reference, dropped by weft_context_destroy
};

struct weft_graph {
  std::shared_ptr<weft_context> context;  // keeps the context alive while the graph exists
  uint32_t uid = 0;                       // stamped into tensor ids to catch foreign tensors
  weft::Graph graph;
  mutable std::mutex cache_mutex;  // guards the strings below, produced on demand by const calls
  mutable std::string json_cache;
  mutable std::string text_cache;
  mutable uint64_t cache_generation = ~uint64_t{0};
  uint64_t generation = 0;  // bumped on each change
};

namespace weft {
struct CompileResult;
}

namespace weft::capi {

// A compile result as the C API reports it; `report` is checked (non-NULL, struct_size) first.
void fill_compile_report(const CompileResult& r, weft_compile_report* report);

// Live-handle registry: every handle is registered on create and removed on destroy, so a destroyed or
// made-up pointer is reported instead of dereferenced.
void register_handle(const void* p);
bool unregister_handle(const void* p);
bool is_live(const void* p);

void set_last_error(const std::string& message);
const std::string& last_error();

// Runs fn; maps weft::Error to its status, std::bad_alloc to OUT_OF_MEMORY and anything else to INTERNAL.
// `where` (the C function name) prefixes the message.
template <typename Fn>
weft_status guard(const char* where, Fn&& fn) noexcept {
  try {
    fn();
    return WEFT_OK;
  } catch (const weft::Error& e) {
    set_last_error(std::string(where) + ": " + e.what());
    return static_cast<weft_status>(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(where) + ": out of host memory");
    return WEFT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string(where) + ": internal error: " + e.what());
    return WEFT_ERROR_INTERNAL;
  } catch (...) {
    set_last_error(std::string(where) + ": internal error: unknown exception");
    return WEFT_ERROR_INTERNAL;
  }
}

// Handle checks (throw INVALID_HANDLE naming the parameter).
weft_context* live_context(weft_context* c, const char* param);
const weft_graph* live_graph(const weft_graph* g, const char* param);
weft_graph* live_graph(weft_graph* g, const char* param);

template <typename T>
void require_out(T* p, const char* param) {
  if (!p) invalid(std::string("'") + param + "' is NULL; expected a pointer to receive the result");
}
std::string require_str(const char* s, const char* param);  // non-NULL string

// A copy of a caller's options struct: NULL gives all-zero defaults; fields past the caller's struct_size (an
// older header) keep their defaults. `what` names the struct type in the message.
template <typename Options>
Options read_options(const Options* given, const char* what) {
  Options o{};
  if (!given) return o;
  const size_t size = given->struct_size;
  if (size < sizeof(size_t) || size > (size_t{1} << 20))
    invalid(std::string(what) + "->struct_size is " + std::to_string(size) + "; expected sizeof(" + what + ") (" +
            std::to_string(sizeof(Options)) + ")");
  std::memcpy(&o, given, size < sizeof(Options) ? size : sizeof(Options));
  o.struct_size = sizeof(Options);
  return o;
}
std::string opt_str(const char* s);                         // NULL -> ""

// Tensor ids carry the graph's uid in their high 32 bits and index + 1 in the low 32.
weft_tensor encode_tensor(const weft_graph* g, TensorId id);
TensorId decode_tensor(const weft_graph* g, weft_tensor t, const char* param);  // NONE -> kNoTensor
DType to_dtype(weft_dtype d, const char* param);
Shape to_shape(const Graph& g, const std::string& tensor, const weft_dim* dims, int32_t rank);
// The caller's view of bindings[index] (bound to tensor `name`), checked: dtype, rank, shape pointer.
TensorView to_view(const weft_tensor_view& v, const std::string& name, int32_t index);

}  // namespace weft::capi
