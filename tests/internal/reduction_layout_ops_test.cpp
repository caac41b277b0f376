// softmax, argmax, reduce, cast, reshape, slice and concat against hand-worked values and double-precision
// loops; shape-rule errors; symbolic shapes through a Graph built directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>

#include "op_test_util.hpp"

namespace weft::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kU = 6e-8;  // 2^-24 (fp32 unit roundoff) rounded up

// The message of the weft::Error that fn throws; each of `parts` must occur in it.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
    return;
  }
  ADD_FAILURE() << "no weft::Error thrown";
}

int64_t flat3(const std::vector<int64_t>& s, std::array<int64_t, 3> i) { return (i[0] * s[1] + i[1]) * s[2] + i[2]; }

// Rounds v to `bits` significant bits, nearest even; below 2^(min_exp-1) the spacing stays that of the
// smallest normal (subnormals). Exact in double for the magnitudes used here.
double round_sig(double v, int bits, int min_exp) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e = 0;
  std::frexp(v, &e);
  const double scale = std::ldexp(1.0, bits - std::max(e, min_exp));
  return std::nearbyint(v * scale) / scale;
}
double round_to(DType dt, double v) {
  switch (dt) {
    case DType::bf16: return round_sig(v, 8, -125);
    case DType::f16: return round_sig(v, 11, -13);
    case DType::f32: return round_sig(v, 24, -125);
    default: return std::trunc(v);
  }
}

// ---- softmax ----

TEST(SoftmaxOp, HandWorked) {
  // Row 0: exp([0, ln 3]) = [1, 3], sum 4 -> [0.25, 0.75].
  // Row 1: [1000, 1000] -> [0.5, 0.5]; exp(1000) overflows f32, so this only works after subtracting the max.
  // Row 2: [-inf, 0] -> [0, 1].
  auto r = run_op("softmax", {buffer_of(DType::f32, {3, 2}, {0, std::log(3.0), 1000, 1000, -kInf, 0})});
  expect_close(r.out, {0.25, 0.75, 0.5, 0.5, 0, 1}, 1e-6, 0);
  // A NaN anywhere in a row makes the whole row NaN (as in torch); other rows are unaffected.
  auto n = run_op("softmax", {buffer_of(DType::f32, {2, 3}, {1, kNaN, 2, 0, 0, 0})});
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(std::isnan(n.out.f[size_t(k)])) << k;
  expect_close(run_op("softmax", {buffer_of(DType::f32, {3}, {0, 0, 0})}).out, {1 / 3.0, 1 / 3.0, 1 / 3.0}, 1e-6, 0);
}

TEST(SoftmaxOp, OddShapesAndDtypes) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t n : {1, 3, 127, 4097}) {
      const int64_t rows = 3;
      auto x = random_buffer(dt, {rows, 1, n}, 21, -8, 8);
      auto r = run_op("softmax", {x});
      ASSERT_EQ(r.out.shape, x.shape);
      std::vector<double> want;
      for (int64_t i = 0; i < rows; ++i) {
        double m = -kInf, s = 0;
        for (int64_t j = 0; j < n; ++j) m = std::max(m, double(x.f[size_t(i * n + j)]));
        for (int64_t j = 0; j < n; ++j) s += std::exp(x.f[size_t(i * n + j)] - m);
        for (int64_t j = 0; j < n; ++j) want.push_back(std::exp(x.f[size_t(i * n + j)] - m) / s);
      }
      // Relative error of the f32 kernel: x - m rounds by u*|x - m| <= 16u (inputs in [-8, 8]) which exp
      // passes on, exp itself ~1 ulp, the sum of n positive terms <= (n-1)u, the division u: (n + 20)u.
      // Then one rounding to the dtype.
      expect_close(r.out, want, dtype_eps(dt) + double(n + 20) * kU, 1e-12,
                   std::string(dtype_name(dt)) + " n=" + std::to_string(n));
    }
}

TEST(SoftmaxOp, ShapeErrorsNameTheOperand) {
  expect_error([] { run_op("softmax", {buffer_of(DType::i32, {2}, {1, 2})}); },
               {"op 'softmax'", "operand 'x' has dtype i32", "expected a float dtype"});
  expect_error([] { run_op("softmax", {Buffer(DType::f32, {})}); }, {"op 'softmax'", "operand 'x' has rank 0", "expected rank >= 1"});
}

