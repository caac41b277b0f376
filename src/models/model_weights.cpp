#include "models/model_weights.hpp"

#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/half.hpp"

namespace weft {

namespace {

// The checkpoint tensors stacked (by rows) into one fused graph weight, or {name} itself.
std::vector<std::string> sources_of(const std::string& name) {
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = name;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  if (name.find("self_attn.qkv_proj.weight") != std::string::npos)
    return {replace("qkv_proj", "q_proj"), replace("qkv_proj", "k_proj"), replace("qkv_proj", "v_proj")};
  if (name.find("mlp.gate_up_proj.weight") != std::string::npos)
    return {replace("gate_up_proj", "gate_proj"), replace("gate_up_proj", "up_proj")};
  return {name};
}

std::vector<int64_t> concrete(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s) {
    if (!d.is_fixed()) invalid("a weight has a symbolic dim; checkpoint weights have fixed shapes");
    out.push_back(d.value);
  }
  return out;
}

}  // namespace

ModelWeights::ModelWeights(const Graph& g, const Checkpoint& c) {
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const TensorDesc& t = g.tensors()[i];
    if (t.kind != TensorKind::weight) continue;
    ModelWeight w;
    w.tensor = static_cast<TensorId>(i);
    w.dtype = t.type.dtype;
    w.shape = concrete(t.type.shape);
    const auto sources = sources_of(t.name);
    if (sources.size() == 1) {
      const SafetensorEntry& e = c.get(sources[0], w.dtype, w.shape);
      w.data = e.data;
      w.bytes = e.bytes;
    } else {
      // Stacked by rows: each source is [rows_k, cols] with the fused weight's cols; their rows add up.
      int64_t rows = 0;
      std::vector<const SafetensorEntry*> parts;
      for (const std::string& s : sources) {
        const SafetensorEntry* e = c.find(s);
        if (!e) invalid("checkpoint '" + c.dir().string() + "' has no tensor '" + s + "' (part of '" + t.name + "')");
        if (e->shape.size() != 2 || e->shape[1] != w.shape[1])
          invalid("checkpoint tensor '" + s + "' has " + std::to_string(e->shape.size()) +
                  " dims or another column count; expected [rows, " + std::to_string(w.shape[1]) + "]");
        parts.push_back(&c.get(s, w.dtype, e->shape));
        rows += e->shape[0];
      }
      if (rows != w.shape[0])
        invalid("checkpoint tensors for '" + t.name + "' have " + std::to_string(rows) + " rows together; expected " +
                std::to_string(w.shape[0]));
      for (const SafetensorEntry* p : parts) w.owned.insert(w.owned.end(), static_cast<const uint8_t*>(p->data),
                                                            static_cast<const uint8_t*>(p->data) + p->bytes);
      w.data = w.owned.data();
      w.bytes = w.owned.size();
    }
    weights_.push_back(std::move(w));
  }
}

std::vector<Binding> ModelWeights::host_bindings() const {
  std::vector<Binding> out;
  for (const ModelWeight& w : weights_) out.push_back({w.tensor, TensorView{const_cast<void*>(w.data), w.dtype, w.shape, {}}});
  return out;
}

void write_random_checkpoint(const std::filesystem::path& dir, const DecoderShape& s, uint32_t seed, float scale) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<SafetensorToWrite> out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, bool norm) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    SafetensorToWrite t{name, s.dtype, std::move(shape), {}};
    t.bytes.resize(static_cast<size_t>(n) * dtype_size(s.dtype));
    for (int64_t k = 0; k < n; ++k) {
      const float v = norm ? 1.0f + u(rng) : u(rng);
      uint8_t* p = t.bytes.data() + static_cast<size_t>(k) * dtype_size(s.dtype);
      if (s.dtype == DType::f32) {
        std::memcpy(p, &v, 4);
      } else {
        const uint16_t h = s.dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(p, &h, 2);
      }
    }
    out.push_back(std::move(t));
  };
  const int64_t qd = s.q_heads * s.head_dim, kvd = s.kv_heads * s.head_dim;
  add("model.embed_tokens.weight", {s.vocab, s.hidden}, false);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.hidden}, true);
    add(p + "self_attn.q_proj.weight", {qd, s.hidden}, false);
    add(p + "self_attn.k_proj.weight", {kvd, s.hidden}, false);
    add(p + "self_attn.v_proj.weight", {kvd, s.hidden}, false);
    if (s.qk_norm) {
      add(p + "self_attn.q_norm.weight", {s.head_dim}, true);
      add(p + "self_attn.k_norm.weight", {s.head_dim}, true);
    }
    add(p + "self_attn.o_proj.weight", {s.hidden, qd}, false);
    add(p + "post_attention_layernorm.weight", {s.hidden}, true);
    add(p + "mlp.gate_proj.weight", {s.ffn, s.hidden}, false);
    add(p + "mlp.up_proj.weight", {s.ffn, s.hidden}, false);
    add(p + "mlp.down_proj.weight", {s.hidden, s.ffn}, false);
  }
  add("model.norm.weight", {s.hidden}, true);
  if (!s.tie_word_embeddings) add("lm_head.weight", {s.vocab, s.hidden}, false);
  write_safetensors(dir / "model.safetensors", out);

  nlohmann::json cfg = {{"model_type", s.qk_norm ? "qwen3" : "llama"},
                        {"hidden_size", s.hidden},
                        {"intermediate_size", s.ffn},
                        {"num_attention_heads", s.q_heads},
                        {"num_hidden_layers", s.layers},
                        {"num_key_value_heads", s.kv_heads},
                        {"head_dim", s.head_dim},
                        {"max_position_embeddings", s.max_seq},
                        {"rms_norm_eps", s.rms_eps},
                        {"rope_theta", s.rope_theta},
                        {"tie_word_embeddings", s.tie_word_embeddings},
                        {"torch_dtype", s.dtype == DType::bf16 ? "bfloat16" : s.dtype == DType::f16 ? "float16" : "float32"},
                        {"vocab_size", s.vocab}};
  if (s.rope_scaling == "llama3")
    cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", s.rope_factor}, {"low_freq_factor", s.rope_low_freq_factor},
                           {"high_freq_factor", s.rope_high_freq_factor},
                           {"original_max_position_embeddings", s.rope_original_max_position}};
  else if (s.rope_scaling == "linear")
    cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", s.rope_factor}};
  std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";
}

}  // namespace weft
