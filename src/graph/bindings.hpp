// Binding caller memory to a graph's tensors for one run: the checks every executor (the CPU reference, a GPU
// program) makes before it touches the memory, and the symbol values the bound shapes imply.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.hpp"
#include "graph/tensor_view.hpp"

namespace weft {

struct Binding {
  TensorId tensor = kNoTensor;
  TensorView view;
};

// "input 'x'", "output 'logits'", ...: how messages name a bound tensor.
std::string binding_label(const TensorDesc& t);

// Symbol values implied by concrete shapes of bound tensors. Checks every rank, fixed dim, symbol range and
// that a symbol has one value everywhere; messages name the tensor, the dim and the symbol.
SymbolValues bind_symbols(const Graph& g, std::span<const std::pair<TensorId, std::vector<int64_t>>> shapes);

struct BoundTensors {
  std::vector<const TensorView*> views;  // per tensor: its binding, nullptr for unbound intermediates
  SymbolValues symbols;
};

// Checks that every input, weight, state and output is bound exactly once (never an intermediate), with its
// dtype, a non-null pointer, strides of the right rank and shapes that fit (bind_symbols). `memory` names the
// kind of pointer in messages ("data", "device"). Throws weft::Error (invalid_argument).
BoundTensors bind_tensors(const Graph& g, std::span<const Binding> bindings, const char* memory);

}  // namespace weft
