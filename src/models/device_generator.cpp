#include "models/device_generator.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "graph/dtype.hpp"
#include "lower/task_graph.hpp"
#include "runtime/driver.hpp"

namespace weft {

namespace {

size_t align_up(size_t n) { return (n + 255) & ~size_t{255}; }

// A device allocation that grows on demand and is freed with its owner.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  void reserve(size_t n, const char* what) {
    if (n <= bytes) return;
    release();
    check_cu(driver().mem_alloc(&ptr, n), std::string("cuMemAlloc (") + what + ", " + std::to_string(n) + " bytes)");
    bytes = n;
  }
  void release() noexcept {
    if (ptr) driver().mem_free(ptr);
    ptr = 0;
    bytes = 0;
  }
};

class DeviceGenerator final : public Generator {
 public:
  DeviceGenerator(std::shared_ptr<const Model> m, std::shared_ptr<DeviceContext> device, const ProgramOptions& options)
      : model_(std::move(m)), device_(std::move(device)), program_(device_, model_->graph(), options) {
    for (size_t i = 1; i < model_->graph_count(); ++i)
      batched_.push_back(std::make_unique<Program>(device_, model_->graph_at(i), options));
    whole_steps_ = whole_attention_steps(model_->shape(), options);
    pair_steps_ = pair_attention_steps(model_->shape(), options);
    if (whole_steps_ > 0) {
      ProgramOptions whole = options;
      whole.attention_split = 1;
      if (pair_steps_ > 0) whole.attention_pairs = 1;
      whole_ = std::make_unique<Program>(device_, model_->graph(), whole);
      for (size_t i = 1; i < model_->graph_count(); ++i)
        whole_batched_.push_back(std::make_unique<Program>(device_, model_->graph_at(i), whole));
    }
    DeviceContext::Scope scope(*device_);
    const DriverApi& d = driver();
    check_cu(d.stream_create(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    try {
      size_t total = 0;
      for (const ModelWeight& w : model_->weights().weights()) total += align_up(w.bytes);
      weights_.reserve(total, "model weights");
      size_t at = 0;
      for (const ModelWeight& w : model_->weights().weights()) {
        check_cu(d.memcpy_htod(weights_.ptr + at, w.data, w.bytes), "cuMemcpyHtoD (weight '" + model_->graph().tensor(w.tensor).name + "')");
        bindings_.push_back({w.tensor, TensorView{reinterpret_cast<void*>(weights_.ptr + at), w.dtype, w.shape, {}}});
        at += align_up(w.bytes);
      }
    } catch (...) {
      weights_.release();
      d.stream_destroy(stream_);
      throw;
    }
  }

  ~DeviceGenerator() override {
    try {
      DeviceContext::Scope scope(*device_);
      if (stream_) driver().stream_synchronize(stream_);
      for (DeviceBuffer* b : {&weights_, &states_, &io_}) b->release();
      if (stream_) driver().stream_destroy(stream_);
    } catch (...) {
      // Destructors never throw.
    }
  }

  const char* backend() const override { return "gpu"; }
  std::string device() const override {
    return device_->name() + " (" + device_->arch() + ", " + std::to_string(device_->sm_count()) + " SMs)";
  }

  // The split program's result; the unsplit one (where there is one) is compiled and loaded too.
  const CompileResult& compile(int64_t batch) override {
    if (Program* whole = whole_for(batch)) whole->specialize(SymbolValues{batch});
    return program_for(batch).specialize(SymbolValues{batch});
  }

  GenerateResult generate(const GenerateRequest& r) override {
    check_request(*model_, r);
    const Model& m = *model_;
    DeviceContext::Scope scope(*device_);
    const DriverApi& d = driver();
    const auto batch = static_cast<size_t>(r.batch), steps = static_cast<size_t>(r.steps), plen = static_cast<size_t>(r.prompt_len);
    const size_t row = batch * sizeof(int32_t);
    // Every launch below runs the unsplit twin where all its positions lie below twin_steps (program_at); both are
    // compiled before anything is timed.
    Program* whole = whole_for(r.batch);
    Program& split = program_for(r.batch);
    const int64_t below = whole ? twin_steps(r.batch, whole->specialize(SymbolValues{r.batch}).smem_bytes) : 0;
    auto program_at = [&](size_t last_position) -> Program& {
      return whole && static_cast<int64_t>(last_position) < below ? *whole : split;
    };
    if (!whole || static_cast<int64_t>(plen + steps) - 2 >= below) split.specialize(SymbolValues{r.batch});

    // KV caches, zeroed per request; logits.
    std::vector<Binding> bindings = bindings_;
    const auto owned = m.request_tensors(r.batch);
    size_t state_bytes = 0;
    for (const auto& t : owned) state_bytes += align_up(t.bytes);
    states_.reserve(state_bytes, "KV caches and logits");
    check_cu(d.memset_d8_async(states_.ptr, 0, state_bytes, stream_), "cuMemsetD8Async (KV caches)");
    size_t at = 0;
    CUdeviceptr logits_dev = 0;
    for (const auto& t : owned) {
      if (t.tensor == m.logits()) logits_dev = states_.ptr + at;
      bindings.push_back({t.tensor, TensorView{reinterpret_cast<void*>(states_.ptr + at), t.dtype, t.shape, {}}});
      at += align_up(t.bytes);
    }

    // Token and position rows, [row][batch] int32: the prompt by position, positions 0.., forced tokens,
    // generated tokens (one spare row takes the prefill's unused argmax).
    const size_t pos_rows = plen - 1 + steps;
    std::vector<int32_t> host((plen + pos_rows + (r.forced.empty() ? 0 : steps)) * batch);
    for (size_t t = 0; t < plen; ++t)
      for (size_t b = 0; b < batch; ++b) host[t * batch + b] = r.prompt[b * plen + t];
    for (size_t p = 0; p < pos_rows; ++p)
      for (size_t b = 0; b < batch; ++b) host[(plen + p) * batch + b] = static_cast<int32_t>(p);
    for (size_t j = 0; j < (r.forced.empty() ? 0 : steps); ++j)
      for (size_t b = 0; b < batch; ++b) host[(plen + pos_rows + j) * batch + b] = r.forced[b * steps + j];
    io_.reserve(host.size() * sizeof(int32_t) + (steps + 1) * row, "token buffers");
    check_cu(d.memcpy_htod_async(io_.ptr, host.data(), host.size() * sizeof(int32_t), stream_), "cuMemcpyHtoDAsync (prompt)");
    const CUdeviceptr prompt_rows = io_.ptr, pos_rows_dev = io_.ptr + plen * row, forced_rows = io_.ptr + (plen + pos_rows) * row;
    const CUdeviceptr gen_rows = io_.ptr + host.size() * sizeof(int32_t);

    const size_t ids_at = bindings.size();
    bindings.push_back({m.input_ids(), TensorView{nullptr, DType::i32, {r.batch}, {}}});
    bindings.push_back({m.positions(), TensorView{nullptr, DType::i32, {r.batch}, {}}});
    bindings.push_back({m.next_token(), TensorView{nullptr, DType::i32, {r.batch}, {}}});
    // The model's ids are graph()'s; the program may run a batched graph (Model::graph_for).
    const Graph& ran = model_->graph_for(r.batch);
    auto id = [&](TensorId t) { return same_tensor(t, m.graph(), ran); };
    for (Binding& b : bindings) b.tensor = id(b.tensor);
    auto bind_step = [&](CUdeviceptr ids, CUdeviceptr pos, CUdeviceptr next) {
      bindings[ids_at].view.data = reinterpret_cast<void*>(ids);
      bindings[ids_at + 1].view.data = reinterpret_cast<void*>(pos);
      bindings[ids_at + 2].view.data = reinterpret_cast<void*>(next);
    };

    Events ev(r.multi_step ? 3 : steps + 2);
    size_t done = steps;  // steps run (on_step may stop early)
    check_cu(d.event_record(ev[0], stream_), "cuEventRecord");
    for (size_t t = 0; t + 1 < plen; ++t) {
      bind_step(prompt_rows + t * row, pos_rows_dev + t * row, gen_rows + steps * row);
      program_at(t).run(bindings, stream_);
    }
    check_cu(d.event_record(ev[1], stream_), "cuEventRecord");
    const size_t vocab = static_cast<size_t>(m.shape().vocab);
    std::vector<uint8_t> logits_host(r.logits ? batch * vocab * dtype_size(m.shape().dtype) : 0);
    std::vector<int32_t> gen(steps * batch);  // [step][batch]
    bool gen_on_host = false;  // a resident loop's tokens, as the host was handed them
    if (r.multi_step) {
      bind_step(prompt_rows + (plen - 1) * row, pos_rows_dev + (plen - 1) * row, gen_rows + steps * row);
      LoopRequest loop;
      loop.steps = static_cast<int32_t>(r.steps);
      loop.feedback_output = id(m.next_token());
      loop.feedback_input = id(m.input_ids());
      loop.counter_input = id(m.positions());
      loop.history = gen_rows;
      if (r.on_step || !r.forced.empty()) {
        // Resident: the host sees every step's tokens at the step boundary, and forced tokens replace them there
        // (in the loop's token rows too, so the tokens are kept as they were handed over).
        gen_on_host = true;
        loop.lookahead = r.forced.empty();  // nothing to rewrite: the kernel need not wait for each answer
        loop.on_pass = [&](int32_t pass, int32_t* values, int32_t) {
          std::copy(values, values + batch, gen.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(pass) * batch));
          const bool go_on = !r.on_step || r.on_step(pass, values, r.batch);
          if (!r.forced.empty())
            for (size_t b = 0; b < batch; ++b) values[b] = r.forced[b * steps + static_cast<size_t>(pass)];
          return go_on;
        };
      }
      done = static_cast<size_t>(program_at(plen - 2 + steps).run_loop(bindings, loop, stream_));
      check_cu(d.event_record(ev[2], stream_), "cuEventRecord");
    } else {
      std::vector<int32_t> step_tokens(r.on_step ? batch : 0);
      for (size_t j = 0; j < steps; ++j) {
        const CUdeviceptr ids = j == 0 ? prompt_rows + (plen - 1) * row : r.forced.empty() ? gen_rows + (j - 1) * row : forced_rows + (j - 1) * row;
        bind_step(ids, pos_rows_dev + (plen - 1 + j) * row, gen_rows + j * row);
        Program& program = program_at(plen - 1 + j);
        program.run(bindings, stream_);
        check_cu(d.event_record(ev[j + 2], stream_), "cuEventRecord");
        if (r.logits) {
          check_cu(d.memcpy_dtoh_async(logits_host.data(), logits_dev, logits_host.size(), stream_), "cuMemcpyDtoHAsync (logits)");
          program.synchronize(stream_);
          widen_to_f32(logits_host.data(), m.shape().dtype, r.logits + j * batch * vocab, batch * vocab);
        }
        if (r.on_step) {
          check_cu(d.memcpy_dtoh_async(step_tokens.data(), gen_rows + j * row, row, stream_), "cuMemcpyDtoHAsync (step tokens)");
          program.synchronize(stream_);
          if (!r.on_step(static_cast<int64_t>(j), step_tokens.data(), r.batch)) {
            done = j + 1;
            break;
          }
        }
      }
    }
    if (!gen_on_host)
      check_cu(d.memcpy_dtoh_async(gen.data(), gen_rows, gen.size() * sizeof(int32_t), stream_), "cuMemcpyDtoHAsync (tokens)");
    // Also reports a device-side error of any run above (each program its own).
    if (whole) whole->synchronize(stream_);
    split.synchronize(stream_);

    GenerateResult out;
    out.steps_done = static_cast<int64_t>(done);
    out.tokens.assign(batch * steps, -1);
    for (size_t j = 0; j < done; ++j)
      for (size_t b = 0; b < batch; ++b) out.tokens[b * steps + j] = gen[j * batch + b];
    out.prefill_ms = ev.ms(0, 1);
    if (r.multi_step) {
      out.decode_ms = ev.ms(1, 2);
      out.step_ms.assign(done, out.decode_ms / static_cast<double>(done));
    } else {
      for (size_t j = 0; j < done; ++j) out.step_ms.push_back(ev.ms(j + 1, j + 2));
      out.decode_ms = ev.ms(1, done + 1);
    }
    return out;
  }

 private:
  // The program whose graph a step of `batch` rows runs (Model::graph_for).
  Program& program_for(int64_t batch) {
    const size_t i = model_->graph_index(batch);
    return i == 0 ? program_ : *batched_.at(i - 1);
  }
  // Its unsplit twin, or null.
  Program* whole_for(int64_t batch) {
    const size_t i = model_->graph_index(batch);
    if (i == 0 || !whole_) return whole_.get();
    return whole_batched_.at(i - 1).get();
  }

  // The timesteps `timesteps` gives the decoder's attention tiles (with the base shared memory: a kernel that gets
  // more holds more) where the cache is longer, else 0; 0 too where the caller (`chosen` != 0) or `variable` decides.
  static int64_t twin_attention_steps(const DecoderShape& s, int32_t chosen, const char* variable,
                                      int64_t (*timesteps)(int64_t, int64_t, DType, int64_t)) {
    const char* env = std::getenv(variable);
    if (chosen != 0 || (env != nullptr && *env != '\0') || !s.fuse_attention || s.kv_heads < 1) return 0;
    const int64_t steps = timesteps(s.head_dim, s.q_heads / s.kv_heads, s.dtype, WEFT_SMEM_BYTES_BASE);
    return steps > 0 && s.max_seq > steps ? steps : 0;
  }
  // Where a second program pays: the decoder's attention tiles split over the timesteps of a KV cache longer than a
  // tile holds whole (lower: attention_parts), which at positions below that (part 0 attends whole, the other parts
  // idle) cost 1-4% a token against no split (docs/perf.md round 49). Returns the timesteps a tile holds whole, or 0
  // where the caller fixed the split (ProgramOptions::attention_split, $WEFT_ATTENTION_SPLIT) or nothing splits.
  static int64_t whole_attention_steps(const DecoderShape& s, const ProgramOptions& options) {
    return twin_attention_steps(s, options.attention_split, "WEFT_ATTENTION_SPLIT", attention_whole_timesteps);
  }
  // Where the unsplit twin also pairs attention's kv heads (ProgramOptions::attention_pairs 1: tiles of two where
  // tiles of one outnumber the SMs, each kv head attending on half the block), positions past what a half holds
  // would run a pair's kv heads one by one, 6-9% slower a token than tiles of one (docs/perf.md round 53): the
  // timesteps a half holds, or 0 where the caller or $WEFT_ATTENTION_PAIRS decides, or no tile pairs past them anyway
  // (a cache that short pairs in every program, LowerOptions::attention_pairs 0).
  static int64_t pair_attention_steps(const DecoderShape& s, const ProgramOptions& options) {
    return twin_attention_steps(s, options.attention_pairs, "WEFT_ATTENTION_PAIRS", attention_pair_timesteps);
  }
  // The positions below which a launch of `batch` rows runs the twin (whole_for): what a tile holds whole, or where
  // the twin pairs at this batch, what a half of its kernel's shared memory (`smem_bytes`) holds.
  int64_t twin_steps(int64_t batch, int32_t smem_bytes) const {
    const DecoderShape& s = model_->shape();
    const bool pairs = pair_steps_ > 0 && s.kv_heads > 0 &&
                       attention_may_pair(batch, s.q_heads, s.kv_heads, s.head_dim, s.dtype, device_->sm_count());
    if (!pairs) return whole_steps_;
    return std::min(whole_steps_, attention_pair_timesteps(s.head_dim, s.q_heads / s.kv_heads, s.dtype, smem_bytes));
  }

  // The tensor of `to` named as `t` of `from` (the graphs name every bound tensor alike).
  static TensorId same_tensor(TensorId t, const Graph& from, const Graph& to) {
    if (&from == &to) return t;
    const std::string& name = from.tensor(t).name;
    const TensorId found = to.find_tensor(name);
    if (found == kNoTensor) fail(Status::internal, "tensor '" + name + "' is missing from the batched decoder graph");
    return found;
  }

  // CUDA events with timing, destroyed with the request.
  class Events {
   public:
    explicit Events(size_t n) {
      for (size_t i = 0; i < n; ++i) {
        CUevent e = nullptr;
        check_cu(driver().event_create(&e, CU_EVENT_DEFAULT), "cuEventCreate");
        events_.push_back(e);
      }
    }
    ~Events() {
      for (CUevent e : events_) driver().event_destroy(e);
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
    CUevent operator[](size_t i) const { return events_[i]; }
    double ms(size_t a, size_t b) const {
      float v = 0;
      check_cu(driver().event_elapsed_time(&v, events_[a], events_[b]), "cuEventElapsedTime");
      return v;
    }

   private:
    std::vector<CUevent> events_;
  };

  std::shared_ptr<const Model> model_;
  std::shared_ptr<DeviceContext> device_;
  Program program_;
  std::vector<std::unique_ptr<Program>> batched_;  // the model's batched graphs' (Model::graph_at(1...)), if any
  // The same graphs compiled with no attention split (whole_attention_steps), for launches whose positions are all
  // below whole_steps_; null where there are none.
  std::unique_ptr<Program> whole_;
  std::vector<std::unique_ptr<Program>> whole_batched_;
  int64_t whole_steps_ = 0;
  int64_t pair_steps_ = 0;  // pair_attention_steps: > 0 where the twin pairs kv heads (twin_steps)
  CUstream stream_ = nullptr;
  DeviceBuffer weights_, states_, io_;
  std::vector<Binding> bindings_;  // the weights
};

}  // namespace

std::unique_ptr<Generator> make_device_generator(std::shared_ptr<const Model> model, std::shared_ptr<DeviceContext> device,
                                                 const ProgramOptions& options) {
  return std::make_unique<DeviceGenerator>(std::move(model), std::move(device), options);
}

}  // namespace weft
