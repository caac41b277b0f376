// GPU tests (skipped with the reason when there is no GPU): every op and 200 random graphs against the CPU
// reference, a decoder over several steps, 10,000 launches, two programs on two streams, destroying a
// program while another runs, the watchdog, and device-side argument errors.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "lower/task_graph.hpp"
#include "schedule/schedule.hpp"
#include "gpu_test_util.hpp"
#include "shape_util.hpp"
#include "test_models.hpp"
#include "random_graph_gen.hpp"

namespace weft::test {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += "\n  " + e;
  return s;
}

// A graph of one op over fresh inputs; `extra` adds operands after x.
struct OneOp {
  const char* op;
  nlohmann::json attrs;
  std::vector<std::vector<int64_t>> operand_shapes;  // x first
  std::vector<DType> operand_dtypes = {};            // empty: all the float dtype
  std::vector<TensorKind> kinds = {};                // empty: x an input, the rest weights
};

Graph one_op_graph(const OneOp& spec, DType dt) {
  Graph g(spec.op);
  std::vector<TensorId> ins;
  for (size_t k = 0; k < spec.operand_shapes.size(); ++k) {
    Shape s;
    for (int64_t d : spec.operand_shapes[k]) s.push_back(Dim::fixed(d));
    const DType t = k < spec.operand_dtypes.size() ? spec.operand_dtypes[k] : dt;
    const TensorKind kind = k < spec.kinds.size() ? spec.kinds[k] : (k == 0 ? TensorKind::input : TensorKind::weight);
    ins.push_back(g.add_tensor(kind, "in" + std::to_string(k), t, s));
  }
  g.mark_output(g.add_op(spec.op, ins, spec.attrs, "out"), "");
  return g;
}

