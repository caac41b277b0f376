// The lowering rule of every op. Tile sizes aim to spread a large op over all SMs while keeping each task big
// enough to amortize its event wait; reads are exact where the access pattern is simple and whole-tensor
// (conservative, never wrong) where it is not.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "device/config.cuh"
#include "lower/op_lowering.hpp"

namespace weft {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t m) { return ceil_div(a, m) * m; }

// x rows up to which a linear is a decode GEMV (the device's streamed path takes up to 8).
constexpr int64_t kDecodeRows = 8;
// The streamed GEMV keeps a 64 KiB ring and 64 bytes of scratch in shared memory (gemv_stream.cuh); x rows of
// fused tiles get the rest.
static_assert(kFusedLinearMaxRowBytes <= WEFT_SMEM_BYTES - 64 * 1024 - 64, "fused linear x rows must fit beside the ring");

Region whole(const View2D& v) { return Region{0, v.rows, 0, v.cols}; }

// ---- grids ----

// Whole rows per task, enough row blocks to give every SM work.
TileGrid rowwise_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  TileGrid g{v.rows, v.cols, 1, v.cols};
  g.row_block = std::max<int64_t>(1, ceil_div(v.rows, c.options().num_sms));
  return g;
}

// Column tiles of at least `min_cols` (a multiple of `multiple`), about two per SM, rows in blocks of <= max_rows.
TileGrid column_grid(const LowerCtx& c, int64_t min_cols, int64_t multiple, int64_t max_rows) {
  const View2D v = c.out_view();
  TileGrid g{v.rows, v.cols, std::min(v.rows, max_rows), v.cols};
  const int64_t row_blocks = ceil_div(v.rows, g.row_block);
  const int64_t wanted = std::max<int64_t>(1, 2 * c.options().num_sms / row_blocks);
  g.col_tile = std::min(v.cols, round_up(std::max(min_cols, ceil_div(v.cols, wanted)), multiple));
  return g;
}

TileGrid elementwise_grid(const LowerCtx& c) { return column_grid(c, 512, 64, 16); }

// Tiles of whole heads (multiples of head_dim columns).
TileGrid head_grid(const LowerCtx& c, int64_t head_dim) {
  const View2D v = c.out_view();
  const int64_t heads = v.cols / head_dim;
  const int64_t per_task = std::clamp<int64_t>(ceil_div(v.rows * heads, 2 * c.options().num_sms), 1, heads);
  return TileGrid{v.rows, v.cols, 1, per_task * head_dim};
}

TileGrid single_task_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  return TileGrid{v.rows, v.cols, v.rows, v.cols};
}

// ---- reads ----

std::vector<Region> same_tile(const LowerCtx&, size_t, const Region& t) { return {t}; }
std::vector<Region> whole_input(const LowerCtx& c, size_t k, const Region&) { return {whole(c.in_view(k))}; }
std::vector<Region> same_rows(const LowerCtx& c, size_t k, const Region& t) {
  return {Region{t.row0, t.row1, 0, c.in_view(k).cols}};
}
// Operand 0 by rows, the rest (weights, broadcast operands) whole.
std::vector<Region> rows_then_whole(const LowerCtx& c, size_t k, const Region& t) {
  return k == 0 ? same_rows(c, k, t) : whole_input(c, k, t);
}
// An operand with one element per output row (ids, positions): the flattened range of the tile's rows.
std::vector<Region> per_row(const LowerCtx& c, size_t k, const Region& t) {
  return flat_range_regions(c.in_view(k), t.row0, t.row1);
}

// ---- per-op rules ----

TileGrid embedding_grid(const LowerCtx& c) { return column_grid(c, 256, 64, 16); }
std::vector<Region> embedding_reads(const LowerCtx& c, size_t k, const Region& t) {
  return k == 1 ? per_row(c, k, t) : std::vector<Region>{};
}
void embedding_args(const LowerCtx& c, weft_task_args& a) {
  a.d[0] = c.in_shape(0)[0];
  a.d[1] = c.in_shape(0)[1];
  a.i[0] = static_cast<int>(c.in_dtype(1));
}

void norm_args(const LowerCtx& c, weft_task_args& a) {
  a.d[0] = c.out_view().cols;
  a.f[0] = static_cast<float>(c.attr_num("eps"));
}

TileGrid head_rmsnorm_grid(const LowerCtx& c) { return head_grid(c, c.attr_int("head_dim")); }
std::vector<Region> head_rmsnorm_reads(const LowerCtx& c, size_t k, const Region& t) {
  return k == 0 ? same_tile(c, k, t) : std::vector<Region>{};
}
void head_rmsnorm_args(const LowerCtx& c, weft_task_args& a) {
  norm_args(c, a);
  a.d[1] = c.attr_int("head_dim");
}

// Row blocks a tensor-core streamed tile allows (gemv_mma.cuh): bf16/f16 weights with K a multiple of the
// stage, rows in blocks of at most WEFT_MMA_MAX_ROWS that fit beside the ring. 0 when it does not apply.
int64_t mma_row_block(const LowerCtx& c, int64_t rows, int64_t k, int64_t esize, int64_t max_blocks) {
  if (esize != 2 || k <= 0 || k % WEFT_MMA_K_MULTIPLE != 0 || rows < WEFT_MMA_MIN_ROWS) return 0;
  const int64_t most =
      std::min<int64_t>(WEFT_MMA_MAX_ROWS, WEFT_MMA_ROWS_FIT_IN(int64_t{c.options().mma_smem_bytes}, k, esize));
  if (most < WEFT_MMA_MIN_ROWS) return 0;
  const int64_t blocks = ceil_div(rows, most);
  if (blocks > max_blocks) return 0;
  const int64_t block = ceil_div(rows, blocks);  // even blocks: none left with a single row
  return block >= WEFT_MMA_MIN_ROWS ? block : 0;
}

