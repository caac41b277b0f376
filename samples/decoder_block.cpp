// C++ sample: one Qwen3-style decoder layer for one decode step (embedding, rmsnorm, fused QKV, q/k norm,
// rope, attention over a KV cache, output projection + residual, SwiGLU MLP + residual, final norm,
// lm_head, argmax) in bf16, built through the header-only wrapper, printed, run on the CPU reference.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "weft/weft.hpp"

namespace {

constexpr int64_t kVocab = 256, kDim = 64, kQHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 128, kMaxSeq = 32;
constexpr int64_t kBatch = 2;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (inputs here are finite)
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Deterministic bf16 values in [-scale, scale).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, float scale) {
  std::vector<uint16_t> v(n);
  for (auto& e : v) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    e = to_bf16(scale * (static_cast<float>(seed >> 40) / 16777216.0f * 2.0f - 1.0f));
  }
  return v;
}

uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

}  // namespace

int main() {
  try {
    weft::Context ctx;
    weft::Graph g(ctx, "decoder_block");
    g.symbol("batch", 1, 8);
    const auto bf16 = WEFT_DTYPE_BF16;
    const int64_t q_width = kQHeads * kHeadDim, kv_width = kKvHeads * kHeadDim;

    auto ids = g.input("ids", WEFT_DTYPE_I32, {"batch"});
    auto pos = g.input("positions", WEFT_DTYPE_I32, {"batch"});
    auto embed = g.weight("embed", bf16, {kVocab, kDim});
    auto attn_norm = g.weight("attn_norm", bf16, {kDim});
    auto wqkv = g.weight("wqkv", bf16, {q_width + 2 * kv_width, kDim});
    auto q_norm = g.weight("q_norm", bf16, {kHeadDim});
    auto k_norm = g.weight("k_norm", bf16, {kHeadDim});
    auto wo = g.weight("wo", bf16, {kDim, q_width});
    auto mlp_norm = g.weight("mlp_norm", bf16, {kDim});
    auto w_gate_up = g.weight("w_gate_up", bf16, {2 * kFfn, kDim});
    auto w_down = g.weight("w_down", bf16, {kDim, kFfn});
    auto final_norm = g.weight("final_norm", bf16, {kDim});
    auto lm_head = g.weight("lm_head", bf16, {kVocab, kDim});
    auto k_cache = g.state("k_cache", bf16, {"batch", kMaxSeq, kKvHeads, kHeadDim});
    auto v_cache = g.state("v_cache", bf16, {"batch", kMaxSeq, kKvHeads, kHeadDim});

    weft_rope_options rope{};
    rope.struct_size = sizeof rope;
    rope.head_dim = kHeadDim;
    rope.theta = 1000000.0;
    rope.style = WEFT_ROPE_HALF;
    weft_attention_options attn{};
    attn.struct_size = sizeof attn;
    attn.num_q_heads = kQHeads;
    attn.num_kv_heads = kKvHeads;
    attn.head_dim = kHeadDim;

    auto h = g.embedding(embed, ids, "h");
    auto qkv = g.linear(g.rmsnorm(h, attn_norm, 1e-6f, "attn_in"), wqkv, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "qkv");
    auto q = g.rope(g.head_rmsnorm(g.slice(qkv, -1, 0, q_width, "q_raw"), q_norm, kHeadDim, 1e-6f, "q_normed"), pos, rope, "q");
    auto k = g.rope(g.head_rmsnorm(g.slice(qkv, -1, q_width, q_width + kv_width, "k_raw"), k_norm, kHeadDim, 1e-6f, "k_normed"),
                    pos, rope, "k");
    auto v = g.slice(qkv, -1, q_width + kv_width, q_width + 2 * kv_width, "v");
    auto a = g.attention_decode(q, k, v, k_cache, v_cache, pos, attn, "attn");
    auto h2 = g.linear(a, wo, WEFT_TENSOR_NONE, h, "h2");
    auto gu = g.linear(g.rmsnorm(h2, mlp_norm, 1e-6f, "mlp_in"), w_gate_up, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "gate_up");
    auto h3 = g.linear(g.silu_mul(gu, WEFT_TENSOR_NONE, "act"), w_down, WEFT_TENSOR_NONE, h2, "h3");
    auto logits = g.linear(g.rmsnorm(h3, final_norm, 1e-6f, "final"), lm_head, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "logits");
    auto next = g.argmax(logits, WEFT_DTYPE_I32, "next_token");
    g.output(logits);
    g.output(next);
    std::printf("%s", g.text().c_str());

    // Two sequences at different positions; the caches already hold earlier (random) keys and values.
    std::vector<int32_t> ids_v = {17, 200}, pos_v = {3, 9};
    std::vector<std::vector<uint16_t>> w;
    const std::vector<std::pair<weft_tensor, std::vector<int64_t>>> weights = {
        {embed, {kVocab, kDim}},         {attn_norm, {kDim}},         {wqkv, {q_width + 2 * kv_width, kDim}},
        {q_norm, {kHeadDim}},            {k_norm, {kHeadDim}},        {wo, {kDim, q_width}},
        {mlp_norm, {kDim}},              {w_gate_up, {2 * kFfn, kDim}}, {w_down, {kDim, kFfn}},
        {final_norm, {kDim}},            {lm_head, {kVocab, kDim}}};
    w.reserve(weights.size() + 2);
    weft::Bindings b;
    uint64_t seed = 100;
    for (const auto& [t, shape] : weights) {
      size_t n = 1;
      for (int64_t d : shape) n *= static_cast<size_t>(d);
      const bool is_norm = shape.size() == 1;
      w.push_back(random_bf16(n, seed++, is_norm ? 0.2f : 0.25f));
      if (is_norm)
        for (auto& e : w.back()) e = to_bf16(1.0f + from_bf16(e));  // norm weights near 1
      b.add(t, w.back().data(), bf16, shape);
    }
    const size_t cache_n = static_cast<size_t>(kBatch * kMaxSeq * kKvHeads * kHeadDim);
    w.push_back(random_bf16(cache_n, 7, 1.0f));
    w.push_back(random_bf16(cache_n, 8, 1.0f));
    std::vector<uint16_t> logits_v(static_cast<size_t>(kBatch * kVocab));
    std::vector<int32_t> next_v(kBatch, -1);
    b.add(ids, ids_v, {kBatch}).add(pos, pos_v, {kBatch});
    b.add(k_cache, w[w.size() - 2].data(), bf16, {kBatch, kMaxSeq, kKvHeads, kHeadDim});
    b.add(v_cache, w[w.size() - 1].data(), bf16, {kBatch, kMaxSeq, kKvHeads, kHeadDim});
    b.add(logits, logits_v.data(), bf16, {kBatch, kVocab});
    b.add(next, next_v, {kBatch});
    g.run_reference(b);

    double sum = 0;
    for (uint16_t e : logits_v) sum += from_bf16(e);
    std::printf("decoder block: next tokens %d %d  logits [%lld, %lld] bf16 sum %.6f  checksum %016" PRIx64 "\n",
                next_v[0], next_v[1], static_cast<long long>(kBatch), static_cast<long long>(kVocab), sum,
                fnv1a(logits_v.data(), logits_v.size() * 2));
    const auto hash = g.hash();
    std::printf("graph hash %016" PRIx64 "%016" PRIx64 "\n", hash[1], hash[0]);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft error: %s\n", e.what());
    return 1;
  }
  return 0;
}
