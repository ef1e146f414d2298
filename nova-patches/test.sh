#!/usr/bin/env bash
# Run the Nova unit tests listed in the "unit-tests" file of the installed
# Nova's series (the subfolder whose "nova-version" is that Nova's
# version) against the installed (patched) Nova, with the python3 on PATH
# (or $PYTHON).
#
#   test.sh [--subunit] [ARGS...]
#
# --subunit writes a subunit v2 stream to stdout (python -m subunit.run)
# instead of unittest's report; other arguments go to the runner.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
# A relative path (.venv-2026.1/bin/python) made absolute, before the cd
# below; the link itself is kept (a venv's python is one).
if [[ "$python" == */* ]]; then
    python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"
fi
runner=unittest
if [ "${1:-}" = --subunit ]; then
    runner=subunit.run
    shift
fi
version="$("$python" -c 'import importlib.metadata as m; print(m.version("nova"))')"
list=
for dir in "$here"/*/; do
    [ "$(cat "$dir/nova-version" 2>/dev/null)" = "$version" ] && list="$dir/unit-tests"
done
[ -n "$list" ] || { echo "test.sh: no series for nova $version" >&2; exit 2; }
mapfile -t tests < <(grep -v '^\s*\(#\|$\)' "$list")
# Outside the repository: its folders must not shadow installed packages.
cd /
exec "$python" -m "$runner" "$@" "${tests[@]}"
