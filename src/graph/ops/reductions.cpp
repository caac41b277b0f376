// Reductions: softmax (last dim), argmax (last dim) and reduce (sum / max / mean over one axis).
// Arithmetic is fp32, as everywhere in the reference interpreter.
// NaN: softmax of a row holding a NaN is all NaN; argmax treats NaN as the maximum (the first NaN wins, as
// torch.argmax does); reduce max propagates NaN (as torch.amax does); sum and mean propagate it naturally.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "graph/op_def.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

// The dims before `axis`, the dim itself and the dims after it, as element counts of a dense buffer.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& shape, size_t axis) {
  AxisSplit s;
  for (size_t k = 0; k < shape.size(); ++k) (k < axis ? s.outer : k == axis ? s.n : s.inner) *= shape[k];
  return s;
}

// ---- softmax ----

TensorType infer_softmax(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  return c.in(0);
}

void ref_softmax(const RefCtx& c) {
  const Buffer& x = c.in(0);
  Buffer& o = c.out();
  const int64_t n = x.last(), rows = x.rows();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x.f[static_cast<size_t>(r * n)];
    float* orow = &o.f[static_cast<size_t>(r * n)];
    // Subtracting the max keeps exp() <= 1: no overflow for large logits.
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < n; ++k) m = std::max(m, xr[k]);
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) {
      orow[k] = std::exp(xr[k] - m);
      sum += orow[k];
    }
    for (int64_t k = 0; k < n; ++k) orow[k] /= sum;
  }
}

// ---- argmax ----

TensorType infer_argmax(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  TensorType out = c.in(0);
  out.shape.pop_back();  // a rank-1 x gives a rank-0 result
  out.dtype = c.attr_str("dtype") == "i32" ? DType::i32 : DType::i64;
  return out;
}

void ref_argmax(const RefCtx& c) {
  const Buffer& x = c.in(0);
  Buffer& o = c.out();
  const int64_t n = x.last(), rows = x.rows();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x.f[static_cast<size_t>(r * n)];
    int64_t best = 0;
    // Strict > keeps the first of equal maxima; a NaN beats everything and nothing beats a NaN.
    for (int64_t k = 1; k < n && !std::isnan(xr[best]); ++k)
      if (std::isnan(xr[k]) || xr[k] > xr[best]) best = k;
    o.i[static_cast<size_t>(r)] = best;
  }
}

// ---- reduce ----

TensorType infer_reduce(const InferCtx& c) {
  c.expect_float(0);
  c.expect_rank_at_least(0, 1);
  const auto a = static_cast<size_t>(c.axis(0, c.attr_int("axis")));
  TensorType out = c.in(0);
  if (c.attr_bool("keepdim"))
    out.shape[a] = Dim::fixed(1);
  else
    out.shape.erase(out.shape.begin() + static_cast<std::ptrdiff_t>(a));
  return out;
}

void ref_reduce(const RefCtx& c) {
  const Buffer& x = c.in(0);
  Buffer& o = c.out();
  const int64_t axis = c.attr_int("axis");
  const AxisSplit s = split_at(x.shape, static_cast<size_t>(axis < 0 ? axis + x.rank() : axis));
  const std::string kind = c.attr_str("kind");
  const bool is_max = kind == "max", is_mean = kind == "mean";
  for (int64_t a = 0; a < s.outer; ++a)
    for (int64_t b = 0; b < s.inner; ++b) {
      const float* p = &x.f[static_cast<size_t>(a * s.n * s.inner + b)];
      float acc = is_max ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (int64_t k = 0; k < s.n; ++k) {
        const float v = p[k * s.inner];
        if (!is_max)
          acc += v;
        else if (std::isnan(v) || v > acc)  // once acc is NaN nothing is > it: NaN sticks
          acc = v;
      }
      if (is_mean) acc /= static_cast<float>(s.n);
      o.f[static_cast<size_t>(a * s.inner + b)] = acc;
    }
}

}  // namespace

const OpDef& op_def_softmax() {
  static const OpDef d{"softmax", {{"x"}}, false, {}, {}, infer_softmax, ref_softmax};
  return d;
}
const OpDef& op_def_argmax() {
  static const OpDef d{"argmax", {{"x"}}, false, {}, {{"dtype", AttrKind::string, "i64", {"i32", "i64"}}},
                       infer_argmax, ref_argmax};
  return d;
}
const OpDef& op_def_reduce() {
  static const OpDef d{"reduce",
                       {{"x"}},
                       false,
                       {},
                       {{"kind", AttrKind::string, nullptr, {"sum", "max", "mean"}},
                        {"axis", AttrKind::integer, -1},
                        {"keepdim", AttrKind::boolean, false}},
                       infer_reduce,
                       ref_reduce};
  return d;
}

}  // namespace weft
