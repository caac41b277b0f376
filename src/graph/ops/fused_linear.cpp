// Decode fusions of a linear with the op that feeds it: rmsnorm_linear (rmsnorm, then linear) and silu_mul_linear
// (SwiGLU of a concatenated [.., 2F] gate/up, then linear). Each computes exactly what the two ops compute, the
// intermediate rounded to the dtype in between; on the GPU every tile normalizes (or activates) its own copy of
// x while its weights stream in, which removes one op, and one wait, from a decoder layer's critical path.
// The device runs them only as streamed GEMV tiles, hence the limits on K below.
// And one fusion of a linear with the op it feeds: linear_silu_mul (the gate/up projection, then SwiGLU; optionally
// after an rmsnorm of x, as rmsnorm_linear), whose tiles compute the SwiGLU of their own columns once, for batched
// steps where every down-projection tile activating all of x (silu_mul_linear) costs more than the op boundary it
// saves. Any K and dtype.
#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

bool fused_linear_supported(int64_t k, DType dtype) {
  const int64_t row_bytes = k * static_cast<int64_t>(dtype_size(dtype));
  return k > 0 && row_bytes % kFusedLinearRowAlign == 0 && row_bytes <= kFusedLinearMaxRowBytes;
}

namespace {

// The linear part: operand `w` is the weight [N, K], then optional bias and residual; x's last dim is K (x_k).
TensorType infer_linear_tail(const InferCtx& c, size_t w, int64_t x_k_axis_mult) {
  c.expect_same_dtype(0, w);
  c.expect_rank(w, 2);
  const int64_t k = c.fixed_dim(w, 1, "the weight's K");
  const int64_t x_k = c.fixed_dim(0, -1, "x's last dim");
  if (x_k != k * x_k_axis_mult)
    c.fail("operand 'x' last dim is " + std::to_string(x_k) + "; expected " + std::to_string(k * x_k_axis_mult) +
           (x_k_axis_mult == 2 ? " (gate and up, each the weight's K = " + std::to_string(k) + ")" : " (the weight's K)"));
  if (!fused_linear_supported(k, c.in(0).dtype))
    c.fail("K = " + std::to_string(k) + " is not supported: a row of the weight must be a multiple of " +
           std::to_string(kFusedLinearRowAlign) + " bytes and at most " + std::to_string(kFusedLinearMaxRowBytes) +
           " (use the unfused ops)");
  TensorType out = c.in(0);
  out.shape.back() = c.shape(w)[0];
  if (c.has(w + 1)) {
    c.expect_same_dtype(0, w + 1);
    c.expect_rank(w + 1, 1);
    c.expect_dim_equal(w, 0, w + 1, 0);
  }
  if (c.has(w + 2)) {
    c.expect_same_dtype(0, w + 2);
    const TensorType& r = c.in(w + 2);
    if (!(r.shape == out.shape))
      c.fail(c.operand(w + 2) + " has shape " + c.symbols().shape_str(r.shape) + "; expected " +
             c.symbols().shape_str(out.shape) + " (the result's shape)");
  }
  return out;
}

TensorType infer_rmsnorm_linear(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  c.expect_same_dtype(0, 1);
  c.expect_rank(1, 1);
  c.expect_dim_equal(0, -1, 1, 0);
  if (!(c.attr_num("eps") > 0)) c.fail("attribute 'eps' is " + std::to_string(c.attr_num("eps")) + "; expected > 0");
  return infer_linear_tail(c, 2, 1);
}

TensorType infer_silu_mul_linear(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  return infer_linear_tail(c, 1, 2);
}

// x [.., K], weight [2F, K] (the gate's rows, then the up's), optionally norm_weight [K] (x RMS-normalized first, as
// rmsnorm_linear normalizes it): [.., F].
TensorType infer_linear_silu_mul(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  c.expect_same_dtype(0, 1);
  c.expect_rank(1, 2);
  const int64_t two_f = c.fixed_dim(1, 0, "the weight's rows: the gate's, then the up's");
  const int64_t k = c.fixed_dim(1, 1, "the weight's K");
  const int64_t x_k = c.fixed_dim(0, -1, "x's last dim");
  if (x_k != k)
    c.fail("operand 'x' last dim is " + std::to_string(x_k) + "; expected " + std::to_string(k) + " (the weight's K)");
  if (two_f % 2 != 0)
    c.fail("operand 'weight' has " + std::to_string(two_f) +
           " rows; expected an even number: the gate's F rows, then the up's F rows");
  if (c.has(2)) {
    c.expect_same_dtype(0, 2);
    c.expect_rank(2, 1);
    c.expect_dim_equal(0, -1, 2, 0);
    if (!(c.attr_num("eps") > 0)) c.fail("attribute 'eps' is " + std::to_string(c.attr_num("eps")) + "; expected > 0");
  }
  TensorType out = c.in(0);
  out.shape.back() = Dim::fixed(two_f / 2);
  return out;
}

// The intermediate as the unfused graph has it: computed in f32, then rounded to x's dtype.
Buffer intermediate(const Buffer& x, int64_t cols) {
  Buffer t;
  t.dtype = x.dtype;
  t.shape = x.shape;
  t.shape.back() = cols;
  t.f.assign(static_cast<size_t>(x.rows() * cols), 0.0f);
  return t;
}

// x's rows RMS-normalized by nw, rounded to x's dtype: the rmsnorm op's result.
Buffer rms_normalized(const Buffer& x, const Buffer& nw, float eps) {
  const int64_t d = x.last();
  Buffer t = intermediate(x, d);
  for (int64_t r = 0; r < x.rows(); ++r)
    rms_row(&x.f[static_cast<size_t>(r * d)], nw.f.data(), &t.f[static_cast<size_t>(r * d)], d, eps);
  t.round_to_dtype();
  return t;
}

void ref_rmsnorm_linear(const RefCtx& c) {
  const Buffer& x = c.in(0);
  const Buffer t = rms_normalized(x, c.in(1), static_cast<float>(c.attr_num("eps")));
  linear_rows(t.f.data(), c.in(2), c.has(3) ? &c.in(3) : nullptr, c.has(4) ? &c.in(4) : nullptr, c.out(), x.rows());
}

void ref_silu_mul_linear(const RefCtx& c) {
  const Buffer& g = c.in(0);
  const int64_t f = g.last() / 2;
  Buffer t = intermediate(g, f);
  swiglu_rows(g.f.data(), t.f.data(), g.rows(), f);
  t.round_to_dtype();
  linear_rows(t.f.data(), c.in(1), c.has(2) ? &c.in(2) : nullptr, c.has(3) ? &c.in(3) : nullptr, c.out(), g.rows());
}

// (rmsnorm, its result rounded to the dtype,) linear, its [.., 2F] result rounded to the dtype, then silu_mul (the
// executor rounds the output).
void ref_linear_silu_mul(const RefCtx& c) {
  const Buffer& x = c.in(0);
  const int64_t f = c.out().last();
  Buffer t = intermediate(x, 2 * f);
  const Buffer normed = c.has(2) ? rms_normalized(x, c.in(2), static_cast<float>(c.attr_num("eps"))) : Buffer{};
  linear_rows(c.has(2) ? normed.f.data() : x.f.data(), c.in(1), nullptr, nullptr, t, x.rows());
  t.round_to_dtype();
  swiglu_rows(t.f.data(), c.out().f.data(), x.rows(), f);
}

}  // namespace

const OpDef& op_def_rmsnorm_linear() {
  static const OpDef d{"rmsnorm_linear", {{"x"}, {"norm_weight"}, {"weight"}, {"bias", true}, {"residual", true}}, false, {},
                       {{"eps", AttrKind::number, 1e-6}}, infer_rmsnorm_linear, ref_rmsnorm_linear};
  return d;
}
const OpDef& op_def_silu_mul_linear() {
  static const OpDef d{"silu_mul_linear", {{"x"}, {"weight"}, {"bias", true}, {"residual", true}}, false, {}, {},
                       infer_silu_mul_linear, ref_silu_mul_linear};
  return d;
}

const OpDef& op_def_linear_silu_mul() {
  static const OpDef d{"linear_silu_mul", {{"x"}, {"weight"}, {"norm_weight", true}}, false, {},
                       {{"eps", AttrKind::number, 1e-6}}, infer_linear_silu_mul, ref_linear_silu_mul};
  return d;
}

}  // namespace weft
