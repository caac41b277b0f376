// Graph identity: canonical JSON round-trips, the XXH3-128 hash is stable, changes with every computational
// change (op, attribute, dtype, dim, symbol range, wiring) and ignores names; from_json errors name the field.
#include <functional>
#include <string>

#include "capi_test_util.hpp"

using namespace weft_test;

// Recorded from the first build of this canonical form (graph format version 1).
#define GOLDEN_MLP_HASH "2d15a1e5d4d60b2ea10df0ce2eff1691"

namespace {

struct Variant {
  const char* op = "gelu";
  const char* act_attrs = "{\"approximate\": \"tanh\"}";
  weft_dtype dtype = WEFT_DTYPE_BF16;
  int64_t hidden = 32;
  int64_t batch_max = 16;
  const char* x_name = "x";
  const char* sym_name = "batch";
  const char* graph_name = "mlp";
  bool bias = true;
  bool swap_add = false;
};

// A small MLP whose every aspect can be varied.
weft_graph* build(weft_context* ctx, const Variant& v) {
  weft_graph* g = nullptr;
  EXPECT_EQ(weft_graph_create(ctx, v.graph_name, &g), WEFT_OK);
  EXPECT_EQ(weft_graph_declare_symbol(g, v.sym_name, 1, v.batch_max), WEFT_OK);
  const weft_dim xd[] = {sym(v.sym_name), fixed(8)}, wd[] = {fixed(v.hidden), fixed(8)}, bd[] = {fixed(v.hidden)};
  weft_tensor x = 0, w = 0, b = 0, h = 0, a = 0, y = 0;
  EXPECT_EQ(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, v.x_name, v.dtype, xd, 2, &x), WEFT_OK);
  EXPECT_EQ(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "w", v.dtype, wd, 2, &w), WEFT_OK);
  EXPECT_EQ(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "b", v.dtype, bd, 1, &b), WEFT_OK);
  EXPECT_EQ(weft_op_linear(g, x, w, v.bias ? b : WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "h", &h), WEFT_OK)
      << weft_last_error_message();
  EXPECT_EQ(weft_graph_add_op(g, v.op, &h, 1, v.act_attrs, "a", &a), WEFT_OK) << weft_last_error_message();
  const weft_tensor pair[2] = {v.swap_add ? h : a, v.swap_add ? a : h};
  EXPECT_EQ(weft_graph_add_op(g, "mul", pair, 2, nullptr, "y", &y), WEFT_OK) << weft_last_error_message();
  EXPECT_EQ(weft_graph_mark_output(g, y, nullptr), WEFT_OK);
  return g;
}

std::pair<uint64_t, uint64_t> hash_of(weft_graph* g) {
  uint64_t h[2] = {0, 0};
  EXPECT_EQ(weft_graph_hash(g, h), WEFT_OK) << weft_last_error_message();
  return {h[0], h[1]};
}

class Identity : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_WEFT_OK(weft_context_create(nullptr, &ctx)); }
  void TearDown() override { weft_context_destroy(ctx); }
  std::pair<uint64_t, uint64_t> hash(const Variant& v) {
    weft_graph* g = build(ctx, v);
    auto h = hash_of(g);
    weft_graph_destroy(g);
    return h;
  }
  weft_context* ctx = nullptr;
};

TEST_F(Identity, SameGraphTwiceSameHash) { EXPECT_EQ(hash(Variant{}), hash(Variant{})); }

TEST_F(Identity, EveryComputationalChangeChangesTheHash) {
  const auto base = hash(Variant{});
  std::vector<std::pair<const char*, std::function<void(Variant&)>>> changes = {
      {"op", [](Variant& v) { v.op = "silu"; v.act_attrs = nullptr; }},
      {"attribute", [](Variant& v) { v.act_attrs = "{\"approximate\": \"none\"}"; }},
      {"dtype", [](Variant& v) { v.dtype = WEFT_DTYPE_F16; }},
      {"dim", [](Variant& v) { v.hidden = 33; }},
      {"symbol range", [](Variant& v) { v.batch_max = 17; }},
      {"optional operand", [](Variant& v) { v.bias = false; }},
      {"operand order", [](Variant& v) { v.swap_add = true; }},
  };
  for (auto& [what, change] : changes) {
    Variant v;
    change(v);
    EXPECT_NE(hash(v), base) << "changing the " << what << " did not change the hash";
  }
}

TEST_F(Identity, NamesDoNotChangeTheHash) {
  Variant renamed;
  renamed.x_name = "activations";
  renamed.sym_name = "rows";
  renamed.graph_name = "other";
  EXPECT_EQ(hash(renamed), hash(Variant{}));
}

TEST_F(Identity, DefaultAttributesSpelledOutHashTheSame) {
  Variant implicit, explicit_default;
  implicit.act_attrs = nullptr;  // gelu's default is "none"
  explicit_default.act_attrs = "{\"approximate\": \"none\"}";
  EXPECT_EQ(hash(implicit), hash(explicit_default));
}

TEST_F(Identity, GoldenHashIsStableAcrossProcessesAndVersions) {
  // The hash keys the cross-process kernel cache, so it must not depend on the process (addresses, hash-map
  // order) or drift silently between builds. If the canonical form changes on purpose, bump
  // kGraphFormatVersion and update this value.
  const auto h = hash(Variant{});
  char hex[40];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.second),
                static_cast<unsigned long long>(h.first));
  EXPECT_STREQ(hex, GOLDEN_MLP_HASH);
}

