// add, mul (broadcasting), silu, gelu, silu_mul against double-precision loops and hand-worked values.
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace weft::test {
namespace {

double silu_d(double x) { return x / (1.0 + std::exp(-x)); }

TEST(AddOp, HandWorked) {
  auto r = run_op("add", {buffer_of(DType::f32, {2, 2}, {1, 2, 3, 4}), buffer_of(DType::f32, {2}, {10, 20})});
  expect_close(r.out, {11, 22, 13, 24}, 0, 0);
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{2, 2}));
}

TEST(MulOp, BroadcastsBothWays) {
  // [3,1] * [1,4] -> [3,4]
  auto a = random_buffer(DType::f32, {3, 1}, 1), b = random_buffer(DType::f32, {1, 4}, 2);
  auto r = run_op("mul", {a, b});
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) want.push_back(double(a.f[size_t(i)]) * b.f[size_t(j)]);
  expect_close(r.out, want, 1e-6, 0);
}

TEST(AddOp, OddShapesAndDtypes) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {1, 3, 127, 4097}) {
      auto a = random_buffer(dt, {2, n}, 3), b = random_buffer(dt, {n}, 4);
      auto r = run_op("add", {a, b});
      std::vector<double> want;
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < n; ++j) want.push_back(double(a.f[size_t(i * n + j)]) + b.f[size_t(j)]);
      expect_close(r.out, want, dtype_eps(dt), 1e-6, std::string(dtype_name(dt)) + " n=" + std::to_string(n));
    }
}

TEST(SiluOp, MatchesDouble) {
  for (int64_t n : {1, 3, 127, 4097}) {
    auto x = random_buffer(DType::bf16, {n}, 5, -8, 8);
    auto r = run_op("silu", {x});
    std::vector<double> want;
    for (float v : x.f) want.push_back(silu_d(v));
    expect_close(r.out, want, dtype_eps(DType::bf16), 1e-6);
  }
  expect_close(run_op("silu", {buffer_of(DType::f32, {3}, {0, 1, -1})}).out, {0, 0.7310585786300049, -0.2689414213699951}, 1e-6, 0);
}

TEST(GeluOp, ExactAndTanh) {
  auto x = random_buffer(DType::f32, {127}, 6, -5, 5);
  auto exact = run_op("gelu", {x});
  auto tanh_form = run_op("gelu", {x}, {{"approximate", "tanh"}});
  std::vector<double> we, wt;
  for (float v : x.f) {
    we.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    wt.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expect_close(exact.out, we, 1e-5, 1e-6);
  expect_close(tanh_form.out, wt, 1e-5, 1e-6);
  // gelu(1) = 0.8413447460685429 (exact form).
  expect_close(run_op("gelu", {buffer_of(DType::f32, {1}, {1})}).out, {0.8413447460685429}, 1e-6, 0);
}

TEST(SiluMulOp, ConcatenatedAndSplit) {
  for (int64_t f : {1, 3, 127, 4097}) {
    auto gu = random_buffer(DType::f32, {2, 2 * f}, 7, -4, 4);
    auto cat = run_op("silu_mul", {gu});
    std::vector<double> want;
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t j = 0; j < f; ++j) want.push_back(silu_d(gu.f[size_t(r * 2 * f + j)]) * gu.f[size_t(r * 2 * f + f + j)]);
    expect_close(cat.out, want, 1e-5, 1e-6, "concat f=" + std::to_string(f));

    auto g = random_buffer(DType::f32, {2, f}, 8, -4, 4), u = random_buffer(DType::f32, {2, f}, 9, -4, 4);
    auto split = run_op("silu_mul", {g, u});
    std::vector<double> want2;
    for (size_t k = 0; k < g.f.size(); ++k) want2.push_back(silu_d(g.f[k]) * u.f[k]);
    expect_close(split.out, want2, 1e-5, 1e-6, "split f=" + std::to_string(f));
  }
}

TEST(ElementwiseShapes, Errors) {
  EXPECT_THROW(run_op("add", {random_buffer(DType::f32, {3}, 1), random_buffer(DType::f32, {4}, 1)}), Error);
  EXPECT_THROW(run_op("add", {random_buffer(DType::f32, {3}, 1), random_buffer(DType::bf16, {3}, 1)}), Error);
  EXPECT_THROW(run_op("silu", {random_buffer(DType::i32, {3}, 1)}), Error);
  EXPECT_THROW(run_op("silu_mul", {random_buffer(DType::f32, {2, 5}, 1)}), Error);
  EXPECT_THROW(run_op("gelu", {random_buffer(DType::f32, {2}, 1)}, {{"approximate", "fast"}}), Error);
  try {
    run_op("add", {random_buffer(DType::f32, {2, 3}, 1), random_buffer(DType::f32, {2, 4}, 1)});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op 'add'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("do not broadcast"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::test
