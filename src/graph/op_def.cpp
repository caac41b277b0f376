#include "graph/op_def.hpp"

#include <algorithm>
#include <array>

#include "core/error.hpp"
#include "reference/buffer.hpp"

namespace weft {

#define WEFT_OP(name) const OpDef& op_def_##name();
#include "graph/ops/op_list.inc"
#undef WEFT_OP

std::span<const OpDef* const> all_ops() {
  static const auto table = [] {
    return std::array{
#define WEFT_OP(name) &op_def_##name(),
#include "graph/ops/op_list.inc"
#undef WEFT_OP
    };
  }();
  return table;
}

const OpDef* find_op(std::string_view name) {
  for (const OpDef* op : all_ops())
    if (op->name == name) return op;
  return nullptr;
}

namespace {

std::string op_prefix(const OpDef& op, const std::string& result) {
  return "op '" + std::string(op.name) + "' (result '" + result + "'): ";
}

const char* kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::integer: return "an integer";
    case AttrKind::number: return "a number";
    case AttrKind::boolean: return "a boolean";
    case AttrKind::string: return "a string";
    case AttrKind::dims: return "a list of dims (integers or symbol names)";
  }
  return "?";
}

bool kind_matches(AttrKind k, const nlohmann::json& v) {
  switch (k) {
    case AttrKind::integer: return v.is_number_integer();
    case AttrKind::number: return v.is_number();
    case AttrKind::boolean: return v.is_boolean();
    case AttrKind::string: return v.is_string();
    case AttrKind::dims:
      return v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) {
               return e.is_number_integer() || e.is_string();
             });
  }
  return false;
}

const nlohmann::json& attr_of(const OpDef& op, const std::string& result, const nlohmann::json& attrs,
                              std::string_view name) {
  auto it = attrs.find(std::string(name));
  if (it == attrs.end()) fail(Status::internal, op_prefix(op, result) + "attribute '" + std::string(name) + "' missing");
  return *it;
}

}  // namespace

nlohmann::json normalize_attrs(const OpDef& op, const std::string& result, const nlohmann::json& given) {
  if (!given.is_null() && !given.is_object()) invalid(op_prefix(op, result) + "attributes must be a JSON object");
  nlohmann::json out = nlohmann::json::object();
  if (given.is_object()) {
    for (auto it = given.begin(); it != given.end(); ++it) {
      auto spec = std::find_if(op.attrs.begin(), op.attrs.end(), [&](const AttrSpec& s) { return s.name == it.key(); });
      if (spec == op.attrs.end()) {
        std::string known;
        for (const AttrSpec& s : op.attrs) known += (known.empty() ? "" : ", ") + std::string(s.name);
        invalid(op_prefix(op, result) + "unknown attribute '" + it.key() + "'; expected one of: " +
                (known.empty() ? "(none)" : known));
      }
      if (!kind_matches(spec->kind, it.value()))
        invalid(op_prefix(op, result) + "attribute '" + it.key() + "' is " + it.value().dump() + "; expected " +
                kind_name(spec->kind));
      nlohmann::json v = it.value();
      // Integers and doubles compare differently in JSON; store numbers as doubles so 1 and 1.0 hash alike.
      if (spec->kind == AttrKind::number) v = v.get<double>();
      if (!spec->choices.empty() &&
          std::find(spec->choices.begin(), spec->choices.end(), v.get<std::string>()) == spec->choices.end()) {
        std::string list;
        for (auto c : spec->choices) list += (list.empty() ? "'" : ", '") + std::string(c) + "'";
        invalid(op_prefix(op, result) + "attribute '" + it.key() + "' is '" + v.get<std::string>() + "'; expected one of " + list);
      }
      out[it.key()] = std::move(v);
    }
  }
  for (const AttrSpec& s : op.attrs) {
    if (out.contains(std::string(s.name))) continue;
    if (s.default_value.is_null()) invalid(op_prefix(op, result) + "attribute '" + std::string(s.name) + "' is required");
    out[std::string(s.name)] = s.kind == AttrKind::number ? nlohmann::json(s.default_value.get<double>()) : s.default_value;
  }
  return out;
}

// ---- InferCtx --------------------------------------------------------------------------------------

const TensorType& InferCtx::in(size_t i) const {
  if (!has(i)) weft::fail(Status::internal, op_prefix(op_, result_) + operand(i) + " is absent");
  return *inputs_[i];
}

std::string InferCtx::operand(size_t i) const {
  if (op_.variadic) return "operand " + std::to_string(i);
  if (i < op_.operands.size()) return "operand '" + std::string(op_.operands[i].name) + "'";
  return "operand " + std::to_string(i);
}

void InferCtx::fail(const std::string& message) const { invalid(op_prefix(op_, result_) + message); }