// The decode grid: tiles of `row_block` x rows and whole weight rows, one column tile per SM, so every block
// streams its share of the weights in one go (each extra tile per block costs a pipeline fill).
TileGrid decode_linear_grid(const LowerCtx& c, int64_t row_block) {
  const View2D v = c.out_view();
  return TileGrid{v.rows, v.cols, row_block, std::max<int64_t>(8, ceil_div(v.cols, c.spread_sms()))};
}

// Decode-sized x (a tensor-core tile, up to 4 row blocks of them, or a few rows): the decode grid. Larger x: tiles
// for the GEMM path. Tensor-core row blocks come first even for a few rows: 8 rows of K 8192 fit only the wide
// shared memory, and a grid that depends on it is what makes lower_for_device pick it (at the base size the
// device would stream such a tile on CUDA cores: an unfused Llama-1B down projection at batch 8 took 33 us per
// tile instead of ~11). Rows that fit whole only in several row blocks may take one block that stages x in K
// chunks instead (weft_mma_chunk_k): each row block streams the whole weight again, x's bytes (from L2) are the
// same either way, and each chunk boundary costs ~1.7 us (Llama-1B's down projection at batch 32, 4 row blocks ->
// 4 chunks: 69 -> 50 us per layer, H200). Chunked where that saves at least kChunkBoundaryBytes of weight stream
// per boundary, and wherever the rows fit in no more than 4 row blocks.
// Before either: rows that fit no tile whole split K instead where they can (weft_mma_split_parts): every task
// stages its x columns once and streams its share of the weight once, where a chunked tile stages all of x in
// pieces (Llama-1B's down projection at batch 32: ~7.5 us per chunk, docs/perf.md round 16) and row blocks stream
// the weight again per block. The tiles get P times the columns, so that the grid's tasks still fill the SMs once.
constexpr int64_t kChunkBoundaryBytes = 128 * 1024;  // ~4 us at a tile's ~32 GB/s: twice the boundary's cost
// The parts a 16-bit plain linear of `rows` x rows splits K into: weft_mma_split_parts (0: no split fits, 1: x fits
// whole), raised (`raise`) to LowerOptions::split_k_parts where a power of two that large still gives parts of a
// whole number of stages (the device takes any such count, linear_split.cuh).
int64_t split_k_parts(const LowerCtx& c, int64_t k, int64_t rows, bool raise) {
  int64_t parts = weft_mma_split_parts(c.options().mma_smem_bytes, k, rows, 2);
  if (parts <= 0 || !raise) return parts;
  while (parts < c.options().split_k_parts && parts * 2 <= WEFT_MMA_MAX_SPLIT && k % (parts * 2) == 0 &&
         (k / (parts * 2)) % WEFT_MMA_K_MULTIPLE == 0)
    parts *= 2;
  return parts;
}
TileGrid linear_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  const int64_t k = c.in_shape(1)[1], esize = static_cast<int64_t>(dtype_size(c.in_dtype(1)));
  const int64_t mma = mma_row_block(c, v.rows, k, esize, 4);
  // A raised split (LowerOptions::split_k_parts) only where a task's x is at least a quarter of its weight stream
  // (not the logits: one unsplit task streams ~30x its x).
  const bool raise = c.options().split_k_parts > 1 && 4 * v.rows >= decode_linear_grid(c, v.rows).col_tile;
  const int64_t parts = esize == 2 ? split_k_parts(c, k, v.rows, raise) : 0;
  if (parts > 1 && (mma != v.rows || raise)) {
    const int64_t per_task = ceil_div(v.cols * parts, c.spread_sms());
    TileGrid grid{v.rows, v.cols, v.rows, std::max<int64_t>(8, ceil_div(per_task, 8) * 8)};
    grid.k_parts = parts;
    return grid;
  }
  if (mma != v.rows && esize == 2) {
    const TileGrid one_block = decode_linear_grid(c, v.rows);
    const int64_t kc = weft_mma_chunk_k(c.options().mma_smem_bytes, k, v.rows, one_block.col_tile, esize);
    const int64_t saved = mma > 0 ? (ceil_div(v.rows, mma) - 1) * one_block.col_tile * k * esize : -1;
    if (kc > 0 && (saved < 0 || saved >= (k / kc - 1) * kChunkBoundaryBytes)) return one_block;
  }
  if (mma > 0) return decode_linear_grid(c, mma);
  if (v.rows <= kDecodeRows) return decode_linear_grid(c, v.rows);
  return column_grid(c, 8, 8, 64);
}
std::vector<Region> linear_reads(const LowerCtx& c, size_t k, const Region& t) {
  if (k == 0) return same_rows(c, k, t);
  if (k == 3) return {t};  // residual: exactly the tile
  return {};               // weight, bias
}
void linear_args(const LowerCtx& c, weft_task_args& a) {
  a.d[0] = c.in_shape(1)[1];
  a.d[1] = c.in_shape(1)[0];
}
void linear_split_args(weft_task_args& a, int64_t parts, int64_t part, int64_t partial_word, int64_t counter_word) {
  a.d[2] = parts;
  a.d[3] = part;
  a.d[4] = partial_word;
  a.d[5] = counter_word;
}

