#!/usr/bin/env bash
# The main job: install what is missing, build weft, write a small random Llama-shaped Hugging Face checkpoint,
# compile its decode megakernel (through the kernel cache) and generate tokens greedily — on the GPU when there
# is one (one launch per step, then every step in one launch), otherwise on the CPU reference, saying so.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/deps.sh"
build="${WEFT_BUILD_DIR:-$root/build}"
[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target weft_cli weft_generate
model="$build/tiny-llama"
[ -f "$model/config.json" ] || "$build/weft" checkpoint tiny-llama "$model" --seed 7
prompts="1,2,3,4,5,6,7,8;8,7,6,5,4,3,2,1"
echo "== greedy decode, one launch per step =="
"$build/samples/weft_generate" "$model" --prompt-ids "$prompts" --steps 32 --mode step
if "$build/weft" devices >/dev/null 2>&1; then
  echo "== greedy decode, every step in one launch =="
  "$build/samples/weft_generate" "$model" --prompt-ids "$prompts" --steps 32 --mode loop
fi
