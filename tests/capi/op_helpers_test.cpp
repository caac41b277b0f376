// Every typed op helper through the C API: the inferred dtype and shape of its result (symbols kept), and its
// own argument errors (NULL options, short struct_size, out-of-range enums, bad dims).
#include <string>

#include "capi_test_util.hpp"

using namespace weft_test;

namespace {

class OpHelpers : public GraphFixture {
 protected:
  void SetUp() override {
    GraphFixture::SetUp();
    ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 16));
    ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "seq", 1, 512));
    x = add(WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_BF16, {sym("batch"), fixed(64)});
    ids = add(WEFT_TENSOR_INPUT, "ids", WEFT_DTYPE_I32, {sym("batch")});
    table = add(WEFT_TENSOR_WEIGHT, "table", WEFT_DTYPE_BF16, {fixed(100), fixed(64)});
    norm = add(WEFT_TENSOR_WEIGHT, "norm", WEFT_DTYPE_BF16, {fixed(64)});
    hnorm = add(WEFT_TENSOR_WEIGHT, "hnorm", WEFT_DTYPE_BF16, {fixed(16)});
    w = add(WEFT_TENSOR_WEIGHT, "w", WEFT_DTYPE_BF16, {fixed(96), fixed(64)});
    kc = add(WEFT_TENSOR_STATE, "kc", WEFT_DTYPE_BF16, {sym("batch"), sym("seq"), fixed(1), fixed(16)});
    vc = add(WEFT_TENSOR_STATE, "vc", WEFT_DTYPE_BF16, {sym("batch"), sym("seq"), fixed(1), fixed(16)});
  }
  // "[batch, 64] bf16" for a tensor.
  std::string type_of(weft_tensor t) {
    weft_tensor_info info{};
    info.struct_size = sizeof info;
    EXPECT_EQ(weft_graph_tensor_info(g, t, &info), WEFT_OK) << weft_last_error_message();
    std::string s = "[";
    for (int32_t i = 0; i < info.rank; ++i)
      s += (i ? ", " : "") + (info.dims[i].symbol ? std::string(info.dims[i].symbol) : std::to_string(info.dims[i].size));
    return s + "] " + weft_dtype_name(info.dtype);
  }
  weft_tensor x = 0, ids = 0, table = 0, norm = 0, hnorm = 0, w = 0, kc = 0, vc = 0;
};

