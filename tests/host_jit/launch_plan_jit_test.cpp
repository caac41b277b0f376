// The host JIT's launch plan must agree with the reference interpreter (runtime/launch_plan.cpp) on every
// input: return code, error_info, symbols, compile values and slots, written or left alone alike. Random
// tables and random binding sets with one or two faults each; the seed is printed (WEFT_TEST_SEED overrides
// it) so that a failure can be replayed. Then the object code in the kernel cache: stored, reused, keyed,
// and a damaged entry recompiled instead of trusted.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cache/kernel_cache.hpp"
#include "host_jit/launch_plan_jit.hpp"
#include "models/decoder_graph.hpp"
#include "runtime/launch_plan.hpp"

namespace weft::test {
namespace {

namespace fs = std::filesystem;
using Rng = std::mt19937_64;

uint64_t test_seed() {
  const char* env = std::getenv("WEFT_TEST_SEED");
  return env ? std::strtoull(env, nullptr, 0) : 20250611;
}

int64_t uniform(Rng& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
bool coin(Rng& rng, double p = 0.5) { return std::bernoulli_distribution(p)(rng); }

LaunchPlanTables random_tables(Rng& rng) {
  LaunchPlanTables t;
  t.tag = static_cast<uint32_t>(uniform(rng, 1, 0xffffffff));
  const int64_t num_symbols = uniform(rng, 0, 4);
  for (int64_t s = 0; s < num_symbols; ++s) {
    LaunchPlanTables::Symbol sym;
    sym.min = coin(rng, 0.1) ? 0 : uniform(rng, 1, 8);  // 0 exercises the "0 is unset" rule of the reference
    sym.max = sym.min + (coin(rng, 0.15) ? 0 : uniform(rng, 1, 40));
    switch (uniform(rng, 0, 2)) {
      case 0: break;  // exact
      case 1: sym.buckets = {sym.max}; break;  // runtime
      default:
        for (int64_t b = std::max<int64_t>(sym.min, 1); b < sym.max; b += uniform(rng, 1, 12)) sym.buckets.push_back(b);
        sym.buckets.push_back(sym.max);
    }
    t.symbols.push_back(sym);
  }
  const int64_t num_tensors = uniform(rng, 1, 40);
  for (int64_t i = 0; i < num_tensors; ++i) {
    LaunchPlanTables::Tensor x;
    x.bindable = coin(rng, 0.75);
    x.is_output = coin(rng, 0.3) && (x.bindable || coin(rng, 0.2));
    x.dtype = static_cast<int32_t>(uniform(rng, 0, 4));
    const int64_t rank = uniform(rng, 0, 4);
    for (int64_t d = 0; d < rank; ++d)
      x.dims.push_back(num_symbols > 0 && coin(rng, 0.4) ? -1 - uniform(rng, 0, num_symbols - 1) : uniform(rng, 1, 6));
    t.tensors.push_back(std::move(x));
  }
  return t;
}

// A binding set; the arrays it points to live as long as it does (deque: stable addresses).
struct Bindings {
  std::vector<PlanBinding> list;
  std::deque<std::vector<int64_t>> arrays;

  const int64_t* keep(std::vector<int64_t> v) {
    v.resize(v.size() + 2, 777);  // slack, so a wrong-rank binding never points past its array
    return arrays.emplace_back(std::move(v)).data();
  }
};

int64_t tensor_id(uint32_t tag, int64_t index) {
  return static_cast<int64_t>((static_cast<uint64_t>(tag) << 32) | static_cast<uint64_t>(index + 1));
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t dense = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = dense;
    dense *= shape[d];
  }
  return s;
}

// One binding for tensor `t` with the symbols at `values`; strides randomly absent or dense.
PlanBinding make_binding(const LaunchPlanTables& tables, size_t t, const std::vector<int64_t>& values, Bindings& out,
                         Rng& rng) {
  const LaunchPlanTables::Tensor& x = tables.tensors[t];
  std::vector<int64_t> shape;
  for (int64_t d : x.dims) shape.push_back(d > 0 ? d : values[static_cast<size_t>(-1 - d)]);
  PlanBinding b{};
  b.tensor = tensor_id(tables.tag, static_cast<int64_t>(t));
  b.data = reinterpret_cast<void*>(uintptr_t{0x10000} + 64 * t);
  b.dtype = x.dtype;
  b.rank = static_cast<int32_t>(x.dims.size());
  b.shape = shape.empty() && coin(rng) ? nullptr : out.keep(shape);
  b.strides = coin(rng) ? nullptr : out.keep(dense_strides(shape));
  return b;
}

// A complete, valid binding set in random order.
Bindings valid_bindings(const LaunchPlanTables& tables, Rng& rng, std::vector<int64_t>* values_out = nullptr) {
  std::vector<int64_t> values;
  for (const LaunchPlanTables::Symbol& s : tables.symbols) values.push_back(uniform(rng, s.min, s.max));
  Bindings out;
  for (size_t t = 0; t < tables.tensors.size(); ++t)
    if (tables.tensors[t].bindable) out.list.push_back(make_binding(tables, t, values, out, rng));
  std::shuffle(out.list.begin(), out.list.end(), rng);
  if (values_out) *values_out = values;
  return out;
}

// A writable copy of binding i's shape (or strides), so that a fault touches only that binding.
int64_t* own_copy(Bindings& bs, const int64_t* p, int32_t rank) {
  std::vector<int64_t> v(p, p + rank);
  return const_cast<int64_t*>(bs.keep(std::move(v)));
}

// The tensor a binding names, if it names one of the graph's.
const LaunchPlanTables::Tensor* tensor_of(const LaunchPlanTables& tables, const PlanBinding& b) {
  const auto id = static_cast<uint64_t>(b.tensor);
  const uint64_t low = id & 0xffffffffu;
  if ((id >> 32) != tables.tag || low == 0 || low > tables.tensors.size()) return nullptr;
  return &tables.tensors[low - 1];
}

// Applies one random fault (or none) to a valid set.
void mutate(const LaunchPlanTables& tables, Bindings& bs, const std::vector<int64_t>& values, Rng& rng) {
  auto& list = bs.list;
  const auto pick = [&]() -> PlanBinding& { return list[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(list.size()) - 1))]; };
  const int64_t num_tensors = static_cast<int64_t>(tables.tensors.size());
  const int kind = static_cast<int>(uniform(rng, 0, 17));
  if (list.empty() && kind != 0 && kind != 6) return;
  switch (kind) {
    case 0: break;                                                      // none
    case 1: list.erase(list.begin() + uniform(rng, 0, static_cast<int64_t>(list.size()) - 1)); break;  // drop
    case 2: {  // bound twice
      const PlanBinding copy = pick();
      list.insert(list.begin() + uniform(rng, 0, static_cast<int64_t>(list.size())), copy);
      break;
    }
    case 3: pick().tensor ^= int64_t{1} << uniform(rng, 32, 62); break;  // another graph's tag
    case 4: pick().tensor &= ~int64_t{0xffffffff}; break;               // index 0: no tensor
    case 5: {                                                            // past the end
      const int64_t low = coin(rng) ? num_tensors + uniform(rng, 0, 3) : 0xffffffff;
      PlanBinding& b = pick();
      b.tensor = (b.tensor & ~int64_t{0xffffffff}) | low;
      break;
    }
    case 6: {  // an intermediate
      std::vector<size_t> inner;
      for (size_t t = 0; t < tables.tensors.size(); ++t)
        if (!tables.tensors[t].bindable) inner.push_back(t);
      if (inner.empty()) break;
      const size_t t = inner[static_cast<size_t>(uniform(rng, 0, static_cast<int64_t>(inner.size()) - 1))];
      list.insert(list.begin() + uniform(rng, 0, static_cast<int64_t>(list.size())), make_binding(tables, t, values, bs, rng));
      break;
    }
    case 7: pick().data = nullptr; break;
    case 8: pick().dtype += static_cast<int32_t>(uniform(rng, 1, 4)); break;
    case 9: {
      PlanBinding& b = pick();
      b.rank += b.rank == 0 || coin(rng) ? 1 : -1;
      if (!b.shape) b.shape = bs.keep({});
      break;
    }
    case 10: case 11: case 12: case 13: {  // one dim of one binding: fixed +-1, symbol out of range or other value
      PlanBinding& b = pick();
      const LaunchPlanTables::Tensor* x = tensor_of(tables, b);
      if (!x || b.rank != static_cast<int32_t>(x->dims.size()) || b.rank == 0) break;
      const int32_t d = static_cast<int32_t>(uniform(rng, 0, b.rank - 1));
      const int64_t want = x->dims[static_cast<size_t>(d)];
      int64_t* shape = own_copy(bs, b.shape, b.rank);
      if (want > 0) {
        shape[d] = want + (coin(rng) ? 1 : -1);
      } else {
        const LaunchPlanTables::Symbol& s = tables.symbols[static_cast<size_t>(-1 - want)];
        shape[d] = kind == 10 ? (coin(rng) ? s.max + 1 : s.min - 1) : uniform(rng, s.min, s.max);
      }
      b.shape = shape;
      if (b.strides && coin(rng)) b.strides = bs.keep(dense_strides(std::vector<int64_t>(shape, shape + b.rank)));
      break;
    }
    case 14: {  // strides off by one somewhere
      PlanBinding& b = pick();
      if (b.rank == 0) break;
      int64_t* strides = own_copy(bs, bs.keep(dense_strides(std::vector<int64_t>(b.shape, b.shape + b.rank))), b.rank);
      strides[uniform(rng, 0, b.rank - 1)] += coin(rng) ? 1 : -1;
      b.strides = strides;
      break;
    }
    case 15:  // dense explicit strides everywhere: fine
      for (PlanBinding& b : list) b.strides = bs.keep(dense_strides(std::vector<int64_t>(b.shape, b.shape + b.rank)));
      break;
    case 16: for (PlanBinding& b : list) b.strides = nullptr; break;  // no strides anywhere: fine
    default: pick().tensor = static_cast<int64_t>(rng()); break;      // any id at all
  }
}

