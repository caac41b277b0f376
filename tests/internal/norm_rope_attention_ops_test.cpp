// embedding, rmsnorm, head_rmsnorm, layernorm, rope and attention_decode against hand-worked values and
// double-precision loops written here independently of the kernels.
//
// Tolerances: inputs are exact in their dtype, the kernels compute in fp32 and the interpreter rounds the
// result once to the dtype. So rtol = dtype_eps(dt) (one rounding) plus fp32 error terms of n * 2^-24
// (~6e-8 per accumulated term) for the sums, stated per test.
#include <gtest/gtest.h>

#include <functional>
#include <numbers>

#include "op_test_util.hpp"

namespace weft::test {
namespace {

constexpr double kF32 = 6e-8;  // 2^-24: one fp32 rounding, relative

// fn must throw weft::Error whose message contains every part.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << parts.front() << "'";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

std::string tag(DType dt, const std::string& rest) { return std::string(dtype_name(dt)) + " " + rest; }

// ---- embedding ----------------------------------------------------------------------------------

TEST(EmbeddingOp, HandWorked) {
  // table rows: 0 -> [1, 2], 1 -> [3, 4], 2 -> [5, 6]; ids [2, 0, 2] -> [5, 6, 1, 2, 5, 6]
  auto r = run_op("embedding", {buffer_of(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}), buffer_of(DType::i32, {3}, {2, 0, 2})});
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{3, 2}));
  expect_close(r.out, {5, 6, 1, 2, 5, 6}, 0, 0);
}

TEST(EmbeddingOp, GathersRowsExactly) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (DType it : {DType::i32, DType::i64})
      for (int64_t v : {1, 3, 127, 4097})
        for (int64_t d : {1, 3, 127}) {
          auto table = random_buffer(dt, {v, d}, 21);
          auto ids = random_buffer(it, {2, 3}, 22, 0, double(v));  // floor of [0, V): ids in [0, V)
          auto r = run_op("embedding", {table, ids});
          EXPECT_EQ(r.out.shape, (std::vector<int64_t>{2, 3, d}));
          EXPECT_EQ(r.out.dtype, dt);
          std::vector<double> want;
          for (int64_t k = 0; k < 6; ++k)
            for (int64_t j = 0; j < d; ++j) want.push_back(table.get(ids.i[size_t(k)] * d + j));
          expect_close(r.out, want, 0, 0, tag(dt, "V=" + std::to_string(v) + " D=" + std::to_string(d)));  // a copy
        }
}

TEST(EmbeddingOp, ScalarIds) {
  auto r = run_op("embedding", {buffer_of(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}), buffer_of(DType::i64, {}, {1})});
  EXPECT_EQ(r.out.shape, (std::vector<int64_t>{3}));
  expect_close(r.out, {4, 5, 6}, 0, 0);
}

TEST(EmbeddingOp, IdOutOfRangeIsARunTimeError) {
  auto table = random_buffer(DType::f32, {3, 2}, 1);
  expect_error([&] { run_op("embedding", {table, buffer_of(DType::i32, {2, 2}, {0, 1, 3, 0})}); },
               {"op 'embedding'", "operand 'ids' at position [1, 0] is 3", "[0, 3)"});
  expect_error([&] { run_op("embedding", {table, buffer_of(DType::i64, {2}, {2, -1})}); },
               {"op 'embedding'", "position [1] is -1", "V = 3"});
}

TEST(EmbeddingOp, ShapeErrorsNameTheOperand) {
  auto ids = buffer_of(DType::i32, {1}, {0});
  expect_error([&] { run_op("embedding", {random_buffer(DType::i32, {3, 2}, 1), ids}); },
               {"op 'embedding'", "operand 'table' has dtype i32", "float"});
  expect_error([&] { run_op("embedding", {random_buffer(DType::f32, {3, 2, 1}, 1), ids}); },
               {"op 'embedding'", "operand 'table' has rank 3", "expected rank 2"});
  expect_error([&] { run_op("embedding", {random_buffer(DType::f32, {3, 2}, 1), random_buffer(DType::f32, {1}, 1)}); },
               {"op 'embedding'", "operand 'ids' has dtype f32", "integer"});
}

// ---- rmsnorm, head_rmsnorm, layernorm -------------------------------------------------------------

// Double rmsnorm of `rows` chunks of n values; weight has n values.
std::vector<double> rms_double(const Buffer& x, const Buffer& w, int64_t n, double eps) {
  std::vector<double> out;
  for (int64_t r = 0; r < x.numel() / n; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += x.get(r * n + j) * x.get(r * n + j);
    const double inv = 1 / std::sqrt(ss / double(n) + eps);
    for (int64_t j = 0; j < n; ++j) out.push_back(x.get(r * n + j) * inv * w.get(j));
  }
  return out;
}

