#!/usr/bin/env bash
# Builds the device library cubins from this checkout's src/device with the build's own nvcc command
# (CMakeLists.txt), into OUT_DIR, for use through $WEFT_DEVICE_LIBRARY_DIR: on a GPU machine that has nvcc but not
# libweft's build dependencies, device code can be changed and measured with a libweft built elsewhere.
#   bash scripts/devlib-build.sh OUT_DIR [ARCH ...]      (default sm_90a; every variant of each, in parallel)
#   WEFT_DEVICE_LIBRARY_DIR=OUT_DIR build/samples/weft_generate ...
# Extra nvcc flags (a -D switch, say) go in $DEVLIB_NVCC_FLAGS; -DWEFT_DEVLIB_TICKET=n builds an allocation ticket
# of the same code (task_loop.cuh: A/Bs of device code compare several tickets per side). Only the device library is
# replaced: the headers generated kernels include (task_abi.h, config.cuh, weft_device.h, common.cuh) stay the
# embedded ones.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: devlib-build.sh OUT_DIR [ARCH ...]}"
shift
archs=("${@:-sm_90a}")
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
regs=$(sed -n 's/^#define WEFT_MAX_REGISTERS \([0-9]*\)$/\1/p' "$root/src/device/config.cuh")
loader_regs=$(sed -n 's/^#define WEFT_LOADER_MAX_REGISTERS \([0-9]*\)$/\1/p' "$root/src/device/config.cuh")
mkdir -p "$out"
pids=()
for arch in "${archs[@]}"; do
  variants=(full simt simt_f16)
  [ "$arch" != sm_80 ] && variants+=(wide simt_loader simt_tagged)
  for variant in "${variants[@]}"; do
    name=$arch defs=() cap=$regs
    [ "$variant" = simt ] && name=${arch}_simt defs=(-DWEFT_DEVLIB_TENSOR_CORES=0)
    [ "$variant" = simt_f16 ] && name=${arch}_simt_f16 defs=(-DWEFT_DEVLIB_TENSOR_CORES=0 -DWEFT_DEVLIB_ONE_ROW_DTYPE=WEFT_DEV_F16)
    [ "$variant" = wide ] && name=${arch}_wide defs=(-DWEFT_DEVLIB_WIDE_SMEM=1)
    [ "$variant" = simt_tagged ] && name=${arch}_simt_tagged defs=(-DWEFT_DEVLIB_TENSOR_CORES=0 -DWEFT_DEVLIB_TAGGED=1)
    [ "$variant" = simt_loader ] && name=${arch}_simt_loader defs=(-DWEFT_DEVLIB_TENSOR_CORES=0 -DWEFT_DEVLIB_LOADER=1) cap=$loader_regs
    # shellcheck disable=SC2086
    "$nvcc" -std=c++17 -arch="$arch" -rdc=true -cubin -maxrregcount="$cap" "${defs[@]}" ${DEVLIB_NVCC_FLAGS:-} \
      -o "$out/weft_devlib_$name.cubin" "$root/src/device/device_library.cu" &
    pids+=($!)
  done
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
ls -l "$out"
exit $status
