// Lowering, memory plan, static schedule and the simulator: a Llama-style decoder layer and 240 random graphs
// verified under random interleavings at 1, 7, 132 and 148 SMs, and broken task graphs that must be caught.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "device/config.cuh"
#include "lower/task_graph.hpp"
#include "test_models.hpp"
#include "random_graph_gen.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulator.hpp"
#include "schedule/task_tables.hpp"

namespace weft::test {
namespace {

struct Lowered {
  TaskGraph tg;
  MemoryPlan plan;
};

Lowered lower_all(const Graph& g, int32_t sms, int64_t batch, int32_t mma_smem = WEFT_SMEM_BYTES_BASE) {
  SymbolValues values(g.symbols().size(), batch);
  Lowered l{lower(g, values, LowerOptions{sms, mma_smem}), {}};
  l.plan = plan_memory(g, l.tg);
  finalize_events(l.tg);
  return l;
}

// A small Qwen3-style decoder (bf16, symbolic batch up to 8).
Graph decoder_layer(int layers = 1) { return build_decoder_graph(tiny_decoder(layers, 8, 128)); }

TEST(Lowering, DecoderLayerIsVerifiedAtEverySmCount) {
  const Graph g = decoder_layer(2);
  for (int32_t sms : {1, 7, 132, 148})
    for (int64_t batch : {1, 3, 8}) {
      Lowered l = lower_all(g, sms, batch);
      const Schedule s = schedule_static(l.tg, sms);
      for (uint64_t seed = 0; seed < 5; ++seed)
        EXPECT_NO_THROW(simulate(g, l.tg, s, l.plan, SimulationOptions{seed, 3})) << "sms " << sms << " batch " << batch;
      // Consumers wait on tiles, not on whole ops: the q/k rope tasks only wait for their head's tiles.
      EXPECT_GT(l.tg.tasks.size(), static_cast<size_t>(g.nodes().size())) << "ops were not split into tiles";
    }
}

TEST(Lowering, FineGrainedWaits) {
  DecoderShape shape = tiny_decoder(1, 8, 128);
  shape.fuse_linear_inputs = 0;  // keeps silu_mul a separate op
  shape.swiglu_epilogue = 0;
  const Graph g = build_decoder_graph(shape);
  Lowered l = lower_all(g, 132, 1);
  // Find the silu_mul tasks: each waits on the gate/up linear tiles covering its two column ranges only.
  const auto& nodes = g.nodes();
  int32_t act = -1, gu = -1;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (g.tensor(nodes[n].output).name == "l0.act") act = int32_t(n);
    if (g.tensor(nodes[n].output).name == "l0.gate_up") gu = int32_t(n);
  }
  ASSERT_GE(act, 0);
  const int64_t gu_tiles = l.tg.grids[size_t(gu)].count();
  ASSERT_GT(gu_tiles, 4);
  for (const Task& t : l.tg.tasks) {
    if (t.node != act) continue;
    EXPECT_LT(int64_t(t.waits.size()), gu_tiles) << "a silu_mul tile waits on every gate/up tile";
  }
}

// The attention tasks copy their K/V rows before their wait: the qkv projection's tiles leave them SMs of their
// own, and the schedule puts every attention tile's first part on a queue without a qkv tile of the same layer
// (else the copy starts only when that tile is done, on the critical path of the layer). The test shapes' caches
// (4096 timesteps) are longer than the shared-memory path holds unsplit (~290 for Qwen3's heads, ~560 for Llama's):
// their tiles have 8 parts (split-KV), of which part 0 runs a short context whole.
// The producer of attention's q/k/v leaves an SM free for every attention tile where they take at most half the SMs
// (batch 1: 8 tiles; batch 8: 64), and the scheduler puts each tile there, not behind a qkv tile; where there are more
// (batch 16: 128), it leaves an eighth of them (reserved_sms, lower.cpp).
TEST(Lowering, AttentionSetUpRunsBesideItsProducer) {
  for (DecoderShape shape : {qwen3_0_6b_shape(), llama_3_2_1b_shape()})
    for (const int64_t batch : {1, 8, 16}) {
      shape.layers = 2;
      shape.vocab = 1000;
      const Graph g = build_decoder_graph(shape);
      Lowered l = lower_all(g, 132, batch);
      const Schedule s = schedule_static(l.tg, 132);
      std::vector<int32_t> queue_of(l.tg.tasks.size(), -1);
      for (size_t q = 0; q < s.queues.size(); ++q)
        for (int32_t t : s.queues[q]) queue_of[static_cast<size_t>(t)] = static_cast<int32_t>(q);
      const std::string what = shape.name + " batch " + std::to_string(batch);
      int checked = 0;
      for (size_t n = 0; n < g.nodes().size(); ++n) {
        const Node& attn = g.nodes()[n];
        if (attn.op->name != std::string_view("attention_decode_qkv")) continue;
        const TensorId qkv = attn.inputs[0];
        int32_t producer = -1;
        for (size_t p = 0; p < g.nodes().size(); ++p)
          if (g.nodes()[p].output == qkv) producer = static_cast<int32_t>(p);
        ASSERT_GE(producer, 0);
        const int64_t attn_tiles = l.tg.grids[n].count(), qkv_tiles = l.tg.grids[static_cast<size_t>(producer)].count();
        EXPECT_EQ(attn_tiles, batch * shape.kv_heads) << what;
        if (batch == 1) { EXPECT_EQ(l.tg.grids[n].k_parts, 8) << what; }
        if (attn_tiles > 66) {  // an eighth of the SMs left free
          EXPECT_LE(qkv_tiles, 132 - 16) << what;
          EXPECT_GT(qkv_tiles, 66) << what;
          continue;
        }
        EXPECT_LE(qkv_tiles, 132 - attn_tiles) << what;
        std::set<int32_t> qkv_queues;
        for (size_t t = 0; t < l.tg.tasks.size(); ++t)
          if (l.tg.tasks[t].node == producer) qkv_queues.insert(queue_of[t]);
        for (size_t t = 0; t < l.tg.tasks.size(); ++t)
          if (l.tg.tasks[t].node == static_cast<int32_t>(n) && l.tg.tasks[t].part == 0) {
            EXPECT_EQ(qkv_queues.count(queue_of[t]), 0u)
                << what << ": attention task " << t << " shares queue " << queue_of[t] << " with a qkv tile";
            ++checked;
          }
      }
      if (batch * shape.kv_heads <= 66) { EXPECT_EQ(checked, 2 * batch * shape.kv_heads) << what; }
    }
}

// The weight loader's lowering (lower_for_weight_loader) leaves attention its SMs as lower_for_device does, and
// takes the same cap ($WEFT_RESERVED_SMS through compile_graph): at batch 1 the q/k/v projection leaves one SM per
// attention tile free by default and none under a cap of 0.
TEST(Lowering, WeightLoaderLoweringTakesTheReserveCap) {
  DecoderShape shape = qwen3_0_6b_shape();
  shape.layers = 1;
  shape.vocab = 1000;
  const Graph g = build_decoder_graph(shape);
  const SymbolValues one(g.symbols().size(), 1);
  const TaskGraph by_default = lower_for_weight_loader(g, one, 132);
  const TaskGraph uncapped = lower_for_weight_loader(g, one, 132, WEFT_ATTN_MAX_SPLIT, 0);
  int checked = 0;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Node& attn = g.nodes()[n];
    if (attn.op->name != std::string_view("attention_decode_qkv")) continue;
    for (size_t p = 0; p < g.nodes().size(); ++p) {
      if (g.nodes()[p].output != attn.inputs[0]) continue;
      const int64_t attn_tiles = by_default.grids[n].count();
      EXPECT_EQ(attn_tiles, shape.kv_heads);
      EXPECT_LE(by_default.grids[p].count(), 132 - attn_tiles);
      EXPECT_GT(uncapped.grids[p].count(), 132 - attn_tiles) << "the cap of 0 left attention SMs of its own";
      ++checked;
    }
  }
  EXPECT_EQ(checked, shape.layers);
}

