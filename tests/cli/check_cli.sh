#!/usr/bin/env bash
# The weft command end to end on a private cache: example graph -> compile (miss, then hit) -> inspect ->
# cache stats/list/verify/clear, and a malformed graph file reported with the field at fault.
set -euo pipefail
weft="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export WEFT_CACHE_DIR="$tmp/cache"
mkdir -p "$tmp/dump"
"$weft" example qwen3-0.6b --layers 2 > "$tmp/g.json"
WEFT_DUMP_DIR="$tmp/dump" "$weft" compile "$tmp/g.json" --arch sm_90a --set batch=1 | tee "$tmp/c1"
# The dump holds the generated source, the NVRTC / nvJitLink logs and the task graph.
ls "$tmp/dump"/*_kernel.cu "$tmp/dump"/*_nvrtc.log "$tmp/dump"/*_nvjitlink.log "$tmp/dump"/*_tasks.json >/dev/null
grep -q '"queues"' "$tmp/dump"/*_tasks.json
grep -q "cache      miss" "$tmp/c1"
grep -qE "tasks +[1-9]" "$tmp/c1"
# Each output goes to a file first: grep -q closing a pipe early would fail the writer under pipefail.
expect() {  # expect PATTERN COMMAND...
  local pattern="$1"; shift
  "$@" > "$tmp/out"
  grep -qE "$pattern" "$tmp/out" || { echo "'$*' printed:"; cat "$tmp/out"; exit 1; }
}
expect "cache +hit" "$weft" compile "$tmp/g.json" --arch sm_90a --set batch=1
expect "task graph for sm_90a" "$weft" inspect "$tmp/g.json" --set batch=2
# WEFT_ATTENTION_SPLIT reaches inspect as it does compile: its 4096-row cache splits each kv head's tile in 8 parts,
# or none at 1; a value out of range is refused, by name.
expect "attention_decode_qkv +l0.attn +1x8x8p " "$weft" inspect "$tmp/g.json" --set batch=1
expect "attention_decode_qkv +l0.attn +1x8 " env WEFT_ATTENTION_SPLIT=1 "$weft" inspect "$tmp/g.json" --set batch=1
if WEFT_ATTENTION_SPLIT=9 "$weft" inspect "$tmp/g.json" > /dev/null 2> "$tmp/err"; then echo "a split limit of 9 was taken"; exit 1; fi
grep -q "WEFT_ATTENTION_SPLIT='9'" "$tmp/err" || { cat "$tmp/err"; exit 1; }
expect "entries +1" "$weft" cache stats
expect "weft_megakernel" "$weft" cache list
expect "1 entries ok" "$weft" cache verify
"$weft" cache clear >/dev/null
expect "entries +0" "$weft" cache stats
sed 's/"dtype": "bf16"/"dtype": "bf17"/' "$tmp/g.json" > "$tmp/bad.json"
if "$weft" compile "$tmp/bad.json" 2> "$tmp/err"; then echo "a malformed graph compiled"; exit 1; fi
grep -qE 'tensors\[[0-9]+\]\.dtype is .bf17' "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "weft CLI: ok"
