#include "runtime/program.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>

#include "codegen/kernel_source.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "device/config.cuh"
#include "graph/symbol_masking.hpp"
#include "reference/buffer.hpp"
#include "runtime/driver.hpp"
#include "runtime/trace_export.hpp"

namespace weft {

struct Program::Variant {
  CompileResult compiled;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUdeviceptr tasks = 0, waits = 0, notifies = 0, queue_offsets = 0, queue_tasks = 0, events = 0, arena = 0;
  size_t arena_bytes = 0;
  size_t events_bytes = 0;  // the event counters, the grid barrier and gate words of multi-step runs, the scratch words
  unsigned int epoch = 0;
  unsigned int barriers = 0;  // grid barriers completed (multi-step runs)
  unsigned int gates = 0;     // gate releases completed (resident multi-step runs)
  // Multi-step buffers, grown on demand: tokens [steps + 1][n], counters [steps][n], step slots [steps][slots].
  CUdeviceptr loop_tokens = 0, loop_counters = 0, loop_slots = 0;
  size_t loop_tokens_bytes = 0, loop_counters_bytes = 0, loop_slots_bytes = 0;
  std::vector<void*> loop_slots_uploaded;  // what loop_slots holds
  CUevent loop_done = nullptr;             // recorded after the last multi-step launch
  CUdeviceptr trace = 0;  // WEFT_TRACE records, grown on demand
  size_t trace_bytes = 0;
  CUevent done = nullptr;  // recorded after the last launch
  bool launched = false;
  uint64_t last_used = 0;  // LRU stamp
  std::vector<std::pair<size_t, CUdeviceptr>> arena_slots;  // (tensor, address) of every arena tensor
  // The weight loader's kernel (compiled.kernel_name): its fixed-length slot table, and the graph's slot count.
  std::vector<void*> entry_slots;
  int num_slots = 0;
};

// A specialization compiling (and loading) on a background thread in lazy mode.
struct Program::Pending {
  std::future<std::unique_ptr<Variant>> result;
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
  if (options_.max_loaded_kernels < 1) invalid("max_loaded_kernels is " + std::to_string(options_.max_loaded_kernels) + "; expected >= 1");
  if (options_.attention_split < 0 || options_.attention_split > WEFT_ATTN_MAX_SPLIT)
    invalid("attention_split is " + std::to_string(options_.attention_split) + "; expected 0 (the default) or 1 to " +
            std::to_string(WEFT_ATTN_MAX_SPLIT));
  if (options_.attention_pairs < -1 || options_.attention_pairs > 1)
    invalid("attention_pairs is " + std::to_string(options_.attention_pairs) + "; expected -1, 0 (the default) or 1");
  for (size_t s = 0; s < graph_.symbols().size(); ++s) {
    const auto id = static_cast<int32_t>(s);
    buckets_.push_back(specialization_buckets(graph_.symbols().at(id), effective_symbol_policy(graph_, id)));
  }
  plan_tables_ = make_launch_plan_tables(graph_, buckets_, options_.tensor_tag);
  if (const char* env = std::getenv("WEFT_HOST_JIT"); env && std::string(env) == "0") options_.host_jit = false;
  if (options_.host_jit) {
    std::string why;
    try {
      plan_jit_ = compile_launch_plan(plan_tables_, cache_.get(), &why);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (plan_jit_) {
      plan_fn_ = plan_jit_->function();
      stats_.host_jit = true;
      stats_.host_jit_cache_hit = plan_jit_->stats().object_cache_hit;
      stats_.host_jit_ms = plan_jit_->stats().jit_ms;
    } else if (host_jit_available()) {
      log_warning("host JIT unavailable, runs are planned by the interpreter: " + why);
    }
  }
  plan_slots_.assign(graph_.tensors().size(), nullptr);
  plan_symbols_.assign(graph_.symbols().size(), 0);
  plan_compile_.assign(graph_.symbols().size(), 0);
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
    wait_for_pending();
    adopt_finished();
    DeviceContext::Scope scope(*device_);
    write_trace();
    for (auto& [values, v] : variants_) free_variant(*v);
    if (error_host_) driver().mem_free_host(error_host_);
    gate_.release();
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

std::unique_ptr<Program::Variant> Program::build_variant(const SymbolValues& values) {
  DeviceContext::Scope scope(*device_);
  CompileRequest req;
  req.arch = options_.arch;
  req.num_sms = device_->sm_count();
  req.symbols = values;
  req.attention_split = options_.attention_split;
  req.attention_pairs = options_.attention_pairs;
  auto v = std::make_unique<Variant>();
  v->compiled = compile_graph(graph_, req, cache_.get());
  const DriverApi& d = driver();
  try {
    check_cu(d.module_load_data(&v->module, v->compiled.cubin.data()), "cuModuleLoadData (megakernel)");
    check_cu(d.module_get_function(&v->function, v->module, v->compiled.kernel_name.c_str()), "cuModuleGetFunction");
    if (v->compiled.kernel_name != kMegakernelName) {
      if (graph_.tensors().size() > WEFT_LOADER_ENTRY_SLOTS)  // compile_graph keeps such graphs off this kernel
        fail(Status::internal, "the weight loader's kernel takes at most " + std::to_string(WEFT_LOADER_ENTRY_SLOTS) + " tensors");
      v->entry_slots.assign(WEFT_LOADER_ENTRY_SLOTS, nullptr);
      v->num_slots = static_cast<int>(graph_.tensors().size());
    }
    check_cu(d.func_set_attribute(v->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v->compiled.smem_bytes),
             "cuFuncSetAttribute (shared memory)");
    // Every queue's block must be resident at once: a persistent kernel whose blocks cannot all run would
    // wait on tasks that never start.
    int per_sm = 0;
    check_cu(d.occupancy_max_blocks(&per_sm, v->function, v->compiled.launch_threads, v->compiled.smem_bytes),
             "cuOccupancyMaxActiveBlocksPerMultiprocessor");
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
    // The event counters, the grid barrier counter, the resident loop's gate words (releases, stop), then
    // (16-byte aligned) the scratch words of split tiles (their tasks get its address, relocate_scratch): all of
    // it zeroed together, here and after an error.
    const size_t counters = (static_cast<size_t>(t.num_events + 3) * sizeof(unsigned int) + 15) / 16 * 16;
    v->events_bytes = counters + static_cast<size_t>(t.scratch_words) * sizeof(unsigned int);
    check_cu(d.mem_alloc(&v->events, v->events_bytes), "cuMemAlloc (event counters)");
    check_cu(d.memset_d8(v->events, 0, v->events_bytes), "cuMemsetD8 (event counters)");
    v->tasks = upload(relocate_scratch(t, static_cast<uint64_t>(v->events + counters)), "task table");
    v->waits = upload(waits, "wait table");
    v->notifies = upload(t.notifies, "notify table");
    v->queue_offsets = upload(t.queue_offsets, "queue offsets");
    v->queue_tasks = upload(t.queue_tasks, "queues");
    const auto arena_bytes = static_cast<size_t>(std::max<int64_t>(v->compiled.arena_bytes, 256));
    check_cu(d.mem_alloc(&v->arena, arena_bytes), "cuMemAlloc (arena of " + std::to_string(arena_bytes) + " bytes)");
    // Zeroed: no word of a tagged hand-off may carry an epoch's tag before that epoch writes it (device/tagged.cuh).
    check_cu(d.memset_d8(v->arena, 0, arena_bytes), "cuMemsetD8 (arena)");
    v->arena_bytes = arena_bytes;
    check_cu(d.event_create(&v->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    for (size_t i = 0; i < v->compiled.arena_offsets.size(); ++i)
      if (v->compiled.arena_offsets[i] >= 0) v->arena_slots.emplace_back(i, v->arena + static_cast<CUdeviceptr>(v->compiled.arena_offsets[i]));
  } catch (...) {
    free_variant(*v);
    throw;
  }
  return v;
}

Program::Variant& Program::variant_for(const SymbolValues& values) {
  auto it = variants_.find(values);
  if (it != variants_.end()) return *it->second;
  std::unique_ptr<Variant> v = build_variant(values);
  ++(v->compiled.cache_hit ? stats_.cache_loads : stats_.compiles);
  Variant& out = *variants_.emplace(values, std::move(v)).first->second;
  evict_beyond(static_cast<size_t>(options_.max_loaded_kernels), &out);
  return out;
}

void Program::evict_beyond(size_t keep, const Variant* in_use) {
  while (variants_.size() > keep) {
    auto victim = variants_.end();
    for (auto it = variants_.begin(); it != variants_.end(); ++it)
      if (it->second.get() != in_use && (victim == variants_.end() || it->second->last_used < victim->second->last_used)) victim = it;
    if (victim == variants_.end()) return;
    Variant* v = victim->second.get();
    free_variant(*v);  // waits for its last launch
    if (last_ == v) last_ = nullptr;
    if (traced_ == v) traced_ = nullptr;
    variants_.erase(victim);
    ++stats_.evictions;
  }
}

void Program::adopt_finished() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    try {
      std::unique_ptr<Variant> v = it->second->result.get();
      ++(v->compiled.cache_hit ? stats_.cache_loads : stats_.compiles);
      variants_.emplace(it->first, std::move(v));
    } catch (const std::exception& e) {
      // Runs stay on the generic kernel, which is correct for every value; a later run retries.
      log_warning("graph '" + graph_.name() + "': background specialization failed: " + e.what());
    }
    it = pending_.erase(it);
  }
}

void Program::wait_for_pending() {
  for (auto& [values, p] : pending_) p->result.wait();
}

Program::Variant& Program::variant_for_run(const SymbolValues& values) {
  if (!pending_.empty()) adopt_finished();
  auto it = variants_.find(values);
  Variant* v = nullptr;
  if (it != variants_.end()) {
    v = it->second.get();
  } else if (options_.lazy) {
    // The generic kernel: every masked symbol at the top of its range serves any value.
    SymbolValues generic = values;
    for (size_t s = 0; s < generic.size(); ++s)
      if (!buckets_[s].empty()) generic[s] = buckets_[s].back();
    if (generic != values) {
      if (!pending_.count(values)) {
        auto p = std::make_unique<Pending>();
        p->result = std::async(std::launch::async, [this, values] { return build_variant(values); });
        pending_.emplace(values, std::move(p));
      }
      v = &variant_for(generic);  // compiles only the first time
      ++stats_.generic_runs;
    }
  }
  if (!v) v = &variant_for(values);
  v->last_used = ++use_clock_;
  if (variants_.size() > static_cast<size_t>(options_.max_loaded_kernels)) evict_beyond(static_cast<size_t>(options_.max_loaded_kernels), v);
  return *v;
}

SymbolValues Program::compile_values_of(const SymbolValues& values) const {
  SymbolValues out = values;
  for (size_t s = 0; s < out.size(); ++s) out[s] = compile_value(buckets_[s], values[s]);
  return out;
}

ProgramStats Program::stats() {
  std::lock_guard lock(mutex_);
  adopt_finished();
  ProgramStats s = stats_;
  s.pending = static_cast<int64_t>(pending_.size());
  s.loaded = static_cast<int64_t>(variants_.size());
  return s;
}

const CompileResult& Program::specialize(const SymbolValues& values) {
  std::lock_guard lock(mutex_);
  DeviceContext::Scope scope(*device_);
  return variant_for(compile_values_of(resolve_symbols(graph_, values))).compiled;
}

void Program::run(std::span<const DeviceBinding> bindings, CUstream stream) { launch(bindings, nullptr, stream); }

int32_t Program::run_loop(std::span<const DeviceBinding> bindings, const LoopRequest& loop, CUstream stream) {
  if (loop.steps < 1) invalid("a multi-step run needs steps >= 1; got " + std::to_string(loop.steps));
  return launch(bindings, &loop, stream);
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

int32_t Program::launch(std::span<const DeviceBinding> bindings, const LoopRequest* loop, CUstream stream) {
  std::lock_guard lock(mutex_);
  const auto& tensors = graph_.tensors();
  const BoundTensors bt = bind_tensors(graph_, bindings, "device");
  for (const DeviceBinding& b : bindings)
    if (!b.view.strides.empty() && b.view.strides != dense_strides(b.view.shape))
      invalid(binding_label(graph_.tensor(b.tensor)) + " is bound with non-contiguous strides; the device needs dense row-major memory");
  std::vector<void*> slots(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (bt.views[i]) slots[i] = bt.views[i]->data;
  return launch_resolved(bt.symbols, compile_values_of(bt.symbols), slots, &bt.views, loop, stream);
}

bool Program::run_planned(const PlanBinding* bindings, int32_t num_bindings, CUstream stream) {
  std::lock_guard lock(mutex_);
  const int32_t code = plan_fn_ ? plan_fn_(bindings, num_bindings, plan_slots_.data(), plan_symbols_.data(), plan_compile_.data(), plan_error_)
                                : run_launch_plan_reference(plan_tables_, bindings, num_bindings, plan_slots_.data(),
                                                            plan_symbols_.data(), plan_compile_.data(), plan_error_);
  if (code != 0) return false;
  launch_resolved(plan_symbols_, plan_compile_, plan_slots_, nullptr, nullptr, stream);
  return true;
}

int32_t Program::launch_resolved(const SymbolValues& values, const SymbolValues& compile_values, std::vector<void*>& slots,
                              const std::vector<const TensorView*>* bound_views, const LoopRequest* loop, CUstream stream) {
  DeviceContext::Scope scope(*device_);
  if (error_host_[0] != 0)
    invalid("a previous run failed on the device and was not reported yet; call weft_program_synchronize first");
  Variant& v = variant_for_run(compile_values);
  for (const auto& [tensor, address] : v.arena_slots) slots[tensor] = reinterpret_cast<void*>(address);
  weft_symbol_values symbols{};
  for (size_t s = 0; s < values.size() && s < WEFT_MAX_SYMBOLS; ++s) symbols.v[s] = values[s];
  const DriverApi& d = driver();
  weft_loop lp{};
  lp.barrier = reinterpret_cast<unsigned int*>(v.events + static_cast<size_t>(v.compiled.tables.num_events) * sizeof(unsigned int));
  lp.barrier_base = v.barriers;
  size_t n_bytes = 0;  // one step's feedback tokens
  if (loop) {
    const auto& bound = *bound_views;
    n_bytes = prepare_loop(v, slots, bound, *loop, stream);
    lp.step_slots = reinterpret_cast<void* const*>(v.loop_slots);
    lp.steps = loop->steps;
    lp.feed_n = static_cast<int>(n_bytes / sizeof(int32_t));
    lp.feed_src = static_cast<const int*>(bound[static_cast<size_t>(loop->feedback_input)]->data);
    lp.tokens = reinterpret_cast<int*>(v.loop_tokens);
    lp.counter_src = static_cast<const int*>(bound[static_cast<size_t>(loop->counter_input)]->data);
    lp.counters = reinterpret_cast<int*>(v.loop_counters);
    if (loop->on_pass) {
      lp.gate_host = gate_.prepare(n_bytes / sizeof(int32_t));
      lp.gate_words = lp.barrier + 1;
      lp.gate_base = v.gates;
      lp.gate_lookahead = loop->lookahead ? 1u : 0u;
    }
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
  void* table = slots.data();
  if (!v.entry_slots.empty()) {  // the weight loader's kernel: its table is longer than the graph's
    std::copy(slots.begin(), slots.end(), v.entry_slots.begin());
    table = v.entry_slots.data();
  }
  void* params[] = {&v.tasks, &v.waits, &v.notifies, &v.queue_offsets, &v.queue_tasks, &v.events,
                    table, &epoch, &timeout, &error, &error_info, &lp, &trace, &tuning, &symbols, &v.num_slots};
  const CUresult launched = d.launch_kernel(v.function, static_cast<unsigned>(v.compiled.tables.num_queues()), 1, 1,
                                           static_cast<unsigned>(v.compiled.launch_threads), 1, 1,
                                           static_cast<unsigned>(v.compiled.smem_bytes), stream, params, nullptr);
  if (launched != CUDA_SUCCESS) check_cu(launched, "cuLaunchKernel (megakernel of graph '" + graph_.name() + "')");
  if (trace) {
    traced_ = &v;
    traced_steps_ = steps;
  }
  if (loop && loop->on_pass)
    return serve_resident(v, *loop, n_bytes, reinterpret_cast<CUdeviceptr>((*bound_views)[static_cast<size_t>(loop->feedback_output)]->data), stream);
  v.epoch += static_cast<unsigned int>(steps);
  if (loop) {
    v.barriers += static_cast<unsigned int>(steps);
    const size_t passes = static_cast<size_t>(steps);
    if (loop->history)
      check_cu(d.memcpy_dtod_async(loop->history, v.loop_tokens + n_bytes, passes * n_bytes, stream), "cuMemcpyDtoDAsync (loop history)");
    const auto out_ptr = reinterpret_cast<CUdeviceptr>((*bound_views)[static_cast<size_t>(loop->feedback_output)]->data);
    check_cu(d.memcpy_dtod_async(out_ptr, v.loop_tokens + passes * n_bytes, n_bytes, stream), "cuMemcpyDtoDAsync (loop output)");
    if (!v.loop_done) check_cu(d.event_create(&v.loop_done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check_cu(d.event_record(v.loop_done, stream), "cuEventRecord");
  }
  check_cu(d.event_record(v.done, stream), "cuEventRecord");
  v.launched = true;
  last_ = &v;
  return steps;
}

int32_t Program::serve_resident(Variant& v, const LoopRequest& loop, size_t n_bytes, CUdeviceptr out_ptr, CUstream stream) {
  const DriverApi& d = driver();
  v.launched = true;
  last_ = &v;
  std::exception_ptr thrown;
  const int32_t steps = loop.steps;
  // The passes the host took: `steps`, or s when on_pass(s - 1) asked to stop.
  const int32_t passes = gate_.serve(steps, n_bytes / sizeof(int32_t), !loop.lookahead, stream, loop.on_pass, thrown);
  const bool stopped = passes < steps;
  // Strict, a stop at boundary s ends the kernel after s passes, s + 1 grid barriers and s gate releases;
  // look-ahead, after pass s + 1 (when there is one) at the barrier after it, with no releases.
  const int32_t ran = stopped && loop.lookahead ? std::min(passes + 1, steps) : passes;
  v.epoch += static_cast<unsigned int>(ran);
  v.barriers += static_cast<unsigned int>(ran < steps ? ran + 1 : steps);
  if (!loop.lookahead) v.gates += static_cast<unsigned int>(stopped ? passes : passes - 1);
  if (traced_ == &v) traced_steps_ = ran;
  const size_t p = static_cast<size_t>(passes);
  if (loop.history) check_cu(d.memcpy_dtod_async(loop.history, v.loop_tokens + n_bytes, p * n_bytes, stream), "cuMemcpyDtoDAsync (loop history)");
  check_cu(d.memcpy_dtod_async(out_ptr, v.loop_tokens + p * n_bytes, n_bytes, stream), "cuMemcpyDtoDAsync (loop output)");
  std::vector<int32_t> last(n_bytes / sizeof(int32_t));
  check_cu(d.memcpy_dtoh_async(last.data(), v.loop_tokens + p * n_bytes, n_bytes, stream), "cuMemcpyDtoHAsync (loop output)");
  if (!v.loop_done) check_cu(d.event_create(&v.loop_done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  check_cu(d.event_record(v.loop_done, stream), "cuEventRecord");
  check_cu(d.event_record(v.done, stream), "cuEventRecord");
  synchronize_locked(stream);  // a device error is reported here, before any callback sees a value of the failed run
  if (thrown) std::rethrow_exception(thrown);
  if (!stopped) loop.on_pass(steps - 1, last.data(), static_cast<int32_t>(last.size()));
  return passes;
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
  synchronize_locked(stream);
}

void Program::synchronize_locked(CUstream stream) {
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
    // Tagged hand-offs (device/tagged.cuh) hold the failed launch's tags, which the restarted epochs would reach.
    if (var->arena) d.memset_d8(var->arena, 0, var->arena_bytes);
    var->epoch = 0;
    var->barriers = 0;
    var->gates = 0;
  }
  std::memset(error_host_, 0, 8 * sizeof(unsigned int));
  switch (code) {
    case WEFT_DEV_ERR_DEADLOCK:
      if (a == WEFT_DEV_WAIT_HOST)
        fail(Status::deadlock, "graph '" + graph_.name() + "': the resident loop waited for the host's answer to pass " +
                                   std::to_string(b) + "'s output past the watchdog's " + std::to_string(watchdog_ms(options_.watchdog_ms)) +
                                   " ms (half of it once the next pass is done, in look-ahead); the watchdog stopped the kernel");
      if (a == WEFT_DEV_WAIT_LOADER)
        fail(Status::deadlock, "graph '" + graph_.name() + "': " + where + " waited for the weight loader's ring slot " +
                                   std::to_string(b) + " (phase parity " + std::to_string(c) + ") for more than " +
                                   std::to_string(watchdog_ms(options_.watchdog_ms)) +
                                   " ms: the loader and the tile disagree on its weights (WEFT_WEIGHT_LOADER); the watchdog stopped the kernel");
      if (a == WEFT_DEV_WAIT_TAGGED) {
        const std::string tensor = b < graph_.tensors().size() ? graph_.tensor(static_cast<TensorId>(b)).name : "?";
        fail(Status::deadlock, "graph '" + graph_.name() + "': " + where + " waited for element " + std::to_string(c) +
                                   " of '" + tensor + "' (a tagged hand-off) to be written this step for more than " +
                                   std::to_string(watchdog_ms(options_.watchdog_ms)) +
                                   " ms; the watchdog stopped the kernel");
      }
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
    case WEFT_DEV_ERR_BAD_TASK:
      if (b == WEFT_DEV_BAD_TAGGED_TILE)
        fail(Status::unsupported, "graph '" + graph_.name() + "': " + where +
                                      " reads or writes a tagged hand-off but could not run as a one-row GEMV tile "
                                      "(its weights must be 16-byte aligned); compile it without WEFT_TAGGED_HANDOFFS=1");
      fail(Status::internal, "graph '" + graph_.name() + "': " + where + " names device op " + std::to_string(a) +
                                 ", which the kernel's device library does not have");
    default:
      fail(Status::internal, "graph '" + graph_.name() + "': " + where + " raised device error " + std::to_string(code));
  }
}

}  // namespace weft
