#include "host_jit/jit_object_cache.hpp"

#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "core/log.hpp"

namespace weft {

void JitObjectCache::notifyObjectCompiled(const llvm::Module*, llvm::MemoryBufferRef object) {
  object_bytes_ = object.getBufferSize();
  if (!cache_) return;
  try {
    cache::Entry entry;
    entry.metadata = kHostPlanMetadata;
    const auto* bytes = reinterpret_cast<const uint8_t*>(object.getBufferStart());
    entry.extra.assign(bytes, bytes + object.getBufferSize());
    cache_->put(key_, entry);  // warns by itself when it does not store
  } catch (const std::exception& e) {
    log_warning(std::string("host JIT: could not cache the launch plan's object code: ") + e.what());
  }
}

std::unique_ptr<llvm::MemoryBuffer> JitObjectCache::load(cache::KernelCache& cache, const cache::CacheKey& key) {
  std::optional<cache::Entry> entry = cache.get(key);
  if (!entry || entry->extra.empty()) return nullptr;
  const nlohmann::json meta = nlohmann::json::parse(entry->metadata, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return nullptr;
  const auto kind = meta.find("kind");
  if (kind == meta.end() || !kind->is_string() || kind->get<std::string>() != "host_plan") return nullptr;
  const llvm::StringRef bytes(reinterpret_cast<const char*>(entry->extra.data()), entry->extra.size());
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, "weft-host-plan-" + key.hex());
}

}  // namespace weft
