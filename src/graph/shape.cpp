#include "graph/shape.hpp"

#include <algorithm>
#include <cctype>

#include "core/error.hpp"

namespace weft {

namespace {
bool valid_identifier(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}
}  // namespace

int32_t SymbolTable::declare(const std::string& name, int64_t min, int64_t max) {
  if (!valid_identifier(name))
    invalid("symbol name '" + name + "' is not an identifier (letters, digits and '_', at most 64, not starting with a digit)");
  if (find(name) >= 0) invalid("symbol '" + name + "' is already declared");
  if (min < 1) invalid("symbol '" + name + "': min " + std::to_string(min) + " must be >= 1 (dims are never 0)");
  if (max < min)
    invalid("symbol '" + name + "': range [" + std::to_string(min) + ", " + std::to_string(max) + "] is empty; expected min <= max");
  symbols_.push_back(Symbol{name, min, max, SymbolPolicy::automatic, {}});
  return static_cast<int32_t>(symbols_.size() - 1);
}

const char* symbol_policy_name(SymbolPolicy p) {
  switch (p) {
    case SymbolPolicy::exact: return "exact";
    case SymbolPolicy::buckets: return "buckets";
    case SymbolPolicy::runtime: return "runtime";
    default: return "auto";
  }
}

std::optional<SymbolPolicy> parse_symbol_policy(const std::string& name) {
  for (SymbolPolicy p : {SymbolPolicy::automatic, SymbolPolicy::exact, SymbolPolicy::buckets, SymbolPolicy::runtime})
    if (name == symbol_policy_name(p)) return p;
  return std::nullopt;
}

void SymbolTable::set_policy(int32_t id, SymbolPolicy policy, std::vector<int64_t> buckets) {
  Symbol& s = symbols_.at(static_cast<size_t>(id));
  const auto p = static_cast<int32_t>(policy);
  if (p < 0 || p > static_cast<int32_t>(SymbolPolicy::runtime))
    invalid("symbol '" + s.name + "': policy " + std::to_string(p) + " is not AUTO, EXACT, BUCKETS or RUNTIME");
  if (!buckets.empty() && policy != SymbolPolicy::buckets)
    invalid("symbol '" + s.name + "': a bucket list is only for the BUCKETS policy");
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (buckets[i] < s.min || buckets[i] > s.max)
      invalid("symbol '" + s.name + "': bucket " + std::to_string(i) + " is " + std::to_string(buckets[i]) +
              "; expected a value in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]");
    if (i && buckets[i] <= buckets[i - 1])
      invalid("symbol '" + s.name + "': bucket " + std::to_string(i) + " is " + std::to_string(buckets[i]) +
              ", not above the one before (" + std::to_string(buckets[i - 1]) + "); expected ascending bounds");
  }
  if (!buckets.empty() && buckets.back() != s.max) buckets.push_back(s.max);
  s.policy = policy;
  s.buckets = std::move(buckets);
}

std::vector<int64_t> specialization_buckets(const Symbol& s, SymbolPolicy policy) {
  switch (policy) {
    case SymbolPolicy::runtime:
      return {s.max};
    case SymbolPolicy::buckets: {
      if (!s.buckets.empty()) return s.buckets;
      std::vector<int64_t> out;
      for (int64_t p = 1; p < s.max; p *= 2) {
        if (p >= s.min) out.push_back(p);
        if (p > s.max / 2) break;
      }
      out.push_back(s.max);
      return out;
    }
    default:
      return {};
  }
}

int32_t SymbolTable::find(const std::string& name) const {
  for (size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

std::string SymbolTable::dim_str(const Dim& d) const {
  return d.is_fixed() ? std::to_string(d.value) : at(d.symbol).name;
}

std::string SymbolTable::shape_str(const Shape& s) const {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += dim_str(s[i]);
  }
  return out + "]";
}

int64_t resolve_dim(const Dim& d, const SymbolValues& values) {
  if (d.is_fixed()) return d.value;
  const auto i = static_cast<size_t>(d.symbol);
  if (i >= values.size() || values[i] == 0) fail(Status::internal, "symbol #" + std::to_string(d.symbol) + " has no value");
  return values[i];
}

std::vector<int64_t> resolve_shape(const Shape& s, const SymbolValues& values) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) out.push_back(resolve_dim(d, values));
  return out;
}

bool same_element_count(const Shape& a, const Shape& b) {
  // (product of fixed dims, sorted symbols); an overflowing product makes the shapes incomparable.
  auto summarize = [](const Shape& s, bool& overflow) {
    std::pair<int64_t, std::vector<int32_t>> r{1, {}};
    for (const Dim& d : s) {
      if (!d.is_fixed())
        r.second.push_back(d.symbol);
      else if (__builtin_mul_overflow(r.first, d.value, &r.first))
        overflow = true;
    }
    std::sort(r.second.begin(), r.second.end());
    return r;
  };
  bool overflow = false;
  const auto sa = summarize(a, overflow), sb = summarize(b, overflow);
  return !overflow && sa == sb;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace weft
