#include "schedule/memory_plan.hpp"

#include <algorithm>

namespace weft {

namespace {
int64_t align_up(int64_t v) { return (v + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }
}  // namespace

MemoryPlan plan_memory(const Graph& g, TaskGraph& tg, const std::vector<bool>& tagged) {
  auto is_tagged = [&](TensorId t) { return static_cast<size_t>(t) < tagged.size() && tagged[static_cast<size_t>(t)]; };
  const auto& tensors = g.tensors();
  const auto& nodes = g.nodes();
  MemoryPlan plan;
  plan.offset.assign(tensors.size(), -1);
  plan.bytes.resize(tensors.size());
  plan.shares_with.resize(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t)
    plan.bytes[t] = element_count(tg.shapes[t]) * static_cast<int64_t>(dtype_size(tensors[t].type.dtype));

  // Lifetime in node order: [producer, last reader]; readers per tensor.
  std::vector<int32_t> last_use(tensors.size(), -1);
  std::vector<std::vector<int32_t>> readers(tensors.size());
  for (size_t n = 0; n < nodes.size(); ++n)
    for (TensorId in : nodes[n].inputs)
      if (in != kNoTensor) {
        last_use[static_cast<size_t>(in)] = static_cast<int32_t>(n);
        readers[static_cast<size_t>(in)].push_back(static_cast<int32_t>(n));
      }

  struct Placed {
    TensorId t;
    int64_t begin, end;  // bytes
    int32_t first, last;  // nodes
  };
  std::vector<Placed> placed;
  std::vector<TensorId> order;
  for (size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].kind == TensorKind::intermediate && !tensors[t].is_output) order.push_back(static_cast<TensorId>(t));
  // Largest first packs tighter; ties by creation order keep the plan deterministic.
  std::stable_sort(order.begin(), order.end(), [&](TensorId a, TensorId b) { return plan.bytes[static_cast<size_t>(a)] > plan.bytes[static_cast<size_t>(b)]; });
  for (TensorId t : order) {
    const auto ti = static_cast<size_t>(t);
    const int32_t first = tensors[ti].producer, last = std::max(last_use[ti], first);
    const int64_t size = align_up(std::max<int64_t>(plan.bytes[ti] * (is_tagged(t) ? 2 : 1), 1));
    // Candidate offsets: 0 and the end of every placed tensor whose lifetime overlaps ours (a tagged one's: all).
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed)
      if (is_tagged(t) || is_tagged(p.t) || !(p.last < first || last < p.first)) busy.emplace_back(p.begin, p.end);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + size <= b) break;
      at = std::max(at, e);
    }
    placed.push_back(Placed{t, at, at + size, first, last});
    plan.offset[ti] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + size);
  }

  // Reuse: a tensor over memory of an earlier one waits for everything that touches the earlier one.
  for (const Placed& b : placed)
    for (const Placed& a : placed) {
      if (a.t == b.t || a.end <= b.begin || b.end <= a.begin || a.last >= b.first) continue;
      plan.shares_with[static_cast<size_t>(b.t)].push_back(a.t);
      tg.add_ordering_wait(b.first, a.first);
      for (int32_t r : readers[static_cast<size_t>(a.t)]) tg.add_ordering_wait(b.first, r);
    }
  return plan;
}

}  // namespace weft
