// Robustness: random sequences of C API calls — random ops over random operands with random attributes,
// most of them invalid — must only ever return OK or INVALID_ARGUMENT with a message naming the op, leave the
// graph usable, round-trip through JSON with the same hash, and run on the reference interpreter without
// crashing (under ASan/UBSan in CI).
#include <random>
#include <string>

#include "capi_test_util.hpp"

using namespace weft_test;

namespace {

const char* const kAttrPool[] = {
    "{}", "", R"({"eps": 1e-5})", R"({"axis": 0})", R"({"axis": -1})", R"({"axis": 7})", R"({"dtype": "f32"})",
    R"({"dtype": "i32"})", R"({"dtype": "bf16"})", R"({"kind": "sum"})", R"({"kind": "max", "axis": 1, "keepdim": true})",
    R"({"kind": "mean"})", R"({"head_dim": 2})", R"({"head_dim": 4, "eps": 1e-6})", R"({"head_dim": 0})",
    R"({"start": 0, "end": 2})", R"({"start": 1, "end": 4, "axis": -1})", R"({"start": 3, "end": 1})",
    R"({"shape": ["batch", 4]})", R"({"shape": [2, 2]})", R"({"shape": [16]})", R"({"shape": ["nope"]})",
    R"({"approximate": "tanh"})", R"({"num_q_heads": 2, "num_kv_heads": 1, "head_dim": 2})",
    R"({"num_q_heads": 4, "num_kv_heads": 1, "head_dim": 2})", R"({"head_dim": 4, "style": "interleaved"})",
    R"({"head_dim": 4, "scaling": "llama3", "factor": 8})", R"({"bogus": 1})", "[1, 2]", "{\"eps\": \"x\"}", "{",
    R"({"eps": null})", R"({"axis": 1e300})"};

struct Pool {
  std::vector<weft_tensor> tensors;
  std::vector<weft_tensor> ops;
};

std::vector<int64_t> concrete_shape(const weft_tensor_info& info, int64_t batch) {
  std::vector<int64_t> s;
  for (int32_t i = 0; i < info.rank; ++i) s.push_back(info.dims[i].symbol ? batch : info.dims[i].size);
  return s;
}

TEST(RandomGraphs, ApiNeverCrashesAndStaysConsistent) {
  weft_context* ctx = nullptr;
  ASSERT_WEFT_OK(weft_context_create(nullptr, &ctx));
  std::mt19937 rng(1234);
  int ok_ops = 0, rejected = 0, graphs_run = 0;
  for (int round = 0; round < 60; ++round) {
    weft_graph* g = nullptr;
    ASSERT_WEFT_OK(weft_graph_create(ctx, "fuzz", &g));
    ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 4));
    Pool pool;
    const std::vector<std::vector<weft_dim>> shapes = {
        {sym("batch"), fixed(4)}, {fixed(4)},       {fixed(2), fixed(4)}, {sym("batch"), fixed(8)},
        {fixed(4), fixed(4)},     {sym("batch")},   {fixed(8)},           {sym("batch"), fixed(3), fixed(1), fixed(2)}};
    const weft_dtype dtypes[] = {WEFT_DTYPE_F32, WEFT_DTYPE_BF16, WEFT_DTYPE_I32, WEFT_DTYPE_F32};
    for (int i = 0; i < 8; ++i) {
      const auto& s = shapes[rng() % shapes.size()];
      const weft_tensor_kind kind = s.size() == 4 ? WEFT_TENSOR_STATE : (rng() % 2 ? WEFT_TENSOR_INPUT : WEFT_TENSOR_WEIGHT);
      weft_tensor t = 0;
      const std::string name = "t" + std::to_string(i);
      ASSERT_WEFT_OK(weft_graph_add_tensor(g, kind, name.c_str(), dtypes[rng() % 4], s.data(), int32_t(s.size()), &t));
      pool.tensors.push_back(t);
    }
    for (int step = 0; step < 40; ++step) {
      const char* op = weft_op_name(int32_t(rng() % uint32_t(weft_op_count())));
      // Mostly plausible calls (1-2 operands, often the same tensor's shape family, default attributes), so
      // that graphs grow; the rest is noise that must be rejected cleanly.
      static const size_t kCounts[] = {1, 1, 1, 2, 2, 2, 3, 6, 0};
      std::vector<weft_tensor> ins(kCounts[rng() % 9]);
      const weft_tensor anchor = pool.tensors[rng() % pool.tensors.size()];
      for (size_t k = 0; k < ins.size(); ++k)
        ins[k] = rng() % 12 == 0 ? WEFT_TENSOR_NONE : (k == 0 || rng() % 2 ? anchor : pool.tensors[rng() % pool.tensors.size()]);
      const char* attrs = rng() % 2 ? "{}" : kAttrPool[rng() % (sizeof kAttrPool / sizeof kAttrPool[0])];
      weft_tensor out = 0;
      const weft_status s = weft_graph_add_op(g, op, ins.data(), int32_t(ins.size()), attrs, nullptr, &out);
      if (s == WEFT_OK) {
        ++ok_ops;
        pool.tensors.push_back(out);
        pool.ops.push_back(out);
      } else {
        ++rejected;
        ASSERT_EQ(s, WEFT_ERROR_INVALID_ARGUMENT) << op << " " << attrs << ": " << weft_last_error_message();
        ASSERT_NE(std::string(weft_last_error_message()).find(std::string("op '") + op + "'"), std::string::npos)
            << weft_last_error_message();
      }
    }
    if (pool.ops.empty()) {
      weft_graph_destroy(g);
      continue;
    }
    for (weft_tensor t : pool.ops)
      if (rng() % 3 == 0) ASSERT_WEFT_OK(weft_graph_mark_output(g, t, nullptr));
    weft_tensor_info last{};
    last.struct_size = sizeof last;
    ASSERT_WEFT_OK(weft_graph_tensor_info(g, pool.ops.back(), &last));
    if (!last.is_output) ASSERT_WEFT_OK(weft_graph_mark_output(g, pool.ops.back(), nullptr));

