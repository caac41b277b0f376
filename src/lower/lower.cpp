// Lowering driver: concrete shapes, tile grids, tasks, and the event tensors between them.
#include <algorithm>
#include <map>
#include <set>

#include "core/error.hpp"
#include "device/config.cuh"
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
void estimate_cost(const Graph& g, const Node& n, const OpLowering& rule, const LowerCtx& c, Task& t) {
  const int64_t tile_elems = (t.tile.row1 - t.tile.row0) * (t.tile.col1 - t.tile.col0);
  t.bytes = elem_bytes(g, n.output, tile_elems);
  t.flops = 4.0 * static_cast<double>(tile_elems);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == kNoTensor) continue;
    if (rule.dev_op == WEFT_DEV_OP_LINEAR && k == 1) {  // the weight rows of the tile's columns
      const int64_t k_dim = c.in_shape(1)[1];
      t.bytes += elem_bytes(g, n.inputs[k], (t.tile.col1 - t.tile.col0) * k_dim);
      t.flops += 2.0 * static_cast<double>(tile_elems) * static_cast<double>(k_dim);
      continue;
    }
    for (const Region& r : rule.reads(c, k, t.tile))
      t.bytes += elem_bytes(g, n.inputs[k], (r.row1 - r.row0) * (r.col1 - r.col0));
  }
}

}  // namespace

std::vector<TaskWait> TaskGraph::node_done_waits(int32_t node) const {
  std::vector<TaskWait> w;
  const TileGrid& gr = grids[static_cast<size_t>(node)];
  for (int64_t rb = 0; rb < gr.row_blocks(); ++rb)
    w.push_back(TaskWait{row_block_event_base[static_cast<size_t>(node)] + static_cast<int32_t>(rb), static_cast<uint32_t>(gr.col_tiles())});
  return w;
}

TaskGraph lower(const Graph& g, const SymbolValues& symbols, const LowerOptions& options) {
  g.validate();
  TaskGraph tg;
  for (const TensorDesc& t : g.tensors()) tg.shapes.push_back(resolve_shape(t.type.shape, symbols));

  // Grids and the full event numbering.
  const auto& nodes = g.nodes();
  // Events are made for every tile and row block; finalize_events keeps those somebody waits on.
  auto& ev = tg;
  std::vector<EventDesc>& all_events = tg.events;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const OpLowering* rule = find_lowering(nodes[n].op->name);
    if (!rule) fail(Status::unsupported, "op '" + std::string(nodes[n].op->name) + "' has no lowering rule");
    LowerCtx c(g, nodes[n], tg.shapes, options);
    TileGrid grid = rule->grid(c);
    tg.grids.push_back(grid);
    ev.row_block_event_base.push_back(static_cast<int32_t>(all_events.size()));
    for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)
      all_events.push_back(EventDesc{static_cast<int32_t>(n), EventKind::row_block, rb, 0, static_cast<uint32_t>(grid.col_tiles())});
    ev.tile_event_base.push_back(static_cast<int32_t>(all_events.size()));
    for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)
      for (int64_t ct = 0; ct < grid.col_tiles(); ++ct)
        all_events.push_back(EventDesc{static_cast<int32_t>(n), EventKind::tile, rb, ct, 1});
    if (all_events.size() > (size_t{1} << 30)) fail(Status::unsupported, "graph needs more than 2^30 events");
  }

  // Tasks, their reads and waits.
  std::map<TensorId, int32_t> state_writer;  // state tensor -> the node that writes it
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int w : nodes[n].op->writes_operands)
      if (static_cast<size_t>(w) < nodes[n].inputs.size() && nodes[n].inputs[static_cast<size_t>(w)] != kNoTensor)
        state_writer[nodes[n].inputs[static_cast<size_t>(w)]] = static_cast<int32_t>(n);

  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const OpLowering* rule = find_lowering(node.op->name);
    LowerCtx c(g, node, tg.shapes, options);
    const TileGrid& grid = tg.grids[n];
    tg.first_task.push_back(static_cast<int32_t>(tg.tasks.size()));
    for (int64_t rb = 0; rb < grid.row_blocks(); ++rb)
      for (int64_t ct = 0; ct < grid.col_tiles(); ++ct) {
        Task t;
        t.node = static_cast<int32_t>(n);
        t.tile = grid.tile(rb, ct);
        t.dev_op = rule->dev_op;
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
            if (it != state_writer.end() && it->second < static_cast<int32_t>(n))
              for (const TaskWait& w : tg.node_done_waits(it->second)) waits.insert({w.event, w.count});
            continue;
          }
          if (d.producer < 0) continue;  // inputs and weights are ready before launch
          const std::vector<Region> regions = rule->reads(c, k, t.tile);
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
            if (static_cast<int64_t>(hit.size()) == pg.col_tiles() && hit.size() > 1) {  // whole row block: one summary wait
              waits.insert({ev.row_block_event_base[static_cast<size_t>(d.producer)] + static_cast<int32_t>(prb),
                            static_cast<uint32_t>(pg.col_tiles())});
            } else {
              for (int64_t pct : hit)
                waits.insert({ev.tile_event_base[static_cast<size_t>(d.producer)] + static_cast<int32_t>(prb * pg.col_tiles() + pct), 1u});
            }
          }
        }
        for (const auto& [e, cnt] : waits) t.waits.push_back(TaskWait{e, cnt});
        estimate_cost(g, node, *rule, c, t);
        tg.tasks.push_back(std::move(t));
        tg.reads.push_back(std::move(reads));
      }
  }
  // Write-after-read on state tensors: the writer waits for every node that reads the state before it.
  for (const auto& [tensor, writer] : state_writer)
    for (int32_t r = 0; r < writer; ++r) {
      const auto& ins = nodes[static_cast<size_t>(r)].inputs;
      if (std::find(ins.begin(), ins.end(), tensor) == ins.end()) continue;
      const auto extra = tg.node_done_waits(r);
      for (int32_t t = tg.first_task[static_cast<size_t>(writer)]; t < static_cast<int32_t>(tg.tasks.size()) && tg.tasks[static_cast<size_t>(t)].node == writer; ++t)
        tg.tasks[static_cast<size_t>(t)].waits.insert(tg.tasks[static_cast<size_t>(t)].waits.end(), extra.begin(), extra.end());
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
    t.notifies.clear();
    if (rb_event >= 0) t.notifies.push_back(rb_event);
    if (tile_event >= 0) t.notifies.push_back(tile_event);
  }
  tg.events = std::move(kept);
  tg.row_block_event_base.clear();
  tg.tile_event_base.clear();
}

}  // namespace weft
