// Element types of graph tensors. Values equal the C API's weft_dtype so translation is a range check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft {

enum class DType : int32_t { bf16 = 0, f16 = 1, f32 = 2, i32 = 3, i64 = 4 };

inline constexpr int kNumDTypes = 5;

std::string_view dtype_name(DType d);
std::optional<DType> parse_dtype(std::string_view name);
bool dtype_is_valid(int32_t raw);
size_t dtype_size(DType d);
inline bool is_float(DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; }
inline bool is_int(DType d) { return d == DType::i32 || d == DType::i64; }

}  // namespace weft
