// Test helper: a shape of fixed dimensions, for graphs built by hand.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "graph/shape.hpp"

namespace weft::test {

inline Shape fixed_shape(std::initializer_list<int64_t> dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(Dim::fixed(d));
  return s;
}

}  // namespace weft::test
