// Resident multi-step runs (LoopRequest::on_pass, HostGate): the kernel hands the host every step's tokens and
// waits for its answer. Tokens equal one launch per step's; the host sees each step once and in order, can stop
// the run early or replace the next step's input (teacher forcing), and a host that does not answer in time is
// stopped by the watchdog; after each of these the program runs on correctly.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "gpu_test_util.hpp"
#include "models/device_generator.hpp"
#include "tiny_generation.hpp"

namespace weft {
namespace {

using test::GpuSession;

GenerateRequest request(int64_t batch, int64_t steps) { return test::tiny_request(batch, steps); }

// A three-layer tiny Qwen3 and a GPU generator for it (with the given watchdog; 0: the default).
class GpuResidentLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!cuda_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    session_ = std::make_unique<GpuSession>();
    model_ = std::make_unique<test::TinyModel>(true, 3);
  }
  std::unique_ptr<Generator> generator(int32_t watchdog_ms = 0) {
    ProgramOptions o;
    o.watchdog_ms = watchdog_ms;
    return make_device_generator(model_->model, session_->context(), o);
  }
  std::unique_ptr<GpuSession> session_;
  std::unique_ptr<test::TinyModel> model_;
};

// The tokens the host was handed, [batch][steps] like GenerateResult::tokens, -1 where it saw none.
struct Seen {
  int64_t batch, steps;
  std::vector<int32_t> tokens;
  std::vector<int64_t> order;
  Seen(int64_t b, int64_t s) : batch(b), steps(s), tokens(static_cast<size_t>(b * s), -1) {}
  StepCallback record(int64_t stop_after = -1) {
    return [this, stop_after](int64_t step, const int32_t* t, int64_t n) {
      EXPECT_EQ(n, batch);
      order.push_back(step);
      for (int64_t b = 0; b < n; ++b) tokens[static_cast<size_t>(b * steps + step)] = t[b];
      return step != stop_after;
    };
  }
};

TEST_F(GpuResidentLoop, HandsEveryStepToTheHostAndEqualsOneLaunchPerStep) {
  auto gpu = generator();
  for (int64_t batch : {1, 4}) {
    for (int64_t steps : {1, 2, 7, 40}) {
      GenerateRequest r = request(batch, steps);
      const GenerateResult step = gpu->generate(r);
      r.multi_step = true;
      Seen seen(batch, steps);
      r.on_step = seen.record();
      const GenerateResult resident = gpu->generate(r);
      EXPECT_EQ(resident.tokens, step.tokens) << "batch " << batch << " steps " << steps;
      EXPECT_EQ(resident.steps_done, steps);
      EXPECT_EQ(seen.tokens, step.tokens) << "what the host was handed, batch " << batch << " steps " << steps;
      std::vector<int64_t> in_order(static_cast<size_t>(steps));
      for (int64_t j = 0; j < steps; ++j) in_order[static_cast<size_t>(j)] = j;
      EXPECT_EQ(seen.order, in_order);
      r.on_step = nullptr;
      EXPECT_EQ(gpu->generate(r).tokens, step.tokens) << "the plain multi-step launch after a resident one";
    }
  }
}

TEST_F(GpuResidentLoop, StopsWhereTheHostSaysAndRunsOnAfterwards) {
  auto gpu = generator();
  const int64_t batch = 2, steps = 12;
  GenerateRequest r = request(batch, steps);
  const GenerateResult full = gpu->generate(r);
  for (int64_t stop : {0, 4, 10}) {
    for (bool multi : {true, false}) {
      r.multi_step = multi;
      Seen seen(batch, steps);
      r.on_step = seen.record(stop);
      const GenerateResult cut = gpu->generate(r);
      EXPECT_EQ(cut.steps_done, stop + 1) << (multi ? "resident" : "step mode") << ", stop after step " << stop;
      EXPECT_EQ(seen.order.size(), static_cast<size_t>(stop + 1));
      EXPECT_EQ(cut.step_ms.size(), static_cast<size_t>(stop + 1));
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < steps; ++j) {
          const size_t i = static_cast<size_t>(b * steps + j);
          EXPECT_EQ(cut.tokens[i], j <= stop ? full.tokens[i] : -1) << "row " << b << " step " << j << ", stop after " << stop;
        }
      // The events, barrier and gate counters stay consistent: every mode runs on and agrees.
      r.on_step = nullptr;
      EXPECT_EQ(gpu->generate(r).tokens, full.tokens) << "after a stop at step " << stop;
      Seen again(batch, steps);
      r.on_step = again.record();
      r.multi_step = true;
      EXPECT_EQ(gpu->generate(r).tokens, full.tokens) << "resident after a stop at step " << stop;
    }
  }
}

