#!/usr/bin/env bash
# Runs the whole ctest suite, GPU tests included, on a GPU machine from a build folder made elsewhere (it builds
# nothing): build on a CPU machine, copy the folder (scripts/gpu-bundle.sh makes a small copy), then run
#   bash scripts/gpu-test.sh BUILD_DIR [ctest args...]
# It rewrites the build's recorded paths to where the folder and the sources are now, runs ctest, and ends
# with a line "N passed, N failed, N skipped".
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:?usage: gpu-test.sh BUILD_DIR [ctest args...]}" && pwd)"
shift
old_build=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt")
old_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
if [ -n "$old_build" ] && [ "$old_build" != "$build" ]; then
  # Test lists hold absolute paths of the machine that built them.
  # CMakeCache.txt too, so that a second run finds nothing left to rewrite.
  find "$build" -name '*.cmake' -o -name 'CMakeCache.txt' | while read -r f; do
    sed -i "s#$old_build#$build#g; s#$old_src#$root#g" "$f"
  done
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
# The binaries' RUNPATH names the folder they were built in.
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=$(mktemp)
(cd "$build" && ctest --output-on-failure "$@") 2>&1 | tee "$log"
total=$(grep -oE 'out of [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
failed=$(grep -oE '[0-9]+ tests failed' "$log" | tail -1 | grep -oE '^[0-9]+')
skipped=$(grep -c '\*\*\*Skipped' "$log")
notrun=$(grep -cE '\*\*\*Not Run' "$log")
total=${total:-0}; failed=${failed:-0}
passed=$((total - failed - skipped))
echo "gpu-test summary ($(basename "$build")): $passed passed, $failed failed, $skipped skipped${notrun:+ ($notrun not run)}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
