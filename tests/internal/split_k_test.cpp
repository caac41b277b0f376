// Linears split over K (TileGrid::k_parts; LINEAR in device/task_abi.h): where a tensor-core tile cannot hold its x
// rows whole, lowering gives each output tile P tasks over K ranges, whose events count P per launch and whose
// partial sums and arrival counters lie in scratch. These rules are what the device relies on for correctness:
// the last part sums every block, so a tile's parts must agree on their block and counter, no two tiles (or two
// nodes that may run at once) may share them, and a consumer must wait for all P parts.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.hpp"
#include "device/config.cuh"
#include "lower/task_graph.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulator.hpp"
#include "schedule/task_tables.hpp"
#include "shape_util.hpp"

namespace weft::test {
namespace {

// Llama-1B's down projection at batch 32 (32 rows of K 8192, with a residual), twice: y1 from x, and y2 from u,
// which reads every row of y1 — or, `concurrent`, both from x (neither waits for the other).
Graph two_splits(bool concurrent) {
  Graph g;
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::bf16, fixed_shape({32, 8192}));
  const TensorId r = g.add_tensor(TensorKind::input, "r", DType::bf16, fixed_shape({32, 2048}));
  const TensorId w1 = g.add_tensor(TensorKind::weight, "w1", DType::bf16, fixed_shape({2048, 8192}));
  const TensorId wu = g.add_tensor(TensorKind::weight, "wu", DType::bf16, fixed_shape({8192, 2048}));
  const TensorId w2 = g.add_tensor(TensorKind::weight, "w2", DType::bf16, fixed_shape({2048, 8192}));
  const TensorId y1 = g.add_op("linear", {x, w1, kNoTensor, r}, {}, "y1");
  const TensorId u = g.add_op("linear", {y1, wu}, {}, "u");
  const TensorId y2 = g.add_op("linear", {concurrent ? x : u, w2}, {}, "y2");
  g.mark_output(y2, "");
  if (concurrent) g.mark_output(u, "");
  return g;
}

struct Split {
  std::map<int64_t, std::pair<int64_t, int64_t>> tile;  // col0 -> (partial block word, counter word)
  std::map<int64_t, std::set<int64_t>> parts;           // col0 -> parts seen
};

// Every task of a split node names its part, and the parts of a tile agree on their block and counter.
Split split_of(const TaskGraph& tg, int32_t node) {
  Split s;
  const TileGrid& grid = tg.grids[static_cast<size_t>(node)];
  for (const Task& t : tg.tasks) {
    if (t.node != node) continue;
    EXPECT_EQ(t.args.d[2], grid.k_parts);
    EXPECT_EQ(t.args.d[3], t.part);
    const std::pair<int64_t, int64_t> where{t.args.d[4], t.args.d[5]};
    const auto [it, fresh] = s.tile.emplace(t.tile.col0, where);
    if (!fresh) {
      EXPECT_EQ(it->second, where) << "tile " << t.tile.col0;
    }
    EXPECT_TRUE(s.parts[t.tile.col0].insert(t.part).second) << "part " << t.part << " twice";
    const int64_t words = grid.k_parts * (t.tile.row1 - t.tile.row0) * (t.tile.col1 - t.tile.col0);
    EXPECT_LE(t.args.d[4] + words, tg.scratch_words);
    EXPECT_LT(t.args.d[5], tg.scratch_words);
  }
  for (const auto& [col0, seen] : s.parts) EXPECT_EQ(static_cast<int64_t>(seen.size()), grid.k_parts) << col0;
  return s;
}

// The fewest parts (a power of two) whose x columns fit beside the ring; 1 when the rows fit whole; 0 where no
// split applies (then a chunked tile or row blocks).
TEST(SplitK, PartsAreTheFewestThatFit) {
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 8192, 32, 2), 4);
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_BASE, 8192, 32, 2), 8);
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 8192, 16, 2), 2);
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 8192, 8, 2), 1) << "the rows fit whole";
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 12288, 32, 2), 8) << "Qwen3-8B's down projection";
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 8192, 1, 2), 0) << "one row: CUDA cores";
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 8192, 33, 2), 0) << "more rows than two m16 blocks";
  EXPECT_EQ(weft_mma_split_parts(WEFT_SMEM_BYTES_WIDE, 65 * 128, 32, 2), 0) << "no power of two leaves whole stages";
  for (const int64_t smem : {WEFT_SMEM_BYTES_BASE, WEFT_SMEM_BYTES_WIDE})
    for (int64_t k = 128; k <= 32768; k += 128)
      for (const int64_t rows : {2, 9, 17, 32}) {
        const int64_t p = weft_mma_split_parts(smem, k, rows, 2);
        const std::string what = "smem " + std::to_string(smem) + " K " + std::to_string(k) + " rows " + std::to_string(rows);
        if (p == 1) {
          EXPECT_LE(rows, WEFT_MMA_ROWS_FIT_IN(smem, k, 2)) << what;
        }
        if (p <= 1) continue;
        EXPECT_GT(rows, WEFT_MMA_ROWS_FIT_IN(smem, k, 2)) << what;
        EXPECT_EQ(p & (p - 1), 0) << what;
        EXPECT_LE(p, WEFT_MMA_MAX_SPLIT) << what;
        EXPECT_EQ(k % p, 0) << what;
        EXPECT_EQ(k / p % WEFT_MMA_K_MULTIPLE, 0) << what;
        EXPECT_TRUE(weft_mma_split_fits(smem, k / p, rows, 2)) << what;
        if (p > 2 && k / (p / 2) % WEFT_MMA_K_MULTIPLE == 0) {
          EXPECT_FALSE(weft_mma_split_fits(smem, k / (p / 2), rows, 2)) << what << ": fewer parts fit";
        }
      }
}

