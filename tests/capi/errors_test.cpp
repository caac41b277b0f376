// Every error path of graph building through the C API: each returns a status and a message that names the
// op, operand, tensor or dim at fault.
#include <thread>

#include "capi_test_util.hpp"

using namespace weft_test;

namespace {

TEST(CapiBasics, VersionAndStatusStrings) {
  EXPECT_EQ(weft_version(), WEFT_VERSION);
  EXPECT_STREQ(weft_version_string(), "0.1.0");
  EXPECT_STREQ(weft_status_string(WEFT_OK), "WEFT_OK");
  EXPECT_STREQ(weft_status_string(WEFT_ERROR_DEADLOCK), "WEFT_ERROR_DEADLOCK");
  EXPECT_STREQ(weft_status_string(static_cast<weft_status>(999)), "WEFT_STATUS_UNKNOWN");
  EXPECT_STREQ(weft_dtype_name(WEFT_DTYPE_BF16), "bf16");
  EXPECT_STREQ(weft_dtype_name(static_cast<weft_dtype>(12345)), "unknown");
  EXPECT_GE(weft_op_count(), 20);
  EXPECT_EQ(weft_op_name(-1), nullptr);
  EXPECT_EQ(weft_op_name(weft_op_count()), nullptr);
  for (int32_t i = 0; i < weft_op_count(); ++i) EXPECT_NE(weft_op_name(i), nullptr);
}

TEST(CapiBasics, NullHandlesAndOutputs) {
  weft_graph* g = nullptr;
  EXPECT_WEFT_ERROR(weft_context_create(nullptr, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  EXPECT_WEFT_ERROR(weft_graph_create(nullptr, "x", &g), WEFT_ERROR_INVALID_HANDLE, "'context' is NULL");
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(nullptr, "b", 1, 2), WEFT_ERROR_INVALID_HANDLE, "'graph' is NULL");
  EXPECT_WEFT_ERROR(weft_graph_validate(nullptr), WEFT_ERROR_INVALID_HANDLE, "graph");
  EXPECT_WEFT_ERROR(weft_graph_run_reference(nullptr, nullptr, 0), WEFT_ERROR_INVALID_HANDLE, "graph");
  EXPECT_WEFT_ERROR(weft_tensor_view_from_dlpack(nullptr, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "dltensor");
  // Destroying NULL is a no-op.
  weft_graph_destroy(nullptr);
  weft_context_destroy(nullptr);
}

TEST(CapiBasics, ContextOptionsStructSize) {
  weft_context* c = nullptr;
  weft_context_options o{};
  o.struct_size = 0;
  EXPECT_WEFT_ERROR(weft_context_create(&o, &c), WEFT_ERROR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(c, nullptr);
  o.struct_size = sizeof o;
  ASSERT_WEFT_OK(weft_context_create(&o, &c));
  weft_context_destroy(c);
}

TEST(CapiBasics, DestroyedHandlesAreReportedNotUsed) {
  weft_context* c = nullptr;
  weft_graph* g = nullptr;
  ASSERT_WEFT_OK(weft_context_create(nullptr, &c));
  ASSERT_WEFT_OK(weft_graph_create(c, "g", &g));
  weft_graph_destroy(g);
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, "b", 1, 2), WEFT_ERROR_INVALID_HANDLE, "not a live graph");
  EXPECT_WEFT_ERROR(weft_graph_validate(g), WEFT_ERROR_INVALID_HANDLE, "not a live graph");
  weft_graph_destroy(g);  // a second destroy is ignored
  weft_context_destroy(c);
  weft_graph* g2 = nullptr;
  EXPECT_WEFT_ERROR(weft_graph_create(c, "g2", &g2), WEFT_ERROR_INVALID_HANDLE, "not a live context");
}

TEST(CapiBasics, GraphOutlivesItsContext) {
  weft_context* c = nullptr;
  weft_graph* g = nullptr;
  ASSERT_WEFT_OK(weft_context_create(nullptr, &c));
  ASSERT_WEFT_OK(weft_graph_create(c, "g", &g));
  weft_context_destroy(c);
  const weft_dim d = fixed(4);
  weft_tensor x = 0, y = 0;
  ASSERT_WEFT_OK(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, &d, 1, &x));
  ASSERT_WEFT_OK(weft_op_silu(g, x, "y", &y));
  weft_graph_destroy(g);
}

using CapiTensors = GraphFixture;

TEST_F(CapiTensors, BadDeclarations) {
  weft_tensor t = 0;
  const weft_dim zero[] = {fixed(4), fixed(0)};
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, zero, 2, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "tensor 'x' dim 1 is 0", "expected a size >= 1");
  const weft_dim neg[] = {fixed(-2)};
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, neg, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "dim 0 is -2");
  const weft_dim undeclared[] = {sym("batch")};
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, undeclared, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "symbol 'batch'", "not declared");
  const weft_dim ok[] = {fixed(4)};
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", static_cast<weft_dtype>(17), ok, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "'dtype' is 17");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INTERMEDIATE, "x", WEFT_DTYPE_F32, ok, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "tensor 'x'", "kind 3");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, nullptr, WEFT_DTYPE_F32, ok, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "'name' is NULL");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "", WEFT_DTYPE_F32, ok, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "name is empty");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, nullptr, 2, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "dims is NULL");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, ok, 9, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "rank 9");
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, ok, 1, nullptr),
                    WEFT_ERROR_INVALID_ARGUMENT, "'out' is NULL");
  const weft_dim huge[] = {fixed(int64_t{1} << 30), fixed(int64_t{1} << 30)};
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, huge, 2, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "tensor 'x'", "2^48");
  ASSERT_WEFT_OK(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, ok, 1, &t));
  EXPECT_WEFT_ERROR(weft_graph_add_tensor(g, WEFT_TENSOR_WEIGHT, "x", WEFT_DTYPE_F32, ok, 1, &t),
                    WEFT_ERROR_INVALID_ARGUMENT, "'x' is already used");
}