// rmsnorm_linear / silu_mul_linear: the linear's decode grid, with as many x rows per tile as fit beside the
// streamed GEMV's ring (every tile must take a streamed path; larger batches get more row blocks): tensor-core
// tiles where they apply, else up to kDecodeRows rows of the CUDA-core stream.
int64_t fused_weight_operand(const LowerCtx& c) { return c.node().op->name == std::string_view("rmsnorm_linear") ? 2 : 1; }
TileGrid fused_linear_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  const size_t w = static_cast<size_t>(fused_weight_operand(c));
  const int64_t k = c.in_shape(w)[1], esize = static_cast<int64_t>(dtype_size(c.in_dtype(w)));
  const int64_t mma = mma_row_block(c, v.rows, k, esize, std::numeric_limits<int64_t>::max());
  if (mma > 0) return decode_linear_grid(c, mma);
  const int64_t rows = std::clamp<int64_t>(kFusedLinearMaxRowBytes / (k * esize), 1, kDecodeRows);
  return decode_linear_grid(c, std::min(v.rows, rows));
}
std::vector<Region> fused_linear_reads(const LowerCtx& c, size_t k, const Region& t) {
  if (k == 0) return same_rows(c, k, t);
  if (k == static_cast<size_t>(fused_weight_operand(c)) + 2) return {t};  // residual: exactly the tile
  return {};  // norm weight, weight, bias
}
void fused_linear_args(const LowerCtx& c, weft_task_args& a) {
  const size_t w = static_cast<size_t>(fused_weight_operand(c));
  a.d[0] = c.in_shape(w)[1];
  a.d[1] = c.in_shape(w)[0];
  if (w == 2) a.f[0] = static_cast<float>(c.attr_num("eps"));
}

// linear_silu_mul: the decode grid over its F output columns (each tile streams twice its columns' weight rows: the
// gate's and the up's), in the fewest row blocks whose tensor-core tiles keep x and the tile's gate and up sums in
// shared memory (weft_mma_swiglu_fits). Other tiles (f32, K not a multiple of the stage, a single row) take the
// device's warp-per-column path, kDecodeRows rows at a time.
TileGrid linear_silu_mul_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  const int64_t k = c.in_shape(1)[1], esize = static_cast<int64_t>(dtype_size(c.in_dtype(1)));
  const TileGrid general = decode_linear_grid(c, std::min(v.rows, kDecodeRows));
  if (esize != 2 || k <= 0 || k % WEFT_MMA_K_MULTIPLE != 0 || v.rows < WEFT_MMA_MIN_ROWS) return general;
  for (int64_t blocks = ceil_div(v.rows, WEFT_MMA_MAX_ROWS);; ++blocks) {
    const int64_t block = ceil_div(v.rows, blocks);  // even blocks: none left with a single row
    if (block < WEFT_MMA_MIN_ROWS) return general;
    if (weft_mma_swiglu_fits(c.options().mma_smem_bytes, k, block, general.col_tile, esize))
      return decode_linear_grid(c, block);
  }
}
std::vector<Region> linear_silu_mul_reads(const LowerCtx& c, size_t k, const Region& t) {
  return k == 0 ? same_rows(c, k, t) : std::vector<Region>{};  // the weight and norm weight: not written by any op
}
void linear_silu_mul_args(const LowerCtx& c, weft_task_args& a) {
  a.d[0] = c.in_shape(1)[1];
  a.d[1] = c.out_view().cols;
  a.f[0] = static_cast<float>(c.attr_num("eps"));  // used where in[2], the norm weight, is present
}

TileGrid matmul_grid(const LowerCtx& c) { return column_grid(c, 8, 8, 64); }
void matmul_args(const LowerCtx& c, weft_task_args& a) {
  const auto& as = c.in_shape(0);
  const auto& bs = c.in_shape(1);
  a.d[0] = as[as.size() - 2];
  a.d[1] = as.back();
  a.d[2] = bs.back();
  a.d[3] = bs.size() > 2 ? 1 : 0;
}

// add / mul: operands equal to the output are read tile by tile; broadcast ones whole.
std::vector<Region> broadcast_reads(const LowerCtx& c, size_t k, const Region& t) {
  return c.in_shape(k) == c.out_shape() ? std::vector<Region>{t} : whole_input(c, k, t);
}
void broadcast_args(const LowerCtx& c, weft_task_args& a) {
  const auto& out = c.out_shape();
  // Merge neighbouring dims while each operand is either full along both or broadcast along both: its
  // strides stay expressible, and most shapes end up with rank <= 4 as the device wants.
  const size_t r = out.size();
  auto in_dim = [&](size_t k, size_t d) -> int64_t {  // operand k's size along output dim d (1 if absent)
    const auto& s = c.in_shape(k);
    return d + s.size() >= r ? s[d + s.size() - r] : 1;
  };
  std::vector<std::array<int64_t, 3>> dims;  // (out, a, b) sizes per kept dim
  for (size_t d = 0; d < r; ++d) {
    const std::array<int64_t, 3> cur{out[d], in_dim(0, d), in_dim(1, d)};
    // The last dim is never merged: the device takes d3 as the view's column count.
    if (!dims.empty() && d + 1 < r) {
      auto& prev = dims.back();
      auto same_kind = [&](size_t k) { return (prev[k] == prev[0]) == (cur[k] == cur[0]); };
      if (cur[0] == 1 || prev[0] == 1 || (same_kind(1) && same_kind(2))) {
        prev = {prev[0] * cur[0], prev[1] * cur[1], prev[2] * cur[2]};
        continue;
      }
    }
    dims.push_back(cur);
  }
  if (dims.size() > 4) c.unsupported("its broadcast pattern needs more than 4 dims on the device");
  while (dims.size() < 4) dims.insert(dims.begin(), {1, 1, 1});
  for (size_t operand = 0; operand < 2; ++operand) {
    int64_t stride = 1;
    for (size_t d = 4; d-- > 0;) {
      const int64_t size = dims[d][operand + 1];
      a.d[4 + 4 * operand + d] = size == 1 ? 0 : stride;
      stride *= size;
    }
  }
  for (size_t d = 0; d < 4; ++d) a.d[d] = dims[d][0];
}

