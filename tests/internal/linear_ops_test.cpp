// linear and matmul against double-precision loops.
#include <gtest/gtest.h>

#include "op_test_util.hpp"

namespace weft::test {
namespace {

TEST(LinearOp, HandWorked) {
  // x = [1, 2], W = [[1, 0], [0, 1], [1, 1]], b = [0.5, 0, -1]  -> [1.5, 2, 2]
  auto r = run_op("linear", {buffer_of(DType::f32, {1, 2}, {1, 2}), buffer_of(DType::f32, {3, 2}, {1, 0, 0, 1, 1, 1}),
                             buffer_of(DType::f32, {3}, {0.5, 0, -1})});
  expect_close(r.out, {1.5, 2, 2}, 0, 0);
}

TEST(LinearOp, OddShapesWithBiasAndResidual) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t k : {1, 3, 127, 4097})
      for (int64_t n : {1, 3, 127}) {
        const int64_t rows = 3;
        auto x = random_buffer(dt, {rows, k}, 11), w = random_buffer(dt, {n, k}, 12);
        auto b = random_buffer(dt, {n}, 13), res = random_buffer(dt, {rows, n}, 14);
        auto r = run_op("linear", {x, w, b, res});
        std::vector<double> want;
        double scale = 0;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0, mag = 0;
            for (int64_t t = 0; t < k; ++t) {
              acc += double(x.f[size_t(i * k + t)]) * w.f[size_t(j * k + t)];
              mag += std::fabs(double(x.f[size_t(i * k + t)]) * w.f[size_t(j * k + t)]);
            }
            want.push_back(acc + b.f[size_t(j)] + res.f[size_t(i * n + j)]);
            scale = std::max(scale, mag + 2);
          }
        // Error: f32 accumulation (k * 2^-24 relative to the sum of magnitudes) + one rounding to dtype.
        expect_close(r.out, want, dtype_eps(dt), scale * (double(k) * 6e-8 + 1e-7),
                     std::string(dtype_name(dt)) + " k=" + std::to_string(k) + " n=" + std::to_string(n));
      }
}

TEST(LinearOp, ResidualWithoutBias) {
  auto x = random_buffer(DType::f32, {2, 3}, 1), w = random_buffer(DType::f32, {4, 3}, 2), res = random_buffer(DType::f32, {2, 4}, 3);
  auto r = run_op("linear", {x, w, Buffer{}, res}, {}, {}, {false, false, true, false});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = res.f[size_t(i * 4 + j)];
      for (int t = 0; t < 3; ++t) acc += double(x.f[size_t(i * 3 + t)]) * w.f[size_t(j * 3 + t)];
      want.push_back(acc);
    }
  expect_close(r.out, want, 1e-6, 1e-6);
}

TEST(MatmulOp, BatchedAndShared) {
  for (bool shared : {false, true}) {
    auto a = random_buffer(DType::f32, {2, 3, 5}, 4);
    auto b = shared ? random_buffer(DType::f32, {5, 7}, 5) : random_buffer(DType::f32, {2, 5, 7}, 5);
    auto r = run_op("matmul", {a, b});
    EXPECT_EQ(r.out.shape, (std::vector<int64_t>{2, 3, 7}));
    std::vector<double> want;
    for (int bt = 0; bt < 2; ++bt)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 7; ++n) {
          double acc = 0;
          for (int k = 0; k < 5; ++k) acc += double(a.f[size_t(bt * 15 + m * 5 + k)]) * b.f[size_t((shared ? 0 : bt * 35) + k * 7 + n)];
          want.push_back(acc);
        }
    expect_close(r.out, want, 1e-6, 1e-6);
  }
}

TEST(LinearOp, ShapeErrorsNameTheOperand) {
  try {
    run_op("linear", {random_buffer(DType::f32, {2, 3}, 1), random_buffer(DType::f32, {4, 5}, 1)});
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("operand 'weight' dim 1 is 5"), std::string::npos) << m;
    EXPECT_NE(m.find("expected 3"), std::string::npos) << m;
  }
  EXPECT_THROW(run_op("linear", {random_buffer(DType::f32, {2, 3}, 1), random_buffer(DType::f32, {4, 3}, 1),
                                 random_buffer(DType::f32, {5}, 1)}), Error);
  EXPECT_THROW(run_op("matmul", {random_buffer(DType::f32, {2, 3}, 1), random_buffer(DType::f32, {4, 3}, 1)}), Error);
  EXPECT_THROW(run_op("matmul", {random_buffer(DType::f32, {2, 2, 3}, 1), random_buffer(DType::f32, {3, 2, 3, 4}, 1)}), Error);
}

}  // namespace
}  // namespace weft::test

