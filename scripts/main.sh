#!/usr/bin/env bash
# The main job: install what is missing, build weft, then build a two-layer MLP (C API) and a one-layer
# decoder block (C++ wrapper), print each graph, run it on the CPU reference and print its checksum.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/deps.sh"
build="${WEFT_BUILD_DIR:-$root/build}"
[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target weft_sample_mlp_c weft_sample_decoder_cpp
echo "== two-layer MLP (C API) =="
"$build/samples/weft_sample_mlp_c"
echo "== one-layer decoder block (C++ wrapper) =="
"$build/samples/weft_sample_decoder_cpp"
