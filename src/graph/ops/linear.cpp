// linear (x·Wᵀ + bias + residual) and matmul (batched a·b).
#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

TensorType infer_linear(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  c.expect_same_dtype(0, 1);
  c.expect_rank(1, 2);
  c.expect_dim_equal(0, -1, 1, 1);  // weight is [N, K], K = x's last dim
  TensorType out = c.in(0);
  out.shape.back() = c.shape(1)[0];
  if (c.has(2)) {
    c.expect_same_dtype(0, 2);
    c.expect_rank(2, 1);
    c.expect_dim_equal(1, 0, 2, 0);
  }
  if (c.has(3)) {
    c.expect_same_dtype(0, 3);
    const TensorType& r = c.in(3);
    if (!(r.shape == out.shape))
      c.fail(c.operand(3) + " has shape " + c.symbols().shape_str(r.shape) + "; expected " +
             c.symbols().shape_str(out.shape) + " (the result's shape)");
  }
  return out;
}

void ref_linear(const RefCtx& c) {
  const Buffer& x = c.in(0);
  linear_rows(x.f.data(), c.in(1), c.has(2) ? &c.in(2) : nullptr, c.has(3) ? &c.in(3) : nullptr, c.out(), x.rows());
}

TensorType infer_matmul(const InferCtx& c) {
  c.expect_float(0);
  c.expect_same_dtype(0, 1);
  c.expect_rank_at_least(0, 2);
  c.expect_rank_at_least(1, 2);
  c.expect_dim_equal(0, -1, 1, -2);
  const int ra = c.rank(0), rb = c.rank(1);
  if (rb != 2) {
    if (rb != ra)
      c.fail(c.operand(1) + " has rank " + std::to_string(rb) + "; expected 2 (shared by every batch) or " +
             std::to_string(ra) + " (the rank of operand 'a')");
    for (int k = 0; k < ra - 2; ++k) c.expect_dim_equal(0, k, 1, k);
  }
  TensorType out = c.in(0);
  out.shape.back() = c.shape(1).back();
  return out;
}

void ref_matmul(const RefCtx& c) {
  const Buffer &a = c.in(0), &b = c.in(1);
  Buffer& o = c.out();
  const int64_t m_dim = a.dim(-2), k_dim = a.dim(-1), n_dim = b.dim(-1);
  const int64_t batches = a.numel() / (m_dim * k_dim);
  const bool shared_b = b.rank() == 2;
  for (int64_t bt = 0; bt < batches; ++bt) {
    const float* ap = &a.f[static_cast<size_t>(bt * m_dim * k_dim)];
    const float* bp = &b.f[static_cast<size_t>(shared_b ? 0 : bt * k_dim * n_dim)];
    float* op = &o.f[static_cast<size_t>(bt * m_dim * n_dim)];
    for (int64_t m = 0; m < m_dim; ++m)
      for (int64_t n = 0; n < n_dim; ++n) {
        float acc = 0.0f;
        for (int64_t k = 0; k < k_dim; ++k) acc += ap[m * k_dim + k] * bp[k * n_dim + n];
        op[m * n_dim + n] = acc;
      }
  }
}

}  // namespace

const OpDef& op_def_linear() {
  static const OpDef d{"linear", {{"x"}, {"weight"}, {"bias", true}, {"residual", true}}, false, {}, {}, infer_linear, ref_linear};
  return d;
}
const OpDef& op_def_matmul() {
  static const OpDef d{"matmul", {{"a"}, {"b"}}, false, {}, {}, infer_matmul, ref_matmul};
  return d;
}

void linear_rows(const float* x, const Buffer& w, const Buffer* bias, const Buffer* residual, Buffer& out, int64_t rows) {
  const int64_t k_dim = w.shape[1], n_dim = w.shape[0];
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * k_dim;
    for (int64_t n = 0; n < n_dim; ++n) {
      const float* wr = &w.f[static_cast<size_t>(n * k_dim)];
      float acc = 0.0f;
      for (int64_t k = 0; k < k_dim; ++k) acc += xr[k] * wr[k];
      if (bias) acc += bias->f[static_cast<size_t>(n)];
      if (residual) acc += residual->f[static_cast<size_t>(r * n_dim + n)];
      out.f[static_cast<size_t>(r * n_dim + n)] = acc;
    }
  }
}

}  // namespace weft