// ---- argmax ----

TEST(ArgmaxOp, HandWorkedTiesAndNaN) {
  // Row 0: max 3 at 1 and 2 -> first, 1. Row 1: max -0.5 at 2. Row 2: NaN counts as the maximum (as torch):
  // first NaN, 1. Row 3: all -inf -> 0.
  auto x = buffer_of(DType::f32, {4, 4}, {1, 3, 3, 2, -1, -5, -0.5, -2, 1, kNaN, 5, kNaN, -kInf, -kInf, -kInf, -kInf});
  auto r = run_op("argmax", {x});
  EXPECT_EQ(r.out.dtype, DType::i64);
  EXPECT_EQ(r.out.i, (std::vector<int64_t>{1, 2, 1, 0}));
  auto r32 = run_op("argmax", {x}, {{"dtype", "i32"}});
  EXPECT_EQ(r32.out.dtype, DType::i32);
  EXPECT_EQ(r32.out.i, (std::vector<int64_t>{1, 2, 1, 0}));
  // Rank 1 -> rank 0.
  auto s = run_op("argmax", {buffer_of(DType::bf16, {5}, {0, 2, -1, 7, 7})});
  EXPECT_TRUE(s.out.shape.empty());
  EXPECT_EQ(s.out.i, (std::vector<int64_t>{3}));
}

TEST(ArgmaxOp, OddShapesAndDtypes) {
  // bf16 in [-1, 1] has few distinct values, so long rows hold many tied maxima: checks "first index".
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t n : {1, 3, 127, 4097}) {
      auto x = random_buffer(dt, {2, 3, n}, 22);
      auto r = run_op("argmax", {x}, {{"dtype", "i32"}});
      ASSERT_EQ(r.out.shape, (std::vector<int64_t>{2, 3}));
      std::vector<double> want;
      for (int64_t i = 0; i < 6; ++i) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j)
          if (x.f[size_t(i * n + j)] > x.f[size_t(i * n + best)]) best = j;
        want.push_back(double(best));
      }
      expect_close(r.out, want, 0, 0, std::string(dtype_name(dt)) + " n=" + std::to_string(n));  // exact
    }
}

TEST(ArgmaxOp, ShapeErrorsNameTheOperand) {
  expect_error([] { run_op("argmax", {buffer_of(DType::i64, {2}, {1, 2})}); }, {"op 'argmax'", "operand 'x' has dtype i64"});
  expect_error([] { run_op("argmax", {Buffer(DType::f32, {})}); }, {"op 'argmax'", "operand 'x' has rank 0"});
  expect_error([] { run_op("argmax", {buffer_of(DType::f32, {2}, {1, 2})}, {{"dtype", "f32"}}); },
               {"op 'argmax'", "attribute 'dtype' is 'f32'", "'i32', 'i64'"});
}

// ---- reduce ----