void no_args(const LowerCtx&, weft_task_args&) {}
void gelu_args(const LowerCtx& c, weft_task_args& a) { a.i[0] = c.attr_str("approximate") == "tanh" ? 1 : 0; }

std::vector<Region> silu_mul_reads(const LowerCtx& c, size_t k, const Region& t) {
  if (c.has(1)) return {t};
  const int64_t f = c.out_view().cols;
  (void)k;
  return {t, Region{t.row0, t.row1, t.col0 + f, t.col1 + f}};
}
void silu_mul_args(const LowerCtx& c, weft_task_args& a) { a.d[0] = c.out_view().cols; }

TileGrid rope_grid(const LowerCtx& c) { return head_grid(c, c.attr_int("head_dim")); }
std::vector<Region> rope_reads(const LowerCtx& c, size_t k, const Region& t) {
  return k == 0 ? same_tile(c, k, t) : per_row(c, k, t);
}
void rope_args(const LowerCtx& c, weft_task_args& a) {
  const std::string style = c.attr_str("style"), scaling = c.attr_str("scaling");
  a.d[0] = c.out_view().cols;
  a.d[1] = c.attr_int("head_dim");
  a.d[2] = c.attr_int("original_max_position");
  a.f[0] = static_cast<float>(c.attr_num("theta"));
  a.f[1] = static_cast<float>(c.attr_num("factor"));
  a.f[2] = static_cast<float>(c.attr_num("low_freq_factor"));
  a.f[3] = static_cast<float>(c.attr_num("high_freq_factor"));
  a.i[0] = style == "interleaved" ? 1 : 0;
  a.i[1] = scaling == "linear" ? 1 : scaling == "llama3" ? 2 : 0;
  a.i[2] = static_cast<int>(c.in_dtype(1));
}

// One task per (row, kv head): it owns that kv head's cache slot, so no two tasks write the same slot.
TileGrid attention_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  const int64_t group = c.attr_int("num_q_heads") / c.attr_int("num_kv_heads");
  return TileGrid{v.rows, v.cols, 1, group * c.attr_int("head_dim")};
}
std::vector<Region> attention_reads(const LowerCtx& c, size_t k, const Region& t) {
  const int64_t group = c.attr_int("num_q_heads") / c.attr_int("num_kv_heads");
  switch (k) {
    case 0: return {t};
    case 1:
    case 2: return {Region{t.row0, t.row1, t.col0 / group, t.col1 / group}};  // the same kv heads: cols / group
    case 5: return per_row(c, k, t);
    default: return {};  // the caches: written by this op itself
  }
}
// What attention_decode and attention_decode_qkv lay out alike: d0=Hq, d1=Hkv, d2=hd, d3=S (the k cache
// operand's dim 1), f0=scale, i0=positions dtype.
void attention_common_args(const LowerCtx& c, weft_task_args& a, size_t k_cache, size_t positions) {
  const int64_t hd = c.attr_int("head_dim");
  if (hd > WEFT_ATTN_MAX_HEAD_DIM)
    c.unsupported("head_dim " + std::to_string(hd) + " is above the device limit of " + std::to_string(WEFT_ATTN_MAX_HEAD_DIM));
  a.d[0] = c.attr_int("num_q_heads");
  a.d[1] = c.attr_int("num_kv_heads");
  a.d[2] = hd;
  a.d[3] = c.in_shape(k_cache)[1];
  const double scale = c.attr_num("scale");
  a.f[0] = static_cast<float>(scale == 0 ? 1.0 / std::sqrt(static_cast<double>(hd)) : scale);
  a.i[0] = static_cast<int>(c.in_dtype(positions));
}
void attention_args(const LowerCtx& c, weft_task_args& a) { attention_common_args(c, a, 3, 5); }

// The rope attributes as attention_decode_qkv and rope_table hold them: d4=original_max_position, d5..d8 the bits of
// the doubles theta, factor, low_freq_factor, high_freq_factor (the device computes in double, as the reference),
// i1=scaling.
void rope_double_args(const LowerCtx& c, weft_task_args& a) {
  a.d[4] = c.attr_int("original_max_position");
  const double bits[4] = {c.attr_num("theta"), c.attr_num("factor"), c.attr_num("low_freq_factor"), c.attr_num("high_freq_factor")};
  std::memcpy(&a.d[5], bits, sizeof bits);
  const std::string scaling = c.attr_str("scaling");
  a.i[1] = scaling == "linear" ? 1 : scaling == "llama3" ? 2 : 0;
}

