// The host JIT's object code in weft's kernel cache, beside the cubins: one entry per launch plan, the
// relocatable object in Entry::extra, no cubin, metadata {"kind":"host_plan"}. A warm start loads the object
// straight into the JIT (JitObjectCache::load, before any IR is built); a cold one compiles and ORC's
// compiler hands the object to notifyObjectCompiled, which stores it.
#pragma once

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstddef>
#include <memory>

#include "cache/kernel_cache.hpp"

namespace weft {

inline constexpr const char* kHostPlanMetadata = R"({"kind":"host_plan"})";

class JitObjectCache final : public llvm::ObjectCache {
 public:
  // `cache` may be nullptr: the object is then only measured, not stored.
  JitObjectCache(cache::KernelCache* cache, const cache::CacheKey& key) : cache_(cache), key_(key) {}

  // Called by ORC's compiler (LLVM code, built without exceptions): never throws.
  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override;

  // Always a miss: hits are served by load() before any IR exists, and a cached object that failed to load
  // must not be handed back to the compiler that is replacing it.
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module*) override { return nullptr; }

  size_t object_bytes() const { return object_bytes_; }

  // The cached object under `key`, or nullptr (a miss, or an entry that is not a host plan's).
  static std::unique_ptr<llvm::MemoryBuffer> load(cache::KernelCache& cache, const cache::CacheKey& key);

 private:
  cache::KernelCache* cache_;
  cache::CacheKey key_;
  size_t object_bytes_ = 0;
};

}  // namespace weft
