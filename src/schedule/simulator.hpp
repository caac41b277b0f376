// Verification of a lowered, scheduled task graph before anything is compiled. A CPU simulator runs the queues
// in a random interleaving over several launches (counters never reset) and checks: every wait can be
// satisfied, no deadlock, no task reads a tile before it is written, no task overwrites memory (reused arena
// space, a state tensor) that another task may still read, and every output tile is written exactly once.
// Failures throw weft::Error (Status::internal) naming the task and the event: they are weft bugs.
#pragma once

#include <cstdint>

#include "schedule/memory_plan.hpp"
#include "schedule/schedule.hpp"

namespace weft {

struct SimulationOptions {
  uint64_t seed = 1;
  uint32_t epochs = 2;
};

struct SimulationStats {
  int64_t steps = 0;
};

// Static check: each wait's count equals what its event's notifiers add per launch.
void check_waits_satisfiable(const Graph& g, const TaskGraph& tg);

// Static check: a task that leaves its waits to its op (Task::waits_in_op) is a part above 0 whose tile's part 0
// makes every one of them itself. simulate() runs it; throws Status::internal naming the task and the wait.
void check_waits_in_op(const Graph& g, const TaskGraph& tg);

SimulationStats simulate(const Graph& g, const TaskGraph& tg, const Schedule& s, const MemoryPlan& plan,
                         const SimulationOptions& options);

}  // namespace weft