// Split-KV attention (ATTENTION_DECODE_QKV in device/task_abi.h): a cache longer than the shared-memory path holds
// unsplit gives each tile P parts, which the device's merge relies on: every part names P and itself, the parts of
// a tile share one block of 2 x tile words per part and one counter, no two tiles share either, everything lies in
// scratch, the consumer waits for P notifies per tile, and the simulator accepts the tables. The task tables keep
// that (a block moved past scratch is refused) and the runtime relocates the block and counter. A cache that fits
// unsplit, or LowerOptions::attention_split = 1, gives one part.
TEST(Lowering, AttentionSplitsOverTimestepsWhereTheCacheIsLong) {
  DecoderShape shape = qwen3_0_6b_shape();
  shape.layers = 2;
  shape.vocab = 1000;
  auto attention_nodes = [](const Graph& g) {
    std::vector<int32_t> r;
    for (size_t n = 0; n < g.nodes().size(); ++n)
      if (g.nodes()[n].op->name == std::string_view("attention_decode_qkv")) r.push_back(static_cast<int32_t>(n));
    return r;
  };
  for (const auto& [max_seq, limit, parts] : std::vector<std::tuple<int64_t, int32_t, int64_t>>{
           {4096, WEFT_ATTN_MAX_SPLIT, 8}, {1024, WEFT_ATTN_MAX_SPLIT, 4}, {256, WEFT_ATTN_MAX_SPLIT, 1}, {4096, 2, 2}, {4096, 1, 1}}) {
    shape.max_seq = max_seq;
    const Graph g = build_decoder_graph(shape);
    TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 1), LowerOptions{132, WEFT_SMEM_BYTES_BASE, limit});
    const MemoryPlan plan = plan_memory(g, tg);
    finalize_events(tg);
    const std::string what = "max_seq " + std::to_string(max_seq) + " limit " + std::to_string(limit);
    std::set<int64_t> counters;  // never shared; blocks may be, by nodes that wait for each other
    for (int32_t n : attention_nodes(g)) {
      ASSERT_EQ(tg.grids[size_t(n)].k_parts, parts) << what;
      std::set<int64_t> blocks;
      std::map<int64_t, std::pair<int64_t, int64_t>> tile;  // col0 -> (block, counter)
      for (const Task& t : tg.tasks) {
        if (t.node != n) continue;
        if (parts == 1) {
          EXPECT_EQ(t.args.d[9], 0) << what;
          continue;
        }
        EXPECT_EQ(t.args.d[9], parts) << what;
        EXPECT_EQ(t.args.d[10], t.part) << what;
        const std::pair<int64_t, int64_t> where{t.args.d[11], t.args.d[12]};
        const auto [it, fresh] = tile.emplace(t.tile.col0, where);
        if (fresh) {
          EXPECT_TRUE(blocks.insert(where.first).second) << what << ": two tiles share a block";
          EXPECT_TRUE(counters.insert(where.second).second) << what << ": a counter shared";
        } else {
          EXPECT_EQ(it->second, where) << what << ": the parts of a tile disagree";
        }
        EXPECT_LE(where.first + parts * 2 * (t.tile.col1 - t.tile.col0), tg.scratch_words) << what;
        EXPECT_LT(where.second, tg.scratch_words) << what;
      }
      for (const Task& t : tg.tasks)
        for (const TaskWait& w : t.waits)
          if (tg.events[size_t(w.event)].node == n) {
            EXPECT_EQ(w.count % parts, 0u) << what << ": " << tg.task_name(g, int32_t(&t - tg.tasks.data()));
          }
    }
    const Schedule sch = schedule_static(tg, 132);
    EXPECT_NO_THROW(simulate(g, tg, sch, plan, SimulationOptions{3, 2})) << what;
    if (parts == 1) continue;
    const TaskTables tables = build_task_tables(tg, sch, static_cast<int32_t>(g.tensors().size()));
    TaskTables parsed = parse_task_tables(serialize_task_tables(tables));
    const std::vector<weft_task> moved = relocate_scratch(parsed, 1 << 20);
    for (size_t i = 0; i < moved.size(); ++i)
      if (moved[i].op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) {
        EXPECT_EQ(moved[i].args.d[11], (1 << 20) + 4 * parsed.tasks[i].args.d[11]) << what;
        EXPECT_EQ(moved[i].args.d[12], (1 << 20) + 4 * parsed.tasks[i].args.d[12]) << what;
        parsed.tasks[i].args.d[11] = parsed.scratch_words;  // its block past the end of scratch
        EXPECT_THROW(parse_task_tables(serialize_task_tables(parsed)), Error) << what;
        break;
      }
  }
}

