// A readable listing of a graph, for humans (samples, `weft inspect`, dumps); not parsed back.
#include <sstream>

#include "graph/serialize.hpp"

namespace weft {

std::string graph_to_text(const Graph& g) {
  std::ostringstream os;
  const SymbolTable& syms = g.symbols();
  auto type_str = [&](const TensorDesc& t) { return syms.shape_str(t.type.shape) + " " + std::string(dtype_name(t.type.dtype)); };
  os << "graph '" << g.name() << "'  hash " << hash_hex(graph_hash(g)) << "\n";
  for (const Symbol& s : syms.all()) {
    os << "  symbol " << s.name << " in [" << s.min << ", " << s.max << "]";
    if (s.policy != SymbolPolicy::automatic) os << " " << symbol_policy_name(s.policy);
    for (size_t i = 0; i < s.buckets.size(); ++i) os << (i ? ", " : " {") << s.buckets[i] << (i + 1 == s.buckets.size() ? "}" : "");
    os << "\n";
  }
  for (const TensorDesc& t : g.tensors())
    if (t.kind != TensorKind::intermediate) os << "  " << tensor_kind_name(t.kind) << " " << t.name << " " << type_str(t) << "\n";
  for (const Node& n : g.nodes()) {
    const TensorDesc& out = g.tensor(n.output);
    os << "  " << out.name << " = " << n.op->name << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << (n.inputs[i] == kNoTensor ? "-" : g.tensor(n.inputs[i]).name);
    os << ")";
    if (!n.attrs.empty()) os << " " << n.attrs.dump();
    os << " -> " << type_str(out) << (out.is_output ? "  [output]" : "") << "\n";
  }
  return os.str();
}

}  // namespace weft
