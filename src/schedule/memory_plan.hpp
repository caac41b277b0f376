// The arena: every intermediate (op result that is not a graph output) gets an offset in one weft-owned buffer,
// reusing the memory of tensors whose last reader has run. Reuse adds waits, so a task never overwrites memory
// that another task may still read.
#pragma once

#include <cstdint>
#include <vector>

#include "lower/task_graph.hpp"

namespace weft {

inline constexpr int64_t kArenaAlignment = 256;

struct MemoryPlan {
  std::vector<int64_t> offset;  // per tensor: byte offset in the arena, -1 if not in the arena
  std::vector<int64_t> bytes;   // per tensor: its size in bytes (every tensor)
  int64_t arena_bytes = 0;
  // Per arena tensor: the arena tensors placed over memory it shares (lifetimes disjoint).
  std::vector<std::vector<TensorId>> shares_with;
};

// Places intermediates by liveness (node order) and adds the write-after-read waits reuse needs to `tg`.
// Call between lower() and finalize_events().
// `tagged` (TaggedHandoffs::tensor, or empty): tensors stored as tagged words, 4 bytes per element, each in memory
// of its own — a tagged word's last tag must be its own tensor's, and a word must never be written by a tensor
// placed over it.
MemoryPlan plan_memory(const Graph& g, TaskGraph& tg, const std::vector<bool>& tagged = {});

}  // namespace weft
