// rope: rotary position embedding of every head_dim-sized head of x's last dim, with optional linear or
// Llama 3 frequency scaling.
//
// Precision: the reference computes inv_freq, the angle position * inv_freq and its cos/sin in double,
// then rotates in fp32. HF computes inv_freq and the angle in fp32 (and rounds cos/sin to the model
// dtype), so at large positions its angle is off by up to ~position * 2^-24 rad; the reference is the
// exact value a kernel should approach, not HF's rounding.
#include <cmath>
#include <iterator>
#include <numbers>

#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

// The head_dim attribute of rope and rope_table: an even size >= 2.
int64_t expect_rope_head_dim(const InferCtx& c) {
  const int64_t hd = c.attr_int("head_dim");
  if (hd < 2 || hd % 2 != 0)
    c.fail("attribute 'head_dim' is " + std::to_string(hd) + "; expected an even size >= 2 (rope rotates pairs)");
  return hd;
}

TensorType infer_rope(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  const int64_t hd = expect_rope_head_dim(c);
  const int64_t last = c.fixed_dim(0, -1, "it is split into heads of head_dim");
  if (last % hd != 0)
    c.fail(c.operand(0) + " dim " + std::to_string(c.rank(0) - 1) + " is " + std::to_string(last) +
           "; expected a multiple of head_dim = " + std::to_string(hd) + " (num_heads * head_dim)");
  expect_rope_attrs(c);
  c.expect_int(1);
  // positions has x's shape without the last dim: one position per row.
  c.expect_rank(1, c.rank(0) - 1);
  for (int k = 0; k < c.rank(1); ++k) c.expect_dim_equal(0, k, 1, k);
  return c.in(0);
}

std::vector<double> inv_freqs(const RefCtx& c) {
  return rope_inv_freqs(c.attr_int("head_dim"), c.attr_num("theta"), c.attr_str("scaling"), c.attr_num("factor"),
                        c.attr_num("low_freq_factor"), c.attr_num("high_freq_factor"), c.attr_int("original_max_position"));
}

void ref_rope(const RefCtx& c) {
  const Buffer &x = c.in(0), &pos = c.in(1);
  Buffer& o = c.out();
  const int64_t hd = c.attr_int("head_dim"), half = hd / 2, d = x.last();
  const bool interleaved = c.attr_str("style") == "interleaved";
  const std::vector<double> inv = inv_freqs(c);
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int64_t r = 0; r < x.rows(); ++r) {
    rope_table(inv, static_cast<double>(pos.i[static_cast<size_t>(r)]), cs.data(), sn.data());
    for (int64_t h = 0; h < d / hd; ++h)
      rope_head(&x.f[static_cast<size_t>(r * d + h * hd)], &o.f[static_cast<size_t>(r * d + h * hd)], hd, interleaved,
                cs.data(), sn.data());
  }
}

// rope_table: positions [..] -> [.., head_dim] f32, per position the cos of every pair index i (columns [0, hd/2))
// and its sin (columns [hd/2, hd)), the values rope and attention_decode_qkv rotate by. A decode step computes them
// once for all of its layers (attention_decode_qkv's optional rope_table input); each attention task otherwise
// builds them itself, a serial chain of double math (~2 us) on its critical path.
TensorType infer_rope_table(const InferCtx& c) {
  const int64_t hd = expect_rope_head_dim(c);
  expect_rope_attrs(c);
  c.expect_int(0);
  c.expect_rank_at_least(0, 1);
  TensorType out = c.in(0);
  out.dtype = DType::f32;
  out.shape.push_back(Dim::fixed(hd));
  return out;
}

void ref_rope_table(const RefCtx& c) {
  const Buffer& pos = c.in(0);
  Buffer& o = c.out();
  const int64_t hd = c.attr_int("head_dim"), half = hd / 2;
  const std::vector<double> inv = inv_freqs(c);
  for (int64_t r = 0; r < pos.numel(); ++r) {
    float* row = &o.f[static_cast<size_t>(r * hd)];
    rope_table(inv, static_cast<double>(pos.i[static_cast<size_t>(r)]), row, row + half);
  }
}

}  // namespace