namespace weft::test {
namespace {

// The fused forms compute exactly what their two ops compute, bit for bit (the intermediate rounded between).
TEST(FusedLinearOps, EqualTheTwoOpsTheyReplace) {
  for (DType dt : {DType::bf16, DType::f32})
    for (int64_t rows : {1, 3}) {
      const int64_t k = 256, n = 37;
      auto x = random_buffer(dt, {rows, k}, 21), nw = random_buffer(dt, {k}, 22), w = random_buffer(dt, {n, k}, 23);
      auto b = random_buffer(dt, {n}, 24), res = random_buffer(dt, {rows, n}, 25);
      auto normed = run_op("rmsnorm", {x, nw}, {{"eps", 1e-5}}).out;
      auto want = run_op("linear", {normed, w, b, res}).out;
      auto got = run_op("rmsnorm_linear", {x, nw, w, b, res}, {{"eps", 1e-5}}).out;
      EXPECT_EQ(got.f, want.f) << "rmsnorm_linear " << dtype_name(dt) << " rows=" << rows;

      auto gu = random_buffer(dt, {rows, 2 * k}, 26);
      auto act = run_op("silu_mul", {gu}).out;
      auto want2 = run_op("linear", {act, w, b, res}).out;
      auto got2 = run_op("silu_mul_linear", {gu, w, b, res}).out;
      EXPECT_EQ(got2.f, want2.f) << "silu_mul_linear " << dtype_name(dt) << " rows=" << rows;

      auto wgu = random_buffer(dt, {2 * n, k}, 27);
      auto want3 = run_op("silu_mul", {run_op("linear", {x, wgu}).out}).out;
      auto got3 = run_op("linear_silu_mul", {x, wgu}).out;
      EXPECT_EQ(got3.shape, (std::vector<int64_t>{rows, n}));
      EXPECT_EQ(got3.f, want3.f) << "linear_silu_mul " << dtype_name(dt) << " rows=" << rows;

      auto want4 = run_op("silu_mul", {run_op("linear", {normed, wgu}).out}).out;
      auto got4 = run_op("linear_silu_mul", {x, wgu, nw}, {{"eps", 1e-5}}).out;
      EXPECT_EQ(got4.f, want4.f) << "linear_silu_mul with a norm weight " << dtype_name(dt) << " rows=" << rows;
    }
}

// linear_silu_mul's norm weight is one row of x's K, of x's dtype.
TEST(FusedLinearOps, LinearSiluMulRefusesANormWeightOfAnotherLength) {
  auto x = random_buffer(DType::bf16, {2, 256}, 1), w = random_buffer(DType::bf16, {8, 256}, 2);
  try {
    run_op("linear_silu_mul", {x, w, random_buffer(DType::bf16, {128}, 3)});
    ADD_FAILURE() << "a norm weight of 128 values for K 256 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("norm_weight"), std::string::npos) << e.what();
  }
}

// linear_silu_mul's weight stacks the gate's rows and the up's: an odd row count, or x of another K, is refused
// naming the operand and what was expected.
TEST(FusedLinearOps, LinearSiluMulRefusesAnOddWeightAndAnotherK) {
  auto x = random_buffer(DType::bf16, {2, 256}, 1);
  const auto message = [&](const Buffer& w) {
    try {
      run_op("linear_silu_mul", {x, w});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string odd = message(random_buffer(DType::bf16, {7, 256}, 2));
  EXPECT_NE(odd.find("'weight' has 7 rows; expected an even number"), std::string::npos) << odd;
  const std::string other_k = message(random_buffer(DType::bf16, {8, 128}, 3));
  EXPECT_NE(other_k.find("'x' last dim is 256; expected 128"), std::string::npos) << other_k;
}

TEST(FusedLinearOps, ShapesTheDeviceCannotStreamAreRefusedNamingK) {
  auto x = random_buffer(DType::bf16, {1, 100}, 1), nw = random_buffer(DType::bf16, {100}, 2);
  auto w = random_buffer(DType::bf16, {8, 100}, 3);
  try {
    run_op("rmsnorm_linear", {x, nw, w});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K = 100"), std::string::npos) << e.what();
  }
  auto gu = random_buffer(DType::bf16, {1, 512}, 4), w2 = random_buffer(DType::bf16, {8, 512}, 5);
  try {
    run_op("silu_mul_linear", {gu, w2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gate and up"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::test
