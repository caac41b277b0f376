// Models through the public C API: a random tiny checkpoint written by the `weft` command, loaded, compiled and
// generated from on the CPU reference (and on the GPU where there is one: the two agree on the tokens of
// clear steps); every bad argument is a status with a message naming it.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "capi_test_util.hpp"
#include "weft/weft.hpp"

using namespace weft_test;
namespace fs = std::filesystem;

namespace {

class ModelApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir = new fs::path(fs::temp_directory_path() / ("weft_capi_model_" + std::to_string(::getpid())));
    fs::remove_all(*dir);
    // The weft command sits next to the tests folder in the build tree.
    const fs::path cli = fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "weft";
    const std::string cmd = "'" + cli.string() + "' checkpoint tiny-qwen3 '" + dir->string() + "' --seed 3 > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir);
    delete dir;
  }
  void SetUp() override { ASSERT_WEFT_OK(weft_context_create(nullptr, &ctx)); }
  void TearDown() override { weft_context_destroy(ctx); }

  weft_model* load(weft_backend backend, int32_t max_batch = 2, int32_t max_seq = 64) {
    weft_model_options o{};
    o.struct_size = sizeof o;
    o.backend = backend;
    o.max_batch = max_batch;
    o.max_seq = max_seq;
    o.disable_cache = 1;
    weft_model* m = nullptr;
    EXPECT_EQ(weft_model_load(ctx, dir->c_str(), &o, &m), WEFT_OK) << weft_last_error_message();
    return m;
  }
  static weft_generate_request request(const std::vector<int32_t>& prompt, int32_t batch, int32_t steps, std::vector<int32_t>& out) {
    weft_generate_request r{};
    r.struct_size = sizeof r;
    r.batch = batch;
    r.prompt_len = static_cast<int32_t>(prompt.size()) / batch;
    r.steps = steps;
    r.prompt_ids = prompt.data();
    out.assign(static_cast<size_t>(batch * steps), -1);
    r.out_tokens = out.data();
    return r;
  }

  static fs::path* dir;
  weft_context* ctx = nullptr;
};
fs::path* ModelApi::dir = nullptr;

TEST_F(ModelApi, LoadsDescribesCompilesAndGenerates) {
  weft_model* m = load(WEFT_BACKEND_REFERENCE);
  ASSERT_NE(m, nullptr);
  weft_model_info info{};
  info.struct_size = sizeof info;
  ASSERT_WEFT_OK(weft_model_get_info(m, &info));
  EXPECT_STREQ(info.model_type, "qwen3");
  EXPECT_EQ(info.layers, 2);
  EXPECT_EQ(info.hidden, 256);
  EXPECT_EQ(info.vocab, 2048);
  EXPECT_EQ(info.max_batch, 2);
  EXPECT_EQ(info.max_seq, 64);
  EXPECT_EQ(info.backend, WEFT_BACKEND_REFERENCE);
  EXPECT_GT(info.weight_bytes, 1000000);

  weft_compile_report cr{};
  cr.struct_size = sizeof cr;
  ASSERT_WEFT_OK(weft_model_compile(m, 2, &cr));
  EXPECT_GT(cr.num_tasks, 100);
  EXPECT_GT(cr.cubin_bytes, 0);

  const std::vector<int32_t> prompt = {1, 2, 3, 4, 40, 30, 20, 10};
  std::vector<int32_t> tokens, again, looped;
  std::vector<float> step_ms(6);
  weft_generate_request r = request(prompt, 2, 6, tokens);
  r.out_step_ms = step_ms.data();
  weft_generate_report rep{};
  rep.struct_size = sizeof rep;
  ASSERT_WEFT_OK(weft_model_generate(m, &r, &rep));
  for (int32_t t : tokens) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 2048);
  }
  for (float ms : step_ms) EXPECT_GT(ms, 0.0f);
  EXPECT_GT(rep.decode_ms, 0.0);
  weft_generate_request r2 = request(prompt, 2, 6, again);
  ASSERT_WEFT_OK(weft_model_generate(m, &r2, nullptr));
  EXPECT_EQ(again, tokens) << "each request starts from an empty KV cache";
  weft_generate_request r3 = request(prompt, 2, 6, looped);
  r3.multi_step = 1;
  ASSERT_WEFT_OK(weft_model_generate(m, &r3, nullptr));
  EXPECT_EQ(looped, tokens);

  // On a GPU, the same model generates the same tokens as the reference wherever the reference's top-2 gap is clear.
  int32_t n = 0;
  if (weft_device_count(&n) == WEFT_OK && n > 0) {
    std::vector<float> logits(static_cast<size_t>(6 * 2 * 2048));
    weft_generate_request rl = request(prompt, 2, 6, again);
    rl.out_logits = logits.data();
    ASSERT_WEFT_OK(weft_model_generate(m, &rl, nullptr));
    weft_model* gpu = load(WEFT_BACKEND_GPU);
    ASSERT_NE(gpu, nullptr);
    std::vector<int32_t> gpu_tokens;
    for (int32_t multi : {0, 1}) {
      weft_generate_request rg = request(prompt, 2, 6, gpu_tokens);
      rg.multi_step = multi;
      ASSERT_WEFT_OK(weft_model_generate(gpu, &rg, nullptr));
      for (int b = 0; b < 2; ++b)
        for (int j = 0; j < 6; ++j) {
          const float* row = logits.data() + (j * 2 + b) * 2048;
          std::vector<float> s(row, row + 2048);
          std::sort(s.begin(), s.end(), std::greater<>());
          if (s[0] - s[1] <= 0.01f * (s[0] - s.back())) break;  // a near tie: later tokens may differ
          EXPECT_EQ(gpu_tokens[static_cast<size_t>(b * 6 + j)], tokens[static_cast<size_t>(b * 6 + j)]) << "row " << b << " step " << j;
        }
    }
    weft_model_destroy(gpu);
  }
  weft_model_destroy(m);
}

