// Lowering driver: concrete shapes, tile grids, tasks, and the event tensors between them.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.hpp"
#include "device/config.cuh"
#include "graph/symbol_masking.hpp"
#include "lower/op_lowering.hpp"

namespace weft {

View2D view_of(const std::vector<int64_t>& shape) {
  View2D v;
  v.cols = shape.empty() ? 1 : shape.back();
  for (size_t i = 0; i + 1 < shape.size(); ++i) v.rows *= shape[i];
  return v;
}

namespace {

double elem_bytes(const Graph& g, TensorId t, int64_t elems) {
  return static_cast<double>(elems) * static_cast<double>(dtype_size(g.tensor(t).type.dtype));
}

// Estimated bytes moved and flops of one task (the regions it reads of every operand + the tile it writes).
void estimate_cost(const Graph& g, const Node& n, const OpLowering& rule, const LowerCtx& c, int64_t k_parts, Task& t) {
  const int64_t tile_elems = (t.tile.row1 - t.tile.row0) * (t.tile.col1 - t.tile.col0);
  t.bytes = elem_bytes(g, n.output, tile_elems);
  t.flops = 4.0 * static_cast<double>(tile_elems);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == kNoTensor) continue;
    const size_t weight = rule.dev_op == WEFT_DEV_OP_RMSNORM_LINEAR ? 2 : 1;
    const bool paired = rule.dev_op == WEFT_DEV_OP_LINEAR_SILU_MUL;  // a gate and an up row per output column
    const bool linear = rule.dev_op == WEFT_DEV_OP_LINEAR || rule.dev_op == WEFT_DEV_OP_RMSNORM_LINEAR ||
                        rule.dev_op == WEFT_DEV_OP_SILU_MUL_LINEAR || paired;
    if (linear && k == weight) {  // the weight rows of the tile's columns
      const int64_t k_dim = c.in_shape(weight)[1] / k_parts;  // a split tile's part: its share of K
      const int64_t w_rows = (t.tile.col1 - t.tile.col0) * (paired ? 2 : 1);
      t.bytes += elem_bytes(g, n.inputs[k], w_rows * k_dim);
      t.flops += 2.0 * static_cast<double>(tile_elems) * static_cast<double>(k_dim) * (paired ? 2 : 1);
      continue;
    }
    for (const Region& r : task_reads(rule, c, k, t.tile, t.part, k_parts))
      t.bytes += elem_bytes(g, n.inputs[k], (r.row1 - r.row0) * (r.col1 - r.col0));
  }
}

// How a node's tiles are masked (weft_task::clip) when its output's dim 0 is a maskable symbol: rows of the
// view (columns for a rank-1 output), in units of the rows one value of the symbol spans. Argmax tiles count
// rows of its input.
std::pair<int32_t, int64_t> node_clip(const Node& n, const LowerCtx& c, const std::vector<bool>& maskable, const Graph& g) {
  const Shape& out = g.tensor(n.output).type.shape;
  if (out.empty() || out[0].is_fixed() || !maskable[static_cast<size_t>(out[0].symbol)]) return {-1, 0};
  const int32_t sym = out[0].symbol;
  const std::vector<int64_t>& rows_of = n.op->name == "argmax" ? c.in_shape(0) : c.out_shape();
  if (rows_of.size() == 1) return {sym | (1 << 8), 1};
  int64_t unit = 1;
  for (size_t i = 1; i + 1 < rows_of.size(); ++i) unit *= rows_of[i];
  return {sym, unit};
}

}  // namespace

TaskWait TaskGraph::node_done_wait(int32_t node) const {
  return TaskWait{node_event[static_cast<size_t>(node)], static_cast<uint32_t>(grids[static_cast<size_t>(node)].tasks())};
}

void TaskGraph::add_ordering_wait(int32_t node, int32_t on) {
  if (node == on || fully_waits[static_cast<size_t>(node)][static_cast<size_t>(on)]) return;
  const TaskWait w = node_done_wait(on);
  for (int32_t t = first_task[static_cast<size_t>(node)]; t < static_cast<int32_t>(tasks.size()) && tasks[static_cast<size_t>(t)].node == node; ++t) {
    auto& waits = tasks[static_cast<size_t>(t)].waits;
    if (std::none_of(waits.begin(), waits.end(), [&](const TaskWait& x) { return x.event == w.event; })) waits.push_back(w);
  }
}

