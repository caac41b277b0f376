// Builds the harness kernel through the production JIT path (compile_kernel) and writes the cubin.
#include <fstream>
#include <iostream>
#include "compile/nvrtc_compiler.hpp"
int main(int argc, char** argv) {
  const char* src =
      "#include \"weft_device.h\"\n"
      "extern \"C\" __global__ void __launch_bounds__(WEFT_BLOCK_THREADS, WEFT_MIN_BLOCKS_PER_SM)\n"
      "run_tasks(const weft_task* tasks, const weft_env* env0) {\n"
      "  extern __shared__ __align__(16) char smem[];\n"
      "  weft_env env = *env0;\n"
      "  env.task_index = blockIdx.x;\n"
      "  const weft_task* t = &tasks[blockIdx.x];\n"
      "  weft_dev_run_op(t->op, &t->args, &env, smem);\n"
      "}\n"
      "extern \"C\" __global__ void __launch_bounds__(WEFT_BLOCK_THREADS, WEFT_MIN_BLOCKS_PER_SM)\n"
      "chain(unsigned int* counters, int* data, const weft_env* env, long long timeout) {\n"
      "  // block b waits for counter b (set by block b-1), appends, notifies counter b+1\n"
      "  const int b = blockIdx.x;\n"
      "  if (b > 0 && !weft_event_wait(&counters[b], 1u, timeout, env, b)) return;\n"
      "  if (threadIdx.x == 0) data[b] = (b > 0 ? data[b - 1] : 0) + b;\n"
      "  weft_event_notify(&counters[b + 1]);\n"
      "}\n"
      "extern \"C\" __global__ void stuck(unsigned int* counter, unsigned int target, const weft_env* env, long long timeout, int* after) {\n"
      "  const bool ok = weft_event_wait(counter, target, timeout, env, 42);\n"
      "  if (threadIdx.x == 0) after[blockIdx.x] = ok ? 1 : 2;\n"
      "}\n";
  auto k = weft::compile_kernel(src, weft::CompileOptions{argc > 2 ? argv[2] : "sm_90a", false, {}});
  std::ofstream(argv[1], std::ios::binary).write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
  std::cout << "cubin " << k.cubin.size() << " bytes, nvrtc " << k.compile_ms << " ms, link " << k.link_ms << " ms\n" << k.log;
}
