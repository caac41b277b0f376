// Builds without LLVM (the internal static library used by the CLI and unit tests): runs are planned by the
// reference interpreter of the launch plan.
#include "host_jit/launch_plan_jit.hpp"

namespace weft {

std::unique_ptr<LaunchPlanJit> compile_launch_plan(const LaunchPlanTables&, cache::KernelCache*, std::string* why) {
  if (why) *why = "this build has no host JIT";
  return nullptr;
}

bool host_jit_available() { return false; }

}  // namespace weft