struct Outcome {
  int32_t code = 0;
  std::vector<void*> slots;
  std::vector<int64_t> symbols, compile_values;
  std::array<int64_t, kPlanErrorInfoWords> info{};
};

// Outputs start as garbage, so that "not written" is compared too.
template <class Plan>
Outcome run_plan(const LaunchPlanTables& tables, const Bindings& bs, Plan&& plan) {
  Outcome o;
  o.slots.assign(tables.tensors.size(), reinterpret_cast<void*>(uintptr_t{0xdead}));
  o.symbols.assign(tables.symbols.size(), -12345);
  o.compile_values.assign(tables.symbols.size(), -6789);
  o.info.fill(-4242);
  o.code = plan(bs.list.data(), static_cast<int32_t>(bs.list.size()), o.slots.data(), o.symbols.data(),
                o.compile_values.data(), o.info.data());
  return o;
}

// Runs both; true when they agree (with gtest failures naming what differs otherwise).
bool agree(const LaunchPlanTables& tables, const Bindings& bs, LaunchPlanFn fn, int32_t* code = nullptr) {
  const Outcome want = run_plan(tables, bs, [&](auto... args) { return run_launch_plan_reference(tables, args...); });
  const Outcome got = run_plan(tables, bs, fn);
  if (code) *code = want.code;
  EXPECT_EQ(got.code, want.code);
  EXPECT_EQ(got.info, want.info) << "code " << want.code;
  EXPECT_EQ(got.symbols, want.symbols) << "code " << want.code;
  EXPECT_EQ(got.compile_values, want.compile_values) << "code " << want.code;
  EXPECT_EQ(got.slots, want.slots) << "code " << want.code;
  return got.code == want.code && got.info == want.info && got.symbols == want.symbols &&
         got.compile_values == want.compile_values && got.slots == want.slots;
}