// attention_whole_timesteps is where lowering starts to split: a cache of exactly that many timesteps keeps one
// part, one more splits (the device generator runs an unsplit program below it, models/device_generator.cpp). Llama's
// and Qwen3's heads hold a few hundred timesteps in the base shared memory, more in the wide one; f32 and other head
// sizes take no tile of the path (0).
TEST(Lowering, AttentionWholeTimestepsIsWhereTheSplitStarts) {
  for (DecoderShape shape : {llama_3_2_1b_shape(), qwen3_0_6b_shape()}) {
    shape.layers = 1;
    shape.vocab = 1000;
    const int64_t whole = attention_whole_timesteps(shape.head_dim, shape.q_heads / shape.kv_heads, shape.dtype);
    EXPECT_GT(whole, 200) << shape.name;
    EXPECT_LT(whole, 1000) << shape.name;
    EXPECT_GT(attention_whole_timesteps(shape.head_dim, shape.q_heads / shape.kv_heads, shape.dtype, WEFT_SMEM_BYTES_WIDE), whole)
        << shape.name;
    for (const auto& [max_seq, parts] : std::vector<std::pair<int64_t, int64_t>>{{whole, 1}, {whole + 1, 2}}) {
      shape.max_seq = max_seq;
      const Graph g = build_decoder_graph(shape);
      const TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 1), LowerOptions{132});
      for (size_t n = 0; n < g.nodes().size(); ++n)
        if (g.nodes()[n].op->name == std::string_view("attention_decode_qkv")) {
          EXPECT_EQ(tg.grids[n].k_parts, parts) << shape.name << " max_seq " << max_seq;
        }
    }
  }
  EXPECT_EQ(attention_whole_timesteps(64, 2, DType::f32), 0);
  EXPECT_EQ(attention_whole_timesteps(96, 2, DType::bf16), 0);
  EXPECT_EQ(attention_whole_timesteps(128, 0, DType::bf16), 0);
  EXPECT_EQ(attention_whole_timesteps(128, 2, DType::bf16, 1024), 0);  // no room for the fixed part
}

// Where a step's attention tiles of one (row, kv head) outnumber the SMs, lowering pairs two kv heads per tile (the
// device runs one per half of the block, i3 = 2): Llama-3.2-1B's and Qwen3-0.6B's heads at batch 32 (256 tiles of
// one on 132 SMs) — by default only where the cache is no longer than a half holds, with LowerOptions::
// attention_pairs 1 whatever its length —, not at batch 8 (64), not with attention_pairs -1, and not without a rope
// table (the device's pair path takes its rope from it). A paired tile spans both kv heads' q heads, reads both
// heads' k and v columns of qkv (the simulator checks every read against its producers' tiles), and the pair's half
// of the ops' shared memory holds a pass of its warps.
TEST(Lowering, AttentionPairsKvHeadsWhereTilesOutnumberTheSms) {
  for (DecoderShape shape : {llama_3_2_1b_shape(), qwen3_0_6b_shape()}) {
    shape.layers = 2;
    shape.vocab = 1000;
    shape.fuse_linear_inputs = 0;  // the batched steps' graph: SwiGLU apart from down, a rope table per step
    const int64_t group = shape.q_heads / shape.kv_heads, head_cols = group * shape.head_dim;
    const int64_t half = attention_pair_timesteps(shape.head_dim, group, shape.dtype);
    EXPECT_GE(attention_pair_timesteps(shape.head_dim, group, shape.dtype), WEFT_ATTN_PAIR_WARPS * WEFT_WARP_THREADS / 2)
        << shape.name;
    EXPECT_LT(attention_pair_timesteps(shape.head_dim, group, shape.dtype),
              attention_whole_timesteps(shape.head_dim, group, shape.dtype) / 2 + 1)
        << shape.name;
    for (const auto& [batch, mode, max_seq, rope_table, paired] : std::vector<std::tuple<int64_t, int32_t, int64_t, int, bool>>{
             {32, 1, 512, 1, true}, {32, 0, 512, 1, false}, {32, 0, half, 1, true}, {32, 0, half + 1, 1, false},
             {8, 1, 512, 1, false}, {32, -1, half, 1, false}, {32, 1, 512, 0, false}}) {
      shape.rope_table = rope_table;
      shape.max_seq = max_seq;
      const Graph g = build_decoder_graph(shape);
      LowerOptions o{132};
      o.attention_pairs = mode;
      TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), batch), o);
      const MemoryPlan plan = plan_memory(g, tg);
      finalize_events(tg);
      const std::string what = shape.name + " batch " + std::to_string(batch) + " pairs " + std::to_string(mode) +
                               " max_seq " + std::to_string(max_seq) + (rope_table ? "" : " no rope table");
      int checked = 0;
      for (const Task& t : tg.tasks) {
        if (t.dev_op != WEFT_DEV_OP_ATTENTION_DECODE_QKV) continue;
        EXPECT_EQ(t.tile.col1 - t.tile.col0, (paired ? 2 : 1) * head_cols) << what;
        EXPECT_EQ(t.tile.col0 % ((paired ? 2 : 1) * head_cols), 0) << what;
        EXPECT_EQ(t.args.i[3], paired ? 2 : 0) << what;
        if (paired) {
          EXPECT_EQ(t.args.d[9], 0) << what << ": a paired tile is never split";
        }
        checked += t.part == 0 ? 1 : 0;  // tiles (a split one has a task per part)
      }
      EXPECT_EQ(checked, shape.layers * batch * shape.kv_heads / (paired ? 2 : 1)) << what;
      const Schedule sch = schedule_static(tg, 132);
      EXPECT_NO_THROW(simulate(g, tg, sch, plan, SimulationOptions{5, 2})) << what;
    }
  }
  EXPECT_TRUE(attention_may_pair(17, 32, 8, 64, DType::bf16, 132));
  EXPECT_FALSE(attention_may_pair(16, 32, 8, 64, DType::bf16, 132));  // 128 tiles of one fit the SMs
  EXPECT_FALSE(attention_may_pair(32, 24, 3, 64, DType::bf16, 132));  // an odd number of kv heads
  EXPECT_FALSE(attention_may_pair(32, 48, 8, 64, DType::bf16, 132));  // 6 q heads per kv head
  EXPECT_FALSE(attention_may_pair(32, 32, 8, 64, DType::f32, 132));
  EXPECT_EQ(attention_pair_timesteps(64, 4, DType::f32), 0);
  EXPECT_EQ(attention_pair_timesteps(128, 2, DType::bf16, 8192), 0);  // no room for the fixed part
}

