// Static scheduling: the tasks split into one queue per persistent block, each queue in the global topological
// order (which makes any execution deadlock-free as long as every block is resident), balanced by estimated
// cost with producers placed ahead of their consumers. A dynamic (device-side ready queue) schedule would
// implement the same Schedule with kind == dynamic.
#pragma once

#include <cstdint>
#include <vector>

#include "lower/task_graph.hpp"

namespace weft {

enum class ScheduleKind : int32_t { static_queues = 0, dynamic_queue = 1 };

struct Schedule {
  ScheduleKind kind = ScheduleKind::static_queues;
  std::vector<std::vector<int32_t>> queues;  // task indices, ascending within a queue
  double estimated_us = 0;                   // list-scheduling estimate of the makespan
};

// Estimated duration of a task in microseconds (a bandwidth + compute + fixed-overhead model of one SM).
double task_cost_us(const Task& t);

Schedule schedule_static(const TaskGraph& tg, int32_t num_queues);

}  // namespace weft
