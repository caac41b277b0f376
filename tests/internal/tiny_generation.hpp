// Generation tests' shared pieces: a random tiny Llama / Qwen3 checkpoint written to a temporary folder and
// loaded, and a request of short distinct prompts.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "models/generation.hpp"
#include "models/model.hpp"
#include "test_models.hpp"

namespace weft::test {

struct TinyModel {
  // ffn > 0: that FFN width, with a max batch of 16 (8 x 8192 rows run the unfused graph: Model::graph_for; at 16
  // rows its down projection stages x in K chunks).
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

inline GenerateRequest tiny_request(int64_t batch, int64_t steps) {
  GenerateRequest r;
  r.batch = batch;
  r.prompt_len = 5;
  r.steps = steps;
  for (int64_t i = 0; i < batch * r.prompt_len; ++i) r.prompt.push_back(static_cast<int32_t>((i * 37 + 11) % 1000));
  return r;
}

}  // namespace weft::test
