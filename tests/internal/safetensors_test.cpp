// safetensors checkpoints: round trip, shards, and every malformed case is an error naming the file and tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>

#include "core/error.hpp"
#include "models/safetensors.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("weft-st-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  static std::vector<uint8_t> iota_bytes(size_t n) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 7 + 1);
    return b;
  }
  std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir;
};

TEST_F(Safetensors, RoundTripAndShards) {
  const std::vector<SafetensorToWrite> a = {{"w.bf16", DType::bf16, {3, 5}, iota_bytes(30)},
                                            {"b.f32", DType::f32, {5}, iota_bytes(20)}};
  const std::vector<SafetensorToWrite> b = {{"ids", DType::i64, {2, 2}, iota_bytes(32)}, {"empty", DType::f32, {0, 4}, {}}};
  write_safetensors(dir / "s1.safetensors", a);
  write_safetensors(dir / "s2.safetensors", b);
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"w.bf16": "s1.safetensors", "b.f32": "s1.safetensors", "ids": "s2.safetensors", "empty": "s2.safetensors"}})";
  const Checkpoint c(dir);
  EXPECT_EQ(c.names().size(), 4u);
  for (const auto* set : {&a, &b})
    for (const auto& t : *set) {
      const SafetensorEntry& e = c.get(t.name, t.dtype, t.shape);
      ASSERT_EQ(e.bytes, t.bytes.size()) << t.name;
      if (e.bytes == 0) continue;  // an empty tensor: nothing to compare (and memcmp takes no null pointers)
      EXPECT_EQ(std::memcmp(e.data, t.bytes.data(), e.bytes), 0) << t.name;
    }
  EXPECT_NE(error_of([&] { c.get("w.bf16", DType::bf16, {5, 3}); }).find("has shape [3, 5]; expected [5, 3]"), std::string::npos);
  EXPECT_NE(error_of([&] { c.get("w.bf16", DType::f16, {3, 5}); }).find("is BF16; expected F16"), std::string::npos);
  EXPECT_NE(error_of([&] { c.get("missing", DType::f32, {1}); }).find("has no tensor 'missing'"), std::string::npos);
}

TEST_F(Safetensors, MalformedFilesNameTheProblem) {
  write_safetensors(dir / "ok.safetensors", {{"t", DType::f32, {4, 4}, iota_bytes(64)}});
  const auto full = fs::file_size(dir / "ok.safetensors");
  fs::copy_file(dir / "ok.safetensors", dir / "cut.safetensors");
  fs::resize_file(dir / "cut.safetensors", full - 10);
  const std::string cut = error_of([&] { SafetensorsFile f(dir / "cut.safetensors"); });
  EXPECT_NE(cut.find("tensor 't'"), std::string::npos) << cut;
  EXPECT_NE(cut.find("truncated"), std::string::npos) << cut;

  std::ofstream(dir / "garbage.safetensors") << "this is not a checkpoint at all";
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir / "garbage.safetensors"); }).find("garbage.safetensors"), std::string::npos);

  auto raw = [&](const std::string& name, const std::string& header, size_t data) {
    std::ofstream out(dir / name, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << std::string(data, '\0');
  };
  raw("f64.safetensors", R"({"x": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]}})", 16);
  const std::string f64 = error_of([&] { SafetensorsFile f(dir / "f64.safetensors"); });
  EXPECT_NE(f64.find("tensor 'x'"), std::string::npos) << f64;
  EXPECT_NE(f64.find("dtype 'F64'"), std::string::npos) << f64;
  raw("size.safetensors", R"({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir / "size.safetensors"); }).find("8 data bytes for shape [3]"), std::string::npos);
  raw("neg.safetensors", R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir / "neg.safetensors"); }).find("not a size"), std::string::npos);
  raw("json.safetensors", R"({"x": )", 0);
  EXPECT_NE(error_of([&] { SafetensorsFile f(dir / "json.safetensors"); }).find("not JSON"), std::string::npos);

  const fs::path empty = dir / "nothing";
  fs::create_directories(empty);
  try {
    Checkpoint c(empty);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::io);
    EXPECT_NE(std::string(e.what()).find("neither model.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
