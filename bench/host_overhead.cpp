// Host overhead of weft_program_run (GPU machine): the time from the call to its return for a decode graph
// (e.g. `weft example llama-3.2-1b > llama.json`), batch 1, with the launch plan JIT-compiled by LLVM ORC and
// with the reference interpreter of the same plan ($WEFT_HOST_JIT=0), side by side in one process. Also the
// warm start: a fresh process from main() to the first token, everything served by the kernel cache.
// Prints a table. Usage:
//   weft_host_overhead GRAPH.json [--iters N]      per-call host time, JIT vs interpreter
//   weft_host_overhead GRAPH.json --warm-start     one process start (run it twice: cold, then warm)
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/weft.h"

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point g_start = Clock::now();  // as close to process start as a static gets

double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

void check(weft_status s, const char* what) {
  if (s != WEFT_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, weft_last_error_message());
    std::exit(1);
  }
}

void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s failed: CUresult %d\n", what, static_cast<int>(r));
    std::exit(1);
  }
}

size_t dtype_bytes(weft_dtype d) { return d == WEFT_DTYPE_F32 || d == WEFT_DTYPE_I32 ? 4 : d == WEFT_DTYPE_I64 ? 8 : 2; }

// Device memory for every bound tensor at batch 1: weights a non-zero bf16 pattern, ids and positions 0.
struct Bound {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<weft_binding> bindings;
  std::vector<CUdeviceptr> memory;
};

Bound bind_all(weft_graph* g) {
  Bound b;
  const char* json = nullptr;
  check(weft_graph_to_json(g, &json), "weft_graph_to_json");
  // Bound tensors: the JSON's "tensors" (inputs, weights, states) and "outputs".
  const nlohmann::json j = nlohmann::json::parse(json);
  std::vector<std::string> names;
  for (const auto& t : j.at("tensors")) names.push_back(t.at("name").get<std::string>());
  for (const auto& o : j.at("outputs")) names.push_back(o.get<std::string>());
  for (const std::string& n : names) {
    weft_tensor t = 0;
    check(weft_graph_find_tensor(g, n.c_str(), &t), "weft_graph_find_tensor");
    weft_tensor_info info{};
    info.struct_size = sizeof info;
    check(weft_graph_tensor_info(g, t, &info), "weft_graph_tensor_info");
    if (info.kind == WEFT_TENSOR_INTERMEDIATE && !info.is_output) continue;
    std::vector<int64_t> shape;
    size_t elems = 1;
    for (int32_t d = 0; d < info.rank; ++d) {
      shape.push_back(info.dims[d].symbol ? 1 : info.dims[d].size);
      elems *= static_cast<size_t>(shape.back());
    }
    CUdeviceptr p = 0;
    const size_t bytes = elems * dtype_bytes(info.dtype);
    check_cu(cuMemAlloc(&p, bytes ? bytes : 16), "cuMemAlloc");
    if (info.dtype == WEFT_DTYPE_BF16 && info.kind == WEFT_TENSOR_WEIGHT)
      check_cu(cuMemsetD16(p, 0x3c23, elems), "cuMemsetD16");  // bf16 0.00996
    else
      check_cu(cuMemsetD8(p, 0, bytes), "cuMemsetD8");
    b.memory.push_back(p);
    b.shapes.push_back(std::move(shape));
    weft_binding wb{};
    wb.tensor = t;
    wb.value.data = reinterpret_cast<void*>(p);
    wb.value.dtype = info.dtype;
    wb.value.rank = info.rank;
    b.bindings.push_back(wb);
  }
  for (size_t i = 0; i < b.bindings.size(); ++i) b.bindings[i].value.shape = b.shapes[i].data();
  return b;
}

struct Timing {
  double median, p10, p90;
};

// sync_every: calls between synchronizations (1: the GPU is idle at every call; 16: up to 16 runs queued).
Timing time_runs(weft_program* p, const Bound& b, int iters, int sync_every = 16) {
  const auto n = static_cast<int32_t>(b.bindings.size());
  for (int i = 0; i < 20; ++i) check(weft_program_run(p, b.bindings.data(), n, nullptr), "weft_program_run (warm-up)");
  check(weft_program_synchronize(p, nullptr), "weft_program_synchronize");
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    check(weft_program_run(p, b.bindings.data(), n, nullptr), "weft_program_run");
    t.push_back(us(a, Clock::now()));
    // Keep the launch queue short: a full queue would make the call itself wait for the GPU.
    if (i % sync_every == sync_every - 1) check(weft_program_synchronize(p, nullptr), "weft_program_synchronize");
  }
  check(weft_program_synchronize(p, nullptr), "weft_program_synchronize");
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]};
}

// What the driver alone costs per launch, for comparison: cuLaunchKernel of an empty kernel whose parameters
// are as large as the megakernel's (the slot table travels by value), and the same plus cuEventRecord.
constexpr int kParamBytes = 1792;