TEST_F(ModelApi, CppWrapperGeneratesTheSameTokens) {
  weft_model* m = load(WEFT_BACKEND_REFERENCE);
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = {7, 8, 9, 10, 11, 12};
  std::vector<int32_t> tokens;
  weft_generate_request r = request(prompt, 2, 5, tokens);
  ASSERT_WEFT_OK(weft_model_generate(m, &r, nullptr));
  weft_model_destroy(m);

  weft::Context context;
  weft_model_options o{};
  o.backend = WEFT_BACKEND_REFERENCE;
  o.max_batch = 2;
  weft::Model model(context, dir->string(), o);
  EXPECT_EQ(model.info().layers, 2);
  const weft::Model::Generation g = model.generate({{7, 8, 9}, {10, 11, 12}}, 5);
  EXPECT_EQ(g.tokens, tokens);
  EXPECT_EQ(g.step_ms.size(), 5u);
  EXPECT_EQ(g.steps_done, 5);
  // Streaming through the wrapper: the steps in order, a stop, and an exception from the callback rethrown.
  std::vector<int32_t> seen;
  const weft::Model::Generation cut = model.generate({{7, 8, 9}, {10, 11, 12}}, 5, false, [&](int32_t step, const int32_t* t, int32_t n) {
    EXPECT_EQ(n, 2);
    seen.push_back(step);
    seen.push_back(t[0]);
    return step < 1;
  });
  EXPECT_EQ(cut.steps_done, 2);
  EXPECT_EQ(seen, (std::vector<int32_t>{0, tokens[0], 1, tokens[1]}));
  EXPECT_EQ(cut.tokens[2], -1);
  EXPECT_THROW(model.generate({{7, 8, 9}, {10, 11, 12}}, 5, false,
                              [](int32_t, const int32_t*, int32_t) -> bool { throw std::out_of_range("from the callback"); }),
               std::out_of_range);
  try {
    model.generate({{7, 8, 9}, {10, 11, 12}, {1, 2, 3}}, 5);
    ADD_FAILURE() << "batch 3 over max_batch 2 was accepted";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), WEFT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("batch is 3"), std::string::npos) << e.what();
  }
}

