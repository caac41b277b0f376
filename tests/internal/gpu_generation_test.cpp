// Generation on the GPU against the CPU reference (logits and tokens), one launch per step against the
// multi-step launch (identical tokens), and Program::run_loop against separate runs (identical KV caches).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "gpu_test_util.hpp"
#include "lower/task_graph.hpp"
#include "models/device_generator.hpp"
#include "tiny_generation.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;
using test::DeviceTensor;
using test::GpuSession;

using test::TinyModel;

GenerateRequest request(int64_t batch, int64_t steps) { return test::tiny_request(batch, steps); }

TEST(GpuGeneration, MatchesTheReferenceTeacherForced) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  // The third model has an FFN of 8192: batch 8 and 16 run its batched graphs on the GPU (at 8 with the norms inside
  // the linears they feed, at 16 as ops of their own and with a chunked down projection), against the fused
  // reference.
  for (int variant : {0, 1, 2}) {
    const bool qwen = variant == 1;
    TinyModel tm(qwen, 2, variant == 2 ? 8192 : 0);
    if (variant == 2) {
      ASSERT_EQ(tm.model->graph_index(8), 1u);
      ASSERT_EQ(tm.model->graph_index(16), 2u);
    }
    auto gpu = make_device_generator(tm.model, session.context(), ProgramOptions{});
    auto ref = make_reference_generator(tm.model, false);
    for (int64_t batch : variant == 2 ? std::vector<int64_t>{1, 8, 16} : std::vector<int64_t>{1, 3}) {
      GenerateRequest r = request(batch, 12);
      const int64_t vocab = tm.model->shape().vocab;
      std::vector<float> want(static_cast<size_t>(r.steps * batch * vocab)), got(want.size());
      r.logits = want.data();
      const GenerateResult ref_run = ref->generate(r);
      r.forced = ref_run.tokens;  // both consume the reference's tokens
      r.logits = got.data();
      const GenerateResult gpu_run = gpu->generate(r);
      for (int64_t j = 0; j < r.steps; ++j)
        for (int64_t b = 0; b < batch; ++b) {
          const float* w = want.data() + (j * batch + b) * vocab;
          const float* g = got.data() + (j * batch + b) * vocab;
          double num = 0, den = 0;
          for (int64_t v = 0; v < vocab; ++v) {
            num += (double(g[v]) - w[v]) * (double(g[v]) - w[v]);
            den += double(w[v]) * w[v];
          }
          EXPECT_LE(std::sqrt(num / den), 2e-2) << (variant == 2 ? "llama ffn 8192" : qwen ? "qwen3" : "llama") << " batch " << batch << " step " << j << " row " << b;
          // The argmax agrees wherever the reference's top-2 gap is clear.
          std::vector<float> sorted(w, w + vocab);
          std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
          const auto [lo, hi] = std::minmax_element(w, w + vocab);
          if (sorted[0] - sorted[1] > 0.01f * (*hi - *lo)) {
            EXPECT_EQ(gpu_run.tokens[static_cast<size_t>(b * r.steps + j)], ref_run.tokens[static_cast<size_t>(b * r.steps + j)])
                << "step " << j << " row " << b;
          }
        }
      EXPECT_GT(gpu_run.decode_ms, 0.0);
    }
  }
}

TEST(GpuGeneration, MultiStepLaunchEqualsOneLaunchPerStep) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  TinyModel tm(true, 3);
  auto gpu = make_device_generator(tm.model, session.context(), ProgramOptions{});
  for (int64_t batch : {1, 4}) {
    for (int64_t steps : {1, 7, 40}) {
      GenerateRequest r = request(batch, steps);
      const GenerateResult step = gpu->generate(r);
      r.multi_step = true;
      const GenerateResult loop = gpu->generate(r);
      EXPECT_EQ(loop.tokens, step.tokens) << "batch " << batch << " steps " << steps;
      EXPECT_EQ(gpu->generate(r).tokens, step.tokens) << "a repeated multi-step run";
      ASSERT_EQ(loop.step_ms.size(), static_cast<size_t>(steps));
    }
  }
  // The unfused graph's multi-step launch (its feedback tensors looked up by name).
  TinyModel wide(false, 2, 8192);
  auto unfused = make_device_generator(wide.model, session.context(), ProgramOptions{});
  GenerateRequest r = request(8, 7);
  const GenerateResult step = unfused->generate(r);
  r.multi_step = true;
  EXPECT_EQ(unfused->generate(r).tokens, step.tokens) << "unfused graph, batch 8";
}

