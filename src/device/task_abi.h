// The contract between the host (lowering, scheduling, launch) and the device (the persistent kernel and the
// device library): the task table the megakernel executes. Included by host C++ and by NVRTC-compiled device
// code, so it uses only built-in types and no headers.
//
// Tensors are referred to by *slot*: an index into the pointer table the kernel receives (bound inputs,
// weights, states and outputs at their caller's addresses, intermediates inside weft's arena). Every tensor
// is seen as a 2-D row-major view [rows, cols] where cols is its last dim and rows the product of the rest.
// A task computes one tile [row0, row1) x [col0, col1) of its op's output in that view.
#ifndef WEFT_DEVICE_TASK_ABI_H
#define WEFT_DEVICE_TASK_ABI_H

#define WEFT_TASK_MAX_INPUTS 6
#define WEFT_TASK_MAX_DIMS 16
// Symbols whose values a kernel receives at run time (weft_symbol_values); later ones are specialized exactly.
#define WEFT_MAX_SYMBOLS 8

// weft dtype codes (equal to the C API's weft_dtype).
#define WEFT_DEV_BF16 0
#define WEFT_DEV_F16 1
#define WEFT_DEV_F32 2
#define WEFT_DEV_I32 3
#define WEFT_DEV_I64 4

// Error codes a device op may record in weft_env::error (first one wins); the host turns them into messages.
#define WEFT_DEV_OK 0u
#define WEFT_DEV_ERR_INDEX 1u     // an embedding id outside [0, V)
#define WEFT_DEV_ERR_POSITION 2u  // an attention position outside [0, S)
#define WEFT_DEV_ERR_DEADLOCK 3u  // the watchdog stopped a wait
#define WEFT_DEV_ERR_BAD_TASK 4u  // a task names an op the kernel was not generated for (error_info: [1]=op)
// error_info[1] of a WEFT_DEV_ERR_DEADLOCK raised at a resident loop's gate: the host did not answer in time
// (error_info[2]: the step whose output waits for the answer).
#define WEFT_DEV_WAIT_HOST 0xfffffffeu
// ... raised by an op warp waiting for the weight loader's ring (WEFT_DEVLIB_LOADER; error_info[2]: the slot, [3]: the
// parity of the phase it waited for).
#define WEFT_DEV_WAIT_LOADER 0xfffffffdu
// ... raised by a task reading a tagged tensor (below) whose words did not reach the step's tag in time (error_info[2]:
// the tensor's slot, [3]: the element).
#define WEFT_DEV_WAIT_TAGGED 0xfffffffcu
// error_info[2] of a WEFT_DEV_ERR_BAD_TASK: a task with tagged operands that the one-row GEMV path did not take.
#define WEFT_DEV_BAD_TAGGED_TILE 2u

// Tagged hand-offs (lower/tagged_handoffs.hpp): an intermediate that only one-row bf16 GEMV tiles produce and read
// is stored as 32-bit words, the bf16 value in the low half and the step's tag (its epoch's low 16 bits) in the high
// half, written without a fence or an event; its readers load the words until every tag is the step's instead of
// polling a counter and then loading the data (one L2 round trip where there were two). A GEMV task's i[3] says
// which of its operands are such words.
#define WEFT_TAGGED_X 1u    // x (in[0]): gate/up for SILU_MUL_LINEAR
#define WEFT_TAGGED_RES 2u  // the residual
#define WEFT_TAGGED_OUT 4u  // the output
#define WEFT_TAGGED_ARG 3   // the index in weft_task_args::i of those bits

// Arguments of one task. The meaning of d[], f[] and i[] is fixed per op and written next to each device
// function in the device library (src/device/ops_*.cuh) and where lowering fills them (src/lower).
struct weft_task_args {
  int out;                        // output slot
  int in[WEFT_TASK_MAX_INPUTS];   // input slots in the op's operand order; -1 for an absent optional operand
  int dtype;                      // dtype of the output (float ops: of every float operand too)
  long long row0, row1, col0, col1;  // the output tile
  long long d[WEFT_TASK_MAX_DIMS];   // op-specific sizes
  float f[4];                        // op-specific float attributes
  int i[4];                          // op-specific integer attributes
};

