// Random valid graphs over the whole op set (random DAGs, random shapes), for lowering/schedule verification
// here and for device-vs-reference checks on the GPU.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace weft::test {

struct RandomGraphOptions {
  int min_ops = 3, max_ops = 24;
  bool symbolic_batch = true;
  bool argmax_feeds_embedding = true;  // off for device-vs-reference runs: a near-tie would change everything after
  DType dtype = DType::bf16;
};

class RandomGraphBuilder {
 public:
  RandomGraphBuilder(uint32_t seed, RandomGraphOptions o = {}) : rng_(seed), o_(o), dtype_(o.dtype) {}

  Graph build() {
    Graph g("random");
    g_ = &g;
    floats_.clear();
    ints_.clear();
    counter_ = 0;
    const int64_t rows = pick({1, 2, 3});
    batch_ = o_.symbolic_batch ? Dim::sym(g.declare_symbol("batch", 1, 4)) : Dim::fixed(rows);
    for (int i = 0, n = 1 + int(rng_() % 3); i < n; ++i) {
      const int64_t c = pick({8, 16, 24, 64});
      floats_.push_back(g.add_tensor(TensorKind::input, name("x"), dtype_, {batch_, Dim::fixed(c)}));
    }
    positions_ = g.add_tensor(TensorKind::input, "positions", DType::i32, {batch_});
    ints_.push_back(positions_);
    const int ops = o_.min_ops + int(rng_() % uint32_t(o_.max_ops - o_.min_ops + 1));
    std::vector<TensorId> made;
    for (int i = 0; i < ops * 4 && int(made.size()) < ops; ++i) {
      try {  // a random choice may not fit (an odd width for silu_mul, ...): skip it
        const TensorId t = try_add_op();
        if (t != kNoTensor) made.push_back(t);
      } catch (const Error&) {
      }
    }
    if (made.empty()) made.push_back(g.add_op("silu", {floats_[0]}, {}, name("y")));
    for (TensorId t : made)
      if (rng_() % 4 == 0) g.mark_output(t, "");
    if (!g.tensor(made.back()).is_output) g.mark_output(made.back(), "");
    g_ = nullptr;
    return g;
  }

 private:
  int64_t pick(std::initializer_list<int64_t> v) { return *(v.begin() + rng_() % v.size()); }
  std::string name(const char* p) { return std::string(p) + std::to_string(counter_++); }
  TensorId any_float() { return floats_[rng_() % floats_.size()]; }
  int64_t cols(TensorId t) const { return g_->tensor(t).type.shape.back().value; }
  bool batch_rows(TensorId t) const { return g_->tensor(t).type.shape.size() == 2 && g_->tensor(t).type.shape[0] == batch_; }
  TensorId weight(std::vector<int64_t> dims) {
    Shape s;
    for (int64_t d : dims) s.push_back(Dim::fixed(d));
    return g_->add_tensor(TensorKind::weight, name("w"), dtype_, s);
  }
  TensorId keep(TensorId t) {
    if (is_float(g_->tensor(t).type.dtype) && batch_rows(t)) floats_.push_back(t);
    else if (is_int(g_->tensor(t).type.dtype)) ints_.push_back(t);
    return t;
  }

