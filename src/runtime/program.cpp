#include "runtime/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codegen/kernel_source.hpp"
#include "core/error.hpp"
#include "device/config.cuh"
#include "reference/buffer.hpp"
#include "runtime/driver.hpp"

namespace weft {

struct Program::Variant {
  CompileResult compiled;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr tasks = 0, waits = 0, notifies = 0, queue_offsets = 0, queue_tasks = 0, events = 0, arena = 0;
  size_t events_bytes = 0;
  unsigned int epoch = 0;
  CUevent done = nullptr;  // recorded after the last launch
  bool launched = false;
};

namespace {

CUdeviceptr upload(const void* data, size_t bytes, const char* what) {
  const DriverApi& d = driver();
  CUdeviceptr p = 0;
  check_cu(d.mem_alloc(&p, bytes ? bytes : 16), std::string("cuMemAlloc (") + what + ")");
  if (bytes) {
    const CUresult r = d.memcpy_htod(p, data, bytes);
    if (r != CUDA_SUCCESS) {
      d.mem_free(p);
      check_cu(r, std::string("cuMemcpyHtoD (") + what + ")");
    }
  }
  return p;
}

template <typename T>
CUdeviceptr upload(const std::vector<T>& v, const char* what) {
  return upload(v.data(), v.size() * sizeof(T), what);
}

int watchdog_ms(int32_t given) {
  if (given > 0) return given;
  if (const char* env = std::getenv("WEFT_WATCHDOG_MS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v > 0) return static_cast<int>(v);
  }
  return 5000;
}

}  // namespace

Program::Program(std::shared_ptr<DeviceContext> device, Graph graph, const ProgramOptions& options)
    : device_(std::move(device)), graph_(std::move(graph)), options_(options) {
  graph_.validate();
  if (options_.arch.empty()) options_.arch = device_->arch();
  if (options_.use_cache) cache_ = cache::open_kernel_cache();
  // clock64 counts SM cycles; at the peak clock this many cycles is the watchdog bound (slower clocks only
  // make the real bound longer).
  timeout_cycles_ = static_cast<long long>(watchdog_ms(options_.watchdog_ms)) * device_->clock_khz();
  DeviceContext::Scope scope(*device_);
  const DriverApi& d = driver();
  void* host = nullptr;
  check_cu(d.mem_host_alloc(&host, 8 * sizeof(unsigned int), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
           "cuMemHostAlloc (error record)");
  error_host_ = static_cast<unsigned int*>(host);
  std::memset(error_host_, 0, 8 * sizeof(unsigned int));
  check_cu(d.mem_host_get_device_pointer(&error_dev_, host, 0), "cuMemHostGetDevicePointer");
}

Program::~Program() {
  try {
    DeviceContext::Scope scope(*device_);
    for (auto& [values, v] : variants_) free_variant(*v);
    if (error_host_) driver().mem_free_host(error_host_);
  } catch (...) {
    // Destructors never throw; a failing driver at teardown leaves nothing else to do.
  }
}

void Program::free_variant(Variant& v) noexcept {
  const DriverApi& d = driver();
  if (v.done) {
    d.event_synchronize(v.done);  // the kernel may still be running on the caller's stream
    d.event_destroy(v.done);
  }
  for (CUdeviceptr p : {v.tasks, v.waits, v.notifies, v.queue_offsets, v.queue_tasks, v.events, v.arena})
    if (p) d.mem_free(p);
  if (v.module) d.module_unload(v.module);
}

Program::Variant& Program::variant_for(const SymbolValues& values) {
  auto it = variants_.find(values);
  if (it != variants_.end()) return *it->second;
  CompileRequest req;
  req.arch = options_.arch;
  req.num_sms = device_->sm_count();
  req.symbols = values;
  auto v = std::make_unique<Variant>();
  v->compiled = compile_graph(graph_, req, cache_.get());
  const DriverApi& d = driver();
  try {
    check_cu(d.module_load_data(&v->module, v->compiled.cubin.data()), "cuModuleLoadData (megakernel)");
    check_cu(d.module_get_function(&v->function, v->module, kMegakernelName), "cuModuleGetFunction");
    check_cu(d.func_set_attribute(v->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, WEFT_SMEM_BYTES),
             "cuFuncSetAttribute (shared memory)");
    // Every queue's block must be resident at once: a persistent kernel whose blocks cannot all run would
    // wait on tasks that never start.
    int per_sm = 0;
    check_cu(d.occupancy_max_blocks(&per_sm, v->function, WEFT_BLOCK_THREADS, WEFT_SMEM_BYTES), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (per_sm * device_->sm_count() < v->compiled.tables.num_queues())
      fail(Status::unsupported, "the megakernel needs " + std::to_string(v->compiled.tables.num_queues()) +
                                    " resident blocks but " + device_->name() + " fits " + std::to_string(per_sm * device_->sm_count()));
    TaskTables& t = v->compiled.tables;
    std::vector<weft_wait> waits = t.waits;
    if (broken_task_ >= 0)  // test hook: an unreachable target for the first waiting task at or after it
      for (size_t i = static_cast<size_t>(broken_task_); i < t.tasks.size(); ++i)
        if (t.tasks[i].wait_count > 0) {
          waits[static_cast<size_t>(t.tasks[i].wait_begin)].count = 0x40000000u;
          break;
        }
    v->tasks = upload(t.tasks, "task table");
    v->waits = upload(waits, "wait table");
    v->notifies = upload(t.notifies, "notify table");
    v->queue_offsets = upload(t.queue_offsets, "queue offsets");
    v->queue_tasks = upload(t.queue_tasks, "queues");
    v->events_bytes = static_cast<size_t>(t.num_events) * sizeof(unsigned int);
    check_cu(d.mem_alloc(&v->events, v->events_bytes ? v->events_bytes : 16), "cuMemAlloc (event counters)");
    check_cu(d.memset_d8(v->events, 0, v->events_bytes ? v->events_bytes : 16), "cuMemsetD8 (event counters)");
    const auto arena_bytes = static_cast<size_t>(std::max<int64_t>(v->compiled.arena_bytes, 256));
    check_cu(d.mem_alloc(&v->arena, arena_bytes), "cuMemAlloc (arena of " + std::to_string(arena_bytes) + " bytes)");
    check_cu(d.event_create(&v->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  } catch (...) {
    free_variant(*v);
    throw;
  }
  return *variants_.emplace(values, std::move(v)).first->second;
}

void Program::run(std::span<const DeviceBinding> bindings, CUstream stream) {
  std::lock_guard lock(mutex_);
  const auto& tensors = graph_.tensors();
  const BoundTensors bt = bind_tensors(graph_, bindings, "device");
  for (const DeviceBinding& b : bindings)
    if (!b.view.strides.empty() && b.view.strides != dense_strides(b.view.shape))
      invalid(binding_label(graph_.tensor(b.tensor)) + " is bound with non-contiguous strides; the device needs dense row-major memory");
  const auto& bound = bt.views;
  const SymbolValues& values = bt.symbols;

  DeviceContext::Scope scope(*device_);
  if (error_host_[0] != 0)
    invalid("a previous run failed on the device and was not reported yet; call weft_program_synchronize first");
  Variant& v = variant_for(values);
  std::vector<void*> slots(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i)
    slots[i] = bound[i] ? bound[i]->data
                        : reinterpret_cast<void*>(v.arena + static_cast<CUdeviceptr>(std::max<int64_t>(v.compiled.arena_offsets[i], 0)));
  ++v.epoch;
  unsigned int epoch = v.epoch;
  long long timeout = timeout_cycles_;
  CUdeviceptr error = error_dev_, error_info = error_dev_ + sizeof(unsigned int);
  void* params[] = {&v.tasks, &v.waits, &v.notifies, &v.queue_offsets, &v.queue_tasks, &v.events,
                    slots.data(), &epoch, &timeout, &error, &error_info};
  const DriverApi& d = driver();
  check_cu(d.launch_kernel(v.function, static_cast<unsigned>(v.compiled.tables.num_queues()), 1, 1, WEFT_BLOCK_THREADS, 1, 1,
                           WEFT_SMEM_BYTES, stream, params, nullptr),
           "cuLaunchKernel (megakernel of graph '" + graph_.name() + "')");
  check_cu(d.event_record(v.done, stream), "cuEventRecord");
  v.launched = true;
  last_ = &v;
}

void Program::synchronize(CUstream stream) {
  std::lock_guard lock(mutex_);
  DeviceContext::Scope scope(*device_);
  check_cu(driver().stream_synchronize(stream), "cuStreamSynchronize");
  const unsigned int code = error_host_[0];
  if (code != WEFT_DEV_OK) raise_device_error(last_, code);
}

void Program::raise_device_error(const Variant* v, unsigned int code) {
  const unsigned int task = error_host_[1], a = error_host_[2], b = error_host_[3], c = error_host_[4];
  std::string where = "task " + std::to_string(task);
  if (v && task < v->compiled.tables.tasks.size()) {
    const weft_task& t = v->compiled.tables.tasks[task];
    where += " (" + std::string(dev_op_function(t.op)) + " for '" + graph_.tensor(t.args.out).name + "', tile rows [" +
             std::to_string(t.args.row0) + ", " + std::to_string(t.args.row1) + ") cols [" + std::to_string(t.args.col0) +
             ", " + std::to_string(t.args.col1) + "))";
  }
  // The counters are no longer consistent with the epochs: start every specialization afresh.
  const DriverApi& d = driver();
  for (auto& [values, var] : variants_) {
    d.memset_d8(var->events, 0, var->events_bytes ? var->events_bytes : 16);
    var->epoch = 0;
  }
  std::memset(error_host_, 0, 8 * sizeof(unsigned int));
  switch (code) {
    case WEFT_DEV_ERR_DEADLOCK:
      fail(Status::deadlock, "graph '" + graph_.name() + "': " + where + " waited on event " + std::to_string(a) +
                                 " for more than " + std::to_string(watchdog_ms(options_.watchdog_ms)) +
                                 " ms (counter at " + std::to_string(c) + ", needed " + std::to_string(b) +
                                 "); the watchdog stopped the kernel");
    case WEFT_DEV_ERR_INDEX:
      invalid("graph '" + graph_.name() + "': " + where + ": row " + std::to_string(a) + " has id " +
              std::to_string(static_cast<int>(b)) + ", outside the embedding table");
    case WEFT_DEV_ERR_POSITION:
      invalid("graph '" + graph_.name() + "': " + where + ": row " + std::to_string(a) + " has position " +
              std::to_string(static_cast<int>(b)) + ", outside the KV cache");
    default:
      fail(Status::internal, "graph '" + graph_.name() + "': " + where + " raised device error " + std::to_string(code));
  }
}

}  // namespace weft