TEST(RmsNormOp, HandWorked) {
  // x = [2, -2, 2, -2]: mean(x^2) = 4, rms = 2 -> x/2 * w = [1, -1, 1, -1] * [1, 2, 3, 0.5] = [1, -2, 3, -0.5]
  auto r = run_op("rmsnorm", {buffer_of(DType::f32, {1, 4}, {2, -2, 2, -2}), buffer_of(DType::f32, {4}, {1, 2, 3, 0.5})},
                  {{"eps", 0}});
  expect_close(r.out, {1, -2, 3, -0.5}, 1e-6, 0);
  // x = [3, 4, 0, 0], eps = 2.75: mean(x^2) + eps = 25/4 + 2.75 = 9, so x/3 = [1, 4/3, 0, 0]
  r = run_op("rmsnorm", {buffer_of(DType::f32, {4}, {3, 4, 0, 0}), buffer_of(DType::f32, {4}, {1, 1, 1, 1})}, {{"eps", 2.75}});
  expect_close(r.out, {1, 4.0 / 3, 0, 0}, 1e-6, 0);
}

TEST(RmsNormOp, MatchesDoubleLoops) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t d : {1, 3, 127, 4097}) {
      auto x = random_buffer(dt, {2, 3, d}, 31), w = random_buffer(dt, {d}, 32);
      auto r = run_op("rmsnorm", {x, w});  // default eps 1e-6
      // Every error is relative to the element: fp32 sum of d squares (positive terms) + ~4 roundings.
      expect_close(r.out, rms_double(x, w, d, 1e-6), dtype_eps(dt) + double(d + 8) * kF32, 0, tag(dt, "d=" + std::to_string(d)));
    }
}

TEST(HeadRmsNormOp, HandWorked) {
  // head_dim 2, w = [1, 2]. Head 0 x = [1, 7]: mean(x^2) = 25, rms 5 -> [0.2, 1.4] * w = [0.2, 2.8].
  // Head 1 x = [2, -2]: mean(x^2) = 4, rms 2 -> [1, -1] * w = [1, -2].
  auto r = run_op("head_rmsnorm", {buffer_of(DType::f32, {1, 4}, {1, 7, 2, -2}), buffer_of(DType::f32, {2}, {1, 2})},
                  {{"head_dim", 2}, {"eps", 0}});
  expect_close(r.out, {0.2, 2.8, 1, -2}, 1e-6, 0);
}

TEST(HeadRmsNormOp, MatchesDoubleLoops) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t hd : {1, 3, 127, 4097})
      for (int64_t heads : {1, 3}) {
        auto x = random_buffer(dt, {3, heads * hd}, 33), w = random_buffer(dt, {hd}, 34);
        auto r = run_op("head_rmsnorm", {x, w}, {{"head_dim", hd}});
        expect_close(r.out, rms_double(x, w, hd, 1e-6), dtype_eps(dt) + double(hd + 8) * kF32, 0,
                     tag(dt, "hd=" + std::to_string(hd) + " heads=" + std::to_string(heads)));
      }
}

TEST(LayerNormOp, HandWorked) {
  // x = [0, 0, 2, 2]: mean 1, deviations [-1, -1, 1, 1], var 1 -> [-1, -1, 1, 1] * [1, 2, 3, 4] + [0.5, 0, 0, -1]
  auto x = buffer_of(DType::f32, {4}, {0, 0, 2, 2}), w = buffer_of(DType::f32, {4}, {1, 2, 3, 4});
  auto r = run_op("layernorm", {x, w, buffer_of(DType::f32, {4}, {0.5, 0, 0, -1})}, {{"eps", 0}});
  expect_close(r.out, {-0.5, -2, 3, 3}, 1e-6, 0);
  r = run_op("layernorm", {x, w}, {{"eps", 0}});  // no bias
  expect_close(r.out, {-1, -2, 3, 4}, 1e-6, 0);
}