// attention_decode_qkv: attention_decode's tiles (or pairs of them, attention_pairs); a task reads its q heads, k
// heads and v heads of qkv.
std::vector<Region> attention_qkv_reads(const LowerCtx& c, size_t k, const Region& t) {
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  const int64_t group = hq / hkv, kv0 = t.col0 / (group * hd), kv1 = t.col1 / (group * hd);
  switch (k) {
    case 0:
      return {Region{t.row0, t.row1, t.col0, t.col1}, Region{t.row0, t.row1, (hq + kv0) * hd, (hq + kv1) * hd},
              Region{t.row0, t.row1, (hq + hkv + kv0) * hd, (hq + hkv + kv1) * hd}};
    case 3: return per_row(c, k, t);
    case 4:
    case 5: return {Region{0, 1, 0, hd}};
    case 6: return same_rows(c, k, t);  // the rope table's rows
    default: return {};  // the caches: written by this op itself
  }
}
// attention_decode_qkv split over its timesteps (split-KV, task_abi.h). A layer's attention is one task per kv head,
// whose shared-memory path holds a few hundred timesteps (attn_smem_plan); a longer cache went to the general path,
// which walks it in chunks from memory. Split into P parts, a tile's timesteps go to as many parts as keep ~64 each,
// and at least as many as fit that path (the device decides per step, attn_split_part): P at most
// WEFT_ATTN_MAX_SPLIT, the tiles times P within the SMs. Each part costs about a whole short tile's time
// (docs/perf.md round 24), so a cache that fits unsplit is not split.
int64_t attention_parts(const LowerCtx& c, int64_t tiles) {
  const int64_t hd = c.attr_int("head_dim"), group = c.attr_int("num_q_heads") / c.attr_int("num_kv_heads");
  const int64_t s_dim = c.in_shape(1)[1];
  // Timesteps the path holds in the smaller shared memory (a kernel may get the wider one, then fewer parts work).
  const int64_t cap = attention_whole_timesteps(hd, group, c.out_dtype(), c.options().ops_smem_bytes);
  if (cap == 0) return 1;
  const int64_t most = std::min<int64_t>(c.options().attention_split, WEFT_ATTN_MAX_SPLIT);
  int64_t p = 1;
  while (ceil_div(s_dim, p) > cap && p * 2 <= most && tiles * p * 2 <= c.spread_sms()) p *= 2;
  return p;
}
// Tiles of two kv heads (the device's pair path: a team of half the block attends each, in its half of shared
// memory) where tiles of one outnumber the SMs: a second wave of latency-bound tiles, each waiting for the one before
// it on its block, would otherwise follow the first (batch 32 of Llama-3.2-1B: 256 tiles on 132 SMs; docs/perf.md
// round 53). Only what that path takes: an even number of kv heads, 2, 4 or 8 q heads per kv head, a 16-bit dtype,
// head_dim 64 or 128, a rope table operand, and a pass of the team's warps in half the ops' shared memory.
// Positions past what a half holds still run, the kv heads one after the other (attention_decode_qkv_pair), slower
// than tiles of one: by default (LowerOptions::attention_pairs 0) only a cache that a half holds whole pairs.
bool attention_pairs(const LowerCtx& c) {
  const int32_t mode = c.options().attention_pairs;
  if (mode < 0 || !c.has(6)) return false;
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  if (!attention_may_pair(c.out_view().rows, hq, hkv, hd, c.out_dtype(), c.spread_sms(), c.options().ops_smem_bytes))
    return false;
  return mode > 0 || c.in_shape(1)[1] <= attention_pair_timesteps(hd, hq / hkv, c.out_dtype(), c.options().ops_smem_bytes);
}
TileGrid attention_qkv_grid(const LowerCtx& c) {
  TileGrid g = attention_grid(c);
  if (attention_pairs(c)) {
    g.col_tile *= 2;
    return g;
  }
  g.k_parts = attention_parts(c, g.count());
  return g;
}
void attention_qkv_split_args(weft_task_args& a, int64_t parts, int64_t part, int64_t block_word, int64_t counter_word) {
  a.d[9] = parts;
  a.d[10] = part;
  a.d[11] = block_word;
  a.d[12] = counter_word;
}
void attention_qkv_args(const LowerCtx& c, weft_task_args& a) {
  attention_common_args(c, a, 1, 3);
  const int64_t hq = c.attr_int("num_q_heads"), hkv = c.attr_int("num_kv_heads"), hd = c.attr_int("head_dim");
  // The task stages its q heads, k, v and the rope table at the end of shared memory (ops_attention_qkv.cuh).
  const int64_t stage = WEFT_QKV_STAGE_BYTES(hd, hq / hkv, static_cast<int64_t>(dtype_size(c.out_dtype())));
  if (stage > WEFT_SMEM_BYTES / 4)
    c.unsupported("its q heads per kv head, k and v take " + std::to_string(stage) + " bytes of shared memory; the device stages at most " +
                  std::to_string(WEFT_SMEM_BYTES / 4));
  rope_double_args(c, a);
  a.f[1] = static_cast<float>(c.attr_num("eps"));
  a.i[2] = c.attr_str("style") == "interleaved" ? 1 : 0;
  // The rope table's slot (a tensor's slot is its id), past in[]'s six operands.
  a.d[13] = c.has(6) ? c.node().inputs[6] : -1;
  if (attention_pairs(c)) a.i[3] = 2;  // tiles of two kv heads (attention_qkv_grid)
}

