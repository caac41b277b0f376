#include "graph/graph.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace weft {

std::string_view tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::input: return "input";
    case TensorKind::weight: return "weight";
    case TensorKind::state: return "state";
    case TensorKind::intermediate: return "intermediate";
  }
  return "unknown";
}

const TensorDesc& Graph::tensor(TensorId id) const {
  if (id < 0 || static_cast<size_t>(id) >= tensors_.size())
    invalid("tensor #" + std::to_string(id) + " does not exist in graph '" + name_ + "' (it has " +
            std::to_string(tensors_.size()) + " tensors)");
  return tensors_[static_cast<size_t>(id)];
}

TensorId Graph::find_tensor(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return static_cast<TensorId>(i);
  return kNoTensor;
}

std::string Graph::label(TensorId id) const {
  const TensorDesc& t = tensor(id);
  return std::string(tensor_kind_name(t.kind)) + " '" + t.name + "' " + symbols_.shape_str(t.type.shape) + " " +
         std::string(dtype_name(t.type.dtype));
}

void Graph::check_new_name(const std::string& name, const char* what) const {
  if (name.empty()) invalid(std::string(what) + " name is empty; expected a non-empty name");
  if (name.size() > 256) invalid(std::string(what) + " name '" + name.substr(0, 32) + "...' is longer than 256 characters");
  if (find_tensor(name) != kNoTensor) invalid(std::string(what) + " name '" + name + "' is already used by " + label(find_tensor(name)));
}

void Graph::check_shape(const std::string& tensor_name, const Shape& shape) const {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    invalid("tensor '" + tensor_name + "' has rank " + std::to_string(shape.size()) + "; expected at most " + std::to_string(kMaxRank));
  double max_elems = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.is_fixed() && d.value < 1)
      invalid("tensor '" + tensor_name + "' dim " + std::to_string(i) + " is " + std::to_string(d.value) +
              "; expected a size >= 1 (zero-sized and negative dims are not supported)");
    if (!d.is_fixed() && (d.symbol < 0 || static_cast<size_t>(d.symbol) >= symbols_.size()))
      invalid("tensor '" + tensor_name + "' dim " + std::to_string(i) + " names an undeclared symbol");
    max_elems *= static_cast<double>(symbols_.max_of(d));
  }
  if (max_elems > static_cast<double>(kMaxElements))
    invalid("tensor '" + tensor_name + "' " + symbols_.shape_str(shape) + " can hold up to " + std::to_string(max_elems) +
            " elements; expected at most 2^48");
}

TensorId Graph::add_tensor(TensorKind kind, const std::string& name, DType dtype, const Shape& shape) {
  if (kind == TensorKind::intermediate) invalid("tensor '" + name + "': intermediates are made by ops, not added directly");
  check_new_name(name, "tensor");
  check_shape(name, shape);
  tensors_.push_back(TensorDesc{name, kind, TensorType{dtype, shape}, -1, false});
  return static_cast<TensorId>(tensors_.size() - 1);
}

