// rope: rotary position embedding of every head_dim-sized head of x's last dim, with optional linear or
// Llama 3 frequency scaling.
//
// Precision: the reference computes inv_freq, the angle position * inv_freq and its cos/sin in double,
// then rotates in fp32. HF computes inv_freq and the angle in fp32 (and rounds cos/sin to the model
// dtype), so at large positions its angle is off by up to ~position * 2^-24 rad; the reference is the
// exact value a kernel should approach, not HF's rounding.
#include <cmath>
#include <numbers>

#include "graph/op_def.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

TensorType infer_rope(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  const int64_t hd = c.attr_int("head_dim");
  if (hd < 2 || hd % 2 != 0)
    c.fail("attribute 'head_dim' is " + std::to_string(hd) + "; expected an even size >= 2 (rope rotates pairs)");
  const int64_t last = c.fixed_dim(0, -1, "it is split into heads of head_dim");
  if (last % hd != 0)
    c.fail(c.operand(0) + " dim " + std::to_string(c.rank(0) - 1) + " is " + std::to_string(last) +
           "; expected a multiple of head_dim = " + std::to_string(hd) + " (num_heads * head_dim)");
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
  c.expect_int(1);
  // positions has x's shape without the last dim: one position per row.
  c.expect_rank(1, c.rank(0) - 1);
  for (int k = 0; k < c.rank(1); ++k) c.expect_dim_equal(0, k, 1, k);
  return c.in(0);
}

// inv_freq[i] for i < head_dim/2, scaled as in HF transformers' _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters and _compute_llama3_parameters.
std::vector<double> inv_freqs(const RefCtx& c) {
  const int64_t hd = c.attr_int("head_dim");
  const double theta = c.attr_num("theta");
  const std::string scaling = c.attr_str("scaling");
  const double factor = c.attr_num("factor");
  std::vector<double> inv(static_cast<size_t>(hd / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (scaling == "linear") {
      f /= factor;
    } else if (scaling == "llama3") {
      const double lo = c.attr_num("low_freq_factor"), hi = c.attr_num("high_freq_factor");
      const auto old_len = static_cast<double>(c.attr_int("original_max_position"));
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

void ref_rope(const RefCtx& c) {
  const Buffer &x = c.in(0), &pos = c.in(1);
  Buffer& o = c.out();
  const int64_t hd = c.attr_int("head_dim"), half = hd / 2, d = x.last();
  const bool interleaved = c.attr_str("style") == "interleaved";
  const std::vector<double> inv = inv_freqs(c);
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int64_t r = 0; r < x.rows(); ++r) {
    const auto p = static_cast<double>(pos.i[static_cast<size_t>(r)]);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * inv[static_cast<size_t>(i)];
      cs[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
      sn[static_cast<size_t>(i)] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < d / hd; ++h) {
      const float* xh = &x.f[static_cast<size_t>(r * d + h * hd)];
      float* oh = &o.f[static_cast<size_t>(r * d + h * hd)];
      for (int64_t i = 0; i < half; ++i) {
        // half: (x[i], x[i + hd/2]) as HF's rotate_half; interleaved: (x[2i], x[2i+1]).
        const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const float ci = cs[static_cast<size_t>(i)], si = sn[static_cast<size_t>(i)];
        oh[a] = xh[a] * ci - xh[b] * si;
        oh[b] = xh[b] * ci + xh[a] * si;
      }
    }
  }
}

}  // namespace

const OpDef& op_def_rope() {
  static const OpDef d{"rope",
                       {{"x"}, {"positions"}},
                       false,
                       {},
                       {{"head_dim", AttrKind::integer, nullptr},
                        {"theta", AttrKind::number, 10000.0},
                        {"style", AttrKind::string, "half", {"half", "interleaved"}},
                        {"scaling", AttrKind::string, "none", {"none", "linear", "llama3"}},
                        {"factor", AttrKind::number, 1.0},
                        {"low_freq_factor", AttrKind::number, 1.0},
                        {"high_freq_factor", AttrKind::number, 4.0},
                        {"original_max_position", AttrKind::integer, 8192}},
                       infer_rope,
                       ref_rope};
  return d;
}

}  // namespace weft
