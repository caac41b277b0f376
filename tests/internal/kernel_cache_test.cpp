// The persistent kernel cache: keys, hits and misses, several processes on one key, damaged entries and
// files, schema changes, folder permissions, WEFT_CACHE=off, LRU eviction under the cap, management calls.
// Every test works in its own temporary folder, never in the user's cache.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_dir.hpp"
#include "cache/cache_key.hpp"
#include "cache/kernel_cache.hpp"
#include "core/error.hpp"
#include "graph/graph.hpp"
#include "graph/serialize.hpp"

namespace weft::test {
namespace {

namespace fs = std::filesystem;
using cache::CacheKey;
using cache::Entry;
using cache::KernelCache;
using cache::KeyParts;

// Sets (or unsets, for nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

KeyParts base_parts() {
  KeyParts p;
  p.graph_hash = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  p.specialization = R"({"batch":[1,8],"seq":128})";
  p.target_arch = "sm_90a";
  p.compile_options = "-O3 -std=c++17 -dlto";
  p.weft_version = "0.1.0";
  p.nvrtc_version = "13.0";
  p.nvjitlink_version = "13.0";
  p.device_library_version = "1";
  return p;
}

CacheKey key_of(int i) {
  KeyParts p = base_parts();
  p.specialization = "bucket " + std::to_string(i);
  return cache::make_key(p);
}

// Bytes that tell which writer made them and whether they are whole.
Entry make_entry(int writer, size_t cubin_bytes, std::string metadata = {}) {
  Entry e;
  e.cubin.resize(cubin_bytes);
  for (size_t i = 0; i < cubin_bytes; ++i) e.cubin[i] = static_cast<uint8_t>((i * 31 + static_cast<size_t>(writer) * 7) & 0xff);
  e.metadata = metadata.empty() ? R"({"kernel_name":"weft_mk_)" + std::to_string(writer) + R"(","writer":)" +
                                      std::to_string(writer) + "}"
                                : metadata;
  e.extra = {static_cast<uint8_t>(writer), 1, 2, 3};
  return e;
}

bool same(const Entry& a, const Entry& b) { return a.cubin == b.cubin && a.metadata == b.metadata && a.extra == b.extra; }

// Runs SQL on the cache's database through a separate connection, as a damaged or foreign writer would.
void raw_sql(const fs::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message ? message : "") << " in " << sql;
  sqlite3_free(message);
  sqlite3_close(db);
}

int64_t raw_int(const fs::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t v = -1;
  if (sqlite3_open(db_path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return v;
}

std::string raw_text(const fs::path& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string v = "(no row)";
  if (sqlite3_open(db_path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return v;
}

// Flips every 100th byte of one entry's cubin in place: same length, so only the checksum can tell.
void flip_cubin_bytes(const fs::path& db_path, const CacheKey& key) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  std::vector<uint8_t> bytes;
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT cubin FROM kernels WHERE key = ?1", -1, &s, nullptr), SQLITE_OK);
  const std::string hex = key.hex();
  sqlite3_bind_text(s, 1, hex.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(s, 0));
  bytes.assign(p, p + sqlite3_column_bytes(s, 0));
  sqlite3_finalize(s);
  for (size_t i = 0; i < bytes.size(); i += 100) bytes[i] ^= 0xff;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE kernels SET cubin = ?1 WHERE key = ?2", -1, &s, nullptr), SQLITE_OK);
  sqlite3_bind_blob(s, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, hex.c_str(), -1, SQLITE_TRANSIENT);
  EXPECT_EQ(sqlite3_step(s), SQLITE_DONE);
  sqlite3_finalize(s);
  sqlite3_close(db);
}

mode_t mode_of(const fs::path& p) {
  struct stat st{};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-kernel-cache-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ / "cache";  // not there yet: the cache creates it
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }
  cache::Options options(std::optional<uint64_t> max_bytes = std::nullopt) const {
    cache::Options o;
    o.dir = dir_;
    o.max_bytes = max_bytes ? max_bytes : std::optional<uint64_t>(uint64_t{1} << 30);
    return o;
  }
  fs::path db_path() const { return dir_ / "kernels.sqlite"; }

  fs::path root_, dir_;
  ScopedEnv no_off_{"WEFT_CACHE", nullptr};
  ScopedEnv no_cap_{"WEFT_CACHE_MAX_BYTES", nullptr};
};

// ---- keys ---------------------------------------------------------------------------------------------

TEST(KernelCacheKey, HexRoundTrips) {
  const CacheKey k = cache::make_key(base_parts());
  const std::string hex = k.hex();
  ASSERT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(CacheKey::from_hex(hex), k);
  EXPECT_FALSE(CacheKey::from_hex(hex.substr(1)));
  EXPECT_FALSE(CacheKey::from_hex(std::string(31, '0') + "g"));
  EXPECT_EQ(cache::make_key(base_parts()), k);  // deterministic
  EXPECT_EQ((CacheKey{{0x1, 0x2}}.hex()), "00000000000000020000000000000001");  // high half first, as hash_hex
}

Graph rmsnorm_graph(double eps) {
  Graph g("g");
  const int32_t batch = g.declare_symbol("batch", 1, 64);
  const TensorId x = g.add_tensor(TensorKind::input, "x", DType::f32, {Dim::sym(batch), Dim::fixed(64)});
  const TensorId w = g.add_tensor(TensorKind::weight, "w", DType::f32, {Dim::fixed(64)});
  g.mark_output(g.add_op("rmsnorm", {x, w}, {{"eps", eps}}, "y"), "y");
  return g;
}

TEST(KernelCacheKey, EveryPartChangesTheKey) {
  const KeyParts base = base_parts();
  const CacheKey k0 = cache::make_key(base);
  std::vector<std::pair<std::string, KeyParts>> variants;
  const auto vary = [&](const std::string& what, auto&& change) {
    KeyParts p = base;
    change(p);
    variants.emplace_back(what, p);
  };
  vary("one dim of the specialization", [](KeyParts& p) { p.specialization = R"({"batch":[1,8],"seq":129})"; });
  vary("graph hash low half", [](KeyParts& p) { p.graph_hash[0] ^= 1; });
  vary("graph hash high half", [](KeyParts& p) { p.graph_hash[1] ^= uint64_t{1} << 63; });
  vary("one attribute of the graph", [](KeyParts& p) { p.graph_hash = graph_hash(rmsnorm_graph(1e-6)); });
  vary("one compile option", [](KeyParts& p) { p.compile_options = "-O2 -std=c++17 -dlto"; });
  vary("the arch", [](KeyParts& p) { p.target_arch = "sm_100a"; });
  vary("weft version", [](KeyParts& p) { p.weft_version = "0.1.1"; });
  vary("NVRTC version", [](KeyParts& p) { p.nvrtc_version = "13.1"; });
  vary("nvJitLink version", [](KeyParts& p) { p.nvjitlink_version = "13.1"; });
  vary("device library version", [](KeyParts& p) { p.device_library_version = "2"; });
  // Field boundaries cannot alias: the same characters split differently are another key.
  vary("arch/options boundary", [](KeyParts& p) {
    p.target_arch = "sm_90a -O3";
    p.compile_options = "-std=c++17 -dlto";
  });
  vary("version boundary", [](KeyParts& p) {
    p.nvrtc_version = "13.013.0";
    p.nvjitlink_version = "";
  });

  // The graph attribute really reaches the hash (so the key).
  const auto h1 = graph_hash(rmsnorm_graph(1e-6));
  const auto h2 = graph_hash(rmsnorm_graph(1e-5));
  ASSERT_NE(h1, h2);
  KeyParts a = base, b = base;
  a.graph_hash = h1;
  b.graph_hash = h2;
  EXPECT_NE(cache::make_key(a), cache::make_key(b));

  std::vector<CacheKey> seen{k0};
  for (const auto& [what, parts] : variants) {
    const CacheKey k = cache::make_key(parts);
    for (const CacheKey& other : seen) EXPECT_NE(k, other) << what;
    seen.push_back(k);
  }
}

// ---- get / put ----------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, MissThenHit) {
  KernelCache c(options());
  const CacheKey k = key_of(1);
  EXPECT_FALSE(c.get(k));
  const Entry e = make_entry(1, 5000);
  ASSERT_TRUE(c.put(k, e));
  const auto got = c.get(k);
  ASSERT_TRUE(got);
  EXPECT_TRUE(same(*got, e));
  EXPECT_FALSE(c.get(key_of(2)));
  const auto st = c.stats();
  EXPECT_EQ(st.entries, 1u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.total_bytes, e.cubin.size() + e.metadata.size() + e.extra.size());
  EXPECT_EQ(st.path, db_path());
  // The folder and the database are private.
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(db_path()) & 077, 0u);
}

TEST_F(KernelCacheTest, PersistsAcrossInstancesAndKeepsEmptyParts) {
  Entry empty;  // no cubin bytes, no metadata, no extra: still an entry
  Entry e = make_entry(3, 70000);
  e.extra.clear();
  {
    KernelCache c(options());
    ASSERT_TRUE(c.put(key_of(3), e));
    ASSERT_TRUE(c.put(key_of(4), empty));
  }
  KernelCache c(options());
  const auto got = c.get(key_of(3));
  ASSERT_TRUE(got);
  EXPECT_TRUE(same(*got, e));
  const auto got_empty = c.get(key_of(4));
  ASSERT_TRUE(got_empty);
  EXPECT_TRUE(same(*got_empty, empty));
  // Replacing an entry keeps one row.
  ASSERT_TRUE(c.put(key_of(3), make_entry(5, 10)));
  EXPECT_TRUE(same(*c.get(key_of(3)), make_entry(5, 10)));
  EXPECT_EQ(c.stats().entries, 2u);
}

TEST_F(KernelCacheTest, ThreadsShareOneCache) {
  KernelCache c(options());
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const Entry e = make_entry(t, 1000 + static_cast<size_t>(i));
        if (!c.put(key_of(t * 100 + i % 5), e)) ++failures[static_cast<size_t>(t)];
        const auto got = c.get(key_of(t * 100 + i % 5));
        if (!got || !same(*got, e)) ++failures[static_cast<size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
  EXPECT_EQ(c.stats().entries, 20u);
}

// Four processes open the (not yet existing) cache at once and put and get the same key many times; each
// writes its own bytes, and every read must be one writer's bytes, whole.
TEST_F(KernelCacheTest, ConcurrentProcessesOnOneKey) {
  constexpr int kChildren = 4, kRounds = 60;
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int child = 0; child < kChildren; ++child) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(start[1]);
      char c;
      while (::read(start[0], &c, 1) > 0) {
      }  // wait for the parent to let everyone go at once
      int code = 0;
      try {
        KernelCache cache(options());
        const CacheKey k = key_of(42);
        for (int round = 0; round < kRounds && code == 0; ++round) {
          if (!cache.put(k, make_entry(child, 64 * 1024))) code = 2;
          const auto got = cache.get(k);
          if (!got) {
            code = 3;
            break;
          }
          const auto j = nlohmann::json::parse(got->metadata, nullptr, false);
          if (!j.is_object() || !j.contains("writer")) {
            code = 4;
            break;
          }
          if (!same(*got, make_entry(j["writer"].get<int>(), 64 * 1024))) code = 5;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", child, e.what());
        code = 6;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[i], &status, 0), children[i]);
    ASSERT_TRUE(WIFEXITED(status)) << "child " << i;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child " << i;
  }
  KernelCache c(options());
  EXPECT_EQ(c.stats().entries, 1u);
  const auto report = c.verify();
  EXPECT_EQ(report.ok, 1u);
  EXPECT_EQ(report.removed, 0u);
  EXPECT_EQ(raw_text(db_path(), "PRAGMA integrity_check"), "ok");
  const auto got = c.get(key_of(42));
  ASSERT_TRUE(got);
  const int writer = nlohmann::json::parse(got->metadata)["writer"].get<int>();
  EXPECT_TRUE(same(*got, make_entry(writer, 64 * 1024)));
}

