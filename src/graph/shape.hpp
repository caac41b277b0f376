// Shapes whose dims are fixed integers or named symbols with an inclusive range (`batch` in [1, 64]).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft {

inline constexpr int kMaxRank = 8;

// How a program specializes kernels for a symbol's values (weft_symbol_policy in weft.h).
enum class SymbolPolicy : int32_t {
  automatic = 0,  // buckets when the kernel can mask the symbol's tail (graph/symbol_masking.hpp), else exact
  exact = 1,      // one kernel per value
  buckets = 2,    // one kernel per bucket (its upper bound), the tail masked on the device
  runtime = 3,    // one kernel for every value (compiled at max), the value a kernel parameter
};

const char* symbol_policy_name(SymbolPolicy p);  // "auto", "exact", "buckets", "runtime"
std::optional<SymbolPolicy> parse_symbol_policy(const std::string& name);

struct Symbol {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  SymbolPolicy policy = SymbolPolicy::automatic;
  std::vector<int64_t> buckets;  // policy buckets: ascending upper bounds in [min, max], the last == max;
                                 // empty: powers of two
};

// A dim is either fixed (symbol < 0, value >= 1) or the graph's symbol number `symbol` (value unused, 0).
struct Dim {
  int64_t value = 0;
  int32_t symbol = -1;

  static Dim fixed(int64_t v) { return Dim{v, -1}; }
  static Dim sym(int32_t s) { return Dim{0, s}; }
  bool is_fixed() const { return symbol < 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};

using Shape = std::vector<Dim>;

class SymbolTable {
 public:
  // Declares a symbol; throws on a bad name, an empty range or a duplicate.
  int32_t declare(const std::string& name, int64_t min, int64_t max);
  // Sets a symbol's specialization policy; `buckets` (policy buckets only; empty: powers of two) must be
  // ascending values in [min, max]; max is appended when missing. Throws on a bad list.
  void set_policy(int32_t id, SymbolPolicy policy, std::vector<int64_t> buckets);
  // -1 if unknown.
  int32_t find(const std::string& name) const;
  const Symbol& at(int32_t id) const { return symbols_.at(static_cast<size_t>(id)); }
  size_t size() const { return symbols_.size(); }
  const std::vector<Symbol>& all() const { return symbols_; }

  // Smallest and largest value a dim can take.
  int64_t min_of(const Dim& d) const { return d.is_fixed() ? d.value : at(d.symbol).min; }
  int64_t max_of(const Dim& d) const { return d.is_fixed() ? d.value : at(d.symbol).max; }

  std::string dim_str(const Dim& d) const;      // "7" or "batch"
  std::string shape_str(const Shape& s) const;  // "[batch, 4096]"

 private:
  std::vector<Symbol> symbols_;
};

// The upper bounds a symbol is specialized for under `policy` (never automatic): empty for exact (each value
// is its own), {max} for runtime, the symbol's list or the powers of two in [min, max) plus max for buckets.
std::vector<int64_t> specialization_buckets(const Symbol& s, SymbolPolicy policy);

// Concrete values of the symbols during one run, indexed by symbol id (0 = not yet known).
using SymbolValues = std::vector<int64_t>;

// The concrete size of a dim; the symbol must be known.
int64_t resolve_dim(const Dim& d, const SymbolValues& values);
std::vector<int64_t> resolve_shape(const Shape& s, const SymbolValues& values);

// True when two shapes certainly have the same element count (same product of fixed dims and the same
// multiset of symbols).
bool same_element_count(const Shape& a, const Shape& b);

int64_t element_count(const std::vector<int64_t>& shape);

}  // namespace weft