// rope_table: whole rows, as many per task as give its threads one pair each (a decode step's rows in a few tasks).
TileGrid rope_table_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  return TileGrid{v.rows, v.cols, std::max<int64_t>(1, WEFT_BLOCK_THREADS / std::max<int64_t>(1, v.cols / 2)), v.cols};
}
std::vector<Region> rope_table_reads(const LowerCtx& c, size_t k, const Region& t) { return per_row(c, k, t); }
// A task's rows times pairs are counted in 32 bits on the device (at most 256 rows or one row per task: pairs < 2^31).
constexpr int64_t kRopeTableMaxHeadDim = int64_t{1} << 20;
void rope_table_args(const LowerCtx& c, weft_task_args& a) {
  if (c.attr_int("head_dim") > kRopeTableMaxHeadDim)
    c.unsupported("head_dim " + std::to_string(c.attr_int("head_dim")) + " is above the device's " +
                  std::to_string(kRopeTableMaxHeadDim));
  a.d[2] = c.attr_int("head_dim");
  rope_double_args(c, a);
  a.i[0] = static_cast<int>(c.in_dtype(0));
}

// argmax: one output element per row of x; the output view of a rank-1 result is [1, R]. A few long rows (a decode
// step's logits: 128-152k columns) are split over their columns (argmax_split.cuh): one block scanning a whole row
// took 18-20 us per token (docs/perf.md round 16). Each part takes at most kArgmaxPartCols columns (one 16-byte
// load per thread of a bf16 row; a part costs about one L2 round trip either way) where the SMs allow; tiles of
// one row then, P a power of two (the arrival counter, as for split linears).
constexpr int64_t kArgmaxPartCols = 2048;
constexpr int64_t kArgmaxPartAlign = 8;  // part boundaries in whole 16-byte units of bf16 / f16
int64_t argmax_parts(const LowerCtx& c, int64_t tiles) {
  const int64_t n = c.in_view(0).cols;
  if (n >= (int64_t{1} << 31)) return 1;  // the split path indexes columns in 32 bits
  int64_t p = 1;
  while (p < WEFT_ARGMAX_MAX_SPLIT && ceil_div(n, p) > kArgmaxPartCols && tiles * p * 2 <= c.spread_sms()) p *= 2;
  return p;
}
// Columns [first, second) of part p of P of a row of n.
std::pair<int64_t, int64_t> argmax_part_cols(int64_t n, int64_t parts, int64_t part) {
  const int64_t per = round_up(ceil_div(n, parts), kArgmaxPartAlign);
  return {std::min(n, part * per), std::min(n, (part + 1) * per)};
}
TileGrid argmax_grid(const LowerCtx& c) {
  const View2D v = c.out_view();
  TileGrid g{v.rows, v.cols, 1, std::max<int64_t>(1, ceil_div(v.cols, c.options().num_sms))};
  const int64_t parts = v.rows == 1 ? argmax_parts(c, v.cols) : 1;
  if (parts > 1) {
    g.col_tile = 1;
    g.k_parts = parts;
  }
  return g;
}
std::vector<Region> argmax_reads(const LowerCtx& c, size_t, const Region& t) {
  const View2D out = c.out_view(), x = c.in_view(0);
  std::vector<Region> r;
  for (int64_t row = t.row0; row < t.row1; ++row)
    r.push_back(Region{row * out.cols + t.col0, row * out.cols + t.col1, 0, x.cols});
  return r;
}
std::vector<Region> argmax_split_reads(const LowerCtx& c, size_t k, const Region& t, int64_t part, int64_t parts) {
  const auto [c0, c1] = argmax_part_cols(c.in_view(0).cols, parts, part);
  std::vector<Region> r = argmax_reads(c, k, t);
  for (Region& x : r) {
    x.col0 = c0;
    x.col1 = c1;
  }
  return r;
}
void argmax_split_args(weft_task_args& a, int64_t parts, int64_t part, int64_t entries_word, int64_t counter_word) {
  const auto [c0, c1] = argmax_part_cols(a.d[0], parts, part);
  a.d[2] = parts;
  a.d[3] = part;
  a.d[4] = entries_word;
  a.d[5] = counter_word;
  a.d[6] = c0;
  a.d[7] = c1;
}
void argmax_args(const LowerCtx& c, weft_task_args& a) {
  a.dtype = static_cast<int>(c.in_dtype(0));  // the device dispatches on x's float dtype; i0 is the output's
  a.d[0] = c.in_view(0).cols;
  a.i[0] = static_cast<int>(c.out_dtype());
  // The device walks rows [row0, row1) of x, output element e being x's row e. The grid's tiles are one output
  // row each, so their elements are the contiguous flat range below.
  const int64_t cols = c.out_view().cols, row = a.row0;
  a.row0 = row * cols + a.col0;
  a.row1 = row * cols + a.col1;
}

// [outer, A, inner] around an axis of operand k.
std::array<int64_t, 3> around_axis(const std::vector<int64_t>& s, size_t axis) {
  std::array<int64_t, 3> r{1, s[axis], 1};
  for (size_t i = 0; i < s.size(); ++i)
    if (i < axis) r[0] *= s[i];
    else if (i > axis) r[2] *= s[i];
  return r;
}
size_t norm_axis(int64_t axis, size_t rank) { return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis); }

void reduce_args(const LowerCtx& c, weft_task_args& a) {
  const auto oai = around_axis(c.in_shape(0), norm_axis(c.attr_int("axis"), c.in_shape(0).size()));
  a.d[0] = oai[0];
  a.d[1] = oai[1];
  a.d[2] = oai[2];
  const std::string kind = c.attr_str("kind");
  a.i[0] = kind == "sum" ? 0 : kind == "max" ? 1 : 2;
}

void cast_args(const LowerCtx& c, weft_task_args& a) { a.i[0] = static_cast<int>(c.in_dtype(0)); }

