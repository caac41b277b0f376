// A program: a graph compiled into megakernels (one per concrete specialization, compiled on first use through
// the kernel cache), loaded on one device, with weft-owned memory for intermediates (the arena), event counters
// and task tables. Runs are asynchronous on the caller's stream; errors raised on the device (watchdog, bad
// ids or positions) surface at the next synchronize().
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "graph/graph.hpp"
#include "graph/bindings.hpp"
#include "pipeline/compile_graph.hpp"
#include "host_jit/launch_plan_jit.hpp"
#include "runtime/device_context.hpp"
#include "runtime/host_gate.hpp"
#include "runtime/launch_plan.hpp"

namespace weft {

using DeviceBinding = Binding;  // a binding to device memory; strides empty or dense row-major

// Multi-step mode (see weft_loop in device/task_abi.h): `steps` passes of the graph in one launch, each pass's
// `feedback_output` (e.g. next_token) becoming the next pass's `feedback_input` (input_ids) on the device, and
// `counter_input` (positions) counting up by one per pass. All three int32 with the same element count.
struct LoopRequest {
  int32_t steps = 0;
  TensorId feedback_output = kNoTensor;
  TensorId feedback_input = kNoTensor;
  TensorId counter_input = kNoTensor;
  CUdeviceptr history = 0;  // optional [steps][n] int32: every pass's feedback output (as on_pass left it)
  // Resident mode when set: the kernel hands the host every pass's feedback output, and on_pass's answer decides
  // whether it goes on (HostGate); run_loop then blocks until the kernel has ended. on_pass runs on the calling
  // thread with the program locked: it must not call into this program.
  PassCallback on_pass;
  // Resident mode: true runs pass s + 1 while on_pass looks at pass s's output: no wait per pass, but a stop
  // after pass s ends the kernel after pass s + 1 (whose output is dropped), and rewritten values are ignored.
  // False waits for every answer (a host round trip per pass) and takes rewritten values as the next input.
  bool lookahead = false;
};

struct ProgramOptions {
  std::string arch;        // empty: the device's
  int32_t watchdog_ms = 0;  // 0: $WEFT_WATCHDOG_MS, else 5000
  bool use_cache = true;
  int32_t max_loaded_kernels = 8;  // loaded specializations kept (least recently used unloaded beyond it)
  // A run whose specialization is not loaded yet uses the generic kernel (every masked symbol at its max)
  // while the specialization compiles in the background, instead of waiting for it.
  bool lazy = false;
  uint32_t tensor_tag = 0;  // high 32 bits of the tensor ids run_planned accepts (the C API's graph uid)
  bool host_jit = true;     // generate the launch plan with the host JIT when this build has one ($WEFT_HOST_JIT=0: no)
  int32_t attention_split = 0;  // CompileRequest::attention_split of every specialization (0: the default)
  int32_t attention_pairs = 0;  // CompileRequest::attention_pairs of every specialization (0: the default)
};

// What a program has done so far (weft_program_stats).
struct ProgramStats {
  int64_t compiles = 0;         // specializations compiled (cache misses)
  int64_t cache_loads = 0;      // specializations taken from the kernel cache
  int64_t evictions = 0;        // loaded specializations unloaded by the LRU bound
  int64_t generic_runs = 0;     // runs served by the generic kernel while their specialization compiled
  int64_t pending = 0;          // specializations compiling in the background now
  int64_t loaded = 0;           // specializations loaded now
  bool host_jit = false;        // runs are planned by JIT-compiled code (else by the reference interpreter)
  bool host_jit_cache_hit = false;
  double host_jit_ms = 0;
};

class Program {
 public:
  Program(std::shared_ptr<DeviceContext> device, Graph graph, const ProgramOptions& options);
  ~Program();  // waits for this program's launches, then frees its memory
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  const Graph& graph() const { return graph_; }

  // Compiles (or loads from the cache) and loads the kernel for these symbol values now, so that a later run
  // does not block on it. Returns what the compile produced (timings, sizes, whether the cache had it).
  const CompileResult& specialize(const SymbolValues& values);

  // Checks the bindings (every input, weight, state and output exactly once; dtype, shape, symbol ranges,
  // non-null dense device memory), compiles the specialization on first use, and launches. No host
  // synchronization once the specialization is loaded.
  void run(std::span<const DeviceBinding> bindings, CUstream stream);

  // The fast path of weft_program_run: the caller's bindings checked by the launch plan (JIT-compiled when
  // available), then launched. Returns false, launching nothing, when the plan finds the bindings wrong; the
  // caller then runs the checked path (run) for the message.
  bool run_planned(const PlanBinding* bindings, int32_t num_bindings, CUstream stream);

