// Hugging Face config.json -> decoder shape, for the Llama-3.x and Qwen3 layouts, and its errors.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/error.hpp"
#include "models/decoder_graph.hpp"

namespace weft {
namespace {

// The fields of Llama-3.2-1B's config.json that weft reads.
const char* kLlama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
  "intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 128256})";

// ... and of Qwen3-0.6B's.
const char* kQwen = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
  "intermediate_size": 3072, "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "rope_scaling": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 151936})";

// ... and of Qwen3-8B's.
const char* kQwen8B = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
  "intermediate_size": 12288, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
  "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
  "rope_scaling": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 151936})";

// The built-in shapes (`weft example` / `weft checkpoint`, the benchmarks' random models) are the published models':
// every field a config gives, equal (the KV cache length, max_seq, is the built-ins' own: 4096 rows).
TEST(HfConfig, BuiltInShapesAreTheirConfigs) {
  const std::pair<DecoderShape, const char*> cases[] = {
      {llama_3_2_1b_shape(), kLlama}, {qwen3_0_6b_shape(), kQwen}, {qwen3_8b_shape(), kQwen8B}};
  for (const auto& [built_in, config] : cases) {
    const DecoderShape c = decoder_shape_from_hf_config(config);
    SCOPED_TRACE(c.name + " of " + std::to_string(c.layers) + " layers");
    EXPECT_EQ(built_in.name, c.name);
    EXPECT_EQ(built_in.layers, c.layers);
    EXPECT_EQ(built_in.hidden, c.hidden);
    EXPECT_EQ(built_in.q_heads, c.q_heads);
    EXPECT_EQ(built_in.kv_heads, c.kv_heads);
    EXPECT_EQ(built_in.head_dim, c.head_dim);
    EXPECT_EQ(built_in.ffn, c.ffn);
    EXPECT_EQ(built_in.vocab, c.vocab);
    EXPECT_EQ(built_in.qk_norm, c.qk_norm);
    EXPECT_EQ(built_in.tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_DOUBLE_EQ(built_in.rope_theta, c.rope_theta);
    EXPECT_EQ(built_in.rope_scaling, c.rope_scaling);
    EXPECT_DOUBLE_EQ(built_in.rms_eps, c.rms_eps);
    EXPECT_EQ(built_in.dtype, c.dtype);
    if (c.rope_scaling == "llama3") {
      EXPECT_DOUBLE_EQ(built_in.rope_factor, c.rope_factor);
      EXPECT_DOUBLE_EQ(built_in.rope_low_freq_factor, c.rope_low_freq_factor);
      EXPECT_DOUBLE_EQ(built_in.rope_high_freq_factor, c.rope_high_freq_factor);
      EXPECT_EQ(built_in.rope_original_max_position, c.rope_original_max_position);
    }
  }
}

TEST(HfConfig, LlamaAndQwen3) {
  const DecoderShape l = decoder_shape_from_hf_config(kLlama);
  EXPECT_EQ(l.layers, 16);
  EXPECT_EQ(l.hidden, 2048);
  EXPECT_EQ(l.kv_heads, 8);
  EXPECT_EQ(l.head_dim, 64);
  EXPECT_EQ(l.rope_scaling, "llama3");
  EXPECT_DOUBLE_EQ(l.rope_factor, 32.0);
  EXPECT_EQ(l.rope_original_max_position, 8192);
  EXPECT_FALSE(l.qk_norm);
  EXPECT_TRUE(l.tie_word_embeddings);
  EXPECT_EQ(l.max_seq, 131072);
  const DecoderShape q = decoder_shape_from_hf_config(kQwen);
  EXPECT_EQ(q.layers, 28);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_EQ(q.rope_scaling, "none");
  EXPECT_DOUBLE_EQ(q.rms_eps, 1e-6);
  // Both build a decode graph; a tied model has no separate lm_head weight.
  DecoderShape small = q;
  small.layers = 2;
  small.max_seq = 64;
  const Graph g = build_decoder_graph(small);
  EXPECT_NE(g.find_tensor("model.layers.1.self_attn.q_norm.weight"), kNoTensor);
  EXPECT_EQ(g.find_tensor("lm_head.weight"), kNoTensor);
  small.tie_word_embeddings = false;
  EXPECT_NE(build_decoder_graph(small).find_tensor("lm_head.weight"), kNoTensor);
}

// By default both shapes run their norms (the final one too, inside the logits) and SwiGLU inside the linears
// they feed (measured faster for both, docs/perf.md); fuse_linear_inputs = 0 keeps SwiGLU apart from the down
// projection (in the gate/up projection's tiles, unless swiglu_epilogue = 0) and, up to 8 rows
// (norms_in_linears_pay), the norms inside the linears they feed, past them (or with norms_in_linears = 0) as ops
// of their own; norms_in_linears = 1 keeps them inside at any rows.
TEST(HfConfig, DecoderGraphsFuseLinearInputsByDefault) {
  for (const char* config : {kLlama, kQwen}) {
    DecoderShape s = decoder_shape_from_hf_config(config);
    s.layers = 1;
    s.max_seq = 64;
    auto count = [](const Graph& g, const std::string& op) {
      int n = 0;
      for (const Node& node : g.nodes()) n += node.op->name == op;
      return n;
    };
    auto producer = [](const Graph& g, const char* tensor) {
      const TensorId t = g.find_tensor(tensor);
      return t == kNoTensor ? std::string("(no tensor)") : g.nodes()[static_cast<size_t>(g.tensor(t).producer)].op->name;
    };
    const Graph fused = build_decoder_graph(s);
    EXPECT_EQ(count(fused, "rmsnorm_linear"), 3) << s.hidden;
    EXPECT_EQ(count(fused, "rmsnorm"), 0) << s.hidden;
    EXPECT_EQ(count(fused, "silu_mul_linear"), 1) << s.hidden;
    EXPECT_EQ(count(fused, "silu_mul"), 0) << s.hidden;
    EXPECT_EQ(producer(fused, "logits"), "rmsnorm_linear");
    // Unfused for up to 8 rows by default: SwiGLU in the gate/up projection's tiles (linear_silu_mul, where the
    // rows fit one tile) and every norm inside the linear it feeds: the q/k/v projection and the logits
    // (rmsnorm_linear), the gate/up projection (linear_silu_mul's norm weight).
    s.fuse_linear_inputs = 0;
    s.max_batch = 8;
    ASSERT_TRUE(norms_in_linears_pay(8));
    ASSERT_FALSE(norms_in_linears_pay(9));
    ASSERT_TRUE(swiglu_epilogue_pays(s)) << s.hidden;
    const Graph norms_in = build_decoder_graph(s);
    EXPECT_EQ(count(norms_in, "rmsnorm_linear"), 2) << s.hidden;
    EXPECT_EQ(count(norms_in, "rmsnorm"), 0) << s.hidden;
    EXPECT_EQ(count(norms_in, "silu_mul_linear"), 0) << s.hidden;
    EXPECT_EQ(count(norms_in, "linear_silu_mul"), 1) << s.hidden;
    EXPECT_EQ(count(norms_in, "silu_mul"), 0) << s.hidden;
    for (const Node& n : norms_in.nodes())
      if (n.op->name == std::string_view("linear_silu_mul")) {
        ASSERT_EQ(n.inputs.size(), 3u) << s.hidden;
        EXPECT_EQ(n.inputs[2], norms_in.find_tensor("model.layers.0.post_attention_layernorm.weight")) << s.hidden;
      }
    EXPECT_EQ(producer(norms_in, "logits"), "rmsnorm_linear");
    EXPECT_EQ(producer(norms_in, "l0.qkv"), "rmsnorm_linear");
    // Without SwiGLU in its tiles the gate/up projection keeps its norm op (a plain linear takes no norm weight).
    s.swiglu_epilogue = 0;
    const Graph no_epilogue = build_decoder_graph(s);
    EXPECT_EQ(count(no_epilogue, "rmsnorm"), 1) << s.hidden;
    EXPECT_EQ(count(no_epilogue, "silu_mul"), 1) << s.hidden;
    // Past 8 rows, or with norms_in_linears = 0: every norm an op of its own, the final one too.
    s.swiglu_epilogue = -1;
    for (const auto& [rows, norms_in_linears] : {std::pair<int64_t, int>{16, -1}, {8, 0}}) {
      s.max_batch = rows;
      s.norms_in_linears = norms_in_linears;
      ASSERT_TRUE(swiglu_epilogue_pays(s)) << s.hidden;
      const Graph separate = build_decoder_graph(s);
      EXPECT_EQ(count(separate, "rmsnorm_linear"), 0) << s.hidden << " rows " << rows;
      EXPECT_EQ(count(separate, "rmsnorm"), 3) << s.hidden << " rows " << rows;
      EXPECT_EQ(count(separate, "linear_silu_mul"), 1) << s.hidden << " rows " << rows;
      EXPECT_EQ(producer(separate, "logits"), "linear") << s.hidden << " rows " << rows;
    }
    s.max_batch = 32;
    s.norms_in_linears = 1;
    EXPECT_EQ(count(build_decoder_graph(s), "rmsnorm"), 0) << s.hidden << " norms_in_linears 1 at 32 rows";
  }
}

// In the graph of steps of many rows (norms and SwiGLU as separate ops) every layer's attention rotates by one rope
// table per step (the rope_table op, fed by the positions); in the one-row graph, or with rope_table = 0, each
// attention task builds its own.
TEST(HfConfig, DecoderLayersShareOneRopeTable) {
  for (const char* config : {kLlama, kQwen}) {
    DecoderShape s = decoder_shape_from_hf_config(config);
    s.layers = 3;
    s.max_seq = 64;
    s.fuse_linear_inputs = 0;
    const Graph g = build_decoder_graph(s);
    TensorId table = kNoTensor;
    int attentions = 0;
    for (const Node& n : g.nodes()) {
      if (n.op->name == std::string_view("rope_table")) {
        EXPECT_EQ(table, kNoTensor) << "a second rope_table";
        table = n.output;
        EXPECT_EQ(n.inputs[0], g.find_tensor("positions"));
        EXPECT_EQ(n.attrs.at("theta").get<double>(), s.rope_theta);
        EXPECT_EQ(n.attrs.at("head_dim").get<int64_t>(), s.head_dim);
      }
      if (n.op->name != std::string_view("attention_decode_qkv")) continue;
      ++attentions;
      ASSERT_EQ(n.inputs.size(), 7u);
      EXPECT_EQ(n.inputs[6], table) << "attention " << attentions << " rotates by another table";
    }
    EXPECT_NE(table, kNoTensor) << s.hidden;
    EXPECT_EQ(attentions, 3);
    auto tables = [](const Graph& graph) {
      int n = 0;
      for (const Node& node : graph.nodes()) {
        n += node.op->name == std::string_view("rope_table");
        if (node.op->name == std::string_view("attention_decode_qkv") && node.inputs.size() == 7 && node.inputs[6] != kNoTensor)
          n += 100;  // an attention rotating by a table
      }
      return n;
    };
    s.rope_table = 0;
    EXPECT_EQ(tables(build_decoder_graph(s)), 0) << s.hidden;
    s.fuse_linear_inputs = -1;
    s.rope_table = -1;
    EXPECT_EQ(tables(build_decoder_graph(s)), 0) << s.hidden << ": the one-row graph";
    s.rope_table = 1;
    EXPECT_EQ(tables(build_decoder_graph(s)), 301) << s.hidden;
  }
}

// transformers 5 keeps theta and scaling under rope_parameters only.
TEST(HfConfig, RopeParametersOfTransformers5) {
  const char* llama = R"({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "dtype": "bfloat16",
    "vocab_size": 128256, "rope_parameters": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_theta": 500000.0}})";
  const DecoderShape l = decoder_shape_from_hf_config(llama);
  EXPECT_DOUBLE_EQ(l.rope_theta, 500000.0);
  EXPECT_EQ(l.rope_scaling, "llama3");
  EXPECT_DOUBLE_EQ(l.rope_factor, 16.0);
  const char* qwen = R"({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "head_dim": 128,
    "rms_norm_eps": 1e-06, "vocab_size": 151936, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})";
  const DecoderShape q = decoder_shape_from_hf_config(qwen);
  EXPECT_DOUBLE_EQ(q.rope_theta, 1000000.0);
  EXPECT_EQ(q.rope_scaling, "none");
}

TEST(HfConfig, ErrorsNameTheField) {
  auto error_of = [](const std::string& json) {
    try {
      decoder_shape_from_hf_config(json);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string bad = kLlama;
  EXPECT_NE(error_of(bad.replace(bad.find("\"llama\""), 7, "\"gpt2\"")).find("model_type 'gpt2'"), std::string::npos);
  bad = kLlama;
  EXPECT_NE(error_of(bad.replace(bad.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5")).find("not a multiple"),
            std::string::npos);
  bad = kQwen;
  EXPECT_NE(error_of(bad.replace(bad.find("\"vocab_size\""), 12, "\"vocab_sizes\"")).find("'vocab_size' is missing"),
            std::string::npos);
  bad = kQwen;
  EXPECT_NE(error_of(bad.replace(bad.find("\"bfloat16\""), 10, "\"int8\"")).find("torch_dtype 'int8'"), std::string::npos);
  EXPECT_NE(error_of("{").find("does not parse"), std::string::npos);
  bad = kLlama;
  EXPECT_NE(error_of(bad.replace(bad.find("\"llama3\""), 8, "\"yarn\"")).find("rope_scaling type 'yarn'"), std::string::npos);
}

}  // namespace
}  // namespace weft
