#!/usr/bin/env bash
# Checks the Julia binding against include/weft/weft.h without a Julia toolchain (none can be installed on our
# build machines), so that CI catches drift: every ccall in LibWeft.jl names a function of the header with the
# header's arity and parameter/return types; every header function is wrapped; every struct has the header's
# fields in order with matching types; every enum value and version number agrees; and the rest of the package
# only uses LibWeft names that exist. Usage: check.sh [path/to/weft.h]. Exits non-zero on any mismatch.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
header="${1:-$here/../../include/weft/weft.h}"
lib="$here/Weft.jl/src/LibWeft.jl"
[[ -f "$header" ]] || { echo "julia/check.sh: no header at $header" >&2; exit 1; }
[[ -f "$lib" ]] || { echo "julia/check.sh: no $lib" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# C type (const dropped, stars counted, [N] as a trailing marker) -> the Julia type LibWeft must use.
# kind "param": const char* is Cstring; kind "field": char* is Ptr{Cchar} and char[N] is NTuple{N,Cchar}.
cat >"$work/types.awk" <<'EOF'
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function base_type(t) {
  if (t == "void") return "Cvoid"
  if (t == "int") return "Cint"
  if (t == "float") return "Cfloat"
  if (t == "double") return "Cdouble"
  if (t == "size_t") return "Csize_t"
  if (t == "int32_t") return "Int32"
  if (t == "int64_t") return "Int64"
  if (t == "uint64_t") return "UInt64"
  if (t == "char") return "Cchar"
  return t
}
# decl: a declaration without its name, e.g. "const weft_dim*", "uint64_t []", "char [33]".
function julia_type(decl, kind,    t, stars, n, arr, j) {
  arr = ""
  if (match(decl, /\[[^]]*\]/)) { arr = substr(decl, RSTART + 1, RLENGTH - 2); decl = substr(decl, 1, RSTART - 1) }
  gsub(/const/, "", decl)
  stars = gsub(/\*/, "", decl)
  t = base_type(trim(decl))
  if (arr != "" && kind == "field") {
    if (arr in defines) arr = defines[arr]
    return "NTuple{" arr "," t "}"
  }
  if (arr != "") stars++
  if (t == "Cchar" && stars > 0 && kind != "field") { t = "Cstring"; stars-- }
  for (j = 0; j < stars; j++) t = "Ptr{" t "}"
  return t
}
EOF