// One task of the megakernel's table.
struct weft_task {
  int op;            // device op id (weft_dev_op)
  int wait_begin;    // first entry in the wait table
  // Its waits: wait_count entries, which the task loop waits for before the op runs; or, negative, -wait_count
  // entries that the op waits for itself (wait_in_op, sync.cuh) before it touches anything they guard, and only
  // where it has work. Only the parts above 0 of a split ATTENTION_DECODE_QKV tile, whose positions are ready at
  // launch (an idle part then notifies at once); part 0 of the tile waits for all of them (lowering checks it).
  int wait_count;
  int notify_begin;  // first entry in the notify table (event indices)
  int notify_count;
  // Masking (graph/symbol_masking.hpp): -1, or symbol | (axis << 8). The tile is cut to the first
  // value * clip_unit rows (axis 0) or columns (axis 1) of its view, where value is the symbol's value in
  // this run (weft_symbol_values); a tile entirely past them runs nothing but still waits and notifies.
  int clip;
  long long clip_unit;
  weft_task_args args;
};

// The symbols' values of one run, a kernel parameter: a kernel compiled for a bucket serves every value in it.
struct weft_symbol_values {
  long long v[WEFT_MAX_SYMBOLS];
};

// Wait until events[event] >= count * epoch (counters only grow, across launches).
struct weft_wait {
  int event;
  unsigned int count;
};

struct weft_queues;

// What every device op receives besides its arguments.
struct weft_env {
  void* const* slots;     // slot -> device pointer
  unsigned int* error;    // first device error code (WEFT_DEV_ERR_*), 0 if none
  unsigned int* error_info;  // [0] task index, [1..3] op-specific details of the first error
  int task_index;         // index of the running task (for error reports)
  unsigned int tuning;    // WEFT_TUNE_* bits ($WEFT_TUNE): switches for measuring alternatives side by side
  const weft_queues* queues;  // the launch's tables (the task loop's argument), for waits an op makes itself
  unsigned int epoch;         // the running step's epoch (weft_queues::epoch + step)
};

// WEFT_TRACE: 64-bit values the kernel records per queue entry and step: [0] wait start, [1] run start, [2] end
// (global-timer ns), [3] the SM, [4] [5] the SM clock (clock64) at run start and end, [6] the task's start (after
// the barrier that ends the block's previous task: [6]..[0] is the task's set-up and prefetch), [7] its notify issued ([2]..[7]: the release of its events).
#define WEFT_TRACE_RECORD_WORDS 8

// Tuning switches (weft_env::tuning), for A/B measurements; 0 is the default behaviour.
#define WEFT_TUNE_LATE_PREFETCH 1u  // request a task's unguarded reads (prefetch_op) after its wait
#define WEFT_TUNE_SLOW_POLL 2u     // back off up to 2 us between polls of an event (default 256 ns)
#define WEFT_TUNE_FAST_POLL 4u     // back off up to 32 ns
#define WEFT_TUNE_ATTN_BLOCK_PHASES 8u  // attention's shared-memory tiles and split parts attend block-wide (as before)
// Bits 8..11: the weight loader's slots in flight (WEFT_DEV_LOADER, weight_loader.cuh; 0: its default, 2).
#define WEFT_TUNE_LOADER_INFLIGHT_SHIFT 8
// The weight loader's library with its loader idle: the one-row tiles stream by their warps' own rings, on the 7 op
// warps (what the loader's warp costs them, measured apart from what it brings).
#define WEFT_TUNE_LOADER_OFF (1u << 12)
// Test hook: the weight loader copies nothing while the op warps expect its slots (the watchdog's error, the loader's
// exit with nothing in flight).
#define WEFT_TUNE_LOADER_STALL (1u << 13)
// Test hook: tagged outputs carry the previous step's tag, so their readers wait until the watchdog stops them.
#define WEFT_TUNE_TAGGED_STALE (1u << 14)
// Never set: allocation-ticket builds of the device library (WEFT_DEVLIB_TICKET, task_loop.cuh) branch on it to
// stores that must not run.
#define WEFT_TUNE_TICKET_NEVER (1u << 30)

