// Specialization policies (exact / buckets / runtime), which symbols a kernel can mask, the masking each task
// carries, and the compile value the launch plan picks for a run.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "graph/serialize.hpp"
#include "graph/symbol_masking.hpp"
#include "lower/task_graph.hpp"
#include "runtime/launch_plan.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/task_tables.hpp"
#include "test_models.hpp"

namespace weft::test {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SymbolPolicy, BucketsArePowersOfTwoOrTheGivenList) {
  Symbol s{"batch", 1, 64, SymbolPolicy::automatic, {}};
  EXPECT_EQ(specialization_buckets(s, SymbolPolicy::buckets), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(specialization_buckets(s, SymbolPolicy::runtime), (std::vector<int64_t>{64}));
  EXPECT_TRUE(specialization_buckets(s, SymbolPolicy::exact).empty());
  Symbol odd{"n", 3, 100, SymbolPolicy::automatic, {}};
  EXPECT_EQ(specialization_buckets(odd, SymbolPolicy::buckets), (std::vector<int64_t>{4, 8, 16, 32, 64, 100}));
  Symbol huge{"n", 1, int64_t{1} << 62, SymbolPolicy::automatic, {}};
  EXPECT_EQ(specialization_buckets(huge, SymbolPolicy::buckets).size(), 63u);  // no overflow at the top

  Graph g;
  const int32_t b = g.declare_symbol("batch", 1, 64);
  g.set_symbol_policy(b, SymbolPolicy::buckets, {8, 16});
  EXPECT_EQ(g.symbols().at(b).buckets, (std::vector<int64_t>{8, 16, 64}));  // the maximum is added
  EXPECT_NE(message_of([&] { g.set_symbol_policy(b, SymbolPolicy::buckets, {16, 8}); }).find("ascending"), std::string::npos);
  EXPECT_NE(message_of([&] { g.set_symbol_policy(b, SymbolPolicy::buckets, {0}); }).find("[1, 64]"), std::string::npos);
  EXPECT_NE(message_of([&] { g.set_symbol_policy(b, SymbolPolicy::runtime, {4}); }).find("only for the BUCKETS"), std::string::npos);
  EXPECT_NE(message_of([&] { g.set_symbol_policy(b, static_cast<SymbolPolicy>(9), {}); }).find("policy 9"), std::string::npos);
}

TEST(SymbolPolicy, JsonKeepsThePolicyAndTheHashIgnoresIt) {
  Graph g = build_decoder_graph(tiny_decoder(1, 8, 64));
  const auto before = graph_hash(g);
  g.set_symbol_policy(0, SymbolPolicy::buckets, {2, 4});
  EXPECT_EQ(graph_hash(g), before);
  const Graph back = graph_from_json(graph_to_json_string(g));
  EXPECT_EQ(back.symbols().at(0).policy, SymbolPolicy::buckets);
  EXPECT_EQ(back.symbols().at(0).buckets, (std::vector<int64_t>{2, 4, 8}));
  EXPECT_EQ(graph_to_json_string(back), graph_to_json_string(g));
  EXPECT_NE(message_of([] {
              graph_from_json(R"({"format":"weft-graph","version":1,"symbols":[{"name":"b","min":1,"max":4,"policy":"fast"}],
                                  "tensors":[],"ops":[],"outputs":[]})");
            }).find("policy is 'fast'"),
            std::string::npos);
}

TEST(SymbolMasking, TheDecoderBatchIsMaskable) {
  const Graph g = build_decoder_graph(tiny_decoder(2, 8, 64));
  ASSERT_EQ(g.symbols().size(), 1u);
  EXPECT_EQ(masking_obstacle(g, 0), "");
  EXPECT_EQ(effective_symbol_policy(g, 0), SymbolPolicy::buckets);
}

TEST(SymbolMasking, ObstaclesAreNamed) {
  {  // a symbol in dim 1
    Graph g;
    const int32_t s = g.declare_symbol("seq", 1, 16);
    const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::fixed(2), Dim::sym(s)});
    g.mark_output(g.add_op("silu", {x}, {}, "y"), "");
    EXPECT_NE(masking_obstacle(g, s).find("dim 1 of tensor 'x'"), std::string::npos) << masking_obstacle(g, s);
    EXPECT_EQ(effective_symbol_policy(g, s), SymbolPolicy::exact);  // automatic falls back
    g.set_symbol_policy(s, SymbolPolicy::runtime, {});
    EXPECT_NE(message_of([&] { effective_symbol_policy(g, s); }).find("make it exact"), std::string::npos);
  }
  {  // a reduction across it
    Graph g;
    const int32_t s = g.declare_symbol("batch", 1, 16);
    const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(s), Dim::fixed(4)});
    g.mark_output(g.add_op("reduce", {x}, {{"axis", 0}, {"kind", "sum"}}, "total"), "");
    EXPECT_NE(masking_obstacle(g, s).find("op 'reduce'"), std::string::npos) << masking_obstacle(g, s);
  }
  {  // whole-row op on a rank-1 tensor: the symbol is the row
    Graph g;
    const int32_t s = g.declare_symbol("n", 1, 16);
    const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(s)});
    g.mark_output(g.add_op("softmax", {x}, {}, "p"), "");
    EXPECT_NE(masking_obstacle(g, s).find("works on whole rows"), std::string::npos) << masking_obstacle(g, s);
  }
  {  // elementwise on rank 1 is fine
    Graph g;
    const int32_t s = g.declare_symbol("n", 1, 16);
    const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(s)});
    g.mark_output(g.add_op("silu", {x}, {}, "y"), "");
    EXPECT_EQ(masking_obstacle(g, s), "");
  }
}

