// dtypes, half-precision conversions, symbolic shapes, buffers and graph invariants.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.hpp"
#include "graph/graph.hpp"
#include "graph/serialize.hpp"
#include "op_test_util.hpp"

namespace weft::test {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(round_to_bf16(1.0f + 1.0f / 256), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(round_to_bf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(round_to_bf16(std::nanf(""))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(Half, F16RangeSubnormalsAndTies) {
  EXPECT_EQ(round_to_f16(65504.0f), 65504.0f);                     // largest finite f16
  EXPECT_TRUE(std::isinf(round_to_f16(65520.0f)));                 // halfway to 2^16 rounds to inf
  EXPECT_EQ(round_to_f16(65519.0f), 65504.0f);
  EXPECT_EQ(round_to_f16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(round_to_f16(std::ldexp(1.0f, -25)), 0.0f);                   // tie to even (0)
  EXPECT_EQ(round_to_f16(std::ldexp(1.5f, -25)), std::ldexp(1.0f, -24));
  EXPECT_EQ(round_to_f16(1.0f + 1.0f / 2048), 1.0f);                      // tie to even
  EXPECT_EQ(round_to_f16(-0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(round_to_f16(-0.0f)));
  // Every f16 bit pattern survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(BufferSet, FloatToIntMatchesCuda) {
  Buffer b(DType::i32, {4});
  b.set(0, 3e9);
  b.set(1, -3e9);
  b.set(2, std::nan(""));
  b.set(3, -2.7);
  EXPECT_EQ(b.i[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(b.i[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(b.i[2], 0);
  EXPECT_EQ(b.i[3], -2);
  Buffer l(DType::i64, {1});
  l.set(0, 1e30);
  EXPECT_EQ(l.i[0], std::numeric_limits<int64_t>::max());
}

TEST(Shapes, SameElementCount) {
  SymbolTable t;
  const int32_t b = t.declare("b", 1, 8), s = t.declare("s", 1, 8);
  EXPECT_TRUE(same_element_count({Dim::sym(b), Dim::fixed(6)}, {Dim::fixed(2), Dim::sym(b), Dim::fixed(3)}));
  EXPECT_FALSE(same_element_count({Dim::sym(b), Dim::fixed(6)}, {Dim::sym(s), Dim::fixed(6)}));
  EXPECT_TRUE(same_element_count({Dim::sym(b), Dim::sym(s)}, {Dim::sym(s), Dim::sym(b)}));
  const Dim huge = Dim::fixed(int64_t{1} << 40);
  // Both products overflow: never reported equal.
  EXPECT_FALSE(same_element_count({huge, huge}, {huge, huge}));
}

TEST(Graph, StateTensorsHaveOneWriter) {
  Graph g;
  auto f = [&](const char* n, std::vector<int64_t> s, TensorKind k) {
    Shape sh;
    for (int64_t d : s) sh.push_back(Dim::fixed(d));
    return g.add_tensor(k, n, DType::f32, sh);
  };
  const auto q = f("q", {1, 4}, TensorKind::input), k = f("k", {1, 2}, TensorKind::input);
  const auto kc = f("kc", {1, 3, 1, 2}, TensorKind::state), vc = f("vc", {1, 3, 1, 2}, TensorKind::state);
  const auto kw = f("kw", {1, 3, 1, 2}, TensorKind::weight);
  const auto pos = g.add_tensor(TensorKind::input, "pos", DType::i32, {Dim::fixed(1)});
  const nlohmann::json attrs = {{"num_q_heads", 2}, {"num_kv_heads", 1}, {"head_dim", 2}};
  try {
    g.add_op("attention_decode", {q, k, k, kw, vc, pos}, attrs, "bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a state tensor"), std::string::npos) << e.what();
  }
  g.add_op("attention_decode", {q, k, k, kc, vc, pos}, attrs, "a1");
  try {
    g.add_op("attention_decode", {q, k, k, kc, vc, pos}, attrs, "a2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already written by op 'attention_decode' (result 'a1')"), std::string::npos) << e.what();
  }
}

TEST(Graph, LateDeclaredInputsHashLikeTheirJson) {
  // Inputs declared between ops get other tensor ids than after a JSON round trip (which declares all bound
  // tensors first); the structural hash must not see the difference.
  Graph g;
  const auto x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::fixed(4)});
  const auto h = g.add_op("silu", {x}, {}, "h");
  const auto w = g.add_tensor(TensorKind::input, "w", DType::f32, {Dim::fixed(4)});
  g.mark_output(g.add_op("mul", {h, w}, {}, "y"), "");
  const Graph back = graph_from_json(graph_to_json_string(g));
  EXPECT_EQ(graph_hash(g), graph_hash(back));
  EXPECT_EQ(graph_to_json_string(g), graph_to_json_string(back));
}

TEST(Graph, TrailingAbsentOptionalsAreDropped) {
  Graph a, b;
  for (Graph* g : {&a, &b}) {
    g->add_tensor(TensorKind::input, "x", DType::f32, {Dim::fixed(2), Dim::fixed(4)});
    g->add_tensor(TensorKind::weight, "w", DType::f32, {Dim::fixed(3), Dim::fixed(4)});
  }
  a.mark_output(a.add_op("linear", {0, 1}, {}, "y"), "");
  b.mark_output(b.add_op("linear", {0, 1, kNoTensor, kNoTensor}, {}, "y"), "");
  EXPECT_EQ(graph_hash(a), graph_hash(b));
}

}  // namespace
}  // namespace weft::test
