// weft_graph_compile through the public API: a Llama-shaped decoder layer and a graph using every op compile to
// a cubin for sm_80, sm_90a and sm_100a; the cache hits on a repeat and misses when one dim, one attribute or
// one option changes; compile errors and bad options are reported.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "capi_test_util.hpp"
#include "weft/weft.hpp"

namespace {

// A private cache folder per test process.
class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("weft-capi-compile-" + std::to_string(getpid()));
    setenv("WEFT_CACHE_DIR", dir_.c_str(), 1);
    unsetenv("WEFT_CACHE");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// One Qwen3-style decoder layer (bf16) + lm_head; `hidden` and `eps` vary the graph.
weft::Graph decoder(const weft::Context& ctx, int64_t hidden = 256, float eps = 1e-6f) {
  weft::Graph g(ctx, "layer");
  g.symbol("batch", 1, 4);
  const auto bf = WEFT_DTYPE_BF16;
  const int64_t hq = 4, hkv = 2, hd = 64, ffn = 512, vocab = 1000;
  auto ids = g.input("ids", WEFT_DTYPE_I32, {"batch"});
  auto pos = g.input("pos", WEFT_DTYPE_I32, {"batch"});
  auto h = g.embedding(g.weight("embed", bf, {vocab, hidden}), ids, "h");
  auto kc = g.state("kc", bf, {"batch", 64, hkv, hd});
  auto vc = g.state("vc", bf, {"batch", 64, hkv, hd});
  auto qkv = g.linear(g.rmsnorm(h, g.weight("n1", bf, {hidden}), eps), g.weight("wqkv", bf, {(hq + 2 * hkv) * hd, hidden}));
  weft_rope_options ro{};
  ro.struct_size = sizeof ro;
  ro.head_dim = hd;
  weft_attention_options ao{};
  ao.struct_size = sizeof ao;
  ao.num_q_heads = hq;
  ao.num_kv_heads = hkv;
  ao.head_dim = hd;
  auto q = g.rope(g.head_rmsnorm(g.slice(qkv, -1, 0, hq * hd), g.weight("qn", bf, {hd}), hd, eps), pos, ro);
  auto k = g.rope(g.head_rmsnorm(g.slice(qkv, -1, hq * hd, (hq + hkv) * hd), g.weight("kn", bf, {hd}), hd, eps), pos, ro);
  auto v = g.slice(qkv, -1, (hq + hkv) * hd, (hq + 2 * hkv) * hd);
  h = g.linear(g.attention_decode(q, k, v, kc, vc, pos, ao), g.weight("wo", bf, {hidden, hq * hd}), WEFT_TENSOR_NONE, h);
  auto gu = g.linear(g.rmsnorm(h, g.weight("n2", bf, {hidden}), eps), g.weight("wgu", bf, {2 * ffn, hidden}));
  h = g.linear(g.silu_mul(gu), g.weight("wd", bf, {hidden, ffn}), WEFT_TENSOR_NONE, h);
  auto logits = g.linear(g.rmsnorm(h, g.weight("nf", bf, {hidden}), eps), g.weight("lm", bf, {vocab, hidden}));
  g.output(logits, "logits");
  g.output(g.argmax(logits, WEFT_DTYPE_I32), "next");
  return g;
}

// Every op of the table at least once.
weft::Graph every_op(const weft::Context& ctx) {
  weft::Graph g(ctx, "every_op");
  const auto f = WEFT_DTYPE_F32;
  auto x = g.input("x", f, {2, 16});
  auto ids = g.input("ids", WEFT_DTYPE_I32, {2});
  auto w = g.weight("w", f, {16});
  auto a = g.layernorm(g.rmsnorm(x, w, 1e-6f), w, w, 1e-5f);
  a = g.add(g.mul(a, x), g.gelu(g.silu(x)));
  a = g.linear(a, g.weight("wl", f, {16, 16}), w, x);
  a = g.matmul(g.reshape(a, {2, 2, 8}), g.weight("wm", f, {8, 8}));
  a = g.reshape(a, {2, 16});
  a = g.head_rmsnorm(a, g.weight("hn", f, {8}), 8, 1e-6f);
  weft_rope_options ro{};
  ro.struct_size = sizeof ro;
  ro.head_dim = 8;
  a = g.rope(a, ids, ro);
  a = g.silu_mul(g.concat({a, g.embedding(g.weight("emb", f, {10, 16}), ids)}, -1));
  weft_attention_options ao{};
  ao.struct_size = sizeof ao;
  ao.num_q_heads = 2;
  ao.num_kv_heads = 1;
  ao.head_dim = 8;
  auto att = g.attention_decode(a, g.slice(a, 1, 0, 8), g.slice(a, 1, 8, 16), g.state("kc", f, {2, 4, 1, 8}),
                                g.state("vc", f, {2, 4, 1, 8}), ids, ao);
  auto s = g.softmax(g.cast(g.cast(att, WEFT_DTYPE_BF16), f));
  g.output(g.reduce(s, WEFT_REDUCE_SUM, -1, true), "sum");
  g.output(g.argmax(s, WEFT_DTYPE_I64), "am");
  return g;
}

weft_compile_report compile(const weft::Graph& g, const char* arch, int32_t sms = 0, int disable_cache = 0) {
  weft_compile_options o{};
  o.struct_size = sizeof o;
  o.arch = arch;
  o.num_sms = sms;
  o.disable_cache = disable_cache;
  weft_compile_report r{};
  r.struct_size = sizeof r;
  weft::check(weft_graph_compile(g.get(), &o, &r));
  return r;
}

TEST_F(CompileTest, DecoderLayerAndEveryOpForEachArch) {
  weft::Context ctx;
  const weft::Graph layer = decoder(ctx), all = every_op(ctx);
  std::set<std::string> keys;
  for (const char* arch : {"sm_80", "sm_90a", "sm_100a"})
    for (const weft::Graph* g : {&layer, &all}) {
      const weft_compile_report r = compile(*g, arch);
      EXPECT_EQ(r.cache_hit, 0) << arch;
      EXPECT_GT(r.cubin_bytes, 1000) << arch;
      EXPECT_GT(r.num_tasks, 10) << arch;
      EXPECT_GT(r.num_events, 0) << arch;
      EXPECT_GT(r.arena_bytes, 0) << arch;
      keys.insert(r.key);
    }
  EXPECT_EQ(keys.size(), 6u) << "each graph and arch has its own cache key";
}

TEST_F(CompileTest, CacheHitsAndMissesOnAnyChange) {
  weft::Context ctx;
  const auto first = compile(decoder(ctx), "sm_90a");
  EXPECT_EQ(first.cache_hit, 0);
  const auto again = compile(decoder(ctx), "sm_90a");
  EXPECT_EQ(again.cache_hit, 1);
  EXPECT_STREQ(again.key, first.key);
  EXPECT_LT(again.total_ms, first.total_ms);
  const auto other_dim = compile(decoder(ctx, 320), "sm_90a");
  const auto other_attr = compile(decoder(ctx, 256, 1e-5f), "sm_90a");
  const auto other_option = compile(decoder(ctx), "sm_90a", 100);
  for (const auto* r : {&other_dim, &other_attr, &other_option}) {
    EXPECT_EQ(r->cache_hit, 0);
    EXPECT_STRNE(r->key, first.key);
  }
  const auto uncached = compile(decoder(ctx), "sm_90a", 0, 1);
  EXPECT_EQ(uncached.cache_hit, 0) << "disable_cache neither reads nor writes";
}

TEST_F(CompileTest, CppWrapperCompilesAndThrows) {
  weft::Context ctx;
  const weft::Graph g = decoder(ctx);
  const weft_compile_report r = g.compile("sm_80");
  EXPECT_GT(r.cubin_bytes, 1000);
  try {
    g.compile("sm_61");
    FAIL() << "an unknown arch compiled";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), WEFT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("sm_61"), std::string::npos) << e.what();
  }
}

