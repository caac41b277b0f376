// Human-readable names of tasks and events, for verification errors, the watchdog and `weft inspect`.
#include "lower/task_graph.hpp"

namespace weft {

namespace {
std::string region_str(const Region& r) {
  return "[" + std::to_string(r.row0) + "," + std::to_string(r.row1) + ")x[" + std::to_string(r.col0) + "," +
         std::to_string(r.col1) + ")";
}
std::string node_str(const Graph& g, int32_t node) {
  const Node& n = g.nodes()[static_cast<size_t>(node)];
  return std::string(n.op->name) + " '" + g.tensor(n.output).name + "'";
}
}  // namespace

std::string TaskGraph::event_name(const Graph& g, int32_t event) const {
  const EventDesc& e = events[static_cast<size_t>(event)];
  std::string s = "event " + std::to_string(event) + " of " + node_str(g, e.node);
  if (e.kind == EventKind::node) return s + " (all tiles)";
  if (e.kind == EventKind::row_block) return s + " (row block " + std::to_string(e.row_block) + ")";
  return s + " (tile " + std::to_string(e.row_block) + ", " + std::to_string(e.col_tile) + ")";
}

std::string TaskGraph::task_name(const Graph& g, int32_t task) const {
  const Task& t = tasks[static_cast<size_t>(task)];
  return "task " + std::to_string(task) + " (" + node_str(g, t.node) + " tile " + region_str(t.tile) + ")";
}

}  // namespace weft
