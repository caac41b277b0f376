// The tensor graph: symbols, tensors and op nodes in the order they were added (always topological:
// an op can only use tensors that exist). Every mutation validates; a Graph is never left half-changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/op_def.hpp"

namespace weft {

enum class TensorKind : int32_t { input = 0, weight = 1, state = 2, intermediate = 3 };

std::string_view tensor_kind_name(TensorKind k);

using TensorId = int32_t;
inline constexpr TensorId kNoTensor = -1;

struct TensorDesc {
  std::string name;
  TensorKind kind = TensorKind::input;
  TensorType type;
  int32_t producer = -1;  // node index, for intermediates
  bool is_output = false;
};

struct Node {
  const OpDef* op = nullptr;
  std::vector<TensorId> inputs;  // kNoTensor for an absent optional operand
  nlohmann::json attrs;          // normalized: every attribute present
  TensorId output = kNoTensor;
};

// Largest element count a tensor may have (at its symbols' maxima): keeps every size computation far from
// int64 overflow.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  const SymbolTable& symbols() const { return symbols_; }
  const std::vector<TensorDesc>& tensors() const { return tensors_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<TensorId>& outputs() const { return outputs_; }

  int32_t declare_symbol(const std::string& name, int64_t min, int64_t max) { return symbols_.declare(name, min, max); }
  void set_symbol_policy(int32_t id, SymbolPolicy policy, std::vector<int64_t> buckets) {
    symbols_.set_policy(id, policy, std::move(buckets));
  }

  // Adds a bound tensor (input, weight or state).
  TensorId add_tensor(TensorKind kind, const std::string& name, DType dtype, const Shape& shape);

  // Adds an op node; `name` may be empty (one is generated). Returns the result tensor.
  TensorId add_op(std::string_view op_name, const std::vector<TensorId>& inputs, const nlohmann::json& attrs,
                  const std::string& name);

  // Marks an op result as an output; a non-empty `name` renames it.
  void mark_output(TensorId t, const std::string& name);

  // Whole-graph checks (outputs present and produced).
  void validate() const;

  const TensorDesc& tensor(TensorId id) const;
  TensorId find_tensor(const std::string& name) const;  // kNoTensor if none
  std::string label(TensorId id) const;                 // "input 'x' [batch, 64] bf16"

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void check_shape(const std::string& tensor_name, const Shape& shape) const;

  std::string name_;
  SymbolTable symbols_;
  std::vector<TensorDesc> tensors_;
  std::vector<Node> nodes_;
  std::vector<TensorId> outputs_;
};

}  // namespace weft