void slice_args(const LowerCtx& c, weft_task_args& a) {
  const auto oai = around_axis(c.in_shape(0), norm_axis(c.attr_int("axis"), c.in_shape(0).size()));
  a.d[0] = oai[0];
  a.d[1] = oai[1];
  a.d[2] = oai[2];
  a.d[3] = c.attr_int("start");
  a.d[4] = c.attr_int("end") - c.attr_int("start");
}

void concat_args(const LowerCtx& c, weft_task_args& a) {
  if (c.num_inputs() > WEFT_TASK_MAX_INPUTS)
    c.unsupported("it joins " + std::to_string(c.num_inputs()) + " tensors; the device takes at most " +
                  std::to_string(WEFT_TASK_MAX_INPUTS) + " (chain two concats)");
  const size_t axis = norm_axis(c.attr_int("axis"), c.out_shape().size());
  const auto oai = around_axis(c.out_shape(), axis);
  a.d[0] = oai[0];
  a.d[1] = oai[2];
  for (size_t k = 0; k < c.num_inputs(); ++k) a.d[2 + k] = c.in_shape(k)[axis];
  a.i[0] = static_cast<int>(c.num_inputs());
}

const OpLowering kTable[] = {
    {"embedding", WEFT_DEV_OP_EMBEDDING, embedding_grid, embedding_reads, embedding_args},
    {"rmsnorm", WEFT_DEV_OP_RMSNORM, rowwise_grid, rows_then_whole, norm_args},
    {"head_rmsnorm", WEFT_DEV_OP_HEAD_RMSNORM, head_rmsnorm_grid, head_rmsnorm_reads, head_rmsnorm_args},
    {"layernorm", WEFT_DEV_OP_LAYERNORM, rowwise_grid, rows_then_whole, norm_args},
    {"linear", WEFT_DEV_OP_LINEAR, linear_grid, linear_reads, linear_args, false, linear_split_args},
    {"matmul", WEFT_DEV_OP_MATMUL, matmul_grid, rows_then_whole, matmul_args},
    {"add", WEFT_DEV_OP_ADD, elementwise_grid, broadcast_reads, broadcast_args},
    {"mul", WEFT_DEV_OP_MUL, elementwise_grid, broadcast_reads, broadcast_args},
    {"silu", WEFT_DEV_OP_SILU, elementwise_grid, same_tile, no_args},
    {"gelu", WEFT_DEV_OP_GELU, elementwise_grid, same_tile, gelu_args},
    {"silu_mul", WEFT_DEV_OP_SILU_MUL, elementwise_grid, silu_mul_reads, silu_mul_args},
    {"rope", WEFT_DEV_OP_ROPE, rope_grid, rope_reads, rope_args},
    {"attention_decode", WEFT_DEV_OP_ATTENTION_DECODE, attention_grid, attention_reads, attention_args, true},
    {"attention_decode_qkv", WEFT_DEV_OP_ATTENTION_DECODE_QKV, attention_qkv_grid, attention_qkv_reads, attention_qkv_args, true,
     attention_qkv_split_args, nullptr, 2, 3},
    {"softmax", WEFT_DEV_OP_SOFTMAX, rowwise_grid, same_rows, no_args},
    {"argmax", WEFT_DEV_OP_ARGMAX, argmax_grid, argmax_reads, argmax_args, false, argmax_split_args, argmax_split_reads, 2},
    {"reduce", WEFT_DEV_OP_REDUCE, single_task_grid, whole_input, reduce_args},
    {"cast", WEFT_DEV_OP_CAST, elementwise_grid, same_tile, cast_args},
    {"reshape", WEFT_DEV_OP_RESHAPE, elementwise_grid, whole_input, no_args},
    {"slice", WEFT_DEV_OP_SLICE, elementwise_grid, whole_input, slice_args},
    {"concat", WEFT_DEV_OP_CONCAT, elementwise_grid, whole_input, concat_args},
    {"rmsnorm_linear", WEFT_DEV_OP_RMSNORM_LINEAR, fused_linear_grid, fused_linear_reads, fused_linear_args},
    {"silu_mul_linear", WEFT_DEV_OP_SILU_MUL_LINEAR, fused_linear_grid, fused_linear_reads, fused_linear_args},
    {"linear_silu_mul", WEFT_DEV_OP_LINEAR_SILU_MUL, linear_silu_mul_grid, linear_silu_mul_reads, linear_silu_mul_args},
    {"rope_table", WEFT_DEV_OP_ROPE_TABLE, rope_table_grid, rope_table_reads, rope_table_args},
};

}  // namespace

std::vector<Region> task_reads(const OpLowering& rule, const LowerCtx& c, size_t k, const Region& tile, int64_t part,
                               int64_t parts) {
  return parts > 1 && rule.split_reads ? rule.split_reads(c, k, tile, part, parts) : rule.reads(c, k, tile);
}

const OpLowering* find_lowering(std::string_view op) {
  for (const OpLowering& l : kTable)
    if (l.op == op) return &l;
  return nullptr;
}

void LowerCtx::unsupported(const std::string& why) const {
  fail(Status::unsupported, "op '" + std::string(node_.op->name) + "' (result '" + g_.tensor(node_.output).name +
                                "') cannot be lowered: " + why);
}

std::vector<Region> flat_range_regions(const View2D& v, int64_t e0, int64_t e1) {
  std::vector<Region> r;
  if (e0 >= e1) return r;
  const int64_t r0 = e0 / v.cols, c0 = e0 % v.cols, r1 = (e1 - 1) / v.cols, c1 = (e1 - 1) % v.cols + 1;
  if (r0 == r1) return {Region{r0, r0 + 1, c0, c1}};
  r.push_back(Region{r0, r0 + 1, c0, v.cols});
  if (r1 > r0 + 1) r.push_back(Region{r0 + 1, r1, 0, v.cols});
  r.push_back(Region{r1, r1 + 1, 0, c1});
  return r;
}

