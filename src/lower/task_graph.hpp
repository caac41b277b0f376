// The lowered graph: every op cut into tile tasks, and the event tensors that order them. A consumer tile waits
// only for the producer tiles it reads (or, when it reads whole row blocks, for one per-row-block summary
// counter). Counters are monotonic across launches: a wait for `count` is satisfied at `count * epoch`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/config.cuh"
#include "device/task_abi.h"
#include "graph/graph.hpp"

namespace weft {

// A rectangle [row0, row1) x [col0, col1) of a tensor's 2-D view (rows = product of all dims but the last).
struct Region {
  int64_t row0 = 0, row1 = 0, col0 = 0, col1 = 0;
  bool empty() const { return row0 >= row1 || col0 >= col1; }
  bool overlaps(const Region& o) const {
    return row0 < o.row1 && o.row0 < row1 && col0 < o.col1 && o.col0 < col1;
  }
};

// The 2-D view of a concrete shape.
struct View2D {
  int64_t rows = 1, cols = 1;
};
View2D view_of(const std::vector<int64_t>& shape);

// How an op's output is cut: row blocks of `row_block` rows and column tiles of `col_tile` columns. A tile whose
// reduction is split (k_parts > 1: LINEAR over K, ARGMAX over its row's columns; task_abi.h) is computed by k_parts
// tasks; each notifies the tile's events, which therefore count k_parts per tile and launch.
struct TileGrid {
  int64_t rows = 1, cols = 1;          // the output's 2-D view
  int64_t row_block = 1, col_tile = 1;
  int64_t k_parts = 1;
  int64_t row_blocks() const { return (rows + row_block - 1) / row_block; }
  int64_t col_tiles() const { return (cols + col_tile - 1) / col_tile; }
  int64_t count() const { return row_blocks() * col_tiles(); }  // tiles
  int64_t tasks() const { return count() * k_parts; }
  Region tile(int64_t rb, int64_t ct) const {
    return Region{rb * row_block, std::min(rows, (rb + 1) * row_block), ct * col_tile, std::min(cols, (ct + 1) * col_tile)};
  }
};

enum class EventKind : int32_t {
  tile,       // one producer tile; reaches 1 per launch
  row_block,  // every tile of one row block of a node; reaches col_tiles per launch
  node,       // every tile of a node; reaches its tile count per launch (ordering without data: reuse, state)
};

struct EventDesc {
  int32_t node = -1;
  EventKind kind = EventKind::tile;
  int64_t row_block = 0, col_tile = 0;  // col_tile unused for row_block events
  uint32_t per_launch = 1;              // increments per launch once every notifier has run
};

struct TaskWait {
  int32_t event = -1;
  uint32_t count = 0;  // satisfied when the counter reaches count * epoch
  // Met on the device by reading a tagged hand-off's words (lower/tagged_handoffs.hpp), not by the counter: the
  // simulator honours it, the device tables leave it out (drop_tagged_waits).
  bool tagged = false;
};

struct Task {
  int32_t node = -1;
  Region tile;
  weft_task_args args{};
  int32_t dev_op = 0;
  int32_t clip = -1;       // weft_task::clip: masking by a symbol's run-time value
  int64_t clip_unit = 0;
  int32_t part = 0;        // which of its tile's TileGrid::k_parts tasks this is
  std::vector<TaskWait> waits;
  // The device op makes its waits itself, only where it has work (weft_task::wait_count < 0): a part above 0 of
  // a split tile whose work the op decides from an operand ready at launch (OpLowering::split_idle_input). Its
  // notify may then come before its waits are met; part 0 of its tile waits for all of them (the simulator checks).
  bool waits_in_op = false;
  std::vector<int32_t> notifies;
  double bytes = 0;  // estimated memory traffic
  double flops = 0;
};

// What one task reads of one operand tensor; `whole` reads every element.
struct ReadSet {
  TensorId tensor = kNoTensor;
  std::vector<Region> regions;
};

// The most scratch words a task graph may use (1 GiB); a cached table asking for more is damage.
inline constexpr int64_t kMaxScratchWords = int64_t{1} << 28;

struct TaskGraph {
  std::vector<Task> tasks;               // in a topological order (node order, then tile order)
  std::vector<EventDesc> events;
  std::vector<TileGrid> grids;           // per node
  std::vector<int32_t> first_task;       // per node: index of its first task; tasks of a node are contiguous
  std::vector<std::vector<int64_t>> shapes;  // concrete shape of every tensor
  std::vector<std::vector<ReadSet>> reads;   // per task: what it reads of produced tensors (for verification)
  // 32-bit words of scratch the tasks use (weft_env::scratch): partial results and arrival counters of split
  // tiles, placed by lowering; zeroed with the event counters.
  int64_t scratch_words = 0;
  // Until finalize_events: per node, its node event and the index of its first row-block and tile events.
  std::vector<int32_t> node_event, row_block_event_base, tile_event_base;
  // fully_waits[x][y]: every task of node x (transitively) waits for every task of node y, so an ordering
  // wait from x on y is redundant.
  std::vector<std::vector<bool>> fully_waits;