void print_driver_floor(int iters) {
  // weft_spin(ns) keeps the GPU busy for `ns` of global-timer time: launches queued behind it cost what
  // launches behind a running megakernel cost.
  const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry weft_empty(.param .align 8 .b8 p[" +
                          std::to_string(kParamBytes) +
                          "])\n{\n  ret;\n}\n"
                          ".visible .entry weft_spin(.param .u64 ns)\n{\n  .reg .u64 %t0, %t1, %d;\n  .reg .pred %p;\n"
                          "  ld.param.u64 %d, [ns];\n  mov.u64 %t0, %globaltimer;\nWAIT:\n  mov.u64 %t1, %globaltimer;\n"
                          "  sub.u64 %t1, %t1, %t0;\n  setp.lt.u64 %p, %t1, %d;\n  @%p bra WAIT;\n  ret;\n}\n";
  CUmodule m = nullptr;
  CUfunction f = nullptr, spin = nullptr;
  check_cu(cuModuleLoadData(&m, ptx.c_str()), "cuModuleLoadData (empty kernel)");
  check_cu(cuModuleGetFunction(&f, m, "weft_empty"), "cuModuleGetFunction");
  check_cu(cuModuleGetFunction(&spin, m, "weft_spin"), "cuModuleGetFunction");
  std::vector<unsigned char> params(kParamBytes, 1);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params.data(), CU_LAUNCH_PARAM_BUFFER_SIZE, nullptr, CU_LAUNCH_PARAM_END};
  size_t size = kParamBytes;
  extra[3] = &size;
  unsigned long long spin_ns = 2000000;
  void* spin_args[] = {&spin_ns};
  CUevent ev = nullptr;
  check_cu(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  CUcontext ctx = nullptr;
  check_cu(cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  // Variants: 0 launch; 1 launch + event record; 2 launch with the megakernel's 160 KiB of dynamic shared
  // memory; 3 the same, queued behind a 2 ms kernel (as runs queue behind a running megakernel); 4 a context
  // push + pop.
  const char* what[] = {"driver floor: cuLaunchKernel, empty kernel, same parameter bytes",
                        "driver floor: the same + cuEventRecord",
                        "driver floor: the same kernel asking for 160 KiB dynamic shared memory",
                        "driver floor: the same, queued behind a running kernel (GPU busy)",
                        "driver: cuCtxPushCurrent + cuCtxPopCurrent"};
  const unsigned smem_bytes = 160 * 1024;
  check_cu(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem_bytes)),
           "cuFuncSetAttribute");
  for (int variant = 0; variant < 5; ++variant) {
    std::vector<double> t;
    for (int i = 0; i < iters; ++i) {
      if (variant == 3 && i % 16 == 0) check_cu(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, spin_args, nullptr), "cuLaunchKernel (spin)");
      const auto a = Clock::now();
      if (variant == 4) {
        CUcontext popped = nullptr;
        check_cu(cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
        check_cu(cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
      } else {
        check_cu(cuLaunchKernel(f, 132, 1, 1, 384, 1, 1, variant >= 2 ? smem_bytes : 0, nullptr, nullptr, extra),
                 "cuLaunchKernel (empty)");
        if (variant == 1) check_cu(cuEventRecord(ev, nullptr), "cuEventRecord");
      }
      t.push_back(us(a, Clock::now()));
      if (i % 16 == 15) check_cu(cuCtxSynchronize(), "cuCtxSynchronize");
    }
    std::sort(t.begin(), t.end());
    std::printf("| %s | %.2f | %.2f | %.2f | - |\n", what[variant], t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
  }
  cuEventDestroy(ev);
  cuModuleUnload(m);
}

std::string read_file(const char* path) {
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(1);
  }
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s GRAPH.json [--iters N | --warm-start]\n", argv[0]);
    return 2;
  }
  int iters = 2000;
  bool warm_start = false;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--warm-start")) warm_start = true;
  }
  const auto t_main = Clock::now();
  const std::string json = read_file(argv[1]);
  weft_context* ctx = nullptr;
  check(weft_context_create(nullptr, &ctx), "weft_context_create");
  weft_graph* g = nullptr;
  check(weft_graph_from_json(ctx, json.c_str(), &g), "weft_graph_from_json");
  const auto t_graph = Clock::now();
  check_cu(cuInit(0), "cuInit");
  CUdevice dev = 0;
  CUcontext cu = nullptr;
  check_cu(cuDeviceGet(&dev, 0), "cuDeviceGet");
  check_cu(cuDevicePrimaryCtxRetain(&cu, dev), "cuDevicePrimaryCtxRetain");
  check_cu(cuCtxSetCurrent(cu), "cuCtxSetCurrent");
  char name[256] = {};
  cuDeviceGetName(name, sizeof name, dev);
  const auto t_cuda = Clock::now();
  const Bound b = bind_all(g);
  const auto t_ready = Clock::now();

  if (warm_start) {
    weft_program* p = nullptr;
    check(weft_program_create(g, nullptr, &p), "weft_program_create");
    const auto t_created = Clock::now();
    check(weft_program_run(p, b.bindings.data(), static_cast<int32_t>(b.bindings.size()), nullptr), "weft_program_run");
    check(weft_program_synchronize(p, nullptr), "weft_program_synchronize");
    const auto t_token = Clock::now();
    weft_program_stats s{};
    s.struct_size = sizeof s;
    check(weft_program_get_stats(p, &s), "weft_program_get_stats");
    std::printf("| phase | ms |\n|---|---|\n");
    std::printf("| static init -> main | %.2f |\n", us(g_start, t_main) / 1e3);
    std::printf("| graph from JSON (weft_graph_from_json) | %.2f |\n", us(t_main, t_graph) / 1e3);
    std::printf("| CUDA driver init + primary context (not weft) | %.2f |\n", us(t_graph, t_cuda) / 1e3);
    std::printf("| the caller's tensors allocated and filled (not weft) | %.2f |\n", us(t_cuda, t_ready) / 1e3);
    std::printf("| weft_program_create (host JIT %s, %s, %.2f ms) | %.2f |\n", s.host_jit ? "on" : "off",
                s.host_jit_cache_hit ? "object from cache" : "compiled", s.host_jit_ms, us(t_ready, t_created) / 1e3);
    std::printf("| first run + synchronize (kernel %s) | %.2f |\n", s.cache_loads ? "from cache" : "compiled", us(t_created, t_token) / 1e3);
    std::printf("| weft's part: graph + create + first token | %.2f |\n", (us(t_main, t_graph) + us(t_ready, t_token)) / 1e3);
    std::printf("| main -> first token | %.2f |\n", us(t_main, t_token) / 1e3);
    std::printf("device: %s\n", name);
    weft_program_destroy(p);
  } else {
    std::printf("device: %s, %zu bindings, %d timed calls each (median of per-call host time)\n", name, b.bindings.size(), iters);
    std::printf("| launch plan | median us | p10 us | p90 us | plan built in ms |\n|---|---|---|---|---|\n");
    for (const char* jit : {"1", "0"}) {
      setenv("WEFT_HOST_JIT", jit, 1);
      weft_program* p = nullptr;
      check(weft_program_create(g, nullptr, &p), "weft_program_create");
      const Timing t = time_runs(p, b, iters);
      weft_program_stats s{};
      s.struct_size = sizeof s;
      check(weft_program_get_stats(p, &s), "weft_program_get_stats");
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f |\n", s.host_jit ? (s.host_jit_cache_hit ? "LLVM ORC JIT (object from cache)" : "LLVM ORC JIT")
                                                             : "reference interpreter",
                  t.median, t.p10, t.p90, s.host_jit_ms);
      if (*jit == '1') {  // the same with the GPU idle at every call: what queueing behind running work adds
        const Timing idle = time_runs(p, b, iters, 1);
        std::printf("| the same, synchronized after every run (GPU idle at each call) | %.2f | %.2f | %.2f | - |\n", idle.median,
                    idle.p10, idle.p90);
      }
      weft_program_destroy(p);
    }
    {  // a two-tensor graph (y = silu(x)): what a run costs apart from the number of bindings
      weft_graph* tiny = nullptr;
      check(weft_graph_create(ctx, "tiny", &tiny), "weft_graph_create");
      check(weft_graph_declare_symbol(tiny, "batch", 1, 64), "weft_graph_declare_symbol");
      const weft_dim dims[2] = {{"batch", 0}, {nullptr, 64}};
      weft_tensor x = 0, y = 0;
      check(weft_graph_add_tensor(tiny, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, dims, 2, &x), "weft_graph_add_tensor");
      check(weft_op_silu(tiny, x, "y", &y), "weft_op_silu");
      check(weft_graph_mark_output(tiny, y, nullptr), "weft_graph_mark_output");
      const Bound tb = bind_all(tiny);
      for (const char* jit : {"1", "0"}) {
        setenv("WEFT_HOST_JIT", jit, 1);
        weft_program* p = nullptr;
        check(weft_program_create(tiny, nullptr, &p), "weft_program_create");
        const Timing t = time_runs(p, tb, iters);
        std::printf("| y = silu(x), 2 bindings, %s | %.2f | %.2f | %.2f | - |\n", *jit == '1' ? "JIT" : "interpreter", t.median,
                    t.p10, t.p90);
        weft_program_destroy(p);
      }
      for (CUdeviceptr m : tb.memory) cuMemFree(m);
      weft_graph_destroy(tiny);
    }
    print_driver_floor(iters);
  }
  for (CUdeviceptr m : b.memory) cuMemFree(m);
  weft_graph_destroy(g);
  weft_context_destroy(ctx);
  return 0;
}