// Where no power of two splits K into whole stages the tile stages x in chunks instead (the GPU tests' K 8320).
TEST(SplitK, OtherwiseChunked) {
  Graph g;
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::bf16, fixed_shape({32, 8320}));
  const TensorId w = g.add_tensor(TensorKind::weight, "w", DType::bf16, fixed_shape({2700, 8320}));
  g.mark_output(g.add_op("linear", {x, w}, {}, "y"), "");
  const TaskGraph tg = lower(g, {}, LowerOptions{132, WEFT_SMEM_BYTES_WIDE});
  EXPECT_EQ(tg.grids[0].k_parts, 1);
  EXPECT_EQ(tg.grids[0].row_blocks(), 1);
  EXPECT_EQ(mma_x_chunks(tg, WEFT_SMEM_BYTES_WIDE), 5 * static_cast<int64_t>(tg.tasks.size())) << "5 chunks of 1664";
  EXPECT_EQ(tg.scratch_words, 0);
}

TEST(SplitK, PartsShareTheirTilesEventsAndScratch) {
  const Graph g = two_splits(false);
  TaskGraph tg = lower(g, {}, LowerOptions{132, WEFT_SMEM_BYTES_WIDE});
  const MemoryPlan plan = plan_memory(g, tg);
  finalize_events(tg);
  for (const int32_t n : {0, 2}) {
    const TileGrid& grid = tg.grids[static_cast<size_t>(n)];
    EXPECT_EQ(grid.k_parts, 4) << n;
    EXPECT_EQ(grid.row_blocks(), 1) << n;
    EXPECT_EQ(grid.col_tile % 8, 0) << "whole groups of 8 weight rows";
    EXPECT_LE(grid.tasks(), 132) << "one wave of tasks";
    EXPECT_GT(grid.tasks(), 100);
  }
  EXPECT_EQ(tg.grids[1].k_parts, 1) << "K 2048 fits whole at the wide size";
  const Split a = split_of(tg, 0), b = split_of(tg, 2);
  // Counters are never shared (they only grow); blocks of one node never overlap.
  std::set<int64_t> counters;
  for (const Split* s : {&a, &b})
    for (const auto& [col0, where] : s->tile) EXPECT_TRUE(counters.insert(where.second).second) << "counter shared";
  std::set<int64_t> blocks_a, blocks_b;
  for (const auto& [col0, where] : a.tile) blocks_a.insert(where.first);
  for (const auto& [col0, where] : b.tile) blocks_b.insert(where.first);
  EXPECT_EQ(blocks_a.size(), a.tile.size()) << "two tiles share a block";
  for (int64_t c : counters) EXPECT_EQ(blocks_a.count(c), 0u) << "a counter inside a block";
  // y2 waits (through u) for every part of y1: it reuses y1's blocks.
  EXPECT_EQ(blocks_a, blocks_b);
  // A consumer of a split tile waits for all its parts.
  for (const Task& t : tg.tasks) {
    if (t.node != 1) continue;
    ASSERT_FALSE(t.waits.empty());
    for (const TaskWait& w : t.waits) {
      const EventDesc& e = tg.events[static_cast<size_t>(w.event)];
      if (e.node != 0) continue;
      EXPECT_EQ(e.kind, EventKind::row_block);
      EXPECT_EQ(w.count, static_cast<uint32_t>(tg.grids[0].col_tiles() * 4));
    }
  }
  const Schedule s = schedule_static(tg, 132);
  for (uint64_t seed = 0; seed < 4; ++seed) EXPECT_NO_THROW(simulate(g, tg, s, plan, SimulationOptions{seed, 3}));

  // The tables keep the scratch size, and a loader refuses a split task whose block or counter lies outside it.
  TaskTables tables = build_task_tables(tg, s, static_cast<int32_t>(g.tensors().size()));
  EXPECT_EQ(tables.scratch_words, tg.scratch_words);
  EXPECT_EQ(parse_task_tables(serialize_task_tables(tables)).scratch_words, tg.scratch_words);
  // The runtime hands the device addresses: scratch word w at base + 4 w, every other task as it was.
  const uint64_t base = 0x7f0000001000ull;
  const std::vector<weft_task> relocated = relocate_scratch(tables, base);
  ASSERT_EQ(relocated.size(), tables.tasks.size());
  int split_tasks = 0;
  for (size_t i = 0; i < relocated.size(); ++i) {
    const weft_task_args& raw = tables.tasks[i].args;
    for (int f = 0; f < WEFT_TASK_MAX_DIMS; ++f) {
      const bool moved = tables.tasks[i].op == WEFT_DEV_OP_LINEAR && raw.d[2] > 1 && (f == 4 || f == 5);
      EXPECT_EQ(relocated[i].args.d[f], moved ? static_cast<long long>(base + 4 * static_cast<uint64_t>(raw.d[f])) : raw.d[f]);
    }
    split_tasks += raw.d[2] > 1 && tables.tasks[i].op == WEFT_DEV_OP_LINEAR;
  }
  EXPECT_EQ(split_tasks, tg.grids[0].tasks() + tg.grids[2].tasks());
  for (const int field : {4, 5}) {
    TaskTables bad = tables;
    for (weft_task& t : bad.tasks)
      if (t.args.d[2] > 1) {
        t.args.d[field] = bad.scratch_words;
        break;
      }
    EXPECT_THROW(parse_task_tables(serialize_task_tables(bad)), Error) << "d" << field;
  }
}

