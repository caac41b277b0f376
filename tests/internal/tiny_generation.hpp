// Generation tests' shared pieces: a random tiny Llama / Qwen3 checkpoint written to a temporary folder and
// loaded, a decoder of the one-row GEMV tiles' shapes, an environment variable for a scope, and a request of short
// distinct prompts.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "models/generation.hpp"
#include "models/model.hpp"
#include "models/model_weights.hpp"
#include "test_models.hpp"

namespace weft::test {

struct TinyModel {
  // ffn > 0: that FFN width, with a max batch of 16 (8 x 8192 rows run a batched graph with the norms inside the
  // linears, 16 one with the norms as ops: Model::graph_for; at 16 rows its down projection stages x in K chunks).
  explicit TinyModel(bool qwen, int64_t layers = 2, int64_t ffn = 0) {
    dir = std::filesystem::temp_directory_path() /
          ("weft_gpu_generation_" + std::to_string(::getpid()) + (qwen ? "_q" : "_l") + std::to_string(layers));
    std::filesystem::remove_all(dir);
    DecoderShape s = tiny_decoder(layers, 4, 64, qwen);
    s.tie_word_embeddings = !qwen;
    if (ffn > 0) s.ffn = ffn;
    write_random_checkpoint(dir, s, 5, 0.1f);
    model = std::make_shared<const Model>(dir, ModelOptions{ffn > 0 ? 16 : 4, 0});
  }
  ~TinyModel() { std::filesystem::remove_all(dir); }
  std::filesystem::path dir;
  std::shared_ptr<const Model> model;
};

// A two-layer decoder of hidden 1024 (q/k/v, o and gate/up rows of 2 KiB: the batch-1 one-row GEMV tiles) and FFN
// `ffn` (down rows of 2 * ffn bytes), Qwen3's heads of 128 or Llama's of 64, written as a random checkpoint (`seed`)
// into a folder named after `tag`, for at most 2 rows.
struct OneRowModel {
  OneRowModel(const std::string& tag, bool qwen, int64_t ffn, uint32_t seed) {
    dir = std::filesystem::temp_directory_path() /
          ("weft_" + tag + "_" + std::to_string(::getpid()) + (qwen ? "_q" : "_l") + std::to_string(ffn));
    std::filesystem::remove_all(dir);
    DecoderShape s = tiny_decoder(2, 2, 96, qwen);
    s.hidden = 1024;
    s.head_dim = qwen ? 128 : 64;
    s.q_heads = 1024 / s.head_dim;
    s.kv_heads = s.q_heads / 2;
    s.ffn = ffn;
    s.tie_word_embeddings = !qwen;
    write_random_checkpoint(dir, s, seed, 0.05f);
    model = std::make_shared<const Model>(dir, ModelOptions{2, 0});
  }
  ~OneRowModel() { std::filesystem::remove_all(dir); }
  OneRowModel(const OneRowModel&) = delete;
  OneRowModel& operator=(const OneRowModel&) = delete;
  std::filesystem::path dir;
  std::shared_ptr<const Model> model;
};

// An environment variable for a test's scope (generators compile their kernels and read $WEFT_TUNE under it); the
// value it had before, or its absence, comes back at the end, so a suite run under a switch keeps it for later tests.
struct EnvFor {
  EnvFor(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvFor() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  EnvFor(const EnvFor&) = delete;
  EnvFor& operator=(const EnvFor&) = delete;
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// ||got - want|| / ||want|| over n values, summed in double.
inline double relative_error(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t v = 0; v < n; ++v) {
    num += (double(got[v]) - want[v]) * (double(got[v]) - want[v]);
    den += double(want[v]) * want[v];
  }
  return std::sqrt(num / den);
}

inline GenerateRequest tiny_request(int64_t batch, int64_t steps) {
  GenerateRequest r;
  r.batch = batch;
  r.prompt_len = 5;
  r.steps = steps;
  for (int64_t i = 0; i < batch * r.prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>((i * 37 + 11) % 1000));
  return r;
}

}  // namespace weft::test
