// Shapes whose dims are fixed integers or named symbols with an inclusive range (`batch` in [1, 64]).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace weft {

inline constexpr int kMaxRank = 8;

struct Symbol {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
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
