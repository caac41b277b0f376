/* C sample: a two-layer MLP (linear -> gelu -> linear) with a symbolic batch, built through the C API,
 * printed, run on the CPU reference interpreter, and summarized by a checksum. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft.h"

#define CHECK(call)                                                                              \
  do {                                                                                           \
    weft_status s_ = (call);                                                                     \
    if (s_ != WEFT_OK) {                                                                         \
      fprintf(stderr, "%s failed: %s: %s\n", #call, weft_status_string(s_), weft_last_error_message()); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

enum { BATCH = 4, D_IN = 64, D_HIDDEN = 128, D_OUT = 32 };

/* Deterministic pseudo-random values in [-scale, scale). */
static void fill(float* v, size_t n, uint64_t seed, float scale) {
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    v[i] = scale * ((float)(seed >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
  }
}

static uint64_t fnv1a(const void* data, size_t bytes) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

int main(void) {
  printf("weft %s\n", weft_version_string());
  weft_context* ctx = NULL;
  weft_graph* g = NULL;
  CHECK(weft_context_create(NULL, &ctx));
  CHECK(weft_graph_create(ctx, "mlp", &g));
  CHECK(weft_graph_declare_symbol(g, "batch", 1, 64));

  const weft_dim x_dims[] = {{"batch", 0}, {NULL, D_IN}};
  const weft_dim w1_dims[] = {{NULL, D_HIDDEN}, {NULL, D_IN}}, b1_dims[] = {{NULL, D_HIDDEN}};
  const weft_dim w2_dims[] = {{NULL, D_OUT}, {NULL, D_HIDDEN}}, b2_dims[] = {{NULL, D_OUT}};
  weft_tensor x, w1, b1, w2, b2, h, a, y;
  CHECK(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, x_dims, 2, &x));
  CHECK(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "w1", WEFT_DTYPE_F32, w1_dims, 2, &w1));
  CHECK(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "b1", WEFT_DTYPE_F32, b1_dims, 1, &b1));
  CHECK(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "w2", WEFT_DTYPE_F32, w2_dims, 2, &w2));
  CHECK(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "b2", WEFT_DTYPE_F32, b2_dims, 1, &b2));
  CHECK(weft_op_linear(g, x, w1, b1, WEFT_TENSOR_NONE, "h", &h));
  CHECK(weft_op_gelu(g, h, 1, "a", &a));
  CHECK(weft_op_linear(g, a, w2, b2, WEFT_TENSOR_NONE, "y", &y));
  CHECK(weft_graph_mark_output(g, y, NULL));

  const char* text = NULL;
  CHECK(weft_graph_to_text(g, &text));
  printf("%s", text);

  static float xv[BATCH * D_IN], w1v[D_HIDDEN * D_IN], b1v[D_HIDDEN], w2v[D_OUT * D_HIDDEN], b2v[D_OUT], yv[BATCH * D_OUT];
  fill(xv, BATCH * D_IN, 1, 1.0f);
  fill(w1v, D_HIDDEN * D_IN, 2, 0.125f);
  fill(b1v, D_HIDDEN, 3, 0.1f);
  fill(w2v, D_OUT * D_HIDDEN, 4, 0.09f);
  fill(b2v, D_OUT, 5, 0.1f);
  memset(yv, 0, sizeof yv);

  const int64_t xs[] = {BATCH, D_IN}, w1s[] = {D_HIDDEN, D_IN}, b1s[] = {D_HIDDEN}, w2s[] = {D_OUT, D_HIDDEN},
                b2s[] = {D_OUT}, ys[] = {BATCH, D_OUT};
  const weft_binding bindings[] = {
      {x, {xv, WEFT_DTYPE_F32, 2, xs, NULL}},   {w1, {w1v, WEFT_DTYPE_F32, 2, w1s, NULL}},
      {b1, {b1v, WEFT_DTYPE_F32, 1, b1s, NULL}}, {w2, {w2v, WEFT_DTYPE_F32, 2, w2s, NULL}},
      {b2, {b2v, WEFT_DTYPE_F32, 1, b2s, NULL}}, {y, {yv, WEFT_DTYPE_F32, 2, ys, NULL}},
  };
  CHECK(weft_graph_run_reference(g, bindings, (int32_t)(sizeof bindings / sizeof bindings[0])));

  double sum = 0, abs_sum = 0;
  for (int i = 0; i < BATCH * D_OUT; ++i) {
    sum += yv[i];
    abs_sum += yv[i] < 0 ? -yv[i] : yv[i];
  }
  printf("mlp output y [%d, %d] f32: sum %.6f  abs-sum %.6f  y[0][0..3] %.6f %.6f %.6f %.6f  checksum %016" PRIx64 "\n",
         BATCH, D_OUT, sum, abs_sum, yv[0], yv[1], yv[2], yv[3], fnv1a(yv, sizeof yv));

  weft_graph_destroy(g);
  weft_context_destroy(ctx);
  return 0;
}
