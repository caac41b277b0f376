// C API: compiling graphs to megakernels, devices, programs.
#include <cstddef>
#include <cstring>

#include "capi/api_common.hpp"
#include "pipeline/compile_graph.hpp"
#include "runtime/driver.hpp"
#include "runtime/program.hpp"

using namespace weft;
using namespace weft::capi;

struct weft_program {
  std::unique_ptr<Program> program;
  const weft_graph* graph = nullptr;  // only to decode tensor ids; the program holds its own copy of the graph
  uint32_t graph_uid = 0;
};

// weft_program_run hands the caller's array to the launch plan as PlanBinding: the layouts must be one.
static_assert(sizeof(PlanBinding) == sizeof(weft_binding));
static_assert(offsetof(PlanBinding, tensor) == offsetof(weft_binding, tensor));
static_assert(offsetof(PlanBinding, data) == offsetof(weft_binding, value.data));
static_assert(offsetof(PlanBinding, dtype) == offsetof(weft_binding, value.dtype));
static_assert(offsetof(PlanBinding, rank) == offsetof(weft_binding, value.rank));
static_assert(offsetof(PlanBinding, shape) == offsetof(weft_binding, value.shape));
static_assert(offsetof(PlanBinding, strides) == offsetof(weft_binding, value.strides));
static_assert(sizeof(weft_dtype) == sizeof(int32_t));

namespace weft::capi {

void fill_compile_report(const CompileResult& r, weft_compile_report* report) {
  require_out(report, "report");
  if (report->struct_size < sizeof(weft_compile_report))
    invalid("report->struct_size is " + std::to_string(report->struct_size) + "; expected sizeof(weft_compile_report)");
  weft_compile_report out{};
  out.struct_size = sizeof out;
  out.num_tasks = r.num_tasks;
  out.num_events = r.num_events;
  out.num_queues = r.num_queues;
  out.arena_bytes = r.arena_bytes;
  out.cubin_bytes = static_cast<int64_t>(r.cubin.size());
  out.total_ms = r.total_ms;
  out.lower_ms = r.lower_ms;
  out.compile_ms = r.compile_ms;
  out.cache_hit = r.cache_hit ? 1 : 0;
  std::snprintf(out.key, sizeof out.key, "%s", r.key_hex.c_str());
  *report = out;
}

}  // namespace weft::capi

namespace {

weft_program* live_program(weft_program* p) {
  if (!p) fail(Status::invalid_handle, "'program' is NULL; expected a program from weft_program_create");
  if (!is_live(p)) fail(Status::invalid_handle, "'program' is not a live program (destroyed or never created)");
  return p;
}

}  // namespace

