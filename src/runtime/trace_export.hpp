// The per-task timestamp trace of a megakernel launch (WEFT_TRACE=path), as Chrome trace JSON (chrome://tracing,
// ui.perfetto.dev): one track per block, a span per task named after the tensor it writes, and around it the
// spans of its "setup" (descriptor read and prefetch of unguarded operands), its "wait" for its inputs and the
// "notify" of its events. Each span's args give the task, step, op, SM, the clock rate it ran at, and the raw SM
// clocks at its run's start and end ("clock": words [4] and [5] of its record, which diagnostic device libraries
// may use for stamps of their own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/task_abi.h"
#include "graph/graph.hpp"
#include "schedule/task_tables.hpp"

namespace weft {

// Values per queue entry and step, as the kernel writes them (WEFT_TRACE_RECORD_WORDS in device/task_abi.h).
inline constexpr size_t kTraceRecordWords = WEFT_TRACE_RECORD_WORDS;

// `records` holds kTraceRecordWords per queue entry and step. Entries never reached (a launch that failed) are
// zero and left out.
// Throws weft::Error (Status::invalid_argument) when the file cannot be written.
void write_chrome_trace(const std::string& path, const Graph& graph, const TaskTables& tables, int32_t steps,
                        const std::vector<uint64_t>& records);

}  // namespace weft
