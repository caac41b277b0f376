// The device library: every op of weft_dev_op plus the event primitives, compiled once per architecture
// at build time into relocatable device code that nvJitLink links with each generated megakernel.
#include "weft_device.h"  // first: the definitions below must match these declarations

#include "trace.cuh"
#include "sync.cuh"

#include "ops_attention.cuh"
#include "ops_attention_qkv.cuh"
#include "ops_elementwise.cuh"
#include "ops_fused_linear.cuh"
#include "ops_layout.cuh"
#include "ops_linear.cuh"
#include "ops_norm.cuh"
#include "ops_reduce.cuh"
#include "prefetch.cuh"
