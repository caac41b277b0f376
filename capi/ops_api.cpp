// C API: typed op helpers. Each one only translates its arguments into operands + attributes and goes
// through the same Graph::add_op as weft_graph_add_op.
#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "capi/api_common.hpp"

using namespace weft;
using namespace weft::capi;

namespace {

weft_status add(const char* where, weft_graph* g, const char* op, std::initializer_list<weft_tensor> inputs,
                const nlohmann::json& attrs, const char* name, weft_tensor* out) {
  return guard(where, [&] {
    live_graph(g, "graph");
    require_out(out, "out");
    std::vector<TensorId> ids;
    int i = 0;
    for (weft_tensor t : inputs) {
      const std::string param = std::string("op '") + op + "' operand " + std::to_string(i++);
      ids.push_back(decode_tensor(g, t, param.c_str()));
    }
    const TensorId id = g->graph.add_op(op, ids, attrs, opt_str(name));
    ++g->generation;
    *out = encode_tensor(g, id);
  });
}

template <typename Options>
const Options& require_options(const Options* o, const char* op) {
  if (!o) invalid(std::string("op '") + op + "': options is NULL; expected a filled options struct");
  if (o->struct_size < sizeof(Options))
    invalid(std::string("op '") + op + "': options->struct_size is " + std::to_string(o->struct_size) + "; expected " +
            std::to_string(sizeof(Options)));
  return *o;
}

// The double nearest to the shortest decimal that round-trips `f`: 1e-6f becomes 1e-6, so a graph built with a
// float eps here hashes the same as one loaded from JSON that says 1e-6.
double decimal(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

const char* reduce_name(weft_reduce_kind k) {
  switch (k) {
    case WEFT_REDUCE_SUM: return "sum";
    case WEFT_REDUCE_MAX: return "max";
    case WEFT_REDUCE_MEAN: return "mean";
    default: break;
  }
  return "invalid";
}

nlohmann::json dims_json(const weft_dim* dims, int32_t rank) {
  if (rank < 0 || rank > WEFT_MAX_RANK)
    invalid("op 'reshape': rank " + std::to_string(rank) + " is out of range; expected 0 to " + std::to_string(WEFT_MAX_RANK));
  if (rank > 0 && !dims) invalid("op 'reshape': dims is NULL for rank " + std::to_string(rank));
  nlohmann::json a = nlohmann::json::array();
  for (int32_t i = 0; i < rank; ++i) a.push_back(dims[i].symbol ? nlohmann::json(dims[i].symbol) : nlohmann::json(dims[i].size));
  return a;
}

}  // namespace

extern "C" {

weft_status weft_op_embedding(weft_graph* g, weft_tensor table, weft_tensor ids, const char* name, weft_tensor* out) {
  return add("weft_op_embedding", g, "embedding", {table, ids}, {}, name, out);
}
weft_status weft_op_rmsnorm(weft_graph* g, weft_tensor x, weft_tensor weight, float eps, const char* name, weft_tensor* out) {
  return add("weft_op_rmsnorm", g, "rmsnorm", {x, weight}, {{"eps", decimal(eps)}}, name, out);
}
weft_status weft_op_head_rmsnorm(weft_graph* g, weft_tensor x, weft_tensor weight, int64_t head_dim, float eps,
                                 const char* name, weft_tensor* out) {
  return add("weft_op_head_rmsnorm", g, "head_rmsnorm", {x, weight}, {{"head_dim", head_dim}, {"eps", decimal(eps)}}, name, out);
}
weft_status weft_op_layernorm(weft_graph* g, weft_tensor x, weft_tensor weight, weft_tensor bias, float eps,
                              const char* name, weft_tensor* out) {
  return add("weft_op_layernorm", g, "layernorm", {x, weight, bias}, {{"eps", decimal(eps)}}, name, out);
}
weft_status weft_op_linear(weft_graph* g, weft_tensor x, weft_tensor weight, weft_tensor bias, weft_tensor residual,
                           const char* name, weft_tensor* out) {
  // An absent bias with a present residual keeps its slot: operands are positional.
  return add("weft_op_linear", g, "linear", {x, weight, bias, residual}, {}, name, out);
}
weft_status weft_op_matmul(weft_graph* g, weft_tensor a, weft_tensor b, const char* name, weft_tensor* out) {
  return add("weft_op_matmul", g, "matmul", {a, b}, {}, name, out);
}
weft_status weft_op_add(weft_graph* g, weft_tensor a, weft_tensor b, const char* name, weft_tensor* out) {
  return add("weft_op_add", g, "add", {a, b}, {}, name, out);
}
weft_status weft_op_mul(weft_graph* g, weft_tensor a, weft_tensor b, const char* name, weft_tensor* out) {
  return add("weft_op_mul", g, "mul", {a, b}, {}, name, out);
}
weft_status weft_op_silu(weft_graph* g, weft_tensor x, const char* name, weft_tensor* out) {
  return add("weft_op_silu", g, "silu", {x}, {}, name, out);
}
weft_status weft_op_gelu(weft_graph* g, weft_tensor x, int tanh_approximation, const char* name, weft_tensor* out) {
  return add("weft_op_gelu", g, "gelu", {x}, {{"approximate", tanh_approximation ? "tanh" : "none"}}, name, out);
}
weft_status weft_op_silu_mul(weft_graph* g, weft_tensor gate, weft_tensor up, const char* name, weft_tensor* out) {
  return add("weft_op_silu_mul", g, "silu_mul", {gate, up}, {}, name, out);
}

weft_status weft_op_rope(weft_graph* g, weft_tensor x, weft_tensor positions, const weft_rope_options* options,
                         const char* name, weft_tensor* out) {
  nlohmann::json attrs;
  const weft_status s = guard("weft_op_rope", [&] {
    const auto& o = require_options(options, "rope");
    const char* style = o.style == WEFT_ROPE_HALF ? "half" : o.style == WEFT_ROPE_INTERLEAVED ? "interleaved" : "invalid";
    const char* scaling = o.scaling == WEFT_ROPE_SCALING_NONE     ? "none"
                          : o.scaling == WEFT_ROPE_SCALING_LINEAR ? "linear"
                          : o.scaling == WEFT_ROPE_SCALING_LLAMA3 ? "llama3"
                                                                  : "invalid";
    attrs = {{"head_dim", o.head_dim}, {"theta", o.theta == 0 ? 10000.0 : o.theta}, {"style", style}, {"scaling", scaling}};
    // Zero fields take the documented defaults, as theta does (HF's Llama 3.1 values).
    if (o.scaling != WEFT_ROPE_SCALING_NONE) attrs["factor"] = o.factor == 0 ? 8.0 : o.factor;
    if (o.scaling == WEFT_ROPE_SCALING_LLAMA3) {
      attrs["low_freq_factor"] = o.low_freq_factor == 0 ? 1.0 : o.low_freq_factor;
      attrs["high_freq_factor"] = o.high_freq_factor == 0 ? 4.0 : o.high_freq_factor;
      attrs["original_max_position"] = o.original_max_position == 0 ? int64_t{8192} : o.original_max_position;
    }
  });
  if (s != WEFT_OK) return s;
  return add("weft_op_rope", g, "rope", {x, positions}, attrs, name, out);
}

weft_status weft_op_attention_decode(weft_graph* g, weft_tensor q, weft_tensor k_new, weft_tensor v_new,
                                     weft_tensor k_cache, weft_tensor v_cache, weft_tensor positions,
                                     const weft_attention_options* options, const char* name, weft_tensor* out) {
  nlohmann::json attrs;
  const weft_status s = guard("weft_op_attention_decode", [&] {
    const auto& o = require_options(options, "attention_decode");
    attrs = {{"num_q_heads", o.num_q_heads}, {"num_kv_heads", o.num_kv_heads}, {"head_dim", o.head_dim}};
    if (o.scale != 0) attrs["scale"] = o.scale;
  });
  if (s != WEFT_OK) return s;
  return add("weft_op_attention_decode", g, "attention_decode", {q, k_new, v_new, k_cache, v_cache, positions}, attrs,
             name, out);
}

weft_status weft_op_softmax(weft_graph* g, weft_tensor x, const char* name, weft_tensor* out) {
  return add("weft_op_softmax", g, "softmax", {x}, {}, name, out);
}
weft_status weft_op_argmax(weft_graph* g, weft_tensor x, weft_dtype dtype, const char* name, weft_tensor* out) {
  return add("weft_op_argmax", g, "argmax", {x}, {{"dtype", weft_dtype_name(dtype)}}, name, out);
}
weft_status weft_op_reduce(weft_graph* g, weft_tensor x, weft_reduce_kind kind, int32_t axis, int keepdim,
                           const char* name, weft_tensor* out) {
  return add("weft_op_reduce", g, "reduce", {x}, {{"kind", reduce_name(kind)}, {"axis", axis}, {"keepdim", keepdim != 0}},
             name, out);
}
weft_status weft_op_cast(weft_graph* g, weft_tensor x, weft_dtype dtype, const char* name, weft_tensor* out) {
  return add("weft_op_cast", g, "cast", {x}, {{"dtype", weft_dtype_name(dtype)}}, name, out);
}
weft_status weft_op_reshape(weft_graph* g, weft_tensor x, const weft_dim* dims, int32_t rank, const char* name,
                            weft_tensor* out) {
  nlohmann::json attrs;
  const weft_status s = guard("weft_op_reshape", [&] { attrs = {{"shape", dims_json(dims, rank)}}; });
  if (s != WEFT_OK) return s;
  return add("weft_op_reshape", g, "reshape", {x}, attrs, name, out);
}
weft_status weft_op_slice(weft_graph* g, weft_tensor x, int32_t axis, int64_t start, int64_t end, const char* name,
                          weft_tensor* out) {
  return add("weft_op_slice", g, "slice", {x}, {{"axis", axis}, {"start", start}, {"end", end}}, name, out);
}

weft_status weft_op_concat(weft_graph* g, const weft_tensor* inputs, int32_t num_inputs, int32_t axis, const char* name,
                           weft_tensor* out) {
  std::string attrs;
  const weft_status s = guard("weft_op_concat", [&] { attrs = nlohmann::json{{"axis", axis}}.dump(); });
  if (s != WEFT_OK) return s;
  return weft_graph_add_op(g, "concat", inputs, num_inputs, attrs.c_str(), name, out);
}

}  // extern "C"
