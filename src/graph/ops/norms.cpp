// Normalizations over the last dim: rmsnorm, head_rmsnorm (per head_dim chunk: Qwen3's q/k norm), layernorm.
// The reference computes in fp32 and multiplies by the weight before the one rounding to the dtype (HF
// rounds the normalized value to the input dtype before the weight multiply; that is within one rounding).
#include <cmath>

#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

// eps keeps the square root away from 0; a negative one could make it NaN.
void expect_eps(const InferCtx& c) {
  const double eps = c.attr_num("eps");
  if (!(eps >= 0)) c.fail("attribute 'eps' is " + std::to_string(eps) + "; expected a number >= 0");
}

// Operand `i` is a [D] parameter (weight or bias) with x's dtype, D = x's last dim.
void expect_param(const InferCtx& c, size_t i) {
  c.expect_same_dtype(0, i);
  c.expect_rank(i, 1);
  c.expect_dim_equal(0, -1, i, 0);
}

TensorType infer_rmsnorm(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  expect_eps(c);
  expect_param(c, 1);
  return c.in(0);
}


void ref_rmsnorm(const RefCtx& c) {
  const Buffer &x = c.in(0), &w = c.in(1);
  Buffer& o = c.out();
  const float eps = static_cast<float>(c.attr_num("eps"));
  const int64_t d = x.last();
  for (int64_t r = 0; r < x.rows(); ++r)
    rms_row(&x.f[static_cast<size_t>(r * d)], w.f.data(), &o.f[static_cast<size_t>(r * d)], d, eps);
}

TensorType infer_head_rmsnorm(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  expect_eps(c);
  const int64_t hd = c.attr_int("head_dim");
  if (hd < 1) c.fail("attribute 'head_dim' is " + std::to_string(hd) + "; expected a size >= 1");
  const int64_t last = c.fixed_dim(0, -1, "it is split into heads of head_dim");
  if (last % hd != 0)
    c.fail(c.operand(0) + " dim " + std::to_string(c.rank(0) - 1) + " is " + std::to_string(last) +
           "; expected a multiple of head_dim = " + std::to_string(hd) + " (num_heads * head_dim)");
  c.expect_same_dtype(0, 1);
  c.expect_rank(1, 1);
  c.expect_dim_is(1, 0, hd, "head_dim");
  return c.in(0);
}

void ref_head_rmsnorm(const RefCtx& c) {
  const Buffer &x = c.in(0), &w = c.in(1);
  Buffer& o = c.out();
  const float eps = static_cast<float>(c.attr_num("eps"));
  const int64_t hd = c.attr_int("head_dim");
  // Heads are contiguous chunks, so [..., H*hd] is just rows of hd values.
  for (int64_t r = 0; r < x.numel() / hd; ++r)
    rms_row(&x.f[static_cast<size_t>(r * hd)], w.f.data(), &o.f[static_cast<size_t>(r * hd)], hd, eps);
}

TensorType infer_layernorm(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  expect_eps(c);
  expect_param(c, 1);
  if (c.has(2)) expect_param(c, 2);
  return c.in(0);
}

void ref_layernorm(const RefCtx& c) {
  const Buffer &x = c.in(0), &w = c.in(1);
  Buffer& o = c.out();
  const float eps = static_cast<float>(c.attr_num("eps"));
  const int64_t d = x.last();
  const auto n = static_cast<float>(d);
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float* xr = &x.f[static_cast<size_t>(r * d)];
    float* orow = &o.f[static_cast<size_t>(r * d)];
    // Two passes (mean, then squared deviations): the biased variance torch uses, without the
    // cancellation of E[x^2] - E[x]^2.
    float sum = 0.0f;
    for (int64_t j = 0; j < d; ++j) sum += xr[j];
    const float mean = sum / n;
    float ss = 0.0f;
    for (int64_t j = 0; j < d; ++j) ss += (xr[j] - mean) * (xr[j] - mean);
    const float inv = 1.0f / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < d; ++j) {
      const auto ju = static_cast<size_t>(j);
      orow[j] = (xr[j] - mean) * inv * w.f[ju] + (c.has(2) ? c.in(2).f[ju] : 0.0f);
    }
  }
}

}  // namespace

const OpDef& op_def_rmsnorm() {
  static const OpDef d{"rmsnorm", {{"x"}, {"weight"}}, false, {}, {{"eps", AttrKind::number, 1e-6}},
                       infer_rmsnorm, ref_rmsnorm};
  return d;
}
const OpDef& op_def_head_rmsnorm() {
  static const OpDef d{"head_rmsnorm", {{"x"}, {"weight"}}, false, {},
                       {{"head_dim", AttrKind::integer, nullptr}, {"eps", AttrKind::number, 1e-6}},
                       infer_head_rmsnorm, ref_head_rmsnorm};
  return d;
}
const OpDef& op_def_layernorm() {
  static const OpDef d{"layernorm", {{"x"}, {"weight"}, {"bias", true}}, false, {}, {{"eps", AttrKind::number, 1e-5}},
                       infer_layernorm, ref_layernorm};
  return d;
}

void rms_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t j = 0; j < n; ++j) out[j] = x[j] * inv * w[j];
}

}  // namespace weft
