// Tagged hand-offs (lower/tagged_handoffs.hpp): which tensors of a batch-1 decoder are handed over as tagged words,
// that their readers' waits on them are the ones marked, that the memory plan gives each its own 4 bytes per element,
// that the simulator still checks the marked waits before the device tables drop them, and that the cache key and
// $WEFT_TAGGED_HANDOFFS keep the two kinds of kernel apart.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "device/task_abi.h"
#include "lower/tagged_handoffs.hpp"
#include "lower/task_graph.hpp"
#include "pipeline/compile_graph.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulator.hpp"
#include "schedule/task_tables.hpp"
#include "test_models.hpp"

namespace weft::test {
namespace {

// A decoder whose projections take the one-row tiles at batch 1: hidden 1024 (rows of 2 KiB), FFN 3072.
DecoderShape one_row_decoder(bool qwen, int64_t layers) {
  DecoderShape s = tiny_decoder(layers, 8, 128, qwen);
  s.hidden = 1024;
  s.head_dim = qwen ? 128 : 64;
  s.q_heads = 1024 / s.head_dim;
  s.kv_heads = s.q_heads / 2;
  s.ffn = 3072;
  return s;
}

int32_t producer_op(const Graph& g, const TaskGraph& tg, size_t tensor) {
  return tg.tasks[static_cast<size_t>(tg.first_task[static_cast<size_t>(g.tensors()[tensor].producer)])].dev_op;
}

TEST(TaggedHandoffs, BatchOneDecoderTagsTheProjectionsHandOffs) {
  for (bool qwen : {true, false}) {
    const int64_t layers = 3;
    const Graph g = build_decoder_graph(one_row_decoder(qwen, layers));
    TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 1), LowerOptions{});
    ASSERT_FALSE(may_use_tensor_core_tiles(tg));
    const TaggedHandoffs th = plan_tagged_handoffs(g, tg, true);
    // Per layer: o's output (gate/up's x, down's residual), gate/up's (down's x), down's (the next q/k/v's x and o's
    // residual, or the logits' x). q/k/v's output feeds attention, attention's the o projection: counters.
    EXPECT_EQ(th.count, 3 * layers) << (qwen ? "qwen3" : "llama");
    for (size_t t = 0; t < g.tensors().size(); ++t) {
      if (!th.tensor[t]) continue;
      const int32_t op = producer_op(g, tg, t);
      EXPECT_TRUE(op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_RMSNORM_LINEAR || op == WEFT_DEV_OP_SILU_MUL_LINEAR)
          << g.tensors()[t].name;
      EXPECT_FALSE(g.tensors()[t].is_output) << g.tensors()[t].name;
    }
    // Every task's bits match the tensors it writes and reads; every marked wait is on a tagged tensor's producer.
    int64_t marked = 0;
    for (const Task& task : tg.tasks) {
      const unsigned int bits = static_cast<unsigned int>(task.args.i[WEFT_TAGGED_ARG]);
      EXPECT_EQ((bits & WEFT_TAGGED_OUT) != 0, th.tensor[static_cast<size_t>(task.args.out)]);
      if (bits & WEFT_TAGGED_X) {
        EXPECT_TRUE(th.tensor[static_cast<size_t>(task.args.in[0])]);
      }
      std::set<int32_t> tagged_producers;
      for (int k = 0; k < WEFT_TASK_MAX_INPUTS; ++k)
        if (task.args.in[k] >= 0 && th.tensor[static_cast<size_t>(task.args.in[k])])
          tagged_producers.insert(g.tensors()[static_cast<size_t>(task.args.in[k])].producer);
      for (const TaskWait& w : task.waits) {
        const EventDesc& e = tg.events[static_cast<size_t>(w.event)];
        const bool expect = tagged_producers.count(e.node) != 0 && e.kind != EventKind::node;
        EXPECT_EQ(w.tagged, expect) << tg.task_name(g, static_cast<int32_t>(&task - tg.tasks.data()));
        marked += w.tagged;
      }
    }
    EXPECT_GT(marked, 0);