// What on_step hands the caller: every step's tokens in order, and a stop after the step it returns nonzero for.
struct StepLog {
  int32_t stop_after = -1;
  std::vector<int32_t> steps, tokens;
  static int32_t record(void* user, int32_t step, const int32_t* tokens, int32_t batch) {
    auto* log = static_cast<StepLog*>(user);
    log->steps.push_back(step);
    log->tokens.insert(log->tokens.end(), tokens, tokens + batch);
    return step == log->stop_after ? 1 : 0;
  }
};

TEST_F(ModelApi, StreamsEveryStepAndStopsWhereTheCallerSays) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 40, 30, 20, 10};
  std::vector<weft_model*> models = {load(WEFT_BACKEND_REFERENCE)};
  int32_t n = 0;
  if (weft_device_count(&n) == WEFT_OK && n > 0) models.push_back(load(WEFT_BACKEND_GPU));
  for (weft_model* m : models) {
    ASSERT_NE(m, nullptr);
    std::vector<int32_t> full, got;
    weft_generate_request r = request(prompt, 2, 6, full);
    ASSERT_WEFT_OK(weft_model_generate(m, &r, nullptr));
    for (int32_t multi : {0, 1}) {
      // Every step, in order, with the tokens the generation returns.
      StepLog all;
      r = request(prompt, 2, 6, got);
      r.multi_step = multi;
      r.on_step = StepLog::record;
      r.on_step_user = &all;
      weft_generate_report rep{};
      rep.struct_size = sizeof rep;
      ASSERT_WEFT_OK(weft_model_generate(m, &r, &rep));
      EXPECT_EQ(got, full);
      EXPECT_EQ(rep.steps_done, 6);
      EXPECT_EQ(all.steps, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
      for (int j = 0; j < 6; ++j)
        for (int b = 0; b < 2; ++b) EXPECT_EQ(all.tokens[static_cast<size_t>(j * 2 + b)], full[static_cast<size_t>(b * 6 + j)]);
      // A stop after step 2: three steps run, the rest of out_tokens -1.
      StepLog cut;
      cut.stop_after = 2;
      r.on_step_user = &cut;
      std::vector<float> step_ms(6, -1.0f);
      r.out_step_ms = step_ms.data();
      ASSERT_WEFT_OK(weft_model_generate(m, &r, &rep));
      EXPECT_EQ(rep.steps_done, 3) << "multi_step " << multi;
      EXPECT_EQ(cut.steps, (std::vector<int32_t>{0, 1, 2}));
      for (int b = 0; b < 2; ++b)
        for (int j = 0; j < 6; ++j)
          EXPECT_EQ(got[static_cast<size_t>(b * 6 + j)], j < 3 ? full[static_cast<size_t>(b * 6 + j)] : -1) << "row " << b << " step " << j;
      for (int j = 0; j < 6; ++j) EXPECT_EQ(step_ms[static_cast<size_t>(j)] > 0.0f, j < 3) << "step " << j;
      // A report of a caller built before steps_done (it ends at decode_ms) is accepted and written within its size.
      struct OldReport {
        size_t struct_size;
        double prefill_ms, decode_ms;
        int32_t canary;
      } old{};
      old.struct_size = offsetof(weft_generate_report, steps_done);
      old.canary = 12345;
      r.on_step = nullptr;
      r.out_step_ms = nullptr;
      ASSERT_WEFT_OK(weft_model_generate(m, &r, reinterpret_cast<weft_generate_report*>(&old)));
      EXPECT_GT(old.decode_ms, 0.0);
      EXPECT_EQ(old.canary, 12345);
    }
    // Teacher forcing in one launch (the GPU's kernel stays resident and takes each forced token at the step
    // boundary) equals step mode's.
    std::vector<int32_t> forced(12), stepped;
    for (size_t i = 0; i < forced.size(); ++i) forced[i] = static_cast<int32_t>((i * 97 + 5) % 2048);
    r = request(prompt, 2, 6, stepped);
    r.forced_ids = forced.data();
    ASSERT_WEFT_OK(weft_model_generate(m, &r, nullptr));
    r = request(prompt, 2, 6, got);
    r.forced_ids = forced.data();
    r.multi_step = 1;
    ASSERT_WEFT_OK(weft_model_generate(m, &r, nullptr));
    EXPECT_EQ(got, stepped);
    weft_model_destroy(m);
  }
}

