// SQLite-backed kernel cache. Failure policy: a damaged database file (SQLITE_CORRUPT / SQLITE_NOTADB) is
// deleted and recreated, a damaged entry is deleted, and get/put turn every other database failure into a
// miss / not-stored with a warning: the cache can always be rebuilt, a user's compile must not fail for it.
#include "cache/kernel_cache.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include "cache/cache_dir.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace weft::cache {

namespace fs = std::filesystem;

namespace {

// Small columns first: SQLite reads a row's columns in order, so sum(size) or list() never has to walk the
// overflow pages of the blobs.
constexpr const char* kSchemaSql = R"sql(
CREATE TABLE kernels (
  key       TEXT PRIMARY KEY NOT NULL,  -- CacheKey::hex()
  checksum  TEXT NOT NULL,              -- XXH3-128 over key, metadata, extra, cubin (length-prefixed)
  size      INTEGER NOT NULL,           -- bytes of cubin + metadata + extra
  created   INTEGER NOT NULL,           -- unix ms
  metadata  TEXT NOT NULL,
  extra     BLOB NOT NULL,
  cubin     BLOB NOT NULL);
-- Hit bookkeeping lives apart from the blobs: SQLite rewrites a whole row on UPDATE, and recording a hit must
-- not rewrite megabytes of cubin and task tables (it cost ~10 ms per warm start).
CREATE TABLE usage (
  key       TEXT PRIMARY KEY NOT NULL,
  last_used INTEGER NOT NULL,           -- unix ms, nudged to be unique so LRU order is exact
  hits      INTEGER NOT NULL DEFAULT 0);
CREATE INDEX usage_last_used ON usage (last_used);
CREATE TRIGGER kernels_gone AFTER DELETE ON kernels BEGIN DELETE FROM usage WHERE key = old.key; END;
)sql";

// Internal failure of an SQLite call; with_db turns it into recovery or a weft::Error.
struct DbError {
  int rc;
  std::string message;
};