// ---- damage -------------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, CorruptedBlobIsAMissAndIsRemoved) {
  KernelCache c(options());
  ASSERT_TRUE(c.put(key_of(1), make_entry(1, 4096)));
  ASSERT_TRUE(c.put(key_of(2), make_entry(2, 4096)));
  flip_cubin_bytes(db_path(), key_of(1));
  EXPECT_EQ(raw_int(db_path(), "SELECT length(cubin) FROM kernels WHERE key = '" + key_of(1).hex() + "'"), 4096);
  EXPECT_FALSE(c.get(key_of(1)));
  EXPECT_EQ(raw_int(db_path(), "SELECT count(*) FROM kernels WHERE key = '" + key_of(1).hex() + "'"), 0);
  EXPECT_TRUE(c.get(key_of(2)));  // the other entry is untouched
  // A checksum or size column changed is just as much a miss.
  raw_sql(db_path(), "UPDATE kernels SET size = size + 1 WHERE key = '" + key_of(2).hex() + "'");
  EXPECT_FALSE(c.get(key_of(2)));
  ASSERT_TRUE(c.put(key_of(1), make_entry(1, 4096)));  // rebuilt
  EXPECT_TRUE(c.get(key_of(1)));
}

TEST_F(KernelCacheTest, TruncatedDatabaseIsRebuilt) {
  {
    KernelCache c(options());
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(c.put(key_of(i), make_entry(i, 32 * 1024)));
  }
  ASSERT_FALSE(fs::exists(dir_ / "kernels.sqlite-wal"));  // checkpointed at close: the file holds everything
  const auto size = fs::file_size(db_path());
  ASSERT_GT(size, 200u * 1024);
  fs::resize_file(db_path(), size / 2);
  KernelCache c(options());
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(c.get(key_of(i))) << i;
  ASSERT_TRUE(c.put(key_of(1), make_entry(1, 100)));
  EXPECT_TRUE(c.get(key_of(1)));
  EXPECT_EQ(c.verify().ok, 1u);
}