TEST(GpuOps, EveryOpMatchesTheReference) {
  WEFT_REQUIRE_GPU();
  const auto i32 = DType::i32;
  const auto state = TensorKind::state, input = TensorKind::input, weight = TensorKind::weight;
  for (DType dt : {DType::f32, DType::bf16}) {
    const DType f = dt;
    for (int64_t n : {1, 3, 127, 4097}) {
      const int64_t even = 2 * n, hd8 = 8 * ((n + 7) / 8);
      std::vector<OneOp> specs = {
          {"embedding", {}, {{50, n}, {3}}, {f, i32}, {weight, input}},
          {"rmsnorm", {{"eps", 1e-5}}, {{3, n}, {n}}},
          {"layernorm", {{"eps", 1e-5}}, {{3, n}, {n}, {n}}},
          {"head_rmsnorm", {{"head_dim", 8}}, {{3, hd8}, {8}}},
          {"linear", {}, {{3, n}, {37, n}, {37}, {3, 37}}, {}, {input, weight, weight, input}},
          {"linear", {}, {{1, n}, {n, n}}},
          {"matmul", {}, {{2, 3, n}, {n, 5}}},
          {"add", {}, {{3, n}, {3, n}}, {}, {input, input}},
          {"mul", {}, {{3, n}, {n}}},
          {"silu", {}, {{3, n}}},
          {"gelu", {{"approximate", "tanh"}}, {{3, n}}},
          {"gelu", {}, {{3, n}}},
          {"silu_mul", {}, {{3, even}}},
          {"silu_mul", {}, {{3, n}, {3, n}}, {}, {input, input}},
          {"linear_silu_mul", {}, {{3, n}, {2 * 37, n}}},
          {"rope", {{"head_dim", 8}, {"theta", 10000.0}}, {{3, hd8}, {3}}, {f, i32}, {input, input}},
          {"rope", {{"head_dim", 8}, {"style", "interleaved"}, {"scaling", "llama3"}, {"factor", 8.0}}, {{3, hd8}, {3}}, {f, i32}, {input, input}},
          {"rope_table", {{"head_dim", 8}, {"scaling", "llama3"}, {"factor", 8.0}, {"original_max_position", 16}}, {{3}}, {i32}, {input}},
          {"softmax", {}, {{3, n}}},
          {"argmax", {{"dtype", "i32"}}, {{3, n}}},
          {"reduce", {{"kind", "sum"}, {"axis", -1}}, {{3, n}}},
          {"reduce", {{"kind", "max"}, {"axis", 0}, {"keepdim", true}}, {{3, n}}},
          {"reduce", {{"kind", "mean"}, {"axis", 1}}, {{2, n, 3}}},
          {"cast", {{"dtype", "f16"}}, {{3, n}}},
          {"reshape", {{"shape", {n, 3}}}, {{3, n}}},
          {"slice", {{"axis", 1}, {"start", n / 2}, {"end", n}}, {{3, n}}},
          {"concat", {{"axis", -1}}, {{3, n}, {3, 5}}, {}, {input, input}},
          {"attention_decode", {{"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 8}},
           {{3, 32}, {3, 16}, {3, 16}, {3, std::min<int64_t>(n, 127) + 1, 2, 8}, {3, std::min<int64_t>(n, 127) + 1, 2, 8}, {3}},
           {f, f, f, f, f, i32}, {input, input, input, state, state, input}},
          {"attention_decode_qkv", {{"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 8}, {"style", "interleaved"}},
           {{3, 64}, {3, std::min<int64_t>(n, 127) + 1, 2, 8}, {3, std::min<int64_t>(n, 127) + 1, 2, 8}, {3}, {8}, {8}},
           {f, f, f, i32, f, f}, {input, state, state, input, weight, weight}},
      };
      if (n == 127) {
        // Decode shapes: the streamed GEMV (K a multiple of 256, up to 8 rows, with bias and residual), and
        // attention over a cache long enough that random positions take both the shared-memory path (short
        // contexts) and the general one.
        specs.push_back({"linear", {}, {{1, 2048}, {300, 2048}, {300}, {1, 300}}, {}, {input, weight, weight, input}});
        specs.push_back({"linear", {}, {{8, 1024}, {130, 1024}}});
        // A vocabulary-long row takes the whole block (argmax_row_block): aligned rows, and odd rows whose
        // starts are not 16-byte aligned.
        specs.push_back({"argmax", {{"dtype", "i32"}}, {{2, 40000}}});
        specs.push_back({"argmax", {}, {{3, 5001}}});
        specs.push_back({"linear", {}, {{5, 256}, {64, 256}}});
        specs.push_back({"rmsnorm_linear", {{"eps", 1e-5}}, {{3, 2048}, {2048}, {300, 2048}, {300}, {3, 300}}, {},
                         {input, weight, weight, weight, input}});
        specs.push_back({"rmsnorm_linear", {{"eps", 1e-5}}, {{12, 512}, {512}, {40, 512}}});  // f32: 2 row blocks
        // One row (batch-1 decode) of Qwen3-0.6B's width: normalized by the whole block, not one warp.
        specs.push_back({"rmsnorm_linear", {{"eps", 1e-5}}, {{1, 1024}, {1024}, {96, 1024}}});
        specs.push_back({"silu_mul_linear", {}, {{3, 2 * 8192}, {64, 8192}, {64}, {3, 64}}, {}, {input, weight, weight, input}});
        // Tensor-core tiles of 16-bit weights (gemv_mma.cuh; the f32 runs of these take the other paths): row
        // blocks (40 rows of K 2048: two of 20), two m16 blocks per tile (24 rows of K 1024 in one tile, the second
        // block partial; 32 rows of K 2048 in one tile with the wide shared memory, cut groups summed from shared
        // memory), tiles of fewer stages than warps (1, 2, 6), a column count that leaves a partial group of 8,
        // and 8- and 16-row tiles of K 8192 (row blocks of 8 where the wide shared memory allows, sm_90 and later;
        // of 4 on sm_80).
        specs.push_back({"linear", {}, {{24, 1024}, {203, 1024}, {203}, {24, 203}}, {}, {input, weight, weight, input}});
        specs.push_back({"linear", {}, {{40, 2048}, {96, 2048}}});
        specs.push_back({"linear", {}, {{2, 128}, {8, 128}}});
        specs.push_back({"linear", {}, {{3, 256}, {8, 256}, {8}, {3, 8}}, {}, {input, weight, weight, input}});
        specs.push_back({"linear", {}, {{5, 384}, {16, 384}}});
        specs.push_back({"linear", {}, {{7, 384}, {1001, 384}, {1001}}, {}, {input, weight, weight}});
        specs.push_back({"silu_mul_linear", {}, {{8, 2 * 8192}, {48, 8192}}});
        specs.push_back({"silu_mul_linear", {}, {{16, 2 * 8192}, {40, 8192}, {40}, {16, 40}}, {}, {input, weight, weight, input}});
        specs.push_back({"rmsnorm_linear", {{"eps", 1e-5}}, {{8, 8192}, {8192}, {72, 8192}}});
        specs.push_back({"linear", {}, {{8, 8192}, {56, 8192}}});
        specs.push_back({"rmsnorm_linear", {{"eps", 1e-5}}, {{32, 2048}, {2048}, {520, 2048}}});
        // Tiles that no warp-range boundary cuts (64 columns on 132 SMs: 8 groups of 8 weight rows, each warp's range
        // whole groups), which skip the cut-group sums: one and two m16 blocks.
        specs.push_back({"linear", {}, {{16, 128}, {8448, 128}}});
        specs.push_back({"linear", {}, {{32, 256}, {8448, 256}, {8448}, {32, 8448}}, {}, {input, weight, weight, input}});
        // linear_silu_mul's paired tensor-core tiles (gate and up rows alternating per group of 8 columns, the SwiGLU
        // from shared memory): 32 rows in 8-column tiles (one gate and one up group, each cut by warp ranges: the
        // pairs' sums come from the cut-group reduction), 16 rows in 64-column tiles on 132 SMs (every warp range
        // a whole gate/up pair: no cut group), 5 rows of K 384 (6 stages for 8 warps, a partial last group), 40 rows
        // (two row blocks of 20), and one row (the warp-per-column path, as f32 takes everywhere).
        specs.push_back({"linear_silu_mul", {}, {{32, 2048}, {2 * 1056, 2048}}});
        specs.push_back({"linear_silu_mul", {}, {{16, 256}, {2 * 8448, 256}}});
        specs.push_back({"linear_silu_mul", {}, {{5, 384}, {2 * 203, 384}}});
        specs.push_back({"linear_silu_mul", {}, {{40, 1024}, {2 * 96, 1024}}});
        specs.push_back({"linear_silu_mul", {}, {{1, 2048}, {2 * 300, 2048}}});
        // With a norm weight (x normalized in every tile first, as rmsnorm_linear's): 8 and 32 rows on the tensor
        // cores (the block-wide norm, the weight read from L2), one row (normalized into shared memory, then the
        // warp-per-column path).
        specs.push_back({"linear_silu_mul", {{"eps", 1e-5}}, {{8, 2048}, {2 * 1056, 2048}, {2048}}});
        specs.push_back({"linear_silu_mul", {{"eps", 1e-5}}, {{32, 2048}, {2 * 520, 2048}, {2048}}});
        specs.push_back({"linear_silu_mul", {{"eps", 1e-5}}, {{1, 1024}, {2 * 96, 1024}, {1024}}});
        // Tiles split over K (a plain linear whose rows fit no tile whole: weft_mma_split_parts, the last part of
        // each tile adding the others' sums from scratch): 32 rows of K 8192 with bias and residual (4 parts of
        // 2048 with the wide shared memory, 8 of 1024 at the base size), 12 rows of K 8192 with a partial last
        // group (2 parts), and 32 rows of K 4096 in 48-column tiles (2 parts).
        specs.push_back({"linear", {}, {{32, 8192}, {40, 8192}, {40}, {32, 40}}, {}, {input, weight, weight, input}});
        specs.push_back({"linear", {}, {{12, 8192}, {203, 8192}}});
        specs.push_back({"linear", {}, {{32, 4096}, {2700, 4096}}});
        // A chunked tile (no power of two splits K 8320 into whole stages, so x is staged in 5 chunks of 1664,
        // weft_mma_chunk_k), in 21-column tiles: warp ranges crossing groups, cut groups summed in every chunk.
        specs.push_back({"linear", {}, {{32, 8320}, {2700, 8320}, {2700}, {32, 2700}}, {}, {input, weight, weight, input}});
        specs.push_back({"attention_decode", {{"num_q_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 64}},
                         {{3, 512}, {3, 128}, {3, 128}, {3, 2048, 2, 64}, {3, 2048, 2, 64}, {3}},
                         {f, f, f, f, f, i32}, {input, input, input, state, state, input}});
        // The shared-memory path's other instances (head_dim 64 or 128; q heads per pass 8, 4, 2 or 1): Qwen3's
        // head_dim 128 with group 2, a group of 10 (five passes of 2), of 16 (two passes of 8), and of 1.
        const auto attention = [&](int64_t hq, int64_t hkv, int64_t hd, int64_t rows, int64_t s) {
          specs.push_back({"attention_decode", {{"num_q_heads", hq}, {"num_kv_heads", hkv}, {"head_dim", hd}},
                           {{rows, hq * hd}, {rows, hkv * hd}, {rows, hkv * hd}, {rows, s, hkv, hd}, {rows, s, hkv, hd}, {rows}},
                           {f, f, f, f, f, i32}, {input, input, input, state, state, input}});
        };
        attention(4, 2, 128, 2, 700);
        attention(20, 2, 64, 2, 300);
        attention(16, 1, 64, 2, 300);
        attention(3, 3, 128, 2, 300);
        // The fused form on the same paths: Llama's shape (rope with llama3 scaling, no head norms) over a
        // cache long enough for both paths, and Qwen3's (head norms, head_dim 128).
        specs.push_back({"attention_decode_qkv",
                         {{"num_q_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 64}, {"theta", 500000.0}, {"scaling", "llama3"},
                          {"factor", 32.0}, {"original_max_position", 8192}},
                         {{3, 768}, {3, 2048, 2, 64}, {3, 2048, 2, 64}, {3}},
                         {f, f, f, i32}, {input, state, state, input}});
        specs.push_back({"attention_decode_qkv",
                         {{"num_q_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 128}, {"theta", 1000000.0}, {"eps", 1e-6}},
                         {{2, 1024}, {2, 700, 2, 128}, {2, 700, 2, 128}, {2}, {128}, {128}},
                         {f, f, f, i32, f, f}, {input, state, state, input, weight, weight}});
        // The fused path's other head layouts: interleaved rope (pairs in neighbouring lanes) with head norms and
        // a group of 8 (10 heads for 8 warps: some take two), and a group of 1 without norms.
        specs.push_back({"attention_decode_qkv",
                         {{"num_q_heads", 16}, {"num_kv_heads", 2}, {"head_dim", 64}, {"style", "interleaved"}, {"eps", 1e-6}},
                         {{3, 1280}, {3, 300, 2, 64}, {3, 300, 2, 64}, {3}, {64}, {64}},
                         {f, f, f, i32, f, f}, {input, state, state, input, weight, weight}});
        specs.push_back({"attention_decode_qkv", {{"num_q_heads", 2}, {"num_kv_heads", 2}, {"head_dim", 128}},
                         {{2, 768}, {2, 300, 2, 128}, {2, 300, 2, 128}, {2}},
                         {f, f, f, i32}, {input, state, state, input}});
      }
      for (const OneOp& spec : specs) {
        const Graph g = one_op_graph(spec, f);
        try {
          const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, static_cast<uint32_t>(n), 0, 1, nullptr});
          EXPECT_TRUE(problems.empty()) << spec.op << " " << dtype_name(dt) << " n=" << n << joined(problems);
        } catch (const Error& e) {
          ADD_FAILURE() << spec.op << " " << dtype_name(dt) << " n=" << n << ": " << e.what();
        }
      }
    }
  }
}

// One op's graph on the GPU against the CPU reference, every problem (or the error that stopped it) named by `what`.
void expect_matches_reference(const OneOp& spec, DType dt, const std::string& what) {
  try {
    const auto problems = compare_with_reference(one_op_graph(spec, dt), {}, GpuCompareOptions{});
    EXPECT_TRUE(problems.empty()) << what << joined(problems);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

// f16 takes the tensor-core tiles through its own mma instruction: the streamed linears at batch sizes on
// either side of it (1 row: CUDA cores) against the reference.
TEST(GpuOps, HalfPrecisionLinearsMatchTheReference) {
  WEFT_REQUIRE_GPU();
  const auto input = TensorKind::input, weight = TensorKind::weight;
  for (int64_t rows : {1, 2, 8, 24}) {
    const std::vector<OneOp> specs = {
        {"linear", {}, {{rows, 1024}, {200, 1024}, {200}, {rows, 200}}, {}, {input, weight, weight, input}},
        {"rmsnorm_linear", {{"eps", 1e-5}}, {{rows, 512}, {512}, {72, 512}}},
        {"silu_mul_linear", {}, {{rows, 2 * 1024}, {40, 1024}}},
        {"linear_silu_mul", {}, {{rows, 1024}, {2 * 72, 1024}}},
    };
    for (const OneOp& spec : specs)
      expect_matches_reference(spec, DType::f16, std::string(spec.op) + " f16 rows=" + std::to_string(rows));
  }
  // A tile split over K, and a chunked one (x staged in K chunks), in f16.
  for (const int64_t k : {8192, 8320}) {
    const OneOp big{"linear", {}, {{32, k}, {2700, k}, {2700}, {32, 2700}}, {}, {input, weight, weight, input}};
    expect_matches_reference(big, DType::f16, "linear f16 K " + std::to_string(k));
  }
}

// The tensor-core tiles (gemv_mma.cuh) in bf16 at one and two m16 blocks of x rows, full and partial: a tile of one
// 8-row group cut between all 8 warps (its parts meet in the cut-group reduction), odd group counts (24, 200 columns),
// paired gate/up rows, the fused norm and SwiGLU inputs, bias and residual.
TEST(GpuOps, TensorCoreTilesMatchTheReference) {
  WEFT_REQUIRE_GPU();
  const auto input = TensorKind::input, weight = TensorKind::weight;
  for (int64_t rows : {2, 16, 17, 32}) {
    const std::vector<OneOp> specs = {
        {"linear", {}, {{rows, 1024}, {8, 1024}}},
        {"linear", {}, {{rows, 2048}, {200, 2048}, {200}, {rows, 200}}, {}, {input, weight, weight, input}},
        {"rmsnorm_linear", {{"eps", 1e-5}}, {{rows, 512}, {512}, {24, 512}}},
        {"silu_mul_linear", {}, {{rows, 2 * 1024}, {40, 1024}}},
        {"linear_silu_mul", {}, {{rows, 1024}, {2 * 40, 1024}}},
    };
    for (const OneOp& spec : specs)
      expect_matches_reference(spec, DType::bf16, std::string(spec.op) + " bf16 rows=" + std::to_string(rows));
  }
}

// attention's shared-memory path (attention_smem.cuh) in both 16-bit dtypes (f16 is otherwise untested there):
// head_dim 64 and 128, groups of 1, 2, 4, 8, 16 and 32 q heads (one to four passes of 8), the plain op and the fused
// one. Positions up to 299: from one timestep to more than eight warps' worth; three seeds, three launches each.
TEST(GpuOps, HalfPrecisionAttentionMatchesTheReference) {
  WEFT_REQUIRE_GPU();
  const auto input = TensorKind::input, state = TensorKind::state, weight = TensorKind::weight;
  const DType i32 = DType::i32;
  for (DType dt : {DType::bf16, DType::f16}) {
    std::vector<OneOp> specs;
    for (const auto& [hq, hkv, hd] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {8, 8, 128}, {16, 8, 128}, {32, 8, 64}, {16, 2, 64}, {32, 2, 128}, {32, 1, 64}}) {
      specs.push_back({"attention_decode", {{"num_q_heads", hq}, {"num_kv_heads", hkv}, {"head_dim", hd}},
                       {{3, hq * hd}, {3, hkv * hd}, {3, hkv * hd}, {3, 300, hkv, hd}, {3, 300, hkv, hd}, {3}},
                       {dt, dt, dt, dt, dt, i32}, {input, input, input, state, state, input}});
    }
    specs.push_back({"attention_decode_qkv", {{"num_q_heads", 16}, {"num_kv_heads", 8}, {"head_dim", 128}, {"eps", 1e-6}},
                     {{3, 32 * 128}, {3, 300, 8, 128}, {3, 300, 8, 128}, {3}, {128}, {128}},
                     {dt, dt, dt, i32, dt, dt}, {input, state, state, input, weight, weight}});
    specs.push_back({"attention_decode_qkv", {{"num_q_heads", 32}, {"num_kv_heads", 8}, {"head_dim", 64}},
                     {{3, 48 * 64}, {3, 300, 8, 64}, {3, 300, 8, 64}, {3}}, {dt, dt, dt, i32}, {input, state, state, input}});
    for (const OneOp& spec : specs) {
      for (uint32_t seed : {1u, 2u, 3u}) {
        try {
          const auto problems =
              compare_with_reference(one_op_graph(spec, dt), {}, GpuCompareOptions{0, 0, seed, 300, 3, nullptr});
          EXPECT_TRUE(problems.empty()) << spec.op << " " << dtype_name(dt) << " seed " << seed << joined(problems);
        } catch (const Error& e) {
          ADD_FAILURE() << spec.op << " " << dtype_name(dt) << " seed " << seed << ": " << e.what();
        }
      }
    }
  }
}

// attention_decode_qkv rotating by a rope_table op's table over `rows` rows and a cache of `s` timesteps: Llama-3.2-1B's
// heads (llama3 scaling, no head norms) or Qwen3's (head norms, head_dim 128).
Graph rope_table_attention_graph(DType dt, bool qwen, int64_t rows, int64_t s) {
  const int64_t hq = qwen ? 16 : 32, hkv = 8, hd = qwen ? 128 : 64;
  nlohmann::json rope = {{"head_dim", hd}, {"theta", qwen ? 1000000.0 : 500000.0}};
  if (!qwen) rope.update({{"scaling", "llama3"}, {"factor", 32.0}, {"original_max_position", 8192}});
  Graph g("rope_table_attention");
  auto shape = [](std::initializer_list<int64_t> dims) {
    Shape sh;
    for (int64_t d : dims) sh.push_back(Dim::fixed(d));
    return sh;
  };
  const TensorId qkv = g.add_tensor(TensorKind::input, "qkv", dt, shape({rows, (hq + 2 * hkv) * hd}));
  const TensorId kc = g.add_tensor(TensorKind::state, "k_cache", dt, shape({rows, s, hkv, hd}));
  const TensorId vc = g.add_tensor(TensorKind::state, "v_cache", dt, shape({rows, s, hkv, hd}));
  const TensorId pos = g.add_tensor(TensorKind::input, "positions", DType::i32, shape({rows}));
  const TensorId qn = qwen ? g.add_tensor(TensorKind::weight, "q_norm", dt, shape({hd})) : kNoTensor;
  const TensorId kn = qwen ? g.add_tensor(TensorKind::weight, "k_norm", dt, shape({hd})) : kNoTensor;
  const TensorId table = g.add_op("rope_table", {pos}, rope, "rope_table");
  nlohmann::json attrs = rope;
  attrs.update({{"num_q_heads", hq}, {"num_kv_heads", hkv}, {"eps", 1e-6}});
  g.mark_output(g.add_op("attention_decode_qkv", {qkv, kc, vc, pos, qn, kn, table}, attrs, "out"), "");
  g.mark_output(table, "");
  return g;
}

// The fused attention with a rope table (a decode step's form: ROPE_TABLE once, each attention task loading its row
// after the wait instead of building it before) against the reference: unsplit over 300 timesteps (random positions
// take the shared-memory path and, past it for 128, the general one) and split over 4096 at batch 1.
TEST(GpuOps, RopeTableFeedsTheFusedAttention) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::bf16, DType::f16})
    for (const bool qwen : {false, true})
      for (const int64_t rows : {3, 1}) {
        const int64_t s = rows == 1 ? 4096 : 300;
        const Graph g = rope_table_attention_graph(dt, qwen, rows, s);
        for (uint32_t seed : {1u, 2u}) {
          const std::string what = std::string(dtype_name(dt)) + (qwen ? " qwen3" : " llama") + " rows " +
                                   std::to_string(rows) + " seed " + std::to_string(seed);
          try {
            const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, seed, s, 3, nullptr});
            EXPECT_TRUE(problems.empty()) << what << joined(problems);
          } catch (const Error& e) {
            ADD_FAILURE() << what << ": " << e.what();
          }
        }
      }
}

// Tiles of two kv heads (lowering pairs them where tiles of one outnumber the SMs; the device runs one per half of
// the block, each in its half of shared memory) against the reference: 17 and 40 rows of 8 kv heads (136 and 320
// tiles of one), Llama's and Qwen3's heads, positions below 600 — inside a half's timesteps (~140 for Qwen3's heads,
// ~270 for Llama's), past them (the block then runs the two kv heads one after the other on the whole-block path)
// and, for Qwen3's, past that too (the general path); three launches each (the caches carry over). The cache is
// longer than a half holds, so the program pairs only as asked (ProgramOptions::attention_pairs 1).
TEST(GpuOps, PairedAttentionTilesMatchTheReference) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  ProgramOptions po;
  po.attention_pairs = 1;
  po.watchdog_ms = 10000;
  LowerOptions lo{132};
  lo.attention_pairs = 1;
  for (DType dt : {DType::bf16, DType::f16})
    for (const bool qwen : {false, true})
      for (const int64_t rows : {17, 40}) {
        const Graph g = rope_table_attention_graph(dt, qwen, rows, 600);
        const TaskGraph tg = lower(g, {}, lo);
        for (const Task& t : tg.tasks)
          if (t.dev_op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) {
            ASSERT_EQ(t.args.i[3], 2) << "the test's tiles are not paired";
          }
        Program program(session.context(), g, po);
        for (const int64_t most : {100, 600})
          for (uint32_t seed : {1u, 2u}) {
            const std::string what = std::string(dtype_name(dt)) + (qwen ? " qwen3" : " llama") + " rows " +
                                     std::to_string(rows) + " positions < " + std::to_string(most) + " seed " +
                                     std::to_string(seed);
            try {
              const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, seed, most, 3, &program});
              EXPECT_TRUE(problems.empty()) << what << joined(problems);
            } catch (const Error& e) {
              ADD_FAILURE() << what << ": " << e.what();
            }
          }
      }
}

