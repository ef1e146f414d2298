#!/usr/bin/env bash
# Run the Nova tests listed in the "unit-tests" and "functional-tests"
# files of the installed Nova's series (the subfolder whose "nova-version"
# is that Nova's version) against the installed (patched) Nova, with the
# python3 on PATH (or $PYTHON): the unit tests first, then the functional
# tests, each list in a process of its own.
#
#   test.sh [--subunit] [ARGS...]
#
# --subunit writes a subunit v2 stream to stdout (python -m subunit.run)
# instead of unittest's report, the two runs one after the other (subunit
# v2 streams concatenate); other arguments go to the runner. Exits 0 when
# both runs pass.
#
# Nova's functional tests start nova-api from [wsgi]api_paste_config,
# which Nova's test configuration looks for in etc/nova/ of a Nova source
# tree; the wheel installs it under sys.prefix: the functional run gets
# that one (OS_WSGI__API_PASTE_CONFIG, oslo.config's environment source)
# unless the variable is set already.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
runner=unittest
if [ "${1:-}" = --subunit ]; then
    runner=subunit.run
    shift
fi
version="$("$python" -c 'import importlib.metadata as m; print(m.version("nova"))')"
series=
for dir in "$here"/*/; do
    [ "$(cat "$dir/nova-version" 2>/dev/null)" = "$version" ] && series="${dir%/}"
done
[ -n "$series" ] || { echo "test.sh: no series for nova $version" >&2; exit 2; }
mapfile -t unit < <(grep -v '^\s*\(#\|$\)' "$series/unit-tests")
functional=()
if [ -f "$series/functional-tests" ]; then
    mapfile -t functional < <(grep -v '^\s*\(#\|$\)' "$series/functional-tests")
fi
if [ -z "${OS_WSGI__API_PASTE_CONFIG:-}" ]; then
    paste="$("$python" -c 'import sys; print(sys.prefix)')/etc/nova/api-paste.ini"
    [ -f "$paste" ] && export OS_WSGI__API_PASTE_CONFIG="$paste"
fi
# Outside the repository: its folders must not shadow installed packages.
cd /
rc=0
"$python" -m "$runner" "$@" "${unit[@]}" || rc=$?
if [ ${#functional[@]} -gt 0 ]; then
    "$python" -m "$runner" "$@" "${functional[@]}" || rc=$?
fi
exit $rc