TEST(LayerNormOp, MatchesDoubleLoops) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t d : {1, 3, 127, 4097})
      for (bool bias : {true, false}) {
        const int64_t rows = 3;
        auto x = random_buffer(dt, {rows, d}, 41), w = random_buffer(dt, {d}, 42), b = random_buffer(dt, {d}, 43);
        auto r = bias ? run_op("layernorm", {x, w, b}) : run_op("layernorm", {x, w});  // default eps 1e-5
        std::vector<double> want;
        double max_inv = 0;
        for (int64_t i = 0; i < rows; ++i) {
          double mean = 0, var = 0;
          for (int64_t j = 0; j < d; ++j) mean += x.get(i * d + j) / double(d);
          for (int64_t j = 0; j < d; ++j) var += (x.get(i * d + j) - mean) * (x.get(i * d + j) - mean) / double(d);
          const double inv = 1 / std::sqrt(var + 1e-5);
          max_inv = std::max(max_inv, inv);
          for (int64_t j = 0; j < d; ++j) want.push_back((x.get(i * d + j) - mean) * inv * w.get(j) + (bias ? b.get(j) : 0));
        }
        // The fp32 mean is off by up to d * 2^-24 (|x| < 1), shifting every deviation (|x - mean| < 2) by that
        // much before the scale by inv and |w| < 1; the variance adds the same relative error.
        expect_close(r.out, want, dtype_eps(dt), 2 * double(d + 8) * kF32 * (1 + max_inv), tag(dt, "d=" + std::to_string(d)));
      }
}

TEST(NormOps, ShapeErrorsNameTheOperand) {
  auto x = random_buffer(DType::f32, {2, 4}, 1), w4 = random_buffer(DType::f32, {4}, 2);
  expect_error([&] { run_op("rmsnorm", {x, random_buffer(DType::f32, {5}, 1)}); },
               {"op 'rmsnorm'", "operand 'weight' dim 0 is 5", "expected 4"});
  expect_error([&] { run_op("rmsnorm", {x, random_buffer(DType::bf16, {4}, 1)}); },
               {"op 'rmsnorm'", "operand 'weight' has dtype bf16", "expected f32"});
  expect_error([&] { run_op("rmsnorm", {random_buffer(DType::i32, {2, 4}, 1), w4}); }, {"op 'rmsnorm'", "operand 'x' has dtype i32"});
  expect_error([&] { run_op("rmsnorm", {x, w4}, {{"eps", -1}}); }, {"op 'rmsnorm'", "attribute 'eps'", ">= 0"});
  expect_error([&] { run_op("head_rmsnorm", {random_buffer(DType::f32, {2, 10}, 1), w4}, {{"head_dim", 4}}); },
               {"op 'head_rmsnorm'", "operand 'x' dim 1 is 10", "multiple of head_dim = 4"});
  expect_error([&] { run_op("head_rmsnorm", {random_buffer(DType::f32, {2, 8}, 1), random_buffer(DType::f32, {8}, 1)}, {{"head_dim", 4}}); },
               {"op 'head_rmsnorm'", "operand 'weight' dim 0 is 8", "expected 4"});
  expect_error([&] { run_op("head_rmsnorm", {x, w4}); }, {"op 'head_rmsnorm'", "attribute 'head_dim' is required"});
  expect_error([&] { run_op("layernorm", {x, w4, random_buffer(DType::f32, {3}, 1)}); },
               {"op 'layernorm'", "operand 'bias' dim 0 is 3", "expected 4"});
  expect_error([&] { run_op("layernorm", {x, random_buffer(DType::f32, {1, 4}, 1)}); },
               {"op 'layernorm'", "operand 'weight' has rank 2", "expected rank 1"});
  // head_rmsnorm splits the last dim into heads, so it must be fixed.
  Graph g("t");
  const int32_t n = g.declare_symbol("n", 1, 64);
  const TensorId xs = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::fixed(2), Dim::sym(n)});
  const TensorId ws = g.add_tensor(TensorKind::weight, "w", DType::f32, {Dim::fixed(4)});
  expect_error([&] { g.add_op("head_rmsnorm", {xs, ws}, {{"head_dim", 4}}, "y"); },
               {"op 'head_rmsnorm'", "operand 'x' dim 1 is the symbol 'n'", "fixed"});
}

// ---- rope ---------------------------------------------------------------------------------------

struct RopeCfg {
  int64_t head_dim = 4;
  double theta = 10000;
  bool interleaved = false;
  std::string scaling = "none";
  double factor = 1, low = 1, high = 4;
  int64_t original = 8192;

  nlohmann::json attrs() const {
    return {{"head_dim", head_dim}, {"theta", theta}, {"style", interleaved ? "interleaved" : "half"}, {"scaling", scaling},
            {"factor", factor},     {"low_freq_factor", low}, {"high_freq_factor", high}, {"original_max_position", original}};
  }
};

