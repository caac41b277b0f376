// CUDA source of the persistent megakernel. The graph-specific part is small: the kernel's parameters, sized
// for the graph's slot table, handed to the precompiled device library's task loop (which runs every op); the
// task tables are data uploaded at load time.
#pragma once

#include <cstdint>
#include <string>

namespace weft {

inline constexpr const char* kMegakernelName = "weft_megakernel";

// Kernel parameters hold at most 32764 bytes (CUDA 12.1+): the slot table plus the other arguments.
inline constexpr int32_t kMaxSlots = 4000;

// Source for a kernel over `num_slots` tensors (1..kMaxSlots, else Status::unsupported). Parameters, in order:
// tasks, waits, notifies, queue_offsets, queue_tasks, events, the slot table (by value), epoch,
// timeout_cycles, error, error_info, the weft_loop (by value; steps 0 for one pass), trace, tuning, the
// weft_symbol_values (by value).
std::string generate_megakernel_source(int32_t num_slots);

// A hash of the generated source: part of the kernel cache key, so that a change in code generation never
// loads a cubin that an older weft generated with other kernel parameters.
std::string codegen_version();

// "weft_dev_linear" for WEFT_DEV_OP_LINEAR, ...: a device op's name in traces and messages.
const char* dev_op_function(int32_t dev_op);

}  // namespace weft
