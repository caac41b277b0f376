// argmax over long rows split over columns (TileGrid::k_parts; ARGMAX in device/task_abi.h, argmax_split.cuh): a
// decode step's logits row goes to P parts on P SMs, each waiting only for the producer tiles of its columns, the
// last to arrive merging P candidates from scratch. What the device relies on: the parts' column ranges partition
// the row in order, a part's waits cover every producer tile it reads (and, for the overlap, no other), the parts
// of a tile agree on their entries and counter, and the tables keep all of it in the scratch words.
#include <gtest/gtest.h>

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

// A decode step's tail: logits = linear(h, w) over a vocabulary, then the next token per row.
Graph logits_argmax(int64_t batch, int64_t vocab, int64_t hidden = 256) {
  Graph g;
  const TensorId h = g.add_tensor(TensorKind::input, "h", DType::bf16, fixed_shape({batch, hidden}));
  const TensorId w = g.add_tensor(TensorKind::weight, "w", DType::bf16, fixed_shape({vocab, hidden}));
  const TensorId logits = g.add_op("linear", {h, w}, {}, "logits");
  g.mark_output(g.add_op("argmax", {logits}, {{"dtype", "i32"}}, "next"), "");
  return g;
}

struct Lowered {
  Graph g;
  TaskGraph tg;
  MemoryPlan plan;
  Schedule schedule;
};

Lowered lowered(int64_t batch, int64_t vocab) {
  Lowered l{logits_argmax(batch, vocab), {}, {}, {}};
  l.tg = lower(l.g, {}, LowerOptions{132, WEFT_SMEM_BYTES_BASE});
  l.plan = plan_memory(l.g, l.tg);
  finalize_events(l.tg);
  l.schedule = schedule_static(l.tg, 132);
  return l;
}

// Llama-3.2-1B's and Qwen3's vocabularies at batch 1: parts of at most 2048 columns, a power of two; batches share
// the SMs (at most one task per SM); many rows take one task per row as before.
TEST(ArgmaxSplit, PartsFollowTheRowsAndTheSMs) {
  const struct {
    int64_t batch, vocab, parts;
  } cases[] = {{1, 128256, 64}, {1, 151936, 128}, {8, 128256, 16}, {32, 151936, 4}, {1, 40000, 32}, {1, 2048, 1},
               {1, 2049, 2}, {80, 128256, 1}};
  for (const auto& c : cases) {
    const Lowered l = lowered(c.batch, c.vocab);
    const TileGrid& grid = l.tg.grids[1];
    const std::string what = "batch " + std::to_string(c.batch) + " vocab " + std::to_string(c.vocab);
    EXPECT_EQ(grid.k_parts, c.parts) << what;
    EXPECT_LE(grid.tasks(), std::max<int64_t>(132, c.batch)) << what;
    if (c.parts > 1) {
      EXPECT_EQ(grid.col_tile, 1) << what << ": a split tile is one row";
      EXPECT_EQ(l.tg.scratch_words % 4, 0) << what;
      EXPECT_GE(l.tg.scratch_words, c.batch * (2 * c.parts + 1)) << what << ": entries and a counter per row";
    } else {
      EXPECT_EQ(l.tg.scratch_words, 0) << what;
    }
  }
}

TEST(ArgmaxSplit, PartsPartitionTheRowAndWaitOnlyForTheirColumns) {
  const Lowered l = lowered(2, 128256);
  const TaskGraph& tg = l.tg;
  const TileGrid& logits = tg.grids[0];
  const TileGrid& grid = tg.grids[1];
  ASSERT_EQ(grid.k_parts, 64);
  ASSERT_EQ(logits.row_blocks(), 1);
  std::set<int64_t> counters, entries;
  for (int64_t row = 0; row < 2; ++row) {
    int64_t next_col = 0, entries_word = -1, counter_word = -1;
    for (const Task& t : tg.tasks) {
      if (t.node != 1 || t.tile.col0 != row) continue;
      const weft_task_args& a = t.args;
      EXPECT_EQ(a.row0, row);
      EXPECT_EQ(a.row1, row + 1);
      EXPECT_EQ(a.d[2], 64);
      EXPECT_EQ(a.d[3], t.part);
      EXPECT_EQ(a.d[6], next_col) << "part " << t.part << " starts where the one before ended";
      EXPECT_GE(a.d[7], a.d[6]);
      EXPECT_LE(a.d[7] - a.d[6], 2048);
      EXPECT_EQ(a.d[6] % 8, 0) << "whole 16-byte units";
      next_col = a.d[7];
      if (t.part == 0) {
        entries_word = a.d[4];
        counter_word = a.d[5];
      }
      EXPECT_EQ(a.d[4], entries_word) << "the parts of a tile share its entries";
      EXPECT_EQ(a.d[5], counter_word) << "and its counter";
      // Waits: exactly the logits tiles over the part's columns, each counted once per launch.
      std::set<int64_t> waited;
      for (const TaskWait& w : t.waits) {
        const EventDesc& e = tg.events[static_cast<size_t>(w.event)];
        ASSERT_EQ(e.node, 0);
        ASSERT_EQ(e.kind, EventKind::tile) << "not the whole row block";
        EXPECT_EQ(w.count, 1u);
        waited.insert(e.col_tile);
      }
      std::set<int64_t> read;
      for (int64_t ct = 0; ct < logits.col_tiles(); ++ct) {
        const Region r = logits.tile(0, ct);
        if (r.col0 < a.d[7] && a.d[6] < r.col1) read.insert(ct);
      }
      EXPECT_EQ(waited, read) << "part " << t.part;
      EXPECT_LE(static_cast<int64_t>(waited.size()), (a.d[7] - a.d[6] + logits.col_tile - 1) / logits.col_tile + 1);
    }
    EXPECT_EQ(next_col, 128256) << "row " << row;
    EXPECT_TRUE(counters.insert(counter_word).second) << "two rows share a counter";
    EXPECT_TRUE(entries.insert(entries_word).second) << "two rows share their entries";
    EXPECT_LE(entries_word + 2 * 64, tg.scratch_words);
    EXPECT_LT(counter_word, tg.scratch_words);
    EXPECT_FALSE(entries_word <= counter_word && counter_word < entries_word + 2 * 64) << "a counter inside entries";
  }
  for (uint64_t seed = 0; seed < 4; ++seed) EXPECT_NO_THROW(simulate(l.g, tg, l.schedule, l.plan, SimulationOptions{seed, 3}));
}

