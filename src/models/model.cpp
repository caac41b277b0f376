#include "models/model.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "graph/op_def.hpp"

namespace weft {

namespace {

DecoderShape shape_of(const std::filesystem::path& dir, const ModelOptions& o) {
  const std::filesystem::path config = dir / "config.json";
  std::ifstream f(config);
  if (!f) invalid("cannot read '" + config.string() + "': a Hugging Face model folder needs a config.json");
  std::stringstream text;
  text << f.rdbuf();
  DecoderShape s;
  try {
    s = decoder_shape_from_hf_config(text.str());
  } catch (const Error& e) {
    fail(e.status(), "'" + config.string() + "': " + e.what());
  }
  if (o.max_batch < 1) invalid("max_batch is " + std::to_string(o.max_batch) + "; expected >= 1");
  if (o.max_seq < 0) invalid("max_seq is " + std::to_string(o.max_seq) + "; expected 0 (default) or a positive length");
  if (o.max_seq > s.max_seq)
    invalid("max_seq " + std::to_string(o.max_seq) + " exceeds the model's max_position_embeddings " + std::to_string(s.max_seq));
  s.max_seq = o.max_seq > 0 ? o.max_seq : std::min(s.max_seq, kDefaultMaxSeq);
  s.max_batch = o.max_batch;
  // WEFT_FUSE_LINEAR_INPUTS=0 or 1 overrides the choice (DecoderShape::fuse_linear_inputs), to measure it.
  if (const char* fuse = std::getenv("WEFT_FUSE_LINEAR_INPUTS")) s.fuse_linear_inputs = std::string(fuse) == "0" ? 0 : 1;
  // WEFT_SWIGLU_EPILOGUE=0 or 1 overrides the unfused graph's choice (DecoderShape::swiglu_epilogue), to measure it.
  if (const char* e = std::getenv("WEFT_SWIGLU_EPILOGUE")) s.swiglu_epilogue = std::string(e) == "0" ? 0 : 1;
  // WEFT_NORMS_IN_LINEARS=0 or 1 fixes the batched graphs' choice for every batch (DecoderShape::norms_in_linears).
  if (const char* e = std::getenv("WEFT_NORMS_IN_LINEARS")) s.norms_in_linears = std::string(e) == "0" ? 0 : 1;
  // WEFT_ROPE_TABLE=0 or 1 overrides the choice of a rope table per step (DecoderShape::rope_table), to measure it.
  if (const char* e = std::getenv("WEFT_ROPE_TABLE")) s.rope_table = std::string(e) == "0" ? 0 : 1;
  // WEFT_FUSE_ATTENTION=0 builds the layers' attention from the separate ops (DecoderShape::fuse_attention).
  if (const char* fuse = std::getenv("WEFT_FUSE_ATTENTION")) s.fuse_attention = std::string(fuse) != "0";
  return s;
}

}  // namespace

// The decoder with SwiGLU apart from the down projection, where the model reaches batches that run it faster
// (fused_linear_inputs_pay) and no override ($WEFT_FUSE_LINEAR_INPUTS) fixed the choice: one graph with its norms
// inside the linears they feed for the rows where that pays (norms_in_linears_pay; each such graph's batch symbol
// ends there), one with the norms as ops for the rows past them, unless $WEFT_NORMS_IN_LINEARS fixed it.
std::vector<Model::BatchGraph> Model::batched_graphs(const DecoderShape& s) {
  std::vector<BatchGraph> out;
  if (s.fuse_linear_inputs >= 0 || fused_linear_inputs_pay(s.max_batch, s.ffn)) return out;
  if (!fused_linear_supported(s.hidden, s.dtype) || !fused_linear_supported(s.ffn, s.dtype)) return out;
  DecoderShape u = s;
  u.fuse_linear_inputs = 0;
  int64_t norms_in = 0;  // the most rows that run the norms inside the linears
  while (norms_in < s.max_batch && norms_in_linears_pay(norms_in + 1)) ++norms_in;
  // With norms_in_linears -1 build_decoder_graph applies norms_in_linears_pay to each graph's max_batch.
  if (s.norms_in_linears < 0 && norms_in < s.max_batch && !fused_linear_inputs_pay(norms_in, s.ffn)) {
    u.max_batch = norms_in;
    out.push_back({norms_in, build_decoder_graph(u)});
    u.max_batch = s.max_batch;
  }
  out.push_back({s.max_batch, build_decoder_graph(u)});
  return out;
}

Model::Model(const std::filesystem::path& dir, const ModelOptions& options)
    : dir_(dir),
      shape_(shape_of(dir, options)),
      graph_(build_decoder_graph(shape_)),
      batched_graphs_(batched_graphs(shape_)),
      checkpoint_(dir),
      weights_(graph_, checkpoint_),
      input_ids_(graph_.find_tensor("input_ids")),
      positions_(graph_.find_tensor("positions")),
      logits_(graph_.find_tensor("logits")),
      next_token_(graph_.find_tensor("next_token")) {}

size_t Model::graph_index(int64_t batch) const {
  if (batched_graphs_.empty() || fused_linear_inputs_pay(batch, shape_.ffn)) return 0;
  for (size_t i = 0; i + 1 < batched_graphs_.size(); ++i)
    if (batch <= batched_graphs_[i].max_rows) return i + 1;
  return batched_graphs_.size();
}

std::vector<Model::RequestTensor> Model::request_tensors(int64_t batch) const {
  std::vector<RequestTensor> out;
  for (size_t i = 0; i < graph_.tensors().size(); ++i) {
    const TensorDesc& t = graph_.tensors()[i];
    if (t.kind != TensorKind::state && static_cast<TensorId>(i) != logits_) continue;
    std::vector<int64_t> shape = resolve_shape(t.type.shape, SymbolValues{batch});
    const auto bytes = static_cast<size_t>(element_count(shape)) * dtype_size(t.type.dtype);
    out.push_back({static_cast<TensorId>(i), t.type.dtype, std::move(shape), bytes});
  }
  return out;
}

}  // namespace weft
