// CUDA source of the persistent megakernel. The graph-specific part is small: the worker loop over the block's
// queue (wait, run, notify) and a switch over the device ops the graph uses; everything heavy lives in the
// precompiled device library, and the task tables are data uploaded at load time.
#pragma once

#include <set>
#include <string>

namespace weft {

inline constexpr const char* kMegakernelName = "weft_megakernel";

// Kernel parameters hold at most 32764 bytes (CUDA 12.1+): the slot table plus the other arguments.
inline constexpr int32_t kMaxSlots = 4000;

// Source for a kernel that can run tasks of the given device ops (weft_dev_op values) over `num_slots` tensors.
// Parameters, in order: tasks, waits, notifies, queue_offsets, queue_tasks, events, the slot table (by value),
// epoch, timeout_cycles, error, error_info, the weft_loop (by value; steps 0 for one pass).
std::string generate_megakernel_source(const std::set<int32_t>& dev_ops, int32_t num_slots);

// A hash of the source generated for every op: part of the kernel cache key, so that a change in code
// generation never loads a cubin that an older weft generated with other kernel parameters.
std::string codegen_version();

// "weft_dev_linear" for WEFT_DEV_OP_LINEAR, ...
const char* dev_op_function(int32_t dev_op);
const char* dev_op_enum(int32_t dev_op);

}  // namespace weft
