// attention_decode_qkv: attention_decode fed by the packed output of a q|k|v projection. For each row the op
// splits qkv into q [Hq*hd], k [Hkv*hd] and v [Hkv*hd], applies the optional per-head RMS norms (q_norm_weight,
// k_norm_weight: Qwen3) and rope (the rope op's attributes) to q and k, then runs attention_decode. Its result
// equals, bit for bit, the ops it replaces: slice x3 -> head_rmsnorm x2 -> rope x2 -> attention_decode, each
// rounding to the dtype as those ops' outputs do; on the device one task per (row, kv head) does all of it.
// rope_table (optional, [B, head_dim] f32: the rope_table op's output) gives each row's cos | sin: the op rotates by
// them instead of computing them from the rope attributes (a decode step computes them once for all its layers).
#include <algorithm>
#include <cmath>

#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

enum : size_t { kQkv, kKCache, kVCache, kPositions, kQNorm, kKNorm, kRopeTable };

TensorType infer_attention_decode_qkv(const InferCtx& c) {
  for (const char* a : {"num_q_heads", "num_kv_heads", "head_dim"})
    if (c.attr_int(a) < 1)
      c.fail("attribute '" + std::string(a) + "' is " + std::to_string(c.attr_int(a)) + "; expected a size >= 1");
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  if (hq > (int64_t{1} << 40) / hd || hkv > (int64_t{1} << 40) / hd)
    c.fail("attributes num_q_heads, num_kv_heads and head_dim = " + std::to_string(hq) + ", " + std::to_string(hkv) +
           ", " + std::to_string(hd) + "; expected heads * head_dim <= 2^40");
  if (hq % hkv != 0)
    c.fail("attribute 'num_q_heads' is " + std::to_string(hq) + "; expected a multiple of num_kv_heads = " +
           std::to_string(hkv) + " (each kv head serves num_q_heads / num_kv_heads q heads)");
  if (hd % 2 != 0) c.fail("attribute 'head_dim' is " + std::to_string(hd) + "; expected an even size (rope rotates pairs)");
  if (!(c.attr_num("eps") >= 0)) c.fail("attribute 'eps' is " + std::to_string(c.attr_num("eps")) + "; expected a number >= 0");
  expect_rope_attrs(c);
  c.expect_float(kQkv);
  c.expect_rank(kQkv, 2);
  c.expect_dim_is(kQkv, 1, (hq + 2 * hkv) * hd,
                  "(num_q_heads + 2 * num_kv_heads) * head_dim = (" + std::to_string(hq) + " + 2 * " +
                      std::to_string(hkv) + ") * " + std::to_string(hd) + ": q, then k, then v");
  for (size_t i : {kKCache, kVCache}) {
    c.expect_same_dtype(kQkv, i);
    c.expect_rank(i, 4);
    c.expect_dim_equal(kQkv, 0, i, 0);  // B
  }
  c.expect_dim_is(kKCache, 2, hkv, "num_kv_heads; caches are [B, S, num_kv_heads, head_dim]");
  c.expect_dim_is(kKCache, 3, hd, "head_dim; caches are [B, S, num_kv_heads, head_dim]");
  for (int k = 1; k < 4; ++k) c.expect_dim_equal(kKCache, k, kVCache, k);
  c.expect_int(kPositions);
  c.expect_rank(kPositions, 1);
  c.expect_dim_equal(kQkv, 0, kPositions, 0);
  for (size_t i : {kQNorm, kKNorm})
    if (c.has(i)) {
      c.expect_same_dtype(kQkv, i);
      c.expect_rank(i, 1);
      c.expect_dim_is(i, 0, hd, "head_dim");
    }
  if (c.has(kRopeTable)) {
    if (c.in(kRopeTable).dtype != DType::f32)
      c.fail(c.operand(kRopeTable) + " has dtype " + std::string(dtype_name(c.in(kRopeTable).dtype)) +
             "; expected f32 (the rope_table op's output)");
    c.expect_rank(kRopeTable, 2);
    c.expect_dim_equal(kQkv, 0, kRopeTable, 0);
    c.expect_dim_is(kRopeTable, 1, hd, "head_dim: the cos, then the sin of each of the head_dim / 2 pairs");
  }
  TensorType out = c.in(kQkv);
  out.shape[1] = Dim::fixed(hq * hd);
  return out;
}