TEST(ReduceOp, HandWorked) {
  // x = [[1, 2, 3], [4, 5, 6]]: sums over axis 0 = [5, 7, 9], over axis 1 = [6, 15]; means over axis 1 =
  // [2, 5]; maxima over axis 0 = [4, 5, 6].
  auto x = buffer_of(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto s0 = run_op("reduce", {x}, {{"kind", "sum"}, {"axis", 0}});
  EXPECT_EQ(s0.out.shape, (std::vector<int64_t>{3}));
  expect_close(s0.out, {5, 7, 9}, 0, 0);
  expect_close(run_op("reduce", {x}, {{"kind", "sum"}}).out, {6, 15}, 0, 0);
  auto m1 = run_op("reduce", {x}, {{"kind", "mean"}, {"axis", 1}, {"keepdim", true}});
  EXPECT_EQ(m1.out.shape, (std::vector<int64_t>{2, 1}));
  expect_close(m1.out, {2, 5}, 0, 0);
  auto x0 = run_op("reduce", {x}, {{"kind", "max"}, {"axis", -2}, {"keepdim", true}});
  EXPECT_EQ(x0.out.shape, (std::vector<int64_t>{1, 3}));
  expect_close(x0.out, {4, 5, 6}, 0, 0);
  // Rank 1 without keepdim -> rank 0. Max propagates NaN (as torch.amax).
  auto v = run_op("reduce", {buffer_of(DType::bf16, {3}, {-2, -7, -1})}, {{"kind", "max"}});
  EXPECT_TRUE(v.out.shape.empty());
  expect_close(v.out, {-1}, 0, 0);
  EXPECT_TRUE(std::isnan(run_op("reduce", {buffer_of(DType::f32, {3}, {1, kNaN, 2})}, {{"kind", "max"}}).out.f[0]));
}

TEST(ReduceOp, AllKindsAxesAndOddSizes) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t n : {1, 3, 127, 4097})
      for (int axis : {0, 1, 2, -1}) {
        const auto a = size_t(axis < 0 ? axis + 3 : axis);
        std::vector<int64_t> shape = {2, 3, 2};
        shape[a] = n;
        auto x = random_buffer(dt, shape, 23 + uint32_t(a));
        // The two kept dims, in order.
        const size_t o1 = a == 0 ? 1 : 0, o2 = a == 2 ? 1 : 2;
        for (const char* kind : {"sum", "max", "mean"})
          for (bool keep : {false, true}) {
            auto r = run_op("reduce", {x}, {{"kind", kind}, {"axis", axis}, {"keepdim", keep}});
            std::vector<int64_t> want_shape = shape;
            if (keep)
              want_shape[a] = 1;
            else
              want_shape.erase(want_shape.begin() + std::ptrdiff_t(a));
            EXPECT_EQ(r.out.shape, want_shape);
            const std::string what = std::string(dtype_name(dt)) + " " + kind + " n=" + std::to_string(n) +
                                     " axis=" + std::to_string(axis) + (keep ? " keepdim" : "");
            std::vector<double> want;
            double scale = 1;
            for (int64_t p = 0; p < shape[o1]; ++p)
              for (int64_t q = 0; q < shape[o2]; ++q) {
                double sum = 0, mag = 0, mx = -kInf;
                for (int64_t t = 0; t < n; ++t) {
                  std::array<int64_t, 3> idx{};
                  idx[o1] = p, idx[o2] = q, idx[a] = t;
                  const double v = x.f[size_t(flat3(shape, idx))];
                  sum += v, mag += std::fabs(v), mx = std::max(mx, v);
                }
                const std::string k = kind;
                want.push_back(k == "sum" ? sum : k == "mean" ? sum / double(n) : mx);
                scale = std::max(scale, k == "mean" ? mag / double(n) + 1 : mag + 1);
              }
            // max is exact (it picks one of the inputs, already in the dtype). sum/mean accumulate in f32:
            // sequential summation errs by at most (n-1)u times the sum of magnitudes, the mean's division
            // adds u; then one rounding to the dtype.
            const bool exact = std::string(kind) == "max";
            expect_close(r.out, want, exact ? 0 : dtype_eps(dt), exact ? 0 : scale * (double(n) * kU + 1e-7), what);
          }
      }
}

TEST(ReduceOp, ErrorsNameTheOpAndOperand) {
  auto x = random_buffer(DType::f32, {2, 3}, 1);
  expect_error([&] { run_op("reduce", {x}); }, {"op 'reduce'", "attribute 'kind' is required"});
  expect_error([&] { run_op("reduce", {x}, {{"kind", "prod"}}); }, {"op 'reduce'", "attribute 'kind' is 'prod'"});
  expect_error([&] { run_op("reduce", {x}, {{"kind", "sum"}, {"axis", 2}}); },
               {"op 'reduce'", "axis 2 is out of range for operand 'x' of rank 2", "expected -2 <= axis < 2"});
  expect_error([] { run_op("reduce", {buffer_of(DType::i32, {2}, {1, 2})}, {{"kind", "sum"}}); },
               {"op 'reduce'", "operand 'x' has dtype i32"});
  expect_error([] { run_op("reduce", {Buffer(DType::f32, {})}, {{"kind", "sum"}}); }, {"op 'reduce'", "operand 'x' has rank 0"});
}

// ---- cast ----

Buffer ints(DType dt, std::vector<int64_t> v) {
  Buffer b(dt, {int64_t(v.size())});
  b.i = std::move(v);  // exact: buffer_of would go through double
  return b;
}