TEST(LaunchPlanJit, AgreesWithTheReferenceOnRandomTablesAndBindings) {
  ASSERT_TRUE(host_jit_available());
  const uint64_t seed = test_seed();
  std::printf("LaunchPlanJit seed %llu (set WEFT_TEST_SEED to replay)\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  std::map<int32_t, int> codes;  // how often each outcome came up: every one must be exercised
  int cases = 0;
  for (int table = 0; table < 160; ++table) {
    const LaunchPlanTables tables = random_tables(rng);
    const std::unique_ptr<LaunchPlanJit> jit = compile_launch_plan(tables, nullptr);
    ASSERT_NE(jit, nullptr);
    for (int n = 0; n < 60; ++n, ++cases) {
      std::vector<int64_t> values;
      Bindings bs = valid_bindings(tables, rng, &values);
      const int faults = n == 0 ? 0 : static_cast<int>(uniform(rng, 1, 2));
      for (int f = 0; f < faults; ++f) mutate(tables, bs, values, rng);
      if (n == 1) bs.list.clear();  // nothing bound at all
      int32_t code = 0;
      ASSERT_TRUE(agree(tables, bs, jit->function(), &code))
          << "seed " << seed << ", table " << table << ", binding set " << n;
      ++codes[code];
    }
  }
  std::printf("%d cases; outcomes:", cases);
  for (auto [code, count] : codes) std::printf(" %d:%d", code, count);
  std::printf("\n");
  for (int32_t code = 0; code <= static_cast<int32_t>(PlanError::symbol_mismatch); ++code)
    EXPECT_GT(codes[code], 0) << "no case ended with code " << code;
}

// ---- the object cache ----------------------------------------------------------------------------------

class LaunchPlanJitCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-host-jit-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    cache::Options options;
    options.dir = root_ / "cache";
    options.max_bytes = uint64_t{1} << 30;
    cache_ = std::make_unique<cache::KernelCache>(options);
  }
  void TearDown() override {
    cache_.reset();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::optional<cache::Entry> entry(const std::string& hex) { return cache_->get(*cache::CacheKey::from_hex(hex)); }
  // A few binding sets, valid and faulty, agree with the reference.
  void expect_agreement(const LaunchPlanTables& tables, const LaunchPlanJit& jit, uint64_t seed) {
    Rng rng(seed);
    for (int n = 0; n < 200; ++n) {
      std::vector<int64_t> values;
      Bindings bs = valid_bindings(tables, rng, &values);
      if (n > 0) mutate(tables, bs, values, rng);
      ASSERT_TRUE(agree(tables, bs, jit.function())) << "binding set " << n;
    }
  }

  fs::path root_;
  std::unique_ptr<cache::KernelCache> cache_;
};