TEST_F(CompileTest, ErrorsAreReported) {
  weft::Context ctx;
  const weft::Graph g = decoder(ctx);
  weft_compile_options o{};
  o.struct_size = sizeof o;
  o.arch = "sm_75";
  weft_compile_report r{};
  r.struct_size = sizeof r;
  EXPECT_WEFT_ERROR(weft_graph_compile(g.get(), &o, &r), WEFT_ERROR_INVALID_ARGUMENT, "sm_75", "sm_90a");
  o.arch = nullptr;
  o.num_sms = -3;
  EXPECT_WEFT_ERROR(weft_graph_compile(g.get(), &o, &r), WEFT_ERROR_INVALID_ARGUMENT, "num_sms is -3");
  EXPECT_WEFT_ERROR(weft_graph_compile(g.get(), nullptr, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "'report' is NULL");
  weft_compile_report small{};
  small.struct_size = 8;
  EXPECT_WEFT_ERROR(weft_graph_compile(g.get(), nullptr, &small), WEFT_ERROR_INVALID_ARGUMENT, "struct_size");
  weft::Graph empty(ctx, "empty");
  EXPECT_WEFT_ERROR(weft_graph_compile(empty.get(), nullptr, &r), WEFT_ERROR_INVALID_ARGUMENT, "no outputs");
  // A cache folder others can write to is refused: a poisoned cache is code execution.
  std::filesystem::create_directories(dir_);
  std::filesystem::permissions(dir_, std::filesystem::perms::all);
  EXPECT_WEFT_ERROR(weft_graph_compile(g.get(), nullptr, &r), WEFT_ERROR_CACHE, dir_.c_str());
}

}  // namespace