// A split attention tile's parts above 0 leave their waits to the op (it waits only where the part has work: at a
// short context they have none and notify at once) exactly where the positions are ready at launch: in a decoder
// and with positions given, not where an op computes them (the prologue's reading could be stale) nor in an
// unsplit tile. Part 0 always waits, for all of them; the simulator refuses tables where it does not, and the task
// tables refuse a negative wait count anywhere but on such a part.
TEST(Lowering, IdleAttentionPartsLeaveTheirWaitsToTheOp) {
  auto lowered = [](const Graph& g, int32_t limit) {
    TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 1), LowerOptions{132, WEFT_SMEM_BYTES_BASE, limit});
    const MemoryPlan plan = plan_memory(g, tg);
    finalize_events(tg);
    const Schedule sch = schedule_static(tg, 132);
    EXPECT_NO_THROW(simulate(g, tg, sch, plan, SimulationOptions{5, 2})) << g.name();
    return std::pair{std::move(tg), sch};
  };
  DecoderShape shape = qwen3_0_6b_shape();
  shape.layers = 2;
  shape.vocab = 1000;
  shape.max_seq = 4096;
  const Graph decoder = build_decoder_graph(shape);
  for (const auto& [g, limit, deferred] : std::vector<std::tuple<Graph, int32_t, bool>>{
           {decoder, WEFT_ATTN_MAX_SPLIT, true}, {decoder, 1, false},
           {split_attention_graph(false), WEFT_ATTN_MAX_SPLIT, true}, {split_attention_graph(true), WEFT_ATTN_MAX_SPLIT, false}}) {
    const std::string what = g.name() + " limit " + std::to_string(limit);
    auto [tg, sch] = lowered(g, limit);
    int in_op = 0;
    for (const Task& t : tg.tasks) {
      const bool attention = t.dev_op == WEFT_DEV_OP_ATTENTION_DECODE_QKV;
      if (attention) {
        EXPECT_FALSE(t.waits.empty()) << what << ": attention waits for nothing";
      }
      EXPECT_EQ(t.waits_in_op, deferred && attention && t.part > 0) << what << ": " << tg.task_name(g, int32_t(&t - tg.tasks.data()));
      in_op += t.waits_in_op ? 1 : 0;
    }
    if (!deferred) {
      EXPECT_EQ(in_op, 0) << what;
      continue;
    }
    // The tables say it with a negative count, and keep it.
    const TaskTables tables = build_task_tables(tg, sch, static_cast<int32_t>(g.tensors().size()));
    const TaskTables parsed = parse_task_tables(serialize_task_tables(tables));
    size_t part0 = 0;
    std::vector<size_t> refused;  // part 0 of a tile, and a waiting task of an op that does not wait for itself
    for (size_t i = 0; i < tg.tasks.size(); ++i) {
      const int32_t n = static_cast<int32_t>(tg.tasks[i].waits.size());
      EXPECT_EQ(parsed.tasks[i].wait_count, tg.tasks[i].waits_in_op ? -n : n) << what;
      if (tg.tasks[i].dev_op == WEFT_DEV_OP_ATTENTION_DECODE_QKV && tg.tasks[i].part == 0) part0 = i;
      if (tg.tasks[i].dev_op != WEFT_DEV_OP_ATTENTION_DECODE_QKV && n > 0 && refused.empty()) refused.push_back(i);
    }
    refused.push_back(part0);
    for (const size_t i : refused) {
      TaskTables broken = parsed;
      broken.tasks[i].wait_count = -std::abs(broken.tasks[i].wait_count);
      EXPECT_THROW(parse_task_tables(serialize_task_tables(broken)), Error) << what << ": task " << i;
    }
    // Part 0 must make every wait a part leaves to its op, and be there.
    const size_t part1 = part0 + 1;
    ASSERT_TRUE(tg.tasks[part1].waits_in_op) << what;
    TaskGraph fewer = tg;
    fewer.tasks[part0].waits.pop_back();
    EXPECT_THROW(check_waits_in_op(g, fewer), Error) << what;
    TaskGraph first = tg;
    first.tasks[part0].waits_in_op = true;
    EXPECT_THROW(check_waits_in_op(g, first), Error) << what;
  }
}

