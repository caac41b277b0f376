#include "capi/api_common.hpp"

#include <cstdio>
#include <unordered_set>

namespace weft::capi {

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<const void*>& registry() {
  static std::unordered_set<const void*> r;
  return r;
}
thread_local std::string t_last_error;

std::string ptr_str(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}
}  // namespace

void register_handle(const void* p) {
  std::lock_guard lock(registry_mutex());
  registry().insert(p);
}
bool unregister_handle(const void* p) {
  std::lock_guard lock(registry_mutex());
  return registry().erase(p) > 0;
}
bool is_live(const void* p) {
  std::lock_guard lock(registry_mutex());
  return registry().count(p) > 0;
}

void set_last_error(const std::string& message) { t_last_error = message; }
const std::string& last_error() { return t_last_error; }

weft_context* live_context(weft_context* c, const char* param) {
  if (!c) fail(Status::invalid_handle, std::string("'") + param + "' is NULL; expected a context from weft_context_create");
  if (!is_live(c)) fail(Status::invalid_handle, std::string("'") + param + "' (" + ptr_str(c) + ") is not a live context (destroyed or never created)");
  return c;
}

const weft_graph* live_graph(const weft_graph* g, const char* param) {
  if (!g) fail(Status::invalid_handle, std::string("'") + param + "' is NULL; expected a graph from weft_graph_create");
  if (!is_live(g)) fail(Status::invalid_handle, std::string("'") + param + "' (" + ptr_str(g) + ") is not a live graph (destroyed or never created)");
  return g;
}
weft_graph* live_graph(weft_graph* g, const char* param) {
  live_graph(static_cast<const weft_graph*>(g), param);
  return g;
}

std::string require_str(const char* s, const char* param) {
  if (!s) invalid(std::string("'") + param + "' is NULL; expected a string");
  return s;
}
std::string opt_str(const char* s) { return s ? std::string(s) : std::string(); }

weft_tensor encode_tensor(const weft_graph* g, TensorId id) {
  return (static_cast<uint64_t>(g->uid) << 32) | (static_cast<uint64_t>(id) + 1);
}

TensorId decode_tensor(const weft_graph* g, weft_tensor t, const char* param) {
  if (t == WEFT_TENSOR_NONE) return kNoTensor;
  const auto uid = static_cast<uint32_t>(t >> 32);
  const auto index = static_cast<uint32_t>(t & 0xffffffffu);
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(t));
  if (uid != g->uid)
    invalid(std::string("'") + param + "' (tensor " + hex + ") belongs to another graph (#" + std::to_string(uid) +
            "), not to graph '" + g->graph.name() + "' (#" + std::to_string(g->uid) + ")");
  if (index == 0 || index > g->graph.tensors().size())
    invalid(std::string("'") + param + "' (tensor " + hex + ") is not a tensor of graph '" + g->graph.name() + "'");
  return static_cast<TensorId>(index - 1);
}

DType to_dtype(weft_dtype d, const char* param) {
  if (!dtype_is_valid(static_cast<int32_t>(d)))
    invalid(std::string("'") + param + "' is " + std::to_string(static_cast<int>(d)) +
            "; expected a weft_dtype (WEFT_DTYPE_BF16, F16, F32, I32 or I64)");
  return static_cast<DType>(d);
}

Shape to_shape(const Graph& g, const std::string& tensor, const weft_dim* dims, int32_t rank) {
  if (rank < 0 || rank > WEFT_MAX_RANK)
    invalid("tensor '" + tensor + "': rank " + std::to_string(rank) + " is out of range; expected 0 to " + std::to_string(WEFT_MAX_RANK));
  if (rank > 0 && !dims) invalid("tensor '" + tensor + "': dims is NULL for rank " + std::to_string(rank));
  Shape s;
  for (int32_t i = 0; i < rank; ++i) {
    const weft_dim& d = dims[i];
    if (d.symbol) {
      const int32_t sym = g.symbols().find(d.symbol);
      if (sym < 0)
        invalid("tensor '" + tensor + "' dim " + std::to_string(i) + " names symbol '" + d.symbol +
                "', which is not declared; declare it first with weft_graph_declare_symbol");
      s.push_back(Dim::sym(sym));
    } else {
      if (d.size < 1)
        invalid("tensor '" + tensor + "' dim " + std::to_string(i) + " is " + std::to_string(d.size) +
                "; expected a size >= 1 (zero-sized and negative dims are not supported)");
      s.push_back(Dim::fixed(d.size));
    }
  }
  return s;
}

TensorView to_view(const weft_tensor_view& v, const std::string& name, int32_t index) {
  TensorView t;
  t.data = v.data;
  t.dtype = to_dtype(v.dtype, ("bindings[" + std::to_string(index) + "] ('" + name + "') dtype").c_str());
  if (v.rank < 0 || v.rank > WEFT_MAX_RANK)
    invalid("binding of '" + name + "': rank " + std::to_string(v.rank) + " is out of range; expected 0 to " + std::to_string(WEFT_MAX_RANK));
  if (v.rank > 0 && !v.shape) invalid("binding of '" + name + "': shape is NULL for rank " + std::to_string(v.rank));
  t.shape.assign(v.shape, v.shape + v.rank);
  if (v.strides) t.strides.assign(v.strides, v.strides + v.rank);
  return t;
}

}  // namespace weft::capi