# The header, comments removed, as records: F name|ret|types, S struct|index|field|type, E NAME|value.
awk '
  { text = text $0 "\n" }
  END {
    while (match(text, /\/\*/)) {                       # strip /* ... */ comments
      rest = substr(text, RSTART + 2)
      if (!match(rest, /\*\//)) break
      text = substr(text, 1, index(text, "/*") - 1) substr(rest, RSTART + 2)
    }
    printf "%s", text
  }' "$header" >"$work/header.c"

awk -f "$work/types.awk" -f /dev/stdin "$work/header.c" >"$work/header.rec" <<'EOF'
/^#/ {                                                 # "#define WEFT_X 8", "#define WEFT_TENSOR_NONE ((weft_tensor)0)"
  if ($1 == "#define" && $2 ~ /^WEFT_/ && NF >= 3 && $2 != "WEFT_VERSION" && $2 != "WEFT_API") {
    v = $3; gsub(/[^0-9]/, "", v)
    if (v != "") { defines[$2] = v; print "E " $2 "|" v }
  }
  next
}
/WEFT_API/ { decl = ""; infn = 1 }
infn { decl = decl " " $0; if (index($0, ";")) { infn = 0; function_record(decl) }; next }
/^typedef struct [a-z_]+ \{/ { st = $3; next }
st != "" && /^\}/ { st = ""; next }
st != "" && /;/ { field_records($0); next }
/^typedef enum/ { inenum = 1; next }
inenum && /^\}/ { inenum = 0; next }
inenum && /=/ {
  line = $0; sub(/,.*/, "", line); split(line, kv, "=")
  name = trim(kv[1]); value = trim(kv[2])
  if (name !~ /MAX_ENUM_$/) print "E " name "|" value
  next
}
function function_record(d,    op, cl, head, params, n, p, i, name, ret, types, decl_p, ty) {
  gsub(/\n/, " ", d); gsub(/WEFT_API/, "", d)
  op = index(d, "("); cl = 0
  for (i = length(d); i > 0; i--) if (substr(d, i, 1) == ")") { cl = i; break }
  head = trim(substr(d, 1, op - 1)); params = trim(substr(d, op + 1, cl - op - 1))
  match(head, /[A-Za-z_0-9]+$/); name = substr(head, RSTART); ret = julia_type(substr(head, 1, RSTART - 1), "param")
  types = ""
  if (params != "void") {
    n = split(params, p, ",")
    for (i = 1; i <= n; i++) {
      decl_p = trim(p[i])
      if (match(decl_p, /[A-Za-z_0-9]+\[[^]]*\]$/)) {         # "uint64_t out[2]": keep the [..]
        ty = substr(decl_p, 1, RSTART - 1) substr(decl_p, index(decl_p, "["))
      } else {
        match(decl_p, /[A-Za-z_0-9]+$/); ty = substr(decl_p, 1, RSTART - 1)
      }
      types = types (i > 1 ? ", " : "") julia_type(ty, "param")
    }
  }
  print "F " name "|" ret "|" types
}
function field_records(line,    t, names, n, i, nm, arr) {
  sub(/;.*/, "", line); line = trim(line)
  # "int64_t num_tasks, num_events" / "const char* arch" / "char key[33]" / "weft_dim dims[WEFT_MAX_RANK]"
  match(line, /[A-Za-z_0-9]+(\[[^]]*\])?(, *[A-Za-z_0-9]+(\[[^]]*\])?)*$/)
  t = trim(substr(line, 1, RSTART - 1)); names = substr(line, RSTART)
  n = split(names, nm, ",")
  for (i = 1; i <= n; i++) {
    nm[i] = trim(nm[i]); arr = ""
    if (match(nm[i], /\[[^]]*\]/)) { arr = substr(nm[i], RSTART); nm[i] = substr(nm[i], 1, RSTART - 1) }
    print "S " st "|" ++fields[st] "|" nm[i] "|" julia_type(t arr, "field")
  }
}
EOF