// HF's inv_freq, then _compute_llama3_parameters written as its torch.where masks, in double.
std::vector<double> inv_freq_double(const RopeCfg& c) {
  std::vector<double> out;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const double base = 1.0 / std::pow(c.theta, double(i) / double(c.head_dim));
    if (c.scaling == "linear") {
      out.push_back(base / c.factor);
    } else if (c.scaling == "llama3") {
      const double low_wavelen = double(c.original) / c.low, high_wavelen = double(c.original) / c.high;
      const double wavelen = 2 * std::numbers::pi / base;
      const double llama = wavelen > low_wavelen ? base / c.factor : base;
      const double smooth = (double(c.original) / wavelen - c.low) / (c.high - c.low);
      const double smoothed = (1 - smooth) * llama / c.factor + smooth * llama;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      out.push_back(medium ? smoothed : llama);
    } else {
      out.push_back(base);
    }
  }
  return out;
}

std::vector<double> rope_double(const Buffer& x, const Buffer& pos, const RopeCfg& c) {
  const auto inv = inv_freq_double(c);
  const int64_t d = x.last(), hd = c.head_dim, half = hd / 2;
  std::vector<double> out(size_t(x.numel()));
  for (int64_t r = 0; r < x.numel() / d; ++r)
    for (int64_t h = 0; h < d / hd; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = double(pos.i[size_t(r)]) * inv[size_t(i)];
        const int64_t base = r * d + h * hd;
        const int64_t a = base + (c.interleaved ? 2 * i : i), b = base + (c.interleaved ? 2 * i + 1 : i + half);
        out[size_t(a)] = x.get(a) * std::cos(angle) - x.get(b) * std::sin(angle);
        out[size_t(b)] = x.get(b) * std::cos(angle) + x.get(a) * std::sin(angle);
      }
  return out;
}

TEST(RopeOp, HandWorked) {
  // head_dim 4, theta 10000: inv_freq = [1, 10000^(-2/4)] = [1, 0.01]; position 1 gives angles 1 and 0.01.
  // half: pairs (x0, x2) by 1 rad and (x1, x3) by 0.01 rad: x0' = 1 cos1 - 3 sin1 = -1.98411065,
  // x2' = 3 cos1 + 1 sin1 = 2.46237790, x1' = 2 cos.01 - 4 sin.01 = 1.95990067, x3' = 4 cos.01 + 2 sin.01 = 4.01979967
  auto x = buffer_of(DType::f32, {1, 4}, {1, 2, 3, 4});
  RopeCfg c;
  auto r = run_op("rope", {x, buffer_of(DType::i32, {1}, {1})}, c.attrs());
  expect_close(r.out, {-1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994}, 0, 1e-6);
  // interleaved: pairs (x0, x1) by 1 rad, (x2, x3) by 0.01 rad: 1 cos1 - 2 sin1 = -1.14263966, 2 cos1 + 1 sin1 =
  // 1.92207560, 3 cos.01 - 4 sin.01 = 2.95985067, 4 cos.01 + 3 sin.01 = 4.02979950
  c.interleaved = true;
  r = run_op("rope", {x, buffer_of(DType::i64, {1}, {1})}, c.attrs());
  expect_close(r.out, {-1.1426396637476532, 1.922075596544176, 2.9598506679133294, 4.029799501669161}, 0, 1e-6);
  // Position 0 is the identity, in both styles.
  r = run_op("rope", {x, buffer_of(DType::i32, {1}, {0})}, c.attrs());
  expect_close(r.out, {1, 2, 3, 4}, 0, 0);
}

TEST(RopeOp, Llama3ScalingHandWorked) {
  // head_dim 6, theta 10000: inv_freq = [1, 0.0464158883, 0.0021544347], wavelens 2pi/f = [6.283, 135.367, 2916.40].
  // original 512, low 1, high 4: low_freq_wavelen 512, high_freq_wavelen 128, factor 8.
  //   6.283 < 128 -> unchanged 1;  2916.40 > 512 -> 0.0021544347 / 8 = 0.000269304336;
  //   135.367 is in between: smooth = (512/135.367 - 1) / 3 = 0.927435617,
  //   f = (1 - smooth) * 0.0464158883 / 8 + smooth * 0.0464158883 = 0.0434687656.
  // x = [1, 1, 1, 0, 0, 0] at position 10 (half style) -> [cos 10f_i ..., sin 10f_i ...].
  RopeCfg c;
  c.head_dim = 6, c.scaling = "llama3", c.factor = 8, c.low = 1, c.high = 4, c.original = 512;
  auto r = run_op("rope", {buffer_of(DType::f32, {6}, {1, 1, 1, 0, 0, 0}), buffer_of(DType::i64, {}, {10})}, c.attrs());
  expect_close(r.out, {-0.8390715290764524, 0.9070016232251478, 0.9999963737609153, -0.5440211108893698,
                       0.42112712506670363, 0.0026930401073327025}, 0, 1e-6);
}