TEST_F(Identity, JsonRoundTripKeepsJsonAndHash) {
  weft_graph* g = build(ctx, Variant{});
  const char* json = nullptr;
  ASSERT_WEFT_OK(weft_graph_to_json(g, &json));
  const std::string first = json;
  weft_graph* back = nullptr;
  ASSERT_WEFT_OK(weft_graph_from_json(ctx, first.c_str(), &back));
  const char* json2 = nullptr;
  ASSERT_WEFT_OK(weft_graph_to_json(back, &json2));
  EXPECT_EQ(first, std::string(json2));
  EXPECT_EQ(hash_of(g), hash_of(back));
  const char* text = nullptr;
  ASSERT_WEFT_OK(weft_graph_to_text(back, &text));
  EXPECT_NE(std::string(text).find("y = mul(a, h)"), std::string::npos) << text;
  weft_graph_destroy(back);
  weft_graph_destroy(g);
}

TEST_F(Identity, FromJsonErrorsNameTheField) {
  weft_graph* g = nullptr;
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, "{\"format\": ", &g), WEFT_ERROR_INVALID_ARGUMENT, "does not parse", "line 1");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, "[]", &g), WEFT_ERROR_INVALID_ARGUMENT, "expected an object");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, "{\"format\": \"weft-graph\", \"version\": 1}", &g),
                    WEFT_ERROR_INVALID_ARGUMENT, "$.symbols is missing");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, "{\"format\": \"weft-graph\", \"version\": 99}", &g),
                    WEFT_ERROR_INVALID_ARGUMENT, "$.version is 99");
  const std::string head = R"({"format": "weft-graph", "version": 1, "symbols": [{"name": "b", "min": 1, "max": 4}],
    "tensors": [{"name": "x", "kind": "input", "dtype": "f32", "shape": ["b", 4]}], )";
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [{"op": "silu", "inputs": ["x"], "output": "y"}],
    "outputs": ["y"], "extra": 1})").c_str(), &g), WEFT_OK);  // unknown top-level keys are ignored
  weft_graph_destroy(g);
  g = nullptr;
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [{"op": "silu", "inputs": ["q"], "output": "y"}],
    "outputs": ["y"]})").c_str(), &g), WEFT_ERROR_INVALID_ARGUMENT, "$.ops[0].inputs[0] is 'q'");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [{"op": "silu", "inputs": [3], "output": "y"}],
    "outputs": ["y"]})").c_str(), &g), WEFT_ERROR_INVALID_ARGUMENT, "$.ops[0].inputs[0]", "expected a string");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [{"op": "silu", "inputs": ["x"], "output": "y",
    "attrs": {"k": 1}}], "outputs": ["y"]})").c_str(), &g), WEFT_ERROR_INVALID_ARGUMENT, "$.ops[0]", "unknown attribute 'k'");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [], "outputs": []})").c_str(), &g),
                    WEFT_ERROR_INVALID_ARGUMENT, "no outputs");
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [], "outputs": ["x"]})").c_str(), &g),
                    WEFT_ERROR_INVALID_ARGUMENT, "$.outputs[0]", "never produced");
  // A cycle: y = silu(z), z = silu(y).
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, (head + R"("ops": [{"op": "silu", "inputs": ["z"], "output": "y"},
    {"op": "silu", "inputs": ["y"], "output": "z"}], "outputs": ["y"]})").c_str(), &g),
                    WEFT_ERROR_INVALID_ARGUMENT, "cycle", "$.ops[0] ('y')", "$.ops[1] ('z')");
  // A dim that is not a declared symbol, and a zero-sized dim.
  const std::string bad_dim = R"({"format": "weft-graph", "version": 1, "symbols": [],
    "tensors": [{"name": "x", "kind": "input", "dtype": "f32", "shape": ["n", 4]}], "ops": [], "outputs": []})";
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, bad_dim.c_str(), &g), WEFT_ERROR_INVALID_ARGUMENT,
                    "$.tensors[0].shape[0]", "symbol 'n'");
  const std::string zero_dim = R"({"format": "weft-graph", "version": 1, "symbols": [],
    "tensors": [{"name": "x", "kind": "input", "dtype": "f32", "shape": [0]}], "ops": [], "outputs": []})";
  EXPECT_WEFT_ERROR(weft_graph_from_json(ctx, zero_dim.c_str(), &g), WEFT_ERROR_INVALID_ARGUMENT, "$.tensors[0]", "dim 0 is 0");
  EXPECT_EQ(g, nullptr);
}

TEST_F(Identity, OpsOutOfOrderInJsonArePlacedByDependency) {
  const char* json = R"({"format": "weft-graph", "version": 1, "symbols": [],
    "tensors": [{"name": "x", "kind": "input", "dtype": "f32", "shape": [4]}],
    "ops": [{"op": "silu", "inputs": ["h"], "output": "y"}, {"op": "silu", "inputs": ["x"], "output": "h"}],
    "outputs": ["y"]})";
  weft_graph* g = nullptr;
  ASSERT_WEFT_OK(weft_graph_from_json(ctx, json, &g));
  ASSERT_WEFT_OK(weft_graph_validate(g));
  weft_graph_destroy(g);
}

}  // namespace