// Batched decode (bf16): every projection takes tensor-core tiles (device/gemv_mma.cuh) with as few row blocks
// as shared memory allows — each row block streams the whole weight again — and rows the device accepts. With
// the base shared memory (sm_80) Llama-1B at batch 8 streams every K-2048 weight once and down's (K 8192, 4 rows
// fit) twice, batch 32 twice (20 rows of K 2048 fit) and down's 8 times; with the wide one (sm_90 and later: 33
// rows of K 2048 and 8 of K 8192 fit) every K-2048 weight once at batch 32 too (two m16 blocks per tile), down's
// once at batch 8 and 4 times at batch 32. o, a plain linear, at batch 32 on the base size splits K in two
// instead of two row blocks (weft_mma_split_parts: each task stages half of x once and streams its weights once).
TEST(Lowering, BatchedProjectionsTakeTensorCoreTilesInFewestRowBlocks) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  const Graph g = build_decoder_graph(shape);
  for (const int32_t smem : {WEFT_SMEM_BYTES_BASE, WEFT_SMEM_BYTES_WIDE}) {
    const bool wide = smem == WEFT_SMEM_BYTES_WIDE;
    EXPECT_EQ(WEFT_MMA_ROWS_FIT_IN(smem, 8192, 2), wide ? 8 : 4);
    EXPECT_EQ(WEFT_MMA_ROWS_FIT_IN(smem, 2048, 2), wide ? 33 : 20);
    for (int64_t batch : {2, 8, 32}) {
      Lowered l = lower_all(g, 132, batch, smem);
      int checked = 0;
      for (size_t n = 0; n < g.nodes().size(); ++n) {
        const Node& node = g.nodes()[n];
        const std::string_view op = node.op->name;
        if (op != "linear" && op != "rmsnorm_linear" && op != "silu_mul_linear") continue;
        const TensorId w = node.inputs[op == "rmsnorm_linear" ? 2 : 1];
        const int64_t k = g.tensor(w).type.shape[1].value;
        const TileGrid& grid = l.tg.grids[n];
        const int64_t most = std::min<int64_t>(WEFT_MMA_MAX_ROWS, WEFT_MMA_ROWS_FIT_IN(smem, k, 2));
        const std::string what = std::string(op) + " K=" + std::to_string(k) + " batch " + std::to_string(batch) +
                                 " smem " + std::to_string(smem);
        EXPECT_EQ(grid.rows, batch) << what;
        if (op == "linear" && batch == 32 && !wide) {
          EXPECT_EQ(grid.k_parts, 2) << what;
          EXPECT_EQ(grid.row_blocks(), 1) << what;
          ++checked;
          continue;
        }
        EXPECT_EQ(grid.k_parts, 1) << what;
        EXPECT_GE(grid.row_block, WEFT_MMA_MIN_ROWS) << what;
        EXPECT_LE(grid.row_block, most) << what;
        EXPECT_EQ(grid.row_blocks(), (batch + most - 1) / most) << what;
        const int64_t down_blocks = batch == 32 ? (wide ? 4 : 8) : batch == 8 && !wide ? 2 : 1;
        EXPECT_EQ(grid.row_blocks(), k == 8192 ? down_blocks : batch == 32 && !wide ? 2 : 1) << what;
        for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)  // even blocks: none left with a single row
          EXPECT_GE(grid.tile(rb, 0).row1 - grid.tile(rb, 0).row0, WEFT_MMA_MIN_ROWS) << what;
        ++checked;
      }
      EXPECT_EQ(checked, 5) << "qkv, o, gate_up, down, logits";
    }
  }
}

// LowerOptions::split_k_parts raises the parts of the plain tensor-core linears whose x is at least a quarter of a
// task's weight stream (q/k/v, o and down at batch 8 and 32; never the logits, whose tasks stream ~30x their x), keeps
// a part a whole number of stages, still fills the SMs about once, and leaves batch 1 (CUDA-core tiles) unsplit.
TEST(Lowering, RaisedSplitKPartsApplyWhereXOutweighsTheWeightStream) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  shape.fuse_linear_inputs = 0;
  shape.norms_in_linears = 0;  // q/k/v and the logits plain linears too
  const Graph g = build_decoder_graph(shape);
  for (int64_t batch : {1, 8, 32})
    for (int32_t raised : {1, 2, 4, 8}) {
      // q/k/v spread over the SMs but an eighth (at batch 8 it leaves 64 free for attention by default, and its
      // tiles are then too few to split further).
      LowerOptions base{132, WEFT_SMEM_BYTES_WIDE};
      base.reserve_cap = 132 / 8;
      LowerOptions o = base;
      o.split_k_parts = raised;
      const TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), batch), o);
      const TaskGraph plain = lower(g, SymbolValues(g.symbols().size(), batch), base);
      int checked = 0;
      for (size_t n = 0; n < g.nodes().size(); ++n) {
        const Node& node = g.nodes()[n];
        if (node.op->name != std::string_view("linear")) continue;
        const int64_t k = g.tensor(node.inputs[1]).type.shape[1].value;
        const TileGrid& grid = tg.grids[n];
        const std::string what = g.tensor(node.output).name + " batch " + std::to_string(batch) + " raised to " +
                                 std::to_string(raised);
        const int64_t before = plain.grids[n].k_parts;
        if (batch == 1 || g.tensor(node.output).name == "logits") {
          EXPECT_EQ(grid.k_parts, before) << what;
        } else {
          EXPECT_EQ(grid.k_parts, std::max<int64_t>(before, raised)) << what;
          EXPECT_EQ((k / grid.k_parts) % WEFT_MMA_K_MULTIPLE, 0) << what;
          EXPECT_LE(grid.tasks(), 132) << what;
          EXPECT_GE(grid.tasks(), 100) << what;
        }
        ++checked;
      }
      EXPECT_EQ(checked, 4) << "qkv, o, down, logits";
    }
}

