// The weights of a decoder graph, read from a Hugging Face checkpoint: tensors the graph uses as they are stay
// in the memory-mapped files; fused ones (qkv_proj = q_proj | k_proj | v_proj, gate_up_proj = gate_proj |
// up_proj, stacked by rows) are assembled once on the host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "graph/bindings.hpp"
#include "graph/graph.hpp"
#include "models/decoder_graph.hpp"
#include "models/safetensors.hpp"

namespace weft {

struct ModelWeight {
  TensorId tensor = kNoTensor;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // into the checkpoint's mapping, or into `owned`
  size_t bytes = 0;
  std::vector<uint8_t> owned;
};

class ModelWeights {
 public:
  // Every WEIGHT tensor of `g` (built by build_decoder_graph) from `checkpoint`; a missing tensor, a wrong shape
  // or dtype is an error naming the checkpoint tensor.
  ModelWeights(const Graph& g, const Checkpoint& checkpoint);
  const std::vector<ModelWeight>& weights() const { return weights_; }
  // Every weight bound to its host data (the mapping or the fused copy), for the reference interpreter.
  std::vector<Binding> host_bindings() const;

 private:
  std::vector<ModelWeight> weights_;
};

// Writes a random checkpoint with HF tensor names (q/k/v and gate/up separate, as HF stores them) and its
// config.json into `dir`, for tests and samples. Values are uniform in [-scale, scale) (norm weights near 1).
void write_random_checkpoint(const std::filesystem::path& dir, const DecoderShape& s, uint32_t seed, float scale = 0.05f);

}  // namespace weft