void ref_attention_decode_qkv(const RefCtx& c) {
  const Buffer &qkv = c.in(kQkv), &pos = c.in(kPositions);
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  const int64_t rows = qkv.shape[0], width = (hq + 2 * hkv) * hd;
  const float eps = static_cast<float>(c.attr_num("eps"));
  const bool interleaved = c.attr_str("style") == "interleaved";
  const std::vector<double> inv =
      rope_inv_freqs(hd, c.attr_num("theta"), c.attr_str("scaling"), c.attr_num("factor"), c.attr_num("low_freq_factor"),
                     c.attr_num("high_freq_factor"), c.attr_int("original_max_position"));
  std::vector<float> q(static_cast<size_t>(rows * hq * hd)), k(static_cast<size_t>(rows * hkv * hd)),
      v(static_cast<size_t>(rows * hkv * hd)), cs(inv.size()), sn(inv.size()), head(static_cast<size_t>(hd));
  // One head: the optional norm, then rope, each rounded to the dtype as head_rmsnorm and rope store it.
  auto prepare = [&](const float* src, float* dst, const Buffer* norm) {
    if (norm != nullptr) {
      rms_row(src, norm->f.data(), head.data(), hd, eps);
      for (int64_t j = 0; j < hd; ++j) head[static_cast<size_t>(j)] = round_to(qkv.dtype, head[static_cast<size_t>(j)]);
      src = head.data();
    }
    rope_head(src, dst, hd, interleaved, cs.data(), sn.data());
    for (int64_t j = 0; j < hd; ++j) dst[j] = round_to(qkv.dtype, dst[j]);
  };
  for (int64_t b = 0; b < rows; ++b) {
    const float* row = &qkv.f[static_cast<size_t>(b * width)];
    if (c.has(kRopeTable)) {
      const float* given = &c.in(kRopeTable).f[static_cast<size_t>(b * hd)];
      std::copy(given, given + hd / 2, cs.begin());
      std::copy(given + hd / 2, given + hd, sn.begin());
    } else {
      rope_table(inv, static_cast<double>(pos.i[static_cast<size_t>(b)]), cs.data(), sn.data());
    }
    for (int64_t h = 0; h < hq; ++h)
      prepare(row + h * hd, &q[static_cast<size_t>((b * hq + h) * hd)], c.has(kQNorm) ? &c.in(kQNorm) : nullptr);
    for (int64_t h = 0; h < hkv; ++h) {
      prepare(row + (hq + h) * hd, &k[static_cast<size_t>((b * hkv + h) * hd)], c.has(kKNorm) ? &c.in(kKNorm) : nullptr);
      for (int64_t j = 0; j < hd; ++j)
        v[static_cast<size_t>((b * hkv + h) * hd + j)] = row[(hq + hkv + h) * hd + j];
    }
  }
  attention_decode_rows(c, q.data(), k.data(), v.data(), c.in_mut(kKCache), c.in_mut(kVCache), pos, c.out(), hq, hkv, hd,
                        c.attr_num("scale"));
}

}  // namespace

const OpDef& op_def_attention_decode_qkv() {
  static const OpDef d{"attention_decode_qkv",
                       {{"qkv"}, {"k_cache"}, {"v_cache"}, {"positions"}, {"q_norm_weight", true}, {"k_norm_weight", true},
                        {"rope_table", true}},
                       false,
                       {1, 2},
                       with_rope_attrs({{"num_q_heads", AttrKind::integer, nullptr},
                                        {"num_kv_heads", AttrKind::integer, nullptr},
                                        {"head_dim", AttrKind::integer, nullptr},
                                        {"scale", AttrKind::number, 0.0},
                                        {"eps", AttrKind::number, 1e-6}}),
                       infer_attention_decode_qkv,
                       ref_attention_decode_qkv};
  return d;
}

}  // namespace weft
