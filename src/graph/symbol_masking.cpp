#include "graph/symbol_masking.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "device/task_abi.h"
#include "graph/op_def.hpp"

namespace weft {

namespace {

// Ops whose rank-1 output is computed element by element (any sub-range of columns is a valid tile), so a
// symbol in its only dim is masked by cutting columns; argmax's rank-1 output is one element per input row.
bool masks_rank1_output(std::string_view op) {
  static constexpr std::string_view kOps[] = {"add", "mul", "silu", "gelu", "cast", "reshape", "argmax"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Dims of `t` that are symbol `sym`.
std::vector<size_t> dims_of(const TensorDesc& t, int32_t sym) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.type.shape.size(); ++i)
    if (t.type.shape[i].symbol == sym) out.push_back(i);
  return out;
}

}  // namespace

std::string masking_obstacle(const Graph& g, int32_t sym) {
  const std::string name = "symbol '" + g.symbols().at(sym).name + "'";
  for (const TensorDesc& t : g.tensors()) {
    const std::vector<size_t> dims = dims_of(t, sym);
    if (dims.empty()) continue;
    if (dims.size() > 1 || dims[0] != 0)
      return name + " is dim " + std::to_string(dims.back()) + " of tensor '" + t.name + "' " +
             g.symbols().shape_str(t.type.shape) + "; only a symbol that is dim 0 of every tensor it sizes can be masked";
  }
  for (const Node& n : g.nodes()) {
    const TensorDesc& out = g.tensor(n.output);
    const bool out_has = !dims_of(out, sym).empty();
    for (TensorId in : n.inputs) {
      if (in == kNoTensor || dims_of(g.tensor(in), sym).empty() || out_has) continue;
      return name + " sizes operand '" + g.tensor(in).name + "' of op '" + std::string(n.op->name) + "' but not its output '" +
             out.name + "': the op combines values across it, so it cannot be masked";
    }
    if (out_has && out.type.shape.size() == 1 && !masks_rank1_output(n.op->name))
      return name + " is the only dim of '" + out.name + "', the output of op '" + std::string(n.op->name) +
             "', which works on whole rows; it cannot be masked";
  }
  return "";
}

SymbolPolicy effective_symbol_policy(const Graph& g, int32_t sym) {
  const Symbol& s = g.symbols().at(sym);
  if (s.policy == SymbolPolicy::exact) return SymbolPolicy::exact;
  if (sym >= WEFT_MAX_SYMBOLS) {
    if (s.policy == SymbolPolicy::automatic) return SymbolPolicy::exact;
    invalid("symbol '" + s.name + "' is set to " + symbol_policy_name(s.policy) + ", but only the first " +
            std::to_string(WEFT_MAX_SYMBOLS) + " symbols of a graph can be masked; declare it earlier or make it exact");
  }
  const std::string why = masking_obstacle(g, sym);
  if (why.empty()) return s.policy == SymbolPolicy::automatic ? SymbolPolicy::buckets : s.policy;
  if (s.policy == SymbolPolicy::automatic) return SymbolPolicy::exact;
  invalid(why + " (it is set to " + symbol_policy_name(s.policy) + "); make it exact");
}

}  // namespace weft
