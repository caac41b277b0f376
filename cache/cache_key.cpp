// Each part is written as an 8-byte length followed by its bytes, so no two different KeyParts serialize to
// the same bytes ("ab"+"c" vs "a"+"bc"), whatever characters the strings hold. The leading tag names the
// layout: changing the layout changes every key instead of aliasing old ones.
#include "cache/cache_key.hpp"

#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace weft::cache {

namespace {

void append_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void append_field(std::string& out, std::string_view field) {
  append_u64(out, field.size());
  out.append(field);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string hex128(const std::array<uint64_t, 2>& v) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(v[1]),
                static_cast<unsigned long long>(v[0]));
  return buf;
}

std::string CacheKey::hex() const { return hex128(value); }

std::optional<CacheKey> CacheKey::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  CacheKey key;
  for (size_t i = 0; i < 32; ++i) {
    const int d = hex_digit(text[i]);
    if (d < 0) return std::nullopt;
    uint64_t& half = key.value[i < 16 ? 1 : 0];
    half = (half << 4) | static_cast<uint64_t>(d);
  }
  return key;
}

CacheKey make_key(const KeyParts& parts) {
  std::string bytes;
  append_field(bytes, "weft-kernel-cache-key/1");
  append_u64(bytes, parts.graph_hash[0]);
  append_u64(bytes, parts.graph_hash[1]);
  append_field(bytes, parts.specialization);
  append_field(bytes, parts.target_arch);
  append_field(bytes, parts.compile_options);
  append_field(bytes, parts.weft_version);
  append_field(bytes, parts.nvrtc_version);
  append_field(bytes, parts.nvjitlink_version);
  append_field(bytes, parts.device_library_version);
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return CacheKey{{h.low64, h.high64}};
}

}  // namespace weft::cache
