// Programs through the public C API: an MLP with a symbolic batch run on the GPU from device memory (raw
// pointers and DLPack views) agrees with weft_graph_run_reference; binding errors are reported before launch.
// Skipped, with the reason, where there is no GPU.
#include <dlfcn.h>
#include <dlpack/dlpack.h>

#include <cmath>
#include <random>
#include <string>

#include "capi_test_util.hpp"
#include "weft/weft.hpp"

using namespace weft_test;

namespace {

// The few CUDA runtime entry points the test needs, from libcudart if present, else skip.
struct Cudart {
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  bool load() {
    void* h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("/usr/local/cuda/lib64/libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    malloc = reinterpret_cast<int (*)(void**, size_t)>(dlsym(h, "cudaMalloc"));
    free = reinterpret_cast<int (*)(void*)>(dlsym(h, "cudaFree"));
    memcpy = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(dlsym(h, "cudaMemcpy"));
    return malloc && free && memcpy;
  }
};

class ProgramApi : public GraphFixture {
 protected:
  void SetUp() override {
    int32_t n = 0;
    if (weft_device_count(&n) != WEFT_OK || n == 0) GTEST_SKIP() << "no GPU: " << weft_last_error_message();
    if (!rt.load()) GTEST_SKIP() << "no CUDA runtime library to allocate test memory";
    GraphFixture::SetUp();
    ASSERT_WEFT_OK(weft_graph_declare_symbol(g, "batch", 1, 8));
    x = add(WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, {sym("batch"), fixed(64)});
    w1 = add(WEFT_TENSOR_WEIGHT, "w1", WEFT_DTYPE_F32, {fixed(96), fixed(64)});
    w2 = add(WEFT_TENSOR_WEIGHT, "w2", WEFT_DTYPE_F32, {fixed(32), fixed(96)});
    weft_tensor h = 0, a = 0;
    ASSERT_WEFT_OK(weft_op_linear(g, x, w1, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "h", &h));
    ASSERT_WEFT_OK(weft_op_gelu(g, h, 1, "a", &a));
    ASSERT_WEFT_OK(weft_op_linear(g, a, w2, WEFT_TENSOR_NONE, WEFT_TENSOR_NONE, "y", &y));
    ASSERT_WEFT_OK(weft_graph_mark_output(g, y, nullptr));
  }
  void* device_copy(const std::vector<float>& v) {
    void* p = nullptr;
    EXPECT_EQ(rt.malloc(&p, v.size() * 4), 0);
    EXPECT_EQ(rt.memcpy(p, v.data(), v.size() * 4, 1), 0);  // host to device
    allocations.push_back(p);
    return p;
  }
  void TearDown() override {
    for (void* p : allocations) rt.free(p);
    if (g) GraphFixture::TearDown();
  }
  Cudart rt;
  std::vector<void*> allocations;
  weft_tensor x = 0, w1 = 0, w2 = 0, y = 0;
};

TEST_F(ProgramApi, MatchesTheReferenceAtEveryBatch) {
  weft_program* p = nullptr;
  ASSERT_WEFT_OK(weft_program_create(g, nullptr, &p));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> xv(8 * 64), w1v(96 * 64), w2v(32 * 96);
  for (auto* v : {&xv, &w1v, &w2v})
    for (float& e : *v) e = u(rng);
  void* dw1 = device_copy(w1v);
  void* dw2 = device_copy(w2v);
  const std::vector<int64_t> s1{96, 64}, s2{32, 96};
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> xb(xv.begin(), xv.begin() + batch * 64), want(size_t(batch) * 32), got(size_t(batch) * 32, -7.0f);
    void* dx = device_copy(xb);
    void* dy = device_copy(got);
    const std::vector<int64_t> xs{batch, 64}, ys{batch, 32};
    // The weight w2 goes through DLPack, like a framework tensor would.
    DLTensor dl{};
    dl.data = dw2;
    dl.device = DLDevice{kDLCUDA, 0};
    dl.ndim = 2;
    dl.dtype = DLDataType{kDLFloat, 32, 1};
    dl.shape = const_cast<int64_t*>(s2.data());
    weft_tensor_view w2view{};
    ASSERT_WEFT_OK(weft_tensor_view_from_dlpack(&dl, &w2view));
    const weft_binding dev[] = {bind(x, dx, WEFT_DTYPE_F32, xs), bind(w1, dw1, WEFT_DTYPE_F32, s1), weft_binding{w2, w2view},
                                bind(y, dy, WEFT_DTYPE_F32, ys)};
    ASSERT_WEFT_OK(weft_program_run(p, dev, 4, nullptr));
    ASSERT_WEFT_OK(weft_program_synchronize(p, nullptr));
    ASSERT_EQ(rt.memcpy(got.data(), dy, got.size() * 4, 2), 0);  // device to host
    const weft_binding host[] = {bind(x, xb.data(), WEFT_DTYPE_F32, xs), bind(w1, w1v.data(), WEFT_DTYPE_F32, s1),
                                 bind(w2, w2v.data(), WEFT_DTYPE_F32, s2), bind(y, want.data(), WEFT_DTYPE_F32, ys)};
    ASSERT_WEFT_OK(weft_graph_run_reference(g, host, 4));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "batch " << batch << " element " << i;
  }
  weft_program_destroy(p);
}

TEST_F(ProgramApi, BindingErrorsBeforeLaunch) {
  weft_program* p = nullptr;
  ASSERT_WEFT_OK(weft_program_create(g, nullptr, &p));
  std::vector<float> buf(8 * 96);
  void* d = device_copy(buf);
  const std::vector<int64_t> xs{2, 64}, big{9, 64}, s1{96, 64}, s2{32, 96}, ys{2, 32}, strides{1, 2};
  auto run = [&](std::vector<weft_binding> b) { return weft_program_run(p, b.data(), int32_t(b.size()), nullptr); };
  const weft_binding bw1 = bind(w1, d, WEFT_DTYPE_F32, s1), bw2 = bind(w2, d, WEFT_DTYPE_F32, s2), by = bind(y, d, WEFT_DTYPE_F32, ys);
  EXPECT_WEFT_ERROR(run({bind(x, d, WEFT_DTYPE_F32, big), bw1, bw2, by}), WEFT_ERROR_INVALID_ARGUMENT,
                    "input 'x' dim 0 (symbol 'batch') is 9", "[1, 8]");
  EXPECT_WEFT_ERROR(run({bind(x, d, WEFT_DTYPE_BF16, xs), bw1, bw2, by}), WEFT_ERROR_INVALID_ARGUMENT, "dtype bf16");
  EXPECT_WEFT_ERROR(run({bind(x, nullptr, WEFT_DTYPE_F32, xs), bw1, bw2, by}), WEFT_ERROR_INVALID_ARGUMENT, "NULL device pointer");
  EXPECT_WEFT_ERROR(run({bind(x, d, WEFT_DTYPE_F32, xs), bw1, by}), WEFT_ERROR_INVALID_ARGUMENT, "weight 'w2' is not bound");
  EXPECT_WEFT_ERROR(run({bind(x, d, WEFT_DTYPE_F32, xs, strides.data()), bw1, bw2, by}), WEFT_ERROR_INVALID_ARGUMENT,
                    "non-contiguous");
  weft_graph* other = nullptr;
  ASSERT_WEFT_OK(weft_graph_create(ctx, "other", &other));
  const weft_dim d4 = fixed(4);
  weft_tensor foreign = 0;
  ASSERT_WEFT_OK(weft_graph_add_tensor(other, WEFT_TENSOR_INPUT, "x", WEFT_DTYPE_F32, &d4, 1, &foreign));
  EXPECT_WEFT_ERROR(run({bind(foreign, d, WEFT_DTYPE_F32, xs)}), WEFT_ERROR_INVALID_ARGUMENT, "not a tensor of the graph");
  weft_graph_destroy(other);
  weft_program_destroy(p);
  EXPECT_WEFT_ERROR(weft_program_run(p, nullptr, 0, nullptr), WEFT_ERROR_INVALID_HANDLE, "not a live program");
  weft_program_destroy(nullptr);
}

TEST_F(ProgramApi, CppWrapperRunsAndThrows) {
  weft::Context wctx;
  weft::Graph wg(wctx, "cpp");
  auto wx = wg.input("x", WEFT_DTYPE_F32, {4, 16});
  auto wy = wg.silu(wx, "y");
  wg.output(wy);
  weft::Program p(wg);
  std::vector<float> xv(64, 0.5f), yv(64, 0.0f);
  void* dx = device_copy(xv);
  void* dy = device_copy(yv);
  weft::Bindings b;
  b.add(wx, dx, WEFT_DTYPE_F32, {4, 16}).add(wy, dy, WEFT_DTYPE_F32, {4, 16});
  p.run(b);
  p.synchronize();
  ASSERT_EQ(rt.memcpy(yv.data(), dy, yv.size() * 4, 2), 0);
  for (float v : yv) EXPECT_NEAR(v, 0.5f / (1.0f + std::exp(-0.5f)), 1e-6f);
  weft::Bindings bad;
  bad.add(wx, dx, WEFT_DTYPE_F32, {4, 15}).add(wy, dy, WEFT_DTYPE_F32, {4, 16});
  try {
    p.run(bad);
    FAIL() << "a wrong shape was accepted";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.status(), WEFT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("dim 1 is bound as 15"), std::string::npos) << e.what();
  }
}

}  // namespace
