// Models and greedy generation on the CPU reference: the step schedule (prefill, last prompt token, positions,
// feedback), teacher forcing, and every request / checkpoint error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "graph/op_def.hpp"
#include "models/generation.hpp"
#include "reference/interpreter.hpp"
#include "test_models.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

class GenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("weft_generation_" + std::to_string(::getpid()));
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::shared_ptr<const Model> load(bool qwen, int64_t max_batch = 3) {
    DecoderShape s = test::tiny_decoder(2, 4, 32, qwen);
    s.tie_word_embeddings = qwen;
    write_random_checkpoint(dir, s, 11, 0.1f);
    return std::make_shared<const Model>(dir, ModelOptions{max_batch, 0});
  }
  fs::path dir;
};

// The same decode done by hand with run_reference: prefill positions 0..P-2, then P-1.. with the argmax fed back.
std::vector<int32_t> by_hand(const Model& m, const std::vector<int32_t>& prompt, int64_t batch, int64_t plen, int64_t steps) {
  const Graph& g = m.graph();
  std::vector<HostBinding> bindings = m.weights().host_bindings();
  const auto owned = m.request_tensors(batch);
  std::vector<std::vector<uint8_t>> storage(owned.size());
  for (size_t i = 0; i < owned.size(); ++i) {
    storage[i].assign(owned[i].bytes, 0);
    bindings.push_back({owned[i].tensor, TensorView{storage[i].data(), owned[i].dtype, owned[i].shape, {}}});
  }
  std::vector<int32_t> ids(static_cast<size_t>(batch)), pos(static_cast<size_t>(batch)), next(static_cast<size_t>(batch));
  bindings.push_back({m.input_ids(), TensorView{ids.data(), DType::i32, {batch}, {}}});
  bindings.push_back({m.positions(), TensorView{pos.data(), DType::i32, {batch}, {}}});
  bindings.push_back({m.next_token(), TensorView{next.data(), DType::i32, {batch}, {}}});
  std::vector<int32_t> out(static_cast<size_t>(batch * steps));
  for (int64_t t = 0; t < plen - 1 + steps; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      const auto bi = static_cast<size_t>(b);
      ids[bi] = t < plen ? prompt[static_cast<size_t>(b * plen + t)] : out[static_cast<size_t>(b * steps + t - plen)];
      pos[bi] = static_cast<int32_t>(t);
    }
    run_reference(g, bindings);
    if (t >= plen - 1)
      for (int64_t b = 0; b < batch; ++b) out[static_cast<size_t>(b * steps + t - (plen - 1))] = next[static_cast<size_t>(b)];
  }
  return out;
}

TEST_F(GenerationTest, ReferenceGreedyMatchesADecodeByHand) {
  for (bool qwen : {false, true}) {
    const auto m = load(qwen);
    auto gen = make_reference_generator(m, false);
    EXPECT_STREQ(gen->backend(), "reference");
    GenerateRequest r;
    r.batch = 3;
    r.prompt_len = 4;
    r.steps = 6;
    r.prompt = {1, 2, 3, 4, 9, 8, 7, 6, 100, 200, 300, 400};
    const GenerateResult out = gen->generate(r);
    EXPECT_EQ(out.tokens, by_hand(*m, r.prompt, 3, 4, 6)) << (qwen ? "qwen3" : "llama");
    EXPECT_EQ(out.step_ms.size(), 6u);
    // The rows differ (different prompts), and a second request starts from an empty KV cache.
    EXPECT_EQ(gen->generate(r).tokens, out.tokens);
    r.multi_step = true;  // the reference runs it step by step: same tokens
    EXPECT_EQ(gen->generate(r).tokens, out.tokens);
  }
}