void expect_rope_attrs(const InferCtx& c) {
  if (!(c.attr_num("theta") > 0))
    c.fail("attribute 'theta' is " + std::to_string(c.attr_num("theta")) + "; expected a number > 0");
  const std::string scaling = c.attr_str("scaling");
  if (scaling != "none" && !(c.attr_num("factor") > 0))
    c.fail("attribute 'factor' is " + std::to_string(c.attr_num("factor")) + "; expected a number > 0 for " + scaling +
           " scaling");
  if (scaling == "llama3") {
    const double lo = c.attr_num("low_freq_factor"), hi = c.attr_num("high_freq_factor");
    if (!(lo > 0 && hi > lo))
      c.fail("attributes 'low_freq_factor' = " + std::to_string(lo) + " and 'high_freq_factor' = " + std::to_string(hi) +
             "; expected 0 < low_freq_factor < high_freq_factor");
    if (c.attr_int("original_max_position") < 1)
      c.fail("attribute 'original_max_position' is " + std::to_string(c.attr_int("original_max_position")) +
             "; expected a size >= 1");
  }
}

// inv_freq[i] for i < head_dim/2, scaled as in HF transformers' _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters and _compute_llama3_parameters.
std::vector<double> rope_inv_freqs(int64_t hd, double theta, const std::string& scaling, double factor, double lo,
                                   double hi, int64_t original_max_position) {
  std::vector<double> inv(static_cast<size_t>(hd / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (scaling == "linear") {
      f /= factor;
    } else if (scaling == "llama3") {
      const auto old_len = static_cast<double>(original_max_position);
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > old_len / lo) {
        f /= factor;  // low frequencies: fully interpolated
      } else if (!(wavelen < old_len / hi)) {
        const double smooth = (old_len / wavelen - lo) / (hi - lo);
        f = (1 - smooth) * f / factor + smooth * f;
      }  // high frequencies: unchanged
    }
    inv[i] = f;
  }
  return inv;
}

void rope_table(const std::vector<double>& inv, double position, float* cs, float* sn) {
  for (size_t i = 0; i < inv.size(); ++i) {
    const double angle = position * inv[i];
    cs[i] = static_cast<float>(std::cos(angle));
    sn[i] = static_cast<float>(std::sin(angle));
  }
}

void rope_head(const float* x, float* out, int64_t hd, bool interleaved, const float* cs, const float* sn) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    // half: (x[i], x[i + hd/2]) as HF's rotate_half; interleaved: (x[2i], x[2i+1]). Both read before either
    // is written, so out may alias x.
    const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
    const float xa = x[a], xb = x[b], ci = cs[static_cast<size_t>(i)], si = sn[static_cast<size_t>(i)];
    out[a] = xa * ci - xb * si;
    out[b] = xb * ci + xa * si;
  }
}

std::vector<AttrSpec> with_rope_attrs(std::vector<AttrSpec> specs) {
  const AttrSpec rope[] = {{"theta", AttrKind::number, 10000.0},
                           {"style", AttrKind::string, "half", {"half", "interleaved"}},
                           {"scaling", AttrKind::string, "none", {"none", "linear", "llama3"}},
                           {"factor", AttrKind::number, 1.0},
                           {"low_freq_factor", AttrKind::number, 1.0},
                           {"high_freq_factor", AttrKind::number, 4.0},
                           {"original_max_position", AttrKind::integer, 8192}};
  specs.insert(specs.end(), std::begin(rope), std::end(rope));
  return specs;
}

const OpDef& op_def_rope() {
  static const OpDef d{"rope",
                       {{"x"}, {"positions"}},
                       false,
                       {},
                       with_rope_attrs({{"head_dim", AttrKind::integer, nullptr}}),
                       infer_rope,
                       ref_rope};
  return d;
}

const OpDef& op_def_rope_table() {
  static const OpDef d{"rope_table",
                       {{"positions"}},
                       false,
                       {},
                       with_rope_attrs({{"head_dim", AttrKind::integer, nullptr}}),
                       infer_rope_table,
                       ref_rope_table};
  return d;
}

}  // namespace weft
