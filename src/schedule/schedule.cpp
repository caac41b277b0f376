#include "schedule/schedule.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace weft {

double task_cost_us(const Task& t) {
  // One SM of an H100/H200 streams ~30 GB/s of the ~4 TB/s and does ~5 TFLOP/s of f32 FMA; 1.5 us covers the
  // event wait, the notify and the launch of the tile's work.
  return t.bytes / 30e3 + t.flops / 5e6 + 1.5;
}

Schedule schedule_static(const TaskGraph& tg, int32_t num_queues) {
  if (num_queues < 1) fail(Status::invalid_argument, "the schedule needs at least one queue (got " + std::to_string(num_queues) + ")");
  Schedule s;
  s.queues.resize(static_cast<size_t>(num_queues));
  std::vector<double> queue_free(static_cast<size_t>(num_queues), 0.0);
  std::vector<double> event_done(tg.events.size(), 0.0);  // estimated time each event reaches its target
  // Tasks in table order (topological), except that a split attention node's tasks go part by part: at short
  // contexts part 0 of each tile runs the tile whole (device attn_split_part) and must take the free queues its
  // producer left (lowering's reserved SMs), not land behind a producer tile with its K/V copy on the critical path.
  std::vector<size_t> order(tg.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) {
    const Task& t = tg.tasks[i];
    return std::pair<int32_t, int32_t>{t.node, t.dev_op == WEFT_DEV_OP_ATTENTION_DECODE_QKV ? t.part : 0};
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  for (const size_t i : order) {
    const Task& t = tg.tasks[i];
    double ready = 0;
    for (const TaskWait& w : t.waits) ready = std::max(ready, event_done[static_cast<size_t>(w.event)]);
    // The queue where the task can start first; ties go to the least loaded queue (lowest free time).
    size_t best = 0;
    double best_start = 1e300;
    for (size_t q = 0; q < queue_free.size(); ++q) {
      const double start = std::max(ready, queue_free[q]);
      if (start < best_start || (start == best_start && queue_free[q] < queue_free[best])) {
        best = q;
        best_start = start;
      }
    }
    const double end = best_start + task_cost_us(t);
    queue_free[best] = end;
    s.queues[best].push_back(static_cast<int32_t>(i));
    for (int32_t e : t.notifies) event_done[static_cast<size_t>(e)] = std::max(event_done[static_cast<size_t>(e)], end);
  }
  s.estimated_us = *std::max_element(queue_free.begin(), queue_free.end());
  return s;
}

}  // namespace weft