    // Each tagged tensor: 4 bytes per element, overlapping no other arena tensor.
    const MemoryPlan plan = plan_memory(g, tg, th.tensor);
    for (size_t a = 0; a < g.tensors().size(); ++a) {
      if (!th.tensor[a]) continue;
      ASSERT_GE(plan.offset[a], 0);
      const int64_t a_end = plan.offset[a] + plan.bytes[a] * 2;
      EXPECT_LE(a_end, plan.arena_bytes);
      EXPECT_TRUE(plan.shares_with[a].empty()) << g.tensors()[a].name;
      for (size_t b = 0; b < g.tensors().size(); ++b) {
        if (b == a || plan.offset[b] < 0) continue;
        const int64_t b_end = plan.offset[b] + plan.bytes[b] * (th.tensor[b] ? 2 : 1);
        EXPECT_TRUE(a_end <= plan.offset[b] || b_end <= plan.offset[a])
            << g.tensors()[a].name << " overlaps " << g.tensors()[b].name;
      }
    }

    finalize_events(tg);
    const Schedule s = schedule_static(tg, 132);
    for (uint64_t seed = 0; seed < 3; ++seed) EXPECT_NO_THROW(simulate(g, tg, s, plan, SimulationOptions{seed, 2}));
    // The simulator honours the marked waits: without them a reader may run before its producer.
    TaskGraph unordered = tg;
    for (Task& task : unordered.tasks) std::erase_if(task.waits, [](const TaskWait& w) { return w.tagged; });
    bool caught = false;
    for (uint64_t seed = 0; seed < 8 && !caught; ++seed) {
      try {
        simulate(g, unordered, s, plan, SimulationOptions{seed, 1});
      } catch (const Error&) {
        caught = true;
      }
    }
    EXPECT_TRUE(caught) << "dropping the tagged waits before simulation went unnoticed";

    const size_t waits_before = build_task_tables(tg, s, static_cast<int32_t>(g.tensors().size())).waits.size();
    drop_tagged_waits(tg);
    const TaskTables tables = build_task_tables(tg, s, static_cast<int32_t>(g.tensors().size()));
    EXPECT_EQ(tables.waits.size() + static_cast<size_t>(marked), waits_before);
    // No notify of an event nobody waits on is left.
    std::set<int32_t> waited;
    for (const weft_wait& w : tables.waits) waited.insert(w.event);
    for (int32_t e : tables.notifies) EXPECT_TRUE(waited.count(e)) << "event " << e;
  }
}

TEST(TaggedHandoffs, NoneWhereTheOneRowPathDoesNotRunOrWhenOff) {
  const Graph g = build_decoder_graph(one_row_decoder(true, 2));
  {
    TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 4), LowerOptions{});  // 4 rows: tensor-core tiles
    EXPECT_EQ(plan_tagged_handoffs(g, tg, true).count, 0);
    for (const Task& t : tg.tasks) EXPECT_EQ(t.args.i[WEFT_TAGGED_ARG], 0);
  }
  {
    TaskGraph tg = lower(g, SymbolValues(g.symbols().size(), 1), LowerOptions{});
    EXPECT_EQ(plan_tagged_handoffs(g, tg, false).count, 0);
    for (const Task& t : tg.tasks) {
      EXPECT_EQ(t.args.i[WEFT_TAGGED_ARG], 0);
      for (const TaskWait& w : t.waits) EXPECT_FALSE(w.tagged);
    }
  }
  // Hidden 256 (tiny_decoder): rows of 512 bytes take no 4-unit stages, so no projection is a one-row tile.
  {
    const Graph tiny = build_decoder_graph(tiny_decoder(2, 8, 128));
    TaskGraph tg = lower(tiny, SymbolValues(tiny.symbols().size(), 1), LowerOptions{});
    EXPECT_EQ(plan_tagged_handoffs(tiny, tg, true).count, 0);
  }
}

