// Header-only C++ wrapper over the weft C API (include/weft/weft.h): RAII handles that are movable but not
// copyable, and exceptions (weft::Error) that carry the status and weft's message. C++17 or later.
// Thread-safety is that of the C API: one object may be read from several threads at once, not modified.
#ifndef WEFT_WEFT_HPP
#define WEFT_WEFT_HPP

#include <array>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weft/weft.h"

namespace weft {

// A failed weft call: status() is the weft_status, what() weft's message.
class Error : public std::runtime_error {
 public:
  Error(weft_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  weft_status status() const noexcept { return status_; }

 private:
  weft_status status_;
};

// Throws weft::Error with the calling thread's last message if `s` is not WEFT_OK.
inline void check(weft_status s) {
  if (s != WEFT_OK) throw Error(s, std::string(weft_status_string(s)) + ": " + weft_last_error_message());
}

// A dim: a fixed size (`Dim(4096)`) or a symbol declared on the graph (`Dim("batch")`).
class Dim {
 public:
  Dim(int64_t size) : size_(size) {}  // NOLINT(google-explicit-constructor): dims read like numbers
  Dim(int size) : size_(size) {}      // NOLINT(google-explicit-constructor)
  Dim(const char* symbol) : symbol_(symbol ? symbol : ""), is_symbol_(true) {}  // NOLINT
  Dim(std::string symbol) : symbol_(std::move(symbol)), is_symbol_(true) {}     // NOLINT
  weft_dim c() const { return weft_dim{is_symbol_ ? symbol_.c_str() : nullptr, size_}; }

 private:
  int64_t size_ = 0;
  std::string symbol_;
  bool is_symbol_ = false;
};

namespace detail {
inline std::vector<weft_dim> c_dims(const std::vector<Dim>& dims) {
  std::vector<weft_dim> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) out.push_back(d.c());
  return out;
}
inline const char* c_name(const std::string& s) { return s.empty() ? nullptr : s.c_str(); }
}  // namespace detail

class Context {
 public:
  Context() { check(weft_context_create(nullptr, &h_)); }
  explicit Context(const weft_context_options& options) { check(weft_context_create(&options, &h_)); }
  ~Context() { weft_context_destroy(h_); }
  Context(Context&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      weft_context_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  weft_context* get() const { return h_; }

 private:
  weft_context* h_ = nullptr;
};

// Host memory bound to graph tensors for one reference run. Keeps the shapes it was given alive.
class Bindings {
 public:
  Bindings& add(weft_tensor t, void* data, weft_dtype dtype, std::vector<int64_t> shape) {
    shapes_.push_back(std::move(shape));
    const std::vector<int64_t>& s = shapes_.back();
    bindings_.push_back(weft_binding{t, weft_tensor_view{data, dtype, static_cast<int32_t>(s.size()), s.data(), nullptr}});
    return *this;
  }
  Bindings& add(weft_tensor t, std::vector<float>& v, std::vector<int64_t> shape) {
    return add(t, v.data(), WEFT_DTYPE_F32, std::move(shape));
  }
  Bindings& add(weft_tensor t, std::vector<int32_t>& v, std::vector<int64_t> shape) {
    return add(t, v.data(), WEFT_DTYPE_I32, std::move(shape));
  }
  Bindings& add(weft_tensor t, std::vector<int64_t>& v, std::vector<int64_t> shape) {
    return add(t, v.data(), WEFT_DTYPE_I64, std::move(shape));
  }
  const weft_binding* data() const { return bindings_.data(); }
  int32_t size() const { return static_cast<int32_t>(bindings_.size()); }

