#!/usr/bin/env bash
# Installs the build dependencies on Debian 12 / Ubuntu (as root, or with sudo) if any is missing.
# Quick when everything is already there: it only asks dpkg.
set -euo pipefail
# zlib1g-dev: LLVM's CMake package links its static libraries against zlib (ZLIB::ZLIB), which llvm-14-dev
# does not pull in (libz3-dev, libtinfo-dev and libxml2-dev it does).
packages=(cmake ninja-build g++ pkg-config llvm-14-dev zlib1g-dev libsqlite3-dev libxxhash-dev libgtest-dev googletest
          libbenchmark-dev nlohmann-json3-dev libdlpack-dev binutils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
