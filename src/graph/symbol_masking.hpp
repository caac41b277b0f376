// Which symbols a kernel compiled for a larger value can serve by masking: a megakernel specialized for
// `batch` = 8 runs batch 5 when every tile past row 5 can simply be skipped. That holds when the symbol only
// ever leads a tensor's dims (dim 0, so the first v rows of the larger layout are the whole smaller tensor)
// and every op maps rows of that dim to the same rows of its output (no reduction, slice or concatenation
// across it). Symbols that pass are bucketed or made runtime parameters; the rest are specialized exactly.
#pragma once

#include <string>

#include "graph/graph.hpp"

namespace weft {

// Why symbol `sym` cannot be masked (naming the op, tensor and dim), or "" when it can.
std::string masking_obstacle(const Graph& g, int32_t sym);

// The policy a program uses for `sym`: its own, with automatic resolved (buckets when maskable, else exact).
// Throws weft::Error (invalid_argument) for buckets or runtime set on a symbol that cannot be masked.
SymbolPolicy effective_symbol_policy(const Graph& g, int32_t sym);

}  // namespace weft
