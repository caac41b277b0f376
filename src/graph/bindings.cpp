#include "graph/bindings.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace weft {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string binding_label(const TensorDesc& t) {
  return (t.is_output ? std::string("output") : std::string(tensor_kind_name(t.kind))) + " '" + t.name + "'";
}

SymbolValues bind_symbols(const Graph& g, std::span<const std::pair<TensorId, std::vector<int64_t>>> shapes) {
  const SymbolTable& syms = g.symbols();
  SymbolValues values(syms.size(), 0);
  std::vector<std::string> source(syms.size());
  for (const auto& [id, shape] : shapes) {
    const TensorDesc& t = g.tensor(id);
    const Shape& want = t.type.shape;
    const std::string label = binding_label(t);
    if (shape.size() != want.size())
      invalid(label + " is bound with rank " + std::to_string(shape.size()) + " " + shape_str(shape) + "; expected rank " +
              std::to_string(want.size()) + " " + syms.shape_str(want));
    for (size_t i = 0; i < want.size(); ++i) {
      const Dim& d = want[i];
      const int64_t got = shape[i];
      if (d.is_fixed()) {
        if (got != d.value)
          invalid(label + " dim " + std::to_string(i) + " is bound as " + std::to_string(got) + "; expected " +
                  std::to_string(d.value) + " (shape " + syms.shape_str(want) + ")");
        continue;
      }
      const Symbol& s = syms.at(d.symbol);
      const auto si = static_cast<size_t>(d.symbol);
      if (got < s.min || got > s.max)
        invalid(label + " dim " + std::to_string(i) + " (symbol '" + s.name + "') is " + std::to_string(got) +
                "; expected a value in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]");
      if (values[si] == 0) {
        values[si] = got;
        source[si] = label + " dim " + std::to_string(i);
      } else if (values[si] != got) {
        invalid(label + " dim " + std::to_string(i) + " (symbol '" + s.name + "') is " + std::to_string(got) +
                "; expected " + std::to_string(values[si]) + ", the value of '" + s.name + "' from " + source[si]);
      }
    }
  }
  return values;
}

BoundTensors bind_tensors(const Graph& g, std::span<const Binding> bindings, const char* memory) {
  const auto& tensors = g.tensors();
  BoundTensors out;
  out.views.assign(tensors.size(), nullptr);
  for (const Binding& b : bindings) {
    const TensorDesc& t = g.tensor(b.tensor);
    const std::string label = binding_label(t);
    if (t.kind == TensorKind::intermediate && !t.is_output)
      invalid("tensor '" + t.name + "' is an intermediate (made by op '" + std::string(g.nodes()[static_cast<size_t>(t.producer)].op->name) +
              "'); only inputs, weights, states and outputs are bound");
    if (out.views[static_cast<size_t>(b.tensor)]) invalid(label + " is bound twice");
    if (!b.view.data) invalid(label + " is bound to a NULL " + memory + " pointer");
    if (b.view.dtype != t.type.dtype)
      invalid(label + " is bound with dtype " + std::string(dtype_name(b.view.dtype)) + "; expected " +
              std::string(dtype_name(t.type.dtype)));
    if (!b.view.strides.empty() && b.view.strides.size() != b.view.shape.size())
      invalid(label + " has " + std::to_string(b.view.strides.size()) + " strides for rank " + std::to_string(b.view.shape.size()));
    out.views[static_cast<size_t>(b.tensor)] = &b.view;
  }
  std::vector<std::pair<TensorId, std::vector<int64_t>>> shapes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    if (t.kind == TensorKind::intermediate && !t.is_output) continue;
    if (!out.views[i]) invalid(binding_label(t) + " is not bound; every input, weight, state and output needs a binding");
    shapes.emplace_back(static_cast<TensorId>(i), out.views[i]->shape);
  }
  // Inputs first so that a symbol's value is reported as coming from an input, not an output.
  std::stable_partition(shapes.begin(), shapes.end(), [&](const auto& p) { return !tensors[static_cast<size_t>(p.first)].is_output; });
  out.symbols = bind_symbols(g, shapes);
  return out;
}

}  // namespace weft
