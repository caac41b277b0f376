// The device library: the task loop with every op of weft_dev_op inlined into it, plus the event primitives,
// compiled once per architecture at build time into relocatable device code that nvJitLink links with each
// generated megakernel (the weight loader's library: its own kernel, loader_entry.cuh).
#include "weft_device.h"  // first: the definitions below must match these declarations

#include "task_loop.cuh"
// Defines the out-of-line split-tile functions the loop calls (declared in gemv_mma.cuh, ops_reduce.cuh).
#include "linear_split.cuh"
#include "argmax_split.cuh"
// The weight loader's library's own kernel entry (nothing elsewhere).
#include "loader_entry.cuh"
