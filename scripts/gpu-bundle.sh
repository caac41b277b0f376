#!/usr/bin/env bash
# Makes a small copy of a build folder for a GPU machine: binaries stripped, object files left out, and (with
# ARCHIVE) also packed into one .tar.xz (libweft carries LLVM: the folder alone is ~70 MB, the archive ~12 MB).
#   bash scripts/gpu-bundle.sh BUILD_DIR OUT_DIR [ARCHIVE.tar.xz]
set -euo pipefail
src="$(cd "${1:?usage: gpu-bundle.sh BUILD_DIR OUT_DIR}" && pwd)"
out="${2:?usage: gpu-bundle.sh BUILD_DIR OUT_DIR}"
rm -rf "$out"
mkdir -p "$out"
# The per-arch device library cubins are already embedded in every binary; benchmarks are not tests; the host
# JIT's tests need no GPU.
tar -C "$src" --exclude='*.o' --exclude='*.a' --exclude='./Testing' --exclude='./device/*.cubin' \
  --exclude='./weft_compile_bench' --exclude='./tests/weft_host_jit_tests' --exclude='./pyvenv' -cf - . | tar -C "$out" -xf -
find "$out" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file -b "$1" | grep -q ELF && strip --strip-unneeded "$1"' _ {} \;
du -sh "$out"
if [ -n "${3:-}" ]; then
  tar -C "$out" -cf - . | xz -T0 -6 > "$3"
  du -sh "$3"
fi