TEST_F(GpuResidentLoop, ForcedTokensReplaceTheFeedbackAtTheGate) {
  auto gpu = generator();
  for (int64_t batch : {1, 3}) {
    const int64_t steps = 9;
    GenerateRequest r = request(batch, steps);
    for (int64_t i = 0; i < batch * steps; ++i) r.forced.push_back(static_cast<int32_t>((i * 53 + 7) % 900));
    const GenerateResult step = gpu->generate(r);
    r.multi_step = true;
    const GenerateResult resident = gpu->generate(r);
    EXPECT_EQ(resident.tokens, step.tokens) << "teacher forcing, batch " << batch;
    // A stop through the strict gate: exactly the steps the host took.
    Seen seen(batch, steps);
    r.on_step = seen.record(4);
    const GenerateResult cut = gpu->generate(r);
    EXPECT_EQ(cut.steps_done, 5);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < steps; ++j) {
        const size_t i = static_cast<size_t>(b * steps + j);
        EXPECT_EQ(cut.tokens[i], j <= 4 ? step.tokens[i] : -1) << "row " << b << " step " << j;
      }
    r.on_step = nullptr;
    EXPECT_EQ(gpu->generate(r).tokens, step.tokens) << "teacher forcing after a stop, batch " << batch;
    r.forced.clear();
    EXPECT_NE(gpu->generate(r).tokens, step.tokens) << "the forced tokens change the run (else this test shows nothing)";
  }
}

TEST_F(GpuResidentLoop, AHostErrorOrASlowHostEndsTheRunCleanly) {
  auto gpu = generator(300);
  // Look-ahead (the host only looks) and strict (forced tokens: the kernel waits for every answer).
  for (bool strict : {false, true}) {
    const char* mode = strict ? "strict" : "look-ahead";
    GenerateRequest r = request(1, 10);
    if (strict)
      for (int32_t j = 0; j < 10; ++j) r.forced.push_back(100 + j);
    const GenerateResult full = gpu->generate(r);
    r.multi_step = true;
    // A callback that throws: the kernel is told to stop, then the exception reaches the caller.
    r.on_step = [](int64_t step, const int32_t*, int64_t) -> bool {
      if (step == 3) throw std::runtime_error("callback failed at step 3");
      return true;
    };
    try {
      gpu->generate(r);
      ADD_FAILURE() << mode << ": the callback's exception was lost";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "callback failed at step 3") << mode;
    }
    r.on_step = nullptr;
    EXPECT_EQ(gpu->generate(r).tokens, full.tokens) << mode << ": after a callback threw";
    // A callback slower than the watchdog: the kernel stops waiting and the run fails, naming the host's answer.
    r.on_step = [](int64_t step, const int32_t*, int64_t) {
      if (step == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return true;
    };
    try {
      gpu->generate(r);
      ADD_FAILURE() << mode << ": a host slower than the watchdog was not reported";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::deadlock) << e.what();
      EXPECT_NE(std::string(e.what()).find("waited for the host's answer to pass 2's output"), std::string::npos) << e.what();
    }
    r.on_step = nullptr;
    EXPECT_EQ(gpu->generate(r).tokens, full.tokens) << mode << ": after the watchdog stopped a resident run";
    r.multi_step = false;
    EXPECT_EQ(gpu->generate(r).tokens, full.tokens) << mode << ": step mode after the watchdog stopped a resident run";
  }
}

}  // namespace
}  // namespace weft