TEST(SymbolMasking, TasksCarryTheirClip) {
  const Graph g = build_decoder_graph(tiny_decoder(1, 8, 64));
  TaskGraph tg = lower(g, SymbolValues{8}, LowerOptions{132});
  int masked = 0;
  for (const Task& t : tg.tasks) {
    const Node& n = g.nodes()[static_cast<size_t>(t.node)];
    const Shape& out = g.tensor(n.output).type.shape;
    if (out.empty() || out[0].is_fixed()) {
      EXPECT_EQ(t.clip, -1);
      continue;
    }
    ++masked;
    EXPECT_EQ(t.clip & 0xff, 0);
    // Every output of the decoder with batch leads with it; its view's rows are batch x the middle dims.
    int64_t unit = 1;
    const std::vector<int64_t>& rows_of = n.op->name == "argmax" ? tg.shapes[static_cast<size_t>(n.inputs[0])] : tg.shapes[static_cast<size_t>(n.output)];
    for (size_t i = 1; i + 1 < rows_of.size(); ++i) unit *= rows_of[i];
    if (rows_of.size() == 1) { EXPECT_EQ(t.clip >> 8, 1) << n.op->name; }
    else EXPECT_EQ(t.clip >> 8, 0) << n.op->name;
    EXPECT_EQ(t.clip_unit, unit) << n.op->name;
  }
  EXPECT_GT(masked, 10);
  // The tables keep the clip, and a loader refuses a clip naming a symbol the kernel does not receive.
  const MemoryPlan plan = plan_memory(g, tg);
  finalize_events(tg);
  TaskTables tables = build_task_tables(tg, schedule_static(tg, 132), static_cast<int32_t>(g.tensors().size()));
  const TaskTables back = parse_task_tables(serialize_task_tables(tables));
  ASSERT_EQ(back.tasks.size(), tables.tasks.size());
  for (size_t i = 0; i < back.tasks.size(); ++i) EXPECT_EQ(back.tasks[i].clip, tables.tasks[i].clip);
  for (weft_task& t : tables.tasks)
    if (t.clip >= 0) {
      t.clip = WEFT_MAX_SYMBOLS;
      break;
    }
  EXPECT_THROW(parse_task_tables(serialize_task_tables(tables)), Error);
}

TEST(LaunchPlan, PicksTheBucketOfEachValue) {
  Graph g;
  const int32_t b = g.declare_symbol("batch", 1, 64);
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(b), Dim::fixed(4)});
  g.mark_output(g.add_op("silu", {x}, {}, "y"), "");
  const TensorId y = g.find_tensor("y");
  for (const auto& [buckets, expect] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{}, {1, 2, 3, 5, 33, 64}},                      // exact
           {{1, 2, 4, 8, 16, 32, 64}, {1, 2, 4, 8, 64, 64}},  // powers of two
           {{64}, {64, 64, 64, 64, 64, 64}}}) {             // runtime
    const LaunchPlanTables t = make_launch_plan_tables(g, {buckets}, 7);
    const std::vector<int64_t> values = {1, 2, 3, 5, 33, 64};
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t shape[2] = {values[i], 4};
      float dx = 0, dy = 0;
      const PlanBinding bs[2] = {{(int64_t{7} << 32) | (x + 1), &dx, static_cast<int32_t>(DType::f32), 2, shape, nullptr},
                                 {(int64_t{7} << 32) | (y + 1), &dy, static_cast<int32_t>(DType::f32), 2, shape, nullptr}};
      std::vector<void*> slots(g.tensors().size());
      int64_t sym = 0, compile = 0, info[kPlanErrorInfoWords] = {};
      ASSERT_EQ(run_launch_plan_reference(t, bs, 2, slots.data(), &sym, &compile, info), 0);
      EXPECT_EQ(sym, values[i]);
      EXPECT_EQ(compile, expect[i]) << "value " << values[i];
      EXPECT_EQ(slots[static_cast<size_t>(x)], &dx);
    }
  }
}

}  // namespace
}  // namespace weft::test
