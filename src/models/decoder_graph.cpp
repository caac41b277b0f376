#include "models/decoder_graph.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "device/config.cuh"

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
  s.rope_scaling = "none";
  s.rms_eps = 1e-6;
  return s;
}

DecoderShape qwen3_8b_shape() {
  DecoderShape s = qwen3_0_6b_shape();
  s.layers = 36;
  s.hidden = 4096;
  s.q_heads = 32;
  s.ffn = 12288;
  s.tie_word_embeddings = false;
  return s;
}

DecoderShape tiny_decoder_shape(bool qwen3) {
  DecoderShape s = qwen3 ? qwen3_0_6b_shape() : llama_3_2_1b_shape();
  s.layers = 2;
  s.hidden = 256;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.ffn = 512;
  s.vocab = 2048;
  s.max_seq = 1024;
  return s;
}

DecoderShape decoder_shape_from_hf_config(const std::string& config_json) {
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::parse_error& e) {
    invalid(std::string("config.json does not parse: ") + e.what());
  }
  if (!c.is_object()) invalid("config.json is not a JSON object");
  auto num = [&](const char* key) -> double {
    if (!c.contains(key) || !c[key].is_number()) invalid(std::string("config.json: '") + key + "' is missing or not a number");
    return c[key].get<double>();
  };
  auto count = [&](const char* key) -> int64_t {
    const double v = num(key);
    if (v < 1 || v != static_cast<double>(static_cast<int64_t>(v)))
      invalid(std::string("config.json: '") + key + "' is " + c[key].dump() + "; expected a positive integer");
    return static_cast<int64_t>(v);
  };
  const std::string type = c.contains("model_type") && c["model_type"].is_string() ? c["model_type"].get<std::string>() : "";
  DecoderShape s = type == "qwen3" ? qwen3_0_6b_shape() : llama_3_2_1b_shape();
  if (type != "llama" && type != "qwen3") invalid("config.json: model_type '" + type + "' is not supported; expected 'llama' or 'qwen3'");
  s.name = type;
  s.layers = count("num_hidden_layers");
  s.hidden = count("hidden_size");
  s.q_heads = count("num_attention_heads");
  s.kv_heads = c.contains("num_key_value_heads") ? count("num_key_value_heads") : s.q_heads;
  s.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? count("head_dim") : s.hidden / s.q_heads;
  if (!c.contains("head_dim") && s.hidden % s.q_heads != 0)
    invalid("config.json: hidden_size " + std::to_string(s.hidden) + " is not a multiple of num_attention_heads " + std::to_string(s.q_heads));
  if (s.q_heads % s.kv_heads != 0)
    invalid("config.json: num_attention_heads " + std::to_string(s.q_heads) + " is not a multiple of num_key_value_heads " +
            std::to_string(s.kv_heads));
  s.ffn = count("intermediate_size");
  s.vocab = count("vocab_size");
  s.rms_eps = num("rms_norm_eps");
  // transformers 5 writes rope settings (theta included) under rope_parameters; older ones at the top level.
  const nlohmann::json* params = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? &c["rope_parameters"] : nullptr;
  s.rope_theta = c.contains("rope_theta") ? num("rope_theta") : 10000.0;
  if (!c.contains("rope_theta") && params && params->contains("rope_theta")) {
    if (!(*params)["rope_theta"].is_number()) invalid("config.json: 'rope_parameters.rope_theta' is not a number");
    s.rope_theta = (*params)["rope_theta"].get<double>();
  }
  s.qk_norm = type == "qwen3";
  s.tie_word_embeddings = c.value("tie_word_embeddings", false);
  if (c.contains("max_position_embeddings")) s.max_seq = count("max_position_embeddings");
  const std::string dtype = c.value("torch_dtype", c.value("dtype", std::string("bfloat16")));
  if (dtype == "bfloat16") s.dtype = DType::bf16;
  else if (dtype == "float16") s.dtype = DType::f16;
  else if (dtype == "float32") s.dtype = DType::f32;
  else invalid("config.json: torch_dtype '" + dtype + "' is not supported; expected bfloat16, float16 or float32");
  s.rope_scaling = "none";
  const nlohmann::json* scaling = c.contains("rope_scaling") && c["rope_scaling"].is_object() ? &c["rope_scaling"] : params;
  if (scaling) {
    const auto& r = *scaling;
    const std::string kind = r.value("rope_type", r.value("type", std::string("default")));
    if (kind == "llama3") {
      s.rope_scaling = "llama3";
      s.rope_factor = r.value("factor", 8.0);
      s.rope_low_freq_factor = r.value("low_freq_factor", 1.0);
      s.rope_high_freq_factor = r.value("high_freq_factor", 4.0);
      s.rope_original_max_position = r.value("original_max_position_embeddings", int64_t{8192});
    } else if (kind == "linear") {
      s.rope_scaling = "linear";
      s.rope_factor = r.value("factor", 1.0);
    } else if (kind != "default") {
      invalid("config.json: rope_scaling type '" + kind + "' is not supported; expected llama3, linear or default");
    }
  }
  return s;
}