TEST(RopeOp, MatchesDoubleLoops) {
  for (DType dt : {DType::f32, DType::bf16})
    for (bool interleaved : {false, true})
      for (int64_t hd : {2, 6, 128})
        for (int64_t heads : {1, 3})
          for (int64_t rows : {1, 3, 127}) {
            RopeCfg c;
            c.head_dim = hd, c.interleaved = interleaved;
            auto x = random_buffer(dt, {rows, heads * hd}, 51);
            auto pos = random_buffer(rows % 2 ? DType::i64 : DType::i32, {rows}, 52, 0, 70000);
            auto r = run_op("rope", {x, pos}, c.attrs());
            // cos/sin rounded to fp32, two fp32 products and a sum of values below 2: a few 2^-24.
            expect_close(r.out, rope_double(x, pos, c), dtype_eps(dt), 1e-6,
                         tag(dt, "hd=" + std::to_string(hd) + " heads=" + std::to_string(heads) + " rows=" + std::to_string(rows)));
          }
}

TEST(RopeOp, ScalingAndHigherRankMatchDouble) {
  // Llama 3.1's configuration, at positions up to 4 * original, and linear scaling; x [2, 3, H*hd].
  for (const std::string scaling : {"none", "linear", "llama3"})
    for (bool interleaved : {false, true}) {
      RopeCfg c;
      c.head_dim = 128, c.theta = 500000, c.interleaved = interleaved, c.scaling = scaling;
      c.factor = scaling == "linear" ? 4 : 8, c.low = 1, c.high = 4, c.original = 8192;
      auto x = random_buffer(DType::f32, {2, 3, 4 * 128}, 53);
      auto pos = random_buffer(DType::i64, {2, 3}, 54, 0, 32768);
      auto r = run_op("rope", {x, pos}, c.attrs());
      expect_close(r.out, rope_double(x, pos, c), 1e-6, 1e-6, scaling);
    }
}

TEST(RopeOp, ErrorsNameTheOperandOrAttribute) {
  auto x = random_buffer(DType::f32, {2, 8}, 1);
  auto pos = buffer_of(DType::i32, {2}, {0, 1});
  expect_error([&] { run_op("rope", {x, pos}, {{"head_dim", 3}}); }, {"op 'rope'", "attribute 'head_dim' is 3", "even"});
  expect_error([&] { run_op("rope", {random_buffer(DType::f32, {2, 10}, 1), pos}, {{"head_dim", 4}}); },
               {"op 'rope'", "operand 'x' dim 1 is 10", "multiple of head_dim = 4"});
  expect_error([&] { run_op("rope", {x, random_buffer(DType::f32, {2}, 1)}, {{"head_dim", 4}}); },
               {"op 'rope'", "operand 'positions' has dtype f32", "integer"});
  expect_error([&] { run_op("rope", {x, buffer_of(DType::i32, {3}, {0, 1, 2})}, {{"head_dim", 4}}); },
               {"op 'rope'", "operand 'positions' dim 0 is 3", "expected 2"});
  expect_error([&] { run_op("rope", {x, buffer_of(DType::i32, {2, 1}, {0, 1})}, {{"head_dim", 4}}); },
               {"op 'rope'", "operand 'positions' has rank 2", "expected rank 1"});
  expect_error([&] { run_op("rope", {random_buffer(DType::bf16, {2, 8}, 1), pos}, {{"head_dim", 4}, {"style", "gptj"}}); },
               {"op 'rope'", "attribute 'style' is 'gptj'", "'half', 'interleaved'"});
  expect_error([&] { run_op("rope", {x, pos}, {{"head_dim", 4}, {"scaling", "llama3"}, {"factor", 8}, {"high_freq_factor", 1}}); },
               {"op 'rope'", "'high_freq_factor' = 1", "low_freq_factor < high_freq_factor"});
  expect_error([&] { run_op("rope", {x, pos}, {{"head_dim", 4}, {"scaling", "linear"}, {"factor", 0}}); },
               {"op 'rope'", "attribute 'factor'", "> 0"});
}

// ---- attention_decode ---------------------------------------------------------------------------

const std::vector<TensorKind> kAttnKinds = {TensorKind::input, TensorKind::input, TensorKind::input,
                                            TensorKind::state, TensorKind::state, TensorKind::input};

nlohmann::json attn_attrs(int64_t hq, int64_t hkv, int64_t hd) {
  return {{"num_q_heads", hq}, {"num_kv_heads", hkv}, {"head_dim", hd}};
}

