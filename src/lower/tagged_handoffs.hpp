// Tagged hand-offs: which intermediates of a lowered graph pass from producer to readers as tagged words instead of
// through event counters (device/tagged.cuh, task_abi.h WEFT_TAGGED_*). A tensor qualifies when every task that
// writes it and every task that reads it runs the CUDA-core library's one-row bf16 GEMV path (gemv_one_row.cuh) —
// the hand-offs of a batch-1 decode layer between its o, gate/up and down projections and the next layer's q/k/v —
// and it reads the tensor as x or as the residual. Its readers' waits on its producer's tile and row-block events
// become tagged waits: the simulator still checks them, the device tables leave them out, and the producer stops
// notifying events no one waits on any more.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"
#include "lower/task_graph.hpp"

namespace weft {

struct TaggedHandoffs {
  std::vector<bool> tensor;  // per tensor: handed over as tagged words (4 bytes per element in the arena)
  int64_t count = 0;         // tensors tagged
};

// Whether the device runs `t` on the one-row bf16 GEMV path whenever its weights are 16-byte aligned (which only the
// run sees: the device reports a tagged task that misses it as an error instead of reading words as values). A
// masked task (Task::clip) qualifies only with `g`, its graph, where no value of the symbol cuts or skips it.
bool one_row_gemv_task(const Task& t, const Graph* g = nullptr);

// Picks the tagged tensors of `tg` (lowered from `g` for the CUDA-core library with bf16 one-row tiles and the base
// shared memory: the caller checks that), sets their tasks' WEFT_TAGGED_ARG bits and marks their readers' waits on
// their producers as tagged. Call between lower() and plan_memory(); none when `enabled` is false.
TaggedHandoffs plan_tagged_handoffs(const Graph& g, TaskGraph& tg, bool enabled);

// After simulation, before build_task_tables: drops every tagged wait, and every notify of an event that no wait
// is left on.
void drop_tagged_waits(TaskGraph& tg);

// $WEFT_TAGGED_HANDOFFS: "1" turns them on where they apply, "0" or unset leaves them off (not faster than the
// counters: docs/perf.md round 46); anything else is an error.
bool tagged_handoffs_requested();

}  // namespace weft
