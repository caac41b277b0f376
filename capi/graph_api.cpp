// C API: graph creation, tensors, generic ops, outputs, introspection, JSON, hash.
#include <atomic>
#include <cstddef>
#include <cstring>

#include "capi/api_common.hpp"
#include "graph/serialize.hpp"

using namespace weft;
using namespace weft::capi;

namespace {

std::atomic<uint32_t> g_next_uid{1};

weft_graph* new_graph(weft_context* context, Graph graph) {
  auto* g = new weft_graph();
  g->context = context->shared_from_this();
  g->uid = g_next_uid.fetch_add(1);
  g->graph = std::move(graph);
  register_handle(g);
  return g;
}

nlohmann::json parse_attrs(const char* attrs_json, const std::string& op) {
  if (!attrs_json || !*attrs_json) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(attrs_json);
  } catch (const nlohmann::json::parse_error& e) {
    invalid("op '" + op + "': attrs_json does not parse: " + e.what());
  }
}

// Produces the graph's JSON and text listing once per change; later calls return the cached strings.
void refresh_caches(const weft_graph* g) {
  if (g->cache_generation == g->generation) return;
  g->graph.validate();
  g->json_cache = graph_to_json_string(g->graph);
  g->text_cache = graph_to_text(g->graph);
  g->cache_generation = g->generation;
}

}  // namespace

extern "C" {

weft_status weft_graph_create(weft_context* context, const char* name, weft_graph** out) {
  return guard("weft_graph_create", [&] {
    live_context(context, "context");
    require_out(out, "out");
    *out = new_graph(context, Graph(name && *name ? name : "graph"));
  });
}

void weft_graph_destroy(weft_graph* graph) {
  if (!graph || !unregister_handle(graph)) return;
  delete graph;
}

weft_status weft_graph_declare_symbol(weft_graph* graph, const char* name, int64_t min_value, int64_t max_value) {
  return guard("weft_graph_declare_symbol", [&] {
    live_graph(graph, "graph")->graph.declare_symbol(require_str(name, "name"), min_value, max_value);
    ++graph->generation;
  });
}

weft_status weft_graph_set_symbol_policy(weft_graph* graph, const char* name, weft_symbol_policy policy,
                                        const int64_t* buckets, int32_t num_buckets) {
  return guard("weft_graph_set_symbol_policy", [&] {
    live_graph(graph, "graph");
    const std::string n = require_str(name, "name");
    const int32_t id = graph->graph.symbols().find(n);
    if (id < 0) invalid("symbol '" + n + "' is not declared in graph '" + graph->graph.name() + "'");
    if (num_buckets < 0) invalid("num_buckets is " + std::to_string(num_buckets) + "; expected >= 0");
    if (num_buckets > 0 && !buckets) invalid("buckets is NULL with num_buckets " + std::to_string(num_buckets));
    if (num_buckets > 4096) invalid("num_buckets is " + std::to_string(num_buckets) + "; expected at most 4096");
    graph->graph.set_symbol_policy(id, static_cast<SymbolPolicy>(policy),
                                   std::vector<int64_t>(buckets, buckets + (num_buckets > 0 ? num_buckets : 0)));
    ++graph->generation;
  });
}

weft_status weft_graph_add_tensor(weft_graph* graph, weft_tensor_kind kind, const char* name, weft_dtype dtype,
                                  const weft_dim* dims, int32_t rank, weft_tensor* out) {
  return guard("weft_graph_add_tensor", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    const std::string n = require_str(name, "name");
    if (kind != WEFT_TENSOR_INPUT && kind != WEFT_TENSOR_WEIGHT && kind != WEFT_TENSOR_STATE)
      invalid("tensor '" + n + "': kind " + std::to_string(static_cast<int>(kind)) +
              " is not WEFT_TENSOR_INPUT, WEFT_TENSOR_WEIGHT or WEFT_TENSOR_STATE");
    const DType dt = to_dtype(dtype, "dtype");
    const Shape shape = to_shape(graph->graph, n, dims, rank);
    const TensorId id = graph->graph.add_tensor(static_cast<TensorKind>(kind), n, dt, shape);
    ++graph->generation;
    *out = encode_tensor(graph, id);
  });
}

weft_status weft_graph_add_op(weft_graph* graph, const char* op, const weft_tensor* inputs, int32_t num_inputs,
                              const char* attrs_json, const char* name, weft_tensor* out) {
  return guard("weft_graph_add_op", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    const std::string op_name = require_str(op, "op");
    if (num_inputs < 0 || num_inputs > 4096)
      invalid("op '" + op_name + "': num_inputs is " + std::to_string(num_inputs) + "; expected 0 to 4096");
    if (num_inputs > 0 && !inputs) invalid("op '" + op_name + "': inputs is NULL with num_inputs " + std::to_string(num_inputs));
    std::vector<TensorId> ids;
    for (int32_t i = 0; i < num_inputs; ++i) {
      const std::string param = "op '" + op_name + "' inputs[" + std::to_string(i) + "]";
      ids.push_back(decode_tensor(graph, inputs[i], param.c_str()));
    }
    const TensorId id = graph->graph.add_op(op_name, ids, parse_attrs(attrs_json, op_name), opt_str(name));
    ++graph->generation;
    *out = encode_tensor(graph, id);
  });
}