// Split-KV attention (ATTENTION_DECODE_QKV over its timesteps, task_abi.h) against the reference at batch 1: a
// cache of 4096 rows gives each kv head 8 parts, and each step uses as many as keep 64 timesteps each, at least as
// many as fit the shared-memory path (Qwen3's heads: ~290 timesteps per part, Llama's: ~560). Positions below 64
// run whole in part 0 (the others idle); below 1000 whole or in 4 or 8 parts (empty parts arrive too, and the last
// to arrive merges); below 4096 also in 8 parts of up to ~290, and (Qwen3's heads past ~2350) whole in part 0 on the
// general path. Qwen3-0.6B's heads (q and k norms,
// group 2, head_dim 128) and Llama-3.2-1B's (group 4, head_dim 64), three launches per case (the caches carry over).
TEST(GpuOps, SplitAttentionMatchesTheReference) {
  WEFT_REQUIRE_GPU();
  const auto input = TensorKind::input, state = TensorKind::state, weight = TensorKind::weight;
  const DType i32 = DType::i32;
  for (DType dt : {DType::bf16, DType::f16}) {
    const std::vector<OneOp> specs = {
        {"attention_decode_qkv", {{"num_q_heads", 16}, {"num_kv_heads", 8}, {"head_dim", 128}, {"eps", 1e-6}},
         {{1, 32 * 128}, {1, 4096, 8, 128}, {1, 4096, 8, 128}, {1}, {128}, {128}},
         {dt, dt, dt, i32, dt, dt}, {input, state, state, input, weight, weight}},
        {"attention_decode_qkv", {{"num_q_heads", 32}, {"num_kv_heads", 8}, {"head_dim", 64}},
         {{1, 48 * 64}, {1, 4096, 8, 64}, {1, 4096, 8, 64}, {1}}, {dt, dt, dt, i32}, {input, state, state, input}}};
    for (const OneOp& spec : specs) {
      const Graph g = one_op_graph(spec, dt);
      const TaskGraph tg = lower(g, {}, LowerOptions{132});
      ASSERT_EQ(tg.grids[0].k_parts, 8) << "the test's tiles are not split";
      for (const int64_t most : {64, 1000, 4096})
        for (uint32_t seed : {1u, 2u, 3u}) {
          try {
            const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, seed, most, 3, nullptr});
            EXPECT_TRUE(problems.empty()) << dtype_name(dt) << " positions < " << most << " seed " << seed << joined(problems);
          } catch (const Error& e) {
            ADD_FAILURE() << dtype_name(dt) << " positions < " << most << " seed " << seed << ": " << e.what();
          }
        }
    }
  }
}

