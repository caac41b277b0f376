#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs consumers through find_package(weft)
# (CMake) and through pkg-config, as a user would.
set -euo pipefail
build="$1"; src="$2"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_c"
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/consumer/consumer_cpp"
pcdir=$(dirname "$(find "$tmp/prefix" -name weft.pc | head -1)")
cc "$src/tests/install/consumer/main.c" -o "$tmp/pc_consumer" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs weft)
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/pc_consumer"
echo "install: find_package(weft) and pkg-config consumers built and ran"
