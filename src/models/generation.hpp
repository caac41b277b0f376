// Greedy generation with a loaded model. A request is `batch` prompts of `prompt_len` tokens; the prompt minus
// its last token is prefilled one position per step, then generation step j (0..steps-1) consumes one token
// per row at position prompt_len - 1 + j and yields logits_j and its argmax g_j. Step 0 consumes the prompt's
// last token; step j >= 1 consumes g_{j-1}, or forced[b][j-1] when forced tokens are given (teacher forcing).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.hpp"
#include "pipeline/compile_graph.hpp"

namespace weft {

// Called after generation step `step` with its argmax, tokens[batch]; false stops the generation there.
using StepCallback = std::function<bool(int64_t step, const int32_t* tokens, int64_t batch)>;

struct GenerateRequest {
  int64_t batch = 1, prompt_len = 0, steps = 0;
  std::vector<int32_t> prompt;  // [batch][prompt_len]
  std::vector<int32_t> forced;  // empty, or [batch][steps] (the last column is never consumed)
  // All steps in one launch, the argmax fed back on the device. With on_step the kernel hands the host each
  // step's tokens as it goes (a stop takes effect one step later); with forced tokens it waits at every step for
  // the host to hand it the next ones.
  bool multi_step = false;
  float* logits = nullptr;      // optional [steps][batch][vocab], step mode only
  StepCallback on_step;         // optional, called for every step in order on the calling thread
};

struct GenerateResult {
  int64_t steps_done = 0;       // steps run: fewer than asked when on_step stopped the generation
  std::vector<int32_t> tokens;  // [batch][steps], -1 past steps_done
  std::vector<double> step_ms;  // per generation step (multi-step: the launch's time / steps)
  double prefill_ms = 0, decode_ms = 0;
};

// Checks a request against the model: sizes, token ids in [0, vocab), positions within the KV cache; messages
// name the field, row and column.
void check_request(const Model& model, const GenerateRequest& r);
void check_request_sizes(const Model& model, int64_t batch, int64_t prompt_len, int64_t steps);  // the sizes only

// Float values stored as `dtype` (bf16, f16 or f32) widened to f32, as logits are handed back.
void widen_to_f32(const void* data, DType dtype, float* out, size_t n);

class Generator {
 public:
  virtual ~Generator() = default;
  virtual GenerateResult generate(const GenerateRequest& r) = 0;
  virtual const char* backend() const = 0;  // "gpu" or "reference"
  virtual std::string device() const = 0;   // what runs it, for people
  // Compiles the megakernel for `batch` rows through the kernel cache (GPU: for this device, and loads it;
  // reference: for sm_90a, to show what a GPU would run).
  virtual const CompileResult& compile(int64_t batch) = 0;
};

// Runs the model on the CPU reference interpreter (f32 arithmetic, results rounded like the GPU's).
// `use_cache`: compile() goes through the kernel cache.
std::unique_ptr<Generator> make_reference_generator(std::shared_ptr<const Model> model, bool use_cache = true);

}  // namespace weft