TEST(AttentionDecodeOp, HandWorked) {
  // One sequence, one head, head_dim 2, S = 3, position 1, scale 1. Slot 1 gets k_new = [0, 1], v_new = [3, 4];
  // slot 2 holds 9s that must be ignored (beyond the position). q = [0, ln 3]: scores [q.k0, q.k1] = [0, ln 3],
  // softmax = [1/4, 3/4], out = 1/4 [1, 2] + 3/4 [3, 4] = [2.5, 3.5].
  auto r = run_op("attention_decode",
                  {buffer_of(DType::f32, {1, 2}, {0, std::log(3.0)}), buffer_of(DType::f32, {1, 2}, {0, 1}),
                   buffer_of(DType::f32, {1, 2}, {3, 4}), buffer_of(DType::f32, {1, 3, 1, 2}, {1, 0, 7, 7, 9, 9}),
                   buffer_of(DType::f32, {1, 3, 1, 2}, {1, 2, 7, 7, 9, 9}), buffer_of(DType::i32, {1}, {1})},
                  {{"num_q_heads", 1}, {"num_kv_heads", 1}, {"head_dim", 2}, {"scale", 1}}, kAttnKinds);
  expect_close(r.out, {2.5, 3.5}, 0, 1e-6);
  expect_close(r.inputs[3], {1, 0, 0, 1, 9, 9}, 0, 0, "k_cache");
  expect_close(r.inputs[4], {1, 2, 3, 4, 9, 9}, 0, 0, "v_cache");
}

TEST(AttentionDecodeOp, MatchesDoubleLoopsAndUpdatesCaches) {
  struct Heads { int64_t hq, hkv; };
  for (DType dt : {DType::f32, DType::bf16})
    for (Heads hs : {Heads{1, 1}, Heads{4, 1}, Heads{6, 2}, Heads{4, 4}})
      for (int64_t hd : {3, 64})
        for (int64_t s : {1, 3, 127})
          for (double scale_attr : {0.0, 0.3}) {
            const int64_t b_dim = 3, hq = hs.hq, hkv = hs.hkv;
            const std::string what = tag(dt, "hq=" + std::to_string(hq) + " hkv=" + std::to_string(hkv) + " hd=" +
                                                  std::to_string(hd) + " S=" + std::to_string(s));
            auto q = random_buffer(dt, {b_dim, hq * hd}, 61), kn = random_buffer(dt, {b_dim, hkv * hd}, 62);
            auto vn = random_buffer(dt, {b_dim, hkv * hd}, 63);
            auto kc = random_buffer(dt, {b_dim, s, hkv, hd}, 64), vc = random_buffer(dt, {b_dim, s, hkv, hd}, 65);
            const std::vector<double> p = {double(s - 1), 0, double(s / 2)};  // a different position per row
            auto pos = buffer_of(DType::i64, {b_dim}, p);
            nlohmann::json attrs = attn_attrs(hq, hkv, hd);
            if (scale_attr != 0) attrs["scale"] = scale_attr;
            auto r = run_op("attention_decode", {q, kn, vn, kc, vc, pos}, attrs, kAttnKinds);

            // Caches: slot [b, p_b] holds k_new/v_new row b (exact: same dtype), everything else unchanged.
            Buffer want_kc = kc, want_vc = vc;
            const int64_t row = hkv * hd;
            for (int64_t b = 0; b < b_dim; ++b)
              for (int64_t j = 0; j < row; ++j) {
                want_kc.f[size_t((b * s + pos.i[size_t(b)]) * row + j)] = kn.f[size_t(b * row + j)];
                want_vc.f[size_t((b * s + pos.i[size_t(b)]) * row + j)] = vn.f[size_t(b * row + j)];
              }
            EXPECT_EQ(r.inputs[3].f, want_kc.f) << what << " k_cache";
            EXPECT_EQ(r.inputs[4].f, want_vc.f) << what << " v_cache";

            const double scale = scale_attr != 0 ? scale_attr : 1 / std::sqrt(double(hd));
            std::vector<double> want;
            for (int64_t b = 0; b < b_dim; ++b)
              for (int64_t h = 0; h < hq; ++h) {
                const int64_t kvh = h * hkv / hq, pb = pos.i[size_t(b)];
                auto at = [&](const Buffer& c, int64_t t, int64_t j) { return c.get(((b * s + t) * hkv + kvh) * hd + j); };
                std::vector<double> w;
                double mx = -1e300, sum = 0;
                for (int64_t t = 0; t <= pb; ++t) {
                  double dot = 0;
                  for (int64_t j = 0; j < hd; ++j) dot += q.get((b * hq + h) * hd + j) * at(want_kc, t, j);
                  w.push_back(scale * dot);
                  mx = std::max(mx, w.back());
                }
                for (double& v : w) sum += (v = std::exp(v - mx));
                for (int64_t j = 0; j < hd; ++j) {
                  double acc = 0;
                  for (int64_t t = 0; t <= pb; ++t) acc += w[size_t(t)] * at(want_vc, t, j);
                  want.push_back(acc / sum);
                }
              }
            // Scores: an fp32 dot of hd terms (|q.k| <= hd) times scale, error ~ hd * hd * scale * 2^-24; the
            // output (|v| < 1) moves by up to twice that, plus the fp32 weighted sum over S terms.
            const double atol = 2 * kF32 * (2 * double(hd * hd) * scale + 2 * double(s)) + 1e-7;
            expect_close(r.out, want, dtype_eps(dt), atol, what);
          }
}

