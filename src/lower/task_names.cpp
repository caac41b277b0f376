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
  const int64_t parts = static_cast<size_t>(t.node) < grids.size() ? grids[static_cast<size_t>(t.node)].k_parts : 1;
  const std::string part = parts > 1 ? " part " + std::to_string(t.part) + " of " + std::to_string(parts) : "";
  return "task " + std::to_string(task) + " (" + node_str(g, t.node) + " tile " + region_str(t.tile) + part + ")";
}

}  // namespace weft
