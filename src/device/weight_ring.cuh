// The weight loader's ring (WEFT_DEV_LOADER, config.cuh): WEFT_LOADER_SLOTS slots of WEFT_LOADER_SLOT_BYTES past the
// ops' shared memory, each holding one 2 KiB stage of every op warp's one-row GEMV stream (warp w's at
// w * 2 KiB, laid out as gemv_stream.cuh's per-warp ring lays out a stage, so the dot products read it the same way).
// Slot s is filled when its `full` mbarrier completes a phase (the loader's expect-tx and its bulk copies) and free
// again when its `empty` mbarrier has an arrival from every op warp. Every op warp walks every slot of a
// task, also past its own rows, so that no warp arrives for a slot's next use before the others arrived for this one.
#ifndef WEFT_DEVICE_WEIGHT_RING_CUH
#define WEFT_DEVICE_WEIGHT_RING_CUH

#include "common.cuh"

namespace weft_dev {

// A shared-memory pointer as the 32-bit address PTX's shared-space operands take (the loader's ring, the bulk x
// stage of ops_linear.cuh).
__device__ __forceinline__ unsigned int smem_u32(const void* p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

#if WEFT_DEV_LOADER
constexpr int kLoaderStageBytes = 2048;  // one warp's stage: 32 lanes x 4 units of 16 bytes
static_assert(WEFT_LOADER_SLOT_BYTES >= WEFT_BLOCK_WARPS * kLoaderStageBytes, "a slot holds one stage per warp");

// The control words past the ring: full[WEFT_LOADER_SLOTS], empty[WEFT_LOADER_SLOTS] (mbarriers), the stop word
// (set once the op warps are done: the loader stops waiting for slots they will never free), then each compute
// warp's position in the ring between its tiles (slot | parity << 16).
struct LoaderControl {
  unsigned long long full[WEFT_LOADER_SLOTS];
  unsigned long long empty[WEFT_LOADER_SLOTS];
  int stop;
  int pad[3];
  unsigned int pos[8];  // WEFT_BLOCK_WARPS of them
};
static_assert(sizeof(LoaderControl) == WEFT_LOADER_CONTROL_BYTES, "config.cuh sizes the control words");

__device__ __forceinline__ char* loader_ring(char* smem) { return smem + WEFT_SMEM_BYTES; }
__device__ __forceinline__ LoaderControl* loader_control(char* smem) {
  return reinterpret_cast<LoaderControl*>(smem + WEFT_SMEM_BYTES + WEFT_LOADER_RING_BYTES);
}

// A position in the ring: the slot and the parity of its current use, advanced without divisions.
struct RingPos {
  int slot = 0;
  unsigned int parity = 0;
  __device__ __forceinline__ unsigned int word() const { return static_cast<unsigned int>(slot) | parity << 16; }
  __device__ __forceinline__ static RingPos of(unsigned int w) {
    RingPos p;
    p.slot = static_cast<int>(w & 0xffffu);
    p.parity = w >> 16;
    return p;
  }
  __device__ __forceinline__ void next() {
    if (++slot == WEFT_LOADER_SLOTS) {
      slot = 0;
      parity ^= 1u;
    }
  }
};

__device__ __forceinline__ bool mbar_test(unsigned int bar, unsigned int parity) {
  unsigned int ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok)
               : "r"(bar), "r"(parity)
               : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_arrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// An op warp's wait for the slot at `p` to be filled (all lanes). False after half the launch's timeout_cycles (<= 0:
// never), having recorded WEFT_DEV_ERR_DEADLOCK (info: WEFT_DEV_WAIT_LOADER, the slot, its parity), or when another
// block's error stops the launch: the caller stops its tile. Half: a stuck ring starves every task downstream, whose
// event waits began about when this one did; the first error recorded is the one reported, and it should name the
// cause (a GPU test saw an attention task's event wait win the race at the full timeout).
__device__ __forceinline__ bool ring_wait_full(char* smem, const RingPos& p, const weft_env* env) {
  const unsigned int bar = smem_u32(&loader_control(smem)->full[p.slot]);
  if (mbar_test(bar, p.parity)) return true;
  const long long whole = env->queues->timeout_cycles, timeout = whole > 1 ? whole / 2 : whole, start = clock64();
  for (unsigned int spin = 1;; ++spin) {
    if (mbar_test(bar, p.parity)) return true;
    if ((spin & 1023u) == 0u) {
      if (timeout > 0 && clock64() - start > timeout) {
        if (lane() == 0) record_error(env, WEFT_DEV_ERR_DEADLOCK, WEFT_DEV_WAIT_LOADER, p.slot, p.parity);
        return false;
      }
      if (error_raised(env)) return false;
    }
  }
}
// An op warp is done reading the slot at `p` (all lanes): its arrival, after every lane's reads.
__device__ __forceinline__ void ring_release(char* smem, const RingPos& p) {
  __syncwarp();
  if (lane() == 0) mbar_arrive(smem_u32(&loader_control(smem)->empty[p.slot]));
}
#endif

}  // namespace weft_dev

#endif  // WEFT_DEVICE_WEIGHT_RING_CUH
