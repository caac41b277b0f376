// Running graphs on the CPU reference through the C API: symbol binding from shapes, results against
// double-precision loops, strided and DLPack views, and every binding error.
#include <dlpack/dlpack.h>

#include <cmath>
#include <random>
#include <thread>

#include "capi_test_util.hpp"

using namespace weft_test;

namespace {

constexpr int64_t kIn = 5, kOut = 3;

// y = silu(x · Wᵀ + b) with x [batch, 5], batch in [1, 8].
class ReferenceRun : public GraphFixture {
 protected:
  void SetUp() override {
    GraphFixture::SetUp();
    ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
    x = add(WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, {sym("batch"), fixed(kIn)});
    w = add(WEFT_TENSOR_WEIGHT, "w", WEFT_DTYPE_F32, {fixed(kOut), fixed(kIn)});
    b = add(WEFT_TENSOR_WEIGHT, "b", WEFT_DTYPE_F32, {fixed(kOut)});
    weft_tensor h = 0;
    ASSERT_WEFT_OK(weft_op_linear(g, x, w, b, WEFT_TENSOR_NONE, "h", &h));
    ASSERT_WEFT_OK(weft_op_silu(g, h, "y", &y));
    ASSERT_WEFT_OK(weft_graph_mark_output(g, y, nullptr));
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> u(-1, 1);
    xv.resize(8 * kIn);
    wv.resize(kOut * kIn);
    bv.resize(kOut);
    for (auto* v : {&xv, &wv, &bv})
      for (float& e : *v) e = u(rng);
  }
  std::vector<double> expected(int64_t batch) const {
    std::vector<double> out;
    for (int64_t r = 0; r < batch; ++r)
      for (int64_t n = 0; n < kOut; ++n) {
        double acc = bv[size_t(n)];
        for (int64_t k = 0; k < kIn; ++k) acc += double(xv[size_t(r * kIn + k)]) * wv[size_t(n * kIn + k)];
        out.push_back(acc / (1 + std::exp(-acc)));
      }
    return out;
  }
  weft_tensor x = 0, w = 0, b = 0, y = 0;
  std::vector<float> xv, wv, bv;
  std::vector<int64_t> ws{kOut, kIn}, bs{kOut};
};

TEST_F(ReferenceRun, EveryBatchInRange) {
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> yv(size_t(batch * kOut), std::nanf(""));  // poisoned: an unwritten element fails
    std::vector<int64_t> xs{batch, kIn}, ys{batch, kOut};
    const weft_binding bs_[] = {bind(x, xv.data(), WEFT_DTYPE_F32, xs), bind(w, wv.data(), WEFT_DTYPE_F32, ws),
                                bind(b, bv.data(), WEFT_DTYPE_F32, bs), bind(y, yv.data(), WEFT_DTYPE_F32, ys)};
    ASSERT_WEFT_OK(weft_graph_run_reference(g, bs_, 4));
    const auto want = expected(batch);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(yv[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
  }
}

TEST_F(ReferenceRun, StridedAndDlpackViews) {
  // x as the transpose of a [5, 2] buffer: strides {1, 2}.
  const int64_t batch = 2;
  std::vector<float> xt(size_t(kIn * batch));
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t k = 0; k < kIn; ++k) xt[size_t(k * batch + r)] = xv[size_t(r * kIn + k)];
  std::vector<int64_t> xs{batch, kIn}, xstr{1, batch}, ys{batch, kOut};
  std::vector<float> yv(size_t(batch * kOut), std::nanf(""));
  // w through DLPack.
  DLTensor dl{};
  dl.data = wv.data();
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = 2;
  dl.dtype = DLDataType{kDLFloat, 32, 1};
  dl.shape = ws.data();
  weft_tensor_view wview{};
  ASSERT_WEFT_OK(weft_tensor_view_from_dlpack(&dl, &wview));
  const weft_binding bs_[] = {bind(x, xt.data(), WEFT_DTYPE_F32, xs, xstr.data()), weft_binding{w, wview},
                              bind(b, bv.data(), WEFT_DTYPE_F32, bs), bind(y, yv.data(), WEFT_DTYPE_F32, ys)};
  ASSERT_WEFT_OK(weft_graph_run_reference(g, bs_, 4));
  const auto want = expected(batch);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(yv[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;

  dl.device = DLDevice{kDLOpenCL, 0};
  EXPECT_WEFT_ERROR(weft_tensor_view_from_dlpack(&dl, &wview), WEFT_ERROR_INVALID_ARGUMENT, "device type 4", "kDLCUDA");
  dl.device = DLDevice{kDLCPU, 0};
  dl.dtype = DLDataType{kDLFloat, 64, 1};
  EXPECT_WEFT_ERROR(weft_tensor_view_from_dlpack(&dl, &wview), WEFT_ERROR_INVALID_ARGUMENT, "64 bits", "not supported");
  dl.dtype = DLDataType{kDLFloat, 32, 4};
  EXPECT_WEFT_ERROR(weft_tensor_view_from_dlpack(&dl, &wview), WEFT_ERROR_INVALID_ARGUMENT, "4 lanes");
}

TEST_F(ReferenceRun, BindingErrorsNameTensorAndDim) {
  std::vector<float> yv(8 * kOut);
  std::vector<int64_t> xs{2, kIn}, ys{2, kOut}, ys3{3, kOut}, x_big{9, kIn}, x_bad{2, 4}, x_rank{2, kIn, 1};
  auto run = [&](std::vector<weft_binding> v) { return weft_graph_run_reference(g, v.data(), static_cast<int32_t>(v.size())); };
  const weft_binding wb = bind(w, wv.data(), WEFT_DTYPE_F32, ws), bb = bind(b, bv.data(), WEFT_DTYPE_F32, bs);
  const weft_binding yb = bind(y, yv.data(), WEFT_DTYPE_F32, ys);
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, xs), wb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "weight 'b' is not bound");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, xs), wb, bb, wb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "weight 'w' is bound twice");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_BF16, xs), wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x'", "dtype bf16", "expected f32");
  EXPECT_WEFT_ERROR(run({bind(x, nullptr, WEFT_DTYPE_F32, xs), wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x'", "NULL data");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, x_big), wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x' dim 0 (symbol 'batch') is 9", "[1, 8]");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, x_bad), wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x' dim 1 is bound as 4", "expected 5");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, x_rank), wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x' is bound with rank 3", "expected rank 2");
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, xs), wb, bb, bind(y, yv.data(), WEFT_DTYPE_F32, ys3)}),
                    WEFT_ERROR_INVALID_ARGUMENT, "output 'y' dim 0 (symbol 'batch') is 3", "expected 2",
                    "from input 'x' dim 0");
  weft_tensor h = 0;
  ASSERT_WEFT_OK(weft_graph_find_tensor(g, "h", &h));
  EXPECT_WEFT_ERROR(run({bind(x, xv.data(), WEFT_DTYPE_F32, xs), wb, bb, yb, bind(h, yv.data(), WEFT_DTYPE_F32, ys)}),
                    WEFT_ERROR_INVALID_ARGUMENT, "'h' is an intermediate");
  EXPECT_WEFT_ERROR(run({bind(WEFT_TENSOR_NONE, xv.data(), WEFT_DTYPE_F32, xs)}), WEFT_ERROR_INVALID_ARGUMENT,
                    "bindings[0].tensor is WEFT_TENSOR_NONE");
  EXPECT_WEFT_ERROR(weft_graph_run_reference(g, nullptr, 2), WEFT_ERROR_INVALID_ARGUMENT, "bindings is NULL");
  const int64_t zero_shape[] = {0, kIn};
  weft_binding zb{x, weft_tensor_view{xv.data(), WEFT_DTYPE_F32, 2, zero_shape, nullptr}};
  EXPECT_WEFT_ERROR(run({zb, wb, bb, yb}), WEFT_ERROR_INVALID_ARGUMENT, "input 'x' dim 0 (symbol 'batch') is 0");
}

TEST_F(ReferenceRun, ConcurrentRunsOfOneGraph) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const int64_t batch = 1 + t;
      std::vector<float> yv(size_t(batch * kOut));
      std::vector<int64_t> xs{batch, kIn}, ys{batch, kOut};
      const weft_binding bs_[] = {bind(x, xv.data(), WEFT_DTYPE_F32, xs), bind(w, wv.data(), WEFT_DTYPE_F32, ws),
                                  bind(b, bv.data(), WEFT_DTYPE_F32, bs), bind(y, yv.data(), WEFT_DTYPE_F32, ys)};
      for (int round = 0; round < 100; ++round)
        if (weft_graph_run_reference(g, bs_, 4) != WEFT_OK) return;
      const auto want = expected(batch);
      for (size_t i = 0; i < want.size(); ++i)
        if (std::fabs(yv[i] - want[i]) > 1e-5 * (1 + std::fabs(want[i]))) return;
      ok[size_t(t)] = 1;
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 1);
}

}  // namespace