// A split attention tile whose q, k and v come from another op (here an add over 132 SMs' tiles), so that its parts
// wait for them. With positions given at launch, the parts above 0 leave their waits to the op (it waits only
// when the part has work: idle parts notify at once); with positions an op computes (a cast), every part waits
// in the task loop and the prologue's note may be stale. Both against the reference: positions below 64 (part 0
// alone), 1000 (split, empty parts among them), 4096 (eight parts, and the general path), three launches each.
TEST(GpuOps, SplitAttentionPartsWaitForTheirInputs) {
  WEFT_REQUIRE_GPU();
  for (const bool computed : {false, true}) {
    const Graph g = split_attention_graph(computed);
    const TaskGraph tg = lower(g, {}, LowerOptions{132});
    int deferred = 0;
    for (const Task& t : tg.tasks)
      if (t.dev_op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) {
        ASSERT_FALSE(t.waits.empty()) << g.name() << ": the parts do not wait for qkv";
        deferred += t.waits_in_op ? 1 : 0;
      }
    ASSERT_EQ(deferred, computed ? 0 : 8 * 7) << g.name();
    for (const int64_t most : {64, 1000, 4096})
      for (uint32_t seed : {1u, 2u}) {
        try {
          const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, seed, most, 3, nullptr});
          EXPECT_TRUE(problems.empty()) << g.name() << " positions < " << most << " seed " << seed << joined(problems);
        } catch (const Error& e) {
          ADD_FAILURE() << g.name() << " positions < " << most << " seed " << seed << ": " << e.what();
        }
      }
  }
}