namespace {

// Node-level closure of "every task of x has (transitively) waited for every task of y". Seeds: each task of x
// waits for all tiles of y, or each task of x waits for some task of a node y' that fully waits for y. Closure:
// once every task of y is known done, so is every node whose tiles y's tasks waited for together, and
// everything y fully waits for.
void compute_full_waits(TaskGraph& tg) {
  const size_t nodes = tg.grids.size();
  std::vector<std::vector<int32_t>> direct(nodes), together(nodes), touched_by_all(nodes);
  for (size_t x = 0; x < nodes; ++x) {
    std::vector<bool> every_task(nodes, true), seen(nodes, false), touched_by_every(nodes, true);
    std::vector<std::vector<bool>> union_tiles(nodes);
    for (int32_t t = tg.first_task[x]; t < static_cast<int32_t>(tg.tasks.size()) && tg.tasks[static_cast<size_t>(t)].node == static_cast<int32_t>(x); ++t) {
      std::vector<std::vector<bool>> tiles(nodes);
      for (const TaskWait& w : tg.tasks[static_cast<size_t>(t)].waits) {
        const EventDesc& e = tg.events[static_cast<size_t>(w.event)];
        const auto y = static_cast<size_t>(e.node);
        const TileGrid& gy = tg.grids[y];
        if (tiles[y].empty()) tiles[y].assign(static_cast<size_t>(gy.count()), false);
        if (union_tiles[y].empty()) union_tiles[y].assign(static_cast<size_t>(gy.count()), false);
        seen[y] = true;
        const int64_t first = e.kind == EventKind::node ? 0 : e.kind == EventKind::row_block ? e.row_block * gy.col_tiles() : e.row_block * gy.col_tiles() + e.col_tile;
        const int64_t count = e.kind == EventKind::node ? gy.count() : e.kind == EventKind::row_block ? gy.col_tiles() : 1;
        for (int64_t k = first; k < first + count; ++k) tiles[y][static_cast<size_t>(k)] = union_tiles[y][static_cast<size_t>(k)] = true;
      }
      for (size_t y = 0; y < nodes; ++y) {
        if (tiles[y].empty()) touched_by_every[y] = false;
        if (tiles[y].empty() || std::find(tiles[y].begin(), tiles[y].end(), false) != tiles[y].end()) every_task[y] = false;
      }
    }
    for (size_t y = 0; y < x; ++y) {
      if (!seen[y]) continue;
      if (every_task[y]) direct[x].push_back(static_cast<int32_t>(y));
      if (touched_by_every[y]) touched_by_all[x].push_back(static_cast<int32_t>(y));
      if (std::find(union_tiles[y].begin(), union_tiles[y].end(), false) == union_tiles[y].end()) together[x].push_back(static_cast<int32_t>(y));
    }
  }
  tg.fully_waits.assign(nodes, std::vector<bool>(nodes, false));
  for (size_t x = 0; x < nodes; ++x) {
    std::vector<int32_t> work = direct[x];
    auto& full = tg.fully_waits[x];
    for (int32_t y : touched_by_all[x])
      for (size_t z = 0; z < static_cast<size_t>(y); ++z)
        if (tg.fully_waits[static_cast<size_t>(y)][z]) work.push_back(static_cast<int32_t>(z));
    while (!work.empty()) {
      const auto y = static_cast<size_t>(work.back());
      work.pop_back();
      if (full[y]) continue;
      full[y] = true;
      for (int32_t z : together[y]) work.push_back(z);
      for (size_t z = 0; z < y; ++z)
        if (tg.fully_waits[y][z] && !full[z]) work.push_back(static_cast<int32_t>(z));
    }
  }
}

// Per node, the SMs its grid leaves free: the tiles of the long-set-up ops (OpLowering::long_setup) that read
// its output — all of them where they take at most half the SMs, else an eighth of the SMs (LowerOptions::reserve_cap
// may set another cap). A tile behind a producer tile on its SM copies its K/V rows only once that tile is done, and
// the op waits for its last tile: the batch-8 attention's 64 tiles, 16 of them reserved, ran 6.1 us a layer longer
// than all 64 reserved (Qwen3-0.6B; q/k/v on 68 SMs instead of 116 took 0.1 us longer: -10% a token, Llama-3.2-1B
// -1.5%), while 64 of batch 32's 128 reserved made q/k/v slower and left the rest late (+1.7 to +2.5%; docs/perf.md
// round 54). Only producers: the o projection leaving the attention SMs free too measured no faster (H100,
// docs/perf.md), its tiles being larger. Tiles, not tasks: of a split attention tile only part 0 works at short
// contexts (attn_split_part), and its producer's grid keeps its SMs (docs/perf.md round 24).
std::vector<int64_t> reserved_sms(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, const LowerOptions& options) {
  const auto& nodes = g.nodes();
  std::map<TensorId, int32_t> producer;
  for (size_t n = 0; n < nodes.size(); ++n) producer[nodes[n].output] = static_cast<int32_t>(n);
  std::vector<int64_t> reserved(nodes.size(), 0);
  for (const Node& node : nodes) {
    const OpLowering* rule = find_lowering(node.op->name);
    if (!rule || !rule->long_setup) continue;
    const int64_t tiles = rule->grid(LowerCtx(g, node, shapes, options)).count();
    for (TensorId in : node.inputs)
      if (auto it = producer.find(in); in != kNoTensor && it != producer.end()) reserved[static_cast<size_t>(it->second)] += tiles;
  }
  for (int64_t& r : reserved) {
    const int64_t cap = options.reserve_cap >= 0 ? options.reserve_cap
                        : r <= options.num_sms / 2 ? r
                                                   : options.num_sms / 8;
    r = std::min<int64_t>(r, cap);
  }
  return reserved;
}

// Scratch of the split tiles (TileGrid::k_parts > 1): an arrival counter per tile of every split node (counters
// only grow, so none is shared), and per tile a block of partial results [parts][rows][cols] of
// OpLowering::split_words each (a linear's f32 sums, argmax's key and index). The blocks of a
// node reuse the region of the split node before it when every task of the node waits (transitively) for every
// task of that one: then no part of it can still be reading its blocks. Call after compute_full_waits.
void place_split_scratch(const Graph& g, TaskGraph& tg) {
  std::vector<int32_t> split;
  int64_t largest = 0;  // words of partial blocks of one node: its tiles partition the output, P blocks each
  auto words_per_element = [&](size_t n) { return find_lowering(g.nodes()[n].op->name)->split_words; };
  for (size_t n = 0; n < tg.grids.size(); ++n) {
    const TileGrid& grid = tg.grids[n];
    if (grid.k_parts <= 1) continue;
    split.push_back(static_cast<int32_t>(n));
    largest = std::max(largest, grid.k_parts * words_per_element(n) * grid.rows * grid.cols);
  }
  if (split.empty()) return;
  int64_t next = 0;  // the first free word
  auto take = [&](int64_t words) {
    const int64_t at = next;
    next += (words + 3) / 4 * 4;  // every piece 16-byte aligned
    return at;
  };
  std::vector<std::pair<int64_t, int32_t>> regions;  // (first word, last node whose blocks lie there)
  for (int32_t n : split) {
    auto region = std::find_if(regions.begin(), regions.end(), [&](const auto& r) {
      return tg.fully_waits[static_cast<size_t>(n)][static_cast<size_t>(r.second)];
    });
    if (region == regions.end()) region = regions.insert(regions.end(), {take(largest), n});
    region->second = n;
    const OpLowering* rule = find_lowering(g.nodes()[static_cast<size_t>(n)].op->name);
    const TileGrid& grid = tg.grids[static_cast<size_t>(n)];
    int64_t next_block = region->first, block = 0, counter = 0;
    const int32_t first = tg.first_task[static_cast<size_t>(n)];
    for (int64_t i = 0; i < grid.tasks(); ++i) {
      Task& t = tg.tasks[static_cast<size_t>(first + i)];
      if (t.part == 0) {  // a tile's first part: its block and counter
        block = next_block;
        next_block += grid.k_parts * rule->split_words * (t.tile.row1 - t.tile.row0) * (t.tile.col1 - t.tile.col0);
        counter = take(1);
      }
      rule->split_args(t.args, grid.k_parts, t.part, block, counter);
    }
  }
  if (next > kMaxScratchWords)
    fail(Status::unsupported, "the split tiles need " + std::to_string(next) + " words of scratch; at most " +
                                  std::to_string(kMaxScratchWords) + " fit");
  tg.scratch_words = next;
}

// Whether operand k of `node` holds its values before the launch's first task runs: an input or weight, not a
// tensor an op of the graph produces or writes (a state another node writes).
bool ready_at_launch(const Graph& g, const Node& node, int k, const std::map<TensorId, int32_t>& state_writer) {
  if (k < 0 || static_cast<size_t>(k) >= node.inputs.size() || node.inputs[static_cast<size_t>(k)] == kNoTensor) return false;
  const TensorId t = node.inputs[static_cast<size_t>(k)];
  return g.tensor(t).producer < 0 && state_writer.find(t) == state_writer.end();
}

}  // namespace