TEST_F(KernelCacheTest, GarbageDatabaseFileIsRebuilt) {
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace);
  {
    std::ofstream f(db_path(), std::ios::binary);
    for (int i = 0; i < 5000; ++i) f.put(static_cast<char>((i * 7919) & 0xff));
  }
  fs::permissions(db_path(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  KernelCache c(options());
  EXPECT_FALSE(c.get(key_of(1)));
  ASSERT_TRUE(c.put(key_of(1), make_entry(1, 100)));
  EXPECT_TRUE(c.get(key_of(1)));
}

TEST_F(KernelCacheTest, FileDamagedWhileClosedIsRebuiltOnGet) {
  // The damage shows only when a page is read: the instance opened fine, the table's pages are garbage.
  {
    KernelCache c(options());
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(c.put(key_of(i), make_entry(i, 32 * 1024)));
  }
  {
    std::fstream f(db_path(), std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(4096);  // page 2 onwards: the table's b-tree, not the header or the schema
    for (int i = 0; i < 64 * 1024; ++i) f.put(static_cast<char>(0xA5));
  }
  KernelCache c(options());
  for (int i = 0; i < 8; ++i) {
    const auto got = c.get(key_of(i));
    if (got) {
      EXPECT_TRUE(same(*got, make_entry(i, 32 * 1024)));  // never wrong bytes
    }
  }
  ASSERT_TRUE(c.put(key_of(9), make_entry(9, 100)));
  EXPECT_TRUE(c.get(key_of(9)));
  const auto report = c.verify();
  EXPECT_EQ(report.removed, 0u);
  EXPECT_GE(report.ok, 1u);
}

TEST_F(KernelCacheTest, OtherSchemaVersionIsRebuilt) {
  {
    KernelCache c(options());
    ASSERT_TRUE(c.put(key_of(1), make_entry(1, 100)));
  }
  raw_sql(db_path(), "PRAGMA user_version = 99; CREATE TABLE old_things (x); ");
  {
    KernelCache c(options());
    EXPECT_FALSE(c.get(key_of(1)));
    ASSERT_TRUE(c.put(key_of(1), make_entry(1, 100)));
    EXPECT_TRUE(c.get(key_of(1)));
  }
  EXPECT_EQ(raw_int(db_path(), "PRAGMA user_version"), cache::kCacheSchemaVersion);
  EXPECT_EQ(raw_int(db_path(), "SELECT count(*) FROM sqlite_master WHERE name = 'old_things'"), 0);
  // A table from an older layout under the kernels name is replaced too.
  raw_sql(db_path(), "DROP TABLE kernels; CREATE TABLE kernels (key TEXT, blob BLOB); PRAGMA user_version = 0;");
  KernelCache c(options());
  ASSERT_TRUE(c.put(key_of(2), make_entry(2, 100)));
  EXPECT_TRUE(c.get(key_of(2)));
}

// ---- the folder ---------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, FolderIsCreatedPrivateWithItsParents) {
  dir_ = root_ / "a" / "b" / "weft";
  const mode_t old = ::umask(0);  // even a permissive umask does not leak into the cache folder
  KernelCache c(options());
  ::umask(old);
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(root_ / "a") & 077, 0u);
  EXPECT_EQ(mode_of(db_path()) & 077, 0u);
  EXPECT_EQ(c.dir(), dir_);
}

