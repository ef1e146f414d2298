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
# both runs pass, 1 when a test failed (with --subunit too: subunit.run
# itself exits 0 whatever the results, so each stream is read back).
#
# Nova's functional tests start nova-api from [wsgi]api_paste_config,
# which Nova's test configuration looks for in etc/nova/ of a Nova source
# tree; the wheel installs it under sys.prefix: the functional run gets
# that one (OS_WSGI__API_PASTE_CONFIG, oslo.config's environment source)
# unless the variable is set already.
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
stream="$(mktemp)"
trap 'rm -f "$stream"' EXIT
run() {  # the runner on the given arguments and tests
    if [ "$runner" = unittest ]; then
        "$python" -m unittest "$@"
        return
    fi
    # Into a file, not a pipe: with its stdout on a pipe, subunit.run of
    # Nova's tests (eventlet) hangs.
    local status=0
    "$python" -m subunit.run "$@" > "$stream" || status=$?
    cat "$stream"
    [ $status = 0 ] || return $status
    "$python" - "$stream" <<'PY'
import sys

import subunit
import testtools

summary = testtools.StreamSummary()
with open(sys.argv[1], 'rb') as f:
    summary.startTestRun()
    # (lines the tests print go into the stream too; skip them)
    subunit.ByteStreamToStreamResult(f, non_subunit_name='stdout').run(
        summary)
    summary.stopTestRun()
sys.exit(0 if summary.testsRun and summary.wasSuccessful() else 1)
PY
}
# Outside the repository: its folders must not shadow installed packages.
cd /
rc=0
run "$@" "${unit[@]}" || rc=$?
if [ ${#functional[@]} -gt 0 ]; then
    run "$@" "${functional[@]}" || rc=$?
fi
exit $rc
