#include "graph/serialize.hpp"

#include <map>
#include <set>

#include "core/error.hpp"

namespace weft {

namespace {

nlohmann::json dims_to_json(const Graph& g, const Shape& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const Dim& d : s) {
    if (d.is_fixed())
      a.push_back(d.value);
    else
      a.push_back(g.symbols().at(d.symbol).name);
  }
  return a;
}

// Field-path aware accessors for parsing: every error says where in the document it is.
const nlohmann::json& field(const nlohmann::json& obj, const std::string& path, const char* key) {
  if (!obj.is_object()) invalid("graph JSON: " + path + " is " + std::string(obj.type_name()) + "; expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) invalid("graph JSON: " + path + "." + key + " is missing");
  return *it;
}

std::string get_string(const nlohmann::json& v, const std::string& path) {
  if (!v.is_string()) invalid("graph JSON: " + path + " is " + v.dump() + "; expected a string");
  return v.get<std::string>();
}

int64_t get_int(const nlohmann::json& v, const std::string& path) {
  if (!v.is_number_integer()) invalid("graph JSON: " + path + " is " + v.dump() + "; expected an integer");
  return v.get<int64_t>();
}

const nlohmann::json& get_array(const nlohmann::json& v, const std::string& path) {
  if (!v.is_array()) invalid("graph JSON: " + path + " is " + std::string(v.type_name()) + "; expected an array");
  return v;
}

Shape parse_dims(const Graph& g, const nlohmann::json& v, const std::string& path) {
  Shape s;
  size_t i = 0;
  for (const auto& d : get_array(v, path)) {
    const std::string p = path + "[" + std::to_string(i++) + "]";
    if (d.is_string()) {
      const int32_t sym = g.symbols().find(d.get<std::string>());
      if (sym < 0) invalid("graph JSON: " + p + " names symbol '" + d.get<std::string>() + "', which is not declared in 'symbols'");
      s.push_back(Dim::sym(sym));
    } else {
      s.push_back(Dim::fixed(get_int(d, p)));
    }
  }
  return s;
}

TensorKind parse_kind(const std::string& k, const std::string& path) {
  for (TensorKind t : {TensorKind::input, TensorKind::weight, TensorKind::state})
    if (tensor_kind_name(t) == k) return t;
  invalid("graph JSON: " + path + " is '" + k + "'; expected 'input', 'weight' or 'state'");
}

// Rethrows a graph error with the JSON path in front, so a bad op in a file says where it is.
template <typename Fn>
auto at_path(const std::string& path, Fn fn) {
  try {
    return fn();
  } catch (const Error& e) {
    fail(e.status(), "graph JSON: " + path + ": " + e.what());
  }
}

}  // namespace

nlohmann::json graph_to_json(const Graph& g) {
  nlohmann::json j;
  j["format"] = "weft-graph";
  j["version"] = kGraphFormatVersion;
  j["name"] = g.name();
  j["symbols"] = nlohmann::json::array();
  for (const Symbol& s : g.symbols().all()) {
    nlohmann::json sj = {{"name", s.name}, {"min", s.min}, {"max", s.max}};
    // Written only when set, so graphs without policies read back in older weft versions.
    if (s.policy != SymbolPolicy::automatic) sj["policy"] = symbol_policy_name(s.policy);
    if (!s.buckets.empty()) sj["buckets"] = s.buckets;
    j["symbols"].push_back(std::move(sj));
  }
  j["tensors"] = nlohmann::json::array();
  j["ops"] = nlohmann::json::array();
  for (const TensorDesc& t : g.tensors()) {
    if (t.kind == TensorKind::intermediate) continue;
    j["tensors"].push_back({{"name", t.name},
                            {"kind", tensor_kind_name(t.kind)},
                            {"dtype", dtype_name(t.type.dtype)},
                            {"shape", dims_to_json(g, t.type.shape)}});
  }
  for (const Node& n : g.nodes()) {
    nlohmann::json ins = nlohmann::json::array();
    for (TensorId t : n.inputs) ins.push_back(t == kNoTensor ? nlohmann::json() : nlohmann::json(g.tensor(t).name));
    j["ops"].push_back({{"op", n.op->name}, {"inputs", ins}, {"attrs", n.attrs}, {"output", g.tensor(n.output).name}});
  }
  j["outputs"] = nlohmann::json::array();
  for (TensorId t : g.outputs()) j["outputs"].push_back(g.tensor(t).name);
  return j;
}

std::string graph_to_json_string(const Graph& g) { return graph_to_json(g).dump(1) + "\n"; }

Graph graph_from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    invalid(std::string("graph JSON does not parse: ") + e.what());
  }
  if (!j.is_object()) invalid("graph JSON: the document is " + std::string(j.type_name()) + "; expected an object");
  if (get_string(field(j, "$", "format"), "$.format") != "weft-graph")
    invalid("graph JSON: $.format is not 'weft-graph'");
  const int64_t version = get_int(field(j, "$", "version"), "$.version");
  if (version != kGraphFormatVersion)
    invalid("graph JSON: $.version is " + std::to_string(version) + "; this weft reads version " + std::to_string(kGraphFormatVersion));

  Graph g(j.contains("name") ? get_string(j["name"], "$.name") : "graph");
  size_t i = 0;
  for (const auto& s : get_array(field(j, "$", "symbols"), "$.symbols")) {
    const std::string p = "$.symbols[" + std::to_string(i++) + "]";
    const std::string name = get_string(field(s, p, "name"), p + ".name");
    const int64_t mn = get_int(field(s, p, "min"), p + ".min"), mx = get_int(field(s, p, "max"), p + ".max");
    const int32_t id = at_path(p, [&] { return g.declare_symbol(name, mn, mx); });
    if (s.contains("policy") || s.contains("buckets")) {
      const std::string policy = s.contains("policy") ? get_string(s["policy"], p + ".policy") : "buckets";
      const auto parsed = parse_symbol_policy(policy);
      if (!parsed) invalid("graph JSON: " + p + ".policy is '" + policy + "'; expected auto, exact, buckets or runtime");
      std::vector<int64_t> buckets;
      if (s.contains("buckets"))
        for (const auto& b : get_array(s["buckets"], p + ".buckets")) buckets.push_back(get_int(b, p + ".buckets[]"));
      at_path(p, [&] {
        g.set_symbol_policy(id, *parsed, buckets);
        return 0;
      });
    }
  }
  i = 0;
  for (const auto& t : get_array(field(j, "$", "tensors"), "$.tensors")) {
    const std::string p = "$.tensors[" + std::to_string(i++) + "]";
    const std::string name = get_string(field(t, p, "name"), p + ".name");
    const TensorKind kind = parse_kind(get_string(field(t, p, "kind"), p + ".kind"), p + ".kind");
    const std::string dt = get_string(field(t, p, "dtype"), p + ".dtype");
    const auto dtype = parse_dtype(dt);
    if (!dtype) invalid("graph JSON: " + p + ".dtype is '" + dt + "'; expected bf16, f16, f32, i32 or i64");
    const Shape shape = parse_dims(g, field(t, p, "shape"), p + ".shape");
    at_path(p, [&] { return g.add_tensor(kind, name, *dtype, shape); });
  }

  // Place ops in dependency order: repeatedly add every op whose inputs all exist.
  struct Pending {
    std::string path, op, output;
    std::vector<std::string> inputs;  // "" = absent
    nlohmann::json attrs;
  };
  std::vector<Pending> pending;
  std::set<std::string> produced;
  i = 0;
  for (const auto& o : get_array(field(j, "$", "ops"), "$.ops")) {
    Pending p;
    p.path = "$.ops[" + std::to_string(i++) + "]";
    p.op = get_string(field(o, p.path, "op"), p.path + ".op");
    p.output = get_string(field(o, p.path, "output"), p.path + ".output");
    size_t k = 0;
    for (const auto& in : get_array(field(o, p.path, "inputs"), p.path + ".inputs")) {
      const std::string ip = p.path + ".inputs[" + std::to_string(k++) + "]";
      p.inputs.push_back(in.is_null() ? std::string() : get_string(in, ip));
    }
    p.attrs = o.contains("attrs") ? o["attrs"] : nlohmann::json::object();
    if (!produced.insert(p.output).second) invalid("graph JSON: " + p.path + ".output '" + p.output + "' is produced by two ops");
    pending.push_back(std::move(p));
  }
  for (const Pending& p : pending)
    for (size_t k = 0; k < p.inputs.size(); ++k)
      if (!p.inputs[k].empty() && !produced.count(p.inputs[k]) && g.find_tensor(p.inputs[k]) == kNoTensor)
        invalid("graph JSON: " + p.path + ".inputs[" + std::to_string(k) + "] is '" + p.inputs[k] +
                "', which is neither a declared tensor nor an op's output");
  std::vector<bool> placed(pending.size(), false);
  for (size_t left = pending.size(); left > 0;) {
    size_t progress = 0;
    for (size_t n = 0; n < pending.size(); ++n) {
      if (placed[n]) continue;
      const Pending& p = pending[n];
      bool ready = true;
      for (const std::string& in : p.inputs) ready = ready && (in.empty() || g.find_tensor(in) != kNoTensor);
      if (!ready) continue;
      std::vector<TensorId> ids;
      for (const std::string& in : p.inputs) ids.push_back(in.empty() ? kNoTensor : g.find_tensor(in));
      at_path(p.path, [&] { return g.add_op(p.op, ids, p.attrs, p.output); });
      placed[n] = true;
      ++progress;
      --left;
    }
    if (progress == 0) {
      std::string cycle;
      for (size_t n = 0; n < pending.size(); ++n)
        if (!placed[n]) cycle += (cycle.empty() ? "" : ", ") + pending[n].path + " ('" + pending[n].output + "')";
      invalid("graph JSON: the ops form a cycle (each waits for another's output): " + cycle);
    }
  }
  i = 0;
  for (const auto& o : get_array(field(j, "$", "outputs"), "$.outputs")) {
    const std::string p = "$.outputs[" + std::to_string(i++) + "]";
    const std::string name = get_string(o, p);
    const TensorId t = g.find_tensor(name);
    if (t == kNoTensor) invalid("graph JSON: " + p + " is '" + name + "', which no op produces");
    at_path(p, [&] { g.mark_output(t, ""); return 0; });
  }
  g.validate();
  return g;
}