    // JSON round trip keeps the hash.
    const char* json = nullptr;
    ASSERT_WEFT_OK(weft_graph_to_json(g, &json));
    weft_graph* back = nullptr;
    ASSERT_WEFT_OK(weft_graph_from_json(ctx, json, &back));
    uint64_t h1[2], h2[2];
    ASSERT_WEFT_OK(weft_graph_hash(g, h1));
    ASSERT_WEFT_OK(weft_graph_hash(back, h2));
    EXPECT_EQ(h1[0], h2[0]);
    EXPECT_EQ(h1[1], h2[1]);
    weft_graph_destroy(back);

    // Run it with batch = 2 on small random values (ids and positions land in range or are rejected).
    const int64_t batch = 2;
    std::vector<std::vector<int64_t>> shapes_kept;
    std::vector<std::vector<double>> storage;
    std::vector<weft_binding> bindings;
    shapes_kept.reserve(pool.tensors.size());
    storage.reserve(pool.tensors.size());
    for (weft_tensor t : pool.tensors) {
      weft_tensor_info info{};
      info.struct_size = sizeof info;
      ASSERT_WEFT_OK(weft_graph_tensor_info(g, t, &info));
      if (info.kind == WEFT_TENSOR_INTERMEDIATE && !info.is_output) continue;
      shapes_kept.push_back(concrete_shape(info, batch));
      int64_t n = 1;
      for (int64_t d : shapes_kept.back()) n *= d;
      storage.emplace_back(size_t(n));  // 8 bytes per element: room for any dtype
      for (double& v : storage.back()) v = 0;
      if (info.dtype == WEFT_DTYPE_F32)
        for (int64_t k = 0; k < n; ++k) reinterpret_cast<float*>(storage.back().data())[k] = float(rng() % 7) * 0.25f - 0.75f;
      else if (info.dtype == WEFT_DTYPE_I32)
        for (int64_t k = 0; k < n; ++k) reinterpret_cast<int32_t*>(storage.back().data())[k] = int32_t(rng() % 3);
      bindings.push_back(bind(t, storage.back().data(), info.dtype, shapes_kept.back()));
    }
    const weft_status s = weft_graph_run_reference(g, bindings.data(), int32_t(bindings.size()));
    EXPECT_TRUE(s == WEFT_OK || s == WEFT_ERROR_INVALID_ARGUMENT) << weft_last_error_message();
    if (s == WEFT_OK) ++graphs_run;
    weft_graph_destroy(g);
  }
  weft_context_destroy(ctx);
  // The fuzzer must actually build and run graphs, not only produce rejections.
  EXPECT_GT(ok_ops, 100);
  EXPECT_GT(rejected, 100);
  EXPECT_GT(graphs_run, 10);
  std::printf("random graphs: %d ops accepted, %d rejected, %d graphs run\n", ok_ops, rejected, graphs_run);
}

}  // namespace