TEST(CastOp, FloatRoundingIsNearestEven) {
  // bf16 keeps 8 significant bits: the spacing at 1 is 2^-7. 1 + 2^-8 is a tie between 1 (even) and
  // 1 + 2^-7 -> 1; 1 + 3*2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 (even) -> 1 + 2^-6; a hair above the
  // first tie rounds up to 1 + 2^-7.
  const double t = std::ldexp(1.0, -8);
  auto b = run_op("cast", {buffer_of(DType::f32, {5}, {1 + t, 1 + 3 * t, 1 + t + std::ldexp(1.0, -20), -(1 + t), 3})},
                  {{"dtype", "bf16"}});
  EXPECT_EQ(b.out.dtype, DType::bf16);
  expect_close(b.out, {1, 1 + 4 * t, 1 + 2 * t, -1, 3}, 0, 0);
  // f16 keeps 11 bits (spacing 2^-10 at 1): the same ties one level down; 65520 is past the largest f16
  // (65504) by half a step -> inf; 1e-6 is subnormal: spacing 2^-24, 1e-6 / 2^-24 = 16.78 -> 17 * 2^-24.
  const double h = std::ldexp(1.0, -11);
  auto f = run_op("cast", {buffer_of(DType::f32, {5}, {1 + h, 1 + 3 * h, 65504, 1e-6, 65520})}, {{"dtype", "f16"}});
  EXPECT_EQ(f.out.f, (std::vector<float>{1, float(1 + 4 * h), 65504, float(17 * std::ldexp(1.0, -24)), float(kInf)}));
}

TEST(CastOp, FloatToIntTruncatesAndSaturates) {
  // Toward zero; out of range saturates and NaN -> 0 (CUDA's cvt.rzi does the same).
  auto r = run_op("cast", {buffer_of(DType::f32, {8}, {2.7, -2.7, 0.5, -0.5, 1e10, -1e10, kNaN, 2147483520})}, {{"dtype", "i32"}});
  EXPECT_EQ(r.out.dtype, DType::i32);
  EXPECT_EQ(r.out.i, (std::vector<int64_t>{2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, 2147483520}));
  // 1e10 and 3e9 are exact in f32 and need more than 31 bits.
  auto l = run_op("cast", {buffer_of(DType::bf16, {1}, {-2.5})}, {{"dtype", "i64"}});
  EXPECT_EQ(l.out.i, (std::vector<int64_t>{-2}));
  auto w = run_op("cast", {buffer_of(DType::f32, {4}, {1e10, -3e9, 1e19, -1e19})}, {{"dtype", "i64"}});
  EXPECT_EQ(w.out.i, (std::vector<int64_t>{10000000000, -3000000000, INT64_MAX, INT64_MIN}));
}

TEST(CastOp, IntConversionsAbove2To31) {
  const int64_t p31 = int64_t{1} << 31, p60 = int64_t{1} << 60;
  // i64 -> f32 (24 bits): 2^31 + 1 -> 2^31; 2^24 + 1 ties to 2^24, 2^24 + 3 ties to 2^24 + 4 (even);
  // 2^60 + 2^36 + 1 is just above the tie between 2^60 and 2^60 + 2^37 -> 2^60 + 2^37 (going through double
  // first would round to the tie, then to 2^60).
  auto f = run_op("cast", {ints(DType::i64, {p31 + 1, (1 << 24) + 1, (1 << 24) + 3, p60 + (int64_t{1} << 36) + 1, -p31 - 1})},
                  {{"dtype", "f32"}});
  expect_close(f.out, {double(p31), 16777216, 16777220, double(p60 + (int64_t{1} << 37)), -double(p31)}, 0, 0);
  // i64 -> i32 wraps (keeps the low 32 bits).
  auto n = run_op("cast", {ints(DType::i64, {(int64_t{1} << 32) + 5, p31, -p31 - 1, -7})}, {{"dtype", "i32"}});
  EXPECT_EQ(n.out.i, (std::vector<int64_t>{5, -p31, p31 - 1, -7}));
  // i64 -> i64 and i32 -> i64 are exact, also past 2^53.
  const std::vector<int64_t> big = {(int64_t{1} << 53) + 1, -(int64_t{1} << 62) - 7, INT64_MAX};
  EXPECT_EQ(run_op("cast", {ints(DType::i64, big)}, {{"dtype", "i64"}}).out.i, big);
  EXPECT_EQ(run_op("cast", {ints(DType::i32, {-p31, p31 - 1})}, {{"dtype", "i64"}}).out.i, (std::vector<int64_t>{-p31, p31 - 1}));
  // -> bf16: 257 ties between 256 (even) and 258 -> 256; 259 ties between 258 and 260 (even) -> 260.
  expect_close(run_op("cast", {ints(DType::i32, {257, 259})}, {{"dtype", "bf16"}}).out, {256, 260}, 0, 0);
}

