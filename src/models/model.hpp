// A Hugging Face model folder loaded for decoding: its config.json turned into a decoder shape, the decode-step
// graph built from it, and the weights (memory-mapped safetensors, q/k/v and gate/up fused) bound to the graph.
#pragma once

#include <cstdint>
#include <filesystem>
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
  // (fused_linear_inputs_pay), the same decoder with SwiGLU apart from the down projection, its norms inside the
  // linears they feed up to the rows where that pays (norms_in_linears_pay) and as ops of their own past them. All
  // name their weights, states, inputs and outputs alike, with other tensor ids: weights(), request_tensors() and
  // the ids below are graph()'s (look a tensor up by name in the others).
  const Graph& graph_for(int64_t batch) const { return graph_at(graph_index(batch)); }
  // The model's graphs by index: 0 is graph(), then the batched ones in ascending order of the rows they serve;
  // graph_index(batch) is graph_for(batch)'s index (batch in 1..max_batch).
  size_t graph_count() const { return 1 + batched_graphs_.size(); }
  const Graph& graph_at(size_t i) const { return i == 0 ? graph_ : batched_graphs_.at(i - 1).graph; }
  size_t graph_index(int64_t batch) const;
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
  // A graph of separate ops and the most rows it serves (from the rows past the previous one's).
  struct BatchGraph {
    int64_t max_rows;
    Graph graph;
  };
  std::vector<BatchGraph> batched_graphs_;  // ascending by max_rows; empty where graph_ serves every batch
  static std::vector<BatchGraph> batched_graphs(const DecoderShape& s);
  Checkpoint checkpoint_;  // before weights_: the weights point into its mappings
  ModelWeights weights_;
  TensorId input_ids_, positions_, logits_, next_token_;
};

}  // namespace weft