TensorId Graph::add_op(std::string_view op_name, const std::vector<TensorId>& given_inputs, const nlohmann::json& attrs,
                       const std::string& name) {

  const OpDef* op = find_op(op_name);
  if (!op) {
    std::string known;
    for (const OpDef* d : all_ops()) known += (known.empty() ? "" : ", ") + std::string(d->name);
    invalid("unknown op '" + std::string(op_name) + "'; expected one of: " + known);
  }
  // Trailing absent optionals are dropped: (x, w) and (x, w, none, none) are the same node and hash alike.
  std::vector<TensorId> inputs = given_inputs;
  while (!op->variadic && !inputs.empty() && inputs.size() <= op->operands.size() && inputs.back() == kNoTensor &&
         op->operands[inputs.size() - 1].optional)
    inputs.pop_back();
  std::string result = name;
  if (result.empty()) {
    for (size_t n = nodes_.size();; ++n) {
      result = std::string(op->name) + "_" + std::to_string(n);
      if (find_tensor(result) == kNoTensor) break;
    }
  }
  check_new_name(result, ("op '" + std::string(op->name) + "' result").c_str());
  const std::string prefix = "op '" + std::string(op->name) + "' (result '" + result + "'): ";

  const size_t fixed = op->operands.size();
  if (op->variadic) {
    if (inputs.empty()) invalid(prefix + "got no operands; expected at least 1");
  } else {
    size_t required = 0;
    for (const OperandSpec& s : op->operands) required += s.optional ? 0 : 1;
    if (inputs.size() < required || inputs.size() > fixed)
      invalid(prefix + "got " + std::to_string(inputs.size()) + " operands; expected " +
              (required == fixed ? std::to_string(fixed) : std::to_string(required) + " to " + std::to_string(fixed)));
  }

  std::vector<const TensorType*> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool optional = !op->variadic && op->operands[i].optional;
    const std::string which = op->variadic ? "operand " + std::to_string(i)
                                           : "operand '" + std::string(op->operands[i].name) + "'";
    if (inputs[i] == kNoTensor) {
      if (!optional) invalid(prefix + which + " is required but absent");
      types.push_back(nullptr);
      continue;
    }
    if (inputs[i] < 0 || static_cast<size_t>(inputs[i]) >= tensors_.size())
      invalid(prefix + which + " is tensor #" + std::to_string(inputs[i]) + ", which does not exist in graph '" + name_ + "'");
    types.push_back(&tensors_[static_cast<size_t>(inputs[i])].type);
  }
  for (int w : op->writes_operands) {
    if (static_cast<size_t>(w) >= inputs.size() || inputs[static_cast<size_t>(w)] == kNoTensor) continue;
    const TensorId t = inputs[static_cast<size_t>(w)];
    const TensorDesc& d = tensors_[static_cast<size_t>(t)];
    if (d.kind != TensorKind::state)
      invalid(prefix + "operand '" + std::string(op->operands[static_cast<size_t>(w)].name) + "' is " + label(t) +
              "; expected a state tensor (the op writes it in place)");
    for (const Node& n : nodes_)
      for (int w2 : n.op->writes_operands)
        if (static_cast<size_t>(w2) < n.inputs.size() && n.inputs[static_cast<size_t>(w2)] == t)
          invalid(prefix + "state tensor '" + d.name + "' is already written by op '" + std::string(n.op->name) +
                  "' (result '" + tensors_[static_cast<size_t>(n.output)].name + "'); expected one writer per state tensor");
  }

  nlohmann::json normalized = normalize_attrs(*op, result, attrs);
  InferCtx ctx(*op, result, symbols_, normalized, types);
  TensorType out = op->infer(ctx);
  check_shape(result, out.shape);

  nodes_.push_back(Node{op, inputs, std::move(normalized), static_cast<TensorId>(tensors_.size())});
  tensors_.push_back(TensorDesc{result, TensorKind::intermediate, std::move(out), static_cast<int32_t>(nodes_.size() - 1), false});
  return static_cast<TensorId>(tensors_.size() - 1);
}

void Graph::mark_output(TensorId t, const std::string& name) {
  const TensorDesc& d = tensor(t);
  if (d.kind != TensorKind::intermediate)
    invalid("cannot mark " + label(t) + " as an output: it is never produced by an op; expected an op result");
  if (d.is_output) invalid("tensor '" + d.name + "' is already marked as an output");
  if (!name.empty() && name != d.name) check_new_name(name, "output");
  TensorDesc& m = tensors_[static_cast<size_t>(t)];
  if (!name.empty()) m.name = name;
  m.is_output = true;
  outputs_.push_back(t);
}

void Graph::validate() const {
  if (outputs_.empty()) invalid("graph '" + name_ + "' has no outputs; mark at least one op result with mark_output");
  for (TensorId t : outputs_) {
    const TensorDesc& d = tensor(t);
    if (d.kind != TensorKind::intermediate || d.producer < 0)
      invalid("output '" + d.name + "' is never produced by an op");
  }
  for (size_t n = 0; n < nodes_.size(); ++n)
    for (TensorId in : nodes_[n].inputs) {
      if (in == kNoTensor) continue;
      const TensorDesc& d = tensor(in);
      if (d.producer >= static_cast<int32_t>(n))
        fail(Status::internal, "node " + std::to_string(n) + " reads '" + d.name + "' before it is produced");
    }
}

}  // namespace weft
