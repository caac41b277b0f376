// The CPU reference interpreter: runs any graph with f32 arithmetic, rounding each result to its dtype.
// It is the oracle every device result is checked against.
#pragma once

#include <span>
#include <vector>

#include "graph/graph.hpp"
#include "graph/bindings.hpp"
#include "reference/buffer.hpp"

namespace weft {

using HostBinding = Binding;  // a binding to host memory

// Evaluates every op in order. `values` is indexed by TensorId; INPUT/WEIGHT/STATE entries must hold the bound
// values, the rest are filled in. STATE buffers are updated in place.
void evaluate(const Graph& g, const SymbolValues& symbols, std::vector<Buffer>& values);

// Binds host memory (every input, weight, state and output exactly once), evaluates, writes outputs and states
// back to the caller's memory.
void run_reference(const Graph& g, std::span<const HostBinding> bindings);

}  // namespace weft
