// Reference arithmetic shared by several ops' CPU kernels (their fused forms must compute exactly the same).
#pragma once

#include <cstdint>

namespace weft {

struct Buffer;

// x * w / sqrt(mean(x^2) + eps) over `n` contiguous values starting at x (and w).
void rms_row(const float* x, const float* w, float* out, int64_t n, float eps);

float silu(float x);

// out[r][n] = x[r] · w[n] + bias[n] + residual[r][n] for `rows` rows of x (row stride k); bias and residual may
// be nullptr. w is [N, K].
void linear_rows(const float* x, const Buffer& w, const Buffer* bias, const Buffer* residual, Buffer& out, int64_t rows);

}  // namespace weft