weft_status weft_graph_mark_output(weft_graph* graph, weft_tensor tensor, const char* name) {
  return guard("weft_graph_mark_output", [&] {
    live_graph(graph, "graph");
    const TensorId id = decode_tensor(graph, tensor, "tensor");
    if (id == kNoTensor) invalid("'tensor' is WEFT_TENSOR_NONE; expected an op result");
    graph->graph.mark_output(id, opt_str(name));
    ++graph->generation;
  });
}

weft_status weft_graph_validate(const weft_graph* graph) {
  return guard("weft_graph_validate", [&] { live_graph(graph, "graph")->graph.validate(); });
}

int32_t weft_op_count(void) { return static_cast<int32_t>(all_ops().size()); }

const char* weft_op_name(int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= all_ops().size()) return nullptr;
  return all_ops()[static_cast<size_t>(index)]->name.data();  // op names are string literals
}

weft_status weft_graph_tensor_info(const weft_graph* graph, weft_tensor tensor, weft_tensor_info* info) {
  return guard("weft_graph_tensor_info", [&] {
    live_graph(graph, "graph");
    require_out(info, "info");
    if (info->struct_size < offsetof(weft_tensor_info, is_output))
      invalid("info->struct_size is " + std::to_string(info->struct_size) + "; expected sizeof(weft_tensor_info) (" +
              std::to_string(sizeof(weft_tensor_info)) + ")");
    const TensorId id = decode_tensor(graph, tensor, "tensor");
    if (id == kNoTensor) invalid("'tensor' is WEFT_TENSOR_NONE");
    const TensorDesc& t = graph->graph.tensor(id);
    weft_tensor_info r{};
    r.struct_size = sizeof r;
    r.name = t.name.c_str();
    r.kind = static_cast<weft_tensor_kind>(t.kind);
    r.dtype = static_cast<weft_dtype>(t.type.dtype);
    r.rank = static_cast<int32_t>(t.type.shape.size());
    for (size_t i = 0; i < t.type.shape.size(); ++i) {
      const Dim& d = t.type.shape[i];
      r.dims[i] = d.is_fixed() ? weft_dim{nullptr, d.value} : weft_dim{graph->graph.symbols().at(d.symbol).name.c_str(), 0};
    }
    r.is_output = t.is_output ? 1 : 0;
    const size_t keep = info->struct_size < sizeof r ? info->struct_size : sizeof r;
    std::memcpy(info, &r, keep);
    info->struct_size = keep;
  });
}

weft_status weft_graph_find_tensor(const weft_graph* graph, const char* name, weft_tensor* out) {
  return guard("weft_graph_find_tensor", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    const std::string n = require_str(name, "name");
    const TensorId id = graph->graph.find_tensor(n);
    if (id == kNoTensor) invalid("graph '" + graph->graph.name() + "' has no tensor named '" + n + "'");
    *out = encode_tensor(graph, id);
  });
}

weft_status weft_graph_num_outputs(const weft_graph* graph, int32_t* out) {
  return guard("weft_graph_num_outputs", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    *out = static_cast<int32_t>(graph->graph.outputs().size());
  });
}

weft_status weft_graph_output(const weft_graph* graph, int32_t index, weft_tensor* out) {
  return guard("weft_graph_output", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    const auto& outs = graph->graph.outputs();
    if (index < 0 || static_cast<size_t>(index) >= outs.size())
      invalid("output index " + std::to_string(index) + " is out of range; the graph has " + std::to_string(outs.size()) + " outputs");
    *out = encode_tensor(graph, outs[static_cast<size_t>(index)]);
  });
}

weft_status weft_graph_to_json(const weft_graph* graph, const char** out_json) {
  return guard("weft_graph_to_json", [&] {
    live_graph(graph, "graph");
    require_out(out_json, "out_json");
    std::lock_guard lock(graph->cache_mutex);
    refresh_caches(graph);
    *out_json = graph->json_cache.c_str();
  });
}

weft_status weft_graph_to_text(const weft_graph* graph, const char** out_text) {
  return guard("weft_graph_to_text", [&] {
    live_graph(graph, "graph");
    require_out(out_text, "out_text");
    std::lock_guard lock(graph->cache_mutex);
    refresh_caches(graph);
    *out_text = graph->text_cache.c_str();
  });
}

weft_status weft_graph_hash(const weft_graph* graph, uint64_t out[2]) {
  return guard("weft_graph_hash", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    graph->graph.validate();
    const auto h = graph_hash(graph->graph);
    out[0] = h[0];
    out[1] = h[1];
  });
}

weft_status weft_graph_from_json(weft_context* context, const char* json, weft_graph** out) {
  return guard("weft_graph_from_json", [&] {
    live_context(context, "context");
    require_out(out, "out");
    Graph g = graph_from_json(require_str(json, "json"));
    *out = new_graph(context, std::move(g));
  });
}

}  // extern "C"
