// The persistent kernel cache: compiled cubins (plus metadata and an optional host-launcher blob) in one
// SQLite database, kernels.sqlite, shared by every process of the user. It is only a cache: whatever goes
// wrong with an entry or with the database file makes get() miss (and the entry or file is rebuilt), never
// fails a compile, and never returns bytes that do not match their checksum.
//
// Thread-safety: one SQLite connection per KernelCache, behind a mutex; any number of processes may use the
// same folder at once (WAL, busy timeout, BEGIN IMMEDIATE for writes). An SQLite connection must not cross
// fork(): a child process opens its own KernelCache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_key.hpp"

struct sqlite3;

namespace weft::cache {

inline constexpr int kCacheSchemaVersion = 2;                      // PRAGMA user_version of kernels.sqlite
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{2} << 30;  // 2 GiB

struct Entry {
  std::vector<uint8_t> cubin;
  std::string metadata;        // JSON from the compiler (kernel name, shared memory, ...): opaque here
  std::vector<uint8_t> extra;  // optional (host-launcher object code); may be empty
};

struct Options {
  std::filesystem::path dir;          // empty: default_cache_dir()
  std::optional<uint64_t> max_bytes;  // unset: $WEFT_CACHE_MAX_BYTES (bytes, or with K/M/G suffix), else 2 GiB
  int busy_timeout_ms = 10000;        // how long to wait for another process's write
};

struct Stats {
  uint64_t entries = 0;
  uint64_t total_bytes = 0;  // sum of entry sizes (cubin + metadata + extra), what the cap counts
  uint64_t max_bytes = 0;
  uint64_t hits = 0;         // sum of the hit counts of the entries present
  std::filesystem::path path;  // the database file
};

struct ListedEntry {
  std::string key;          // CacheKey::hex()
  uint64_t size = 0;
  int64_t created_ms = 0;   // unix time in milliseconds
  int64_t last_used_ms = 0;
  uint64_t hits = 0;
  std::string kernel_name;  // metadata's "kernel_name" (or "name") when it is JSON holding one; else empty
};

struct VerifyReport {
  uint64_t ok = 0;
  uint64_t removed = 0;   // entries whose checksum or size did not match
  bool rebuilt = false;   // the database file itself was unreadable and was recreated empty
};

class KernelCache {
 public:
  // Opens (creating as needed) dir/kernels.sqlite. Ignores WEFT_CACHE (see open_kernel_cache). Throws
  // weft::Error: Status::cache for a folder or file that is not private to this user (or an unusable
  // database), Status::io when the folder cannot be created. A database file that is not a database, or
  // carries another schema version, is replaced by an empty one with a warning.
  explicit KernelCache(Options options = {});
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The entry, after checking its checksum; counts a hit and refreshes last_used. A bad entry is removed
  // and reported as a miss (warning); any database failure is a miss too (warning). Never throws for those.
  std::optional<Entry> get(const CacheKey& key);

  // Stores (replacing) the entry, then evicts least recently used entries until the total is under the
  // cap. Returns false, with a warning, when it was not stored: larger than the cap, or a database failure.
  bool put(const CacheKey& key, const Entry& entry);

  // Management. These throw weft::Error (Status::cache) on a database failure they cannot recover from.
  Stats stats();
  std::vector<ListedEntry> list();  // most recently used first
  VerifyReport verify();            // checks the file and every entry's checksum; removes bad entries
  void clear();                     // removes every entry

  const std::filesystem::path& dir() const { return dir_; }
  const std::filesystem::path& db_path() const { return db_path_; }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  template <class Body>
  auto with_db(const char* what, Body&& body) -> decltype(body());
  void open_db();
  void set_wal_mode();
  void ensure_schema();
  void close_db() noexcept;
  void remove_db_files() noexcept;
  uint64_t evict_to(uint64_t cap);

  std::filesystem::path dir_;
  std::filesystem::path db_path_;
  uint64_t max_bytes_ = kDefaultCacheMaxBytes;
  int busy_timeout_ms_ = 10000;
  int rebuilds_ = 0;  // times the database file was found broken and recreated
  std::mutex mutex_;
  sqlite3* db_ = nullptr;
};

// The cache the compiler should use: nullptr when WEFT_CACHE=off (callers then compile every time and store
// nothing); otherwise a KernelCache over `options` (errors as its constructor).
std::unique_ptr<KernelCache> open_kernel_cache(Options options = {});

// WEFT_CACHE_MAX_BYTES parsed ("1048576", "512M", "2G"; K/M/G are powers of 1024), or the default when
// unset; a malformed value is warned about and ignored.
uint64_t max_bytes_from_env();

}  // namespace weft::cache
