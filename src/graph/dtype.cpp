#include "graph/dtype.hpp"

#include <array>

namespace weft {

namespace {
constexpr std::array<std::string_view, kNumDTypes> kNames = {"bf16", "f16", "f32", "i32", "i64"};
constexpr std::array<size_t, kNumDTypes> kSizes = {2, 2, 4, 4, 8};
}  // namespace

bool dtype_is_valid(int32_t raw) { return raw >= 0 && raw < kNumDTypes; }

std::string_view dtype_name(DType d) {
  const auto i = static_cast<int32_t>(d);
  return dtype_is_valid(i) ? kNames[static_cast<size_t>(i)] : std::string_view("unknown");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

size_t dtype_size(DType d) { return kSizes[static_cast<size_t>(d)]; }

}  // namespace weft
