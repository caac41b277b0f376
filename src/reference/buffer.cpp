#include "reference/buffer.hpp"

#include <cmath>

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

void Buffer::set(int64_t k, double v) {
  if (is_float(dtype)) {
    f[static_cast<size_t>(k)] = static_cast<float>(v);
  } else {
    // float -> int truncates toward zero, as a C cast does; out-of-range values saturate instead of UB.
    double t = std::trunc(v);
    if (!(t >= -9.2e18)) t = std::isnan(v) ? 0.0 : -9.2e18;
    if (t > 9.2e18) t = 9.2e18;
    i[static_cast<size_t>(k)] = static_cast<int64_t>(t);
  }
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