 private:
  std::deque<std::vector<int64_t>> shapes_;  // deque: pointers into it stay valid as it grows
  std::vector<weft_binding> bindings_;
};

class Graph {
 public:
  Graph(const Context& ctx, const std::string& name) { check(weft_graph_create(ctx.get(), name.c_str(), &h_)); }
  static Graph from_json(const Context& ctx, const std::string& json) {
    weft_graph* h = nullptr;
    check(weft_graph_from_json(ctx.get(), json.c_str(), &h));
    return Graph(h);
  }
  ~Graph() { weft_graph_destroy(h_); }
  Graph(Graph&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Graph& operator=(Graph&& o) noexcept {
    if (this != &o) {
      weft_graph_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  weft_graph* get() const { return h_; }

  void symbol(const std::string& name, int64_t min_value, int64_t max_value) {
    check(weft_graph_declare_symbol(h_, name.c_str(), min_value, max_value));
  }
  weft_tensor tensor(weft_tensor_kind kind, const std::string& name, weft_dtype dtype, const std::vector<Dim>& dims) {
    const auto d = detail::c_dims(dims);
    weft_tensor t = WEFT_TENSOR_NONE;
    check(weft_graph_add_tensor(h_, kind, name.c_str(), dtype, d.data(), static_cast<int32_t>(d.size()), &t));
    return t;
  }
  weft_tensor input(const std::string& name, weft_dtype dtype, const std::vector<Dim>& dims) {
    return tensor(WEFT_TENSOR_INPUT, name, dtype, dims);
  }
  weft_tensor weight(const std::string& name, weft_dtype dtype, const std::vector<Dim>& dims) {
    return tensor(WEFT_TENSOR_WEIGHT, name, dtype, dims);
  }
  weft_tensor state(const std::string& name, weft_dtype dtype, const std::vector<Dim>& dims) {
    return tensor(WEFT_TENSOR_STATE, name, dtype, dims);
  }

  // Any op of the table by name, attributes as a JSON object.
  weft_tensor op(const std::string& op, const std::vector<weft_tensor>& inputs, const std::string& attrs_json = "{}",
                 const std::string& name = "") {
    weft_tensor t = WEFT_TENSOR_NONE;
    check(weft_graph_add_op(h_, op.c_str(), inputs.data(), static_cast<int32_t>(inputs.size()), attrs_json.c_str(),
                            detail::c_name(name), &t));
    return t;
  }

  weft_tensor embedding(weft_tensor table, weft_tensor ids, const std::string& name = "") {
    return call(weft_op_embedding, table, ids, detail::c_name(name));
  }
  weft_tensor rmsnorm(weft_tensor x, weft_tensor w, float eps, const std::string& name = "") {
    return call(weft_op_rmsnorm, x, w, eps, detail::c_name(name));
  }
  weft_tensor head_rmsnorm(weft_tensor x, weft_tensor w, int64_t head_dim, float eps, const std::string& name = "") {
    return call(weft_op_head_rmsnorm, x, w, head_dim, eps, detail::c_name(name));
  }
  weft_tensor layernorm(weft_tensor x, weft_tensor w, weft_tensor bias, float eps, const std::string& name = "") {
    return call(weft_op_layernorm, x, w, bias, eps, detail::c_name(name));
  }
  weft_tensor linear(weft_tensor x, weft_tensor w, weft_tensor bias = WEFT_TENSOR_NONE,
                     weft_tensor residual = WEFT_TENSOR_NONE, const std::string& name = "") {
    return call(weft_op_linear, x, w, bias, residual, detail::c_name(name));
  }
  weft_tensor matmul(weft_tensor a, weft_tensor b, const std::string& name = "") {
    return call(weft_op_matmul, a, b, detail::c_name(name));
  }
  weft_tensor add(weft_tensor a, weft_tensor b, const std::string& name = "") { return call(weft_op_add, a, b, detail::c_name(name)); }
  weft_tensor mul(weft_tensor a, weft_tensor b, const std::string& name = "") { return call(weft_op_mul, a, b, detail::c_name(name)); }
  weft_tensor silu(weft_tensor x, const std::string& name = "") { return call(weft_op_silu, x, detail::c_name(name)); }
  weft_tensor gelu(weft_tensor x, bool tanh_approximation = false, const std::string& name = "") {
    return call(weft_op_gelu, x, tanh_approximation ? 1 : 0, detail::c_name(name));
  }
  weft_tensor silu_mul(weft_tensor gate, weft_tensor up = WEFT_TENSOR_NONE, const std::string& name = "") {
    return call(weft_op_silu_mul, gate, up, detail::c_name(name));
  }
  weft_tensor rope(weft_tensor x, weft_tensor positions, const weft_rope_options& o, const std::string& name = "") {
    return call(weft_op_rope, x, positions, &o, detail::c_name(name));
  }
  weft_tensor attention_decode(weft_tensor q, weft_tensor k, weft_tensor v, weft_tensor k_cache, weft_tensor v_cache,
                               weft_tensor positions, const weft_attention_options& o, const std::string& name = "") {
    return call(weft_op_attention_decode, q, k, v, k_cache, v_cache, positions, &o, detail::c_name(name));
  }
  weft_tensor softmax(weft_tensor x, const std::string& name = "") { return call(weft_op_softmax, x, detail::c_name(name)); }
  weft_tensor argmax(weft_tensor x, weft_dtype dtype = WEFT_DTYPE_I64, const std::string& name = "") {
    return call(weft_op_argmax, x, dtype, detail::c_name(name));
  }
  weft_tensor reduce(weft_tensor x, weft_reduce_kind kind, int32_t axis, bool keepdim = false, const std::string& name = "") {
    return call(weft_op_reduce, x, kind, axis, keepdim ? 1 : 0, detail::c_name(name));
  }
  weft_tensor cast(weft_tensor x, weft_dtype dtype, const std::string& name = "") {
    return call(weft_op_cast, x, dtype, detail::c_name(name));
  }
  weft_tensor reshape(weft_tensor x, const std::vector<Dim>& dims, const std::string& name = "") {
    const auto d = detail::c_dims(dims);
    return call(weft_op_reshape, x, d.data(), static_cast<int32_t>(d.size()), detail::c_name(name));
  }
  weft_tensor slice(weft_tensor x, int32_t axis, int64_t start, int64_t end, const std::string& name = "") {
    return call(weft_op_slice, x, axis, start, end, detail::c_name(name));
  }
  weft_tensor concat(const std::vector<weft_tensor>& xs, int32_t axis, const std::string& name = "") {
    return call(weft_op_concat, xs.data(), static_cast<int32_t>(xs.size()), axis, detail::c_name(name));
  }

  void output(weft_tensor t, const std::string& name = "") { check(weft_graph_mark_output(h_, t, detail::c_name(name))); }
  void validate() const { check(weft_graph_validate(h_)); }
  weft_tensor find(const std::string& name) const {
    weft_tensor t = WEFT_TENSOR_NONE;
    check(weft_graph_find_tensor(h_, name.c_str(), &t));
    return t;
  }
  weft_tensor_info info(weft_tensor t) const {
    weft_tensor_info i{};
    i.struct_size = sizeof i;
    check(weft_graph_tensor_info(h_, t, &i));
    return i;
  }
  std::string json() const {
    const char* s = nullptr;
    check(weft_graph_to_json(h_, &s));
    return s;
  }
  std::string text() const {
    const char* s = nullptr;
    check(weft_graph_to_text(h_, &s));
    return s;
  }
  std::array<uint64_t, 2> hash() const {
    std::array<uint64_t, 2> h{};
    check(weft_graph_hash(h_, h.data()));
    return h;
  }
  void run_reference(const Bindings& b) const { check(weft_graph_run_reference(h_, b.data(), b.size())); }

  // Compiles to a megakernel cubin through the kernel cache (no GPU needed); see weft_graph_compile.
  weft_compile_report compile(const char* arch = "sm_90a", int32_t num_sms = 0) const {
    weft_compile_options o{};
    o.struct_size = sizeof o;
    o.arch = arch;
    o.num_sms = num_sms;
    weft_compile_report r{};
    r.struct_size = sizeof r;
    check(weft_graph_compile(h_, &o, &r));
    return r;
  }

 private:
  explicit Graph(weft_graph* h) : h_(h) {}
  template <typename Fn, typename... Args>
  weft_tensor call(Fn fn, Args... args) {
    weft_tensor t = WEFT_TENSOR_NONE;
    check(fn(h_, args..., &t));
    return t;
  }

  weft_graph* h_ = nullptr;
};

// A graph loaded on a GPU. Bindings hold device pointers (Bindings::add with a device address).
class Program {
 public:
  explicit Program(const Graph& graph, int32_t device_ordinal = -1, int32_t watchdog_ms = 0) {
    weft_program_options o{};
    o.struct_size = sizeof o;
    o.device_ordinal = device_ordinal;
    o.watchdog_ms = watchdog_ms;
    check(weft_program_create(graph.get(), &o, &h_));
  }
  ~Program() { weft_program_destroy(h_); }
  Program(Program&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Program& operator=(Program&& o) noexcept {
    if (this != &o) {
      weft_program_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  weft_program* get() const { return h_; }

  // Asynchronous on `stream` (a CUstream, or nullptr for the default stream).
  void run(const Bindings& b, void* stream = nullptr) { check(weft_program_run(h_, b.data(), b.size(), stream)); }
  // Waits for `stream`; throws weft::Error for a device-side failure of an earlier run (e.g. the watchdog).
  void synchronize(void* stream = nullptr) { check(weft_program_synchronize(h_, stream)); }

 private:
  weft_program* h_ = nullptr;
};

// A Hugging Face Llama / Qwen3 folder loaded for greedy generation (GPU when there is one, else the CPU
// reference; see weft_model_options).
class Model {
 public:
  struct Generation {
    std::vector<int32_t> tokens;   // [batch][steps], -1 past steps_done
    std::vector<float> step_ms;    // [steps]
    double prefill_ms = 0, decode_ms = 0;
    int32_t steps_done = 0;
  };
  // Called after each step with its index and tokens [batch]; false stops the generation (weft_generate_request
  // .on_step: with multi_step a stop takes effect one step later). An exception it throws stops the generation
  // and is rethrown by generate().
  using StepFn = std::function<bool(int32_t step, const int32_t* tokens, int32_t batch)>;

  Model(const Context& context, const std::string& dir, weft_model_options options = {}) {
    options.struct_size = sizeof options;
    check(weft_model_load(context.get(), dir.c_str(), &options, &h_));
  }
  ~Model() { weft_model_destroy(h_); }
  Model(Model&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    if (this != &o) {
      weft_model_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  weft_model* get() const { return h_; }

  weft_model_info info() const {
    weft_model_info i{};
    i.struct_size = sizeof i;
    check(weft_model_get_info(h_, &i));
    return i;
  }
  weft_compile_report compile(int32_t batch) {
    weft_compile_report r{};
    r.struct_size = sizeof r;
    check(weft_model_compile(h_, batch, &r));
    return r;
  }
  // `prompts`: batch rows of one length. multi_step: every step in one launch (GPU). on_step: see StepFn.
  Generation generate(const std::vector<std::vector<int32_t>>& prompts, int32_t steps, bool multi_step = false,
                      const StepFn& on_step = {}) {
    if (prompts.empty()) throw Error(WEFT_ERROR_INVALID_ARGUMENT, "generate: no prompts");
    std::vector<int32_t> ids;
    for (const auto& p : prompts) {
      if (p.size() != prompts[0].size()) throw Error(WEFT_ERROR_INVALID_ARGUMENT, "generate: prompts of different lengths");
      ids.insert(ids.end(), p.begin(), p.end());
    }
    Generation g;
    const auto batch = static_cast<int32_t>(prompts.size());
    g.tokens.resize(static_cast<size_t>(batch) * static_cast<size_t>(steps > 0 ? steps : 0));
    g.step_ms.resize(static_cast<size_t>(steps > 0 ? steps : 0));
    weft_generate_request r{};
    r.struct_size = sizeof r;
    r.batch = batch;
    r.prompt_len = static_cast<int32_t>(prompts[0].size());
    r.steps = steps;
    r.prompt_ids = ids.data();
    r.multi_step = multi_step ? 1 : 0;
    r.out_tokens = g.tokens.data();
    r.out_step_ms = g.step_ms.data();
    // The C callback may not throw through the library: an exception stops the generation, then is rethrown.
    struct Relay {
      const StepFn* fn;
      std::exception_ptr thrown;
      static int32_t call(void* user, int32_t step, const int32_t* tokens, int32_t n) {
        auto* self = static_cast<Relay*>(user);
        try {
          return (*self->fn)(step, tokens, n) ? 0 : 1;
        } catch (...) {
          self->thrown = std::current_exception();
          return 1;
        }
      }
    } relay{&on_step, nullptr};
    if (on_step) {
      r.on_step = &Relay::call;
      r.on_step_user = &relay;
    }
    weft_generate_report rep{};
    rep.struct_size = sizeof rep;
    const weft_status status = weft_model_generate(h_, &r, &rep);
    if (relay.thrown) std::rethrow_exception(relay.thrown);
    check(status);
    g.prefill_ms = rep.prefill_ms;
    g.decode_ms = rep.decode_ms;
    g.steps_done = rep.steps_done;
    return g;
  }

 private:
  weft_model* h_ = nullptr;
};

}  // namespace weft

#endif  // WEFT_WEFT_HPP
