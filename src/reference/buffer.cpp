#include "reference/buffer.hpp"

#include <cmath>
#include <limits>

#include "core/half.hpp"

namespace weft {

Buffer::Buffer(DType d, std::vector<int64_t> s) : dtype(d), shape(std::move(s)) {
  const auto n = static_cast<size_t>(numel());
  if (is_float(dtype))
    f.assign(n, 0.0f);
  else
    i.assign(n, 0);
}

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Buffer::dim(int axis) const {
  const int r = rank();
  return shape[static_cast<size_t>(axis < 0 ? axis + r : axis)];
}

int64_t Buffer::rows() const { return last() == 0 ? 0 : numel() / last(); }

int64_t float_to_int(double v, DType to) {
  if (std::isnan(v)) return 0;
  const double lo = to == DType::i32 ? -2147483648.0 : -9223372036854775808.0;  // -2^31, -2^63: exact
  const double t = std::trunc(v);
  if (t < lo) return to == DType::i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  if (t >= -lo) return to == DType::i32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(t);
}

void Buffer::set(int64_t k, double v) {
  if (is_float(dtype))
    f[static_cast<size_t>(k)] = static_cast<float>(v);
  else
    i[static_cast<size_t>(k)] = float_to_int(v, dtype);
}

void Buffer::round_to_dtype() {
  switch (dtype) {
    case DType::bf16:
      for (float& v : f) v = round_to_bf16(v);
      break;
    case DType::f16:
      for (float& v : f) v = round_to_f16(v);
      break;
    case DType::i32:
      for (int64_t& v : i) v = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
      break;
    case DType::f32:
    case DType::i64:
      break;
  }
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

}  // namespace weft