TaskGraph lower(const Graph& g, const SymbolValues& symbols, const LowerOptions& options) {
  g.validate();
  TaskGraph tg;
  for (const TensorDesc& t : g.tensors()) tg.shapes.push_back(resolve_shape(t.type.shape, symbols));

  // Grids and the full event numbering.
  const auto& nodes = g.nodes();
  const std::vector<int64_t> reserved = reserved_sms(g, tg.shapes, options);
  // Events are made for every tile and row block; finalize_events keeps those somebody waits on.
  auto& ev = tg;
  std::vector<EventDesc>& all_events = tg.events;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const OpLowering* rule = find_lowering(nodes[n].op->name);
    if (!rule) fail(Status::unsupported, "op '" + std::string(nodes[n].op->name) + "' has no lowering rule");
    LowerCtx c(g, nodes[n], tg.shapes, options, reserved[n]);
    TileGrid grid = rule->grid(c);
    tg.grids.push_back(grid);
    ev.node_event.push_back(static_cast<int32_t>(all_events.size()));
    if (grid.k_parts > 1 && !rule->split_args)
      fail(Status::internal, "op '" + std::string(nodes[n].op->name) + "' splits its tiles but has no split_args");
    const auto parts = static_cast<uint32_t>(grid.k_parts);
    all_events.push_back(EventDesc{static_cast<int32_t>(n), EventKind::node, 0, 0, static_cast<uint32_t>(grid.tasks())});
    ev.row_block_event_base.push_back(static_cast<int32_t>(all_events.size()));
    for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)
      all_events.push_back(EventDesc{static_cast<int32_t>(n), EventKind::row_block, rb, 0, static_cast<uint32_t>(grid.col_tiles()) * parts});
    ev.tile_event_base.push_back(static_cast<int32_t>(all_events.size()));
    for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)
      for (int64_t ct = 0; ct < grid.col_tiles(); ++ct)
        all_events.push_back(EventDesc{static_cast<int32_t>(n), EventKind::tile, rb, ct, parts});
    if (all_events.size() > (size_t{1} << 30)) fail(Status::unsupported, "graph needs more than 2^30 events");
  }

  // Tasks, their reads and waits.
  std::vector<bool> maskable(g.symbols().size(), false);
  for (size_t s = 0; s < maskable.size() && s < WEFT_MAX_SYMBOLS; ++s)
    maskable[s] = masking_obstacle(g, static_cast<int32_t>(s)).empty();
  std::map<TensorId, int32_t> state_writer;  // state tensor -> the node that writes it
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int w : nodes[n].op->writes_operands)
      if (static_cast<size_t>(w) < nodes[n].inputs.size() && nodes[n].inputs[static_cast<size_t>(w)] != kNoTensor)
        state_writer[nodes[n].inputs[static_cast<size_t>(w)]] = static_cast<int32_t>(n);

  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const OpLowering* rule = find_lowering(node.op->name);
    LowerCtx c(g, node, tg.shapes, options, reserved[n]);
    const TileGrid& grid = tg.grids[n];
    const auto [clip, clip_unit] = node_clip(node, c, maskable, g);
    tg.first_task.push_back(static_cast<int32_t>(tg.tasks.size()));
    // Tiles in row-major order; the parts of a split tile next to each other.
    for (int64_t i = 0; i < grid.tasks(); ++i) {
      const int64_t rb = i / (grid.col_tiles() * grid.k_parts), ct = i / grid.k_parts % grid.col_tiles();
      Task t;
      t.node = static_cast<int32_t>(n);
      t.tile = grid.tile(rb, ct);
      t.part = static_cast<int32_t>(i % grid.k_parts);
      t.dev_op = rule->dev_op;
      t.clip = clip;
      t.clip_unit = clip_unit;
      t.args.out = node.output;
      for (int k = 0; k < WEFT_TASK_MAX_INPUTS; ++k) t.args.in[k] = -1;
      for (size_t k = 0; k < node.inputs.size() && k < WEFT_TASK_MAX_INPUTS; ++k) t.args.in[k] = node.inputs[k];
      t.args.dtype = static_cast<int>(g.tensor(node.output).type.dtype);
      t.args.row0 = t.tile.row0;
      t.args.row1 = t.tile.row1;
      t.args.col0 = t.tile.col0;
      t.args.col1 = t.tile.col1;
      rule->args(c, t.args);
      // Elementwise-style device ops find C here when a tile cuts rows (config.cuh).
      t.args.d[WEFT_D_VIEW_COLS] = grid.cols;

      std::set<std::pair<int32_t, uint32_t>> waits;
      std::vector<ReadSet> reads;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const TensorId in = node.inputs[k];
        if (in == kNoTensor) continue;
        const TensorDesc& d = g.tensor(in);
        if (d.kind == TensorKind::state) {  // written by another node: wait for all of it
          auto it = state_writer.find(in);
          if (it != state_writer.end() && it->second < static_cast<int32_t>(n)) {
            const TaskWait w = tg.node_done_wait(it->second);
            waits.insert({w.event, w.count});
          }
          continue;
        }
        if (d.producer < 0) continue;  // inputs and weights are ready before launch
        const std::vector<Region> regions = task_reads(*rule, c, k, t.tile, t.part, grid.k_parts);
        reads.push_back(ReadSet{in, regions});
        const TileGrid& pg = tg.grids[static_cast<size_t>(d.producer)];
        for (int64_t prb = 0; prb < pg.row_blocks(); ++prb) {
          std::vector<int64_t> hit;
          for (int64_t pct = 0; pct < pg.col_tiles(); ++pct)
            for (const Region& r : regions)
              if (pg.tile(prb, pct).overlaps(r)) {
                hit.push_back(pct);
                break;
              }
          if (hit.empty()) continue;
          const auto pparts = static_cast<uint32_t>(pg.k_parts);
          if (static_cast<int64_t>(hit.size()) == pg.col_tiles() && hit.size() > 1) {  // whole row block: one summary wait
            waits.insert({ev.row_block_event_base[static_cast<size_t>(d.producer)] + static_cast<int32_t>(prb),
                          static_cast<uint32_t>(pg.col_tiles()) * pparts});
          } else {
            for (int64_t pct : hit)
              waits.insert({ev.tile_event_base[static_cast<size_t>(d.producer)] + static_cast<int32_t>(prb * pg.col_tiles() + pct), pparts});
          }
        }
      }
      for (const auto& [e, cnt] : waits) t.waits.push_back(TaskWait{e, cnt});
      t.waits_in_op = t.part > 0 && ready_at_launch(g, node, rule->split_idle_input, state_writer);
      estimate_cost(g, node, *rule, c, grid.k_parts, t);
      tg.tasks.push_back(std::move(t));
      tg.reads.push_back(std::move(reads));
    }
  }
  compute_full_waits(tg);
  place_split_scratch(g, tg);
  // Write-after-read on state tensors: the writer waits for every node that reads the state before it.
  for (const auto& [tensor, writer] : state_writer)
    for (int32_t r = 0; r < writer; ++r) {
      const auto& ins = nodes[static_cast<size_t>(r)].inputs;
      if (std::find(ins.begin(), ins.end(), tensor) != ins.end()) tg.add_ordering_wait(writer, r);
    }
  return tg;
}