bool fused_linear_inputs_pay(int64_t rows, int64_t ffn) { return rows * ffn <= 32768; }

bool norms_in_linears_pay(int64_t rows) { return rows <= 8; }

bool swiglu_epilogue_pays(const DecoderShape& s) {
  const int64_t esize = static_cast<int64_t>(dtype_size(s.dtype));
  const int64_t rows = std::min<int64_t>(s.max_batch, WEFT_MMA_MAX_ROWS);
  return esize == 2 && s.hidden % WEFT_MMA_K_MULTIPLE == 0 &&
         rows <= WEFT_MMA_ROWS_FIT_IN(int64_t{WEFT_SMEM_BYTES_WIDE}, s.hidden, esize);
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
  nlohmann::json rope = {{"head_dim", s.head_dim}, {"theta", s.rope_theta}, {"scaling", s.rope_scaling}};
  if (s.rope_scaling != "none") rope["factor"] = s.rope_factor;
  if (s.rope_scaling == "llama3") {
    rope["low_freq_factor"] = s.rope_low_freq_factor;
    rope["high_freq_factor"] = s.rope_high_freq_factor;
    rope["original_max_position"] = s.rope_original_max_position;
  }
  const nlohmann::json attn = {{"num_q_heads", s.q_heads}, {"num_kv_heads", s.kv_heads}, {"head_dim", s.head_dim}};
  auto cols = [](int64_t from, int64_t to) { return nlohmann::json{{"axis", -1}, {"start", from}, {"end", to}}; };

  // A norm or SwiGLU feeding a linear may run inside the linear's tiles (see DecoderShape::fuse_linear_inputs).
  const bool wanted = s.fuse_linear_inputs != 0;
  const bool fuse = wanted && fused_linear_supported(s.hidden, s.dtype) && fused_linear_supported(s.ffn, s.dtype);
  // Unfused, SwiGLU may run inside the gate/up projection's tiles instead (DecoderShape::swiglu_epilogue).
  const bool swiglu = s.swiglu_epilogue > 0 || (s.swiglu_epilogue < 0 && swiglu_epilogue_pays(s));
  // Unfused, the q/k/v projection, the gate/up projection where it takes SwiGLU too, and the logits may still take
  // their norms (DecoderShape::norms_in_linears).
  const bool norms_wanted = s.norms_in_linears > 0 || (s.norms_in_linears < 0 && norms_in_linears_pay(s.max_batch));
  const bool norm_in = fuse || (norms_wanted && fused_linear_supported(s.hidden, s.dtype));
  // cos / sin at each row's position, for every layer's attention (DecoderShape::rope_table).
  TensorId rope_tab = kNoTensor;
  if (s.fuse_attention && (s.rope_table > 0 || (s.rope_table < 0 && !fuse)))
    rope_tab = g.add_op("rope_table", {pos}, rope, "rope_table");
  const TensorId embed = weight("model.embed_tokens.weight", {s.vocab, s.hidden});
  TensorId h = g.add_op("embedding", {embed, ids}, {}, "embed");
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::string o = "l" + std::to_string(l) + ".";
    const Shape cache{b, Dim::fixed(s.max_seq), Dim::fixed(s.kv_heads), Dim::fixed(s.head_dim)};
    const TensorId kc = g.add_tensor(TensorKind::state, "layers." + std::to_string(l) + ".k_cache", s.dtype, cache);
    const TensorId vc = g.add_tensor(TensorKind::state, "layers." + std::to_string(l) + ".v_cache", s.dtype, cache);
    const TensorId in_norm = weight(p + "input_layernorm.weight", {s.hidden});
    const TensorId qkv_w = weight(p + "self_attn.qkv_proj.weight", {q_width + 2 * kv_width, s.hidden});
    const TensorId qkv = norm_in ? g.add_op("rmsnorm_linear", {h, in_norm, qkv_w}, eps, o + "qkv")
                              : g.add_op("linear", {g.add_op("rmsnorm", {h, in_norm}, eps, o + "attn_in"), qkv_w}, {}, o + "qkv");
    const TensorId q_norm = s.qk_norm ? weight(p + "self_attn.q_norm.weight", {s.head_dim}) : kNoTensor;
    const TensorId k_norm = s.qk_norm ? weight(p + "self_attn.k_norm.weight", {s.head_dim}) : kNoTensor;
    TensorId a;
    if (s.fuse_attention) {
      nlohmann::json fused = attn;
      fused.update(rope);
      fused["eps"] = s.rms_eps;
      a = g.add_op("attention_decode_qkv", {qkv, kc, vc, pos, q_norm, k_norm, rope_tab}, fused, o + "attn");
    } else {
      TensorId q = g.add_op("slice", {qkv}, cols(0, q_width), o + "q");
      TensorId k = g.add_op("slice", {qkv}, cols(q_width, q_width + kv_width), o + "k");
      const TensorId v = g.add_op("slice", {qkv}, cols(q_width + kv_width, q_width + 2 * kv_width), o + "v");
      if (s.qk_norm) {
        nlohmann::json hn = eps;
        hn["head_dim"] = s.head_dim;
        q = g.add_op("head_rmsnorm", {q, q_norm}, hn, o + "q_norm");
        k = g.add_op("head_rmsnorm", {k, k_norm}, hn, o + "k_norm");
      }
      q = g.add_op("rope", {q, pos}, rope, o + "q_rot");
      k = g.add_op("rope", {k, pos}, rope, o + "k_rot");
      a = g.add_op("attention_decode", {q, k, v, kc, vc, pos}, attn, o + "attn");
    }
    h = g.add_op("linear", {a, weight(p + "self_attn.o_proj.weight", {s.hidden, q_width}), kNoTensor, h}, {}, o + "h_attn");
    const TensorId post_norm = weight(p + "post_attention_layernorm.weight", {s.hidden});
    const TensorId gu_w = weight(p + "mlp.gate_up_proj.weight", {2 * s.ffn, s.hidden});
    const TensorId down_w = weight(p + "mlp.down_proj.weight", {s.hidden, s.ffn});
    if (fuse) {
      const TensorId gu = g.add_op("rmsnorm_linear", {h, post_norm, gu_w}, eps, o + "gate_up");
      h = g.add_op("silu_mul_linear", {gu, down_w, kNoTensor, h}, {}, o + "h_mlp");
    } else {
      TensorId act;
      if (swiglu && norm_in) {
        act = g.add_op("linear_silu_mul", {h, gu_w, post_norm}, eps, o + "gate_up_act");
      } else {
        const TensorId mlp_in = g.add_op("rmsnorm", {h, post_norm}, eps, o + "mlp_in");
        act = swiglu ? g.add_op("linear_silu_mul", {mlp_in, gu_w}, {}, o + "gate_up_act")
                     : g.add_op("silu_mul", {g.add_op("linear", {mlp_in, gu_w}, {}, o + "gate_up")}, {}, o + "act");
      }
      h = g.add_op("linear", {act, down_w, kNoTensor, h}, {}, o + "h_mlp");
    }
  }
  const TensorId final_norm = weight("model.norm.weight", {s.hidden});
  const TensorId lm_head = s.tie_word_embeddings ? embed : weight("lm_head.weight", {s.vocab, s.hidden});
  // Fused, the final norm runs in every logits tile instead of as a one-task op of its own with an event
  // boundary on each side (~5 us of a decode step's critical path).
  const TensorId logits = norm_in ? g.add_op("rmsnorm_linear", {h, final_norm, lm_head}, eps, "logits")
                               : g.add_op("linear", {g.add_op("rmsnorm", {h, final_norm}, eps, "final_norm"), lm_head},
                                          {}, "logits");
  g.mark_output(logits, "");
  g.mark_output(g.add_op("argmax", {logits}, {{"dtype", "i32"}}, "next_token"), "");
  return g;
}

}  // namespace weft
