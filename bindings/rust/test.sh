#!/usr/bin/env bash
# Builds and tests the Rust bindings (weft-sys, weft) against the libweft.so in $1: a build folder, or any
# folder that directly holds libweft.so (default: the repository's build/). Exits non-zero on any failure.
# Without a GPU the device tests print why they skip and pass.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
lib_dir="${1:-$repo/build}"
[[ -d "$lib_dir" ]] || { echo "rust/test.sh: no folder $lib_dir" >&2; exit 1; }
lib_dir="$(cd "$lib_dir" && pwd)"
[[ -f "$lib_dir/libweft.so" ]] || { echo "rust/test.sh: no libweft.so in $lib_dir" >&2; exit 1; }
command -v cargo >/dev/null || {
  echo "rust/test.sh: cargo not found; install a Rust toolchain (e.g. rustup) and put cargo on PATH" >&2
  exit 1
}

# The header beside the library (a DIR/lib + DIR/include install), else the repository's.
include="$repo/include"
[[ -f "$lib_dir/../include/weft/weft.h" ]] && include="$(cd "$lib_dir/../include" && pwd)"
# The weft command writes the checkpoint of the model test: beside the library (build/) or one up (DIR/lib).
cli="${WEFT_CLI:-}"
if [[ -z "$cli" ]]; then
  for c in "$lib_dir/weft" "$lib_dir/../weft" "$lib_dir/../bin/weft"; do
    if [[ -f "$c" && -x "$c" ]]; then cli="$c"; break; fi
  done
fi

export WEFT_LIB_DIR="$lib_dir" WEFT_INCLUDE_DIR="$include"
export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
export CARGO_NET_OFFLINE=true
[[ -n "$cli" ]] && export WEFT_CLI="$cli"
# Kernels compiled by the GPU tests go to a private throwaway cache unless the caller chose one.
own_cache=""
if [[ -z "${WEFT_CACHE_DIR:-}" ]]; then
  own_cache="$(mktemp -d)"
  export WEFT_CACHE_DIR="$own_cache"
fi
log="$(mktemp)"
trap 'rm -f "$log"; [[ -z "$own_cache" ]] || rm -rf "$own_cache"' EXIT
cd "$here"
echo "== rust bindings against $lib_dir (header $include, weft CLI ${cli:-none})"
tests=()
for t in weft/tests/*.rs; do
  name="$(basename "$t" .rs)"
  [[ "$name" == device ]] || tests+=(--test "$name")
done
cargo build --workspace --all-targets --offline
cargo test --offline -p weft-sys 2>&1 | tee -a "$log"
cargo test --offline -p weft --lib "${tests[@]}" 2>&1 | tee -a "$log"
cargo test --offline -p weft --doc 2>&1 | tee -a "$log"
# Shown, not captured: the device tests say why they skip on a machine without a GPU.
cargo test --offline -p weft --test device -- --nocapture 2>&1 | tee -a "$log"
cargo run --offline -q -p weft --example mlp | tail -n 3

passed="$(grep -o 'test result: ok\. [0-9]* passed' "$log" | awk '{s += $4} END {print s + 0}')"
echo "== rust bindings: $passed tests passed"
