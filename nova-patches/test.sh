#!/usr/bin/env bash
# Run the Nova unit tests listed in "unit-tests" against the installed
# (patched) Nova, with the python3 on PATH (or $PYTHON). Extra arguments
# go to "python -m unittest" (e.g. -v).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
mapfile -t tests < <(grep -v '^\s*\(#\|$\)' "$here/unit-tests")
# Outside the repository: its folders must not shadow installed packages.
cd "$(mktemp -d)"
exec "$python" -m unittest "$@" "${tests[@]}"
