#!/usr/bin/env bash
# Builds and tests the Go bindings (package weft, cgo) against the libweft.so in $1: a build folder, or any
# folder that directly holds libweft.so (default: the repository's build/). Installs Debian's golang-go when
# go is missing. Exits non-zero on any failure. Without a GPU the device tests skip, saying why.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
lib_dir="${1:-$repo/build}"
[[ -d "$lib_dir" ]] || { echo "go/test.sh: no folder $lib_dir" >&2; exit 1; }
lib_dir="$(cd "$lib_dir" && pwd)"
[[ -f "$lib_dir/libweft.so" ]] || { echo "go/test.sh: no libweft.so in $lib_dir" >&2; exit 1; }

if ! command -v go >/dev/null; then
  echo "go/test.sh: go not found; installing golang-go"
  sudo=""
  [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -qq golang-go >/dev/null 2>&1 ||
    { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq golang-go >/dev/null; }
fi
# Generics and unsafe.Slice need Go 1.18.
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
if [[ ! "$go_minor" =~ ^[0-9]+$ ]] || ((go_minor < 18)); then
  echo "go/test.sh: $(go env GOVERSION) is too old; Go 1.18 or later is needed" >&2
  exit 1
fi

# The header beside the library (a DIR/lib + DIR/include install) wins over the repository's (env flags come
# before the package's #cgo flags).
if [[ -f "$lib_dir/../include/weft/weft.h" ]]; then
  export CGO_CFLAGS="-I$(cd "$lib_dir/../include" && pwd) ${CGO_CFLAGS:-}"
fi
export CGO_ENABLED=1
export CGO_LDFLAGS="-L$lib_dir -Wl,-rpath,$lib_dir ${CGO_LDFLAGS:-}"
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
# The weft command writes the checkpoint of the model test: beside the library (build/) or one up (DIR/lib).
if [[ -z "${WEFT_CLI:-}" ]]; then
  for c in "$lib_dir/weft" "$lib_dir/../weft" "$lib_dir/../bin/weft"; do
    if [[ -f "$c" && -x "$c" ]]; then export WEFT_CLI="$c"; break; fi
  done
fi
# Kernels compiled by the GPU tests go to a private throwaway cache unless the caller chose one.
own_cache=""
if [[ -z "${WEFT_CACHE_DIR:-}" ]]; then
  own_cache="$(mktemp -d)"
  export WEFT_CACHE_DIR="$own_cache"
fi
log="$(mktemp)"
trap 'rm -f "$log"; [[ -z "$own_cache" ]] || rm -rf "$own_cache"' EXIT

cd "$here"
echo "== go bindings against $lib_dir ($(go env GOVERSION), weft CLI ${WEFT_CLI:-none})"
go vet ./...
if ! go test -count=1 -v ./... >"$log" 2>&1; then
  cat "$log"
  echo "== go bindings: FAILED" >&2
  exit 1
fi
# The summary, with the reason of every skipped test (the test's last log line, printed before its verdict).
awk '/^=== RUN/ {last = ""} /^    / {last = $0} /^--- SKIP/ {sub(/^ +/, "", last); print $0 ": " last} /^ok / {print}' "$log"
go run ./examples/mlp | tail -n 3
echo "== go bindings: $(grep -c -- '--- PASS' "$log") tests passed, $(grep -c -- '--- SKIP' "$log" || true) skipped"