// One-row tiles (batch-1 decode) against the reference, in every dtype: rmsnorm_linear rows normalized with x in
// registers and the norm weight copied beside them (K 1024, 2048, 4096: up to two 16-byte vectors per thread,
// rmsnorm_row_weight_async) and by norm_row (K 8192); tiles (132 SMs) of 25 rows with bias and residual, of 2 rows
// of 8 stages beside one of 8, of a single row, and SwiGLU rows of K 8192. Three launches each.
TEST(GpuOps, OneRowTilesMatchTheReference) {
  WEFT_REQUIRE_GPU();
  const auto input = TensorKind::input, weight = TensorKind::weight;
  const std::vector<OneOp> specs = {
      {"linear", {}, {{1, 2048}, {3300, 2048}, {3300}, {1, 3300}}, {}, {input, weight, weight, input}},
      {"linear", {}, {{1, 8192}, {10, 8192}, {10}, {1, 10}}, {}, {input, weight, weight, input}},
      {"linear", {}, {{1, 2048}, {1, 2048}}},
      {"silu_mul_linear", {}, {{1, 2 * 8192}, {1500, 8192}, {1500}, {1, 1500}}, {}, {input, weight, weight, input}},
      {"rmsnorm_linear", {{"eps", 1e-5}}, {{1, 4096}, {4096}, {6600, 4096}}},
      {"rmsnorm_linear", {{"eps", 1e-5}}, {{1, 2048}, {2048}, {3300, 2048}, {3300}, {1, 3300}}, {},
       {input, weight, weight, weight, input}},
      {"rmsnorm_linear", {{"eps", 1e-5}}, {{1, 1024}, {1024}, {700, 1024}}},
      {"rmsnorm_linear", {{"eps", 1e-5}}, {{1, 8192}, {8192}, {600, 8192}}},
  };
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    for (const OneOp& spec : specs) {
      const int64_t n = spec.operand_shapes[std::string(spec.op) == "rmsnorm_linear" ? 2 : 1][0];
      try {
        const auto problems = compare_with_reference(one_op_graph(spec, dt), {}, GpuCompareOptions{0, 0, 7, 0, 3, nullptr});
        EXPECT_TRUE(problems.empty()) << spec.op << " " << dtype_name(dt) << " N " << n << joined(problems);
      } catch (const Error& e) {
        ADD_FAILURE() << spec.op << " " << dtype_name(dt) << " N " << n << ": " << e.what();
      }
    }
  }
}