  // Runs `loop.steps` passes in one launch (multi-step mode). The bound feedback input and counter are read
  // (not written); the bound feedback output receives the last pass's value, other outputs the last pass's
  // values, states carry over from pass to pass. Blocks the host only when the per-step slot table changes
  // (other bindings or step count than the previous loop run) and a previous loop run is still in flight.
  // Resident mode (loop.on_pass set): blocks until the kernel has ended, calls on_pass for every pass run (the
  // last one after the kernel's end; its answer no longer matters), reports a device error as synchronize does,
  // and returns the passes run (fewer than steps when on_pass asked to stop). Otherwise returns steps.
  int32_t run_loop(std::span<const DeviceBinding> bindings, const LoopRequest& loop, CUstream stream);

  // Waits for `stream`, then reports (and clears) a device error raised by a run: WEFT_ERROR_DEADLOCK naming
  // the task and event for the watchdog, INVALID_ARGUMENT for an id or position out of range.
  void synchronize(CUstream stream);

  ProgramStats stats();
  // The value each symbol is compiled for when it has `value` (its bucket's bound; the value itself if exact).
  const std::vector<std::vector<int64_t>>& buckets() const { return buckets_; }
  // Blocks until every background compile has finished (tests, benchmarks).
  void wait_for_pending();

  // Test hook: run the next launches with one task's wait count raised so it can never be satisfied (the
  // watchdog must stop it). -1 turns it off.
  void break_task_for_testing(int32_t task) { broken_task_ = task; }

 private:
  struct Variant;
  struct Pending;
  std::unique_ptr<Variant> build_variant(const SymbolValues& compile_values);
  Variant& variant_for(const SymbolValues& compile_values);
  Variant& variant_for_run(const SymbolValues& compile_values);  // lazy mode and LRU bookkeeping
  void adopt_finished();
  void evict_beyond(size_t keep, const Variant* in_use);
  SymbolValues compile_values_of(const SymbolValues& values) const;
  int32_t launch(std::span<const DeviceBinding> bindings, const LoopRequest* loop, CUstream stream);
  int32_t launch_resolved(const SymbolValues& values, const SymbolValues& compile_values, std::vector<void*>& slots,
                       const std::vector<const TensorView*>* bound, const LoopRequest* loop, CUstream stream);
  // Checks the loop's tensors, grows its buffers and uploads changed step slot tables; returns the bytes of one
  // step's feedback tokens.
  size_t prepare_loop(Variant& v, const std::vector<void*>& slots, const std::vector<const TensorView*>& bound,
                    const LoopRequest& loop, CUstream stream);
  void free_variant(Variant& v) noexcept;
  [[noreturn]] void raise_device_error(const Variant* v, unsigned int code);
  void synchronize_locked(CUstream stream);
  // Resident mode after the launch: serves the gate, then finishes the run (see run_loop); returns the passes run.
  int32_t serve_resident(Variant& v, const LoopRequest& loop, size_t n_bytes, CUdeviceptr out_ptr, CUstream stream);

  std::shared_ptr<DeviceContext> device_;
  Graph graph_;
  ProgramOptions options_;
  std::unique_ptr<cache::KernelCache> cache_;
  long long timeout_cycles_ = 0;
  unsigned int tuning_ = 0;  // $WEFT_TUNE (weft_env::tuning)
  std::string trace_path_;  // $WEFT_TRACE: every launch records its trace; the last one is written at destruction
  Variant* traced_ = nullptr;  // the variant of the last traced launch, and its step count
  int32_t traced_steps_ = 0;
  void write_trace() noexcept;
  std::map<SymbolValues, std::unique_ptr<Variant>> variants_;
  uint64_t use_clock_ = 0;  // LRU: each run stamps its variant
  std::map<SymbolValues, std::unique_ptr<Pending>> pending_;
  ProgramStats stats_;
  std::vector<std::vector<int64_t>> buckets_;  // per symbol: specialization_buckets of its effective policy
  LaunchPlanTables plan_tables_;
  std::unique_ptr<LaunchPlanJit> plan_jit_;
  LaunchPlanFn plan_fn_ = nullptr;
  std::vector<void*> plan_slots_;  // run_planned's scratch
  SymbolValues plan_symbols_, plan_compile_;
  int64_t plan_error_[kPlanErrorInfoWords] = {};
  Variant* last_ = nullptr;
  unsigned int* error_host_ = nullptr;  // mapped pinned memory: [0] code, [1..4] info
  CUdeviceptr error_dev_ = 0;
  int32_t broken_task_ = -1;
  HostGate gate_;  // resident loops' host-mapped words (one resident run at a time: run_loop blocks)
  std::mutex mutex_;
};

}  // namespace weft
