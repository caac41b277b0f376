// A dense row-major tensor value on the host, as the CPU reference interpreter holds it: float dtypes in
// f32 (each value already rounded to its dtype), integer dtypes in i64.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/dtype.hpp"

namespace weft {

struct Buffer {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<float> f;    // is_float(dtype)
  std::vector<int64_t> i;  // is_int(dtype)

  Buffer() = default;
  Buffer(DType d, std::vector<int64_t> s);

  int64_t numel() const;
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int axis) const;     // negative counts from the end
  int64_t rows() const;            // product of all dims but the last
  int64_t last() const { return shape.empty() ? 1 : shape.back(); }

  // Element access as double, whatever the storage (for dtype-generic kernels: cast, concat...).
  double get(int64_t k) const { return is_float(dtype) ? static_cast<double>(f[static_cast<size_t>(k)]) : static_cast<double>(i[static_cast<size_t>(k)]); }
  // Stores v converted to dtype's storage (integers: float_to_int).
  void set(int64_t k, double v);

  // Rounds every float value to the precision of dtype (what storing it on the GPU does) and wraps
  // integers to their width.
  void round_to_dtype();
};

// float -> i32/i64 as CUDA's cvt.rzi does: truncate toward zero, saturate to the type's range, NaN -> 0.
int64_t float_to_int(double v, DType to);

// Strides (in elements) of a dense row-major shape.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

}  // namespace weft