// Streamed one-row tiles back to back in every SM's queue (gemv_chain_graph: each tile's weight stages follow the
// last tile's in its warp's ring; outputs stored 32 rows at a time, warps of 1 to 38 rows) against the reference, in
// bf16 and f16 (each linked with the library that inlines its one-row tiles), and bf16 with one f16 tile (run out
// of line), over three launches.
TEST(GpuOps, ConsecutiveGemvTilesMatchTheReference) {
  WEFT_REQUIRE_GPU();
  for (int c = 0; c < 3; ++c) {
    const DType dt = c == 1 ? DType::f16 : DType::bf16;
    const Graph g = gemv_chain_graph(dt, c == 2);
    TaskGraph tg = lower(g, {}, LowerOptions{132});
    finalize_events(tg);
    const Schedule s = schedule_static(tg, 132);
    int back_to_back = 0;  // queue entries followed by another linear tile
    for (const auto& q : s.queues)
      for (size_t i = 0; i + 1 < q.size(); ++i) {
        const int op = tg.tasks[static_cast<size_t>(q[i + 1])].dev_op;
        back_to_back += op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_RMSNORM_LINEAR || op == WEFT_DEV_OP_SILU_MUL_LINEAR;
      }
    ASSERT_GE(back_to_back, 4 * 100) << "the test's queues do not hold linear tiles back to back";
    try {
      const auto problems = compare_with_reference(g, {}, GpuCompareOptions{0, 0, 11, 0, 3, nullptr});
      EXPECT_TRUE(problems.empty()) << dtype_name(dt) << (c == 2 ? " + f16" : "") << joined(problems);
    } catch (const Error& e) {
      ADD_FAILURE() << dtype_name(dt) << (c == 2 ? " + f16" : "") << ": " << e.what();
    }
  }
}