TEST(CastOp, EveryDtypePairAtOddSizes) {
  const DType all[] = {DType::bf16, DType::f16, DType::f32, DType::i32, DType::i64};
  for (int64_t n : {1, 3, 127, 4097})
    for (DType from : all)
      for (DType to : all) {
        // Values up to 1000 need 10 bits: bf16 and f16 destinations round; float -> int truncates.
        auto x = random_buffer(from, {n}, 24, -1000, 1000);
        auto r = run_op("cast", {x}, {{"dtype", std::string(dtype_name(to))}});
        EXPECT_EQ(r.out.dtype, to);
        std::vector<double> want;
        for (int64_t k = 0; k < n; ++k) want.push_back(round_to(to, x.get(k)));
        // Exact: the rounding is fully specified.
        expect_close(r.out, want, 0, 0, std::string(dtype_name(from)) + "->" + std::string(dtype_name(to)) + " n=" + std::to_string(n));
      }
}

TEST(CastOp, RoundTrips) {
  for (DType narrow : {DType::bf16, DType::f16}) {
    auto x = random_buffer(narrow, {4097}, 25, -100, 100);
    auto wide = run_op("cast", {x}, {{"dtype", "f32"}}).out;
    EXPECT_EQ(run_op("cast", {wide}, {{"dtype", std::string(dtype_name(narrow))}}).out.f, x.f);  // every value fits f32
  }
  auto i = random_buffer(DType::i32, {127}, 26, -1e6, 1e6);  // < 2^24: exact in f32
  auto through_f32 = run_op("cast", {run_op("cast", {i}, {{"dtype", "f32"}}).out}, {{"dtype", "i32"}}).out;
  EXPECT_EQ(through_f32.i, i.i);
  expect_error([&] { run_op("cast", {i}); }, {"op 'cast'", "attribute 'dtype' is required"});
  expect_error([&] { run_op("cast", {i}, {{"dtype", "f64"}}); }, {"op 'cast'", "attribute 'dtype' is 'f64'"});
}

// ---- reshape ----

TEST(ReshapeOp, HandWorkedAndOddSizes) {
  // Row-major order is kept: [[1, 2, 3], [4, 5, 6]] -> [[1, 2], [3, 4], [5, 6]].
  auto r = run_op("reshape", {buffer_of(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6})}, {{"shape", {3, 2}}});
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{3, 2}));
  expect_close(r.out, {1, 2, 3, 4, 5, 6}, 0, 0);
  auto s = run_op("reshape", {buffer_of(DType::i64, {1, 1}, {42})}, {{"shape", nlohmann::json::array()}});
  EXPECT_TRUE(s.out.shape.empty());
  EXPECT_EQ(s.out.i, (std::vector<int64_t>{42}));
  for (DType dt : {DType::f32, DType::bf16, DType::i32})
    for (int64_t n : {1, 3, 127, 4097}) {
      auto x = random_buffer(dt, {n, 3}, 27, -50, 50);
      auto y = run_op("reshape", {x}, {{"shape", {3, 1, n}}}).out;
      EXPECT_EQ(y.shape, (std::vector<int64_t>{3, 1, n}));
      EXPECT_EQ(y.dtype, dt);
      std::vector<double> want;
      for (int64_t k = 0; k < 3 * n; ++k) want.push_back(x.get(k));
      expect_close(y, want, 0, 0, std::string(dtype_name(dt)) + " n=" + std::to_string(n));
    }
}