// Two split nodes that may run at the same time keep their blocks apart.
TEST(SplitK, ConcurrentSplitsKeepTheirOwnBlocks) {
  const Graph g = two_splits(true);
  TaskGraph tg = lower(g, {}, LowerOptions{132, WEFT_SMEM_BYTES_WIDE});
  const MemoryPlan plan = plan_memory(g, tg);
  finalize_events(tg);
  ASSERT_EQ(tg.grids[0].k_parts, 4);
  ASSERT_EQ(tg.grids[2].k_parts, 4);
  const Split a = split_of(tg, 0), b = split_of(tg, 2);
  int64_t a_end = 0, b_begin = tg.scratch_words;
  for (const auto& [col0, where] : a.tile) a_end = std::max(a_end, where.first);
  for (const auto& [col0, where] : b.tile) b_begin = std::min(b_begin, where.first);
  const int64_t a_last_words = 4 * 32 * tg.grids[0].col_tile;
  EXPECT_LE(a_end + a_last_words, b_begin) << "y2's blocks overlap y1's";
  const Schedule s = schedule_static(tg, 132);
  EXPECT_NO_THROW(simulate(g, tg, s, plan, SimulationOptions{1, 2}));
}

// The verifier counts parts: a part that does not notify leaves its tile's consumers waiting for one that never
// comes, and two tasks claiming the same part of a tile write the same elements.
TEST(SplitK, VerifierCatchesBrokenParts) {
  const Graph g = two_splits(false);
  TaskGraph tg = lower(g, {}, LowerOptions{132, WEFT_SMEM_BYTES_WIDE});
  const MemoryPlan plan = plan_memory(g, tg);
  finalize_events(tg);
  const Schedule s = schedule_static(tg, 132);
  {
    TaskGraph broken = tg;
    broken.tasks[1].notifies.clear();
    EXPECT_THROW(simulate(g, broken, s, plan, SimulationOptions{0, 1}), Error);
  }
  {
    TaskGraph broken = tg;
    ASSERT_EQ(broken.tasks[1].part, 1);
    broken.tasks[1].part = 0;
    EXPECT_THROW(simulate(g, broken, s, plan, SimulationOptions{0, 1}), Error);
  }
}

}  // namespace
}  // namespace weft::test