TEST(AttentionDecodeOp, LongCache) {
  // S = 4097 with the position at the last slot: a softmax over every slot.
  const int64_t s = 4097, hd = 3;
  auto q = random_buffer(DType::f32, {1, 2 * hd}, 71), kn = random_buffer(DType::f32, {1, hd}, 72);
  auto vn = random_buffer(DType::f32, {1, hd}, 73);
  auto kc = random_buffer(DType::f32, {1, s, 1, hd}, 74), vc = random_buffer(DType::f32, {1, s, 1, hd}, 75);
  auto r = run_op("attention_decode", {q, kn, vn, kc, vc, buffer_of(DType::i32, {1}, {double(s - 1)})}, attn_attrs(2, 1, hd),
                  kAttnKinds);
  std::vector<double> want;
  for (int64_t h = 0; h < 2; ++h) {
    std::vector<double> w(static_cast<size_t>(s));
    double sum = 0;
    for (int64_t t = 0; t < s; ++t) {
      double dot = 0;
      for (int64_t j = 0; j < hd; ++j) dot += q.get(h * hd + j) * (t == s - 1 ? kn.get(j) : kc.get(t * hd + j));
      sum += (w[size_t(t)] = std::exp(dot / std::sqrt(3.0)));  // |dot| <= 3: no overflow without the max
    }
    for (int64_t j = 0; j < hd; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < s; ++t) acc += w[size_t(t)] * (t == s - 1 ? vn.get(j) : vc.get(t * hd + j));
      want.push_back(acc / sum);
    }
  }
  expect_close(r.out, want, 1e-6, 4 * kF32 * double(s));  // fp32 sums over S terms
}

TEST(AttentionDecodeOp, PositionOutOfRangeIsARunTimeError) {
  auto q = random_buffer(DType::f32, {2, 4}, 1), kv = random_buffer(DType::f32, {2, 4}, 2);
  auto cache = random_buffer(DType::f32, {2, 3, 1, 4}, 3);
  for (double bad : {3.0, -1.0})
    expect_error([&] {
      run_op("attention_decode", {q, kv, kv, cache, cache, buffer_of(DType::i32, {2}, {0, bad})}, attn_attrs(1, 1, 4), kAttnKinds);
    }, {"op 'attention_decode'", "operand 'positions' row 1 is " + std::to_string(int(bad)), "[0, 3)"});
}