void finalize_events(TaskGraph& tg) {
  std::vector<int32_t> remap(tg.events.size(), -1);
  for (const Task& t : tg.tasks)
    for (const TaskWait& w : t.waits) remap[static_cast<size_t>(w.event)] = 0;
  std::vector<EventDesc> kept;
  for (size_t e = 0; e < tg.events.size(); ++e)
    if (remap[e] == 0) {
      remap[e] = static_cast<int32_t>(kept.size());
      kept.push_back(tg.events[e]);
    }
  for (Task& t : tg.tasks) {
    for (TaskWait& w : t.waits) w.event = remap[static_cast<size_t>(w.event)];
    const TileGrid& grid = tg.grids[static_cast<size_t>(t.node)];
    const int64_t rb = t.tile.row0 / grid.row_block, ct = t.tile.col0 / grid.col_tile;
    const auto node = static_cast<size_t>(t.node);
    const int32_t rb_event = remap[static_cast<size_t>(tg.row_block_event_base[node] + rb)];
    const int32_t tile_event = remap[static_cast<size_t>(tg.tile_event_base[node] + rb * grid.col_tiles() + ct)];
    const int32_t node_event = remap[static_cast<size_t>(tg.node_event[node])];
    t.notifies.clear();
    if (node_event >= 0) t.notifies.push_back(node_event);
    if (rb_event >= 0) t.notifies.push_back(rb_event);
    if (tile_event >= 0) t.notifies.push_back(tile_event);
  }
  tg.events = std::move(kept);
  tg.node_event.clear();
  tg.row_block_event_base.clear();
  tg.tile_event_base.clear();
}

