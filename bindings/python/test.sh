#!/usr/bin/env bash
# Runs the Python bindings' tests against a built libweft.
#   bindings/python/test.sh BUILD_DIR      (BUILD_DIR holds libweft.so)
# Creates (or reuses) a virtual environment in BUILD_DIR/pyvenv, installs what the tests need there (pytest,
# numpy, torch, transformers; torch from PyPI), installs this package from a copy under that folder (so the
# source tree gets no build/ or egg-info), and runs pytest with WEFT_LIBRARY pointing at BUILD_DIR/libweft.so.
# PYTHON picks the interpreter for a new venv (default python3). Exit status is pytest's.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [pytest args...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib="$build/libweft.so"
if [[ ! -e "$lib" ]]; then
  echo "test.sh: $lib not found; build weft first" >&2
  exit 2
fi

venv="$build/pyvenv"
py="$venv/bin/python"
if [[ ! -x "$py" ]]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
pip=("$py" -m pip --disable-pip-version-check --quiet)
# Third-party packages only when missing: reruns are offline and quick.
if ! "$py" -c "import pytest, numpy, torch, transformers, setuptools" 2>/dev/null; then
  "${pip[@]}" install --upgrade pip setuptools
  "${pip[@]}" install pytest numpy torch transformers
fi

# This package, always reinstalled from a fresh copy of the sources.
stage="$venv/weft-src"
rm -rf "$stage"
mkdir -p "$stage"
cp -R "$here/pyproject.toml" "$here/README.md" "$here/weft" "$stage/"
"${pip[@]}" install --no-deps --no-build-isolation --force-reinstall "$stage"

# The pytest script (not `python -m pytest`, which would put the source folder first on sys.path), so
# `import weft` is the installed package, with its entry point. No caches or bytecode in the source tree.
export WEFT_LIBRARY="$lib"
export PYTHONDONTWRITEBYTECODE=1
echo "weft package: $(cd "$venv" && "$py" -c 'import os, weft; print(os.path.dirname(weft.__file__))'); libweft: $lib"
cd "$here"
exec "$venv/bin/pytest" -p no:cacheprovider -rs tests "$@"