  // A wait for every task of `node` (its node event). Valid until finalize_events.
  TaskWait node_done_wait(int32_t node) const;
  // Adds to every task of `node` a wait for all of `on`, unless already implied. Valid until finalize_events.
  void add_ordering_wait(int32_t node, int32_t on);

  std::string event_name(const Graph& g, int32_t event) const;  // "h2 tile (0, 3)" / "h2 row block 0"
  std::string task_name(const Graph& g, int32_t task) const;    // "linear 'h2' tile [0,1)x[64,128)"
};

struct LowerOptions {
  int32_t num_sms = 132;  // tiles are sized so that big ops spread over this many SMs
  // The kernel's dynamic shared memory (WEFT_SMEM_BYTES_BASE or _WIDE, see lower_for_device): how many x rows a
  // tensor-core tile may have.
  int32_t mma_smem_bytes = WEFT_SMEM_BYTES_BASE;
  // The most parts an attention_decode_qkv tile is split into over its timesteps (1: none; op_lowering_table.cpp).
  int32_t attention_split = WEFT_ATTN_MAX_SPLIT;
  // The shared memory the ops get besides the tensor-core tiles' (attention's timesteps per part): the base size,
  // or less with the weight loader's ring (WEFT_SMEM_BYTES_LOADER_OPS, lower_for_weight_loader).
  int32_t ops_smem_bytes = WEFT_SMEM_BYTES_BASE;
  // The fewest parts a plain tensor-core linear splits K into (a power of two, 1..WEFT_MMA_MAX_SPLIT; linear_grid in
  // op_lowering_table.cpp): 1 splits only where x rows fit no tile whole. More parts stage fewer x columns per task
  // (every SM reads the whole of x from L2 at once after the wait) for one more round trip through the partials:
  // slower at every setting measured (docs/perf.md round 51), so only $WEFT_SPLIT_K_PARTS raises it.
  int32_t split_k_parts = 1;
  // attention_decode_qkv tiles of two kv heads where tiles of one outnumber the SMs (attention_pairs in
  // op_lowering_table.cpp): 0 where every position of the cache fits a half's timesteps (attention_pair_timesteps;
  // past them a pair runs its kv heads one by one, 6-9% slower a token than tiles of one, docs/perf.md round 53),
  // 1 whatever the cache's length (a program run only at positions below them: models/device_generator.cpp),
  // -1 never.
  int32_t attention_pairs = 0;
  // The most SMs a producer's grid leaves free for the set-up of its long-set-up consumers' tiles (reserved_sms in
  // lower.cpp); -1: all of them where they take at most half of num_sms, else an eighth of num_sms.
  // $WEFT_RESERVED_SMS sets it, for measuring.
  int32_t reserve_cap = -1;
};

// Cuts every op of `g` into tasks for the concrete symbol values `symbols`, with an event for every tile and
// row block and no notifies yet. Throws weft::Error (Status::unsupported) for an op instance the device library
// cannot run, naming the op.
TaskGraph lower(const Graph& g, const SymbolValues& symbols, const LowerOptions& options);

// lower() for a kernel of compute capability `sm` (x10: 90 for sm_90a): with the base shared memory, or with the
// wide one (WEFT_SMEM_BYTES_WIDE, `wide` set) where the arch has it and it gives some tensor-core op more rows
// per tile — fewer row blocks, each weight streamed fewer times — or fewer x chunks (mma_x_chunks). Where it
// changes neither the base size is kept: its larger L1 holds the task loop's spills.
TaskGraph lower_for_device(const Graph& g, const SymbolValues& symbols, int32_t num_sms, int32_t sm, bool& wide,
                           int32_t attention_split = WEFT_ATTN_MAX_SPLIT, int32_t split_k_parts = 1,
                           int32_t attention_pairs = 0, int32_t reserve_cap = -1);

// The weight loader (WEFT_DEVLIB_LOADER, device/weight_loader.cuh) for a kernel lowered for compute capability
// `sm`: whether it may link the loader's library — sm_90 or later, the CUDA-core library with bf16 one-row tiles
// (neither may_use_tensor_core_tiles nor one_row_tiles_f16), and every GEMV tile's x rows within the ops' smaller
// share of shared memory. lower_for_weight_loader lowers for it (attention split for that share, `reserve_cap` as
// LowerOptions::reserve_cap); the caller checks weight_loader_applies on its result too.
bool weight_loader_applies(const TaskGraph& tg, int32_t sm);
TaskGraph lower_for_weight_loader(const Graph& g, const SymbolValues& symbols, int32_t num_sms,
                                  int32_t attention_split = WEFT_ATTN_MAX_SPLIT, int32_t reserve_cap = -1);

// Timesteps an attention_decode_qkv tile holds whole in the shared-memory path (device attention_smem.cuh) with
// `ops_smem_bytes` for the ops (LowerOptions::ops_smem_bytes): positions 0 .. that - 1 attend from shared memory
// unsplit. 0 where the path takes no tile of this head_dim, q heads per kv head (`group`) and dtype. A cache longer
// than this splits each tile over its timesteps (up to LowerOptions::attention_split parts).
int64_t attention_whole_timesteps(int64_t head_dim, int64_t group, DType dtype, int64_t ops_smem_bytes = WEFT_SMEM_BYTES_BASE);
// The same for each kv head of a tile of two (LowerOptions::attention_pairs): what half of that shared memory holds.
int64_t attention_pair_timesteps(int64_t head_dim, int64_t group, DType dtype, int64_t ops_smem_bytes = WEFT_SMEM_BYTES_BASE);
// Whether `rows` rows of attention_decode_qkv with these heads may take tiles of two kv heads on `sms` SMs: more
// tiles of one than SMs and what the device's pair path takes (an even number of kv heads, 2, 4 or 8 q heads per kv
// head, a 16-bit dtype, head_dim 64 or 128, a pass of a half's warps in half the ops' shared memory). Lowering also
// asks for a rope table operand and LowerOptions::attention_pairs' leave (attention_pairs, op_lowering_table.cpp).
bool attention_may_pair(int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim, DType dtype, int64_t sms,
                        int64_t ops_smem_bytes = WEFT_SMEM_BYTES_BASE);

// After every wait is known (lowering + memory plan): drops events nobody waits on, renumbers, and sets each
// task's notifies (its row-block event and its tile event, where kept).
void finalize_events(TaskGraph& tg);

// Whether a task of `tg` may take the device library's tensor-core tiles (gemv_mma.cuh): a linear,
// rmsnorm_linear or silu_mul_linear tile of bf16/f16, K a multiple of WEFT_MMA_K_MULTIPLE and WEFT_MMA_MIN_ROWS
// rows or more (a superset of what the device takes). A kernel where none may is linked with the library built
// without them (CompileOptions::tensor_cores), whose task loop is smaller: every op is inlined into it, unused
// code included.
bool may_use_tensor_core_tiles(const TaskGraph& tg);

// Whether the library without tensor-core tiles should be the one whose task loop inlines the one-row f16 GEMV
// tiles (CompileOptions::one_row_f16): more of `tg`'s one-row linear, rmsnorm_linear and silu_mul_linear tiles are
// f16 than bf16. The other dtype's tiles then run out of line (~0.6 us more per task).
bool one_row_tiles_f16(const TaskGraph& tg);

// How many x chunks the chunked tensor-core tiles of `tg` stage (weft_mma_chunk_k) with `smem_bytes` of shared
// memory, over all its tasks, each task of a tile split over K counting its tile's parts (the blocks its last part
// adds): 0 when none is chunked or split.
int64_t mma_x_chunks(const TaskGraph& tg, int32_t smem_bytes);

}  // namespace weft
