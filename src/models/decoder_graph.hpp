// The decode-step graph of a Llama / Qwen3-style transformer, built from its shape: embedding -> L x (rmsnorm,
// fused QKV projection, optional q/k head norm (Qwen3), rope, attention over the KV cache with the new k/v
// appended, output projection + residual, rmsnorm, fused gate/up projection, SwiGLU, down projection +
// residual) -> final norm -> lm_head -> argmax. Batch is the symbol `batch`.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.hpp"

namespace weft {

struct DecoderShape {
  std::string name = "llama";
  int64_t layers = 16, hidden = 2048, q_heads = 32, kv_heads = 8, head_dim = 64, ffn = 8192, vocab = 128256;
  int64_t max_seq = 4096, max_batch = 64;
  bool qk_norm = false;  // Qwen3
  bool tie_word_embeddings = true;  // lm_head reuses the embedding table
  double rope_theta = 500000.0;
  // RoPE scaling as HF config.json's rope_scaling: "none", "linear" or "llama3" (Llama-3.2-1B's defaults).
  std::string rope_scaling = "llama3";
  double rope_factor = 32.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position = 8192;
  double rms_eps = 1e-5;
  DType dtype = DType::bf16;
  // Whether rmsnorm and silu_mul run inside the linear they feed (rmsnorm_linear, silu_mul_linear; only where
  // fused_linear_supported): 1 wherever supported, 0 never, -1 the default, which is 1. Measured side by side
  // (docs/perf.md): once fused everywhere, then only up to hidden 1024 (Llama-3.2-1B on an H200 was slower
  // fused while every task still read its descriptor through L2 and called each op across the device library's
  // ABI); since the task loop inlines the ops, fused is faster for both (H100: Llama-3.2-1B 1.56-1.60 ms vs
  // 1.66 separate, Qwen3-0.6B 1.71-1.74 vs 1.79). A Model keeps a graph per batch tier (Model::graph_for).
  int fuse_linear_inputs = -1;
  // Where the norms and SwiGLU are separate ops (fuse_linear_inputs 0): whether the gate/up projection computes the
  // SwiGLU in its own tiles (linear_silu_mul) instead of an op boundary and a silu_mul op after it: 1 always, 0
  // never, -1 the default, where swiglu_epilogue_pays.
  int swiglu_epilogue = -1;
  // Where the norms and SwiGLU are separate ops (fuse_linear_inputs 0): whether the q/k/v projection and the logits
  // still take their norms into their tiles (rmsnorm_linear), and the gate/up projection too where it takes SwiGLU
  // (linear_silu_mul with its norm weight), removing the norm ops and their boundaries: 1 always, 0 never, -1 the
  // default, where norms_in_linears_pay(max_batch) (a Model builds such a graph for the batches where it pays).
  int norms_in_linears = -1;
  // Whether each layer's slices, q/k head norms, rope and attention are one attention_decode_qkv op (true) or
  // the separate ops (false, to measure the difference).
  bool fuse_attention = true;
  // Whether the fused attention ops rotate by a rope table computed once per step (the rope_table op, shared by
  // every layer) instead of each attention task building its own (~2 us of double math before its wait): 1 always,
  // 0 never, -1 the default, where the norms and SwiGLU are separate ops (the graph of steps of many rows, whose
  // attention set-up is on the critical path: it follows a q/k/v tile, or a first wave of attention tasks). At one
  // row the set-up overlaps q/k/v, and the table's one task (~9.6 us on an SM where its code is cold) delayed the
  // first layer instead (docs/perf.md round 35).
  int rope_table = -1;
};

DecoderShape llama_3_2_1b_shape();
DecoderShape qwen3_0_6b_shape();
// Qwen3-8B: 36 layers, hidden 4096, 32 q / 8 kv heads of 128, FFN 12288, its own lm_head.
DecoderShape qwen3_8b_shape();
// Llama (or Qwen3 with qwen3 = true) structure at a size that loads, compiles and runs in milliseconds anywhere:
// 2 layers, hidden 256, 4 q / 2 kv heads of 64, FFN 512, vocab 2048, max_seq 1024.
DecoderShape tiny_decoder_shape(bool qwen3);

// The shape described by a Hugging Face config.json (model_type "llama" or "qwen3"). Missing or
// contradictory fields are errors naming the field.
DecoderShape decoder_shape_from_hf_config(const std::string& config_json);

// Whether a decode step of `rows` rows is faster with its norms and SwiGLU inside the linears they feed
// (DecoderShape::fuse_linear_inputs). Fused inputs are recomputed by every column tile of the linear: free for one
// row, but each tile of a batched down projection stages and activates rows x ffn of SwiGLU from L2 (14 of a 25 us
// tile at 8 rows of Llama-3.2-1B). On an H200 (docs/perf.md, round 14), unfused against fused: Llama-3.2-1B (ffn
// 8192) +7.7% at 1 row, +2.2% at 2, -0.8% at 4, -6.6% at 8, -19% at 32; Qwen3-0.6B (ffn 3072) +17% at 1 row,
// +1.9% at 8. Fused while rows x ffn <= 32768.
bool fused_linear_inputs_pay(int64_t rows, int64_t ffn);

// Whether the graph of separate ops (fuse_linear_inputs 0) serving steps of up to `rows` rows is faster with its norms
// inside the linears they feed (DecoderShape::norms_in_linears). Every tile then normalizes its rows of x again, a
// cost that grows with the rows, against the two norm ops a layer and the final norm, whose boundaries do not. H100
// (docs/perf.md round 56), against the norms as ops: Llama-3.2-1B -3.2 / -3.0% a token (step / loop) at 8 rows,
// +3.3 / +3.8% at 16, +7.4 / +7.3% at 32; Qwen3-0.6B +6.3 / +7.1% at 16. Up to 8 rows.
bool norms_in_linears_pay(int64_t rows);

// Whether the unfused decoder's gate/up projection takes SwiGLU into its tiles (DecoderShape::swiglu_epilogue): for
// 16-bit weights whose x rows (up to the model's max_batch, at most a tensor-core tile's 32) fit one tensor-core
// tile of the wide shared memory whole, so that it streams the weights once. Otherwise linear and silu_mul stay
// (the linear may split K, which linear_silu_mul cannot).
bool swiglu_epilogue_pays(const DecoderShape& s);

// Tensors are named as in HF checkpoints where one exists ("model.layers.3.self_attn.qkv_proj.weight" for the
// fused projection); inputs are "input_ids" and "positions", states "layers.N.k_cache" / "v_cache", outputs
// "logits" and "next_token".
Graph build_decoder_graph(const DecoderShape& s);

}  // namespace weft
