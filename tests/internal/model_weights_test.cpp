// A random HF-layout checkpoint written here -> config.json -> decode graph -> weights (q/k/v and gate/up fused)
// -> two decode steps on the CPU reference; and missing or mismatched tensors named in the error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "models/model_weights.hpp"
#include "reference/interpreter.hpp"
#include "test_models.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

class ModelWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("weft-ckpt-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  fs::path dir;
};

TEST_F(ModelWeightsTest, LoadsFusesAndRunsTwoSteps) {
  for (bool qwen : {true, false}) {
    DecoderShape s = test::tiny_decoder(2, 2, 16, qwen);
    s.tie_word_embeddings = qwen;  // one tied, one with its own lm_head
    write_random_checkpoint(dir, s, 3);
    const DecoderShape loaded = decoder_shape_from_hf_config(read(dir / "config.json"));
    EXPECT_EQ(loaded.qk_norm, qwen);
    EXPECT_EQ(loaded.hidden, s.hidden);
    const Graph g = build_decoder_graph(loaded);
    const Checkpoint ckpt(dir);
    const ModelWeights w(g, ckpt);
    size_t weights_in_graph = 0;
    for (const TensorDesc& t : g.tensors()) weights_in_graph += t.kind == TensorKind::weight ? 1 : 0;
    ASSERT_EQ(w.weights().size(), weights_in_graph);
    // The fused projection is q | k | v stacked by rows.
    const TensorId qkv = g.find_tensor("model.layers.1.self_attn.qkv_proj.weight");
    const auto it = std::find_if(w.weights().begin(), w.weights().end(), [&](const ModelWeight& m) { return m.tensor == qkv; });
    ASSERT_NE(it, w.weights().end());
    size_t at = 0;
    for (const char* part : {"q_proj", "k_proj", "v_proj"}) {
      const SafetensorEntry* e = ckpt.find(std::string("model.layers.1.self_attn.") + part + ".weight");
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(it->data) + at, e->data, e->bytes), 0) << part;
      at += e->bytes;
    }
    EXPECT_EQ(at, it->bytes);

    // Two decode steps of a batch of 2 on the reference: the KV cache carries over, tokens stay in range.
    std::vector<HostBinding> bindings = w.host_bindings();
    std::vector<std::vector<uint8_t>> storage;
    std::vector<std::vector<int32_t>> ints;
    ints.push_back({5, 17});
    ints.push_back({0, 3});
    ints.push_back({-1, -1});
    bindings.push_back({g.find_tensor("input_ids"), TensorView{ints[0].data(), DType::i32, {2}, {}}});
    bindings.push_back({g.find_tensor("positions"), TensorView{ints[1].data(), DType::i32, {2}, {}}});
    bindings.push_back({g.find_tensor("next_token"), TensorView{ints[2].data(), DType::i32, {2}, {}}});
    for (const TensorDesc& t : g.tensors()) {
      if (t.kind != TensorKind::state && !(t.is_output && t.name == "logits")) continue;
      std::vector<int64_t> shape = resolve_shape(t.type.shape, SymbolValues{2});
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      storage.emplace_back(static_cast<size_t>(n) * dtype_size(t.type.dtype), 0);
      bindings.push_back({g.find_tensor(t.name), TensorView{storage.back().data(), t.type.dtype, shape, {}}});
    }
    for (int step = 0; step < 2; ++step) {
      run_reference(g, bindings);
      for (int32_t tok : ints[2]) {
        EXPECT_GE(tok, 0);
        EXPECT_LT(tok, s.vocab);
      }
      ints[0] = ints[2];
      ints[1][0] += 1;
      ints[1][1] += 1;
    }
    fs::remove_all(dir);
  }
}

TEST_F(ModelWeightsTest, MissingAndMismatchedTensorsAreNamed) {
  DecoderShape s = test::tiny_decoder(1, 1, 8, false);
  s.tie_word_embeddings = false;
  write_random_checkpoint(dir, s, 4);
  // Drop k_proj from the checkpoint.
  std::vector<SafetensorToWrite> kept;
  {
    const SafetensorsFile f(dir / "model.safetensors");
    for (const SafetensorEntry& e : f.tensors()) {
      if (e.name == "model.layers.0.self_attn.k_proj.weight") continue;
      const auto* p = static_cast<const uint8_t*>(e.data);
      kept.push_back({e.name, e.dtype, e.shape, std::vector<uint8_t>(p, p + e.bytes)});
    }
  }
  write_safetensors(dir / "model.safetensors", kept);
  const Graph g = build_decoder_graph(s);
  try {
    ModelWeights w(g, Checkpoint(dir));
    FAIL() << "a missing tensor was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.0.self_attn.k_proj.weight'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qkv_proj"), std::string::npos) << e.what();
  }
  // A checkpoint from a bigger model: the shape mismatch names the tensor.
  DecoderShape wider = s;
  wider.hidden = 320;
  write_random_checkpoint(dir, wider, 4);
  try {
    ModelWeights w(g, Checkpoint(dir));
    FAIL() << "a wrong shape was not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.embed_tokens.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected [1000, 256]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
