// Caller-owned memory bound to a graph tensor for one run: host memory for the reference interpreter, device
// memory for programs.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/dtype.hpp"

namespace weft {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty for dense row-major
};

}  // namespace weft