// Multi-step mode: the kernel runs its queues `steps` times in one launch, step s with epoch (epoch + s) and
// the slot table step_slots[s * num_slots ...], so that a few tensors move per step while the rest stay put:
// the feedback input of step s is tokens[s], its feedback output tokens[s + 1] (each step's argmax is the next
// step's input) and its counter input counters[s] (positions). Before step 0, block 0 copies feed_src into
// tokens[0] and fills counters[s][i] = counter_src[i] + s; a grid barrier (all blocks arrive at *barrier)
// precedes every step, so a step starts only when every block has finished the one before (the arena and the
// KV cache are reused across steps). steps == 0: one pass over the launch-parameter slot table.
//
// Resident mode (gate_host non-null): at every boundary between steps the kernel also hands the host the step's
// feedback output (loop_gate.cuh), so that a caller who must see each token (streaming, stopping at an end token,
// its own next tokens) still pays one launch per generation, not one per token. gate_host is host-mapped memory:
// [0] the boundaries whose output the device has published (boundary s: step s - 1's output), [1] the host's answer
// for the last one it took, (s << 2) | WEFT_GATE_*; [WEFT_GATE_HEADER_WORDS ..] the published output [feed_n].
// Strict (gate_lookahead 0): the kernel waits at boundary s for the answer, which may rewrite the output
// (WEFT_GATE_REPLACED) as step s's input; gate_words (device memory): [0] gate releases, monotonic like the barrier
// (boundary s of this launch is release gate_base + s), [1] 1 when the host asked to stop. Look-ahead
// (gate_lookahead 1): the kernel runs step s while the host looks at step s - 1's output, and waits for that answer
// only before the barrier that ends step s (block 0, which then sets gate_words[1]); a stop takes effect one step
// later and the output is not rewritten.
#define WEFT_GATE_HEADER_WORDS 4  // gate_host's words before the published output ([2], [3] unused)
#define WEFT_GATE_REPLACED 1u     // the host rewrote the published output: it is the next step's input
#define WEFT_GATE_STOP 2u         // the host asked to stop: the kernel ends before the next step
struct weft_loop {
  void* const* step_slots;  // [steps][num_slots] device pointers
  int steps;
  int feed_n;               // elements of the feedback and counter tensors (int32 each)
  const int* feed_src;      // the caller's first input tokens [feed_n]
  int* tokens;              // [steps + 1][feed_n]
  const int* counter_src;   // the caller's first positions [feed_n]
  int* counters;            // [steps][feed_n]
  unsigned int* barrier;    // grid barrier counter (monotonic, like the events)
  unsigned int barrier_base;  // barriers completed by earlier launches
  unsigned int gate_base;     // resident mode: gate releases completed by earlier launches
  unsigned int* gate_host;    // resident mode: host-mapped words (above); null: the steps run on by themselves
  unsigned int* gate_words;   // resident mode: [0] releases, [1] stop
  unsigned int gate_lookahead;  // resident mode: 1 look-ahead, 0 strict
  unsigned int pad_;
};

// What the generated kernel hands the device library's task loop (weft_dev_run_queues), once per launch: its
// launch parameters, the slot table and the loop and symbol structs by address (kernel parameter space).
struct weft_queues {
  const weft_task* tasks;
  const weft_wait* waits;
  const int* notifies;
  const int* queue_offsets;  // [gridDim.x + 1]: queue b is queue_tasks[queue_offsets[b] .. queue_offsets[b + 1])
  const int* queue_tasks;
  unsigned int* events;
  void* const* slots;  // [num_slots]
  int num_slots;
  unsigned int epoch;
  long long timeout_cycles;  // per wait, in SM clock cycles; <= 0 waits forever
  unsigned int* error;
  unsigned int* error_info;
  const weft_loop* loop;
  unsigned long long* trace;  // WEFT_TRACE_RECORD_WORDS per queue entry and step, or null
  const weft_symbol_values* symbols;
  unsigned int tuning;
};

