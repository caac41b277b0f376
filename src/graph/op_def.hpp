// The op table: one OpDef per op, with its operands, attributes, shape rule and CPU reference kernel.
// Adding an op = one line in ops/op_list.inc + one file under ops/ that defines its OpDef.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/dtype.hpp"
#include "graph/shape.hpp"

namespace weft {

struct Buffer;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
};

enum class AttrKind {
  integer,  // JSON integer
  number,   // JSON number (stored as double)
  boolean,
  string,   // one of AttrSpec::choices when that is non-empty
  dims,     // a shape: list of integers (fixed) and strings (symbol names)
};

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  nlohmann::json default_value;  // null: required
  std::vector<std::string_view> choices = {};
};

struct OperandSpec {
  std::string_view name;
  bool optional = false;
};

class InferCtx;
class RefCtx;

// rmsnorm_linear / silu_mul_linear run on the device as streamed GEMV tiles: a weight row (K elements) must be
// a multiple of kFusedLinearRowAlign bytes and fit, for one row of x, beside the stream's ring in shared memory.
inline constexpr int64_t kFusedLinearRowAlign = 512;
inline constexpr int64_t kFusedLinearMaxRowBytes = 95 * 1024;
bool fused_linear_supported(int64_t k, DType dtype);

struct OpDef {
  std::string_view name;
  std::vector<OperandSpec> operands;  // for a variadic op, the one spec that repeats
  bool variadic = false;
  std::vector<int> writes_operands;  // operands the op updates in place; each must be a STATE tensor
  std::vector<AttrSpec> attrs;
  TensorType (*infer)(const InferCtx&) = nullptr;  // throws weft::Error on a mismatch
  void (*reference)(const RefCtx&) = nullptr;      // throws weft::Error on a failed run-time precondition
};

// What a shape rule sees: the operand types (nullptr for an absent optional operand) and the normalized
// attributes (every spec present, defaults filled in). Its helpers throw messages that name the op, the
// result, the operand and the dim.
class InferCtx {
 public:
  InferCtx(const OpDef& op, const std::string& result_name, const SymbolTable& symbols,
           const nlohmann::json& attrs, std::vector<const TensorType*> inputs)
      : op_(op), result_(result_name), symbols_(symbols), attrs_(attrs), inputs_(std::move(inputs)) {}

  const SymbolTable& symbols() const { return symbols_; }
  size_t count() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const TensorType& in(size_t i) const;
  const Shape& shape(size_t i) const { return in(i).shape; }
  int rank(size_t i) const { return static_cast<int>(in(i).shape.size()); }

  std::string operand(size_t i) const;  // "operand 'weight'" (or "operand 2" for a variadic op)
  [[noreturn]] void fail(const std::string& message) const;

  int64_t attr_int(std::string_view name) const;
  double attr_num(std::string_view name) const;
  bool attr_bool(std::string_view name) const;
  std::string attr_str(std::string_view name) const;
  const nlohmann::json& attr(std::string_view name) const;

  void expect_float(size_t i) const;
  void expect_int(size_t i) const;
  void expect_same_dtype(size_t i, size_t j) const;
  void expect_rank(size_t i, int r) const;
  void expect_rank_at_least(size_t i, int r) const;
  // Dim `ai` of operand i equals dim `aj` of operand j (negative axes count from the end).
  void expect_dim_equal(size_t i, int ai, size_t j, int aj) const;
  // Dim `a` of operand i is the fixed value v.
  void expect_dim_is(size_t i, int a, int64_t v, const std::string& why) const;
  // The value of a dim that must be fixed (the op's tiling depends on it).
  int64_t fixed_dim(size_t i, int a, const std::string& why) const;
  // Normalizes a possibly negative axis for operand i.
  int axis(size_t i, int64_t a) const;
  std::string dim_str(const Dim& d) const { return symbols_.dim_str(d); }

 private:
  const OpDef& op_;
  const std::string& result_;
  const SymbolTable& symbols_;
  const nlohmann::json& attrs_;
  std::vector<const TensorType*> inputs_;
};

// What a reference kernel sees: concrete buffers (nullptr for an absent operand) and the output buffer,
// already shaped; operands listed in writes_operands may be modified.
class RefCtx {
 public:
  RefCtx(const OpDef& op, const std::string& result_name, const nlohmann::json& attrs, std::vector<Buffer*> inputs,
         Buffer& out)
      : op_(op), result_(result_name), attrs_(attrs), inputs_(std::move(inputs)), out_(out) {}

  size_t count() const { return inputs_.size(); }
  bool has(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  const Buffer& in(size_t i) const;
  Buffer& in_mut(size_t i) const;  // only for writes_operands
  Buffer& out() const { return out_; }
  const nlohmann::json& attrs() const { return attrs_; }
  int64_t attr_int(std::string_view name) const;
  double attr_num(std::string_view name) const;
  bool attr_bool(std::string_view name) const;
  std::string attr_str(std::string_view name) const;
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const OpDef& op_;
  const std::string& result_;
  const nlohmann::json& attrs_;
  std::vector<Buffer*> inputs_;
  Buffer& out_;
};

// The table.
std::span<const OpDef* const> all_ops();
const OpDef* find_op(std::string_view name);

// Checks and completes attributes against the op's specs: unknown keys, wrong kinds, choices not in the
// list and missing required ones are errors naming the op and the attribute.
nlohmann::json normalize_attrs(const OpDef& op, const std::string& result_name, const nlohmann::json& given);

}  // namespace weft