TEST_F(GenerationTest, TeacherForcingFeedsTheGivenTokens) {
  const auto m = load(false);
  auto gen = make_reference_generator(m, false);
  GenerateRequest r;
  r.batch = 2;
  r.prompt_len = 3;
  r.steps = 5;
  r.prompt = {5, 6, 7, 50, 60, 70};
  const int64_t vocab = m->shape().vocab;
  std::vector<float> free_logits(static_cast<size_t>(r.steps * r.batch * vocab));
  r.logits = free_logits.data();
  const GenerateResult free_run = gen->generate(r);
  // Forcing the model's own tokens changes nothing; the logits' argmax is the token.
  r.forced = free_run.tokens;
  std::vector<float> forced_logits(free_logits.size());
  r.logits = forced_logits.data();
  EXPECT_EQ(gen->generate(r).tokens, free_run.tokens);
  EXPECT_EQ(forced_logits, free_logits);
  for (int64_t j = 0; j < r.steps; ++j)
    for (int64_t b = 0; b < r.batch; ++b) {
      const float* row = free_logits.data() + (j * r.batch + b) * vocab;
      EXPECT_EQ(std::max_element(row, row + vocab) - row, free_run.tokens[static_cast<size_t>(b * r.steps + j)]);
    }
  // Forcing other tokens: step 0 is unchanged (it consumes the prompt), step 1 is not.
  for (auto& t : r.forced) t = (t + 1) % static_cast<int32_t>(vocab);
  gen->generate(r);
  const size_t row = static_cast<size_t>(r.batch * vocab);
  EXPECT_TRUE(std::equal(forced_logits.begin(), forced_logits.begin() + static_cast<std::ptrdiff_t>(row), free_logits.begin()));
  EXPECT_FALSE(std::equal(forced_logits.begin() + static_cast<std::ptrdiff_t>(row), forced_logits.begin() + static_cast<std::ptrdiff_t>(2 * row),
                          free_logits.begin() + static_cast<std::ptrdiff_t>(row)));
}

