// The weight loader's library's kernel entry (WEFT_DEV_LOADER; config.cuh says why it is the library's): the task
// loop on the block's first WEFT_BLOCK_THREADS threads, as the generated kernel's blocks run it, and the weight loader
// (weight_loader.cuh) on its last warp. Its parameters are the generated kernel's (codegen/kernel_source.cpp), but the
// slot table holds WEFT_LOADER_ENTRY_SLOTS pointers, of which the graph's `num_slots` are used.
#ifndef WEFT_DEVICE_LOADER_ENTRY_CUH
#define WEFT_DEVICE_LOADER_ENTRY_CUH

#include "task_loop.cuh"
#include "weight_loader.cuh"

#if WEFT_DEV_LOADER

struct weft_loader_slot_table {
  void* p[WEFT_LOADER_ENTRY_SLOTS];
};

extern "C" __global__ void __launch_bounds__(WEFT_LOADER_LAUNCH_THREADS, 1)
    weft_megakernel_loader(const weft_task* __restrict__ tasks, const weft_wait* __restrict__ waits,
                           const int* __restrict__ notifies, const int* __restrict__ queue_offsets,
                           const int* __restrict__ queue_tasks, unsigned int* events,
                           const __grid_constant__ weft_loader_slot_table slots, unsigned int epoch,
                           long long timeout_cycles, unsigned int* error, unsigned int* error_info,
                           const __grid_constant__ weft_loop loop, unsigned long long* trace, unsigned int tuning,
                           const __grid_constant__ weft_symbol_values symbols, int num_slots) {
  weft_queues q;
  q.tasks = tasks;
  q.waits = waits;
  q.notifies = notifies;
  q.queue_offsets = queue_offsets;
  q.queue_tasks = queue_tasks;
  q.events = events;
  q.slots = slots.p;
  q.num_slots = num_slots;
  q.epoch = epoch;
  q.timeout_cycles = timeout_cycles;
  q.error = error;
  q.error_info = error_info;
  q.loop = &loop;
  q.trace = trace;
  q.symbols = &symbols;
  q.tuning = tuning;
  char* smem = weft_dev::weft_smem;
  // The ring is set up before the warps part; they tell the loader when they are done.
  weft_dev::init_weight_loader(smem);
  __syncthreads();
  if (threadIdx.x >= WEFT_BLOCK_THREADS) {
    weft_dev::run_weight_loader(q, smem);
    return;
  }
  weft_dev::run_queues(&q);
  weft_dev::block_sync();
  if (threadIdx.x == 0) *static_cast<volatile int*>(&weft_dev::loader_control(smem)->stop) = 1;
}

#endif  // WEFT_DEV_LOADER

#endif  // WEFT_DEVICE_LOADER_ENTRY_CUH
