// The graph's identity: XXH3-128 over the canonical dump of its structure (names excluded, see
// graph_structure). nlohmann's dump() is deterministic: object keys are sorted (std::map) and numbers are
// printed in their shortest round-trip form, so the same graph hashes the same in every process.
#include <cstdio>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "graph/serialize.hpp"

namespace weft {

std::array<uint64_t, 2> graph_hash(const Graph& g) {
  const std::string canonical = graph_structure(g).dump();
  const XXH128_hash_t h = XXH3_128bits(canonical.data(), canonical.size());
  return {h.low64, h.high64};
}

std::string hash_hex(const std::array<uint64_t, 2>& h) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h[1]), static_cast<unsigned long long>(h[0]));
  return buf;
}

}  // namespace weft
