// The weight loader's library ($WEFT_WEIGHT_LOADER=1, device/weight_loader.cuh) on the GPU: batch-1 generation of
// decoders whose projections all stream through the loader's ring (rows of 2 KiB multiples), against the CPU
// reference, one launch per step and multi-step (the loader walking on through the steps' queues).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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
struct LoaderOn : EnvFor {
  LoaderOn() : EnvFor("WEFT_WEIGHT_LOADER", "1") {}
};

TEST(GpuWeightLoader, GenerationMatchesTheReference) {
  WEFT_REQUIRE_GPU();
  test::GpuSession session;
  LoaderOn on;
  for (const auto& [qwen, ffn] : std::vector<std::pair<bool, int64_t>>{{true, 3072}, {false, 8192}}) {
    test::OneRowModel lm("gpu_weight_loader", qwen, ffn, 7);
    const char* name = qwen ? "qwen3-shaped" : "llama-shaped";
    // The kernel the generator compiles links the loader's library (the same request, compiled here).
    CompileRequest req;
    req.symbols = SymbolValues(lm.model->graph().symbols().size(), 1);
    EXPECT_EQ(compile_graph(lm.model->graph(), req, nullptr).device_library, "sm_90a_simt_loader") << name;
    auto gpu = make_device_generator(lm.model, session.context(), ProgramOptions{});
    auto ref = make_reference_generator(lm.model, false);
    GenerateRequest r = test::tiny_request(1, 24);
    const int64_t vocab = lm.model->shape().vocab;
    std::vector<float> want(static_cast<size_t>(r.steps * vocab)), got(want.size());
    r.logits = want.data();
    const GenerateResult ref_run = ref->generate(r);
    r.forced = ref_run.tokens;  // both consume the reference's tokens
    r.logits = got.data();
    gpu->generate(r);
    for (int64_t j = 0; j < r.steps; ++j) {
      const float* w = want.data() + j * vocab;
      const float* g = got.data() + j * vocab;
      EXPECT_LE(test::relative_error(g, w, vocab), 2e-2) << name << " step " << j;
    }
    // Free-running: multi-step launches (the loader's walk crosses the steps) give one launch per step's tokens.
    GenerateRequest free = test::tiny_request(1, 40);
    const GenerateResult step = gpu->generate(free);
    free.multi_step = true;
    EXPECT_EQ(gpu->generate(free).tokens, step.tokens) << name;
    EXPECT_EQ(gpu->generate(free).tokens, step.tokens) << name << ", repeated";
  }
}

// A loader that copies nothing (WEFT_TUNE_LOADER_STALL, a test hook) leaves the op warps waiting on its ring: the
// watchdog turns that into Status::deadlock naming the wait, and the kernel ends (no hang); the next run without it
// is right again.
TEST(GpuWeightLoader, AStalledLoaderIsTheWatchdogsError) {
  WEFT_REQUIRE_GPU();
  test::GpuSession session;
  LoaderOn on;
  test::OneRowModel lm("gpu_weight_loader", true, 3072, 7);
  ProgramOptions o;
  o.watchdog_ms = 200;
  GenerateRequest r = test::tiny_request(1, 3);
  {
    EnvFor tune("WEFT_TUNE", std::to_string(WEFT_TUNE_LOADER_STALL));
    auto stalled = make_device_generator(lm.model, session.context(), o);
    try {
      stalled->generate(r);
      ADD_FAILURE() << "a stalled weight loader was not reported";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::deadlock) << e.what();
      EXPECT_NE(std::string(e.what()).find("waited for the weight loader's ring slot"), std::string::npos) << e.what();
    }
  }
  auto gpu = make_device_generator(lm.model, session.context(), o);
  EXPECT_EQ(gpu->generate(r).tokens.size(), static_cast<size_t>(r.steps));
}

}  // namespace
}  // namespace weft
