#include "models/generation.hpp"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.hpp"
#include "core/half.hpp"
#include "reference/interpreter.hpp"

namespace weft {

void check_request_sizes(const Model& model, int64_t batch, int64_t prompt_len, int64_t steps) {
  const DecoderShape& s = model.shape();
  if (batch < 1 || batch > s.max_batch)
    invalid("batch is " + std::to_string(batch) + "; expected 1.." + std::to_string(s.max_batch) + " (the model's max_batch)");
  if (prompt_len < 1) invalid("prompt_len is " + std::to_string(prompt_len) + "; expected at least 1 token");
  if (steps < 1) invalid("steps is " + std::to_string(steps) + "; expected at least 1");
  if (prompt_len + steps - 1 > s.max_seq)
    invalid("prompt_len " + std::to_string(prompt_len) + " + steps " + std::to_string(steps) + " needs " +
            std::to_string(prompt_len + steps - 1) + " KV-cache positions; the model was loaded with max_seq " + std::to_string(s.max_seq));
}

void check_request(const Model& model, const GenerateRequest& r) {
  const DecoderShape& s = model.shape();
  check_request_sizes(model, r.batch, r.prompt_len, r.steps);
  if (r.prompt.size() != static_cast<size_t>(r.batch * r.prompt_len))
    invalid("prompt has " + std::to_string(r.prompt.size()) + " ids; expected batch * prompt_len = " + std::to_string(r.batch * r.prompt_len));
  if (!r.forced.empty() && r.forced.size() != static_cast<size_t>(r.batch * r.steps))
    invalid("forced has " + std::to_string(r.forced.size()) + " ids; expected batch * steps = " + std::to_string(r.batch * r.steps));
  if (r.multi_step && r.logits) invalid("multi-step generation keeps the logits on the device; per-step logits need step mode");
  auto check_ids = [&](const std::vector<int32_t>& ids, int64_t cols, const char* what) {
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= s.vocab)
        invalid(std::string(what) + "[" + std::to_string(static_cast<int64_t>(i) / cols) + "][" + std::to_string(static_cast<int64_t>(i) % cols) +
                "] is " + std::to_string(ids[i]) + "; expected a token id in [0, " + std::to_string(s.vocab) + ")");
  };
  check_ids(r.prompt, r.prompt_len, "prompt");
  check_ids(r.forced, r.steps, "forced");
}

void widen_to_f32(const void* data, DType dtype, float* out, size_t n) {
  if (dtype == DType::f32) {
    std::memcpy(out, data, n * sizeof(float));
    return;
  }
  if (dtype != DType::bf16 && dtype != DType::f16) invalid("logits of dtype " + std::string(dtype_name(dtype)) + " cannot be widened to f32");
  const auto* h = static_cast<const uint16_t*>(data);
  for (size_t i = 0; i < n; ++i) out[i] = dtype == DType::bf16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
}

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class ReferenceGenerator final : public Generator {
 public:
  ReferenceGenerator(std::shared_ptr<const Model> m, bool use_cache) : model_(std::move(m)), use_cache_(use_cache) {}

  const CompileResult& compile(int64_t batch) override {
    CompileRequest req;
    req.arch = "sm_90a";
    req.symbols = SymbolValues{batch};
    std::unique_ptr<cache::KernelCache> cache = use_cache_ ? cache::open_kernel_cache() : nullptr;
    compiled_ = compile_graph(model_->graph_for(batch), req, cache.get());  // what the device would run
    return compiled_;
  }
  const char* backend() const override { return "reference"; }
  std::string device() const override {
    return "CPU reference interpreter (" + std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " hardware threads)";
  }

  GenerateResult generate(const GenerateRequest& r) override {
    check_request(*model_, r);
    const Model& m = *model_;
    const Graph& g = m.graph();
    const auto batch = static_cast<size_t>(r.batch);
    std::vector<int32_t> ids(batch), pos(batch), next(batch);
    std::vector<HostBinding> bindings = m.weights().host_bindings();
    const auto owned = m.request_tensors(r.batch);
    std::vector<std::vector<uint8_t>> storage(owned.size());  // KV caches (zeroed) and logits
    const void* logits = nullptr;
    for (size_t i = 0; i < owned.size(); ++i) {
      storage[i].assign(owned[i].bytes, 0);
      bindings.push_back({owned[i].tensor, TensorView{storage[i].data(), owned[i].dtype, owned[i].shape, {}}});
      if (owned[i].tensor == m.logits()) logits = storage[i].data();
    }
    bindings.push_back({m.input_ids(), TensorView{ids.data(), DType::i32, {r.batch}, {}}});
    bindings.push_back({m.positions(), TensorView{pos.data(), DType::i32, {r.batch}, {}}});
    bindings.push_back({m.next_token(), TensorView{next.data(), DType::i32, {r.batch}, {}}});

    GenerateResult out;
    out.tokens.assign(batch * static_cast<size_t>(r.steps), -1);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t t = 0; t + 1 < r.prompt_len; ++t) {
      for (size_t b = 0; b < batch; ++b) {
        ids[b] = r.prompt[b * static_cast<size_t>(r.prompt_len) + static_cast<size_t>(t)];
        pos[b] = static_cast<int32_t>(t);
      }
      run_reference(g, bindings);
    }
    auto mark = std::chrono::steady_clock::now();
    out.prefill_ms = ms_between(start, mark);
    const size_t vocab = static_cast<size_t>(m.shape().vocab);
    for (int64_t j = 0; j < r.steps; ++j) {
      for (size_t b = 0; b < batch; ++b) {
        const auto row = b * static_cast<size_t>(r.steps);
        ids[b] = j == 0 ? r.prompt[b * static_cast<size_t>(r.prompt_len) + static_cast<size_t>(r.prompt_len - 1)]
                 : r.forced.empty() ? out.tokens[row + static_cast<size_t>(j - 1)]
                                    : r.forced[row + static_cast<size_t>(j - 1)];
        pos[b] = static_cast<int32_t>(r.prompt_len - 1 + j);
      }
      run_reference(g, bindings);
      for (size_t b = 0; b < batch; ++b) out.tokens[b * static_cast<size_t>(r.steps) + static_cast<size_t>(j)] = next[b];
      if (r.logits) widen_to_f32(logits, m.shape().dtype, r.logits + static_cast<size_t>(j) * batch * vocab, batch * vocab);
      const auto now = std::chrono::steady_clock::now();
      out.step_ms.push_back(ms_between(mark, now));
      mark = now;
      out.steps_done = j + 1;
      if (r.on_step && !r.on_step(j, next.data(), r.batch)) break;
    }
    for (double ms : out.step_ms) out.decode_ms += ms;
    return out;
  }

 private:
  std::shared_ptr<const Model> model_;
  bool use_cache_;
  CompileResult compiled_;
};

}  // namespace

std::unique_ptr<Generator> make_reference_generator(std::shared_ptr<const Model> model, bool use_cache) {
  return std::make_unique<ReferenceGenerator>(std::move(model), use_cache);
}

}  // namespace weft