TEST(TaggedHandoffs, TheTaskRuleFollowsTheDevicePath) {
  Task t;
  t.dev_op = WEFT_DEV_OP_LINEAR;
  t.args.dtype = WEFT_DEV_BF16;
  t.args.row0 = 0;
  t.args.row1 = 1;
  t.args.col0 = 0;
  t.args.col1 = 64;
  t.args.d[0] = 1024;
  EXPECT_TRUE(one_row_gemv_task(t));
  Task u = t;
  u.args.d[0] = 512;  // 1 KiB rows: 2-unit stages, the general body
  EXPECT_FALSE(one_row_gemv_task(u));
  u = t;
  u.args.row1 = 2;
  EXPECT_FALSE(one_row_gemv_task(u));
  u = t;
  u.clip = 0;  // masked at run time by symbol 0, whose range is not known here
  u.clip_unit = 1;
  EXPECT_FALSE(one_row_gemv_task(u));
  {
    Graph g("masked");
    g.declare_symbol("batch", 1, 8);
    EXPECT_TRUE(one_row_gemv_task(u, &g));  // rows [0, 1) of a symbol of at least 1: never cut
    u.clip = 1 << 8;                        // by columns: a smaller value cuts it
    EXPECT_FALSE(one_row_gemv_task(u, &g));
    u.clip = 0;
    u.clip_unit = 0;  // cut to no rows
    EXPECT_FALSE(one_row_gemv_task(u, &g));
  }
  u = t;
  u.args.d[2] = 2;  // split over K
  EXPECT_FALSE(one_row_gemv_task(u));
  u = t;
  u.args.dtype = WEFT_DEV_F16;
  EXPECT_FALSE(one_row_gemv_task(u));
  u = t;
  u.args.d[0] = 49152;  // x beyond the plan records
  EXPECT_FALSE(one_row_gemv_task(u));
  u = t;
  u.dev_op = WEFT_DEV_OP_RMSNORM_LINEAR;
  u.args.d[0] = 8192;  // beyond the one-row norm's two vectors per thread
  EXPECT_FALSE(one_row_gemv_task(u));
  u.args.d[0] = 4096;
  EXPECT_TRUE(one_row_gemv_task(u));
}

// The switch (off by default) enters the cache key, a tagged kernel links the library with tagged hand-offs, and the
// compiled kernel's metadata says how many tensors it tagged; sm_80 has no such library and tags nothing.
TEST(TaggedHandoffs, TheSwitchIsPartOfTheKernel) {
  const Graph g = build_decoder_graph(one_row_decoder(true, 1));
  CompileRequest req;
  req.arch = "sm_90a";
  req.symbols = SymbolValues(g.symbols().size(), 1);
  unsetenv("WEFT_TAGGED_HANDOFFS");
  const CompileResult unset = compile_graph(g, req, nullptr);
  setenv("WEFT_TAGGED_HANDOFFS", "1", 1);
  const CompileResult on = compile_graph(g, req, nullptr);
  setenv("WEFT_TAGGED_HANDOFFS", "0", 1);
  const CompileResult off = compile_graph(g, req, nullptr);
  setenv("WEFT_TAGGED_HANDOFFS", "yes", 1);
  EXPECT_THROW(compile_graph(g, req, nullptr), Error);
  unsetenv("WEFT_TAGGED_HANDOFFS");
  EXPECT_EQ(unset.key_hex, off.key_hex);
  EXPECT_NE(on.key_hex, off.key_hex);
  EXPECT_EQ(on.tagged_tensors, 3);
  EXPECT_EQ(nlohmann::json::parse(on.metadata).at("tagged_tensors").get<int64_t>(), 3);
  EXPECT_EQ(off.tagged_tensors, 0);
  EXPECT_EQ(on.device_library, "sm_90a_simt_tagged");
  EXPECT_EQ(off.device_library, "sm_90a_simt");
  EXPECT_LT(on.tables.waits.size(), off.tables.waits.size());
  EXPECT_GT(on.arena_bytes, off.arena_bytes);
}

}  // namespace
}  // namespace weft::test
