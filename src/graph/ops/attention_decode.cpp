// attention_decode: one decode step of grouped-query attention over a per-sequence KV cache. For each row b
// the new k/v are written into the STATE caches at positions[b], then q attends over [0, positions[b]].
#include <algorithm>
#include <cmath>

#include "core/half.hpp"
#include "graph/op_def.hpp"
#include "graph/ops/ref_kernels.hpp"
#include "reference/buffer.hpp"

namespace weft {

namespace {

enum : size_t { kQ, kKNew, kVNew, kKCache, kVCache, kPositions };

TensorType infer_attention_decode(const InferCtx& c) {
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  for (const char* a : {"num_q_heads", "num_kv_heads", "head_dim"})
    if (c.attr_int(a) < 1)
      c.fail("attribute '" + std::string(a) + "' is " + std::to_string(c.attr_int(a)) + "; expected a size >= 1");
  if (hq > (int64_t{1} << 48) / hd)  // keeps num_q_heads * head_dim from overflowing below
    c.fail("attributes 'num_q_heads' * 'head_dim' = " + std::to_string(hq) + " * " + std::to_string(hd) +
           "; expected a product <= 2^48");
  if (hq % hkv != 0)
    c.fail("attribute 'num_q_heads' is " + std::to_string(hq) + "; expected a multiple of num_kv_heads = " +
           std::to_string(hkv) + " (each kv head serves num_q_heads / num_kv_heads q heads)");
  c.expect_float(kQ);
  for (size_t i : {kKNew, kVNew, kKCache, kVCache}) c.expect_same_dtype(kQ, i);
  c.expect_rank(kQ, 2);
  c.expect_rank(kKNew, 2);
  c.expect_rank(kVNew, 2);
  c.expect_rank(kKCache, 4);
  c.expect_rank(kVCache, 4);
  c.expect_rank(kPositions, 1);
  c.expect_int(kPositions);
  const std::string hd_s = std::to_string(hd);
  c.expect_dim_is(kQ, 1, hq * hd, "num_q_heads * head_dim = " + std::to_string(hq) + " * " + hd_s);
  const std::string kv_why = "num_kv_heads * head_dim = " + std::to_string(hkv) + " * " + hd_s;
  c.expect_dim_is(kKNew, 1, hkv * hd, kv_why);
  c.expect_dim_is(kVNew, 1, hkv * hd, kv_why);
  c.expect_dim_is(kKCache, 2, hkv, "num_kv_heads; caches are [B, S, num_kv_heads, head_dim]");
  c.expect_dim_is(kKCache, 3, hd, "head_dim; caches are [B, S, num_kv_heads, head_dim]");
  for (size_t i : {kKNew, kVNew, kKCache, kVCache, kPositions}) c.expect_dim_equal(kQ, 0, i, 0);  // B
  for (int k = 1; k < 4; ++k) c.expect_dim_equal(kKCache, k, kVCache, k);                       // S, Hkv, hd
  return c.in(kQ);
}

void ref_attention_decode(const RefCtx& c) {
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  attention_decode_rows(c, c.in(kQ).f.data(), c.in(kKNew).f.data(), c.in(kVNew).f.data(), c.in_mut(kKCache),
                        c.in_mut(kVCache), c.in(kPositions), c.out(), hq, hkv, hd, c.attr_num("scale"));
}

}  // namespace

float round_to(DType dt, float v) {
  return dt == DType::bf16 ? round_to_bf16(v) : dt == DType::f16 ? round_to_f16(v) : v;
}

void attention_decode_rows(const RefCtx& c, const float* q, const float* kn, const float* vn, Buffer& kc, Buffer& vc,
                           const Buffer& pos, Buffer& o, int64_t hq, int64_t hkv, int64_t hd, double scale_attr) {
  const int64_t b_dim = pos.shape[0], s_dim = kc.shape[1], group = hq / hkv;
  const float scale = static_cast<float>(scale_attr == 0 ? 1.0 / std::sqrt(static_cast<double>(hd)) : scale_attr);
  // Check every row before writing any: a failed step leaves the caches untouched.
  for (int64_t b = 0; b < b_dim; ++b) {
    const int64_t p = pos.i[static_cast<size_t>(b)];
    if (p < 0 || p >= s_dim)
      c.fail("operand 'positions' row " + std::to_string(b) + " is " + std::to_string(p) +
             "; expected a cache position in [0, " + std::to_string(s_dim) + ") (S, the caches' dim 1)");
  }
  const int64_t row_kv = hkv * hd;  // one cache slot [Hkv, hd], and one row of k_new / v_new
  std::vector<float> w(static_cast<size_t>(s_dim));
  for (int64_t b = 0; b < b_dim; ++b) {
    const int64_t p = pos.i[static_cast<size_t>(b)];
    const size_t slot = static_cast<size_t>((b * s_dim + p) * row_kv), nrow = static_cast<size_t>(b * row_kv);
    // Store as the cache dtype holds it, so attention below reads what later steps will read.
    for (size_t j = 0; j < static_cast<size_t>(row_kv); ++j) {
      kc.f[slot + j] = round_to(kc.dtype, kn[nrow + j]);
      vc.f[slot + j] = round_to(vc.dtype, vn[nrow + j]);
    }
    for (int64_t h = 0; h < hq; ++h) {
      const float* qh = &q[static_cast<size_t>((b * hq + h) * hd)];
      const int64_t kvh = h / group;
      auto cache_at = [&](const Buffer& cache, int64_t t) {
        return &cache.f[static_cast<size_t>(((b * s_dim + t) * hkv + kvh) * hd)];
      };
      float mx = -INFINITY;
      for (int64_t t = 0; t <= p; ++t) {
        const float* kt = cache_at(kc, t);
        float dot = 0.0f;
        for (int64_t j = 0; j < hd; ++j) dot += qh[j] * kt[j];
        w[static_cast<size_t>(t)] = scale * dot;
        mx = std::max(mx, w[static_cast<size_t>(t)]);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t <= p; ++t) sum += (w[static_cast<size_t>(t)] = std::exp(w[static_cast<size_t>(t)] - mx));
      float* oh = &o.f[static_cast<size_t>((b * hq + h) * hd)];
      for (int64_t j = 0; j < hd; ++j) {
        float acc = 0.0f;
        for (int64_t t = 0; t <= p; ++t) acc += w[static_cast<size_t>(t)] * cache_at(vc, t)[j];
        oh[j] = acc / sum;
      }
    }
  }
}

const OpDef& op_def_attention_decode() {
  static const OpDef d{"attention_decode",
                       {{"q"}, {"k_new"}, {"v_new"}, {"k_cache"}, {"v_cache"}, {"positions"}},
                       false,
                       {3, 4},
                       {{"num_q_heads", AttrKind::integer, nullptr},
                        {"num_kv_heads", AttrKind::integer, nullptr},
                        {"head_dim", AttrKind::integer, nullptr},
                        {"scale", AttrKind::number, 0.0}},
                       infer_attention_decode,
                       ref_attention_decode};
  return d;
}

}  // namespace weft