// argmax over rows long enough to be split over columns (argmax_split.cuh, 32 parts of 1250 here): the first
// maximum wins across parts, NaN above every number (the first NaN), a row of equal values gives index 0; over
// several launches (the arrival counters keep growing) with the output poisoned before each.
TEST(GpuOps, SplitArgmaxKeepsTheFirstMaximum) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  const int64_t rows = 3, n = 40000;
  for (DType dt : {DType::f32, DType::bf16}) {
    Graph g("argmax");
    const TensorId x = g.add_tensor(TensorKind::input, "x", dt, fixed_shape({rows, n}));
    const TensorId out = g.add_op("argmax", {x}, {{"dtype", "i32"}}, "next");
    g.mark_output(out, "");
    Buffer xb(dt, {rows, n});
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t k = 0; k < rows * n; ++k) xb.f[static_cast<size_t>(k)] = u(rng);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    xb.f[1000] = xb.f[30000] = 5.0f;                       // row 0: a tie in parts 0 and 24
    xb.f[n + 10] = 7.0f;                                   // row 1: a number above the rest, then two NaNs
    xb.f[static_cast<size_t>(n + 25000)] = xb.f[static_cast<size_t>(2 * n - 1)] = nan;
    for (int64_t k = 2 * n; k < 3 * n; ++k) xb.f[static_cast<size_t>(k)] = -inf;  // row 2: all equal
    const DeviceTensor xd(static_cast<size_t>(rows * n) * dtype_size(dt)), od(rows * 4);
    xd.upload(to_bytes(xb));
    const std::vector<DeviceBinding> bindings = {{x, {xd.data(), dt, {rows, n}, {}}}, {out, {od.data(), DType::i32, {rows}, {}}}};
    Program p(session.context(), g, {});
    for (int launch = 0; launch < 3; ++launch) {
      od.fill(0xff);
      p.run(bindings, nullptr);
      p.synchronize(nullptr);
      const Buffer got = from_bytes(DType::i32, {rows}, od.download());
      EXPECT_EQ(got.i, (std::vector<int64_t>{1000, 25000, 0})) << dtype_name(dt) << " launch " << launch;
    }
  }
}

TEST(GpuGraphs, TwoHundredRandomGraphs) {
  WEFT_REQUIRE_GPU();
  int ran = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    RandomGraphOptions ro;
    ro.argmax_feeds_embedding = false;
    ro.dtype = seed % 2 ? DType::bf16 : DType::f32;
    RandomGraphBuilder b(seed, ro);
    const Graph g = b.build();
    SymbolValues values(g.symbols().size(), 1 + static_cast<int64_t>(seed % 4));
    try {
      const auto problems = compare_with_reference(g, values, GpuCompareOptions{0, 0, seed, 6, 1, nullptr});
      EXPECT_TRUE(problems.empty()) << "seed " << seed << joined(problems);
      ++ran;
    } catch (const Error& e) {
      ADD_FAILURE() << "seed " << seed << ": " << e.what();
    }
  }
  EXPECT_EQ(ran, 200);
}

TEST(GpuGraphs, DecoderOverSeveralSteps) {
  WEFT_REQUIRE_GPU();
  const Graph g = build_decoder_graph(tiny_decoder(2, 4, 64));
  for (int64_t batch : {1, 3}) {
    const auto problems = compare_with_reference(g, SymbolValues{batch}, GpuCompareOptions{0, 0, 7, 0, 4, nullptr});
    EXPECT_TRUE(problems.empty()) << "batch " << batch << joined(problems);
  }
}

// y = silu(x) * w: small, so 10,000 launches take seconds.
Graph tiny_graph() {
  Graph g("tiny");
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, fixed_shape({4, 300}));
  const TensorId w = g.add_tensor(TensorKind::weight, "w", DType::f32, fixed_shape({300}));
  g.mark_output(g.add_op("mul", {g.add_op("silu", {x}, {}, "s"), w}, {}, "y"), "");
  return g;
}

struct TinyRun {
  DeviceTensor x, w, y;
  Buffer want;
  std::vector<DeviceBinding> bindings;
  explicit TinyRun(const Graph& g, uint32_t seed) : x(4 * 300 * 4), w(300 * 4), y(4 * 300 * 4) {
    std::vector<Buffer> v(g.tensors().size());
    v[0] = random_float(DType::f32, {4, 300}, seed);
    v[1] = random_float(DType::f32, {300}, seed + 1);
    x.upload(to_bytes(v[0]));
    w.upload(to_bytes(v[1]));
    evaluate(g, {}, v);
    want = v[static_cast<size_t>(g.find_tensor("y"))];
    bindings = {{0, {x.data(), DType::f32, {4, 300}, {}}}, {1, {w.data(), DType::f32, {300}, {}}},
                {g.find_tensor("y"), {y.data(), DType::f32, {4, 300}, {}}}};
  }
  static Buffer random_float(DType dt, std::vector<int64_t> shape, uint32_t seed) {
    Buffer b(dt, std::move(shape));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2, 2);
    for (float& f : b.f) f = u(rng);
    return b;
  }
  bool matches() const {
    const Buffer got = from_bytes(DType::f32, {4, 300}, y.download());
    for (size_t k = 0; k < got.f.size(); ++k)
      if (std::fabs(got.f[k] - want.f[k]) > 1e-5f * (1 + std::fabs(want.f[k]))) return false;
    return true;
  }
};

