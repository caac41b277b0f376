// Per-op lowering rules: how an op's output is cut into tiles, what each tile reads of each operand, and how a
// tile's task arguments are filled for the device library (the contract in device/task_abi.h).
#pragma once

#include <string_view>
#include <vector>

#include "lower/task_graph.hpp"

namespace weft {

// Everything a rule may look at for one node, with concrete shapes.
class LowerCtx {
 public:
  // reserved_sms: SMs the node's grid leaves free for the set-up of its consumers' tasks (see long_setup).
  LowerCtx(const Graph& g, const Node& node, const std::vector<std::vector<int64_t>>& shapes, const LowerOptions& o,
           int64_t reserved_sms = 0)
      : g_(g), node_(node), shapes_(shapes), options_(o), reserved_sms_(reserved_sms) {}

  const Node& node() const { return node_; }
  const LowerOptions& options() const { return options_; }
  // The SMs a grid that wants one tile per SM spreads over: all but those reserved for consumers' set-up.
  int64_t spread_sms() const { return options_.num_sms - reserved_sms_; }
  size_t num_inputs() const { return node_.inputs.size(); }
  bool has(size_t k) const { return k < node_.inputs.size() && node_.inputs[k] != kNoTensor; }
  const std::vector<int64_t>& in_shape(size_t k) const { return shapes_[static_cast<size_t>(node_.inputs[k])]; }
  const std::vector<int64_t>& out_shape() const { return shapes_[static_cast<size_t>(node_.output)]; }
  DType in_dtype(size_t k) const { return g_.tensor(node_.inputs[k]).type.dtype; }
  DType out_dtype() const { return g_.tensor(node_.output).type.dtype; }
  View2D in_view(size_t k) const { return view_of(in_shape(k)); }
  View2D out_view() const { return view_of(out_shape()); }
  int64_t attr_int(const char* name) const { return node_.attrs.at(name).get<int64_t>(); }
  double attr_num(const char* name) const { return node_.attrs.at(name).get<double>(); }
  std::string attr_str(const char* name) const { return node_.attrs.at(name).get<std::string>(); }
  [[noreturn]] void unsupported(const std::string& why) const;

 private:
  const Graph& g_;
  const Node& node_;
  const std::vector<std::vector<int64_t>>& shapes_;
  const LowerOptions& options_;
  int64_t reserved_sms_;
};

struct OpLowering {
  std::string_view op;
  int32_t dev_op;
  TileGrid (*grid)(const LowerCtx&);
  // Regions of operand k's 2-D view that the output tile reads (empty: none that matter).
  std::vector<Region> (*reads)(const LowerCtx&, size_t k, const Region& tile);
  // Fills the op-specific part of the arguments (d, f, i); slots, dtype and tile are filled by the driver.
  void (*args)(const LowerCtx&, weft_task_args&);
  // Its few tasks do much before their wait (attention copies its K/V rows into shared memory and builds the
  // rope table): the producers of its inputs leave that many SMs out of their grids, so that this set-up runs
  // while they do instead of after them on the same SMs, on the critical path.
  bool long_setup = false;
  // For a grid with k_parts > 1: fills the arguments that tell a task its part and where its tile's partial
  // results (`partial_word`) and arrival counter (`counter_word`) lie in scratch.
  void (*split_args)(weft_task_args&, int64_t parts, int64_t part, int64_t partial_word, int64_t counter_word) = nullptr;
  // For a grid with k_parts > 1: what part `part` of `parts` reads of operand k, where a part reads less than its
  // tile (its waits then cover only the producer tiles of its share). nullptr: every part reads what `reads` says.
  std::vector<Region> (*split_reads)(const LowerCtx&, size_t k, const Region& tile, int64_t part, int64_t parts) = nullptr;
  // Scratch words per output element and part of a split tile's block (a linear's f32 sum: 1; argmax: 2).
  int64_t split_words = 1;
  // For a grid with k_parts > 1: the operand from whose value alone the device op decides, before any wait,
  // whether a part above 0 has work at all (attention_decode_qkv: its positions; docs/perf.md round 25). Where that
  // operand is ready at launch (no producer, no other node writing it), those parts leave their waits to the op
  // (Task::waits_in_op), which waits only when the part has work. -1: never.
  int split_idle_input = -1;
};

// What a task of `rule` (part `part` of `parts` of its tile) reads of operand k.
std::vector<Region> task_reads(const OpLowering& rule, const LowerCtx& c, size_t k, const Region& tile, int64_t part,
                               int64_t parts);

// The rule for an op, or nullptr.
const OpLowering* find_lowering(std::string_view op);

// Regions of a view covering its flattened elements [e0, e1) (at most three rectangles).
std::vector<Region> flat_range_regions(const View2D& v, int64_t e0, int64_t e1);

}  // namespace weft