TEST_F(OpHelpers, InferredTypes) {
  weft_tensor t = 0, qkv = 0, q = 0, k = 0, v = 0;
  ASSERT_WEFT_OK(weft_op_embedding(g, table, ids, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  ASSERT_WEFT_OK(weft_op_rmsnorm(g, x, norm, 1e-6f, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  ASSERT_WEFT_OK(weft_op_layernorm(g, x, norm, norm, 1e-5f, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  ASSERT_WEFT_OK(weft_op_linear(g, x, w, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "qkv", &qkv));
  EXPECT_EQ(type_of(qkv), "[batch, 96] bf16");
  ASSERT_WEFT_OK(weft_op_slice(g, qkv, -1, 0, 64, "q", &q));
  ASSERT_WEFT_OK(weft_op_slice(g, qkv, 1, 64, 80, "k", &k));
  ASSERT_WEFT_OK(weft_op_slice(g, qkv, -1, 80, 96, "v", &v));
  EXPECT_EQ(type_of(q), "[batch, 64] bf16");
  EXPECT_EQ(type_of(k), "[batch, 16] bf16");
  ASSERT_WEFT_OK(weft_op_head_rmsnorm(g, q, hnorm, 16, 1e-6f, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  weft_rope_options ro{};
  ro.struct_size = sizeof ro;
  ro.head_dim = 16;
  ro.scaling = WEFT_ROPE_SCALING_LLAMA3;  // factor etc. left 0: defaults
  ASSERT_WEFT_OK(weft_op_rope(g, q, ids, &ro, "q_rot", &q));
  EXPECT_EQ(type_of(q), "[batch, 64] bf16");
  weft_attention_options ao{};
  ao.struct_size = sizeof ao;
  ao.num_q_heads = 4;
  ao.num_kv_heads = 1;
  ao.head_dim = 16;
  ASSERT_WEFT_OK(weft_op_attention_decode(g, q, k, v, kc, vc, ids, &ao, "attn", &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  weft_tensor h = 0;
  ASSERT_WEFT_OK(weft_op_linear(g, t, table, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "logits", &h));
  EXPECT_EQ(type_of(h), "[batch, 100] bf16");
  ASSERT_WEFT_OK(weft_op_softmax(g, h, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 100] bf16");
  ASSERT_WEFT_OK(weft_op_argmax(g, h, WEFT_DTYPE_I32, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch] i32");
  ASSERT_WEFT_OK(weft_op_reduce(g, h, WEFT_REDUCE_MEAN, 0, 1, nullptr, &t));
  EXPECT_EQ(type_of(t), "[1, 100] bf16");
  ASSERT_WEFT_OK(weft_op_reduce(g, h, WEFT_REDUCE_SUM, -1, 0, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch] bf16");
  ASSERT_WEFT_OK(weft_op_cast(g, h, WEFT_DTYPE_F32, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 100] f32");
  const weft_dim rs[] = {sym("batch"), fixed(10), fixed(10)};
  ASSERT_WEFT_OK(weft_op_reshape(g, h, rs, 3, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 10, 10] bf16");
  const weft_tensor parts[] = {q, k, v};
  ASSERT_WEFT_OK(weft_op_concat(g, parts, 3, -1, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 96] bf16");
  ASSERT_WEFT_OK(weft_op_silu_mul(g, t, WEFT_TENSOR_NONE, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 48] bf16");
  ASSERT_WEFT_OK(weft_op_silu_mul(g, q, q, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  ASSERT_WEFT_OK(weft_op_gelu(g, q, 0, nullptr, &t));
  ASSERT_WEFT_OK(weft_op_mul(g, t, norm, nullptr, &t));  // [batch, 64] * [64]
  EXPECT_EQ(type_of(t), "[batch, 64] bf16");
  const weft_dim r3[] = {sym("batch"), fixed(4), fixed(16)};
  weft_tensor a3 = 0, b3 = 0;
  ASSERT_WEFT_OK(weft_op_reshape(g, q, r3, 3, nullptr, &a3));
  const weft_dim r2[] = {fixed(16), fixed(4)};
  ASSERT_WEFT_OK(weft_op_reshape(g, norm, r2, 2, nullptr, &b3));
  EXPECT_EQ(type_of(b3), "[16, 4] bf16");
  ASSERT_WEFT_OK(weft_op_matmul(g, a3, b3, nullptr, &t));
  EXPECT_EQ(type_of(t), "[batch, 4, 4] bf16");
}

TEST_F(OpHelpers, OwnArgumentErrors) {
  weft_tensor t = 0;
  EXPECT_WEFT_ERROR(weft_op_rope(g, x, ids, nullptr, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rope'", "options is NULL");
  weft_rope_options ro{};
  ro.struct_size = 8;
  EXPECT_WEFT_ERROR(weft_op_rope(g, x, ids, &ro, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rope'", "struct_size is 8");
  ro.struct_size = sizeof ro;
  ro.head_dim = 16;
  ro.style = static_cast<weft_rope_style>(7);
  EXPECT_WEFT_ERROR(weft_op_rope(g, x, ids, &ro, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rope'", "attribute 'style'");
  ro.style = WEFT_ROPE_HALF;
  ro.head_dim = 15;
  EXPECT_WEFT_ERROR(weft_op_rope(g, x, ids, &ro, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rope'", "head_dim");
  EXPECT_WEFT_ERROR(weft_op_attention_decode(g, x, x, x, kc, vc, ids, nullptr, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'attention_decode'", "options is NULL");
  weft_attention_options ao{};
  ao.struct_size = sizeof ao;
  ao.num_q_heads = 3;
  ao.num_kv_heads = 2;
  ao.head_dim = 16;
  EXPECT_WEFT_ERROR(weft_op_attention_decode(g, x, x, x, kc, vc, ids, &ao, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'attention_decode'");
  EXPECT_WEFT_ERROR(weft_op_reduce(g, x, static_cast<weft_reduce_kind>(9), 0, 0, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'reduce'", "attribute 'kind'");
  EXPECT_WEFT_ERROR(weft_op_argmax(g, x, WEFT_DTYPE_F32, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'argmax'",
                    "attribute 'dtype' is 'f32'");
  EXPECT_WEFT_ERROR(weft_op_cast(g, x, static_cast<weft_dtype>(99), nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'cast'",
                    "attribute 'dtype'");
  EXPECT_WEFT_ERROR(weft_op_reshape(g, x, nullptr, 2, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'reshape'", "dims is NULL");
  const weft_dim bad[] = {sym("batch"), fixed(63)};
  EXPECT_WEFT_ERROR(weft_op_reshape(g, x, bad, 2, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'reshape'", "[batch, 63]");
  const weft_dim nosym[] = {sym("rows"), fixed(64)};
  EXPECT_WEFT_ERROR(weft_op_reshape(g, x, nosym, 2, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'reshape'", "'rows'");
  EXPECT_WEFT_ERROR(weft_op_slice(g, x, 1, 10, 65, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'slice'", "65");
  EXPECT_WEFT_ERROR(weft_op_slice(g, x, 0, 0, 2, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'slice'", "batch");
  EXPECT_WEFT_ERROR(weft_op_concat(g, nullptr, 0, 0, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'concat'");
  const weft_tensor mixed[] = {x, ids};
  EXPECT_WEFT_ERROR(weft_op_concat(g, mixed, 2, -1, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'concat'", "operand 1");
  EXPECT_WEFT_ERROR(weft_op_embedding(g, table, x, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'embedding'",
                    "operand 'ids'");
  EXPECT_WEFT_ERROR(weft_op_rmsnorm(g, x, hnorm, 1e-6f, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rmsnorm'",
                    "operand 'weight' dim 0 is 16", "expected 64");
  EXPECT_WEFT_ERROR(weft_op_rmsnorm(g, x, norm, -1.0f, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT, "op 'rmsnorm'", "eps");
  EXPECT_WEFT_ERROR(weft_op_head_rmsnorm(g, x, hnorm, 24, 1e-6f, nullptr, &t), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'head_rmsnorm'");
  EXPECT_WEFT_ERROR(weft_op_silu(nullptr, x, nullptr, &t), WEFT_ERROR_INVALID_HANDLE, "'graph' is NULL");
  EXPECT_WEFT_ERROR(weft_op_silu(g, x, nullptr, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "'out' is NULL");
}

TEST_F(OpHelpers, TypedAndGenericBuildTheSameGraph) {
  weft_graph* g2 = nullptr;
  ASSERT_WEFT_OK(weft_graph_create(ctx, "g", &g2));
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g2, "batch", 1, 16));
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g2, "seq", 1, 512));
  const weft_dim xd[] = {sym("batch"), fixed(64)}, nd[] = {fixed(64)};
  weft_tensor x2 = 0, n2 = 0, y2 = 0, y = 0;
  ASSERT_WEFT_OK(weft_graph_add_tensor(g2, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_BF16, xd, 2, &x2));
  ASSERT_WEFT_OK(weft_graph_add_tensor(g2, WEFT_TENSOR_WEIGHT, "norm", WEFT_DTYPE_BF16, nd, 1, &n2));
  const weft_tensor in2[] = {x2, n2};
  ASSERT_WEFT_OK(weft_graph_add_op(g2, "rmsnorm", in2, 2, R"({"eps": 1e-6})", "y", &y2));
  ASSERT_WEFT_OK(weft_graph_mark_output(g2, y2, nullptr));

  // The fixture's graph has more tensors; build the same computation in a fresh one with the typed helper.
  weft_graph* g3 = nullptr;
  ASSERT_WEFT_OK(weft_graph_create(ctx, "g", &g3));
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g3, "batch", 1, 16));
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g3, "seq", 1, 512));
  weft_tensor x3 = 0, n3 = 0;
  ASSERT_WEFT_OK(weft_graph_add_tensor(g3, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_BF16, xd, 2, &x3));
  ASSERT_WEFT_OK(weft_graph_add_tensor(g3, WEFT_TENSOR_WEIGHT, "norm", WEFT_DTYPE_BF16, nd, 1, &n3));
  ASSERT_WEFT_OK(weft_op_rmsnorm(g3, x3, n3, 1e-6f, "y", &y));
  ASSERT_WEFT_OK(weft_graph_mark_output(g3, y, nullptr));
  uint64_t h2[2], h3[2];
  ASSERT_WEFT_OK(weft_graph_hash(g2, h2));
  ASSERT_WEFT_OK(weft_graph_hash(g3, h3));
  EXPECT_EQ(h2[0], h3[0]) << "a float eps of 1e-6f must hash like the JSON number 1e-6";
  EXPECT_EQ(h2[1], h3[1]);
  weft_graph_destroy(g2);
  weft_graph_destroy(g3);
}

}  // namespace