bool is_corrupt(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

[[noreturn]] void throw_db(sqlite3* db, int rc, std::string_view what) {
  throw DbError{rc, std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc))};
}

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return;
  std::string text = std::string(sql).substr(0, 40) + ": " + (message ? message : sqlite3_errstr(rc));
  sqlite3_free(message);
  throw DbError{rc, text};
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) throw_db(db, rc, "prepare");
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Bound values are not copied (SQLITE_STATIC): they must outlive the statement's use.
  void bind_text(int i, std::string_view v) {
    check(sqlite3_bind_text64(stmt_, i, v.empty() ? "" : v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  void bind_blob(int i, std::span<const uint8_t> v) {
    static const uint8_t none = 0;  // a null pointer would bind NULL, not an empty blob
    check(sqlite3_bind_blob64(stmt_, i, v.empty() ? &none : v.data(), v.size(), SQLITE_STATIC));
  }
  void bind_int(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }

  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_db(db_, rc, "step");
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  int64_t column_int(int i) { return sqlite3_column_int64(stmt_, i); }
  std::string_view column_text(int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    const auto n = static_cast<size_t>(sqlite3_column_bytes(stmt_, i));
    return p ? std::string_view(p, n) : std::string_view();
  }
  std::span<const uint8_t> column_blob(int i) {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, i));  // before column_bytes
    const auto n = static_cast<size_t>(sqlite3_column_bytes(stmt_, i));
    return p ? std::span<const uint8_t>(p, n) : std::span<const uint8_t>();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) throw_db(db_, rc, "bind");
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

int64_t query_int(sqlite3* db, const char* sql) {
  Stmt s(db, sql);
  return s.step() ? s.column_int(0) : 0;
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Lengths go into the hash so that bytes cannot move between fields unnoticed; the key goes in so that an
// entry cannot be served under another key.
std::string entry_checksum(std::string_view key, std::string_view metadata, std::span<const uint8_t> extra,
                           std::span<const uint8_t> cubin) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const auto feed = [&](const void* data, size_t n) {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>((uint64_t{n} >> (8 * i)) & 0xff);
    XXH3_128bits_update(&state, len, sizeof len);
    if (n) XXH3_128bits_update(&state, data, n);
  };
  feed(key.data(), key.size());
  feed(metadata.data(), metadata.size());
  feed(extra.data(), extra.size());
  feed(cubin.data(), cubin.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return hex128({h.low64, h.high64});
}

uint64_t entry_size(const Entry& e) { return e.cubin.size() + e.metadata.size() + e.extra.size(); }

std::string kernel_name_of(std::string_view metadata) {
  const auto j = nlohmann::json::parse(metadata, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};
  for (const char* field : {"kernel_name", "name"}) {
    const auto it = j.find(field);
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

}  // namespace

uint64_t max_bytes_from_env() {
  const char* v = std::getenv("WEFT_CACHE_MAX_BYTES");
  if (!v || !*v) return kDefaultCacheMaxBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  uint64_t scale = 1;
  if (*end == 'K' || *end == 'k') scale = uint64_t{1} << 10;
  if (*end == 'M' || *end == 'm') scale = uint64_t{1} << 20;
  if (*end == 'G' || *end == 'g') scale = uint64_t{1} << 30;
  if (scale != 1) ++end;
  if (end == v || *end != '\0' || errno != 0 || *v == '-' || n > UINT64_MAX / scale) {
    log_warning(std::string("WEFT_CACHE_MAX_BYTES=") + v + " is not a size (bytes, or a number with K, M or G); using " +
                std::to_string(kDefaultCacheMaxBytes) + " bytes");
    return kDefaultCacheMaxBytes;
  }
  return n * scale;
}

std::unique_ptr<KernelCache> open_kernel_cache(Options options) {
  if (cache_disabled_by_env()) {
    log_debug("WEFT_CACHE=off: the kernel cache is disabled");
    return nullptr;
  }
  return std::make_unique<KernelCache>(std::move(options));
}

KernelCache::KernelCache(Options options)
    : max_bytes_(options.max_bytes ? *options.max_bytes : max_bytes_from_env()),
      busy_timeout_ms_(options.busy_timeout_ms) {
  dir_ = prepare_private_dir(options.dir.empty() ? default_cache_dir() : options.dir);
  db_path_ = dir_ / "kernels.sqlite";
  std::lock_guard lock(mutex_);
  with_db("open", [] {});
}

KernelCache::~KernelCache() { close_db(); }

// Runs `body` on an open database. A damaged file is deleted and `body` retried once on a fresh one; other
// SQLite failures become weft::Error (Status::cache). Callers hold mutex_.
template <class Body>
auto KernelCache::with_db(const char* what, Body&& body) -> decltype(body()) {
  for (int attempt = 0;; ++attempt) {
    try {
      if (!db_) open_db();
      return body();
    } catch (const DbError& e) {
      if (db_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      if (attempt == 0 && is_corrupt(e.rc)) {
        log_warning("kernel cache " + db_path_.string() + " is damaged (" + e.message +
                    "); deleting it and starting empty (kernels will be recompiled)");
        close_db();
        remove_db_files();
        ++rebuilds_;
        continue;
      }
      fail(Status::cache, "kernel cache " + db_path_.string() + ": " + what + " failed: " + e.message);
    }
  }
}

void KernelCache::open_db() {
  for (const char* suffix : {"", "-wal", "-shm"}) check_private_file(db_path_.string() + suffix);
  // Create the file ourselves so that it starts private (0600) whatever the umask; SQLite gives the -wal
  // and -shm files the database file's mode. EEXIST: another process made it first.
  const int fd = ::open(db_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) ::close(fd);

  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(db_path_.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    throw DbError{rc, "open: " + message};
  }
  db_ = db;
  try {
    sqlite3_busy_timeout(db_, busy_timeout_ms_);
    exec(db_, "PRAGMA auto_vacuum = INCREMENTAL");  // only takes effect on a new, empty file
    set_wal_mode();                                 // readers never wait for writers
    exec(db_, "PRAGMA synchronous = NORMAL");       // with WAL: a crash may lose the last put, never corrupts
    exec(db_, "PRAGMA journal_size_limit = 67108864");
    ensure_schema();
  } catch (...) {
    close_db();
    throw;
  }
}

// Switching a new file to WAL needs a moment of exclusive access, and SQLite returns SQLITE_BUSY for it
// without running the busy handler when other processes are opening the same new file: retry by hand.
void KernelCache::set_wal_mode() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms_);
  for (int attempt = 0;; ++attempt) {
    try {
      exec(db_, "PRAGMA journal_mode = WAL");
      return;
    } catch (const DbError& e) {
      const int primary = e.rc & 0xff;
      if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || std::chrono::steady_clock::now() > deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1 + attempt, 20)));
    }
  }
}