TEST_F(ModelApi, BadArgumentsAreNamed) {
  weft_model* m = nullptr;
  EXPECT_WEFT_ERROR(weft_model_load(ctx, nullptr, nullptr, &m), WEFT_ERROR_INVALID_ARGUMENT, "dir");
  EXPECT_WEFT_ERROR(weft_model_load(ctx, "/nonexistent/model", nullptr, &m), WEFT_ERROR_INVALID_ARGUMENT, "config.json");
  EXPECT_WEFT_ERROR(weft_model_load(nullptr, dir->c_str(), nullptr, &m), WEFT_ERROR_INVALID_HANDLE, "context");
  weft_model_options o{};
  o.struct_size = sizeof o;
  o.backend = static_cast<weft_backend>(7);
  EXPECT_WEFT_ERROR(weft_model_load(ctx, dir->c_str(), &o, &m), WEFT_ERROR_INVALID_ARGUMENT, "backend is 7");
  o.backend = WEFT_BACKEND_REFERENCE;
  o.max_seq = 1 << 30;
  EXPECT_WEFT_ERROR(weft_model_load(ctx, dir->c_str(), &o, &m), WEFT_ERROR_INVALID_ARGUMENT, "max_position_embeddings");
  EXPECT_EQ(m, nullptr);

  m = load(WEFT_BACKEND_REFERENCE);
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = {1, 2, 3, 5000};
  std::vector<int32_t> out;
  weft_generate_request r = request(prompt, 2, 4, out);
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "prompt[1][1] is 5000");
  r = request(prompt, 4, 4, out);
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "batch is 4; expected 1..2");
  r = request(prompt, 1, 1000, out);
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "max_seq 64");
  r = request({1, 2}, 1, 2, out);
  r.out_tokens = nullptr;
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "out_tokens");
  EXPECT_WEFT_ERROR(weft_model_generate(m, nullptr, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "request");
  const std::vector<int32_t> two = {1, 2};  // named: the request points into it
  r = request(two, 1, 2, out);
  std::vector<float> logits(2 * 2048);
  r.out_logits = logits.data();
  r.multi_step = 1;
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "per-step logits need step mode");
  weft_generate_report short_report{};
  short_report.struct_size = sizeof(size_t) + sizeof(double);
  r.out_logits = nullptr;
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, &short_report), WEFT_ERROR_INVALID_ARGUMENT, "report->struct_size");
  EXPECT_WEFT_ERROR(weft_model_compile(m, 0, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "batch is 0");
  weft_model_info info{};
  info.struct_size = 8;
  EXPECT_WEFT_ERROR(weft_model_get_info(m, &info), WEFT_ERROR_INVALID_ARGUMENT, "struct_size");
  weft_model_destroy(m);
  EXPECT_WEFT_ERROR(weft_model_generate(m, &r, nullptr), WEFT_ERROR_INVALID_HANDLE, "model");
  weft_model_destroy(m);  // a second destroy is ignored
  weft_model_destroy(nullptr);
}

TEST_F(ModelApi, AMissingTensorIsNamed) {
  // Copy the checkpoint with one tensor renamed in the safetensors header (same length, so offsets hold).
  const fs::path broken = *dir / "broken";
  fs::create_directories(broken);
  fs::copy_file(*dir / "config.json", broken / "config.json");
  std::ifstream in(*dir / "model.safetensors", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = bytes.find("model.layers.1.mlp.up_proj.weight");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 33, "model.layers.1.mlp.UP_proj.weight");
  std::ofstream(broken / "model.safetensors", std::ios::binary) << bytes;
  weft_model* m = nullptr;
  weft_model_options o{};
  o.struct_size = sizeof o;
  o.backend = WEFT_BACKEND_REFERENCE;
  EXPECT_WEFT_ERROR(weft_model_load(ctx, broken.c_str(), &o, &m), WEFT_ERROR_INVALID_ARGUMENT, "model.layers.1.mlp.up_proj.weight");
  EXPECT_EQ(m, nullptr);
}

}  // namespace
