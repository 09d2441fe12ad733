#!/usr/bin/env bash
# The committed jobs/ must be exactly what dlperf-jobs writes from jobs/profiles/generic.ini
# and jobs/matrix.ini: regenerate into a temporary directory and compare file by file, and
# find no generated-looking script in jobs/ that the generator no longer writes.
#   committed_scripts_test.sh DLPERF_JOBS SOURCE_DIR
set -euo pipefail
gen=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$gen" --profile "$src/jobs/profiles/generic.ini" --matrix "$src/jobs/matrix.ini" --output-dir "$tmp/jobs" >/dev/null
fix="regenerate them: dlperf-jobs --profile jobs/profiles/generic.ini --matrix jobs/matrix.ini --output-dir jobs"
bad=0
for f in "$tmp"/jobs/*; do
  name=$(basename "$f")
  if [ ! -f "$src/jobs/$name" ]; then
    echo "jobs/$name is missing" >&2
    bad=1
  elif ! diff -u "$src/jobs/$name" "$f" >"$tmp/diff"; then
    echo "jobs/$name differs from what dlperf-jobs writes:" >&2
    head -n 40 "$tmp/diff" >&2
    bad=1
  elif [ ! -x "$src/jobs/$name" ]; then
    echo "jobs/$name is not executable" >&2
    bad=1
  fi
done
for f in "$src"/jobs/*.sh; do
  name=$(basename "$f")
  [ -f "$tmp/jobs/$name" ] || { echo "jobs/$name is not generated from the committed profile and matrix: remove it" >&2; bad=1; }
done
if [ $bad -ne 0 ]; then
  echo "the committed job scripts are stale; $fix" >&2
  exit 1
fi
# Every script is valid bash (and clean under shellcheck where it is installed).
for f in "$src"/jobs/*.sh; do bash -n "$f"; done
if command -v shellcheck >/dev/null; then shellcheck "$src"/jobs/*.sh; fi
echo "$(find "$tmp/jobs" -type f | wc -l) committed job files match the generator"
