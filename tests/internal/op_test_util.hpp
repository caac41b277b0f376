// Helpers for op tests: run one op on the reference interpreter over given buffers, make random data, and
// compare against double-precision expectations.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/graph.hpp"
#include "reference/buffer.hpp"
#include "reference/interpreter.hpp"

namespace weft::test {

struct OpRun {
  Buffer out;
  std::vector<Buffer> inputs;  // after the run (STATE operands updated in place)
};

// Builds a one-op graph whose operands are fixed-shape tensors holding `inputs` (kinds[i] defaults to input;
// a default-constructed Buffer with empty shape and no data stands for an absent optional operand when
// `absent[i]` is set), runs it on the reference interpreter and returns the result.
inline OpRun run_op(const std::string& op, std::vector<Buffer> inputs, const nlohmann::json& attrs = {},
                    std::vector<TensorKind> kinds = {}, std::vector<bool> absent = {}) {
  Graph g("test");
  std::vector<TensorId> ids;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i < absent.size() && absent[i]) {
      ids.push_back(kNoTensor);
      continue;
    }
    Shape s;
    for (int64_t d : inputs[i].shape) s.push_back(Dim::fixed(d));
    const TensorKind k = i < kinds.size() ? kinds[i] : TensorKind::input;
    ids.push_back(g.add_tensor(k, "in" + std::to_string(i), inputs[i].dtype, s));
  }
  const TensorId out = g.add_op(op, ids, attrs, "out");
  g.mark_output(out, "");
  std::vector<Buffer> values(g.tensors().size());
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] != kNoTensor) values[static_cast<size_t>(ids[i])] = inputs[i];
  evaluate(g, SymbolValues{}, values);
  OpRun r;
  r.out = values[static_cast<size_t>(out)];
  for (size_t i = 0; i < ids.size(); ++i) r.inputs.push_back(ids[i] == kNoTensor ? Buffer{} : values[static_cast<size_t>(ids[i])]);
  return r;
}

// Random values in [lo, hi) rounded to the dtype (so the reference sees exactly these values).
inline Buffer random_buffer(DType dt, std::vector<int64_t> shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  Buffer b(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t k = 0; k < b.numel(); ++k) b.set(k, is_float(dt) ? u(rng) : std::floor(u(rng)));
  b.round_to_dtype();
  return b;
}

inline Buffer buffer_of(DType dt, std::vector<int64_t> shape, const std::vector<double>& values) {
  Buffer b(dt, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), b.numel());
  for (size_t k = 0; k < values.size() && static_cast<int64_t>(k) < b.numel(); ++k) b.set(static_cast<int64_t>(k), values[k]);
  b.round_to_dtype();
  return b;
}

// Relative tolerance of one rounding to dtype (half an ulp), used to scale test tolerances.
inline double dtype_eps(DType dt) {
  switch (dt) {
    case DType::bf16: return 1.0 / 256;   // 8 significant bits
    case DType::f16: return 1.0 / 2048;   // 11 significant bits
    default: return 1e-6;                 // f32 with f32 accumulation
  }
}

// Every element of `got` is within atol + rtol * |want| of the double-precision expectation.
inline void expect_close(const Buffer& got, const std::vector<double>& want, double rtol, double atol,
                         const std::string& what = "") {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double g = got.get(k), w = want[static_cast<size_t>(k)];
    const bool same = g == w || (std::isnan(g) && std::isnan(w));  // covers inf == inf and expected NaN
    if (!same && !(std::fabs(g - w) <= atol + rtol * std::fabs(w)) && reported++ < 5)
      ADD_FAILURE() << what << " element " << k << ": got " << g << ", want " << w;
  }
}

}  // namespace weft::test