extern "C" {

weft_status weft_graph_compile(const weft_graph* graph, const weft_compile_options* options, weft_compile_report* report) {
  return guard("weft_graph_compile", [&] {
    live_graph(graph, "graph");
    require_out(report, "report");
    const auto o = read_options(options, "weft_compile_options");
    CompileRequest req;
    req.arch = o.arch ? o.arch : "sm_90a";
    req.num_sms = o.num_sms;
    if (o.num_sms < 0) invalid("num_sms is " + std::to_string(o.num_sms) + "; expected 0 (the arch's) or a positive count");
    std::unique_ptr<cache::KernelCache> cache = o.disable_cache ? nullptr : cache::open_kernel_cache();
    if (report->struct_size < sizeof(weft_compile_report))
      invalid("report->struct_size is " + std::to_string(report->struct_size) + "; expected sizeof(weft_compile_report)");
    fill_compile_report(compile_graph(graph->graph, req, cache.get()), report);
  });
}

weft_status weft_device_count(int32_t* out) {
  return guard("weft_device_count", [&] {
    require_out(out, "out");
    *out = 0;
    std::string why;
    if (!cuda_available(&why)) fail(Status::cuda, why);
    int n = 0;
    check_cu(driver().device_get_count(&n), "cuDeviceGetCount");
    *out = n;
  });
}

weft_status weft_program_create(const weft_graph* graph, const weft_program_options* options, weft_program** out) {
  return guard("weft_program_create", [&] {
    live_graph(graph, "graph");
    require_out(out, "out");
    weft_program_options o = read_options(options, "weft_program_options");
    if (!options) o.device_ordinal = -1;
    ProgramOptions po;
    po.arch = o.arch ? o.arch : "";
    po.watchdog_ms = o.watchdog_ms;
    po.use_cache = o.disable_cache == 0;
    if (o.max_loaded_kernels < 0)
      invalid("max_loaded_kernels is " + std::to_string(o.max_loaded_kernels) + "; expected 0 (default: 8) or more");
    po.max_loaded_kernels = o.max_loaded_kernels > 0 ? o.max_loaded_kernels : 8;
    po.lazy = o.lazy != 0;
    po.tensor_tag = graph->uid;
    if (o.watchdog_ms < 0) invalid("watchdog_ms is " + std::to_string(o.watchdog_ms) + "; expected 0 (default) or more");
    auto p = std::make_unique<weft_program>();
    p->program = std::make_unique<Program>(DeviceContext::open(o.device_ordinal), graph->graph, po);
    p->graph = graph;
    p->graph_uid = graph->uid;
    register_handle(p.get());
    *out = p.release();
  });
}

void weft_program_destroy(weft_program* program) {
  if (!program || !unregister_handle(program)) return;
  delete program;
}

weft_status weft_program_run(weft_program* program, const weft_binding* bindings, int32_t num_bindings, void* stream) {
  return guard("weft_program_run", [&] {
    live_program(program);
    if (num_bindings < 0) invalid("num_bindings is " + std::to_string(num_bindings) + "; expected >= 0");
    if (num_bindings > 0 && !bindings) invalid("bindings is NULL with num_bindings " + std::to_string(num_bindings));
    // The fast path: the launch plan reads the caller's array as it is; only when it finds a fault do the
    // checks below run again, for the message.
    bool plain = true;  // the plan reads `rank` shape entries; a NULL shape takes the checked path
    for (int32_t i = 0; i < num_bindings && plain; ++i) plain = bindings[i].value.rank <= 0 || bindings[i].value.shape;
    if (plain && program->program->run_planned(reinterpret_cast<const PlanBinding*>(bindings), num_bindings, static_cast<CUstream>(stream)))
      return;
    const Graph& g = program->program->graph();
    std::vector<DeviceBinding> db;
    db.reserve(static_cast<size_t>(num_bindings));
    for (int32_t i = 0; i < num_bindings; ++i) {
      const weft_binding& b = bindings[i];
      const std::string param = "bindings[" + std::to_string(i) + "].tensor";
      // Tensor ids are those of the graph the program was made from.
      const auto uid = static_cast<uint32_t>(b.tensor >> 32);
      const auto index = static_cast<uint32_t>(b.tensor & 0xffffffffu);
      if (b.tensor == WEFT_TENSOR_NONE) invalid(param + " is WEFT_TENSOR_NONE");
      if (uid != program->graph_uid || index == 0 || index > g.tensors().size())
        invalid(param + " is not a tensor of the graph this program was created from");
      DeviceBinding d;
      d.tensor = static_cast<TensorId>(index - 1);
      d.view = to_view(b.value, g.tensor(d.tensor).name, i);
      db.push_back(std::move(d));
    }
    program->program->run(db, static_cast<CUstream>(stream));
  });
}

weft_status weft_program_get_stats(weft_program* program, weft_program_stats* out) {
  return guard("weft_program_get_stats", [&] {
    live_program(program);
    require_out(out, "out");
    if (out->struct_size < sizeof(weft_program_stats))
      invalid("out->struct_size is " + std::to_string(out->struct_size) + "; expected sizeof(weft_program_stats)");
    const ProgramStats s = program->program->stats();
    weft_program_stats r{};
    r.struct_size = sizeof r;
    r.compiles = s.compiles;
    r.cache_loads = s.cache_loads;
    r.evictions = s.evictions;
    r.generic_runs = s.generic_runs;
    r.pending = s.pending;
    r.loaded = s.loaded;
    r.host_jit = s.host_jit ? 1 : 0;
    r.host_jit_cache_hit = s.host_jit_cache_hit ? 1 : 0;
    r.host_jit_ms = s.host_jit_ms;
    *out = r;
  });
}

weft_status weft_program_synchronize(weft_program* program, void* stream) {
  return guard("weft_program_synchronize", [&] { live_program(program)->program->synchronize(static_cast<CUstream>(stream)); });
}

}  // extern "C"