TaskGraph lower_for_device(const Graph& g, const SymbolValues& symbols, int32_t num_sms, int32_t sm, bool& wide,
                           int32_t attention_split, int32_t split_k_parts, int32_t attention_pairs,
                           int32_t reserve_cap) {
  LowerOptions o{num_sms, WEFT_SMEM_BYTES_BASE, attention_split};
  o.split_k_parts = split_k_parts;
  o.attention_pairs = attention_pairs;
  o.reserve_cap = reserve_cap;
  TaskGraph base = lower(g, symbols, o);
  wide = false;
  if (sm < WEFT_SMEM_WIDE_MIN_SM || !may_use_tensor_core_tiles(base)) return base;
  o.mma_smem_bytes = WEFT_SMEM_BYTES_WIDE;
  TaskGraph w = lower(g, symbols, o);
  // The wide size only changes grids by allowing more rows per tensor-core tile (fewer row blocks, or a linear
  // that had too many for the streamed path taking it), and chunked tiles by allowing longer chunks.
  bool better = mma_x_chunks(w, WEFT_SMEM_BYTES_WIDE) < mma_x_chunks(base, WEFT_SMEM_BYTES_BASE);
  for (size_t n = 0; n < w.grids.size() && !better; ++n) better = w.grids[n].row_block != base.grids[n].row_block;
  wide = better;
  return better ? w : base;
}

TaskGraph lower_for_weight_loader(const Graph& g, const SymbolValues& symbols, int32_t num_sms, int32_t attention_split,
                                  int32_t reserve_cap) {
  LowerOptions o{num_sms, WEFT_SMEM_BYTES_BASE, attention_split, WEFT_SMEM_BYTES_LOADER_OPS};
  o.reserve_cap = reserve_cap;
  return lower(g, symbols, o);
}

}  // namespace weft
