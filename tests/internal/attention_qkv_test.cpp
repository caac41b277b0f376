// attention_decode_qkv equals, bit for bit, the ops it replaces (slice x3 -> head_rmsnorm x2 -> rope x2 ->
// attention_decode) in the reference interpreter, caches included; its shape errors name the operand.
#include <gtest/gtest.h>

#include "lower/task_graph.hpp"
#include "op_test_util.hpp"

namespace weft::test {
namespace {

struct Case {
  int64_t hq, hkv, hd;
  bool norms;
  std::string style, scaling;
};

// The unfused ops in one graph, the way the decoder built each layer before the fusion.
OpRun run_unfused(const Case& k, const nlohmann::json& rope, double eps, const Buffer& qkv, const Buffer& kc,
                  const Buffer& vc, const Buffer& pos, const Buffer& qn, const Buffer& kn) {
  Graph g("unfused");
  auto fixed = [](const std::vector<int64_t>& dims) {
    Shape s;
    for (int64_t d : dims) s.push_back(Dim::fixed(d));
    return s;
  };
  const TensorId x = g.add_tensor(TensorKind::input, "qkv", qkv.dtype, fixed(qkv.shape));
  const TensorId kci = g.add_tensor(TensorKind::state, "k_cache", kc.dtype, fixed(kc.shape));
  const TensorId vci = g.add_tensor(TensorKind::state, "v_cache", vc.dtype, fixed(vc.shape));
  const TensorId p = g.add_tensor(TensorKind::input, "positions", pos.dtype, fixed(pos.shape));
  const TensorId qw = g.add_tensor(TensorKind::weight, "q_norm", qn.dtype, fixed(qn.shape));
  const TensorId kw = g.add_tensor(TensorKind::weight, "k_norm", kn.dtype, fixed(kn.shape));
  const int64_t qw_cols = k.hq * k.hd, kv_cols = k.hkv * k.hd;
  auto cols = [](int64_t a, int64_t b) { return nlohmann::json{{"axis", -1}, {"start", a}, {"end", b}}; };
  TensorId q = g.add_op("slice", {x}, cols(0, qw_cols), "q");
  TensorId kk = g.add_op("slice", {x}, cols(qw_cols, qw_cols + kv_cols), "k");
  const TensorId v = g.add_op("slice", {x}, cols(qw_cols + kv_cols, qw_cols + 2 * kv_cols), "v");
  if (k.norms) {
    const nlohmann::json hn = {{"eps", eps}, {"head_dim", k.hd}};
    q = g.add_op("head_rmsnorm", {q, qw}, hn, "q_norm_out");
    kk = g.add_op("head_rmsnorm", {kk, kw}, hn, "k_norm_out");
  }
  q = g.add_op("rope", {q, p}, rope, "q_rot");
  kk = g.add_op("rope", {kk, p}, rope, "k_rot");
  const TensorId out = g.add_op("attention_decode", {q, kk, v, kci, vci, p},
                                {{"num_q_heads", k.hq}, {"num_kv_heads", k.hkv}, {"head_dim", k.hd}}, "out");
  g.mark_output(out, "");
  std::vector<Buffer> values(g.tensors().size());
  values[static_cast<size_t>(x)] = qkv;
  values[static_cast<size_t>(kci)] = kc;
  values[static_cast<size_t>(vci)] = vc;
  values[static_cast<size_t>(p)] = pos;
  values[static_cast<size_t>(qw)] = qn;
  values[static_cast<size_t>(kw)] = kn;
  evaluate(g, SymbolValues{}, values);
  return OpRun{values[static_cast<size_t>(out)], {qkv, values[static_cast<size_t>(kci)], values[static_cast<size_t>(vci)], pos}};
}

TEST(AttentionQkvOp, EqualsTheOpsItReplacesBitForBit) {
  const std::vector<Case> cases = {{4, 2, 8, false, "half", "none"},        {6, 2, 16, true, "half", "llama3"},
                                   {3, 3, 8, true, "interleaved", "linear"}, {8, 1, 64, false, "half", "llama3"},
                                   {4, 2, 128, true, "half", "none"}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (const Case& k : cases) {
      const int64_t b_dim = 3, s = 9;
      nlohmann::json rope = {{"head_dim", k.hd}, {"theta", 500000.0}, {"style", k.style}, {"scaling", k.scaling}};
      if (k.scaling != "none") rope["factor"] = 8.0;
      if (k.scaling == "llama3") rope["original_max_position"] = 16;  // small enough that all three bands occur
      const double eps = 1e-5;
      auto qkv = random_buffer(dt, {b_dim, (k.hq + 2 * k.hkv) * k.hd}, 71);
      auto kc = random_buffer(dt, {b_dim, s, k.hkv, k.hd}, 72), vc = random_buffer(dt, {b_dim, s, k.hkv, k.hd}, 73);
      auto qn = random_buffer(dt, {k.hd}, 74, 0.5, 1.5), kn = random_buffer(dt, {k.hd}, 75, 0.5, 1.5);
      auto pos = buffer_of(DType::i32, {b_dim}, {double(s - 1), 0, 4});
      nlohmann::json attrs = rope;
      attrs.update({{"num_q_heads", k.hq}, {"num_kv_heads", k.hkv}, {"eps", eps}});
      const std::vector<TensorKind> kinds = {TensorKind::input, TensorKind::state, TensorKind::state, TensorKind::input,
                                             TensorKind::weight, TensorKind::weight};
      const std::vector<bool> absent = {false, false, false, false, !k.norms, !k.norms};
      const OpRun got = run_op("attention_decode_qkv", {qkv, kc, vc, pos, qn, kn}, attrs, kinds, absent);
      const OpRun want = run_unfused(k, rope, eps, qkv, kc, vc, pos, qn, kn);
      const std::string what = std::string(dtype_name(dt)) + " hq=" + std::to_string(k.hq) + " hkv=" +
                               std::to_string(k.hkv) + " hd=" + std::to_string(k.hd) + " norms=" +
                               std::to_string(k.norms) + " " + k.style + " " + k.scaling;
      EXPECT_EQ(got.out.f, want.out.f) << what;
      EXPECT_EQ(got.inputs[1].f, want.inputs[1].f) << what << " k_cache";
      EXPECT_EQ(got.inputs[2].f, want.inputs[2].f) << what << " v_cache";
      EXPECT_NE(got.inputs[1].f, kc.f) << what << ": the step wrote the k cache";
      // Rotated by the rope_table op's table instead (a decode step's form): the same bits.
      const OpRun table = run_op("rope_table", {pos}, rope, {TensorKind::input});
      ASSERT_EQ(table.out.shape, (std::vector<int64_t>{b_dim, k.hd})) << what;
      ASSERT_EQ(table.out.dtype, DType::f32) << what;
      std::vector<TensorKind> kinds7 = kinds;
      kinds7.push_back(TensorKind::input);
      std::vector<bool> absent7 = absent;
      absent7.push_back(false);
      const OpRun tabled = run_op("attention_decode_qkv", {qkv, kc, vc, pos, qn, kn, table.out}, attrs, kinds7, absent7);
      EXPECT_EQ(tabled.out.f, want.out.f) << what << " with the rope table";
      EXPECT_EQ(tabled.inputs[1].f, want.inputs[1].f) << what << " k_cache with the rope table";
    }
}

// rope_table holds, per position, the cos (columns [0, hd/2)) and sin (then) that rope rotates by: rotating a head
// by them equals the rope op, bit for bit.
TEST(RopeTableOp, HoldsTheCosAndSinRopeRotatesBy) {
  const int64_t hd = 16, rows = 4;
  const nlohmann::json rope = {{"head_dim", hd}, {"theta", 500000.0}, {"scaling", "llama3"}, {"factor", 32.0},
                               {"original_max_position", 16}};
  const Buffer pos = buffer_of(DType::i64, {rows}, {0, 1, 77, 4095});
  const Buffer x = random_buffer(DType::f32, {rows, hd}, 5);
  const OpRun table = run_op("rope_table", {pos}, rope, {TensorKind::input});
  const OpRun rotated = run_op("rope", {x, pos}, rope, {TensorKind::input, TensorKind::input});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const auto at = [&](const Buffer& b, int64_t c) { return b.f[static_cast<size_t>(r * hd + c)]; };
      const float c = at(table.out, i), s = at(table.out, hd / 2 + i), xa = at(x, i), xb = at(x, i + hd / 2);
      EXPECT_EQ(at(rotated.out, i), xa * c - xb * s) << "row " << r << " pair " << i;
      EXPECT_EQ(at(rotated.out, i + hd / 2), xb * c + xa * s) << "row " << r << " pair " << i;
    }
  EXPECT_EQ(table.out.f[0], 1.0f);  // position 0
  EXPECT_EQ(table.out.f[static_cast<size_t>(hd / 2)], 0.0f);
  try {
    run_op("rope_table", {random_buffer(DType::f32, {rows}, 6)}, rope, {TensorKind::input});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'positions'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("integer"), std::string::npos) << e.what();
  }
  try {
    run_op("rope_table", {pos}, {{"head_dim", 7}}, {TensorKind::input});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
  // A head_dim the device does not take is refused when the graph is lowered, naming the op and the size.
  Graph g("wide_rope_table");
  const TensorId p = g.add_tensor(TensorKind::input, "positions", DType::i32, {Dim::fixed(2)});
  g.mark_output(g.add_op("rope_table", {p}, {{"head_dim", int64_t{1} << 21}}, "table"), "");
  try {
    lower(g, SymbolValues{}, LowerOptions{132});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::unsupported);
    const std::string m = e.what();
    EXPECT_NE(m.find("rope_table"), std::string::npos) << m;
    EXPECT_NE(m.find("head_dim 2097152"), std::string::npos) << m;
  }
}

TEST(AttentionQkvOp, ShapeErrorsNameTheOperandAndTheExpectedSize) {
  const nlohmann::json attrs = {{"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 8}};
  const std::vector<TensorKind> kinds = {TensorKind::input, TensorKind::state, TensorKind::state, TensorKind::input};
  auto kc = random_buffer(DType::bf16, {1, 4, 2, 8}, 1), vc = random_buffer(DType::bf16, {1, 4, 2, 8}, 2);
  auto pos = buffer_of(DType::i32, {1}, {0});
  try {
    run_op("attention_decode_qkv", {random_buffer(DType::bf16, {1, 60}, 3), kc, vc, pos}, attrs, kinds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'qkv'"), std::string::npos) << m;
    EXPECT_NE(m.find("64"), std::string::npos) << m;
  }
  try {
    run_op("attention_decode_qkv", {random_buffer(DType::bf16, {1, 64}, 3), kc, vc, pos},
           {{"num_q_heads", 3}, {"num_kv_heads", 2}, {"head_dim", 8}}, kinds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of num_kv_heads"), std::string::npos) << e.what();
  }
  // A rope table of another dtype or width than the op rotates by.
  const std::vector<TensorKind> kinds7 = {TensorKind::input, TensorKind::state, TensorKind::state, TensorKind::input,
                                          TensorKind::weight, TensorKind::weight, TensorKind::input};
  const std::vector<bool> absent7 = {false, false, false, false, true, true, false};
  for (const auto& [table, expect] : {std::pair{random_buffer(DType::bf16, {1, 8}, 4), std::string("expected f32")},
                                      std::pair{random_buffer(DType::f32, {1, 4}, 4), std::string("head_dim")}}) {
    try {
      run_op("attention_decode_qkv", {random_buffer(DType::bf16, {1, 64}, 3), kc, vc, pos, Buffer(), Buffer(), table},
             attrs, kinds7, absent7);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("'rope_table'"), std::string::npos) << m;
      EXPECT_NE(m.find(expect), std::string::npos) << m;
    }
  }
  try {
    run_op("attention_decode_qkv", {random_buffer(DType::bf16, {1, 64}, 3), kc, vc, buffer_of(DType::i32, {1}, {4})}, attrs, kinds);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a cache position in [0, 4)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::test