// The same with the norms and SwiGLU as separate ops (norms_in_linears 0, as a model's graph past 8 rows has
// them; up to 8 rows its norms run inside the linears they feed, whose tiles are the same): plain linears take
// tensor-core tiles from 2 rows, and at batch 8 down's 8 rows of K 8192 make the wide shared memory worth it (at
// the base size they would be two row blocks of 4, or two x chunks). Every linear is one row block; at batch 32
// down's 32 rows of K 8192 split K in 4 parts of 2048 (8 of 1024 at the base size).
TEST(Lowering, UnfusedBatchedLinearsTakeTensorCoreTiles) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  shape.fuse_linear_inputs = 0;
  shape.swiglu_epilogue = 0;
  shape.norms_in_linears = 0;
  const Graph g = build_decoder_graph(shape);
  for (int64_t batch : {2, 8, 32}) {
    Lowered l = lower_all(g, 132, batch, WEFT_SMEM_BYTES_WIDE);
    int checked = 0;
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const Node& node = g.nodes()[n];
      if (node.op->name != std::string_view("linear")) continue;
      const int64_t k = g.tensor(node.inputs[1]).type.shape[1].value;
      const TileGrid& grid = l.tg.grids[n];
      const std::string what = "K=" + std::to_string(k) + " batch " + std::to_string(batch);
      EXPECT_EQ(grid.row_blocks(), 1) << what;
      EXPECT_EQ(grid.k_parts, k == 8192 && batch == 32 ? 4 : 1) << what;
      if (grid.k_parts == 1) {
        EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, k, batch, grid.col_tile, 2), k) << what;
      }
      ++checked;
    }
    EXPECT_EQ(checked, 5) << "qkv, o, gate_up, down, logits";
  }
  bool wide = false;
  lower_for_device(g, SymbolValues(g.symbols().size(), 8), 132, 90, wide);
  EXPECT_TRUE(wide) << "batch 8: down's 8 rows of K 8192";
  const SymbolValues b32(g.symbols().size(), 32);
  const TaskGraph w = lower_for_device(g, b32, 132, 90, wide);
  EXPECT_TRUE(wide) << "batch 32";
  EXPECT_EQ(mma_x_chunks(w, WEFT_SMEM_BYTES_WIDE), 4 * 128) << "down: 32 column tiles of 64 split in 4 parts";
  EXPECT_GT(mma_x_chunks(lower(g, b32, LowerOptions{132, WEFT_SMEM_BYTES_BASE}), WEFT_SMEM_BYTES_BASE), 4 * 128);

  // A gate_up-sized linear (32 rows of K 2048) and an o-sized one: K split in two at the base size (the weight
  // streamed once instead of twice, 128 tasks of 2 parts), x whole at the wide size, which is taken for it.
  for (const int64_t n : {16384, 2048}) {
    Graph one;
    const TensorId x = one.add_tensor(TensorKind::input, "x", DType::bf16, {Dim::fixed(32), Dim::fixed(2048)});
    const TensorId wt = one.add_tensor(TensorKind::weight, "w", DType::bf16, {Dim::fixed(n), Dim::fixed(2048)});
    one.mark_output(one.add_op("linear", {x, wt}, {}, "y"), "");
    const TaskGraph one_base = lower(one, {}, LowerOptions{132, WEFT_SMEM_BYTES_BASE});
    const TaskGraph one_wide = lower_for_device(one, {}, 132, 90, wide);
    EXPECT_TRUE(wide) << n;
    EXPECT_EQ(one_base.grids.back().row_block, 32) << n;
    EXPECT_EQ(one_base.grids.back().k_parts, 2) << n;
    EXPECT_EQ(one_base.grids.back().tasks(), 128) << n;
    EXPECT_EQ(one_wide.grids.back().row_block, 32) << n;
    EXPECT_EQ(one_wide.grids.back().k_parts, 1) << n;
    EXPECT_EQ(mma_x_chunks(one_base, WEFT_SMEM_BYTES_BASE), 2 * 128) << n;
    EXPECT_EQ(mma_x_chunks(one_wide, WEFT_SMEM_BYTES_WIDE), 0) << n;
    lower_for_device(one, {}, 108, 80, wide);
    EXPECT_FALSE(wide) << "sm_80 has no wide size";
  }
}

// Served to more than 8 rows, Llama-3.2-1B's gate/up projection takes SwiGLU into its tiles (linear_silu_mul): no
// silu_mul op; at 8 and 32 rows one row block of tensor-core tiles whose x and gate/up sums fit the wide shared
// memory, 63 columns each (126 weight rows), which the device plans the same way; the down projection reads it.
TEST(Lowering, BatchedGateUpTakesSwigluIntoItsTiles) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  shape.max_batch = 32;
  shape.fuse_linear_inputs = 0;
  ASSERT_TRUE(swiglu_epilogue_pays(shape));
  const Graph g = build_decoder_graph(shape);
  int fused = -1;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    EXPECT_NE(g.nodes()[n].op->name, std::string_view("silu_mul"));
    if (g.nodes()[n].op->name == std::string_view("linear_silu_mul")) fused = static_cast<int>(n);
  }
  ASSERT_GE(fused, 0);
  const Node& down = g.nodes()[static_cast<size_t>(fused) + 1];
  EXPECT_EQ(down.inputs[0], g.nodes()[static_cast<size_t>(fused)].output) << "down reads the SwiGLU";
  for (int64_t batch : {8, 32}) {
    bool wide = false;
    const TaskGraph tg = lower_for_device(g, SymbolValues(g.symbols().size(), batch), 132, 90, wide);
    EXPECT_TRUE(wide) << batch;
    const TileGrid& grid = tg.grids[static_cast<size_t>(fused)];
    EXPECT_EQ(grid.row_blocks(), 1) << batch;
    EXPECT_EQ(grid.col_tile, 63) << batch;
    EXPECT_TRUE(weft_mma_swiglu_fits(WEFT_SMEM_BYTES_WIDE, 2048, batch, grid.col_tile, 2)) << batch;
    EXPECT_TRUE(may_use_tensor_core_tiles(tg));
  }
  // At the base size 32 rows of K 2048 do not fit one tile: two row blocks of 16.
  const TaskGraph base = lower(g, SymbolValues(g.symbols().size(), 32), LowerOptions{132, WEFT_SMEM_BYTES_BASE});
  EXPECT_EQ(base.grids[static_cast<size_t>(fused)].row_block, 16);
}

// The rule: 16-bit weights whose x rows (the model's max_batch, at most 32) fit one tensor-core tile whole.
TEST(Lowering, SwigluEpiloguePaysWhereRowsFitOneTile) {
  DecoderShape llama = llama_3_2_1b_shape();
  llama.max_batch = 64;
  EXPECT_TRUE(swiglu_epilogue_pays(llama)) << "32 rows of K 2048 fit (64 rows: two row blocks of 32)";
  DecoderShape q8 = qwen3_8b_shape();
  q8.max_batch = 32;
  EXPECT_FALSE(swiglu_epilogue_pays(q8)) << "K 4096: 17 rows fit, not 32 (the linear splits K instead)";
  q8.max_batch = 16;
  EXPECT_TRUE(swiglu_epilogue_pays(q8));
  llama.dtype = DType::f32;
  EXPECT_FALSE(swiglu_epilogue_pays(llama));
  DecoderShape off = llama_3_2_1b_shape();
  off.max_batch = 32;
  off.fuse_linear_inputs = 0;
  off.swiglu_epilogue = 0;
  bool has_silu_mul = false;
  const Graph g = build_decoder_graph(off);
  for (const Node& n : g.nodes()) has_silu_mul = has_silu_mul || n.op->name == std::string_view("silu_mul");
  EXPECT_TRUE(has_silu_mul) << "swiglu_epilogue = 0 keeps the two ops";
}

