#!/usr/bin/env bash
# Run the Nova unit tests listed in "unit-tests" against the installed
# (patched) Nova, with the python3 on PATH (or $PYTHON).
#
#   test.sh [--subunit] [ARGS...]
#
# --subunit writes a subunit v2 stream to stdout (python -m subunit.run)
# instead of unittest's report; other arguments go to the runner.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
runner=unittest
if [ "${1:-}" = --subunit ]; then
    runner=subunit.run
    shift
fi
mapfile -t tests < <(grep -v '^\s*\(#\|$\)' "$here/unit-tests")
# Outside the repository: its folders must not shadow installed packages.
cd /
exec "$python" -m "$runner" "$@" "${tests[@]}"