TEST(ReshapeOp, SymbolicShapes) {
  Graph g("t");
  const int32_t batch = g.declare_symbol("batch", 1, 16), seq = g.declare_symbol("seq", 1, 8);
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(batch), Dim::fixed(6)});
  const TensorId y = g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({2, "batch", 3})}}, "y");
  EXPECT_TRUE(g.tensor(y).type.shape == (Shape{Dim::fixed(2), Dim::sym(batch), Dim::fixed(3)}));
  const TensorId xy = g.add_tensor(TensorKind::input, "xy", DType::f32, {Dim::sym(batch), Dim::sym(seq)});
  const TensorId yx = g.add_op("reshape", {xy}, {{"shape", nlohmann::json::array({"seq", 1, "batch"})}}, "yx");
  EXPECT_TRUE(g.tensor(yx).type.shape == (Shape{Dim::sym(seq), Dim::fixed(1), Dim::sym(batch)}));
  expect_error([&] { g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({"batch", 4})}}, "bad"); },
               {"op 'reshape'", "operand 'x' has shape [batch, 6]", "reshaped to [batch, 4]", "same element count"});
  expect_error([&] { g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({6, 3})}}, "bad"); },
               {"op 'reshape'", "[batch, 6]", "[6, 3]"});
  expect_error([&] { g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({"heads", 6})}}, "bad"); },
               {"op 'reshape'", "dim 0 names the symbol 'heads'", "not declared"});
  expect_error([&] { g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({"batch", 6, 0})}}, "bad"); },
               {"op 'reshape'", "attribute 'shape' dim 2 is 0", "expected a fixed size >= 1"});
  expect_error([&] { g.add_op("reshape", {x}, {{"shape", nlohmann::json::array({int64_t{1} << 40, int64_t{1} << 40})}}, "bad"); },
               {"op 'reshape'", "more than 2^48 elements"});

  g.mark_output(y, "");
  std::vector<Buffer> values(g.tensors().size());
  values[size_t(x)] = random_buffer(DType::f32, {5, 6}, 28);
  values[size_t(xy)] = random_buffer(DType::f32, {5, 2}, 29);
  evaluate(g, SymbolValues{5, 2}, values);
  EXPECT_EQ(values[size_t(y)].shape, (std::vector<int64_t>{2, 5, 3}));
  EXPECT_EQ(values[size_t(y)].f, values[size_t(x)].f);
  EXPECT_EQ(values[size_t(yx)].shape, (std::vector<int64_t>{2, 1, 5}));
  EXPECT_EQ(values[size_t(yx)].f, values[size_t(xy)].f);
}

// ---- slice ----

TEST(SliceOp, HandWorked) {
  // x = [[0..3], [4..7], [8..11]]: rows [1, 3) -> 4..11; columns [1, 3) -> [1, 2, 5, 6, 9, 10].
  std::vector<double> v(12);
  for (size_t k = 0; k < 12; ++k) v[k] = double(k);
  auto x = buffer_of(DType::f32, {3, 4}, v);
  auto rows = run_op("slice", {x}, {{"start", 1}, {"end", 3}});
  EXPECT_EQ(rows.out.shape, (std::vector<int64_t>{2, 4}));
  expect_close(rows.out, {4, 5, 6, 7, 8, 9, 10, 11}, 0, 0);
  for (int axis : {1, -1}) {
    auto cols = run_op("slice", {x}, {{"axis", axis}, {"start", 1}, {"end", 3}});
    EXPECT_EQ(cols.out.shape, (std::vector<int64_t>{3, 2}));
    expect_close(cols.out, {1, 2, 5, 6, 9, 10}, 0, 0);
  }
}

TEST(SliceOp, AxesAndOddSizes) {
  for (DType dt : {DType::f32, DType::bf16, DType::i64})
    for (int64_t n : {1, 3, 127, 4097})
      for (int axis : {0, 1, 2, -1, -3}) {
        const auto a = size_t(axis < 0 ? axis + 3 : axis);
        std::vector<int64_t> shape = {2, 3, 2};
        shape[a] = n;
        auto x = random_buffer(dt, shape, 30, -100, 100);
        for (auto [start, end] : std::vector<std::pair<int64_t, int64_t>>{{0, n}, {n - 1, n}, {n / 3, n - n / 3}}) {
          auto r = run_op("slice", {x}, {{"axis", axis}, {"start", start}, {"end", end}});
          std::vector<int64_t> os = shape;
          os[a] = end - start;
          ASSERT_EQ(r.out.shape, os);
          std::vector<double> want;
          for (int64_t i = 0; i < os[0]; ++i)
            for (int64_t j = 0; j < os[1]; ++j)
              for (int64_t k = 0; k < os[2]; ++k) {
                std::array<int64_t, 3> src{i, j, k};
                src[a] += start;
                want.push_back(x.get(flat3(shape, src)));
              }
          expect_close(r.out, want, 0, 0,
                       std::string(dtype_name(dt)) + " axis=" + std::to_string(axis) + " [" + std::to_string(start) + ", " +
                           std::to_string(end) + ") of " + std::to_string(n));
        }
      }
}

