// Helpers for C API tests: they link libweft.so only, as a user does.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft_test {

// Asserts a call failed with `status` and that the message mentions every one of `needles`.
#define EXPECT_WEFT_ERROR(call, status, ...)                                                   \
  do {                                                                                         \
    const weft_status s_ = (call);                                                             \
    EXPECT_EQ(s_, status) << #call << " -> " << weft_status_string(s_) << ": " << weft_last_error_message(); \
    const std::string m_ = weft_last_error_message();                                          \
    for (const char* n_ : std::initializer_list<const char*>{__VA_ARGS__})                     \
      EXPECT_NE(m_.find(n_), std::string::npos) << "message lacks '" << n_ << "': " << m_;    \
  } while (0)

#define ASSERT_WEFT_OK(call)                                                                      \
  do {                                                                                            \
    const weft_status s_ = (call);                                                                \
    ASSERT_EQ(s_, WEFT_OK) << #call << " -> " << weft_status_string(s_) << ": " << weft_last_error_message(); \
  } while (0)

// A context + graph pair destroyed at scope exit.
class GraphFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_WEFT_OK(weft_context_create(nullptr, &ctx));
    ASSERT_WEFT_OK(weft_graph_create(ctx, "g", &g));
  }
  void TearDown() override {
    weft_graph_destroy(g);
    weft_context_destroy(ctx);
  }
  weft_tensor add(weft_tensor_kind kind, const char* name, weft_dtype dt, std::vector<weft_dim> dims) {
    weft_tensor t = WEFT_TENSOR_NONE;
    EXPECT_EQ(weft_graph_add_tensor(g, kind, name, dt, dims.data(), static_cast<int32_t>(dims.size()), &t), WEFT_OK)
        << weft_last_error_message();
    return t;
  }
  weft_context* ctx = nullptr;
  weft_graph* g = nullptr;
};

inline weft_dim fixed(int64_t n) { return weft_dim{nullptr, n}; }
inline weft_dim sym(const char* s) { return weft_dim{s, 0}; }

inline weft_binding bind(weft_tensor t, void* data, weft_dtype dt, const std::vector<int64_t>& shape,
                         const int64_t* strides = nullptr) {
  return weft_binding{t, weft_tensor_view{data, dt, static_cast<int32_t>(shape.size()), shape.data(), strides}};
}

}  // namespace weft_test
