// A Hugging Face model folder loaded for decoding: its config.json turned into a decoder shape, the decode-step
// graph built from it, and the weights (memory-mapped safetensors, q/k/v and gate/up fused) bound to the graph.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "graph/graph.hpp"
#include "models/decoder_graph.hpp"
#include "models/model_weights.hpp"
#include "models/safetensors.hpp"

namespace weft {

struct ModelOptions {
  int64_t max_batch = 8;  // the batch symbol's upper bound
  int64_t max_seq = 0;    // KV-cache length; 0: min(max_position_embeddings, kDefaultMaxSeq)
};

inline constexpr int64_t kDefaultMaxSeq = 4096;

class Model {
 public:
  // Reads dir/config.json and the checkpoint (model.safetensors or the shards of model.safetensors.index.json).
  // Errors name the file, the config field or the checkpoint tensor at fault.
  Model(const std::filesystem::path& dir, const ModelOptions& options);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const DecoderShape& shape() const { return shape_; }
  const Graph& graph() const { return graph_; }
  // The graph a decode step of `batch` rows runs: graph(), or, where the model reaches batches that run faster so
  // (fused_linear_inputs_pay), the same decoder with its norms and SwiGLU as separate ops. Both name their
  // weights, states, inputs and outputs alike, with other tensor ids: weights(), request_tensors() and the ids
  // below are graph()'s (look a tensor up by name in the other).
  const Graph& graph_for(int64_t batch) const;
  const ModelWeights& weights() const { return weights_; }
  const std::filesystem::path& dir() const { return dir_; }

  // What one request owns at `batch` rows: every KV-cache state and the logits, with their resolved shapes.
  struct RequestTensor {
    TensorId tensor;
    DType dtype;
    std::vector<int64_t> shape;
    size_t bytes;
  };
  std::vector<RequestTensor> request_tensors(int64_t batch) const;

  TensorId input_ids() const { return input_ids_; }
  TensorId positions() const { return positions_; }
  TensorId logits() const { return logits_; }
  TensorId next_token() const { return next_token_; }

 private:
  std::filesystem::path dir_;
  DecoderShape shape_;
  Graph graph_;
  std::optional<Graph> unfused_graph_;
  Checkpoint checkpoint_;  // before weights_: the weights point into its mappings
  ModelWeights weights_;
  TensorId input_ids_, positions_, logits_, next_token_;
};

}  // namespace weft