// The K per chunk of a chunked tile: K itself where the rows fit whole, else the largest divisor of K (a
// multiple of the mma stage) whose chunk, partial sums and per-output f32 sums fit beside the ring; 0 where none
// does or the tile is not a tensor-core tile.
TEST(Lowering, MmaChunkIsTheLargestThatFits) {
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8192, 32, 16, 2), 2048);
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_BASE, 8192, 32, 16, 2), 1024);
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8192, 8, 16, 2), 8192);
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8192, 16, 16, 2), 4096);
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 12288, 32, 32, 2), 2048);  // Qwen3-8B's down: 6 chunks
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8192, 1, 16, 2), 0) << "one row: CUDA cores";
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8192, 33, 16, 2), 0) << "more rows than two m16 blocks";
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_WIDE, 8200, 32, 16, 2), 0) << "K not a multiple of the stage";
  EXPECT_EQ(weft_mma_chunk_k(WEFT_SMEM_BYTES_BASE, 128 * 7 * 8, 32, 16, 2), 1024) << "K / 7";
  for (const int64_t smem : {WEFT_SMEM_BYTES_BASE, WEFT_SMEM_BYTES_WIDE})
    for (int64_t k = 128; k <= 16384; k += 128)
      for (const int64_t rows : {2, 9, 17, 32})
        for (const int64_t cols : {8, 16, 125, 1000}) {
          const int64_t kc = weft_mma_chunk_k(smem, k, rows, cols, 2);
          const std::string what = "smem " + std::to_string(smem) + " K " + std::to_string(k) + " rows " +
                                   std::to_string(rows) + " cols " + std::to_string(cols);
          const auto fits = [&](int64_t c) {
            return WEFT_GEMV_RING_BYTES + WEFT_GEMV_SCRATCH_BYTES + rows * WEFT_MMA_ROW_BYTES(c, 2) + rows * cols * 4 <= smem;
          };
          if (rows <= WEFT_MMA_ROWS_FIT_IN(smem, k, 2)) {
            EXPECT_EQ(kc, k) << what;
            continue;
          }
          if (kc == 0) {
            EXPECT_FALSE(fits(WEFT_MMA_K_MULTIPLE)) << what << ": the smallest chunk fits";
            continue;
          }
          EXPECT_EQ(k % kc, 0) << what;
          EXPECT_EQ(kc % WEFT_MMA_K_MULTIPLE, 0) << what;
          EXPECT_LT(kc, k) << what;
          EXPECT_TRUE(fits(kc)) << what;
          for (int64_t d = 2; k / d > kc; ++d) {
            if (k % d != 0 || (k / d) % WEFT_MMA_K_MULTIPLE != 0) continue;
            EXPECT_FALSE(fits(k / d)) << what << ": K / " << d << " fits";
          }
        }
}

// The wide shared memory only where the arch has it and it merges row blocks: Llama-1B batch 8 on sm_90 (down's
// K 8192), not on sm_80, not at batch 1 (no tensor-core tiles), not for a decoder whose tiles fit either way.
TEST(Lowering, WideSharedMemoryOnlyWhereItMergesRowBlocks) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  const Graph llama = build_decoder_graph(shape);
  const SymbolValues eight(llama.symbols().size(), 8), one(llama.symbols().size(), 1);
  bool wide = false;
  const TaskGraph tg = lower_for_device(llama, eight, 132, 90, wide);
  EXPECT_TRUE(wide);
  EXPECT_LT(tg.tasks.size(), lower(llama, eight, LowerOptions{132, WEFT_SMEM_BYTES_BASE}).tasks.size());
  EXPECT_EQ(tg.tasks.size(), lower(llama, eight, LowerOptions{132, WEFT_SMEM_BYTES_WIDE}).tasks.size());
  lower_for_device(llama, eight, 132, 100, wide);
  EXPECT_TRUE(wide) << "sm_100a";
  const TaskGraph a100 = lower_for_device(llama, eight, 108, 80, wide);
  EXPECT_FALSE(wide) << "sm_80";
  EXPECT_EQ(a100.tasks.size(), lower(llama, eight, LowerOptions{108, WEFT_SMEM_BYTES_BASE}).tasks.size());
  lower_for_device(llama, one, 132, 90, wide);
  EXPECT_FALSE(wide) << "batch 1";
  const Graph small = decoder_layer(2);
  lower_for_device(small, SymbolValues(small.symbols().size(), 8), 132, 90, wide);
  EXPECT_FALSE(wide) << "a decoder whose tiles fit the base size";
}

// Which device library a kernel links (CompileOptions::tensor_cores): the one without tensor-core tiles only
// where no projection tile has two rows or more of bf16/f16 — batch-1 decode of any model, and f32 graphs.
TEST(Lowering, OnlyBatchedHalfProjectionsNeedTheTensorCoreLibrary) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 1;
  const Graph llama = build_decoder_graph(shape);
  EXPECT_FALSE(may_use_tensor_core_tiles(lower_all(llama, 132, 1).tg));
  for (int64_t batch : {2, 8, 32}) EXPECT_TRUE(may_use_tensor_core_tiles(lower_all(llama, 132, batch).tg)) << batch;
  const Graph qwen = decoder_layer(2);
  EXPECT_FALSE(may_use_tensor_core_tiles(lower_all(qwen, 132, 1).tg));
  EXPECT_TRUE(may_use_tensor_core_tiles(lower_all(qwen, 132, 3).tg));
  DecoderShape f32 = tiny_decoder(1, 8, 128);
  f32.dtype = DType::f32;
  EXPECT_FALSE(may_use_tensor_core_tiles(lower_all(build_decoder_graph(f32), 132, 8).tg)) << "f32 tiles never take them";
}