TEST_F(CapiTensors, BadSymbols) {
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, "batch", 0, 8), WEFT_ERROR_INVALID_ARGUMENT, "symbol 'batch'", ">= 1");
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, "batch", 9, 8), WEFT_ERROR_INVALID_ARGUMENT, "[9, 8] is empty");
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, "2batch", 1, 8), WEFT_ERROR_INVALID_ARGUMENT, "not an identifier");
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, nullptr, 1, 8), WEFT_ERROR_INVALID_ARGUMENT, "'name' is NULL");
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
  EXPECT_WEFT_ERROR(weft_graph_declare_symbol(g, "batch", 1, 8), WEFT_ERROR_INVALID_ARGUMENT, "already declared");
}

TEST_F(CapiTensors, OpErrorsNameOpOperandAndDim) {
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
  weft_tensor x = add(WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_BF16, {sym("batch"), fixed(64)});
  weft_tensor w = add(WEFT_TENSOR_WEIGHT, "w", WEFT_DTYPE_BF16, {fixed(32), fixed(48)});
  weft_tensor wf = add(WEFT_TENSOR_WEIGHT, "wf", WEFT_DTYPE_F32, {fixed(32), fixed(64)});
  weft_tensor ids = add(WEFT_TENSOR_INPUT, "ids", WEFT_DTYPE_I32, {sym("batch")});
  weft_tensor y = 0;
  EXPECT_WEFT_ERROR(weft_op_linear(g, x, w, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'linear'", "operand 'weight' dim 1 is 48", "expected 64");
  EXPECT_WEFT_ERROR(weft_op_linear(g, x, wf, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'linear'", "operand 'weight' has dtype f32", "expected bf16");
  EXPECT_WEFT_ERROR(weft_op_silu(g, ids, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "op 'silu'", "operand 'x'", "i32",
                    "expected a float dtype");
  EXPECT_WEFT_ERROR(weft_op_linear(g, x, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "y", &y),
                    WEFT_ERROR_INVALID_ARGUMENT, "operand 'weight' is required");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "frobnicate", &x, 1, nullptr, "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "unknown op 'frobnicate'", "linear");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "silu", &x, 1, "{\"alpha\": 2}", "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'silu'", "unknown attribute 'alpha'");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "gelu", &x, 1, "{\"approximate\": 3}", "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'gelu'", "attribute 'approximate'", "expected a string");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "gelu", &x, 1, "{approximate", "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'gelu'", "does not parse");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "rmsnorm", &x, 1, nullptr, "y", &y), WEFT_ERROR_INVALID_ARGUMENT,
                    "op 'rmsnorm'", "got 1 operands", "expected 2");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "silu", nullptr, 1, nullptr, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "inputs is NULL");
  EXPECT_WEFT_ERROR(weft_graph_add_op(g, "silu", &x, -1, nullptr, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "num_inputs is -1");
  EXPECT_WEFT_ERROR(weft_op_silu(g, x, "x", &y), WEFT_ERROR_INVALID_ARGUMENT, "'x' is already used");
  // Nothing above changed the graph: a valid op still gets the next id and the name "y" is free.
  ASSERT_WEFT_OK(weft_op_silu(g, x, "y", &y));
}

TEST_F(CapiTensors, SymbolicDimMismatch) {
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "seq", 1, 8));
  weft_tensor a = add(WEFT_TENSOR_INPUT, "a", WEFT_DTYPE_F32, {sym("batch"), fixed(4)});
  weft_tensor b = add(WEFT_TENSOR_INPUT, "b", WEFT_DTYPE_F32, {sym("seq"), fixed(4)});
  weft_tensor y = 0;
  // Two symbols with the same range are still different dims.
  EXPECT_WEFT_ERROR(weft_op_add(g, a, b, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "op 'add'", "batch", "seq");
}

