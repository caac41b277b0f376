#!/usr/bin/env bash
# ABI rule: libweft.so exports exactly the functions that weft.h declares (WEFT_API), nothing else —
# no C++ symbols, no nlohmann/xxHash/LLVM internals that could clash with a host process's copies.
set -euo pipefail
lib="$1"; header="$2"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -v '#define' "$header" | grep -oE 'WEFT_API [^(]*\(' | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
status=0
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$extra" ]; then echo "exported but not declared in weft.h:"; echo "$extra"; status=1; fi
if [ -n "$missing" ]; then echo "declared in weft.h but not exported:"; echo "$missing"; status=1; fi
echo "$(echo "$exported" | wc -l) exported symbols, $(echo "$declared" | wc -l) declared"
exit $status