namespace {
// Timesteps the shared-memory path's plan holds in `bytes` with `warps` warps' partial outputs (attn_smem_plan).
int64_t attention_plan_timesteps(int64_t head_dim, int64_t group, DType dtype, int64_t bytes, int64_t warps) {
  if ((dtype != DType::bf16 && dtype != DType::f16) || (head_dim != 64 && head_dim != 128) || group < 1) return 0;
  const int64_t room = bytes - WEFT_ATTN_SMEM_FIXED_W(head_dim, group, warps) - WEFT_QKV_STAGE_BYTES(head_dim, group, int64_t{2});
  return std::max<int64_t>(0, room / WEFT_ATTN_SMEM_PER_STEP(head_dim, group, int64_t{2}));
}
}  // namespace

int64_t attention_whole_timesteps(int64_t head_dim, int64_t group, DType dtype, int64_t ops_smem_bytes) {
  return attention_plan_timesteps(head_dim, group, dtype, ops_smem_bytes, WEFT_BLOCK_WARPS);
}
int64_t attention_pair_timesteps(int64_t head_dim, int64_t group, DType dtype, int64_t ops_smem_bytes) {
  return attention_plan_timesteps(head_dim, group, dtype, WEFT_ATTN_PAIR_BYTES(ops_smem_bytes), WEFT_ATTN_PAIR_WARPS);
}
bool attention_may_pair(int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t head_dim, DType dtype, int64_t sms,
                        int64_t ops_smem_bytes) {
  if (kv_heads <= 0 || q_heads % kv_heads != 0 || kv_heads % 2 != 0 || rows * kv_heads <= sms) return false;
  const int64_t group = q_heads / kv_heads;
  if (group != 2 && group != 4 && group != 8) return false;
  return attention_pair_timesteps(head_dim, group, dtype, ops_smem_bytes) >= WEFT_ATTN_PAIR_WARPS * WEFT_WARP_THREADS / 2;
}

int64_t mma_x_chunks(const TaskGraph& tg, int32_t smem_bytes) {
  int64_t chunks = 0;
  for (const Task& t : tg.tasks) {
    if (t.dev_op != WEFT_DEV_OP_LINEAR || (t.args.dtype != WEFT_DEV_BF16 && t.args.dtype != WEFT_DEV_F16)) continue;
    const int64_t k = t.args.d[0];
    if (t.args.d[2] > 1) {  // split over K: one chunk per part, counted as the parts its last task adds
      chunks += t.args.d[2];
      continue;
    }
    const int64_t kc = weft_mma_chunk_k(smem_bytes, k, t.args.row1 - t.args.row0, t.args.col1 - t.args.col0, 2);
    if (kc > 0 && kc < k) chunks += k / kc;
  }
  return chunks;
}

namespace {
bool is_linear_task(const Task& t) {
  return t.dev_op == WEFT_DEV_OP_LINEAR || t.dev_op == WEFT_DEV_OP_RMSNORM_LINEAR || t.dev_op == WEFT_DEV_OP_SILU_MUL_LINEAR;
}
}  // namespace

bool one_row_tiles_f16(const TaskGraph& tg) {
  int64_t f16 = 0, bf16 = 0;
  for (const Task& t : tg.tasks) {
    if (!is_linear_task(t) || t.args.row1 - t.args.row0 != 1) continue;
    f16 += t.args.dtype == WEFT_DEV_F16;
    bf16 += t.args.dtype == WEFT_DEV_BF16;
  }
  return f16 > bf16;
}

bool weight_loader_applies(const TaskGraph& tg, int32_t sm) {
  if (sm < WEFT_LOADER_MIN_SM || may_use_tensor_core_tiles(tg) || one_row_tiles_f16(tg)) return false;
  // A GEMV tile stages its x rows behind the per-warp ring (WEFT_GEMV_RING_BYTES) and below the one-row tiles'
  // plan records (one per warp, gemv_one_row.cuh) and the reduction scratch.
  constexpr int64_t x_room = WEFT_SMEM_BYTES_LOADER_OPS - WEFT_GEMV_RING_BYTES - WEFT_GEMV_SCRATCH_BYTES -
                           WEFT_BLOCK_WARPS * WEFT_GEMV_PLAN_RECORD_BYTES;
  for (const Task& t : tg.tasks)
    if (is_linear_task(t) &&
        (t.args.row1 - t.args.row0) * t.args.d[0] * (t.args.dtype == WEFT_DEV_F32 ? 4 : 2) > x_room)
      return false;
  return true;
}

bool may_use_tensor_core_tiles(const TaskGraph& tg) {
  for (const Task& t : tg.tasks) {
    const bool linear = is_linear_task(t) || t.dev_op == WEFT_DEV_OP_LINEAR_SILU_MUL;
    const bool half = t.args.dtype == WEFT_DEV_BF16 || t.args.dtype == WEFT_DEV_F16;
    const int64_t k = t.args.d[0];  // the four ops' K
    // Rows only from below: a tile masked at run time (clip) has fewer rows than compiled, never more.
    if (linear && half && k > 0 && k % WEFT_MMA_K_MULTIPLE == 0 && t.args.row1 - t.args.row0 >= WEFT_MMA_MIN_ROWS) return true;
  }
  return false;
}

}  // namespace weft
