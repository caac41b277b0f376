// The kernel cache's key: XXH3-128 over everything that can change the compiled code. Two compiles with the
// same key must produce interchangeable cubins, so every input the compiler sees belongs in KeyParts.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace weft::cache {

struct KeyParts {
  std::array<uint64_t, 2> graph_hash{};  // weft::graph_hash(): {low 64 bits, high 64 bits}
  std::string specialization;            // canonical text of symbol values / shape buckets
  std::string target_arch;               // e.g. "sm_90a"
  std::string compile_options;           // NVRTC + nvJitLink options, in the order they are passed
  std::string weft_version;
  std::string nvrtc_version;
  std::string nvjitlink_version;
  std::string device_library_version;
};

struct CacheKey {
  std::array<uint64_t, 2> value{};  // {low 64 bits, high 64 bits}, like graph_hash

  // 32 lowercase hex digits, high half first (the same spelling as weft::hash_hex).
  std::string hex() const;
  // Reads hex()'s spelling back (case-insensitive); nullopt for anything else.
  static std::optional<CacheKey> from_hex(std::string_view text);

  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

CacheKey make_key(const KeyParts& parts);

// 32 hex digits of a {low, high} 128-bit value, high half first.
std::string hex128(const std::array<uint64_t, 2>& v);

}  // namespace weft::cache
