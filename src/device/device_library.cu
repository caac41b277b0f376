// The device library: the task loop with every op of weft_dev_op inlined into it, plus the event primitives,
// compiled once per architecture at build time into relocatable device code that nvJitLink links with each
// generated megakernel.
#include "weft_device.h"  // first: the definitions below must match these declarations

#include "task_loop.cuh"
// After the loop, so that its code is laid out after the loop's (see linear_split.cuh).
#include "linear_split.cuh"
