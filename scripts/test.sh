#!/usr/bin/env bash
# Every test: install what is missing, build with warnings as errors, run the whole ctest suite and the
# bindings' tests (Python, Rust, Go; Julia's header check), then the ctest suite again in an AddressSanitizer +
# UndefinedBehaviorSanitizer build. Incremental when already built.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/deps.sh"
jobs="$(nproc)"
run_suite() {  # build-dir, extra cmake args...
  local build="$1"; shift
  [ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DWEFT_WERROR=ON "$@" >/dev/null
  cmake --build "$build" -j "$jobs"
  (cd "$build" && ctest --output-on-failure -j "$jobs")
}
echo "== release build (warnings are errors) =="
run_suite "${WEFT_BUILD_DIR:-$root/build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== bindings: Python (with the torch.compile backend), Rust, Go; Julia checked against the header =="
bindings_build="${WEFT_BUILD_DIR:-$root/build}"
bash "$root/bindings/python/test.sh" "$bindings_build"
bash "$root/bindings/rust/test.sh" "$bindings_build"
bash "$root/bindings/go/test.sh" "$bindings_build"
bash "$root/bindings/julia/check.sh"
echo "== ASan + UBSan build =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" \
  run_suite "${WEFT_ASAN_BUILD_DIR:-$root/build-asan}" -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON \
  -DWEFT_DEVICE_CUBIN_DIR="${WEFT_BUILD_DIR:-$root/build}/device"  # the release build's device library cubins