// A file from another schema version is emptied and rebuilt rather than migrated: it only holds a cache.
void KernelCache::ensure_schema() {
  if (query_int(db_, "PRAGMA user_version") == kCacheSchemaVersion) return;  // the common case: no write lock
  exec(db_, "BEGIN IMMEDIATE");
  const int64_t version = query_int(db_, "PRAGMA user_version");  // again: another process may have done it
  if (version != kCacheSchemaVersion) {
    std::vector<std::pair<std::string, std::string>> objects;  // (type, name)
    {
      Stmt s(db_, "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'");
      while (s.step()) objects.emplace_back(s.column_text(0), s.column_text(1));
    }
    if (version != 0 || !objects.empty())
      log_warning("kernel cache " + db_path_.string() + " has schema version " + std::to_string(version) +
                  ", this weft uses " + std::to_string(kCacheSchemaVersion) + "; dropping its contents and starting empty");
    for (const auto& [type, name] : objects) {
      std::string quoted;
      for (char c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      exec(db_, ("DROP " + std::string(type == "view" ? "VIEW" : "TABLE") + " IF EXISTS \"" + quoted + "\"").c_str());
    }
    exec(db_, kSchemaSql);
    exec(db_, ("PRAGMA user_version = " + std::to_string(kCacheSchemaVersion)).c_str());
  }
  exec(db_, "COMMIT");
}

void KernelCache::close_db() noexcept {
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void KernelCache::remove_db_files() noexcept {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ec;
    fs::remove(db_path_.string() + suffix, ec);
  }
}

std::optional<Entry> KernelCache::get(const CacheKey& key) {
  const std::string hex = key.hex();
  std::lock_guard lock(mutex_);
  try {
    return with_db("get", [&]() -> std::optional<Entry> {
      Entry entry;
      int64_t rowid = 0;
      std::string stored_sum;
      bool intact = false;
      {
        Stmt s(db_, "SELECT rowid, checksum, size, metadata, extra, cubin FROM kernels WHERE key = ?1");
        s.bind_text(1, hex);
        if (!s.step()) return std::nullopt;
        rowid = s.column_int(0);
        stored_sum = s.column_text(1);
        const int64_t stored_size = s.column_int(2);
        entry.metadata = s.column_text(3);
        const auto extra = s.column_blob(4);
        const auto cubin = s.column_blob(5);
        entry.extra.assign(extra.begin(), extra.end());
        entry.cubin.assign(cubin.begin(), cubin.end());
        intact = stored_sum == entry_checksum(hex, entry.metadata, entry.extra, entry.cubin) && stored_size >= 0 &&
                 static_cast<uint64_t>(stored_size) == entry_size(entry);
      }
      if (!intact) {
        log_warning("kernel cache entry " + hex + " in " + db_path_.string() +
                    " does not match its checksum; removed it (the kernel will be recompiled)");
        // That row, not a replacement another process may have stored meanwhile.
        Stmt d(db_, "DELETE FROM kernels WHERE rowid = ?1 AND coalesce(CAST(checksum AS TEXT), '') = ?2");
        d.bind_int(1, rowid);
        d.bind_text(2, stored_sum);
        d.step();
        return std::nullopt;
      }
      try {  // bookkeeping only: an entry that verified is served even if the hit cannot be recorded
        Stmt u(db_,
               "INSERT INTO usage (key, last_used, hits) "
               "VALUES (?2, max(?1, (SELECT coalesce(max(last_used), 0) + 1 FROM usage)), 1) "
               "ON CONFLICT (key) DO UPDATE SET hits = hits + 1, last_used = excluded.last_used");
        u.bind_int(1, now_ms());
        u.bind_text(2, hex);
        u.step();
      } catch (const DbError& e) {
        if (is_corrupt(e.rc)) throw;
        log_warning("kernel cache " + db_path_.string() + ": could not record a hit: " + e.message);
      }
      return entry;
    });
  } catch (const Error& e) {
    log_warning(std::string(e.what()) + "; treating it as a miss");
    return std::nullopt;
  }
}

bool KernelCache::put(const CacheKey& key, const Entry& entry) {
  const std::string hex = key.hex();
  const uint64_t size = entry_size(entry);
  if (size > max_bytes_) {
    log_warning("kernel cache: entry " + hex + " (" + std::to_string(size) + " bytes) is larger than the cache cap (" +
                std::to_string(max_bytes_) + " bytes, WEFT_CACHE_MAX_BYTES); not stored");
    return false;
  }
  const std::string sum = entry_checksum(hex, entry.metadata, entry.extra, entry.cubin);
  std::lock_guard lock(mutex_);
  try {
    return with_db("put", [&] {
      exec(db_, "BEGIN IMMEDIATE");  // take the write lock now: a deferred upgrade could fail without waiting
      {
        Stmt u(db_,
               "INSERT OR REPLACE INTO usage (key, last_used, hits) "
               "VALUES (?1, max(?2, (SELECT coalesce(max(last_used), 0) + 1 FROM usage)), 0)");
        u.bind_text(1, hex);
        u.bind_int(2, now_ms());
        u.step();
        Stmt s(db_,
               "INSERT OR REPLACE INTO kernels (key, checksum, size, created, metadata, extra, cubin) "
               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        s.bind_text(1, hex);
        s.bind_text(2, sum);
        s.bind_int(3, static_cast<int64_t>(size));
        s.bind_int(4, now_ms());
        s.bind_text(5, entry.metadata);
        s.bind_blob(6, entry.extra);
        s.bind_blob(7, entry.cubin);
        s.step();
      }
      evict_to(max_bytes_);
      exec(db_, "COMMIT");
      return true;
    });
  } catch (const Error& e) {
    log_warning(std::string(e.what()) + "; the kernel was not stored");
    return false;
  }
}

// Inside a write transaction: deletes least recently used entries until the total fits `cap`. The entry
// just stored has the newest last_used and fits the cap on its own, so it is never the one evicted.
uint64_t KernelCache::evict_to(uint64_t cap) {
  auto total = static_cast<uint64_t>(query_int(db_, "SELECT coalesce(sum(size), 0) FROM kernels"));
  if (total <= cap) return 0;
  std::vector<int64_t> victims;
  {
    Stmt s(db_, "SELECT k.rowid, k.size FROM kernels k LEFT JOIN usage u ON u.key = k.key "
                "ORDER BY coalesce(u.last_used, 0), k.rowid");
    while (total > cap && s.step()) {
      victims.push_back(s.column_int(0));
      total -= std::min(total, static_cast<uint64_t>(s.column_int(1)));
    }
  }
  Stmt d(db_, "DELETE FROM kernels WHERE rowid = ?1");
  for (const int64_t id : victims) {
    d.reset();
    d.bind_int(1, id);
    d.step();
  }
  exec(db_, "PRAGMA incremental_vacuum");  // give the freed pages back to the file system
  log_debug("kernel cache: evicted " + std::to_string(victims.size()) + " entries to stay under " +
            std::to_string(cap) + " bytes");
  return victims.size();
}

Stats KernelCache::stats() {
  std::lock_guard lock(mutex_);
  return with_db("stats", [&] {
    Stats st;
    Stmt s(db_, "SELECT count(*), coalesce(sum(size), 0), (SELECT coalesce(sum(hits), 0) FROM usage) FROM kernels");
    s.step();
    st.entries = static_cast<uint64_t>(s.column_int(0));
    st.total_bytes = static_cast<uint64_t>(s.column_int(1));
    st.hits = static_cast<uint64_t>(s.column_int(2));
    st.max_bytes = max_bytes_;
    st.path = db_path_;
    return st;
  });
}

std::vector<ListedEntry> KernelCache::list() {
  std::lock_guard lock(mutex_);
  return with_db("list", [&] {
    std::vector<ListedEntry> out;
    Stmt s(db_, "SELECT k.key, k.size, k.created, coalesce(u.last_used, k.created), coalesce(u.hits, 0), k.metadata "
                "FROM kernels k LEFT JOIN usage u ON u.key = k.key ORDER BY 4 DESC, k.rowid DESC");
    while (s.step()) {
      ListedEntry e;
      e.key = s.column_text(0);
      e.size = static_cast<uint64_t>(s.column_int(1));
      e.created_ms = s.column_int(2);
      e.last_used_ms = s.column_int(3);
      e.hits = static_cast<uint64_t>(s.column_int(4));
      e.kernel_name = kernel_name_of(s.column_text(5));
      out.push_back(std::move(e));
    }
    return out;
  });
}

VerifyReport KernelCache::verify() {
  std::lock_guard lock(mutex_);
  const int rebuilds_before = rebuilds_;
  VerifyReport report = with_db("verify", [&] {
    VerifyReport r;
    {
      Stmt check(db_, "PRAGMA quick_check");  // page-level damage: a DbError with SQLITE_CORRUPT rebuilds the file
      const std::string result = check.step() ? std::string(check.column_text(0)) : std::string("no result");
      if (result != "ok") throw DbError{SQLITE_CORRUPT, "quick_check: " + result};
    }
    // Scan without the write lock (other processes keep storing), then delete what was bad in one write.
    std::vector<std::pair<int64_t, std::string>> bad;  // (rowid, stored checksum)
    {
      Stmt s(db_, "SELECT rowid, key, checksum, size, metadata, extra, cubin FROM kernels");
      while (s.step()) {
        const std::string stored_sum(s.column_text(2));
        const auto metadata = s.column_text(4);
        const auto extra = s.column_blob(5);
        const auto cubin = s.column_blob(6);
        const bool intact = stored_sum == entry_checksum(s.column_text(1), metadata, extra, cubin) &&
                            s.column_int(3) == static_cast<int64_t>(metadata.size() + extra.size() + cubin.size());
        if (intact) {
          ++r.ok;
        } else {
          bad.emplace_back(s.column_int(0), stored_sum);
        }
      }
    }
    if (!bad.empty()) {
      exec(db_, "BEGIN IMMEDIATE");
      {
        Stmt d(db_, "DELETE FROM kernels WHERE rowid = ?1 AND coalesce(CAST(checksum AS TEXT), '') = ?2");
        for (const auto& [rowid, sum] : bad) {
          d.reset();
          d.bind_int(1, rowid);
          d.bind_text(2, sum);
          d.step();
          r.removed += static_cast<uint64_t>(sqlite3_changes(db_));
        }
      }
      exec(db_, "PRAGMA incremental_vacuum");
      exec(db_, "COMMIT");
      log_warning("kernel cache " + db_path_.string() + ": removed " + std::to_string(r.removed) +
                  " entries that did not match their checksum");
    }
    return r;
  });
  report.rebuilt = rebuilds_ != rebuilds_before;
  return report;
}

void KernelCache::clear() {
  std::lock_guard lock(mutex_);
  with_db("clear", [&] {
    exec(db_, "BEGIN IMMEDIATE");
    exec(db_, "DELETE FROM kernels");
    exec(db_, "DELETE FROM usage");
    exec(db_, "PRAGMA incremental_vacuum");
    exec(db_, "COMMIT");
  });
}

}  // namespace weft::cache