TEST(SliceOp, ErrorsAndSymbolicDims) {
  auto x = random_buffer(DType::f32, {3, 4}, 31);
  expect_error([&] { run_op("slice", {x}, {{"axis", 1}, {"start", 1}, {"end", 5}}); },
               {"op 'slice'", "operand 'x' dim 1 (shape [3, 4]) is 4", "expected end 5 <= 4"});
  expect_error([&] { run_op("slice", {x}, {{"start", 2}, {"end", 2}}); }, {"op 'slice'", "operand 'x'", "expected 0 <= start < end"});
  expect_error([&] { run_op("slice", {x}, {{"start", -1}, {"end", 2}}); }, {"op 'slice'", "expected 0 <= start < end"});
  expect_error([&] { run_op("slice", {x}, {{"axis", -3}, {"start", 0}, {"end", 1}}); }, {"op 'slice'", "axis -3 is out of range for operand 'x'"});
  expect_error([&] { run_op("slice", {x}, {{"start", 0}}); }, {"op 'slice'", "attribute 'end' is required"});

  Graph g("t");
  const int32_t batch = g.declare_symbol("batch", 4, 16);
  const TensorId s = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(batch), Dim::fixed(8)});
  const TensorId y = g.add_op("slice", {s}, {{"start", 1}, {"end", 4}}, "y");  // end 4 <= min(batch) = 4
  EXPECT_TRUE(g.tensor(y).type.shape == (Shape{Dim::fixed(3), Dim::fixed(8)}));
  expect_error([&] { g.add_op("slice", {s}, {{"start", 0}, {"end", 5}}, "bad"); },
               {"op 'slice'", "operand 'x' dim 0", "the symbol 'batch' with minimum 4", "expected end 5 <= that minimum"});
  g.mark_output(y, "");
  std::vector<Buffer> values(g.tensors().size());
  values[size_t(s)] = random_buffer(DType::f32, {9, 8}, 32);
  evaluate(g, SymbolValues{9}, values);
  EXPECT_EQ(values[size_t(y)].f, std::vector<float>(values[size_t(s)].f.begin() + 8, values[size_t(s)].f.begin() + 32));
}

// ---- concat ----