// The verifier holds the parts to their reads: a part whose waits miss a tile of its columns reads it before it is
// written in some interleaving (the simulator's are random: 64 seeds); two tasks claiming one part are refused.
TEST(ArgmaxSplit, VerifierCatchesAMissingWaitOrPart) {
  const Lowered l = lowered(1, 128256);
  const int32_t first = l.tg.first_task[1];
  {
    TaskGraph broken = l.tg;
    broken.tasks[static_cast<size_t>(first + 5)].waits.pop_back();
    int caught = 0;
    for (uint64_t seed = 0; seed < 64; ++seed) {
      try {
        simulate(l.g, broken, l.schedule, l.plan, SimulationOptions{seed, 1});
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("before"), std::string::npos) << e.what();
        ++caught;
      }
    }
    EXPECT_GT(caught, 0);
  }
  {
    TaskGraph broken = l.tg;
    broken.tasks[static_cast<size_t>(first + 5)].part = 4;
    EXPECT_THROW(simulate(l.g, broken, l.schedule, l.plan, SimulationOptions{0, 1}), Error);
  }
}

// Tables keep the split tasks' scratch; the runtime relocates their entries and counter; a loader refuses a split
// argmax whose entries or counter leave the scratch words, or that claims more parts than the device merges.
TEST(ArgmaxSplit, TablesRelocateAndBoundTheScratch) {
  const Lowered l = lowered(1, 151936);
  TaskTables tables = build_task_tables(l.tg, l.schedule, static_cast<int32_t>(l.g.tensors().size()));
  EXPECT_EQ(parse_task_tables(serialize_task_tables(tables)).scratch_words, l.tg.scratch_words);
  const uint64_t base = 0x7f0000002000ull;
  const std::vector<weft_task> relocated = relocate_scratch(tables, base);
  int split = 0;
  for (size_t i = 0; i < relocated.size(); ++i) {
    const weft_task& raw = tables.tasks[i];
    const bool is_split = raw.op == WEFT_DEV_OP_ARGMAX && raw.args.d[2] > 1;
    split += is_split;
    for (int f = 0; f < WEFT_TASK_MAX_DIMS; ++f) {
      const bool moved = is_split && (f == 4 || f == 5);
      EXPECT_EQ(relocated[i].args.d[f], moved ? static_cast<long long>(base + 4 * static_cast<uint64_t>(raw.args.d[f])) : raw.args.d[f]);
    }
  }
  EXPECT_EQ(split, 128);
  auto first_split = [](TaskTables& t) -> weft_task& {
    for (weft_task& d : t.tasks)
      if (d.op == WEFT_DEV_OP_ARGMAX && d.args.d[2] > 1) return d;
    throw std::logic_error("no split argmax");
  };
  for (const int field : {4, 5}) {
    TaskTables bad = tables;
    first_split(bad).args.d[field] = bad.scratch_words - (field == 4 ? 1 : 0);
    EXPECT_THROW(parse_task_tables(serialize_task_tables(bad)), Error) << "d" << field;
  }
  {
    TaskTables bad = tables;
    first_split(bad).args.d[2] = 2 * WEFT_ARGMAX_MAX_SPLIT;
    EXPECT_THROW(parse_task_tables(serialize_task_tables(bad)), Error) << "too many parts";
  }
  {
    TaskTables bad = tables;
    first_split(bad).args.row1 += 1;
    EXPECT_THROW(parse_task_tables(serialize_task_tables(bad)), Error) << "a split tile of two rows";
  }
}

}  // namespace
}  // namespace weft::test