const nlohmann::json& InferCtx::attr(std::string_view name) const { return attr_of(op_, result_, attrs_, name); }
int64_t InferCtx::attr_int(std::string_view name) const { return attr(name).get<int64_t>(); }
double InferCtx::attr_num(std::string_view name) const { return attr(name).get<double>(); }
bool InferCtx::attr_bool(std::string_view name) const { return attr(name).get<bool>(); }
std::string InferCtx::attr_str(std::string_view name) const { return attr(name).get<std::string>(); }

void InferCtx::expect_float(size_t i) const {
  if (!is_float(in(i).dtype))
    fail(operand(i) + " has dtype " + std::string(dtype_name(in(i).dtype)) + "; expected a float dtype (bf16, f16, f32)");
}

void InferCtx::expect_int(size_t i) const {
  if (!is_int(in(i).dtype))
    fail(operand(i) + " has dtype " + std::string(dtype_name(in(i).dtype)) + "; expected an integer dtype (i32, i64)");
}

void InferCtx::expect_same_dtype(size_t i, size_t j) const {
  if (in(i).dtype != in(j).dtype)
    fail(operand(j) + " has dtype " + std::string(dtype_name(in(j).dtype)) + "; expected " +
         std::string(dtype_name(in(i).dtype)) + " (the dtype of " + operand(i) + "); insert a cast");
}

void InferCtx::expect_rank(size_t i, int r) const {
  if (rank(i) != r)
    fail(operand(i) + " has rank " + std::to_string(rank(i)) + " (shape " + symbols_.shape_str(shape(i)) +
         "); expected rank " + std::to_string(r));
}

void InferCtx::expect_rank_at_least(size_t i, int r) const {
  if (rank(i) < r)
    fail(operand(i) + " has rank " + std::to_string(rank(i)) + " (shape " + symbols_.shape_str(shape(i)) +
         "); expected rank >= " + std::to_string(r));
}

int InferCtx::axis(size_t i, int64_t a) const {
  const int r = rank(i);
  if (a < -r || a >= r)
    fail("axis " + std::to_string(a) + " is out of range for " + operand(i) + " of rank " + std::to_string(r) +
         "; expected -" + std::to_string(r) + " <= axis < " + std::to_string(r));
  return static_cast<int>(a < 0 ? a + r : a);
}

void InferCtx::expect_dim_equal(size_t i, int ai, size_t j, int aj) const {
  const int a = axis(i, ai), b = axis(j, aj);
  const Dim& di = shape(i)[static_cast<size_t>(a)];
  const Dim& dj = shape(j)[static_cast<size_t>(b)];
  if (!(di == dj))
    fail(operand(j) + " dim " + std::to_string(b) + " is " + dim_str(dj) + " (shape " + symbols_.shape_str(shape(j)) +
         "); expected " + dim_str(di) + " (dim " + std::to_string(a) + " of " + operand(i) + ")");
}

void InferCtx::expect_dim_is(size_t i, int ai, int64_t v, const std::string& why) const {
  const int a = axis(i, ai);
  const Dim& d = shape(i)[static_cast<size_t>(a)];
  if (!(d.is_fixed() && d.value == v))
    fail(operand(i) + " dim " + std::to_string(a) + " is " + dim_str(d) + " (shape " + symbols_.shape_str(shape(i)) +
         "); expected " + std::to_string(v) + " (" + why + ")");
}

int64_t InferCtx::fixed_dim(size_t i, int ai, const std::string& why) const {
  const int a = axis(i, ai);
  const Dim& d = shape(i)[static_cast<size_t>(a)];
  if (!d.is_fixed())
    fail(operand(i) + " dim " + std::to_string(a) + " is the symbol '" + dim_str(d) + "'; expected a fixed size (" + why + ")");
  return d.value;
}

// ---- RefCtx ----------------------------------------------------------------------------------------

const Buffer& RefCtx::in(size_t i) const {
  if (!has(i)) weft::fail(Status::internal, op_prefix(op_, result_) + "operand " + std::to_string(i) + " is absent");
  return *inputs_[i];
}

Buffer& RefCtx::in_mut(size_t i) const {
  if (std::find(op_.writes_operands.begin(), op_.writes_operands.end(), static_cast<int>(i)) == op_.writes_operands.end())
    weft::fail(Status::internal, op_prefix(op_, result_) + "operand " + std::to_string(i) + " is not writable");
  return const_cast<Buffer&>(in(i));
}

void RefCtx::fail(const std::string& message) const { invalid(op_prefix(op_, result_) + message); }
int64_t RefCtx::attr_int(std::string_view name) const { return attr_of(op_, result_, attrs_, name).get<int64_t>(); }
double RefCtx::attr_num(std::string_view name) const { return attr_of(op_, result_, attrs_, name).get<double>(); }
bool RefCtx::attr_bool(std::string_view name) const { return attr_of(op_, result_, attrs_, name).get<bool>(); }
std::string RefCtx::attr_str(std::string_view name) const { return attr_of(op_, result_, attrs_, name).get<std::string>(); }

}  // namespace weft
