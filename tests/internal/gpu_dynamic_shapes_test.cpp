// Dynamic shapes on the GPU: one program serving a batch that changes every run (bucketed, runtime, lazy),
// every result checked against the CPU reference, and the number of compiles bounded by the buckets.
#include <gtest/gtest.h>

#include <chrono>

#include "gpu_test_util.hpp"
#include "test_models.hpp"

namespace weft::test {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

ProgramOptions options(bool lazy = false, int32_t max_loaded = 8, bool cache = true) {
  ProgramOptions po;
  po.watchdog_ms = 10000;
  po.lazy = lazy;
  po.max_loaded_kernels = max_loaded;
  po.use_cache = cache;
  return po;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

GpuCompareOptions on(Program& p, uint32_t seed) {
  GpuCompareOptions o;
  o.seed = seed;
  o.program = &p;
  return o;
}

TEST(GpuDynamicShapes, BatchSweepOneToSixtyFourOnPowerOfTwoBuckets) {
  WEFT_REQUIRE_GPU();
  const Graph g = build_decoder_graph(tiny_decoder(1, 64, 64));
  GpuSession session;
  Program program(session.context(), g, options());
  for (int64_t batch = 1; batch <= 64; ++batch) {
    const auto problems = compare_with_reference(g, SymbolValues{batch}, on(program, static_cast<uint32_t>(batch)));
    EXPECT_TRUE(problems.empty()) << "batch " << batch << joined(problems);
  }
  const ProgramStats s = program.stats();
  // Buckets 1, 2, 4, ..., 64: seven kernels for sixty-four batch sizes.
  EXPECT_EQ(s.compiles + s.cache_loads, 7) << s.compiles << " compiles, " << s.cache_loads << " cache loads";
  EXPECT_EQ(s.loaded, 7);
  std::printf("[ batch sweep ] 64 batch sizes, %lld compiles + %lld cache loads, host JIT %s\n", static_cast<long long>(s.compiles),
              static_cast<long long>(s.cache_loads), s.host_jit ? "on" : "off (interpreter)");
}

TEST(GpuDynamicShapes, RuntimePolicyCompilesOnce) {
  WEFT_REQUIRE_GPU();
  Graph g = build_decoder_graph(tiny_decoder(2, 16, 64));
  g.set_symbol_policy(0, SymbolPolicy::runtime, {});
  GpuSession session;
  Program program(session.context(), g, options());
  for (int64_t batch : {16, 1, 5, 11, 2}) {
    const auto problems = compare_with_reference(g, SymbolValues{batch}, on(program, static_cast<uint32_t>(batch)));
    EXPECT_TRUE(problems.empty()) << "batch " << batch << joined(problems);
  }
  const ProgramStats s = program.stats();
  EXPECT_EQ(s.compiles + s.cache_loads, 1);
}

TEST(GpuDynamicShapes, KvLengthUpTo4096NeverCompiles) {
  WEFT_REQUIRE_GPU();
  // The KV length is data (each row's position), so any length up to the cache runs on one kernel.
  const Graph g = build_decoder_graph(tiny_decoder(1, 2, 4096));
  GpuSession session;
  Program program(session.context(), g, options());
  for (uint32_t seed : {1u, 2u, 3u}) {
    GpuCompareOptions o = on(program, seed);
    o.max_index = 4096;  // positions drawn from [0, 4096)
    const auto problems = compare_with_reference(g, SymbolValues{2}, o);
    EXPECT_TRUE(problems.empty()) << "seed " << seed << joined(problems);
  }
  const ProgramStats s = program.stats();
  EXPECT_EQ(s.compiles + s.cache_loads, 1);
}

TEST(GpuDynamicShapes, LazyModeServesANewBucketWithTheGenericKernel) {
  WEFT_REQUIRE_GPU();
  const Graph g = build_decoder_graph(tiny_decoder(2, 32, 64));
  GpuSession session;
  Program program(session.context(), g, options(/*lazy=*/true, 8, /*cache=*/false));
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(compare_with_reference(g, SymbolValues{32}, on(program, 1)).empty());  // the generic kernel itself
  const double first_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  const auto problems = compare_with_reference(g, SymbolValues{3}, on(program, 2));  // bucket 4: not compiled yet
  const double lazy_ms = ms_since(t0);
  EXPECT_TRUE(problems.empty()) << joined(problems);
  ProgramStats s = program.stats();
  EXPECT_GE(s.generic_runs, 1);
  program.wait_for_pending();
  s = program.stats();
  EXPECT_EQ(s.pending, 0);
  EXPECT_EQ(s.loaded, 2);
  const int64_t generic = s.generic_runs;
  EXPECT_TRUE(compare_with_reference(g, SymbolValues{3}, on(program, 3)).empty());
  EXPECT_EQ(program.stats().generic_runs, generic);  // the specialization took over
  // The same first-seen bucket without lazy mode: the run waits for its compile.
  Program blocking(session.context(), g, options(false, 8, /*cache=*/false));
  EXPECT_TRUE(compare_with_reference(g, SymbolValues{32}, on(blocking, 1)).empty());
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(compare_with_reference(g, SymbolValues{3}, on(blocking, 2)).empty());
  const double blocking_ms = ms_since(t0);
  std::printf("[ lazy ] first run (compiles the generic kernel) %.1f ms; a first-seen bucket: lazy %.1f ms, not lazy %.1f ms "
              "(each with the CPU reference and data upload)\n",
              first_ms, lazy_ms, blocking_ms);
}

TEST(GpuDynamicShapes, LoadedKernelsStayWithinTheBound) {
  WEFT_REQUIRE_GPU();
  const Graph g = build_decoder_graph(tiny_decoder(1, 8, 64));
  GpuSession session;
  Program program(session.context(), g, options(false, /*max_loaded=*/2));
  for (int64_t batch : {1, 2, 4, 1, 8, 2}) {
    const auto problems = compare_with_reference(g, SymbolValues{batch}, on(program, static_cast<uint32_t>(batch)));
    EXPECT_TRUE(problems.empty()) << "batch " << batch << joined(problems);
    EXPECT_LE(program.stats().loaded, 2);
  }
  EXPECT_EQ(program.stats().evictions, 4);  // 4 evicts 1, 1 evicts 2, 8 evicts 4, 2 evicts 1
}

}  // namespace
}  // namespace weft::test