TEST_F(KernelCacheTest, GroupWritableFolderIsRefused) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0777);
  try {
    KernelCache c(options());
    FAIL() << "a world-writable cache folder was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::cache);
    const std::string m = e.what();
    EXPECT_NE(m.find(dir_.string()), std::string::npos) << m;
    EXPECT_NE(m.find("chmod 700 " + dir_.string()), std::string::npos) << m;
    EXPECT_NE(m.find("WEFT_CACHE_DIR"), std::string::npos) << m;
  }
  ::chmod(dir_.c_str(), 0720);  // group-writable alone is refused too
  EXPECT_THROW(KernelCache{options()}, Error);
  ::chmod(dir_.c_str(), 0750);  // readable by others is fine: they cannot change the code
  EXPECT_NO_THROW(KernelCache{options()});
}

TEST_F(KernelCacheTest, WritableDatabaseFileIsRefused) {
  { KernelCache c(options()); }
  ::chmod(db_path().c_str(), 0666);
  try {
    KernelCache c(options());
    FAIL() << "a world-writable database file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::cache);
    EXPECT_NE(std::string(e.what()).find(db_path().string()), std::string::npos) << e.what();
  }
}

TEST_F(KernelCacheTest, FolderOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the folder to another user";
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0700);
  ASSERT_EQ(::chown(dir_.c_str(), 1, 1), 0);  // daemon
  try {
    KernelCache c(options());
    FAIL() << "a cache folder owned by uid 1 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::cache);
    const std::string m = e.what();
    EXPECT_NE(m.find(dir_.string()), std::string::npos) << m;
    EXPECT_NE(m.find("owned by uid 1"), std::string::npos) << m;
    EXPECT_NE(m.find("WEFT_CACHE_DIR"), std::string::npos) << m;
  }
  // A database file owned by another user, in our own folder, is refused as well.
  ASSERT_EQ(::chown(dir_.c_str(), 0, 0), 0);
  { KernelCache c(options()); }
  ASSERT_EQ(::chown(db_path().c_str(), 1, 1), 0);
  EXPECT_THROW(KernelCache{options()}, Error);
}