// The plan of a real graph: Llama-3.2-1B's decode step (batch symbolic, power-of-two buckets).
LaunchPlanTables decoder_tables(uint32_t tag) {
  DecoderShape shape = llama_3_2_1b_shape();
  shape.layers = 8;
  const Graph g = build_decoder_graph(shape);
  std::vector<std::vector<int64_t>> buckets;
  for (size_t s = 0; s < g.symbols().size(); ++s) {
    const int64_t max = g.symbols().at(static_cast<int32_t>(s)).max;
    buckets.emplace_back();
    for (int64_t b = 1; b < max; b *= 2) buckets.back().push_back(b);
    buckets.back().push_back(max);
  }
  return make_launch_plan_tables(g, buckets, tag);
}

TEST_F(LaunchPlanJitCache, StoresReusesAndRecompilesADamagedObject) {
  const LaunchPlanTables tables = decoder_tables(7);
  size_t bindable = 0;
  for (const auto& t : tables.tensors) bindable += t.bindable ? 1 : 0;

  const std::unique_ptr<LaunchPlanJit> cold = compile_launch_plan(tables, cache_.get());
  ASSERT_NE(cold, nullptr);
  EXPECT_FALSE(cold->stats().object_cache_hit);
  ASSERT_EQ(cold->stats().cache_key.size(), 32u);
  const std::optional<cache::Entry> stored = entry(cold->stats().cache_key);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->cubin.empty());
  EXPECT_EQ(stored->metadata, R"({"kind":"host_plan"})");
  EXPECT_EQ(stored->extra.size(), cold->stats().object_bytes);
  expect_agreement(tables, *cold, 1);

  const std::unique_ptr<LaunchPlanJit> warm = compile_launch_plan(tables, cache_.get());
  ASSERT_NE(warm, nullptr);
  EXPECT_TRUE(warm->stats().object_cache_hit);
  EXPECT_EQ(warm->stats().cache_key, cold->stats().cache_key);
  expect_agreement(tables, *warm, 2);
  std::printf("decoder plan: %zu tensors (%zu bindable), %zu symbols, object %zu bytes; cold %.2f ms, warm %.2f ms\n",
              tables.tensors.size(), bindable, tables.symbols.size(), cold->stats().object_bytes, cold->stats().jit_ms,
              warm->stats().jit_ms);

  // The tag is not compiled in: another graph's tag hits the same object, and the plan checks that tag.
  LaunchPlanTables other_tag = tables;
  other_tag.tag = 0x9abc;
  const std::unique_ptr<LaunchPlanJit> retagged = compile_launch_plan(other_tag, cache_.get());
  EXPECT_TRUE(retagged->stats().object_cache_hit);
  EXPECT_EQ(retagged->stats().cache_key, cold->stats().cache_key);
  expect_agreement(other_tag, *retagged, 3);
  Rng rng(4);
  const Bindings old_ids = valid_bindings(tables, rng);
  int32_t code = 0;
  EXPECT_TRUE(agree(other_tag, old_ids, retagged->function(), &code));
  EXPECT_EQ(code, static_cast<int32_t>(PlanError::bad_tensor));

  // Damaged entries (checksums intact: written through put) are compiled again, then replaced.
  const cache::CacheKey key = *cache::CacheKey::from_hex(cold->stats().cache_key);
  std::vector<std::vector<uint8_t>> damaged = {{1, 2, 3}, std::vector<uint8_t>(4096, 0xcc)};
  damaged.emplace_back(stored->extra.begin(), stored->extra.begin() + static_cast<std::ptrdiff_t>(stored->extra.size() / 2));
  damaged.emplace_back(stored->extra.begin(), stored->extra.begin() + 64);  // an ELF header and nothing else
  for (size_t i = 0; i < damaged.size(); ++i) {
    ASSERT_TRUE(cache_->put(key, cache::Entry{{}, R"({"kind":"host_plan"})", damaged[i]}));
    const std::unique_ptr<LaunchPlanJit> again = compile_launch_plan(tables, cache_.get());
    ASSERT_NE(again, nullptr) << "damage " << i;
    EXPECT_FALSE(again->stats().object_cache_hit) << "damage " << i;
    expect_agreement(tables, *again, 5 + i);
    EXPECT_EQ(entry(again->stats().cache_key)->extra, stored->extra) << "damage " << i;
  }
  // An entry of another kind under the key is not taken for a plan either.
  ASSERT_TRUE(cache_->put(key, cache::Entry{{1}, R"({"kind":"kernel"})", stored->extra}));
  EXPECT_FALSE(compile_launch_plan(tables, cache_.get())->stats().object_cache_hit);
  EXPECT_TRUE(compile_launch_plan(tables, cache_.get())->stats().object_cache_hit);
}