TEST(GpuProgram, TenThousandLaunches) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  const Graph g = tiny_graph();
  Program p(session.context(), g, {});
  TinyRun r(g, 3);
  for (int i = 1; i <= 10000; ++i) {
    if (i % 1000 == 0) r.y.fill(0xff);  // poison, so a launch that does nothing is caught
    p.run(r.bindings, nullptr);
    if (i % 1000 == 0) {
      p.synchronize(nullptr);
      ASSERT_TRUE(r.matches()) << "wrong result after launch " << i;
    }
  }
}

TEST(GpuProgram, TwoProgramsOnTwoStreams) {
  WEFT_REQUIRE_GPU();
  const Graph g1 = tiny_graph();
  const DecoderShape s = tiny_decoder(1, 2, 16, false);
  GpuSession session;
  const auto& ctx = session.context();
  CUstream s1 = nullptr, s2 = nullptr;
  check_cu(driver().stream_create(&s1, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check_cu(driver().stream_create(&s2, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  {
    Program a(ctx, g1, {}), b(ctx, tiny_graph(), {});
    TinyRun ra(g1, 11), rb(g1, 12);
    for (int i = 0; i < 200; ++i) {
      a.run(ra.bindings, s1);
      b.run(rb.bindings, s2);
    }
    a.synchronize(s1);
    b.synchronize(s2);
    EXPECT_TRUE(ra.matches());
    EXPECT_TRUE(rb.matches());
  }
  driver().stream_destroy(s1);
  driver().stream_destroy(s2);
  // A decoder and the tiny graph interleaved on two streams agree with the reference too.
  const auto problems = compare_with_reference(build_decoder_graph(s), SymbolValues{2}, GpuCompareOptions{0, 0, 5, 0, 3, nullptr});
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(GpuProgram, DestroyedWhileAnotherRuns) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  const Graph g = tiny_graph();
  const auto& ctx = session.context();
  Program keep(ctx, g, {});
  TinyRun r(g, 21);
  {
    auto doomed = std::make_unique<Program>(ctx, g, ProgramOptions{});
    TinyRun rd(g, 22);
    for (int i = 0; i < 500; ++i) {
      keep.run(r.bindings, nullptr);
      doomed->run(rd.bindings, nullptr);
    }
    doomed.reset();  // waits for its own launches, frees its memory while `keep`'s are still queued
    EXPECT_TRUE(rd.matches());
  }
  for (int i = 0; i < 100; ++i) keep.run(r.bindings, nullptr);
  keep.synchronize(nullptr);
  EXPECT_TRUE(r.matches());
}

TEST(GpuProgram, WatchdogTurnsADeadlockIntoAnError) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  const Graph g = build_decoder_graph(tiny_decoder(1, 1, 16, false));
  ProgramOptions o;
  o.watchdog_ms = 300;
  o.use_cache = false;
  Program p(session.context(), g, o);
  p.break_task_for_testing(5);  // a deliberately broken task graph: one wait can never be satisfied
  std::vector<DeviceTensor> mem;
  std::vector<DeviceBinding> bindings;
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const TensorDesc& t = g.tensors()[i];
    if (t.kind == TensorKind::intermediate && !t.is_output) continue;
    const auto shape = resolve_shape(t.type.shape, SymbolValues{1});
    Buffer b(t.type.dtype, shape);
    mem.emplace_back(static_cast<size_t>(b.numel()) * dtype_size(b.dtype));
    mem.back().upload(to_bytes(b));  // zeros: valid ids and positions
    bindings.push_back(DeviceBinding{static_cast<TensorId>(i), TensorView{mem.back().data(), t.type.dtype, shape, {}}});
  }
  const auto start = std::chrono::steady_clock::now();
  p.run(bindings, nullptr);
  try {
    p.synchronize(nullptr);
    FAIL() << "the broken graph did not deadlock";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::deadlock);
    EXPECT_NE(std::string(e.what()).find("waited on event"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("watchdog"), std::string::npos) << e.what();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 30.0) << "the watchdog took too long to stop the kernel";
  // The GPU is not left hung: another program still runs correctly.
  const Graph t = tiny_graph();
  Program ok(session.context(), t, {});
  TinyRun r(t, 5);
  ok.run(r.bindings, nullptr);
  ok.synchronize(nullptr);
  EXPECT_TRUE(r.matches());
}

TEST(GpuProgram, DeviceArgumentErrorsNameTheRow) {
  WEFT_REQUIRE_GPU();
  GpuSession session;
  Graph g("emb");
  const TensorId table = g.add_tensor(TensorKind::weight, "table", DType::f32, fixed_shape({10, 16}));
  const TensorId ids = g.add_tensor(TensorKind::input, "ids", DType::i32, fixed_shape({4}));
  g.mark_output(g.add_op("embedding", {table, ids}, {}, "e"), "");
  Program p(session.context(), g, {});
  DeviceTensor t(10 * 16 * 4), i(4 * 4), e(4 * 16 * 4);
  Buffer idv(DType::i32, {4});
  idv.i = {1, 2, 99, 3};
  i.upload(to_bytes(idv));
  t.fill(0);
  const std::vector<DeviceBinding> b = {{table, {t.data(), DType::f32, {10, 16}, {}}}, {ids, {i.data(), DType::i32, {4}, {}}},
                                        {g.find_tensor("e"), {e.data(), DType::f32, {4, 16}, {}}}};
  p.run(b, nullptr);
  try {
    p.synchronize(nullptr);
    FAIL() << "an id out of range was not reported";
  } catch (const Error& err) {
    EXPECT_EQ(err.status(), Status::invalid_argument);
    EXPECT_NE(std::string(err.what()).find("row 2 has id 99"), std::string::npos) << err.what();
  }
  idv.i = {1, 2, 9, 3};
  i.upload(to_bytes(idv));
  p.run(b, nullptr);
  EXPECT_NO_THROW(p.synchronize(nullptr)) << "the program must stay usable after a reported error";
}

}  // namespace
}  // namespace weft::test
