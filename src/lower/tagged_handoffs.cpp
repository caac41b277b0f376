#include "lower/tagged_handoffs.hpp"

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/config.cuh"

namespace weft {

namespace {

bool is_gemv(int32_t op) {
  return op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_RMSNORM_LINEAR || op == WEFT_DEV_OP_SILU_MUL_LINEAR;
}

// The operand index of a GEMV op's weight (x, [norm weight], weight, bias, residual).
int weight_operand(int32_t op) { return op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1; }

// One past the last task of node `n` (a node's tasks are contiguous, TaskGraph::first_task).
int32_t node_tasks_end(const TaskGraph& tg, size_t n) {
  return n + 1 < tg.first_task.size() ? tg.first_task[n + 1] : static_cast<int32_t>(tg.tasks.size());
}

// Where one_row_gemv keeps the plans of its warps (GemvPlanRecord): the x row must end below them.
constexpr int64_t kPlanRecordOffset =
    WEFT_SMEM_BYTES_BASE - WEFT_GEMV_SCRATCH_BYTES - WEFT_BLOCK_WARPS * WEFT_GEMV_PLAN_RECORD_BYTES;
// The one-row rmsnorm's fast path (rmsnorm_row_weight_async<T, 2>): up to two 8-element vectors per thread.
constexpr int64_t kNormMaxElements = 2 * 8 * WEFT_BLOCK_THREADS;

}  // namespace

bool one_row_gemv_task(const Task& t, const Graph* g) {
  const weft_task_args& a = t.args;
  if (!is_gemv(t.dev_op) || a.dtype != WEFT_DEV_BF16 || a.row1 - a.row0 != 1 || a.col1 <= a.col0) return false;
  // Tagged words must be written every step: a masked tile (clip_task, task_loop.cuh) only where no value of its
  // symbol cuts or skips it — its first row, cut to at least the symbol's minimum times clip_unit rows.
  if (t.clip >= 0) {
    const auto sym = static_cast<size_t>(t.clip & 0xff);
    if (g == nullptr || (t.clip >> 8) != 0 || a.row0 != 0 || sym >= g->symbols().all().size() ||
        g->symbols().all()[sym].min * t.clip_unit < 1)
      return false;
  }
  if (t.dev_op == WEFT_DEV_OP_LINEAR && a.d[2] > 1) return false;  // split over K (linear_split.cuh)
  const int64_t k = a.d[0], row_bytes = k * 2;
  // gemv_stream_plan's 4-unit stages (rows of 2 KiB multiples) and gemv_plan_record_fits.
  if (k <= 0 || row_bytes % (4 * 512) != 0 || WEFT_GEMV_RING_BYTES + row_bytes > kPlanRecordOffset) return false;
  if (t.dev_op == WEFT_DEV_OP_RMSNORM_LINEAR && k > kNormMaxElements) return false;
  return true;
}

TaggedHandoffs plan_tagged_handoffs(const Graph& g, TaskGraph& tg, bool enabled) {
  const auto& tensors = g.tensors();
  const auto& nodes = g.nodes();
  TaggedHandoffs out;
  out.tensor.assign(tensors.size(), false);
  if (!enabled) return out;
  // Per node: whether every task of it is a one-row GEMV tile.
  std::vector<bool> one_row(nodes.size(), false);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t begin = tg.first_task[n], end = node_tasks_end(tg, n);
    bool all = begin < end;
    for (int32_t i = begin; i < end && all; ++i) all = one_row_gemv_task(tg.tasks[static_cast<size_t>(i)], &g);
    one_row[n] = all;
  }
  // Per tensor: the bits of each reading node (0 where it reads it otherwise than as x or residual: not taggable).
  std::vector<std::vector<std::pair<int32_t, unsigned int>>> readers(tensors.size());
  std::vector<bool> blocked(tensors.size(), false);
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const TensorId in = node.inputs[k];
      if (in == kNoTensor) continue;
      const auto ti = static_cast<size_t>(in);
      unsigned int bit = 0;
      if (one_row[n]) {
        const int32_t op = tg.tasks[static_cast<size_t>(tg.first_task[n])].dev_op;
        if (k == 0) bit = WEFT_TAGGED_X;
        else if (static_cast<int>(k) == weight_operand(op) + 2) bit = WEFT_TAGGED_RES;
      }
      if (bit == 0) blocked[ti] = true;
      else readers[ti].emplace_back(static_cast<int32_t>(n), bit);
    }
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorDesc& d = tensors[t];
    if (d.kind != TensorKind::intermediate || d.is_output || d.type.dtype != DType::bf16 || d.producer < 0) continue;
    if (blocked[t] || readers[t].empty() || !one_row[static_cast<size_t>(d.producer)]) continue;
    out.tensor[t] = true;
    ++out.count;
    const auto p = static_cast<size_t>(d.producer);
    for (int32_t i = tg.first_task[p]; i < node_tasks_end(tg, p); ++i)
      tg.tasks[static_cast<size_t>(i)].args.i[WEFT_TAGGED_ARG] |= static_cast<int>(WEFT_TAGGED_OUT);
    for (const auto& [n, bit] : readers[t]) {
      const auto nn = static_cast<size_t>(n);
      for (int32_t i = tg.first_task[nn]; i < node_tasks_end(tg, nn); ++i) {
        Task& task = tg.tasks[static_cast<size_t>(i)];
        task.args.i[WEFT_TAGGED_ARG] |= static_cast<int>(bit);
        // Its waits for the producer's data (tile and row-block events); a node event is an ordering wait (reuse,
        // state) and stays a counter.
        for (TaskWait& w : task.waits) {
          const EventDesc& e = tg.events[static_cast<size_t>(w.event)];
          if (e.node == d.producer && e.kind != EventKind::node) w.tagged = true;
        }
      }
    }
  }
  return out;
}

void drop_tagged_waits(TaskGraph& tg) {
  std::set<int32_t> waited;
  for (Task& t : tg.tasks) {
    std::erase_if(t.waits, [](const TaskWait& w) { return w.tagged; });
    for (const TaskWait& w : t.waits) waited.insert(w.event);
  }
  for (Task& t : tg.tasks) std::erase_if(t.notifies, [&](int32_t e) { return waited.count(e) == 0; });
}

bool tagged_handoffs_requested() {
  const char* env = std::getenv("WEFT_TAGGED_HANDOFFS");
  if (env == nullptr || *env == '\0') return false;
  const std::string v(env);
  if (v == "0") return false;
  if (v == "1") return true;
  fail(Status::invalid_argument, "WEFT_TAGGED_HANDOFFS='" + v + "': expected 0 or 1");
}

}  // namespace weft