TEST_F(LaunchPlanJitCache, DifferentTablesHaveDifferentKeys) {
  Rng rng(test_seed() + 1);
  LaunchPlanTables a = random_tables(rng);
  a.tensors[0].bindable = true;
  a.tensors[0].dims = {3, 5};
  std::vector<LaunchPlanTables> variants(5, a);
  variants[1].tensors[0].dtype ^= 1;
  variants[2].tensors[0].dims[1] = 6;
  variants[3].tensors[0].is_output = !variants[3].tensors[0].is_output;
  variants[4].symbols.push_back({1, 9, {4, 9}});
  std::vector<std::string> keys;
  for (const LaunchPlanTables& t : variants) {
    const std::unique_ptr<LaunchPlanJit> jit = compile_launch_plan(t, cache_.get());
    EXPECT_FALSE(jit->stats().object_cache_hit);
    keys.push_back(jit->stats().cache_key);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
  EXPECT_EQ(cache_->stats().entries, variants.size());
}

TEST(LaunchPlanJit, CompilesWithoutACache) {
  Rng rng(test_seed() + 2);
  const LaunchPlanTables tables = random_tables(rng);
  const std::unique_ptr<LaunchPlanJit> jit = compile_launch_plan(tables, nullptr);
  ASSERT_NE(jit, nullptr);
  EXPECT_FALSE(jit->stats().object_cache_hit);
  EXPECT_TRUE(jit->stats().cache_key.empty());
  EXPECT_GT(jit->stats().object_bytes, 0u);
}

// Degenerate tables: no tensors, nothing bindable, no symbols.
TEST(LaunchPlanJit, AgreesOnDegenerateTables) {
  LaunchPlanTables empty;
  empty.tag = 3;
  LaunchPlanTables inner = empty;
  inner.tensors.resize(3);  // all intermediates, rank 0
  for (const LaunchPlanTables* tables : {&empty, &inner}) {
    const std::unique_ptr<LaunchPlanJit> jit = compile_launch_plan(*tables, nullptr);
    Bindings none;
    EXPECT_TRUE(agree(*tables, none, jit->function()));
    Bindings one;
    one.list.push_back(PlanBinding{tensor_id(3, 0), &one, 0, 0, nullptr, nullptr});
    EXPECT_TRUE(agree(*tables, one, jit->function()));
  }
}

}  // namespace
}  // namespace weft::test
