// CPU simulation of the persistent kernel: the queues advance in a random interleaving, waits block on the same
// monotonic counters the device uses, and every read, write and reuse of memory is checked.
#include "schedule/simulator.hpp"

#include <algorithm>
#include <random>

#include "core/error.hpp"

namespace weft {

namespace {

[[noreturn]] void broken(const std::string& what) { fail(Status::internal, "task graph verification failed: " + what); }

}  // namespace

void check_waits_satisfiable(const Graph& g, const TaskGraph& tg) {
  std::vector<uint64_t> per_launch(tg.events.size(), 0);
  for (const Task& t : tg.tasks)
    for (int32_t e : t.notifies) {
      if (e < 0 || static_cast<size_t>(e) >= tg.events.size()) broken(tg.task_name(g, static_cast<int32_t>(&t - tg.tasks.data())) + " notifies a missing event");
      ++per_launch[static_cast<size_t>(e)];
    }
  for (size_t i = 0; i < tg.tasks.size(); ++i)
    for (const TaskWait& w : tg.tasks[i].waits) {
      if (w.event < 0 || static_cast<size_t>(w.event) >= tg.events.size())
        broken(tg.task_name(g, static_cast<int32_t>(i)) + " waits on a missing event");
      if (per_launch[static_cast<size_t>(w.event)] != w.count)
        broken(tg.task_name(g, static_cast<int32_t>(i)) + " waits for " + std::to_string(w.count) + " per launch on " +
               tg.event_name(g, w.event) + ", which gets " + std::to_string(per_launch[static_cast<size_t>(w.event)]));
    }
}

// A task that leaves its waits to its op may notify before they are met, when it has no work.
// Its consumers still wait for its tile's part 0, which must itself wait, for all of them: then whatever a consumer
// could rely on through this task's waits it gets through part 0's (the simulation below treats every wait as made).
void check_waits_in_op(const Graph& g, const TaskGraph& tg) {
  for (size_t i = 0; i < tg.tasks.size(); ++i) {
    const Task& t = tg.tasks[i];
    if (!t.waits_in_op) continue;
    const std::string name = tg.task_name(g, static_cast<int32_t>(i));
    if (t.part <= 0 || static_cast<size_t>(t.part) > i) broken(name + " leaves its waits to its op but is not a part above 0");
    const Task& first = tg.tasks[i - static_cast<size_t>(t.part)];  // parts of a tile are adjacent (lower)
    const bool same_tile = first.node == t.node && first.part == 0 && first.tile.row0 == t.tile.row0 &&
                           first.tile.row1 == t.tile.row1 && first.tile.col0 == t.tile.col0 && first.tile.col1 == t.tile.col1;
    if (!same_tile || first.waits_in_op) broken(name + " leaves its waits to its op, but its tile has no part 0 that waits");
    for (const TaskWait& w : t.waits)
      if (std::none_of(first.waits.begin(), first.waits.end(), [&](const TaskWait& f) { return f.event == w.event && f.count == w.count; }))
        broken(name + " leaves its wait on " + tg.event_name(g, w.event) + " to its op, and part 0 of its tile does not make it");
  }
}

SimulationStats simulate(const Graph& g, const TaskGraph& tg, const Schedule& s, const MemoryPlan& plan, const SimulationOptions& o) {
  check_waits_satisfiable(g, tg);
  check_waits_in_op(g, tg);
  const size_t num_tasks = tg.tasks.size();
  {
    std::vector<int> seen(num_tasks, 0);
    for (const auto& q : s.queues)
      for (int32_t t : q) {
        if (t < 0 || static_cast<size_t>(t) >= num_tasks) broken("a queue holds task " + std::to_string(t) + ", which does not exist");
        ++seen[static_cast<size_t>(t)];
      }
    for (size_t t = 0; t < num_tasks; ++t)
      if (seen[t] != 1) broken(tg.task_name(g, static_cast<int32_t>(t)) + " is in " + std::to_string(seen[t]) + " queues; expected 1");
  }
  // Per node: which tasks write which tile, to check reads against writes.
  const auto& nodes = g.nodes();
  std::vector<int32_t> task_count(nodes.size(), 0);
  for (const Task& t : tg.tasks) ++task_count[static_cast<size_t>(t.node)];
  // Nodes that must be complete before a task of node n may write its output (reuse of arena memory and
  // write-after-read on state tensors).
  std::vector<std::vector<int32_t>> must_be_done(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    const TensorId out = nodes[n].output;
    for (TensorId a : plan.shares_with[static_cast<size_t>(out)]) {
      must_be_done[n].push_back(g.tensor(a).producer);
      for (size_t r = 0; r < nodes.size(); ++r)
        for (TensorId in : nodes[r].inputs)
          if (in == a) must_be_done[n].push_back(static_cast<int32_t>(r));
    }
    for (int w : nodes[n].op->writes_operands) {
      if (static_cast<size_t>(w) >= nodes[n].inputs.size()) continue;
      const TensorId st = nodes[n].inputs[static_cast<size_t>(w)];
      for (size_t r = 0; r < n; ++r)
        for (TensorId in : nodes[r].inputs)
          if (in == st && st != kNoTensor) must_be_done[n].push_back(static_cast<int32_t>(r));
    }
  }

  SimulationStats stats;
  std::mt19937_64 rng(o.seed);
  std::vector<uint64_t> counters(tg.events.size(), 0);
  for (uint32_t epoch = 1; epoch <= o.epochs; ++epoch) {
    std::vector<size_t> head(s.queues.size(), 0);
    std::vector<int32_t> done_in_node(nodes.size(), 0);
    std::vector<uint8_t> written(num_tasks, 0);
    size_t remaining = num_tasks;
    std::vector<size_t> runnable;
    auto ready = [&](int32_t task) {
      for (const TaskWait& w : tg.tasks[static_cast<size_t>(task)].waits)
        if (counters[static_cast<size_t>(w.event)] < static_cast<uint64_t>(w.count) * epoch) return false;
      return true;
    };
    while (remaining > 0) {
      runnable.clear();
      for (size_t q = 0; q < s.queues.size(); ++q)
        if (head[q] < s.queues[q].size() && ready(s.queues[q][head[q]])) runnable.push_back(q);
      if (runnable.empty()) {
        for (size_t q = 0; q < s.queues.size(); ++q) {
          if (head[q] >= s.queues[q].size()) continue;
          const int32_t t = s.queues[q][head[q]];
          for (const TaskWait& w : tg.tasks[static_cast<size_t>(t)].waits)
            if (counters[static_cast<size_t>(w.event)] < static_cast<uint64_t>(w.count) * epoch)
              broken("deadlock in launch " + std::to_string(epoch) + ": queue " + std::to_string(q) + " is stuck at " +
                     tg.task_name(g, t) + ", waiting on " + tg.event_name(g, w.event) + " (" +
                     std::to_string(counters[static_cast<size_t>(w.event)]) + " of " +
                     std::to_string(static_cast<uint64_t>(w.count) * epoch) + ")");
        }
        broken("deadlock with no waiting task (internal)");
      }
      const size_t q = runnable[rng() % runnable.size()];
      const int32_t ti = s.queues[q][head[q]++];
      const Task& t = tg.tasks[static_cast<size_t>(ti)];
      // Every producer tile overlapping what the task reads must already be written in this launch.
      for (const ReadSet& rs : tg.reads[static_cast<size_t>(ti)]) {
        const int32_t p = g.tensor(rs.tensor).producer;
        for (int32_t pt = tg.first_task[static_cast<size_t>(p)]; pt < tg.first_task[static_cast<size_t>(p)] + task_count[static_cast<size_t>(p)]; ++pt)
          for (const Region& r : rs.regions)
            if (tg.tasks[static_cast<size_t>(pt)].tile.overlaps(r) && !written[static_cast<size_t>(pt)])
              broken(tg.task_name(g, ti) + " reads '" + g.tensor(rs.tensor).name + "' before " + tg.task_name(g, pt) +
                     " has written it (launch " + std::to_string(epoch) + ")");
      }
      for (int32_t n : must_be_done[static_cast<size_t>(t.node)])
        if (done_in_node[static_cast<size_t>(n)] != task_count[static_cast<size_t>(n)])
          broken(tg.task_name(g, ti) + " overwrites memory that op '" + g.tensor(nodes[static_cast<size_t>(n)].output).name +
                 "' may still use (launch " + std::to_string(epoch) + ")");
      if (written[static_cast<size_t>(ti)]) broken(tg.task_name(g, ti) + " ran twice in launch " + std::to_string(epoch));
      written[static_cast<size_t>(ti)] = 1;
      ++done_in_node[static_cast<size_t>(t.node)];
      for (int32_t e : t.notifies) ++counters[static_cast<size_t>(e)];
      --remaining;
      ++stats.steps;
    }
  }
  // Every output tile written exactly once: tiles of a node partition its output. The parts of a split tile
  // (TileGrid::k_parts) share it: one of them stores it, after all have run.
  for (size_t n = 0; n < nodes.size(); ++n) {
    int64_t area = 0;
    const int64_t parts = tg.grids[n].k_parts;
    for (int32_t t = tg.first_task[n]; t < tg.first_task[n] + task_count[n]; ++t) {
      const Task& a = tg.tasks[static_cast<size_t>(t)];
      const Region& r = a.tile;
      if (a.part < 0 || a.part >= parts) broken(tg.task_name(g, t) + " is part " + std::to_string(a.part) + " of " + std::to_string(parts));
      if (a.part == 0) area += (r.row1 - r.row0) * (r.col1 - r.col0);
      for (int32_t u = t + 1; u < tg.first_task[n] + task_count[n]; ++u) {
        const Task& b = tg.tasks[static_cast<size_t>(u)];
        const bool same_tile = b.tile.row0 == r.row0 && b.tile.row1 == r.row1 && b.tile.col0 == r.col0 && b.tile.col1 == r.col1;
        if (r.overlaps(b.tile) && !(same_tile && a.part != b.part))
          broken(tg.task_name(g, t) + " and " + tg.task_name(g, u) + " write the same elements");
      }
    }
    if (task_count[n] != tg.grids[n].tasks())
      broken("op '" + g.tensor(nodes[n].output).name + "' has " + std::to_string(task_count[n]) + " tasks; its grid has " +
             std::to_string(tg.grids[n].tasks()));
    const View2D v = view_of(tg.shapes[static_cast<size_t>(nodes[n].output)]);
    if (area != v.rows * v.cols)
      broken("the tiles of op '" + g.tensor(nodes[n].output).name + "' cover " + std::to_string(area) + " of its " +
             std::to_string(v.rows * v.cols) + " elements");
  }
  return stats;
}

}  // namespace weft
