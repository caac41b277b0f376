// The launch plan (runtime/launch_plan.hpp) as machine code: LLVM IR generated from a program's tables,
// compiled with ORC's LLJIT, its object code kept in the kernel cache so a warm start generates nothing.
#pragma once

#include <memory>
#include <string>

#include "cache/kernel_cache.hpp"
#include "runtime/launch_plan.hpp"

namespace weft {

struct HostJitStats {
  bool object_cache_hit = false;  // the object code came from the kernel cache
  double jit_ms = 0;              // IR generation + compile, or loading the cached object
  size_t object_bytes = 0;        // size of the relocatable object (compiled or loaded)
  std::string cache_key;          // the object's kernel-cache key (CacheKey::hex); empty without a cache
};

// Owns the JIT-compiled plan function.
class LaunchPlanJit {
 public:
  virtual ~LaunchPlanJit() = default;
  virtual LaunchPlanFn function() const = 0;
  virtual const HostJitStats& stats() const = 0;
};

// Compiles the plan function for `tables`, or loads its object code from `cache` (nullptr: no cache).
// Returns nullptr when this build has no host JIT (*why says so); throws weft::Error (Status::internal)
// when LLVM fails.
std::unique_ptr<LaunchPlanJit> compile_launch_plan(const LaunchPlanTables& tables, cache::KernelCache* cache,
                                                   std::string* why = nullptr);

// Whether this build links the host JIT (libweft does; the internal test archive does not).
bool host_jit_available();

}  // namespace weft
