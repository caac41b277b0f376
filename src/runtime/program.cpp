#include "runtime/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "codegen/kernel_source.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "device/config.cuh"
#include "reference/buffer.hpp"
#include "runtime/driver.hpp"
#include "runtime/trace_export.hpp"

namespace weft {

struct Program::Variant {
  CompileResult compiled;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr tasks = 0, waits = 0, notifies = 0, queue_offsets = 0, queue_tasks = 0, events = 0, arena = 0;
  size_t events_bytes = 0;  // the event counters, then the grid barrier counter of multi-step runs
  unsigned int epoch = 0;
  unsigned int barriers = 0;  // grid barriers completed (multi-step runs)
  // Multi-step buffers, grown on demand: tokens [steps + 1][n], counters [steps][n], step slots [steps][slots].
  CUdeviceptr loop_tokens = 0, loop_counters = 0, loop_slots = 0;
  size_t loop_tokens_bytes = 0, loop_counters_bytes = 0, loop_slots_bytes = 0;
  std::vector<void*> loop_slots_uploaded;  // what loop_slots holds
  CUevent loop_done = nullptr;             // recorded after the last multi-step launch
  CUdeviceptr trace = 0;  // WEFT_TRACE records, grown on demand
  size_t trace_bytes = 0;
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
  if (const char* trace = std::getenv("WEFT_TRACE")) trace_path_ = trace;
  if (const char* tune = std::getenv("WEFT_TUNE")) tuning_ = static_cast<unsigned int>(std::strtoul(tune, nullptr, 0));
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
    write_trace();
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
  if (v.loop_done) {
    d.event_synchronize(v.loop_done);
    d.event_destroy(v.loop_done);
  }
  for (CUdeviceptr p : {v.tasks, v.waits, v.notifies, v.queue_offsets, v.queue_tasks, v.events, v.arena, v.loop_tokens,
                        v.loop_counters, v.loop_slots, v.trace})
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
    v->events_bytes = static_cast<size_t>(t.num_events + 1) * sizeof(unsigned int);
    check_cu(d.mem_alloc(&v->events, v->events_bytes), "cuMemAlloc (event counters)");
    check_cu(d.memset_d8(v->events, 0, v->events_bytes), "cuMemsetD8 (event counters)");
    const auto arena_bytes = static_cast<size_t>(std::max<int64_t>(v->compiled.arena_bytes, 256));
    check_cu(d.mem_alloc(&v->arena, arena_bytes), "cuMemAlloc (arena of " + std::to_string(arena_bytes) + " bytes)");
    check_cu(d.event_create(&v->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  } catch (...) {
    free_variant(*v);
    throw;
  }
  return *variants_.emplace(values, std::move(v)).first->second;
}

const CompileResult& Program::specialize(const SymbolValues& values) {
  std::lock_guard lock(mutex_);
  DeviceContext::Scope scope(*device_);
  return variant_for(resolve_symbols(graph_, values)).compiled;
}

void Program::run(std::span<const DeviceBinding> bindings, CUstream stream) { launch(bindings, nullptr, stream); }

void Program::run_loop(std::span<const DeviceBinding> bindings, const LoopRequest& loop, CUstream stream) {
  if (loop.steps < 1) invalid("a multi-step run needs steps >= 1; got " + std::to_string(loop.steps));
  launch(bindings, &loop, stream);
}

namespace {

CUdeviceptr grow(CUdeviceptr p, size_t& capacity, size_t bytes, const char* what) {
  if (bytes <= capacity) return p;
  const DriverApi& d = driver();
  if (p) check_cu(d.mem_free(p), std::string("cuMemFree (") + what + ")");
  capacity = 0;
  CUdeviceptr out = 0;
  check_cu(d.mem_alloc(&out, bytes), std::string("cuMemAlloc (") + what + ")");
  capacity = bytes;
  return out;
}

}  // namespace

size_t Program::prepare_loop(Variant& v, const std::vector<void*>& slots, const std::vector<const TensorView*>& bound,
                           const LoopRequest& loop, CUstream stream) {
  const Graph& g = graph_;
  auto check = [&](TensorId t, const char* role) -> const TensorView& {
    if (t < 0 || static_cast<size_t>(t) >= g.tensors().size()) invalid(std::string("the loop's ") + role + " is not a tensor of the graph");
    const TensorDesc& d = g.tensor(t);
    if (!bound[static_cast<size_t>(t)]) invalid(std::string("the loop's ") + role + " '" + d.name + "' is not an input or output of the graph");
    if (d.type.dtype != DType::i32) invalid(std::string("the loop's ") + role + " '" + d.name + "' is " + std::string(dtype_name(d.type.dtype)) + "; expected i32");
    return *bound[static_cast<size_t>(t)];
  };
  const TensorView& out = check(loop.feedback_output, "feedback output");
  const TensorView& in = check(loop.feedback_input, "feedback input");
  const TensorView& counter = check(loop.counter_input, "counter input");
  if (!g.tensor(loop.feedback_output).is_output) invalid("the loop's feedback output '" + g.tensor(loop.feedback_output).name + "' is not a graph output");
  if (g.tensor(loop.feedback_input).kind != TensorKind::input) invalid("the loop's feedback input '" + g.tensor(loop.feedback_input).name + "' is not a graph input");
  if (g.tensor(loop.counter_input).kind != TensorKind::input) invalid("the loop's counter input '" + g.tensor(loop.counter_input).name + "' is not a graph input");
  const int64_t n = element_count(in.shape);
  if (element_count(out.shape) != n || element_count(counter.shape) != n)
    invalid("the loop's feedback output '" + g.tensor(loop.feedback_output).name + "' (" + std::to_string(element_count(out.shape)) +
            " elements), feedback input '" + g.tensor(loop.feedback_input).name + "' (" + std::to_string(n) +
            ") and counter '" + g.tensor(loop.counter_input).name + "' (" + std::to_string(element_count(counter.shape)) + ") must have one element count");
  const size_t steps = static_cast<size_t>(loop.steps), nb = static_cast<size_t>(n) * sizeof(int32_t);
  const DriverApi& d = driver();
  const size_t slot_bytes = steps * slots.size() * sizeof(void*);
  if (slot_bytes > v.loop_slots_bytes || (steps + 1) * nb > v.loop_tokens_bytes || steps * nb > v.loop_counters_bytes) {
    // Buffers a previous multi-step launch may still use are only replaced once it has finished.
    if (v.loop_done) check_cu(d.event_synchronize(v.loop_done), "cuEventSynchronize (previous multi-step run)");
    v.loop_slots = grow(v.loop_slots, v.loop_slots_bytes, slot_bytes, "multi-step slot tables");
    v.loop_tokens = grow(v.loop_tokens, v.loop_tokens_bytes, (steps + 1) * nb, "multi-step tokens");
    v.loop_counters = grow(v.loop_counters, v.loop_counters_bytes, steps * nb, "multi-step counters");
    v.loop_slots_uploaded.clear();
  }
  std::vector<void*> table(steps * slots.size());
  for (size_t s = 0; s < steps; ++s) {
    void** row = table.data() + s * slots.size();
    std::copy(slots.begin(), slots.end(), row);
    row[static_cast<size_t>(loop.feedback_input)] = reinterpret_cast<void*>(v.loop_tokens + s * nb);
    row[static_cast<size_t>(loop.feedback_output)] = reinterpret_cast<void*>(v.loop_tokens + (s + 1) * nb);
    row[static_cast<size_t>(loop.counter_input)] = reinterpret_cast<void*>(v.loop_counters + s * nb);
  }
  if (table != v.loop_slots_uploaded) {
    // The upload is ordered after earlier launches on `stream`; from pageable memory it is staged before the
    // call returns, so the host vector may go away.
    check_cu(d.memcpy_htod_async(v.loop_slots, table.data(), slot_bytes, stream), "cuMemcpyHtoDAsync (multi-step slot tables)");
    v.loop_slots_uploaded = std::move(table);
  }
  return nb;
}

void Program::launch(std::span<const DeviceBinding> bindings, const LoopRequest* loop, CUstream stream) {
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
  const DriverApi& d = driver();
  weft_loop lp{};
  lp.barrier = reinterpret_cast<unsigned int*>(v.events + v.events_bytes - sizeof(unsigned int));
  lp.barrier_base = v.barriers;
  size_t n_bytes = 0;  // one step's feedback tokens
  if (loop) {
    n_bytes = prepare_loop(v, slots, bound, *loop, stream);
    lp.step_slots = reinterpret_cast<void* const*>(v.loop_slots);
    lp.steps = loop->steps;
    lp.feed_n = static_cast<int>(n_bytes / sizeof(int32_t));
    lp.feed_src = static_cast<const int*>(bound[static_cast<size_t>(loop->feedback_input)]->data);
    lp.tokens = reinterpret_cast<int*>(v.loop_tokens);
    lp.counter_src = static_cast<const int*>(bound[static_cast<size_t>(loop->counter_input)]->data);
    lp.counters = reinterpret_cast<int*>(v.loop_counters);
  }
  unsigned int epoch = v.epoch + 1;
  long long timeout = timeout_cycles_;
  CUdeviceptr error = error_dev_, error_info = error_dev_ + sizeof(unsigned int);
  const int32_t steps = loop ? loop->steps : 1;
  const size_t trace_bytes = static_cast<size_t>(steps) * v.compiled.tables.queue_tasks.size() * kTraceRecordWords * sizeof(uint64_t);
  CUdeviceptr trace = 0;
  if (!trace_path_.empty()) {
    // The records are read back at destruction, so tracing adds no wait per launch (except when they grow).
    if (trace_bytes > v.trace_bytes) check_cu(d.event_synchronize(v.done), "cuEventSynchronize (WEFT_TRACE)");
    v.trace = grow(v.trace, v.trace_bytes, trace_bytes, "trace records");
    check_cu(d.memset_d8_async(v.trace, 0, trace_bytes, stream), "cuMemsetD8Async (trace records)");
    trace = v.trace;
  }
  unsigned int tuning = tuning_;
  void* params[] = {&v.tasks, &v.waits, &v.notifies, &v.queue_offsets, &v.queue_tasks, &v.events,
                    slots.data(), &epoch, &timeout, &error, &error_info, &lp, &trace, &tuning};
  check_cu(d.launch_kernel(v.function, static_cast<unsigned>(v.compiled.tables.num_queues()), 1, 1, WEFT_BLOCK_THREADS, 1, 1,
                           WEFT_SMEM_BYTES, stream, params, nullptr),
           "cuLaunchKernel (megakernel of graph '" + graph_.name() + "')");
  v.epoch += static_cast<unsigned int>(steps);
  if (loop) {
    v.barriers += static_cast<unsigned int>(steps);
    const size_t passes = static_cast<size_t>(steps);
    if (loop->history)
      check_cu(d.memcpy_dtod_async(loop->history, v.loop_tokens + n_bytes, passes * n_bytes, stream), "cuMemcpyDtoDAsync (loop history)");
    const auto out_ptr = reinterpret_cast<CUdeviceptr>(bound[static_cast<size_t>(loop->feedback_output)]->data);
    check_cu(d.memcpy_dtod_async(out_ptr, v.loop_tokens + passes * n_bytes, n_bytes, stream), "cuMemcpyDtoDAsync (loop output)");
    if (!v.loop_done) check_cu(d.event_create(&v.loop_done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check_cu(d.event_record(v.loop_done, stream), "cuEventRecord");
  }
  check_cu(d.event_record(v.done, stream), "cuEventRecord");
  v.launched = true;
  last_ = &v;
  if (trace) {
    traced_ = &v;
    traced_steps_ = steps;
  }
}

void Program::write_trace() noexcept {
  if (!traced_) return;
  try {
    const DriverApi& d = driver();
    Variant& v = *traced_;
    const size_t bytes = static_cast<size_t>(traced_steps_) * v.compiled.tables.queue_tasks.size() * kTraceRecordWords * sizeof(uint64_t);
    std::vector<uint64_t> records(bytes / sizeof(uint64_t));
    check_cu(d.event_synchronize(v.done), "cuEventSynchronize (WEFT_TRACE)");
    check_cu(d.memcpy_dtoh(records.data(), v.trace, bytes), "cuMemcpyDtoH (trace records)");
    write_chrome_trace(trace_path_, graph_, v.compiled.tables, traced_steps_, records);
  } catch (const std::exception& e) {
    log_warning(std::string("WEFT_TRACE: ") + e.what());
  }
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
  std::string where = task == 0xffffffffu ? std::string("the grid barrier between steps") : "task " + std::to_string(task);
  if (v && task < v->compiled.tables.tasks.size()) {
    const weft_task& t = v->compiled.tables.tasks[task];
    where += " (" + std::string(dev_op_function(t.op)) + " for '" + graph_.tensor(t.args.out).name + "', tile rows [" +
             std::to_string(t.args.row0) + ", " + std::to_string(t.args.row1) + ") cols [" + std::to_string(t.args.col0) +
             ", " + std::to_string(t.args.col1) + "))";
  }
  // The counters are no longer consistent with the epochs: start every specialization afresh.
  const DriverApi& d = driver();
  for (auto& [values, var] : variants_) {
    d.memset_d8(var->events, 0, var->events_bytes);
    var->epoch = 0;
    var->barriers = 0;
  }
  std::memset(error_host_, 0, 8 * sizeof(unsigned int));
  switch (code) {
    case WEFT_DEV_ERR_DEADLOCK:
      fail(Status::deadlock, "graph '" + graph_.name() + "': " + where + " waited on " +
                                 (a == 0xffffffffu ? std::string("the other blocks") : "event " + std::to_string(a)) +
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