void expect_invalid(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(GenerationTest, BadRequestsAreNamed) {
  const auto m = load(true);
  auto gen = make_reference_generator(m, false);
  auto request = [] {
    GenerateRequest r;
    r.batch = 2;
    r.prompt_len = 2;
    r.steps = 3;
    r.prompt = {1, 2, 3, 4};
    return r;
  };
  GenerateRequest r = request();
  r.batch = 4;
  expect_invalid([&] { gen->generate(r); }, "batch is 4; expected 1..3");
  r = request();
  r.steps = 32;
  expect_invalid([&] { gen->generate(r); }, "max_seq 32");
  r = request();
  r.prompt[3] = 1000;
  expect_invalid([&] { gen->generate(r); }, "prompt[1][1] is 1000; expected a token id in [0, 1000)");
  r = request();
  r.prompt.pop_back();
  expect_invalid([&] { gen->generate(r); }, "prompt has 3 ids");
  r = request();
  r.forced = {1, 2, 3, 4, 5, -1};
  expect_invalid([&] { gen->generate(r); }, "forced[1][2] is -1");
  r = request();
  r.multi_step = true;
  float logits[1];
  r.logits = logits;
  expect_invalid([&] { gen->generate(r); }, "step mode");
  r = request();
  r.steps = 0;
  expect_invalid([&] { gen->generate(r); }, "steps is 0");
}

// Batches whose rows x ffn exceed 32768 run the decoder with SwiGLU apart from the down projection (fused, it is
// recomputed by every column tile: fused_linear_inputs_pay); smaller ones, and models that never reach such
// batches, the fused one. Same tokens either way.
TEST_F(GenerationTest, LargeBatchesRunTheUnfusedGraph) {
  auto count = [](const Graph& g, const std::string& op) {
    int n = 0;
    for (const Node& node : g.nodes()) n += node.op->name == op;
    return n;
  };
  EXPECT_TRUE(fused_linear_inputs_pay(1, 8192));
  EXPECT_TRUE(fused_linear_inputs_pay(4, 8192));
  EXPECT_FALSE(fused_linear_inputs_pay(8, 8192));
  EXPECT_TRUE(fused_linear_inputs_pay(8, 3072));
  EXPECT_FALSE(fused_linear_inputs_pay(16, 3072));
  DecoderShape s = test::tiny_decoder(2, 4, 32, false);
  s.ffn = 8192;
  write_random_checkpoint(dir, s, 11, 0.1f);
  ASSERT_TRUE(fused_linear_supported(s.ffn, s.dtype));
  const Model small(dir, ModelOptions{4, 0}), large(dir, ModelOptions{8, 0});
  EXPECT_EQ(&small.graph_for(4), &small.graph()) << "4 x 8192 rows: fused";
  EXPECT_EQ(&large.graph_for(4), &large.graph());
  const Graph& unfused = large.graph_for(8);
  ASSERT_NE(&unfused, &large.graph());
  EXPECT_EQ(count(large.graph(), "silu_mul_linear"), s.layers);
  EXPECT_EQ(count(unfused, "silu_mul_linear"), 0);
  // SwiGLU inside the gate/up tiles where 8 rows of this K fit one tensor-core tile (swiglu_epilogue_pays).
  DecoderShape at8 = s;
  at8.max_batch = 8;
  const int64_t in_tiles = swiglu_epilogue_pays(at8) ? s.layers : 0;
  EXPECT_EQ(count(unfused, "linear_silu_mul"), in_tiles);
  EXPECT_EQ(count(unfused, "silu_mul"), s.layers - in_tiles);
  // Every norm inside the linear it feeds (norms_in_linears): q/k/v and the logits, gate/up where it takes SwiGLU.
  EXPECT_EQ(count(unfused, "rmsnorm_linear"), s.layers + 1);
  EXPECT_EQ(count(unfused, "rmsnorm"), s.layers - in_tiles);
  // Every tensor a request binds is in both graphs, by name.
  for (const ModelWeight& w : large.weights().weights())
    EXPECT_NE(unfused.find_tensor(large.graph().tensor(w.tensor).name), kNoTensor);
  for (const auto& t : large.request_tensors(8))
    EXPECT_NE(unfused.find_tensor(large.graph().tensor(t.tensor).name), kNoTensor);
  for (const char* io : {"input_ids", "positions", "next_token"}) EXPECT_NE(unfused.find_tensor(io), kNoTensor);
  EXPECT_EQ(large.graph_count(), 2u);
  // A model that reaches 16 rows keeps three graphs: fused up to 4 rows, the norms inside the linears up to 8
  // (norms_in_linears_pay; that graph's batch symbol ends there), the norms as ops of their own past 8.
  const Model wider(dir, ModelOptions{16, 0});
  ASSERT_EQ(wider.graph_count(), 3u);
  for (const auto& [rows, index] : std::vector<std::pair<int64_t, size_t>>{{1, 0}, {4, 0}, {5, 1}, {8, 1}, {9, 2}, {16, 2}}) {
    EXPECT_EQ(wider.graph_index(rows), index) << rows << " rows";
    EXPECT_EQ(&wider.graph_for(rows), &wider.graph_at(index)) << rows << " rows";
  }
  EXPECT_EQ(wider.graph_at(1).symbols().at(0).max, 8);
  EXPECT_EQ(count(wider.graph_at(1), "rmsnorm_linear"), s.layers + 1);
  EXPECT_EQ(count(wider.graph_at(2), "rmsnorm_linear"), 0);
  EXPECT_EQ(count(wider.graph_at(2), "rmsnorm"), 2 * s.layers + 1);
  for (size_t i = 1; i < wider.graph_count(); ++i)
    for (const auto& t : wider.request_tensors(16))
      EXPECT_NE(wider.graph_at(i).find_tensor(wider.graph().tensor(t.tensor).name), kNoTensor) << i;
}

TEST_F(GenerationTest, BadFoldersAreNamed) {
  expect_invalid([&] { Model(dir / "nowhere", ModelOptions{}); }, "config.json");
  load(false);
  expect_invalid([&] { Model(dir, ModelOptions{1, 64}); }, "max_seq 64 exceeds the model's max_position_embeddings 32");
  expect_invalid([&] { Model(dir, ModelOptions{0, 0}); }, "max_batch is 0");
  // A truncated weights file is named.
  const fs::path st = dir / "model.safetensors";
  fs::resize_file(st, fs::file_size(st) - 100);
  try {
    Model(dir, ModelOptions{});
    ADD_FAILURE() << "a truncated checkpoint loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
  // A config that is not a decoder we know is named with its file.
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt2"})";
  expect_invalid([&] { Model(dir, ModelOptions{}); }, "model_type 'gpt2' is not supported");
}

}  // namespace
}  // namespace weft