// Device op ids: one per op of the op table (lowering maps op names to them). Per op: operands in in[], then what d/f/i hold. "R x C" is the
// output's 2-D view; a tile is [row0, row1) x [col0, col1) of it. Unless said otherwise a tile may be any
// sub-rectangle. Float math in f32 like the CPU reference (src/graph/ops/*.cpp), results rounded to dtype.
//  EMBEDDING        in: table [V, D], ids [R]. d0=V, d1=D. i0=ids dtype. Bad id: zeros + WEFT_DEV_ERR_INDEX
//                   (error_info: [1]=row, [2]=low 32 bits of the id).
//  RMSNORM          in: x [R, D], weight [D]. d0=D. f0=eps. Tiles span whole rows (col0=0, col1=D).
//  HEAD_RMSNORM     in: x [R, C], weight [hd]. d0=C, d1=hd. f0=eps. col0/col1 are multiples of hd.
//  LAYERNORM        in: x [R, D], weight [D], bias [D] or -1. d0=D. f0=eps. Whole rows.
//  LINEAR           in: x [R, K], weight [N, K], bias [N] or -1, residual [R, N] or -1. d0=K, d1=N.
//                   Split over K (d2 = P >= 2 parts, a power of two; 0 otherwise): P tasks share one output tile,
//                   task d3 = p taking K columns [p K / P, (p + 1) K / P). Each writes its f32 sums to the tile's
//                   partial block (d4: [P][rows][cols] f32) and adds 1 to the tile's arrival counter (d5, u32); the
//                   task that brings it to a multiple of P adds the P blocks in order, then bias and residual,
//                   and stores the tile. Its events count P per launch. Both lie in the launch's scratch words:
//                   lowering writes word offsets there, the runtime replaces them with device addresses when it
//                   uploads the table (relocate_scratch).
//  MATMUL           in: a [B, M, K], b [B, K, N] or [K, N]. R = B*M, C = N. d0=M, d1=K, d2=N,
//                   d3=1 if b is batched else 0.
//  ADD, MUL         in: a, b broadcast to the output, all seen as 4-D (leading 1s): d0..d3 = output dims,
//                   d4..d7 = a's element strides per output dim (0 where broadcast), d8..d11 = b's. d3 is the
//                   output's last dim (the view's C); only leading dims are merged to reach rank 4.
//  SILU             in: x. Elementwise.
//  GELU             in: x. i0=1 for the tanh form, 0 for erf.
//  SILU_MUL         in: gate, up or -1. d0=F (= C). Without up, gate is [R, 2F]: gate cols [0,F), up [F,2F).
//  ROPE             in: x [R, C], positions [R]. d0=C, d1=hd, d2=original_max_position. f0=theta, f1=factor,
//                   f2=low_freq_factor, f3=high_freq_factor. i0=style (0 half, 1 interleaved), i1=scaling
//                   (0 none, 1 linear, 2 llama3), i2=positions dtype. col0/col1 are multiples of hd.
//  ATTENTION_DECODE in: q [B, Hq*hd], k_new [B, Hkv*hd], v_new [B, Hkv*hd], k_cache [B, S, Hkv, hd],
//                   v_cache (same), positions [B]. d0=Hq, d1=Hkv, d2=hd, d3=S. f0=scale (already resolved,
//                   never 0). i0=positions dtype. A tile is rows [row0,row1) x the q heads of whole kv heads
//                   (col0, col1 multiples of (Hq/Hkv)*hd); it writes k_new/v_new of those kv heads into the
//                   caches at positions[b], then attends over [0, positions[b]]. Bad position: zeros +
//                   WEFT_DEV_ERR_POSITION (error_info: [1]=row, [2]=position).
//  SOFTMAX          in: x [R, C]. Whole rows.
//  ARGMAX           in: x [R, N]. Output: one index per row of x. Unlike other ops, [row0, row1) are rows of x
//                   (= flat output elements), col0/col1 unused. dtype is x's (not the output's). d0=N.
//                   i0=output dtype. First max; NaN is max.
//                   Split over columns (d2 = P >= 2 parts, a power of two <= WEFT_ARGMAX_MAX_SPLIT; 0 otherwise; the
//                   tile is one row, N < 2^31): P tasks share it, task d3 = p scanning columns [d6, d7). Each writes
//                   its best (order key, index) to entry p of the tile's block (d4: P pairs of 32-bit words) and
//                   adds 1 to the tile's arrival counter (d5, u32); the task that brings it to a multiple of P
//                   stores the best of the P entries. Scratch as for LINEAR's split.
//  REDUCE           in: x seen as [outer, A, inner]; output [outer, inner] (view R x C of the output's own
//                   shape, any keepdim). d0=outer, d1=A, d2=inner. i0=kind (0 sum, 1 max, 2 mean). A tile
//                   covers output elements [row0*C+col0 ...] as usual; whole rows.
//  CAST             in: x. i0=input dtype; output dtype in dtype. float->int as CUDA cvt.rzi (saturating).
//  RESHAPE          in: x. Copies elements in order (same count). Tile over the output view.
//  SLICE            in: x seen as [outer, A, inner]. d0=outer, d1=A, d2=inner, d3=start, d4=output axis length.
//  RMSNORM_LINEAR   in: x [R, K], norm weight [K], weight [N, K], bias [N] or -1, residual [R, N] or -1. d0=K,
//                   d1=N. f0=eps. linear(rmsnorm(x)), the normalized x rounded to dtype. Streamed GEMV tiles only.
//  SILU_MUL_LINEAR  in: gate_up [R, 2K], weight [N, K], bias or -1, residual or -1. d0=K, d1=N.
//                   linear(silu(gate) * up), the product rounded to dtype. Streamed GEMV tiles only.
//  ATTENTION_DECODE_QKV  in: qkv [B, (Hq + 2 Hkv) * hd], k_cache, v_cache, positions, q_norm weight or -1,
//                   k_norm weight or -1. d0=Hq, d1=Hkv, d2=hd, d3=S, d4=original_max_position, d5..d8 = bits of
//                   the doubles theta, factor, low_freq_factor, high_freq_factor. f0=scale, f1=eps. i0=positions
//                   dtype, i1=rope scaling, i2=rope style. d13 = the slot of its seventh operand, a rope table
//                   [B, hd] f32 (ROPE_TABLE's output: the rotation's cos | sin, read after the wait), or -1 (the
//                   task computes them); in d[], not in[], so that every task's descriptor stays 256 bytes.
//                   Tile: one row x one kv head's q heads.
//                   Split over the timesteps (split-KV; d9 = P >= 2 parts, a power of two <= WEFT_ATTN_MAX_SPLIT;
//                   0 otherwise; bf16 / f16, hd 64 or 128): P tasks share the tile, task d10 = p attending over
//                   timesteps [p n, min((p + 1) n, pos + 1)), n = ceil((pos + 1) / 2^k) for the 2^k <= P parts the
//                   device picks per step (attention_split.cuh: those past pos + 1 are empty); the part holding pos
//                   writes the new k / v row into the caches. Each non-empty part writes its entry of the tile's
//                   block (d11: P entries of 2 group hd f32 words: its normalized output [group][hd], then
//                   its max [group] and exp-sum [group]) and every part adds 1 to the tile's arrival counter
//                   (d12, u32); the part that brings it to a multiple of P merges the entries and stores the
//                   tile. Where n timesteps do not fit the shared-memory path (or the position is
//                   bad), part 0 runs the whole tile unsplit and the others nothing. Events count P per launch.
//                   Scratch as for LINEAR's split.
//  LINEAR_SILU_MUL  in: x [R, K], weight [2F, K] (gate rows [0, F), up rows [F, 2F)), norm weight [K] or -1.
//                   d0=K, d1=F (= C). f0=eps. silu(x · gateᵀ) * (x · upᵀ), each product rounded to dtype first,
//                   as linear then silu_mul compute it; with a norm weight x is first RMS-normalized and rounded,
//                   as rmsnorm computes it.
//  ROPE_TABLE       in: positions [R]. Output [R, hd] f32: cos of pair i at the row's position in column i, its sin
//                   in column hd/2 + i, computed as ROPE computes them (in double, rounded to f32). Whole rows.
//                   d2=hd, d4..d8 and i0, i1 as ATTENTION_DECODE_QKV's.
//  CONCAT           in: up to 6 inputs, each [outer, A_j, inner]. d0=outer, d1=inner, d2..d7 = A_j (0 unused),
//                   i0=number of inputs.
enum weft_dev_op {
  WEFT_DEV_OP_EMBEDDING = 0,
  WEFT_DEV_OP_RMSNORM,
  WEFT_DEV_OP_HEAD_RMSNORM,
  WEFT_DEV_OP_LAYERNORM,
  WEFT_DEV_OP_LINEAR,
  WEFT_DEV_OP_MATMUL,
  WEFT_DEV_OP_ADD,
  WEFT_DEV_OP_MUL,
  WEFT_DEV_OP_SILU,
  WEFT_DEV_OP_GELU,
  WEFT_DEV_OP_SILU_MUL,
  WEFT_DEV_OP_ROPE,
  WEFT_DEV_OP_ATTENTION_DECODE,
  WEFT_DEV_OP_SOFTMAX,
  WEFT_DEV_OP_ARGMAX,
  WEFT_DEV_OP_REDUCE,
  WEFT_DEV_OP_CAST,
  WEFT_DEV_OP_RESHAPE,
  WEFT_DEV_OP_SLICE,
  WEFT_DEV_OP_CONCAT,
  WEFT_DEV_OP_RMSNORM_LINEAR,
  WEFT_DEV_OP_SILU_MUL_LINEAR,
  WEFT_DEV_OP_ATTENTION_DECODE_QKV,
  WEFT_DEV_OP_LINEAR_SILU_MUL,
  WEFT_DEV_OP_ROPE_TABLE,
  WEFT_DEV_OP_COUNT
};

#endif  // WEFT_DEVICE_TASK_ABI_H