TEST(AttentionDecodeOp, ShapeErrorsNameTheOperand) {
  // Valid: Hq 4, Hkv 2, hd 2, B 2, S 3.
  auto q = random_buffer(DType::f32, {2, 8}, 1), kv = random_buffer(DType::f32, {2, 4}, 2);
  auto cache = random_buffer(DType::f32, {2, 3, 2, 2}, 3);
  auto pos = buffer_of(DType::i32, {2}, {0, 1});
  auto run = [&](std::vector<Buffer> in, const nlohmann::json& attrs, std::vector<TensorKind> kinds = kAttnKinds) {
    run_op("attention_decode", std::move(in), attrs, std::move(kinds));
  };
  const auto a = attn_attrs(4, 2, 2);
  run({q, kv, kv, cache, cache, pos}, a);  // the valid case passes
  expect_error([&] { run({q, kv, kv, cache, cache, pos}, attn_attrs(4, 3, 2)); },
               {"op 'attention_decode'", "attribute 'num_q_heads' is 4", "multiple of num_kv_heads = 3"});
  expect_error([&] { run({random_buffer(DType::f32, {2, 6}, 1), kv, kv, cache, cache, pos}, a); },
               {"operand 'q' dim 1 is 6", "expected 8", "num_q_heads * head_dim"});
  expect_error([&] { run({q, kv, random_buffer(DType::f32, {2, 6}, 1), cache, cache, pos}, a); },
               {"operand 'v_new' dim 1 is 6", "expected 4"});
  expect_error([&] { run({q, kv, kv, random_buffer(DType::f32, {2, 3, 1, 2}, 1), cache, pos}, a); },
               {"operand 'k_cache' dim 2 is 1", "expected 2", "num_kv_heads"});
  expect_error([&] { run({q, kv, kv, cache, random_buffer(DType::f32, {2, 4, 2, 2}, 1), pos}, a); },
               {"operand 'v_cache' dim 1 is 4", "expected 3 (dim 1 of operand 'k_cache')"});
  expect_error([&] { run({q, kv, kv, cache, cache, buffer_of(DType::i32, {3}, {0, 0, 0})}, a); },
               {"operand 'positions' dim 0 is 3", "expected 2 (dim 0 of operand 'q')"});
  expect_error([&] { run({q, kv, kv, cache, cache, random_buffer(DType::f32, {2}, 1)}, a); },
               {"operand 'positions' has dtype f32", "integer"});
  expect_error([&] { run({q, kv, kv, random_buffer(DType::bf16, {2, 3, 2, 2}, 1), cache, pos}, a); },
               {"operand 'k_cache' has dtype bf16", "expected f32"});
  expect_error([&] { run({q, kv, kv, cache, cache, pos}, a, {}); },
               {"op 'attention_decode'", "operand 'k_cache' is", "expected a state tensor"});
  expect_error([&] { run({q, kv, kv, cache, cache, pos}, {{"num_q_heads", 4}, {"head_dim", 2}}); },
               {"op 'attention_decode'", "attribute 'num_kv_heads' is required"});
}

TEST(AttentionDecodeOp, SymbolicBatchAndSequence) {
  // B and S are symbols; the shape rule keeps B in the result and the reference runs at B = 2, S = 5.
  Graph g("t");
  const int32_t bs = g.declare_symbol("batch", 1, 8), ss = g.declare_symbol("seq", 1, 4096), other = g.declare_symbol("b2", 1, 8);
  const Dim B = Dim::sym(bs), S = Dim::sym(ss);
  std::vector<TensorId> ids = {
      g.add_tensor(TensorKind::input, "q", DType::f32, {B, Dim::fixed(8)}),
      g.add_tensor(TensorKind::input, "k", DType::f32, {B, Dim::fixed(4)}),
      g.add_tensor(TensorKind::input, "v", DType::f32, {B, Dim::fixed(4)}),
      g.add_tensor(TensorKind::state, "kc", DType::f32, {B, S, Dim::fixed(1), Dim::fixed(4)}),
      g.add_tensor(TensorKind::state, "vc", DType::f32, {B, S, Dim::fixed(1), Dim::fixed(4)}),
      g.add_tensor(TensorKind::input, "pos", DType::i32, {B})};
  auto bad = ids;
  bad[4] = g.add_tensor(TensorKind::state, "vc2", DType::f32, {Dim::sym(other), S, Dim::fixed(1), Dim::fixed(4)});
  expect_error([&] { g.add_op("attention_decode", bad, attn_attrs(2, 1, 4), "bad"); },
               {"op 'attention_decode'", "operand 'v_cache' dim 0 is b2", "expected batch"});
  const TensorId out = g.add_op("attention_decode", ids, attn_attrs(2, 1, 4), "out");
  EXPECT_EQ(g.tensor(out).type.shape, (Shape{B, Dim::fixed(8)}));

  std::vector<Buffer> in = {random_buffer(DType::f32, {2, 8}, 81), random_buffer(DType::f32, {2, 4}, 82),
                            random_buffer(DType::f32, {2, 4}, 83), random_buffer(DType::f32, {2, 5, 1, 4}, 84),
                            random_buffer(DType::f32, {2, 5, 1, 4}, 85), buffer_of(DType::i32, {2}, {4, 2})};
  std::vector<Buffer> values(g.tensors().size());
  for (size_t i = 0; i < ids.size(); ++i) values[size_t(ids[i])] = in[i];
  evaluate(g, SymbolValues{2, 5, 0}, values);
  auto fixed = run_op("attention_decode", in, attn_attrs(2, 1, 4), kAttnKinds);
  EXPECT_EQ(values[size_t(out)].f, fixed.out.f);
  EXPECT_EQ(values[size_t(ids[3])].f, fixed.inputs[3].f);
}

}  // namespace
}  // namespace weft::test
