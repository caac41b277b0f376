// WEFT_TRACE's export: the kernel's raw per-task records become a Chrome/Perfetto trace with one track per block,
// a span per task named after the tensor it writes, "setup", "wait" and "notify" spans around it where their
// stamps are in order, and nothing for entries the kernel never reached.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "lower/task_graph.hpp"
#include "runtime/trace_export.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"
#include "schedule/task_tables.hpp"
#include "test_models.hpp"

namespace weft {
namespace {

struct Traced {
  Graph graph;
  TaskTables tables;
};

Traced small_program(int32_t queues) {
  Graph g = build_decoder_graph(test::tiny_decoder(1, 2, 16));
  TaskGraph tg = lower(g, SymbolValues{1}, LowerOptions{queues});
  plan_memory(g, tg);
  finalize_events(tg);
  TaskTables t = build_task_tables(tg, schedule_static(tg, queues), static_cast<int32_t>(g.tensors().size()));
  return Traced{std::move(g), std::move(t)};
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

TEST(TraceExport, OneSpanPerTaskAndAWaitSpanWhenItWaited) {
  const Traced p = small_program(3);
  const size_t entries = p.tables.queue_tasks.size();
  const int32_t steps = 2;
  std::vector<uint64_t> records(static_cast<size_t>(steps) * entries * kTraceRecordWords, 0);
  // Step 0: every entry k took 300 ns of set-up, waited 100 ns, ran 1 us from 10 us + k us, on SM k % 5, at 2
  // cycles per ns, then notified for 40 ns. Step 1: only entry 0 was reached (a launch stopped early, before
  // its notify): its other entries stay zero.
  for (size_t k = 0; k < entries; ++k) {
    uint64_t* r = &records[k * kTraceRecordWords];
    r[1] = 10000 + 1000 * k;
    r[0] = r[1] - 100;
    r[2] = r[1] + 1000;
    r[3] = k % 5;
    r[4] = 5000;
    r[5] = 7000;
    r[6] = r[0] - 300;
    r[7] = r[2] + 40;
  }
  uint64_t* late = &records[entries * kTraceRecordWords];
  late[0] = late[1] = 50000000;  // no wait
  late[2] = 50000500;
  late[6] = late[0] - 200;
  const std::string path = ::testing::TempDir() + "weft_trace_test.json";
  write_chrome_trace(path, p.graph, p.tables, steps, records);
  const nlohmann::json j = read_json(path);
  std::map<std::string, int> spans;
  int tracks = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M") {
      ++tracks;
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X");
    const std::string cat = e.at("cat");
    const bool around = cat == "wait" || cat == "setup" || cat == "notify";
    ++spans[around ? cat : "task"];
    const auto task = e.at("args").at("task").get<int32_t>();
    if (around) {
      const bool late_entry = e.at("args").at("step") == 1;
      const double want = cat == "wait" ? 0.1 : cat == "notify" ? 0.04 : late_entry ? 0.2 : 0.3;
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), want) << cat;
      // The trace starts at the earliest stamp, a set-up's: an earlier origin would wrap around to ~1.8e13 s.
      EXPECT_GE(e.at("ts").get<double>(), 0.0) << cat;
      EXPECT_LE(e.at("ts").get<double>(), 60000.0) << cat;
    } else {
      EXPECT_EQ(e.at("name"), p.graph.tensor(p.tables.tasks[static_cast<size_t>(task)].args.out).name);
      if (e.at("args").at("step") == 0) {
        EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 1.0) << "1 us run";
        EXPECT_DOUBLE_EQ(e.at("args").at("mhz").get<double>(), 2000.0) << "2000 cycles in 1000 ns";
        EXPECT_EQ(e.at("args").at("clock"), nlohmann::json::array({5000, 7000})) << "words [4] and [5] as recorded";
      }
    }
  }
  EXPECT_EQ(tracks, p.tables.num_queues());
  EXPECT_EQ(spans["task"], static_cast<int>(entries) + 1) << "step 0's entries and the one reached in step 1";
  EXPECT_EQ(spans["wait"], static_cast<int>(entries)) << "the step-1 entry did not wait";
  EXPECT_EQ(spans["setup"], static_cast<int>(entries) + 1);
  EXPECT_EQ(spans["notify"], static_cast<int>(entries)) << "the step-1 entry never notified";
  std::remove(path.c_str());
}

TEST(TraceExport, AnUnwritableFileIsAnErrorNamingIt) {
  const Traced p = small_program(2);
  const std::vector<uint64_t> records(p.tables.queue_tasks.size() * kTraceRecordWords, 0);
  try {
    write_chrome_trace("/nonexistent-folder/trace.json", p.graph, p.tables, 1, records);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder/trace.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
