// Elementwise ops: add and mul (NumPy broadcasting), silu, gelu, silu_mul (SwiGLU).
#include <cmath>

#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

// ---- broadcasting binary ops ----

TensorType infer_broadcast(const InferCtx& c) {
  c.expect_float(0);
  c.expect_same_dtype(0, 1);
  const Shape& a = c.shape(0);
  const Shape& b = c.shape(1);
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    // Align from the right, as NumPy does.
    const bool has_a = k + a.size() >= r, has_b = k + b.size() >= r;
    const Dim da = has_a ? a[k + a.size() - r] : Dim::fixed(1);
    const Dim db = has_b ? b[k + b.size() - r] : Dim::fixed(1);
    if (da == db || (db.is_fixed() && db.value == 1)) {
      out[k] = da;
    } else if (da.is_fixed() && da.value == 1) {
      out[k] = db;
    } else {
      c.fail("shapes " + c.symbols().shape_str(a) + " and " + c.symbols().shape_str(b) + " do not broadcast: dim " +
             std::to_string(k) + " of the result would be " + c.dim_str(da) + " from operand 'a' and " + c.dim_str(db) +
             " from operand 'b'; expected equal dims or 1");
    }
  }
  return TensorType{c.in(0).dtype, out};
}

// Element offset into `in` (right-aligned, size-1 dims broadcast) for each element of `out`.
template <typename Fn>
void for_each_broadcast(const Buffer& out, const Buffer& a, const Buffer& b, Fn fn) {
  const int r = out.rank();
  auto strides_for = [&](const Buffer& in) {
    std::vector<int64_t> s(static_cast<size_t>(r), 0);
    const auto dense = dense_strides(in.shape);
    for (int k = 0; k < in.rank(); ++k) {
      const auto ko = static_cast<size_t>(k + r - in.rank());
      s[ko] = in.shape[static_cast<size_t>(k)] == 1 ? 0 : dense[static_cast<size_t>(k)];
    }
    return s;
  };
  const auto sa = strides_for(a), sb = strides_for(b);
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  int64_t oa = 0, ob = 0;
  const int64_t n = out.numel();
  for (int64_t k = 0; k < n; ++k) {
    fn(k, oa, ob);
    for (int d = r; d-- > 0;) {
      const auto du = static_cast<size_t>(d);
      oa += sa[du];
      ob += sb[du];
      if (++idx[du] < out.shape[du]) break;
      oa -= sa[du] * out.shape[du];
      ob -= sb[du] * out.shape[du];
      idx[du] = 0;
    }
  }
}

void ref_add(const RefCtx& c) {
  Buffer& o = c.out();
  const Buffer &a = c.in(0), &b = c.in(1);
  for_each_broadcast(o, a, b, [&](int64_t k, int64_t ia, int64_t ib) {
    o.f[static_cast<size_t>(k)] = a.f[static_cast<size_t>(ia)] + b.f[static_cast<size_t>(ib)];
  });
}

void ref_mul(const RefCtx& c) {
  Buffer& o = c.out();
  const Buffer &a = c.in(0), &b = c.in(1);
  for_each_broadcast(o, a, b, [&](int64_t k, int64_t ia, int64_t ib) {
    o.f[static_cast<size_t>(k)] = a.f[static_cast<size_t>(ia)] * b.f[static_cast<size_t>(ib)];
  });
}

// ---- unary ops ----

TensorType infer_unary_float(const InferCtx& c) {
  c.expect_float(0);
  return c.in(0);
}


void ref_silu(const RefCtx& c) {
  const Buffer& x = c.in(0);
  for (size_t k = 0; k < x.f.size(); ++k) c.out().f[k] = silu(x.f[k]);
}

void ref_gelu(const RefCtx& c) {
  const Buffer& x = c.in(0);
  const bool tanh_form = c.attr_str("approximate") == "tanh";
  for (size_t k = 0; k < x.f.size(); ++k) {
    const float v = x.f[k];
    c.out().f[k] = tanh_form ? 0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                             : 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
  }
}

// ---- silu_mul: silu(gate) * up, from one concatenated [.., 2F] operand or two [.., F] ones ----

TensorType infer_silu_mul(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  if (c.has(1)) {
    c.expect_same_dtype(0, 1);
    c.expect_rank(1, c.rank(0));
    for (int k = 0; k < c.rank(0); ++k) c.expect_dim_equal(0, k, 1, k);
    return c.in(0);
  }
  const int64_t two_f = c.fixed_dim(0, -1, "gate and up are concatenated along it");
  if (two_f % 2 != 0)
    c.fail("operand 'gate' last dim is " + std::to_string(two_f) +
           "; expected an even size holding gate then up (or pass 'up' separately)");
  TensorType out = c.in(0);
  out.shape.back() = Dim::fixed(two_f / 2);
  return out;
}

void ref_silu_mul(const RefCtx& c) {
  Buffer& o = c.out();
  const Buffer& g = c.in(0);
  if (c.has(1)) {
    const Buffer& u = c.in(1);
    for (size_t k = 0; k < o.f.size(); ++k) o.f[k] = silu(g.f[k]) * u.f[k];
    return;
  }
  swiglu_rows(g.f.data(), o.f.data(), o.rows(), o.last());
}

}  // namespace

const OpDef& op_def_add() {
  static const OpDef d{"add", {{"a"}, {"b"}}, false, {}, {}, infer_broadcast, ref_add};
  return d;
}
const OpDef& op_def_mul() {
  static const OpDef d{"mul", {{"a"}, {"b"}}, false, {}, {}, infer_broadcast, ref_mul};
  return d;
}
const OpDef& op_def_silu() {
  static const OpDef d{"silu", {{"x"}}, false, {}, {}, infer_unary_float, ref_silu};
  return d;
}
const OpDef& op_def_gelu() {
  static const OpDef d{"gelu", {{"x"}}, false, {}, {{"approximate", AttrKind::string, "none", {"none", "tanh"}}},
                       infer_unary_float, ref_gelu};
  return d;
}
const OpDef& op_def_silu_mul() {
  static const OpDef d{"silu_mul", {{"gate"}, {"up", true}}, false, {}, {}, infer_silu_mul, ref_silu_mul};
  return d;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu_rows(const float* gate_up, float* out, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) out[r * f + j] = silu(gate_up[r * 2 * f + j]) * gate_up[r * 2 * f + f + j];
}

}  // namespace weft