// Which library without tensor-core tiles a kernel links (CompileOptions::one_row_f16): the one whose task loop
// inlines the one-row f16 tiles where most of its one-row projection tiles are f16, else the bf16 one.
TEST(Lowering, OneRowF16ProjectionsPickTheF16Library) {
  DecoderShape shape = tiny_decoder(1, 8, 128);
  EXPECT_FALSE(one_row_tiles_f16(lower_all(build_decoder_graph(shape), 132, 1).tg)) << "bf16";
  shape.dtype = DType::f16;
  const Graph f16 = build_decoder_graph(shape);
  EXPECT_TRUE(one_row_tiles_f16(lower_all(f16, 132, 1).tg));
  EXPECT_FALSE(one_row_tiles_f16(lower_all(f16, 132, 4).tg)) << "tiles of 4 rows are no one-row tiles";
  shape.dtype = DType::f32;
  EXPECT_FALSE(one_row_tiles_f16(lower_all(build_decoder_graph(shape), 132, 1).tg)) << "f32";
}

TEST(Lowering, ArenaReusesMemory) {
  const Graph g = decoder_layer(4);
  Lowered l = lower_all(g, 132, 8);
  int64_t sum = 0;
  for (size_t t = 0; t < g.tensors().size(); ++t)
    if (l.plan.offset[t] >= 0) sum += l.plan.bytes[t];
  EXPECT_GT(l.plan.arena_bytes, 0);
  EXPECT_LT(l.plan.arena_bytes, sum / 2) << "4 identical layers should reuse intermediate memory";
  // Tensors alive at the same time never overlap.
  const auto& nodes = g.nodes();
  std::vector<int32_t> last(g.tensors().size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (TensorId in : nodes[n].inputs)
      if (in != kNoTensor) last[size_t(in)] = int32_t(n);
  for (size_t a = 0; a < g.tensors().size(); ++a)
    for (size_t b = a + 1; b < g.tensors().size(); ++b) {
      if (l.plan.offset[a] < 0 || l.plan.offset[b] < 0) continue;
      const int32_t a0 = g.tensors()[a].producer, a1 = std::max(a0, last[a]);
      const int32_t b0 = g.tensors()[b].producer, b1 = std::max(b0, last[b]);
      const bool live_together = !(a1 < b0 || b1 < a0);
      const bool overlap = l.plan.offset[a] < l.plan.offset[b] + l.plan.bytes[b] && l.plan.offset[b] < l.plan.offset[a] + l.plan.bytes[a];
      EXPECT_FALSE(live_together && overlap) << g.tensors()[a].name << " and " << g.tensors()[b].name;
    }
}

TEST(Lowering, RandomGraphsVerify) {
  int graphs = 0;
  size_t nodes = 0, tasks = 0;
  std::set<std::string> ops_seen;
  for (uint32_t seed = 0; seed < 240; ++seed) {
    RandomGraphBuilder builder(seed);
    const Graph g = builder.build();
    const int32_t sms = std::array<int32_t, 4>{1, 7, 132, 148}[seed % 4];
    Lowered l = lower_all(g, sms, 1 + seed % 4);
    nodes += g.nodes().size();
    tasks += l.tg.tasks.size();
    for (const Node& n : g.nodes()) ops_seen.insert(std::string(n.op->name));
    const Schedule s = schedule_static(l.tg, sms);
    try {
      simulate(g, l.tg, s, l.plan, SimulationOptions{seed, 2});
    } catch (const Error& e) {
      ADD_FAILURE() << "seed " << seed << " sms " << sms << ": " << e.what();
    }
    ++graphs;
  }
  EXPECT_EQ(graphs, 240);
  // The generator must produce real graphs over (nearly) the whole op set, not trivial ones.
  EXPECT_GT(nodes, 240u * 5) << "average graph too small";
  EXPECT_GT(tasks, nodes);
  EXPECT_GE(ops_seen.size(), 17u);
  std::printf("random graphs: %zu ops, %zu tasks, %zu distinct op kinds\n", nodes, tasks, ops_seen.size());
}

TEST(Simulator, CatchesAMissingWait) {
  const Graph g = decoder_layer(1);
  Lowered l = lower_all(g, 7, 2);
  // Drop every wait of the first task that has some, and run it first: it reads before its producer wrote.
  int32_t victim = -1;
  for (size_t i = 0; i < l.tg.tasks.size() && victim < 0; ++i)
    if (!l.tg.tasks[i].waits.empty()) {
      l.tg.tasks[i].waits.clear();
      victim = int32_t(i);
    }
  ASSERT_GE(victim, 0);
  Schedule s;
  s.queues.resize(1);
  s.queues[0].push_back(victim);
  for (int32_t i = 0; i < int32_t(l.tg.tasks.size()); ++i)
    if (i != victim) s.queues[0].push_back(i);
  try {
    simulate(g, l.tg, s, l.plan, {});
    FAIL() << "a read before write was not caught";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::internal);
    EXPECT_NE(std::string(e.what()).find("before"), std::string::npos) << e.what();
  }
}

TEST(Simulator, CatchesDeadlockAndImpossibleWaits) {
  const Graph g = decoder_layer(1);
  Lowered l = lower_all(g, 7, 2);
  // A queue whose order puts a consumer before its producer deadlocks.
  Schedule s;
  s.queues.resize(1);
  for (int32_t i = int32_t(l.tg.tasks.size()); i-- > 0;) s.queues[0].push_back(i);
  try {
    simulate(g, l.tg, s, l.plan, {});
    FAIL() << "a deadlock was not caught";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("waiting on event"), std::string::npos) << e.what();
  }
  // A wait for more than the notifiers can give.
  for (Task& t : l.tg.tasks)
    if (!t.waits.empty()) {
      t.waits[0].count += 1;
      break;
    }
  try {
    check_waits_satisfiable(g, l.tg);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("waits for"), std::string::npos) << e.what();
  }
}

TEST(Simulator, CatchesDoubleWrites) {
  const Graph g = decoder_layer(1);
  Lowered l = lower_all(g, 7, 2);
  // Two tasks of one node with the same tile.
  for (size_t i = 0; i + 1 < l.tg.tasks.size(); ++i)
    if (l.tg.tasks[i].node == l.tg.tasks[i + 1].node) {
      l.tg.tasks[i + 1].tile = l.tg.tasks[i].tile;
      break;
    }
  const Schedule s = schedule_static(l.tg, 7);
  EXPECT_THROW(simulate(g, l.tg, s, l.plan, {}), Error);
}

}  // namespace
}  // namespace weft::test