# LibWeft.jl as the same records, and X lines for a wrapper whose parameters, C types and arguments differ in
# number (Julia would only say so at the first call).
awk -f "$work/types.awk" -f /dev/stdin "$lib" >"$work/julia.rec" <<'EOF'
function count(list) { list = trim(list); return list == "" ? 0 : gsub(/,/, ",", list) + 1 }
/^const (WEFT_[A-Z_0-9]+) = / {
  v = $4; gsub(/[^0-9]/, "", v)
  if ($2 == "WEFT_VERSION") next                        # computed from the parts
  print "E " $2 "|" v; next
}
/^struct weft_[a-z_]+$/ { st = $2; next }
st != "" && /^end/ { st = ""; next }
st != "" && /::/ { split(trim($0), f, "::"); print "S " st "|" ++fields[st] "|" f[1] "|" f[2]; next }
/= ccall\(\(:weft_/ {
  match($0, /^weft_[a-z_0-9]+\(/); wrapper = substr($0, 1, RLENGTH - 1)
  match($0, /ccall\(\(:weft_[a-z_0-9]+,/); sym = substr($0, RSTART + 8, RLENGTH - 9)
  rest = substr($0, RSTART + RLENGTH); sub(/^ *libweft\), */, "", rest)
  ret = rest; sub(/,.*/, "", ret)
  types = substr(rest, index(rest, "(") + 1); types = substr(types, 1, index(types, ")") - 1)
  sub(/, *$/, "", types)
  params = substr($0, length(wrapper) + 2); params = substr(params, 1, index(params, ")") - 1)
  args = substr(rest, index(rest, "(") + length(types) + 1); sub(/^[^)]*\)/, "", args); sub(/\) *$/, "", args)
  sub(/^, */, "", args)
  if (wrapper != sym) print "X wrapper " wrapper " calls " sym
  if (count(params) != count(types) || count(args) != count(types))
    print "X " sym ": " count(params) " parameters, " count(types) " C types, " count(args) " arguments"
  print "F " sym "|" trim(ret) "|" trim(types)
}
EOF

# Every call L.weft_name(...) in the package passes as many arguments as the wrapper takes.
awk -f "$work/types.awk" -f /dev/stdin "$lib" "$here"/Weft.jl/src/*.jl "$here"/Weft.jl/test/*.jl >>"$work/julia.rec" <<'EOF'
FILENAME ~ /LibWeft\.jl$/ && /= ccall\(/ {
  match($0, /^weft_[a-z_0-9]+\(/); name = substr($0, 1, RLENGTH - 1)
  params = substr($0, RLENGTH + 1); params = substr(params, 1, index(params, ")") - 1)
  arity[name] = (trim(params) == "") ? 0 : gsub(/,/, ",", params) + 1
  next
}
FILENAME !~ /LibWeft\.jl$/ { text[FILENAME] = text[FILENAME] $0 "\n" }
END {
  for (f in text) {
    t = text[f]
    while (match(t, /L\.weft_[a-z_0-9]+\(/)) {
      name = substr(t, RSTART + 2, RLENGTH - 3); t = substr(t, RSTART + RLENGTH)
      depth = 1; commas = 0; nonblank = 0; instr = 0
      for (i = 1; i <= length(t) && depth > 0; i++) {
        c = substr(t, i, 1)
        if (instr) { if (c == "\\") i++; else if (c == "\"") instr = 0; continue }
        if (c == "\"") { instr = 1; nonblank = 1; continue }
        if (c == "(" || c == "[" || c == "{") depth++
        else if (c == ")" || c == "]" || c == "}") depth--
        else if (c == "," && depth == 1) commas++
        if (depth > 0 && c !~ /[ \t\n]/) nonblank = 1
      }
      n = nonblank ? commas + 1 : 0
      if (!(name in arity)) continue # reported by the name check below
      if (n != arity[name]) print "X " f ": L." name " called with " n " arguments, the wrapper takes " arity[name]
    }
  }
}
EOF

status=0
if grep '^X ' "$work/julia.rec" | sed 's/^X /julia\/check.sh: /'; then status=1; fi
sort -u "$work/header.rec" | grep -v '^X ' >"$work/h"
sort -u "$work/julia.rec" | grep -v '^X ' >"$work/j"
if ! diff_out="$(diff "$work/h" "$work/j")"; then
  echo "julia/check.sh: LibWeft.jl and $(basename "$header") disagree (< header, > Julia):"
  echo "$diff_out" | grep '^[<>]'
  status=1
fi

# Everything the package calls through LibWeft (L.name) must exist there.
defined="$(grep -oE '^(const |mutable struct |struct )?(weft_[a-z_0-9]+|WEFT_[A-Z_0-9]+|libweft|set_library!)' "$lib" |
  awk '{print $NF}' | sort -u)"
used="$(grep -ohE '\bL\.[A-Za-z_0-9!]+' "$here"/Weft.jl/src/*.jl "$here"/Weft.jl/test/*.jl | sed 's/^L\.//' | sort -u)"
missing="$(comm -23 <(echo "$used") <(echo "$defined"))"
if [[ -n "$missing" ]]; then
  echo "julia/check.sh: used as L.<name> but not defined in LibWeft.jl:" $missing
  status=1
fi

n_fn="$(grep -c '^F ' "$work/h")"
n_st="$(grep -c '^S ' "$work/h")"
n_en="$(grep -c '^E ' "$work/h")"
if ((status == 0)); then
  echo "julia/check.sh: LibWeft.jl matches $(basename "$header"): $n_fn functions, $n_st struct fields, $n_en constants"
fi
exit "$status"
