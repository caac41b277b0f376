#!/usr/bin/env bash
# Every instance of the shared-memory attention path keeps its phases in the device library. NVVM has deleted that
# path whole (attention skipped, wrong tokens, no error) under attn_smem_assume_shared's
# __builtin_assume(__isShared(...)) after changes that looked harmless (docs/perf.md, round 23), and only the GPU
# tests noticed; CI has no GPU. So: src/device compiled to PTX (the CUDA-core library of ARCH), and each of the 76
# instances (attention_qkv_smem_instance without and with a rope table operand, attention_smem_fast_instance and the
# split-KV parts' attention_qkv_split_instance; bf16 and f16; head_dim 64 / 128; groups of 1, 2, 4, 8; and the
# tiles of two kv heads' attention_qkv_pair_instance, groups 2, 4, 8) must still
# hold the softmax's exp (ex2), the dot products' shuffles, barriers and its stores, and every unsplit instance of
# groups 2, 4 and 8 the per-warp phases (attn_smem_attend_warps, which leaves a PTX comment for this check).
# usage: check_attention_ptx.sh NVCC DEVICE_DIR ARCH OUT_DIR
set -euo pipefail
nvcc=$1; dir=$2; arch=$3; out=$4
mkdir -p "$out"
ptx="$out/attention_check_$arch.ptx"
"$nvcc" -std=c++17 -arch="$arch" -rdc=true -ptx -DWEFT_DEVLIB_TENSOR_CORES=0 -o "$ptx" "$dir/device_library.cu"
# Per function definition: its name, then counts of ex2, shfl.sync, bar.sync, stores (st.global / generic st) and
# the per-warp phases' marker.
awk '
  /^\.(weak|visible|extern)? *\.func|^\.func/ {
    name = ""
    if (match($0, /_Z[A-Za-z0-9_]*(attention_qkv_smem_instance|attention_smem_fast_instance|attention_qkv_split_instance|attention_qkv_pair_instance)[A-Za-z0-9_]*/))
      name = substr($0, RSTART, RLENGTH)
    body = 0; ex2 = 0; shfl = 0; bar = 0; st = 0; warps = 0
    next
  }
  name != "" && body == 0 && /^;/ { name = ""; next }  # a declaration
  name != "" && /^\{/ { body = 1; next }
  name != "" && body {
    if (/ex2\.approx/) ex2++
    if (/shfl\.sync/) shfl++
    if (/bar\.sync|barrier\.sync/) bar++
    if (/^[ \t]+st\.(global\.)?(u16|b16|u32|b32|f32|v2\.|v4\.)/) st++
    if (/weft: attn_smem_attend_warps/) warps++
    if (/^\}/) { print name, ex2, shfl, bar, st, warps; name = "" }
  }
' "$ptx" > "$out/attention_check_$arch.txt"
status=0
per_warp=0
count=$(wc -l < "$out/attention_check_$arch.txt")
if [ "$count" -ne 76 ]; then
  echo "expected 76 attention instances in the PTX ($ptx), found $count:"; cat "$out/attention_check_$arch.txt"
  status=1
fi
while read -r name ex2 shfl bar st warps; do
  if [ "$ex2" -eq 0 ] || [ "$shfl" -eq 0 ] || [ "$bar" -eq 0 ] || [ "$st" -eq 0 ]; then
    echo "$name lost its phases (ex2 $ex2, shfl.sync $shfl, bar.sync $bar, stores $st): NVVM dropped the path?"
    status=1
  fi
  # The group is the instance's second int template argument (<T, D, G, ...>: ...Li<D>ELi<G>E...).
  group=$(printf '%s' "$name" | grep -oE 'Li[0-9]+E' | sed -n 2p | tr -dc 0-9 || true)
  case "$name" in *attention_qkv_split_instance*) group=0 ;; esac
  if [ "$group" = 2 ] || [ "$group" = 4 ] || [ "$group" = 8 ]; then
    if [ "$warps" -eq 0 ]; then
      echo "$name lost its per-warp phases (attn_smem_attend_warps): NVVM dropped the path?"
      status=1
    else
      per_warp=$((per_warp + 1))
    fi
  fi
done < "$out/attention_check_$arch.txt"
[ $status -eq 0 ] && echo "76 attention instances keep their phases, $per_warp of them the per-warp ones ($arch)"
exit $status
