// Small decoder shapes for tests: the real Llama / Qwen3 graph structure at sizes that lower, simulate and run
// in milliseconds.
#pragma once

#include "models/decoder_graph.hpp"
#include "shape_util.hpp"

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

// One-row linears in a row, as a decode step's layers chain them: each SM's queue holds a tile of every op in turn.
// Weight rows of 1, 2 and 4 units per lane and stage (K 768, 512, 1024 and up), 1 to 3 stages per row, 1 to 38
// output rows per warp, with bias, residual, the norm and SwiGLU x stages between them.
// other_f16: a bf16 chain plus one f16 one-row linear, which the library chosen for the bf16 tiles (one_row_tiles_f16)
// runs out of line.
inline Graph gemv_chain_graph(DType dt, bool other_f16 = false) {
  Graph g("gemv_chain");
  auto tensor = [&](TensorKind kind, const char* name, std::initializer_list<int64_t> dims) {
    return g.add_tensor(kind, name, dt, fixed_shape(dims));
  };
  const TensorKind w = TensorKind::weight;
  const TensorId x = tensor(TensorKind::input, "x", {1, 512});
  const TensorId a = g.add_op("linear", {x, tensor(w, "wa", {1024, 512})}, {}, "a");  // 2 units, 1 stage per row
  const TensorId b = g.add_op("rmsnorm_linear", {a, tensor(w, "nb", {1024}), tensor(w, "wb", {4096, 1024})},
                              {{"eps", 1e-5}}, "b");                                    // 4 units, ~4 stages per warp
  const TensorId c = g.add_op("silu_mul_linear", {b, tensor(w, "wc", {1024, 2048}), tensor(w, "bc", {1024}), a}, {},
                              "c");                                                     // 2 stages per row, residual
  const TensorId d = g.add_op("linear", {c, tensor(w, "wd", {768, 1024})}, {}, "d");  // 1 stage per warp
  const TensorId e = g.add_op("linear", {d, tensor(w, "we", {2000, 768})}, {}, "e");  // 1 unit, 3 stages per row
  const TensorId f = g.add_op("rmsnorm_linear", {c, tensor(w, "nf", {1024}), tensor(w, "wf", {3000, 1024})},
                              {{"eps", 1e-5}}, "f");
  // ~300 rows per tile: warps of ~38 rows store a batch of 32 outputs, then the rest.
  const TensorId h = g.add_op("linear", {a, tensor(w, "wh", {40000, 1024})}, {}, "h");
  g.mark_output(e, "");
  g.mark_output(f, "");
  g.mark_output(h, "");
  if (other_f16) {
    const TensorId x16 = g.add_tensor(TensorKind::input, "x16", DType::f16, fixed_shape({1, 1024}));
    const TensorId w16 = g.add_tensor(w, "w16", DType::f16, fixed_shape({4096, 1024}));
    g.mark_output(g.add_op("linear", {x16, w16}, {}, "y16"), "");
  }
  return g;
}

}  // namespace weft::test