TEST_F(CapiTensors, ForeignAndUnknownTensors) {
  weft_graph* other = nullptr;
  ASSERT_WEFT_OK(weft_graph_create(ctx, "other", &other));
  const weft_dim d = fixed(4);
  weft_tensor mine = 0, theirs = 0, y = 0;
  ASSERT_WEFT_OK(weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, &d, 1, &mine));
  ASSERT_WEFT_OK(weft_graph_add_tensor(other, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, &d, 1, &theirs));
  EXPECT_WEFT_ERROR(weft_op_add(g, mine, theirs, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "belongs to another graph",
                    "graph 'g'");
  EXPECT_WEFT_ERROR(weft_op_silu(g, mine + 57, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "is not a tensor of graph 'g'");
  EXPECT_WEFT_ERROR(weft_graph_mark_output(g, theirs, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "another graph");
  weft_graph_destroy(other);
  // Ids of a destroyed graph stay foreign.
  EXPECT_WEFT_ERROR(weft_op_silu(g, theirs, "y", &y), WEFT_ERROR_INVALID_ARGUMENT, "another graph");
}

TEST_F(CapiTensors, OutputsMustBeProduced) {
  weft_tensor x = add(WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, {fixed(4)});
  EXPECT_WEFT_ERROR(weft_graph_validate(g), WEFT_ERROR_INVALID_ARGUMENT, "no outputs");
  EXPECT_WEFT_ERROR(weft_graph_mark_output(g, x, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "input 'x'", "never produced");
  EXPECT_WEFT_ERROR(weft_graph_mark_output(g, WEFT_TENSOR_NONE, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "WEFT_TENSOR_NONE");
  weft_tensor y = 0;
  ASSERT_WEFT_OK(weft_op_silu(g, x, "y", &y));
  ASSERT_WEFT_OK(weft_graph_mark_output(g, y, "out"));
  EXPECT_WEFT_ERROR(weft_graph_mark_output(g, y, nullptr), WEFT_ERROR_INVALID_ARGUMENT, "already marked");
  ASSERT_WEFT_OK(weft_graph_validate(g));
  weft_tensor found = 0;
  ASSERT_WEFT_OK(weft_graph_find_tensor(g, "out", &found));
  EXPECT_EQ(found, y);
  EXPECT_WEFT_ERROR(weft_graph_find_tensor(g, "y", &found), WEFT_ERROR_INVALID_ARGUMENT, "no tensor named 'y'");
  int32_t n = 0;
  ASSERT_WEFT_OK(weft_graph_num_outputs(g, &n));
  EXPECT_EQ(n, 1);
  EXPECT_WEFT_ERROR(weft_graph_output(g, 1, &found), WEFT_ERROR_INVALID_ARGUMENT, "output index 1");
}

TEST_F(CapiTensors, TensorInfo) {
  ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
  weft_tensor x = add(WEFT_TENSOR_STATE, "kv", WEFT_DTYPE_BF16, {sym("batch"), fixed(7)});
  weft_tensor_info info{};
  info.struct_size = sizeof info;
  ASSERT_WEFT_OK(weft_graph_tensor_info(g, x, &info));
  EXPECT_STREQ(info.name, "kv");
  EXPECT_EQ(info.kind, WEFT_TENSOR_STATE);
  EXPECT_EQ(info.dtype, WEFT_DTYPE_BF16);
  ASSERT_EQ(info.rank, 2);
  EXPECT_STREQ(info.dims[0].symbol, "batch");
  EXPECT_EQ(info.dims[1].symbol, nullptr);
  EXPECT_EQ(info.dims[1].size, 7);
  EXPECT_EQ(info.is_output, 0);
  weft_tensor_info small{};
  small.struct_size = 4;
  EXPECT_WEFT_ERROR(weft_graph_tensor_info(g, x, &small), WEFT_ERROR_INVALID_ARGUMENT, "struct_size");
}

TEST(CapiThreads, LastErrorIsPerThread) {
  weft_graph* g = nullptr;
  EXPECT_NE(weft_graph_create(nullptr, "x", &g), WEFT_OK);
  const std::string main_msg = weft_last_error_message();
  std::string thread_msg = "unset";
  std::thread t([&] { thread_msg = weft_last_error_message(); });
  t.join();
  EXPECT_EQ(thread_msg, "");
  EXPECT_EQ(main_msg, weft_last_error_message());
}

TEST(CapiThreads, GraphsBuiltConcurrently) {
  weft_context* c = nullptr;
  ASSERT_WEFT_OK(weft_context_create(nullptr, &c));
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 50; ++round) {
        weft_graph* g = nullptr;
        if (weft_graph_create(c, "t", &g) != WEFT_OK) return;
        const weft_dim d = fixed(8);
        weft_tensor x = 0, y = 0;
        bool good = weft_graph_add_tensor(g, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, &d, 1, &x) == WEFT_OK &&
                    weft_op_silu(g, x, "y", &y) == WEFT_OK && weft_graph_mark_output(g, y, nullptr) == WEFT_OK;
        weft_graph_destroy(g);
        if (!good) return;
      }
      ok[static_cast<size_t>(i)] = 1;
    });
  for (auto& t : threads) t.join();
  for (int v : ok) EXPECT_EQ(v, 1);
  weft_context_destroy(c);
}

}  // namespace
