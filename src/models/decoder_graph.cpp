#include "models/decoder_graph.hpp"

namespace weft {

DecoderShape llama_3_2_1b_shape() { return DecoderShape{}; }

DecoderShape qwen3_0_6b_shape() {
  DecoderShape s;
  s.name = "qwen3";
  s.layers = 28;
  s.hidden = 1024;
  s.q_heads = 16;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.ffn = 3072;
  s.vocab = 151936;
  s.qk_norm = true;
  s.rope_theta = 1000000.0;
  s.rms_eps = 1e-6;
  return s;
}

Graph build_decoder_graph(const DecoderShape& s) {
  Graph g(s.name);
  const Dim b = Dim::sym(g.declare_symbol("batch", 1, s.max_batch));
  auto weight = [&](const std::string& n, std::initializer_list<int64_t> dims) {
    Shape sh;
    for (int64_t d : dims) sh.push_back(Dim::fixed(d));
    return g.add_tensor(TensorKind::weight, n, s.dtype, sh);
  };
  const int64_t q_width = s.q_heads * s.head_dim, kv_width = s.kv_heads * s.head_dim;
  const TensorId ids = g.add_tensor(TensorKind::input, "input_ids", DType::i32, {b});
  const TensorId pos = g.add_tensor(TensorKind::input, "positions", DType::i32, {b});
  const nlohmann::json eps = {{"eps", s.rms_eps}};
  const nlohmann::json rope = {{"head_dim", s.head_dim}, {"theta", s.rope_theta}};
  const nlohmann::json attn = {{"num_q_heads", s.q_heads}, {"num_kv_heads", s.kv_heads}, {"head_dim", s.head_dim}};
  auto cols = [](int64_t from, int64_t to) { return nlohmann::json{{"axis", -1}, {"start", from}, {"end", to}}; };

  TensorId h = g.add_op("embedding", {weight("model.embed_tokens.weight", {s.vocab, s.hidden}), ids}, {}, "embed");
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string o = "l" + std::to_string(l) + ".";
    const Shape cache{b, Dim::fixed(s.max_seq), Dim::fixed(s.kv_heads), Dim::fixed(s.head_dim)};
    const TensorId kc = g.add_tensor(TensorKind::state, "layers." + std::to_string(l) + ".k_cache", s.dtype, cache);
    const TensorId vc = g.add_tensor(TensorKind::state, "layers." + std::to_string(l) + ".v_cache", s.dtype, cache);
    const TensorId x = g.add_op("rmsnorm", {h, weight(p + "input_layernorm.weight", {s.hidden})}, eps, o + "attn_in");
    const TensorId qkv = g.add_op("linear", {x, weight(p + "self_attn.qkv_proj.weight", {q_width + 2 * kv_width, s.hidden})}, {}, o + "qkv");
    TensorId q = g.add_op("slice", {qkv}, cols(0, q_width), o + "q");
    TensorId k = g.add_op("slice", {qkv}, cols(q_width, q_width + kv_width), o + "k");
    const TensorId v = g.add_op("slice", {qkv}, cols(q_width + kv_width, q_width + 2 * kv_width), o + "v");
    if (s.qk_norm) {
      nlohmann::json hn = eps;
      hn["head_dim"] = s.head_dim;
      q = g.add_op("head_rmsnorm", {q, weight(p + "self_attn.q_norm.weight", {s.head_dim})}, hn, o + "q_norm");
      k = g.add_op("head_rmsnorm", {k, weight(p + "self_attn.k_norm.weight", {s.head_dim})}, hn, o + "k_norm");
    }
    q = g.add_op("rope", {q, pos}, rope, o + "q_rot");
    k = g.add_op("rope", {k, pos}, rope, o + "k_rot");
    const TensorId a = g.add_op("attention_decode", {q, k, v, kc, vc, pos}, attn, o + "attn");
    h = g.add_op("linear", {a, weight(p + "self_attn.o_proj.weight", {s.hidden, q_width}), kNoTensor, h}, {}, o + "h_attn");
    const TensorId y = g.add_op("rmsnorm", {h, weight(p + "post_attention_layernorm.weight", {s.hidden})}, eps, o + "mlp_in");
    const TensorId gu = g.add_op("linear", {y, weight(p + "mlp.gate_up_proj.weight", {2 * s.ffn, s.hidden})}, {}, o + "gate_up");
    const TensorId act = g.add_op("silu_mul", {gu}, {}, o + "act");
    h = g.add_op("linear", {act, weight(p + "mlp.down_proj.weight", {s.hidden, s.ffn}), kNoTensor, h}, {}, o + "h_mlp");
  }
  const TensorId nf = g.add_op("rmsnorm", {h, weight("model.norm.weight", {s.hidden})}, eps, "final_norm");
  const TensorId logits = g.add_op("linear", {nf, weight("lm_head.weight", {s.vocab, s.hidden})}, {}, "logits");
  g.mark_output(logits, "");
  g.mark_output(g.add_op("argmax", {logits}, {{"dtype", "i32"}}, "next_token"), "");
  return g;
}

}  // namespace weft
