// Layout ops: cast (any dtype to any), reshape, slice (one axis) and concat (variadic, one axis).
// Except cast they only move elements, so they work on every dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "graph/graph.hpp"
#include "graph/op_def.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

// Copies n elements between two buffers of one dtype (the f or the i storage, whichever it uses).
void copy_elems(const Buffer& src, int64_t from, Buffer& dst, int64_t to, int64_t n) {
  if (is_float(src.dtype))
    std::copy_n(src.f.begin() + from, n, dst.f.begin() + to);
  else
    std::copy_n(src.i.begin() + from, n, dst.i.begin() + to);
}

// Element counts of the dims before `axis` and of the dims after it.
void outer_inner(const std::vector<int64_t>& shape, size_t axis, int64_t& outer, int64_t& inner) {
  outer = inner = 1;
  for (size_t k = 0; k < shape.size(); ++k)
    if (k < axis)
      outer *= shape[k];
    else if (k > axis)
      inner *= shape[k];
}

size_t norm_axis(int64_t a, int rank) { return static_cast<size_t>(a < 0 ? a + rank : a); }

// ---- cast ----

TensorType infer_cast(const InferCtx& c) {
  TensorType out = c.in(0);
  out.dtype = *parse_dtype(c.attr_str("dtype"));  // the attribute's choices are exactly the dtype names
  return out;
}

void ref_cast(const RefCtx& c) {
  const Buffer& x = c.in(0);
  Buffer& o = c.out();
  const bool from_float = is_float(x.dtype), to_float = is_float(o.dtype);
  if (from_float == to_float) {
    // Same storage: the interpreter's round_to_dtype then rounds floats (nearest even) or wraps i64 -> i32.
    copy_elems(x, 0, o, 0, x.numel());
  } else if (to_float) {
    // int -> float directly (one rounding), not through double: i64 above 2^53 would round twice.
    for (size_t k = 0; k < o.f.size(); ++k) o.f[k] = static_cast<float>(x.i[k]);
  } else {
    for (size_t k = 0; k < o.i.size(); ++k) o.i[k] = float_to_int(x.f[k], o.dtype);  // CUDA cvt.rzi semantics
  }
}

// ---- reshape ----

TensorType infer_reshape(const InferCtx& c) {
  const nlohmann::json& spec = c.attr("shape");
  if (spec.size() > static_cast<size_t>(kMaxRank))
    c.fail("attribute 'shape' has " + std::to_string(spec.size()) + " dims; expected at most " + std::to_string(kMaxRank));
  TensorType out = c.in(0);
  out.shape.clear();
  double fixed_product = 1;
  for (size_t k = 0; k < spec.size(); ++k) {
    const nlohmann::json& e = spec[k];
    if (e.is_string()) {
      const std::string name = e.get<std::string>();
      const int32_t id = c.symbols().find(name);
      if (id < 0)
        c.fail("attribute 'shape' dim " + std::to_string(k) + " names the symbol '" + name +
               "', which is not declared; expected a declared symbol or a fixed size");
      out.shape.push_back(Dim::sym(id));
      continue;
    }
    // Checked as double first: a huge JSON integer would wrap in int64, and same_element_count multiplies
    // the fixed dims in int64.
    const auto v = e.get<double>();
    if (v < 1) c.fail("attribute 'shape' dim " + std::to_string(k) + " is " + e.dump() + "; expected a fixed size >= 1 or a symbol name");
    fixed_product *= v;
    if (fixed_product > static_cast<double>(kMaxElements))
      c.fail("attribute 'shape' " + spec.dump() + " has more than 2^48 elements; expected the element count of " +
             c.operand(0) + " " + c.symbols().shape_str(c.shape(0)));
    out.shape.push_back(Dim::fixed(e.get<int64_t>()));
  }
  if (!same_element_count(c.shape(0), out.shape))
    c.fail(c.operand(0) + " has shape " + c.symbols().shape_str(c.shape(0)) + ", which cannot be reshaped to " +
           c.symbols().shape_str(out.shape) +
           "; expected the same element count (equal products of the fixed dims and the same symbols)");
  return out;
}

void ref_reshape(const RefCtx& c) {
  copy_elems(c.in(0), 0, c.out(), 0, c.out().numel());
}

// ---- slice ----