// A KV cache longer than an attention tile holds whole (attention_whole_timesteps) splits each tile over its
// timesteps; the device generator then runs every launch whose positions all lie below that on a twin program with
// no split. Across the switch (positions 0 .. whole + 23) the logits follow the CPU reference, step mode's tokens are
// those of a generator that always runs the split program (ProgramOptions::attention_split: below the switch the
// split program's part 0 attends whole, with the same arithmetic), and so are the multi-step launch's (all of it on
// the split program: its last position is past the switch).
TEST(GpuGeneration, RunsUnsplitBelowTheAttentionSplit) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  const fs::path dir = fs::temp_directory_path() / ("weft_gpu_generation_split_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const DecoderShape s = test::tiny_decoder(2, 1, 1024, true);
  write_random_checkpoint(dir, s, 7, 0.1f);
  {
    auto model = std::make_shared<const Model>(dir, ModelOptions{1, 0});
    const int64_t whole = attention_whole_timesteps(s.head_dim, s.q_heads / s.kv_heads, s.dtype);
    ASSERT_GT(whole, 0);
    ASSERT_GT(model->shape().max_seq, whole) << "the test's cache must split";
    ProgramOptions split_only;
    split_only.attention_split = WEFT_ATTN_MAX_SPLIT;
    auto gpu = make_device_generator(model, session.context(), ProgramOptions{});
    auto split = make_device_generator(model, session.context(), split_only);
    auto ref = make_reference_generator(model, false);
    GenerateRequest r = request(1, whole + 20);
    const int64_t vocab = model->shape().vocab;
    std::vector<float> want(static_cast<size_t>(r.steps * vocab)), got(want.size());
    r.logits = want.data();
    const GenerateResult ref_run = ref->generate(r);
    r.forced = ref_run.tokens;
    r.logits = got.data();
    gpu->generate(r);
    for (int64_t j = 0; j < r.steps; ++j)
      EXPECT_LE(test::relative_error(got.data() + j * vocab, want.data() + j * vocab, vocab), 2e-2) << "step " << j;
    r.forced.clear();
    r.logits = nullptr;
    const GenerateResult mixed = gpu->generate(r);
    EXPECT_EQ(mixed.tokens, split->generate(r).tokens);
    r.multi_step = true;
    EXPECT_EQ(gpu->generate(r).tokens, mixed.tokens);
  }
  fs::remove_all(dir);
}

