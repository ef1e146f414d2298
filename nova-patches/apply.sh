#!/usr/bin/env bash
# Apply the patch series for the installed Nova's release.
#
#   apply.sh [--check | --reverse] [SITE_PACKAGES]
#
# SITE_PACKAGES is the folder that holds the installed "nova" package
# (default: where the python3 on PATH finds it). Each subfolder of this
# folder is the series of one OpenStack release, named by it (2024.1 ...),
# for the Nova version in its "nova-version" file; the one for the
# installed Nova's version is applied with "patch -p1 -d SITE_PACKAGES"
# in the order of its "series" file.
#
#   (none)     apply every patch not applied yet; already applied patches
#              are left as they are, so running it twice changes nothing
#   --check    only report, one line per patch, "applied" or "not applied";
#              exit 0 when the whole series is applied, 3 otherwise
#   --reverse  remove the series again (last patch first)
#
# Refuses (exit 2, nothing written) a Nova version no subfolder is for
# (naming those it has), and a tree where a patch neither applies nor is
# applied already (the whole series is tried on a scratch copy first).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
mode=apply
case "${1:-}" in
    --check) mode=check; shift ;;
    --reverse) mode=reverse; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "apply.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
python="${PYTHON:-python3}"

fail() { echo "apply.sh: $*" >&2; exit 2; }

command -v patch >/dev/null 2>&1 || fail "GNU patch is not installed"

if [ $# -ge 1 ]; then
    site="$1"
else
    site="$("$python" - <<'PY'
import importlib.util
import os
spec = importlib.util.find_spec('nova')
print(os.path.dirname(os.path.dirname(spec.origin)) if spec else '')
PY
)"
    [ -n "$site" ] || fail "no nova package found by $python (pass SITE_PACKAGES)"
fi
[ -f "$site/nova/__init__.py" ] || fail "$site holds no nova package"

version="$(sed -n 's/^Version: //p' "$site"/nova-*.dist-info/METADATA 2>/dev/null | head -n1)"
series_dir=
known=()
for dir in "$here"/*/; do
    [ -f "$dir/nova-version" ] || continue
    known+=("$(basename "$dir") (nova $(cat "$dir/nova-version"))")
    [ "$(cat "$dir/nova-version")" = "$version" ] && series_dir="${dir%/}"
done
[ -n "$series_dir" ] || \
    fail "$site has nova ${version:-of unknown version}; there is a series only for $(IFS=,; echo "${known[*]}" | sed 's/,/, /g'); nothing is written"
echo "apply.sh: nova $version: series $(basename "$series_dir")" >&2
here="$series_dir"

mapfile -t patches < <(grep -v '^\s*\(#\|$\)' "$here/series")
[ ${#patches[@]} -gt 0 ] || fail "$here/series lists no patch"

applied() {  # patch file, tree: does it reverse cleanly there?
    patch -p1 -R -s -f --dry-run -d "$2" < "$1" >/dev/null 2>&1
}

for name in "${patches[@]}"; do
    [ -f "$here/$name" ] || fail "series names $name, which is not in $here"
done

# A scratch copy of the files the series touches: every step is rehearsed
# there first.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
copy() {
    rm -rf "$scratch/tree" && mkdir "$scratch/tree"
    for name in "${patches[@]}"; do
        sed -n 's#^+++ b/\([^[:space:]]*\).*#\1#p' "$here/$name"
    done | sort -u | while read -r path; do
        if [ -e "$site/$path" ]; then
            mkdir -p "$scratch/tree/$(dirname "$path")"
            cp -p "$site/$path" "$scratch/tree/$path"
        fi
    done
}

# Which patches are applied: peel them off the scratch copy, last first.
# The applied ones must be the first k of the series.
copy
state=()
for ((i=${#patches[@]}-1; i>=0; i--)); do
    if applied "$here/${patches[i]}" "$scratch/tree"; then
        patch -p1 -R -s -f -E -d "$scratch/tree" < "$here/${patches[i]}" \
            >/dev/null 2>&1 || fail "cannot reverse ${patches[i]} on a copy"
        state[i]=1
    else
        state[i]=0
    fi
done
count=0
for ((i=0; i<${#patches[@]}; i++)); do
    if [ "${state[i]}" = 1 ]; then
        [ $count = $i ] || fail "$site has ${patches[i]} but not every patch before it; nothing is written"
        count=$((i + 1))
    fi
done

if [ "$mode" = check ]; then
    for ((i=0; i<${#patches[@]}; i++)); do
        if [ "${state[i]}" = 1 ]; then
            echo "${patches[i]}: applied"
        else
            echo "${patches[i]}: not applied"
        fi
    done
    [ $count = ${#patches[@]} ] || exit 3
    exit 0
fi

if [ "$mode" = apply ]; then
    # Rehearse the missing patches on the copy, then apply them.
    copy
    for ((i=count; i<${#patches[@]}; i++)); do
        patch -p1 -s -f -N -d "$scratch/tree" < "$here/${patches[i]}" \
            >"$scratch/log" 2>&1 || \
            fail "${patches[i]} does not apply to $site (a modified nova $version?); nothing is written:
$(cat "$scratch/log")"
    done
    for ((i=0; i<${#patches[@]}; i++)); do
        if [ $i -lt $count ]; then
            echo "${patches[i]}: already applied"
        else
            patch -p1 -s -f -N -d "$site" < "$here/${patches[i]}"
            echo "${patches[i]}: applied"
        fi
    done
else
    # The peeling above was the rehearsal.
    for ((i=${#patches[@]}-1; i>=0; i--)); do
        if [ $i -lt $count ]; then
            patch -p1 -R -s -f -E -d "$site" < "$here/${patches[i]}"
            echo "${patches[i]}: reversed"
        else
            echo "${patches[i]}: not applied"
        fi
    done
fi
# stevedore caches entry points by the mtime of the sys.path entries: make
# it see the (un)registered "placement" extra spec validators.
touch "$site"
