// Small decoder shapes for tests: the real Llama / Qwen3 graph structure at sizes that lower, simulate and run
// in milliseconds.
#pragma once

#include "models/decoder_graph.hpp"

namespace weft::test {

inline DecoderShape tiny_decoder(int64_t layers, int64_t max_batch, int64_t max_seq, bool qk_norm = true) {
  DecoderShape s = tiny_decoder_shape(qk_norm);
  s.layers = layers;
  s.vocab = 1000;
  s.max_seq = max_seq;
  s.max_batch = max_batch;
  return s;
}

// One layer's attention of Qwen3-0.6B's heads (16 q heads, 8 kv heads of 128, q and k norms) over a 4096-row
// bf16 cache, split over its timesteps (8 parts per kv head), whose q, k and v an add computes (so its parts wait
// for them). Positions given at launch (i32), or, `computed`, cast by an op from an i64 input.
inline Graph split_attention_graph(bool computed) {
  Graph g(computed ? "attention_positions_computed" : "attention_positions_given");
  auto tensor = [&](TensorKind kind, const char* name, DType t, std::vector<int64_t> dims) {
    Shape s;
    for (int64_t d : dims) s.push_back(Dim::fixed(d));
    return g.add_tensor(kind, name, t, s);
  };
  const DType dt = DType::bf16;
  const TensorId qa = tensor(TensorKind::input, "qa", dt, {1, 32 * 128}), qb = tensor(TensorKind::input, "qb", dt, {1, 32 * 128});
  const TensorId kc = tensor(TensorKind::state, "k_cache", dt, {1, 4096, 8, 128});
  const TensorId vc = tensor(TensorKind::state, "v_cache", dt, {1, 4096, 8, 128});
  const TensorId given = tensor(TensorKind::input, "positions", computed ? DType::i64 : DType::i32, {1});
  const TensorId qn = tensor(TensorKind::weight, "q_norm", dt, {128}), kn = tensor(TensorKind::weight, "k_norm", dt, {128});
  const TensorId qkv = g.add_op("add", {qa, qb}, {}, "qkv");
  const TensorId pos = computed ? g.add_op("cast", {given}, {{"dtype", "i32"}}, "pos") : given;
  g.mark_output(g.add_op("attention_decode_qkv", {qkv, kc, vc, pos, qn, kn},
                         {{"num_q_heads", 16}, {"num_kv_heads", 8}, {"head_dim", 128}, {"eps", 1e-6}}, "out"),
                "");
  return g;
}

}  // namespace weft::test