  TensorId try_add_op() {
    Graph& g = *g_;
    const TensorId x = any_float();
    if (!batch_rows(x)) return kNoTensor;
    const int64_t c = cols(x);
    switch (rng_() % 19) {
      case 0: return keep(g.add_op("linear", {x, weight({pick({8, 16, 24, 40}), c})}, {}, name("lin")));
      case 1: {  // linear with bias and residual
        const int64_t n = c;
        return keep(g.add_op("linear", {x, weight({n, c}), weight({n}), x}, {}, name("linr")));
      }
      case 2: {
        TensorId y = any_float();
        if (!(g.tensor(y).type.shape == g.tensor(x).type.shape)) y = x;
        return keep(g.add_op(rng_() % 2 ? "add" : "mul", {x, y}, {}, name("ew")));
      }
      case 3: return keep(g.add_op("mul", {x, weight({c})}, {}, name("bcast")));
      case 4: return keep(g.add_op(rng_() % 2 ? "silu" : "gelu", {x}, {}, name("act")));
      case 5: return keep(g.add_op("rmsnorm", {x, weight({c})}, {{"eps", 1e-5}}, name("norm")));
      case 6: return keep(g.add_op("silu_mul", {x}, {}, name("swiglu")));
      case 7: return keep(g.add_op("rope", {x, positions_}, {{"head_dim", 8}, {"style", rng_() % 2 ? "half" : "interleaved"}}, name("rope")));
      case 8: return keep(g.add_op("head_rmsnorm", {x, weight({8})}, {{"head_dim", 8}}, name("hnorm")));
      case 9: return keep(g.add_op("softmax", {x}, {}, name("sm")));
      case 10: return keep(g.add_op("slice", {x}, {{"axis", 1}, {"start", 0}, {"end", c / 2}}, name("sl")));
      case 11: return keep(g.add_op("concat", {x, any_float()}, {{"axis", 1}}, name("cat")));
      case 12: {  // argmax feeding an embedding: a dataflow through integer tensors
        const TensorId am = keep(g.add_op("argmax", {x}, {{"dtype", "i32"}}, name("am")));
        const TensorId ids = o_.argmax_feeds_embedding ? am : positions_;
        if (!o_.argmax_feeds_embedding) g.mark_output(am, "");
        return keep(g.add_op("embedding", {weight({c, pick({8, 16})}), ids}, {}, name("emb")));
      }
      case 13: {  // attention over a fresh KV cache: q = x (2 heads of 4), k = v = slices of x
        if (c < 8) return kNoTensor;
        const TensorId q = g.add_op("slice", {x}, {{"axis", 1}, {"start", 0}, {"end", 8}}, name("q"));
        const TensorId k = g.add_op("slice", {x}, {{"axis", 1}, {"start", 0}, {"end", 4}}, name("k"));
        const Shape cache{batch_, Dim::fixed(6), Dim::fixed(1), Dim::fixed(4)};
        const TensorId kc = g.add_tensor(TensorKind::state, name("kc"), dtype_, cache);
        const TensorId vc = g.add_tensor(TensorKind::state, name("vc"), dtype_, cache);
        return keep(g.add_op("attention_decode", {q, k, k, kc, vc, positions_},
                             {{"num_q_heads", 2}, {"num_kv_heads", 1}, {"head_dim", 4}}, name("attn")));
      }
      case 15: return keep(g.add_op("layernorm", {x, weight({c}), weight({c})}, {}, name("ln")));
      case 16: return keep(g.add_op("matmul", {x, weight({c, pick({8, 16})})}, {}, name("mm")));
      case 17: {  // f32 round trip
        const TensorId f = g.add_op("cast", {x}, {{"dtype", "f32"}}, name("f32"));
        return keep(g.add_op("cast", {g.add_op("silu", {f}, {}, name("sf")), }, {{"dtype", "bf16"}}, name("bf")));
      }
      case 18: {  // [batch, c] -> [batch, c/8, 8] -> softmax over 8 -> back
        if (c % 8) return kNoTensor;
        const TensorId r3 = g.add_op("reshape", {x}, {{"shape", {"batch", c / 8, 8}}}, name("r3"));
        return keep(g.add_op("reshape", {g.add_op("softmax", {r3}, {}, name("sm3"))}, {{"shape", {"batch", c}}}, name("r2")));
      }
      default: {
        const TensorId r = g.add_op("reduce", {x}, {{"kind", rng_() % 2 ? "sum" : "max"}, {"axis", -1}, {"keepdim", true}}, name("red"));
        return keep(g.add_op("add", {x, r}, {}, name("addr")));
      }
    }
  }

  std::mt19937 rng_;
  RandomGraphOptions o_;
  Graph* g_ = nullptr;
  DType dtype_;
  Dim batch_;
  TensorId positions_ = kNoTensor;
  std::vector<TensorId> floats_, ints_;
  int counter_ = 0;
};

}  // namespace weft::test