TEST_F(KernelCacheTest, DefaultFolderFollowsTheEnvironment) {
  {
    ScopedEnv d("WEFT_CACHE_DIR", "/tmp/x/weft-here");
    EXPECT_EQ(cache::default_cache_dir(), fs::path("/tmp/x/weft-here"));
  }
  ScopedEnv d("WEFT_CACHE_DIR", nullptr);
  {
    ScopedEnv x("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(cache::default_cache_dir(), fs::path("/tmp/xdg/weft"));
  }
  ScopedEnv x("XDG_CACHE_HOME", nullptr);
  {
    ScopedEnv h("HOME", "/tmp/home-of-test");
    EXPECT_EQ(cache::default_cache_dir(), fs::path("/tmp/home-of-test/.cache/weft"));
  }
  ScopedEnv h("HOME", nullptr);
  const fs::path from_passwd = cache::default_cache_dir();  // the password database's home
  EXPECT_TRUE(from_passwd.is_absolute());
  EXPECT_EQ(from_passwd.filename(), "weft");
}

TEST_F(KernelCacheTest, OffInTheEnvironmentDisablesIt) {
  ScopedEnv where("WEFT_CACHE_DIR", dir_.c_str());
  {
    ScopedEnv off("WEFT_CACHE", "off");
    EXPECT_TRUE(cache::cache_disabled_by_env());
    EXPECT_EQ(cache::open_kernel_cache(), nullptr);
    EXPECT_FALSE(fs::exists(dir_));  // nothing created
  }
  auto c = cache::open_kernel_cache();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dir(), dir_);
  EXPECT_TRUE(c->put(key_of(1), make_entry(1, 10)));
}