TEST(ConcatOp, HandWorked) {
  // Axis 0: [[1, 2]] ++ [[3, 4], [5, 6]] -> [[1, 2], [3, 4], [5, 6]].
  auto r = run_op("concat", {buffer_of(DType::f32, {1, 2}, {1, 2}), buffer_of(DType::f32, {2, 2}, {3, 4, 5, 6})}, {{"axis", 0}});
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{3, 2}));
  expect_close(r.out, {1, 2, 3, 4, 5, 6}, 0, 0);
  // Last axis (default): [[1], [2]] ++ [[3, 4], [5, 6]] -> [[1, 3, 4], [2, 5, 6]]. One operand: a copy.
  auto c = run_op("concat", {buffer_of(DType::i32, {2, 1}, {1, 2}), buffer_of(DType::i32, {2, 2}, {3, 4, 5, 6})});
  EXPECT_EQ(c.out.i, (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(run_op("concat", {buffer_of(DType::f32, {2}, {7, 8})}).out.f, (std::vector<float>{7, 8}));
}

TEST(ConcatOp, AxesAndOddSizes) {
  for (DType dt : {DType::f32, DType::bf16, DType::i32})
    for (int64_t n : {1, 3, 127, 4097})
      for (int axis : {0, 1, 2, -1, -2, -3}) {
        const auto a = size_t(axis < 0 ? axis + 3 : axis);
        const int64_t sizes[3] = {n, 3, 1};  // the operands' sizes along the axis
        std::vector<Buffer> xs;
        for (int i = 0; i < 3; ++i) {
          std::vector<int64_t> s = {2, 3, 2};
          s[a] = sizes[i];
          xs.push_back(random_buffer(dt, s, 33 + uint32_t(i), -100, 100));
        }
        auto r = run_op("concat", xs, {{"axis", axis}});
        std::vector<int64_t> os = {2, 3, 2};
        os[a] = n + 4;
        ASSERT_EQ(r.out.shape, os);
        std::vector<double> want;
        for (int64_t i = 0; i < os[0]; ++i)
          for (int64_t j = 0; j < os[1]; ++j)
            for (int64_t k = 0; k < os[2]; ++k) {
              std::array<int64_t, 3> idx{i, j, k};
              size_t which = 0;
              while (idx[a] >= sizes[which]) idx[a] -= sizes[which++];
              want.push_back(xs[which].get(flat3(xs[which].shape, idx)));
            }
        expect_close(r.out, want, 0, 0, std::string(dtype_name(dt)) + " axis=" + std::to_string(axis) + " n=" + std::to_string(n));
      }
}

TEST(ConcatOp, ErrorsAndSymbolicDims) {
  auto a = random_buffer(DType::f32, {2, 3}, 1);
  expect_error([&] { run_op("concat", {a, random_buffer(DType::bf16, {2, 3}, 1)}); },
               {"op 'concat'", "operand 1 has dtype bf16", "expected f32"});
  expect_error([&] { run_op("concat", {a, random_buffer(DType::f32, {6}, 1)}); }, {"op 'concat'", "operand 1 has rank 1", "expected rank 2"});
  expect_error([&] { run_op("concat", {a, a, random_buffer(DType::f32, {3, 3}, 1)}); },
               {"op 'concat'", "operand 2 dim 0 is 3", "expected 2 (dim 0 of operand 0)"});
  expect_error([&] { run_op("concat", {a}, {{"axis", 2}}); }, {"op 'concat'", "axis 2 is out of range for operand 0"});
  expect_error([] { run_op("concat", {Buffer(DType::f32, {})}); }, {"op 'concat'", "operand 0 has rank 0"});

  Graph g("t");
  const int32_t batch = g.declare_symbol("batch", 1, 16);
  g.declare_symbol("seq", 1, 16);
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(batch), Dim::fixed(4)});
  const TensorId y = g.add_tensor(TensorKind::input, "y", DType::f32, {Dim::sym(batch), Dim::fixed(3)});
  const TensorId z = g.add_tensor(TensorKind::input, "z", DType::f32, {Dim::sym(1), Dim::fixed(3)});
  const TensorId xy = g.add_op("concat", {x, y}, {}, "xy");
  EXPECT_TRUE(g.tensor(xy).type.shape == (Shape{Dim::sym(batch), Dim::fixed(7)}));
  expect_error([&] { g.add_op("concat", {x, y}, {{"axis", 0}}, "bad"); },
               {"op 'concat'", "operand 0 dim 0 is the symbol 'batch'", "concat along a symbolic dim is not supported"});
  expect_error([&] { g.add_op("concat", {x, z}, {}, "bad"); }, {"op 'concat'", "operand 1 dim 0 is seq", "expected batch"});
  expect_error([&] { g.add_op("concat", {}, {}, "bad"); }, {"op 'concat'", "expected at least 1"});
  g.mark_output(xy, "");
  std::vector<Buffer> values(g.tensors().size());
  values[size_t(x)] = random_buffer(DType::f32, {5, 4}, 2);
  values[size_t(y)] = random_buffer(DType::f32, {5, 3}, 3);
  evaluate(g, SymbolValues{5, 0}, values);
  const Buffer& out = values[size_t(xy)];
  ASSERT_EQ(out.shape, (std::vector<int64_t>{5, 7}));
  for (size_t r = 0; r < 5; ++r)
    for (size_t c = 0; c < 7; ++c)
      EXPECT_EQ(out.f[r * 7 + c], c < 4 ? values[size_t(x)].f[r * 4 + c] : values[size_t(y)].f[r * 3 + c - 4]) << r << "," << c;
}

}  // namespace
}  // namespace weft::test
