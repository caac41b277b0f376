// Reference arithmetic shared by several ops' CPU kernels (their fused forms must compute exactly the same).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/dtype.hpp"
#include "graph/op_def.hpp"

namespace weft {

struct Buffer;

// x * w / sqrt(mean(x^2) + eps) over `n` contiguous values starting at x (and w).
void rms_row(const float* x, const float* w, float* out, int64_t n, float eps);

float silu(float x);

// silu_mul of rows [gate | up] (2F values each) into rows of F: silu(gate) * up in f32, unrounded.
void swiglu_rows(const float* gate_up, float* out, int64_t rows, int64_t f);

// out[r][n] = x[r] · w[n] + bias[n] + residual[r][n] for `rows` rows of x (row stride k); bias and residual may
// be nullptr. w is [N, K].
void linear_rows(const float* x, const Buffer& w, const Buffer* bias, const Buffer* residual, Buffer& out, int64_t rows);

// v rounded to dt (bf16 / f16; f32 unchanged), as a tensor of that dtype stores it.
float round_to(DType dt, float v);

// specs followed by rope's attributes (theta, style, scaling, factor, low/high_freq_factor,
// original_max_position) with their defaults: the rope op and the ops that apply rope inside share them.
std::vector<AttrSpec> with_rope_attrs(std::vector<AttrSpec> specs);

// Checks rope's attributes theta, scaling, factor, low/high_freq_factor, original_max_position.
void expect_rope_attrs(const InferCtx& c);

// rope's inverse frequencies (head_dim / 2 of them; HF's default, linear and llama3 rules), in double.
std::vector<double> rope_inv_freqs(int64_t head_dim, double theta, const std::string& scaling, double factor,
                                   double low_freq_factor, double high_freq_factor, int64_t original_max_position);

// cos / sin of position * inv[i] for every i (computed in double, rounded to float), as rope uses them.
void rope_table(const std::vector<double>& inv, double position, float* cs, float* sn);

// Rotates one head (x, out may alias) with the pair table cs / sn (head_dim / 2 floats each): half style pairs
// (i, i + hd/2), interleaved (2i, 2i+1).
void rope_head(const float* x, float* out, int64_t head_dim, bool interleaved, const float* cs, const float* sn);

// attention_decode's arithmetic: q [B, hq*hd], k_new / v_new [B, hkv*hd] (values already as their dtype holds
// them), the caches updated at positions, o [B, hq*hd]. Fails through c on a bad position, before any write.
void attention_decode_rows(const RefCtx& c, const float* q, const float* kn, const float* vn, Buffer& kc, Buffer& vc,
                           const Buffer& pos, Buffer& o, int64_t hq, int64_t hkv, int64_t hd, double scale);

}  // namespace weft