TensorType infer_slice(const InferCtx& c) {
  c.expect_rank_at_least(0, 1);
  const int a = c.axis(0, c.attr_int("axis"));
  const int64_t start = c.attr_int("start"), end = c.attr_int("end");
  if (start < 0 || end <= start)
    c.fail("start " + std::to_string(start) + " and end " + std::to_string(end) + " on dim " + std::to_string(a) + " of " +
           c.operand(0) + "; expected 0 <= start < end");
  const Dim& d = c.shape(0)[static_cast<size_t>(a)];
  const std::string where = c.operand(0) + " dim " + std::to_string(a) + " (shape " + c.symbols().shape_str(c.shape(0)) + ")";
  if (d.is_fixed() && end > d.value)
    c.fail(where + " is " + std::to_string(d.value) + "; expected end " + std::to_string(end) + " <= " + std::to_string(d.value));
  if (!d.is_fixed() && end > c.symbols().min_of(d))
    c.fail(where + " is the symbol '" + c.dim_str(d) + "' with minimum " + std::to_string(c.symbols().min_of(d)) +
           "; expected end " + std::to_string(end) + " <= that minimum, so the slice fits at every value of '" +
           c.dim_str(d) + "'");
  TensorType out = c.in(0);
  out.shape[static_cast<size_t>(a)] = Dim::fixed(end - start);
  return out;
}

void ref_slice(const RefCtx& c) {
  const Buffer& x = c.in(0);
  Buffer& o = c.out();
  const size_t a = norm_axis(c.attr_int("axis"), x.rank());
  const int64_t start = c.attr_int("start"), len = o.shape[a], n = x.shape[a];  // end <= min of dim a: fits
  int64_t outer = 1, inner = 1;
  outer_inner(x.shape, a, outer, inner);
  for (int64_t r = 0; r < outer; ++r) copy_elems(x, (r * n + start) * inner, o, r * len * inner, len * inner);
}

// ---- concat ----

TensorType infer_concat(const InferCtx& c) {
  c.expect_rank_at_least(0, 1);
  const int a = c.axis(0, c.attr_int("axis"));
  const std::string why = "concat along a symbolic dim is not supported";
  int64_t total = 0;
  for (size_t i = 0; i < c.count(); ++i) {
    c.expect_same_dtype(0, i);
    c.expect_rank(i, c.rank(0));
    for (int k = 0; k < c.rank(0); ++k)
      if (k != a) c.expect_dim_equal(0, k, i, k);
    total += c.fixed_dim(i, a, why);
  }
  TensorType out = c.in(0);
  out.shape[static_cast<size_t>(a)] = Dim::fixed(total);
  return out;
}

void ref_concat(const RefCtx& c) {
  Buffer& o = c.out();
  const size_t a = norm_axis(c.attr_int("axis"), o.rank());
  int64_t outer = 1, inner = 1;
  outer_inner(o.shape, a, outer, inner);
  const int64_t row = o.shape[a] * inner;  // elements of the result per outer index
  int64_t offset = 0;                       // where this operand's block starts in each result row
  for (size_t i = 0; i < c.count(); ++i) {
    const Buffer& x = c.in(i);
    const int64_t block = x.shape[a] * inner;
    for (int64_t r = 0; r < outer; ++r) copy_elems(x, r * block, o, r * row + offset, block);
    offset += block;
  }
}

}  // namespace

const OpDef& op_def_cast() {
  static const OpDef d{"cast", {{"x"}}, false, {}, {{"dtype", AttrKind::string, nullptr, {"bf16", "f16", "f32", "i32", "i64"}}},
                       infer_cast, ref_cast};
  return d;
}
const OpDef& op_def_reshape() {
  static const OpDef d{"reshape", {{"x"}}, false, {}, {{"shape", AttrKind::dims, nullptr}}, infer_reshape, ref_reshape};
  return d;
}
const OpDef& op_def_slice() {
  static const OpDef d{"slice",
                       {{"x"}},
                       false,
                       {},
                       {{"axis", AttrKind::integer, 0}, {"start", AttrKind::integer, nullptr}, {"end", AttrKind::integer, nullptr}},
                       infer_slice,
                       ref_slice};
  return d;
}
const OpDef& op_def_concat() {
  static const OpDef d{"concat", {{"x"}}, true, {}, {{"axis", AttrKind::integer, -1}}, infer_concat, ref_concat};
  return d;
}

}  // namespace weft