TEST(GpuGeneration, RunLoopLeavesTheSameStateAsSeparateRuns) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  TinyModel tm(false);
  const Model& m = *tm.model;
  const Graph& g = m.graph();
  const int64_t batch = 2, steps = 9;
  Program program(session.context(), g, ProgramOptions{});
  // Two sets of bindings that differ only in their KV caches and token buffers.
  std::vector<DeviceTensor> weights;
  std::vector<Binding> base;
  for (const ModelWeight& w : m.weights().weights()) {
    weights.emplace_back(w.bytes);
    weights.back().upload(std::vector<uint8_t>(static_cast<const uint8_t*>(w.data), static_cast<const uint8_t*>(w.data) + w.bytes));
    base.push_back({w.tensor, TensorView{weights.back().data(), w.dtype, w.shape, {}}});
  }
  struct Run {
    std::vector<DeviceTensor> states;
    std::vector<Binding> bindings;
  };
  auto make_run = [&](int32_t first_pos) {
    Run run;
    run.bindings = base;
    for (const Model::RequestTensor& t : m.request_tensors(batch)) {
      run.states.emplace_back(t.bytes);
      run.states.back().fill(0);
      run.bindings.push_back({t.tensor, TensorView{run.states.back().data(), t.dtype, t.shape, {}}});
    }
    for (TensorId id : {m.input_ids(), m.positions(), m.next_token()}) {
      run.states.emplace_back(batch * sizeof(int32_t));
      run.bindings.push_back({id, TensorView{run.states.back().data(), DType::i32, {batch}, {}}});
    }
    const auto n = run.states.size();
    run.states[n - 3].upload({3, 0, 0, 0, 44, 0, 0, 0});  // ids 3 and 44
    std::vector<uint8_t> pos(8, 0);
    pos[0] = pos[4] = static_cast<uint8_t>(first_pos);
    run.states[n - 2].upload(pos);
    return run;
  };
  // Separate runs, the token fed back by the host.
  Run separate = make_run(2);
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < steps; ++s) {
    program.run(separate.bindings, nullptr);
    program.synchronize(nullptr);
    const auto n = separate.states.size();
    const std::vector<uint8_t> next = separate.states[n - 1].download();
    separate.states[n - 3].upload(next);
    std::vector<uint8_t> pos = separate.states[n - 2].download();
    pos[0] = pos[4] = static_cast<uint8_t>(pos[0] + 1);
    separate.states[n - 2].upload(pos);
    for (int b = 0; b < batch; ++b) tokens.push_back(reinterpret_cast<const int32_t*>(next.data())[b]);
  }
  // One launch.
  Run looped = make_run(2);
  DeviceTensor history(static_cast<size_t>(steps * batch) * sizeof(int32_t));
  LoopRequest loop;
  loop.steps = static_cast<int32_t>(steps);
  loop.feedback_output = m.next_token();
  loop.feedback_input = m.input_ids();
  loop.counter_input = m.positions();
  loop.history = reinterpret_cast<CUdeviceptr>(history.data());
  program.run_loop(looped.bindings, loop, nullptr);
  program.synchronize(nullptr);
  const std::vector<uint8_t> h = history.download();
  EXPECT_EQ(std::vector<int32_t>(reinterpret_cast<const int32_t*>(h.data()), reinterpret_cast<const int32_t*>(h.data()) + steps * batch), tokens);
  // Every state, the last logits and the last token are bit-identical; the bound inputs are untouched.
  for (size_t i = 0; i + 3 < looped.states.size(); ++i)
    EXPECT_EQ(looped.states[i].download(), separate.states[i].download()) << g.tensor(looped.bindings[base.size() + i].tensor).name;
  const auto n = looped.states.size();
  EXPECT_EQ(looped.states[n - 1].download(), separate.states[n - 1].download());
  EXPECT_EQ(looped.states[n - 3].download(), (std::vector<uint8_t>{3, 0, 0, 0, 44, 0, 0, 0}));

  // A loop whose feedback is not an i32 graph input/output is refused before launching.
  LoopRequest bad = loop;
  bad.feedback_output = m.logits();
  try {
    program.run_loop(looped.bindings, bad, nullptr);
    ADD_FAILURE() << "a bf16 feedback output was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'logits' is bf16; expected i32"), std::string::npos) << e.what();
  }
  bad = loop;
  bad.steps = 0;
  EXPECT_THROW(program.run_loop(looped.bindings, bad, nullptr), Error);

  // The watchdog also ends a stuck multi-step launch, and the GPU stays usable.
  ProgramOptions o;
  o.watchdog_ms = 300;
  Program broken(session.context(), g, o);
  broken.break_task_for_testing(0);
  broken.run_loop(looped.bindings, loop, nullptr);
  try {
    broken.synchronize(nullptr);
    ADD_FAILURE() << "a stuck multi-step launch was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::deadlock) << e.what();
  }
  program.run_loop(looped.bindings, loop, nullptr);
  program.synchronize(nullptr);
  EXPECT_EQ(history.download(), h);
}

}  // namespace
}  // namespace weft
