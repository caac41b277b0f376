// Tagged hand-offs on the GPU (device/tagged.cuh, WEFT_TAGGED_HANDOFFS=1): batch-1 generation of decoders whose o, gate/up and down projections
// hand over by tagged words gives the same logits, bit for bit, as the same kernel's counters
// (WEFT_TAGGED_HANDOFFS=0), stays within the CPU reference's tolerance, and multi-step launches (the tags of every
// step of one launch) give one launch per step's tokens. Words that never become current are the watchdog's error,
// naming the tensor, and the program runs on after it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "device/task_abi.h"
#include "gpu_test_util.hpp"
#include "models/device_generator.hpp"
#include "models/model_weights.hpp"
#include "pipeline/compile_graph.hpp"
#include "tiny_generation.hpp"

namespace weft {
namespace {

using test::EnvFor;

int64_t tagged_tensors(const Model& m) {
  CompileRequest req;
  req.symbols = SymbolValues(m.graph().symbols().size(), 1);
  return nlohmann::json::parse(compile_graph(m.graph(), req, nullptr).metadata).at("tagged_tensors").get<int64_t>();
}

TEST(GpuTaggedHandoffs, GenerationEqualsTheCountersBitForBit) {
  WEFT_REQUIRE_GPU();
  test::GpuSession session;
  for (const auto& [qwen, ffn] : std::vector<std::pair<bool, int64_t>>{{true, 3072}, {false, 8192}}) {
    test::OneRowModel tm("gpu_tagged", qwen, ffn, 11);
    const char* name = qwen ? "qwen3-shaped" : "llama-shaped";
    auto ref = make_reference_generator(tm.model, false);
    GenerateRequest r = test::tiny_request(1, 24);
    const int64_t vocab = tm.model->shape().vocab;
    std::vector<float> want(static_cast<size_t>(r.steps * vocab)), tagged(want.size()), counters(want.size());
    r.logits = want.data();
    r.forced = ref->generate(r).tokens;  // every run consumes the reference's tokens
    {
      // The counters, whatever the suite runs under (the switch's default is TaggedHandoffs.TheSwitchIsPartOfTheKernel's).
      EnvFor off("WEFT_TAGGED_HANDOFFS", "0");
      EXPECT_EQ(tagged_tensors(*tm.model), 0) << name << ": off";
      auto plain = make_device_generator(tm.model, session.context(), ProgramOptions{});
      r.logits = counters.data();
      plain->generate(r);
    }
    EnvFor on("WEFT_TAGGED_HANDOFFS", "1");
    EXPECT_EQ(tagged_tensors(*tm.model), 6) << name;
    r.logits = tagged.data();
    auto gpu = make_device_generator(tm.model, session.context(), ProgramOptions{});
    gpu->generate(r);
    EXPECT_EQ(tagged, counters) << name << ": the same values stored as words and as bf16";
    for (int64_t j = 0; j < r.steps; ++j)
      EXPECT_LE(test::relative_error(tagged.data() + j * vocab, want.data() + j * vocab, vocab), 2e-2) << name << " step " << j;
    // Multi-step launches (every step's tags within one launch) give one launch per step's tokens, and again.
    GenerateRequest free = test::tiny_request(1, 40);
    const std::vector<int32_t> step = gpu->generate(free).tokens;
    free.multi_step = true;
    for (int rep = 0; rep < 2; ++rep) EXPECT_EQ(gpu->generate(free).tokens, step) << name << " repetition " << rep;
  }
}

// Outputs that carry the previous step's tag (WEFT_TUNE_TAGGED_STALE, a test hook) leave their readers waiting: the
// watchdog ends the kernel with Status::deadlock naming the tagged tensor, and a run without the hook is right again
// (the arena's stale tags cleared with the counters).
TEST(GpuTaggedHandoffs, WordsThatNeverBecomeCurrentAreTheWatchdogsError) {
  WEFT_REQUIRE_GPU();
  test::GpuSession session;
  test::OneRowModel tm("gpu_tagged", true, 3072, 11);
  ProgramOptions o;
  o.watchdog_ms = 200;
  GenerateRequest r = test::tiny_request(1, 3);
  EnvFor on("WEFT_TAGGED_HANDOFFS", "1");
  auto good = make_device_generator(tm.model, session.context(), o);
  const GenerateResult want = good->generate(r);
  {
    EnvFor tune("WEFT_TUNE", std::to_string(WEFT_TUNE_TAGGED_STALE));
    auto stale = make_device_generator(tm.model, session.context(), o);
    try {
      stale->generate(r);
      ADD_FAILURE() << "stale tagged words were not reported";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::deadlock) << e.what();
      EXPECT_NE(std::string(e.what()).find("(a tagged hand-off) to be written this step"), std::string::npos) << e.what();
    }
    auto again = make_device_generator(tm.model, session.context(), o);
    EXPECT_THROW(again->generate(r), Error);
  }
  auto after = make_device_generator(tm.model, session.context(), o);
  EXPECT_EQ(after->generate(r).tokens, want.tokens);
}

}  // namespace
}  // namespace weft
