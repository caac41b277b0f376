// Resident mode's host half (weft_loop in device/task_abi.h, device/loop_gate.cuh): host-mapped words through
// which a running multi-step kernel hands the host each step's feedback output and waits for its answer.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <exception>
#include <functional>

namespace weft {

// Called on the host for each step of a resident loop, in order, with the step's feedback output (n values,
// writable: what it leaves there is the next step's input). Returns false to stop after this step.
using PassCallback = std::function<bool(int32_t pass, int32_t* values, int32_t n)>;

class HostGate {
 public:
  HostGate() = default;
  ~HostGate() { release(); }
  // Frees the mapped words (with the owner's CUDA context current, as the driver wants).
  void release() noexcept;
  HostGate(const HostGate&) = delete;
  HostGate& operator=(const HostGate&) = delete;

  // Grows the mapped words to hold n values and resets them for a new launch (no launch of this gate may be in
  // flight). Returns their device address.
  unsigned int* prepare(size_t n);

  // Serves the boundaries 1 .. steps - 1 of the launch just made on `stream`: waits for the device to publish
  // step s - 1's output, calls on_pass(s - 1, ...) and answers (with the values on_pass rewrote when
  // `rewrites`). Returns the steps the host took: `steps`, or s when on_pass(s - 1) returned false (or threw:
  // the kernel is told to stop, and `thrown` holds the exception for the caller to rethrow). Returns early,
  // without error, when the stream finishes before a boundary is published: the kernel ended on a device error,
  // which the caller's synchronize reports.
  int32_t serve(int32_t steps, size_t n, bool rewrites, CUstream stream, const PassCallback& on_pass,
                std::exception_ptr& thrown);

 private:
  unsigned int* host_ = nullptr;  // [0] published, [1] answer, [2..3] unused, [4 ..] values
  CUdeviceptr dev_ = 0;
  size_t capacity_ = 0;  // values
};

}  // namespace weft
