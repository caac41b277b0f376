#include "runtime/trace_export.hpp"

#include <algorithm>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "codegen/kernel_source.hpp"
#include "core/error.hpp"

namespace weft {

void write_chrome_trace(const std::string& path, const Graph& graph, const TaskTables& tables, int32_t steps,
                        const std::vector<uint64_t>& records) {
  const size_t entries = tables.queue_tasks.size();
  uint64_t t0 = std::numeric_limits<uint64_t>::max();
  // The earliest stamp of any entry: a task's set-up ([6]) comes before its wait ([0]).
  for (size_t i = 0; i + kTraceRecordWords <= records.size(); i += kTraceRecordWords)
    for (size_t w : {size_t{0}, size_t{6}})
      if (records[i + w] != 0) t0 = std::min(t0, records[i + w]);
  auto us = [&](uint64_t ns) { return static_cast<double>(ns - t0) / 1000.0; };
  // Durations from the integer difference: subtracting two large converted timestamps would lose the ns.
  auto dur_us = [](uint64_t from, uint64_t to) { return static_cast<double>(to - from) / 1000.0; };
  nlohmann::json events = nlohmann::json::array();
  for (int32_t q = 0; q < tables.num_queues(); ++q)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", q},
                      {"args", {{"name", "block " + std::to_string(q)}}}});
  for (int32_t step = 0; step < steps; ++step)
    for (int32_t q = 0; q < tables.num_queues(); ++q)
      for (int32_t k = tables.queue_offsets[static_cast<size_t>(q)]; k < tables.queue_offsets[static_cast<size_t>(q) + 1]; ++k) {
        const size_t at = (static_cast<size_t>(step) * entries + static_cast<size_t>(k)) * kTraceRecordWords;
        if (at + kTraceRecordWords > records.size() || records[at] == 0 || records[at + 1] == 0 || records[at + 2] == 0) continue;
        const int32_t ti = tables.queue_tasks[static_cast<size_t>(k)];
        const weft_task& t = tables.tasks[static_cast<size_t>(ti)];
        const nlohmann::json args = {{"task", ti}, {"step", step}, {"op", dev_op_function(t.op)}, {"sm", records[at + 3]},
                                     {"mhz", records[at + 2] > records[at + 1]
                                                 ? static_cast<double>(records[at + 5] - records[at + 4]) * 1000.0 /
                                                       static_cast<double>(records[at + 2] - records[at + 1])
                                                 : 0.0},
                                     {"clock", {records[at + 4], records[at + 5]}},
                                     {"rows", {t.args.row0, t.args.row1}}, {"cols", {t.args.col0, t.args.col1}}};
        // The spans around the task's own run, each only where its stamps are in order: set-up (descriptor and
        // prefetch, before the wait), wait, and the notify of its events after it.
        auto span = [&](const char* name, size_t from, size_t to) {
          if (records[at + from] != 0 && records[at + to] > records[at + from])
            events.push_back({{"name", name}, {"cat", name}, {"ph", "X"}, {"pid", 0}, {"tid", q},
                              {"ts", us(records[at + from])}, {"dur", dur_us(records[at + from], records[at + to])},
                              {"args", args}});
        };
        span("setup", 6, 0);
        span("wait", 0, 1);
        span("notify", 2, 7);
        events.push_back({{"name", graph.tensor(t.args.out).name}, {"cat", dev_op_function(t.op)}, {"ph", "X"},
                          {"pid", 0}, {"tid", q}, {"ts", us(records[at + 1])},
                          {"dur", dur_us(records[at + 1], std::max(records[at + 2], records[at + 1]))}, {"args", args}});
      }
  std::ofstream out(path);
  if (!out) invalid("WEFT_TRACE: cannot write '" + path + "'");
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump();
  if (!out) invalid("WEFT_TRACE: writing '" + path + "' failed");
}

}  // namespace weft
