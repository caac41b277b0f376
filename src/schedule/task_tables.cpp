#include "schedule/task_tables.hpp"

#include <cstring>

#include "core/error.hpp"
#include "device/config.cuh"

namespace weft {

namespace {

constexpr uint32_t kMagic = 0x54464557;  // "WEFT"
constexpr uint32_t kVersion = 4;  // 2: weft_task::clip; 3: scratch words; 4: waits an op makes itself

struct Header {  // 48 bytes
  uint32_t magic, version;
  uint32_t task_size;  // sizeof(weft_task): guards against a blob from a build with another ABI
  int32_t num_tasks, num_waits, num_notifies, num_queues, num_queue_tasks, num_events, num_slots;
  int64_t scratch_words;  // at byte 40: no padding inside the header
};

template <typename T>
void append(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename T>
void take(const std::string& blob, size_t& at, std::vector<T>& v, int32_t n) {
  if (n < 0) fail(Status::cache, "task tables: negative count");
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  if (at + bytes > blob.size()) fail(Status::cache, "task tables: truncated blob");
  v.resize(static_cast<size_t>(n));
  std::memcpy(v.data(), blob.data() + at, bytes);
  at += bytes;
}

}  // namespace

TaskTables build_task_tables(const TaskGraph& tg, const Schedule& s, int32_t num_slots) {
  TaskTables t;
  t.num_events = static_cast<int32_t>(tg.events.size());
  t.num_slots = num_slots;
  t.scratch_words = tg.scratch_words;
  for (const Task& task : tg.tasks) {
    weft_task d{};
    d.op = task.dev_op;
    d.wait_begin = static_cast<int32_t>(t.waits.size());
    d.wait_count = static_cast<int32_t>(task.waits.size()) * (task.waits_in_op ? -1 : 1);  // < 0: the op's own
    d.notify_begin = static_cast<int32_t>(t.notifies.size());
    d.notify_count = static_cast<int32_t>(task.notifies.size());
    d.clip = task.clip;
    d.clip_unit = task.clip_unit;
    d.args = task.args;
    for (const TaskWait& w : task.waits) t.waits.push_back(weft_wait{w.event, w.count});
    t.notifies.insert(t.notifies.end(), task.notifies.begin(), task.notifies.end());
    t.tasks.push_back(d);
  }
  t.queue_offsets.push_back(0);
  for (const auto& q : s.queues) {
    t.queue_tasks.insert(t.queue_tasks.end(), q.begin(), q.end());
    t.queue_offsets.push_back(static_cast<int32_t>(t.queue_tasks.size()));
  }
  return t;
}

namespace {
// Where a split task (LINEAR over K, ARGMAX over columns, ATTENTION_DECODE_QKV over timesteps: task_abi.h) keeps its
// part count, its part, and its block and arrival counter in scratch (d[] indices; -1: the op never splits).
struct SplitFields {
  int parts = -1, part = -1, block = -1, counter = -1;
};
SplitFields split_fields(int op) {
  if (op == WEFT_DEV_OP_LINEAR || op == WEFT_DEV_OP_ARGMAX) return {2, 3, 4, 5};
  if (op == WEFT_DEV_OP_ATTENTION_DECODE_QKV) return {9, 10, 11, 12};
  return {};
}
bool split_task(const weft_task& d) {
  const SplitFields f = split_fields(d.op);
  return f.parts >= 0 && d.args.d[f.parts] > 1;
}
}  // namespace

std::vector<weft_task> relocate_scratch(const TaskTables& t, uint64_t scratch_address) {
  std::vector<weft_task> tasks = t.tasks;
  for (weft_task& d : tasks)
    if (split_task(d)) {
      const SplitFields f = split_fields(d.op);
      for (const int field : {f.block, f.counter})
        d.args.d[field] = static_cast<long long>(scratch_address + static_cast<uint64_t>(d.args.d[field]) * sizeof(uint32_t));
    }
  return tasks;
}

std::string serialize_task_tables(const TaskTables& t) {
  const Header h{kMagic, kVersion, sizeof(weft_task),
                 static_cast<int32_t>(t.tasks.size()), static_cast<int32_t>(t.waits.size()),
                 static_cast<int32_t>(t.notifies.size()), t.num_queues(), static_cast<int32_t>(t.queue_tasks.size()),
                 t.num_events, t.num_slots, t.scratch_words};
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  append(out, t.tasks);
  append(out, t.waits);
  append(out, t.notifies);
  append(out, t.queue_offsets);
  append(out, t.queue_tasks);
  return out;
}

TaskTables parse_task_tables(const std::string& blob) {
  Header h{};
  if (blob.size() < sizeof h) fail(Status::cache, "task tables: blob of " + std::to_string(blob.size()) + " bytes is too short");
  std::memcpy(&h, blob.data(), sizeof h);
  if (h.magic != kMagic || h.version != kVersion || h.task_size != sizeof(weft_task))
    fail(Status::cache, "task tables: wrong magic, version or task size");
  TaskTables t;
  size_t at = sizeof h;
  take(blob, at, t.tasks, h.num_tasks);
  take(blob, at, t.waits, h.num_waits);
  take(blob, at, t.notifies, h.num_notifies);
  take(blob, at, t.queue_offsets, h.num_queues + 1);
  take(blob, at, t.queue_tasks, h.num_queue_tasks);
  if (at != blob.size()) fail(Status::cache, "task tables: trailing bytes");
  t.num_events = h.num_events;
  t.num_slots = h.num_slots;
  if (!(h.scratch_words >= 0 && h.scratch_words <= kMaxScratchWords)) fail(Status::cache, "task tables: a bad scratch size");
  t.scratch_words = h.scratch_words;
  // Every index the device will follow must be in range: a bad table would be an out-of-bounds access there.
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  for (const weft_task& d : t.tasks) {
    const int64_t waits = d.wait_count < 0 ? -static_cast<int64_t>(d.wait_count) : d.wait_count;
    if (!in(d.op, 0, WEFT_DEV_OP_COUNT - 1) || !in(d.wait_begin, 0, h.num_waits) || !in(waits, 0, h.num_waits - d.wait_begin) ||
        !in(d.notify_begin, 0, h.num_notifies) || !in(d.notify_count, 0, h.num_notifies - d.notify_begin) ||
        !in(d.args.out, 0, t.num_slots - 1))
      fail(Status::cache, "task tables: a task has out-of-range indices");
    for (int k = 0; k < WEFT_TASK_MAX_INPUTS; ++k)
      if (!in(d.args.in[k], -1, t.num_slots - 1)) fail(Status::cache, "task tables: a task has an out-of-range input slot");
    if (d.op == WEFT_DEV_OP_ATTENTION_DECODE_QKV && !in(d.args.d[13], -1, t.num_slots - 1))  // its rope table's slot
      fail(Status::cache, "task tables: an attention task has an out-of-range rope table slot");
    if (d.clip != -1 && (!in(d.clip & 0xff, 0, WEFT_MAX_SYMBOLS - 1) || !in(d.clip >> 8, 0, 1) || d.clip_unit < 1))
      fail(Status::cache, "task tables: a task is masked by a symbol the kernel does not receive");
    // A split task writes its entry of the tile's block and the tile's arrival counter in scratch: a linear split
    // over K a block [parts][rows][cols] of f32, an argmax split over columns [parts] pairs of words for its row,
    // an attention split over timesteps [parts][2 * cols] words for its row (cols = its q heads times head_dim).
    const weft_task_args& a = d.args;
    if (split_task(d)) {
      const SplitFields f = split_fields(d.op);
      const bool linear = d.op == WEFT_DEV_OP_LINEAR, argmax = d.op == WEFT_DEV_OP_ARGMAX;
      const int64_t rows = a.row1 - a.row0, cols = linear ? a.col1 - a.col0 : argmax ? 2 : 2 * (a.col1 - a.col0);
      const int64_t most = linear ? WEFT_MMA_MAX_SPLIT : argmax ? WEFT_ARGMAX_MAX_SPLIT : WEFT_ATTN_MAX_SPLIT;
      const int64_t parts = a.d[f.parts], block = a.d[f.block];
      const bool fits = parts <= most && in(a.d[f.part], 0, parts - 1) && in(rows, 1, linear ? WEFT_MMA_MAX_ROWS : 1) &&
                        in(cols, 1, t.scratch_words) && in(block, 0, t.scratch_words) &&
                        in(parts * rows * cols, 0, t.scratch_words - block) && in(a.d[f.counter], 0, t.scratch_words - 1);
      if (!fits) fail(Status::cache, "task tables: a split task's scratch lies outside the scratch words");
    }
    // Only an op that waits for itself may be handed its waits (the others would run unordered): a part above 0
    // of a split attention tile (task_abi.h, weft_task::wait_count).
    if (d.wait_count < 0 && !(d.op == WEFT_DEV_OP_ATTENTION_DECODE_QKV && split_task(d) && a.d[10] > 0))
      fail(Status::cache, "task tables: a task leaves its waits to an op that does not make them");
  }
  for (const weft_wait& w : t.waits)
    if (!in(w.event, 0, t.num_events - 1)) fail(Status::cache, "task tables: a wait names a missing event");
  for (int32_t e : t.notifies)
    if (!in(e, 0, t.num_events - 1)) fail(Status::cache, "task tables: a notify names a missing event");
  for (size_t q = 0; q + 1 < t.queue_offsets.size(); ++q)
    if (!in(t.queue_offsets[q], 0, t.queue_offsets[q + 1]) || !in(t.queue_offsets[q + 1], 0, h.num_queue_tasks))
      fail(Status::cache, "task tables: queue offsets are not ascending");
  if (t.queue_offsets.front() != 0 || t.queue_offsets.back() != h.num_queue_tasks)
    fail(Status::cache, "task tables: queue offsets do not cover the queue");
  for (int32_t task : t.queue_tasks)
    if (!in(task, 0, h.num_tasks - 1)) fail(Status::cache, "task tables: a queue names a missing task");
  return t;
}

}  // namespace weft