// ---- size cap -----------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, EvictsLeastRecentlyUsedUnderTheCap) {
  const Entry e = make_entry(0, 3000);
  const uint64_t each = e.cubin.size() + e.metadata.size() + e.extra.size();
  KernelCache c(options(each * 3 + each / 2));  // room for three
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.put(key_of(i), make_entry(i, 3000)));
  ASSERT_TRUE(c.get(key_of(0)));  // 0 is now the most recently used; 1 is the oldest
  ASSERT_TRUE(c.put(key_of(3), make_entry(3, 3000)));
  EXPECT_TRUE(c.get(key_of(0)));
  EXPECT_FALSE(c.get(key_of(1)));
  EXPECT_TRUE(c.get(key_of(2)));
  EXPECT_TRUE(c.get(key_of(3)));
  ASSERT_TRUE(c.put(key_of(4), make_entry(4, 3000)));  // 0 was read before 2 and 3: it goes now
  EXPECT_FALSE(c.get(key_of(0)));
  const auto st = c.stats();
  EXPECT_EQ(st.entries, 3u);
  EXPECT_LE(st.total_bytes, st.max_bytes);
  // Larger than the whole cap: not stored, nothing evicted for it.
  EXPECT_FALSE(c.put(key_of(5), make_entry(5, 4 * 3000)));
  EXPECT_FALSE(c.get(key_of(5)));
  EXPECT_EQ(c.stats().entries, 3u);
}

TEST_F(KernelCacheTest, CapFromTheEnvironment) {
  {
    ScopedEnv cap("WEFT_CACHE_MAX_BYTES", "512K");
    EXPECT_EQ(cache::max_bytes_from_env(), 512u * 1024);
    cache::Options o = options();
    o.max_bytes.reset();
    EXPECT_EQ(KernelCache(o).max_bytes(), 512u * 1024);
  }
  {
    ScopedEnv cap("WEFT_CACHE_MAX_BYTES", "1000");
    EXPECT_EQ(cache::max_bytes_from_env(), 1000u);
  }
  {
    ScopedEnv cap("WEFT_CACHE_MAX_BYTES", "lots");
    EXPECT_EQ(cache::max_bytes_from_env(), cache::kDefaultCacheMaxBytes);
  }
  EXPECT_EQ(cache::max_bytes_from_env(), cache::kDefaultCacheMaxBytes);
}

// ---- management ---------------------------------------------------------------------------------------

TEST_F(KernelCacheTest, StatsListVerifyClear) {
  KernelCache c(options());
  ASSERT_TRUE(c.put(key_of(0), make_entry(0, 100)));
  ASSERT_TRUE(c.put(key_of(1), make_entry(1, 200)));
  ASSERT_TRUE(c.put(key_of(2), make_entry(2, 300, "not json")));
  ASSERT_TRUE(c.get(key_of(0)));
  ASSERT_TRUE(c.get(key_of(0)));

  auto st = c.stats();
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.max_bytes, uint64_t{1} << 30);

  const auto listed = c.list();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].key, key_of(0).hex());  // most recently used first
  EXPECT_EQ(listed[0].kernel_name, "weft_mk_0");
  EXPECT_EQ(listed[0].hits, 2u);
  EXPECT_EQ(listed[1].key, key_of(2).hex());
  EXPECT_EQ(listed[1].kernel_name, "");  // metadata that is not JSON: no name, no error
  EXPECT_EQ(listed[2].key, key_of(1).hex());
  EXPECT_EQ(listed[2].size, 200 + make_entry(1, 200).metadata.size() + 4);
  EXPECT_GE(listed[2].last_used_ms, listed[2].created_ms);
  EXPECT_GT(listed[2].created_ms, int64_t{1600000000000});
  uint64_t total = 0;
  for (const auto& e : listed) total += e.size;
  EXPECT_EQ(total, st.total_bytes);

  auto report = c.verify();
  EXPECT_EQ(report.ok, 3u);
  EXPECT_EQ(report.removed, 0u);
  EXPECT_FALSE(report.rebuilt);
  raw_sql(db_path(), "UPDATE kernels SET metadata = 'tampered' WHERE key = '" + key_of(1).hex() + "'");
  raw_sql(db_path(), "UPDATE kernels SET checksum = 'x' || checksum WHERE key = '" + key_of(2).hex() + "'");
  report = c.verify();
  EXPECT_EQ(report.ok, 1u);
  EXPECT_EQ(report.removed, 2u);
  EXPECT_EQ(c.stats().entries, 1u);

  c.clear();
  st = c.stats();
  EXPECT_EQ(st.entries, 0u);
  EXPECT_EQ(st.total_bytes, 0u);
  EXPECT_FALSE(c.get(key_of(0)));
  EXPECT_TRUE(c.list().empty());
}

}  // namespace
}  // namespace weft::test
