// The device-side tables of a scheduled task graph (task_abi.h structs), and their binary form stored in the
// kernel cache beside the cubin.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/task_abi.h"
#include "schedule/schedule.hpp"

namespace weft {

struct TaskTables {
  std::vector<weft_task> tasks;
  std::vector<weft_wait> waits;
  std::vector<int32_t> notifies;
  std::vector<int32_t> queue_offsets;  // num_queues + 1 entries
  std::vector<int32_t> queue_tasks;
  int32_t num_events = 0;
  int32_t num_slots = 0;
  int64_t scratch_words = 0;  // TaskGraph::scratch_words

  int32_t num_queues() const { return static_cast<int32_t>(queue_offsets.size()) - 1; }
};

TaskTables build_task_tables(const TaskGraph& tg, const Schedule& s, int32_t num_slots);

// The tasks as the device runs them: the scratch word offsets of split tasks (LINEAR and ARGMAX with d2 > 1: d4,
// d5; task_abi.h) replaced by device addresses, the scratch words starting at `scratch_address` (16-byte aligned).
std::vector<weft_task> relocate_scratch(const TaskTables& t, uint64_t scratch_address);

// Binary form: a header (magic, version, counts) and the arrays. parse_task_tables checks every count, index
// and offset and throws weft::Error (Status::cache) on anything inconsistent, so a damaged blob is never used.
std::string serialize_task_tables(const TaskTables& t);
TaskTables parse_task_tables(const std::string& blob);

}  // namespace weft