nlohmann::json graph_structure(const Graph& g) {
  // Names are labels: two graphs that differ only in tensor, symbol or graph names compute the same thing
  // and compile to the same kernel, so they share a hash (and a cache entry). Everything else is
  // positional: symbols by declaration index, tensors by creation index.
  nlohmann::json j;
  j["version"] = kGraphFormatVersion;
  j["symbols"] = nlohmann::json::array();
  for (const Symbol& s : g.symbols().all()) j["symbols"].push_back({s.min, s.max});
  auto dims = [&](const Shape& s) {
    nlohmann::json a = nlohmann::json::array();
    for (const Dim& d : s) a.push_back(d.is_fixed() ? nlohmann::json(d.value) : nlohmann::json("$" + std::to_string(d.symbol)));
    return a;
  };
  // Bound tensors are numbered among themselves ("t3") and op results by their op ("n5"), so a graph
  // built with its inputs declared late hashes the same as its canonical JSON read back.
  std::vector<std::string> ref(g.tensors().size());
  j["tensors"] = nlohmann::json::array();
  for (size_t i = 0, bound = 0; i < g.tensors().size(); ++i) {
    const TensorDesc& t = g.tensors()[i];
    if (t.kind == TensorKind::intermediate) {
      ref[i] = "n" + std::to_string(t.producer);
      continue;
    }
    ref[i] = "t" + std::to_string(bound++);
    j["tensors"].push_back({{"kind", tensor_kind_name(t.kind)}, {"dtype", dtype_name(t.type.dtype)}, {"shape", dims(t.type.shape)}});
  }
  j["ops"] = nlohmann::json::array();
  for (const Node& n : g.nodes()) {
    nlohmann::json attrs = n.attrs;
    // Symbol names inside dims-valued attributes become positions too.
    for (const AttrSpec& s : n.op->attrs) {
      if (s.kind != AttrKind::dims) continue;
      for (auto& d : attrs[std::string(s.name)])
        if (d.is_string()) d = "$" + std::to_string(g.symbols().find(d.get<std::string>()));
    }
    nlohmann::json ins = nlohmann::json::array();
    for (TensorId t : n.inputs) ins.push_back(t == kNoTensor ? nlohmann::json() : nlohmann::json(ref[static_cast<size_t>(t)]));
    j["ops"].push_back({{"op", n.op->name}, {"inputs", ins}, {"attrs", attrs}});
  }
  j["outputs"] = nlohmann::json::array();
  for (TensorId t : g.outputs()) j["outputs"].push_back(ref[static_cast<size_t>(t)]);
  return j;
}

}  // namespace weft
