#!/usr/bin/env bash
# dlperf-jobs on bad input: one line on stderr naming what to fix, exit 2, nothing written
# (the output directory is not even created). A good run writes every file.
#   bad_input_test.sh DLPERF_JOBS SOURCE_DIR
set -euo pipefail
gen=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
profile=$src/jobs/profiles/generic.ini
matrix=$src/jobs/matrix.ini

# expect_bad EXPECTED_TEXT ARGS...: exit 2, one stderr line containing EXPECTED_TEXT, no output dir.
expect_bad() {
  local want=$1 rc=0
  shift
  "$gen" "$@" --output-dir "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: $* exited $rc, want 2" >&2; cat "$tmp/stderr" >&2; exit 1; fi
  if [ "$(wc -l <"$tmp/stderr")" -ne 1 ]; then echo "FAIL: $*: want one line on stderr:" >&2; cat "$tmp/stderr" >&2; exit 1; fi
  if ! grep -qF -- "$want" "$tmp/stderr"; then echo "FAIL: $*: stderr lacks '$want':" >&2; cat "$tmp/stderr" >&2; exit 1; fi
  if [ -e "$tmp/out" ]; then echo "FAIL: $*: wrote $tmp/out" >&2; exit 1; fi
  echo "ok: $(cat "$tmp/stderr")"
}
# edited COPY_NAME FILE SED_EXPR: a copy of FILE with one edit.
edited() {
  sed -e "$3" "$2" >"$tmp/$1"
  echo "$tmp/$1"
}

expect_bad "--profile is required" --matrix "$matrix"
# An unset variable: --profile "$PROFILE".
expect_bad "--profile was given an empty value" --profile "" --matrix "$matrix"
expect_bad "no-such.ini: cannot read this file" --profile "$tmp/no-such.ini" --matrix "$matrix"
expect_bad "unrecognised option '--profle'" --profle "$profile" --matrix "$matrix"
expect_bad "p1.ini:18: cpus_per_task must be an integer" --profile "$(edited p1.ini "$profile" 's/^cpus_per_task = 8$/cpus_per_task = 0/')" --matrix "$matrix"
expect_bad "time '2h' is not a Slurm time limit" --profile "$(edited p2.ini "$profile" 's/^time = 00:30:00$/time = 2h/')" --matrix "$matrix"
expect_bad "gpu_request 'gpus' is unknown" --profile "$(edited p3.ini "$profile" 's/^gpu_request = .*/gpu_request = gpus/')" --matrix "$matrix"
# sbatch refuses --signal=USR1@70000 ("Invalid --signal specification"): its limit is 65535.
expect_bad "signal_seconds must be an integer from 1 to 65535" \
  --profile "$(edited p4b.ini "$profile" 's/^signal_seconds = .*/signal_seconds = 70000/')" --matrix "$matrix"
expect_bad "signal_seconds 3600 is not less than the time limit 00:30:00" \
  --profile "$(edited p4.ini "$profile" 's/^signal_seconds = .*/signal_seconds = 3600/')" --matrix "$matrix"
expect_bad "unknown key 'modles'" --profile "$(edited p5.ini "$profile" 's/^modules = /modles = /')" --matrix "$matrix"
expect_bad "expected 'key = value'" --profile "$(edited p6.ini "$profile" 's/^partition = gpu$/partition gpu/')" --matrix "$matrix"
expect_bad "models 'resnet50' is unknown: use rn50, vgg16, bert_base, llama3_8b, llama3_2_1b" \
  --profile "$profile" --matrix "$(edited m1.ini "$matrix" 's/^models = .*/models = resnet50/')"
expect_bad "'8n8' is not a configuration" --profile "$profile" --matrix "$(edited m2.ini "$matrix" 's/^configurations = .*/configurations = 1n1g 8n8/')"
expect_bad "precision 'fp8' is unknown" --profile "$profile" --matrix "$(edited m3.ini "$matrix" 's/^precision = .*/precision = fp8/')"
expect_bad "repeats must be an integer from 1 to 1000 (got '-1')" --profile "$profile" --matrix "$(edited m4.ini "$matrix" 's/^repeats = .*/repeats = -1/')"
expect_bad "batch_per_device is missing in [vgg16]" --profile "$profile" --matrix "$(edited m5.ini "$matrix" '/^batch_per_device = 128$/d')"
# shellcheck disable=SC2016  # the $( is literal: it must be rejected, not run
expect_bad "extra_args '\$(rm' may only use" --profile "$profile" --matrix "$(edited m6.ini "$matrix" 's/^extra_args = .*/extra_args = $(rm -rf x)/')"
# extra_args go through dlperf-train's own option parser when the scripts are generated
# (issue 18 row 11), not when a queued job finally starts.
expect_bad "m7.ini:29: extra_args is refused by dlperf-train for bert_base: unrecognised option '--bogus-flag'" \
  --profile "$profile" --matrix "$(edited m7.ini "$matrix" 's/^extra_args = .*/extra_args = --seq-len 128 --bogus-flag/')"
expect_bad "extra_args is refused by dlperf-train for rn50: --seq-len does not apply to --model resnet50" \
  --profile "$profile" --matrix "$(edited m8.ini "$matrix" 's/^\[rn50\]$/[rn50]\nextra_args = --seq-len 64/')"
expect_bad "extra_args is refused by dlperf-train for vgg16: --lock-timeout must be 0 to 604800 seconds" \
  --profile "$profile" --matrix "$(edited m9.ini "$matrix" 's/^models = .*/models = vgg16\nextra_args = --lock-timeout -5/')"
# Issue 27 item 11: extra_args are checked on the exact argument list each script runs, what the
# job adds itself included (real_data's --variant); a folder as a profile; numbers that
# overflow are file:line errors, not "stoi"/"stol" (exit 3).
expect_bad "m10.ini:21: extra_args is refused by dlperf-train for rn50 with real_data = yes: option '--variant' cannot be specified more than once" \
  --profile "$profile" --matrix "$(edited m10.ini "$matrix" 's/^real_data = yes$/real_data = yes\nextra_args = --variant mine/')"
expect_bad "is a directory: give the INI file itself" --profile "$src/jobs/profiles" --matrix "$matrix"
expect_bad "is a directory: give the INI file itself" --profile "$profile" --matrix "$src/jobs"
# A file that never ends was read for ever, its memory growing without a word.
expect_bad "larger than 1 MiB: not a dlperf-jobs INI file" --profile /dev/zero --matrix "$matrix"
# A model's section while the model is out of [matrix] models: still checked.
expect_bad "unknown key 'bogus_key'" --profile "$profile" \
  --matrix "$(edited mu1.ini "$matrix" 's/^models = .*/models = rn50/; s/^cpu_batch_per_device = 32$/cpu_batch_per_device = 32\nbogus_key = 1/')"
expect_bad "batch_per_device must be an integer" --profile "$profile" \
  --matrix "$(edited mu2.ini "$matrix" 's/^models = .*/models = rn50/; s/^batch_per_device = 128$/batch_per_device = -5/')"
# A NUL in a value was written into the scripts verbatim; a byte-order mark is no error.
printf 'UCX_TLS = rc\0x\n' >"$tmp/nul.part"
cat "$profile" "$tmp/nul.part" >"$tmp/pnul.ini"
expect_bad "holds a control byte (\\x00)" --profile "$tmp/pnul.ini" --matrix "$matrix"
{ printf '\xef\xbb\xbf'; cat "$matrix"; } >"$tmp/bom.ini"
"$gen" --profile "$profile" --matrix "$tmp/bom.ini" --list >/dev/null || { echo "FAIL: a matrix with a byte-order mark" >&2; exit 1; }
# The key named is the one in the file: extra_args (inherited by the CPU jobs), not cpu_extra_args.
expect_bad ": extra_args is refused by dlperf-train for rn50" --profile "$profile" \
  --matrix "$(edited mu3.ini "$matrix" 's/^cpu_batch_per_device = 64$/cpu_batch_per_device = 64\nconfigurations =\nextra_args = --nonsense/')"
# [comm] values dlperf-comm refuses failed the job when it ran, not the generator.
expect_bad "min_bytes '1' is less than one float" --profile "$profile" --matrix "$(edited mc1.ini "$matrix" 's/^min_bytes = 8$/min_bytes = 1/')"
expect_bad "max_bytes '8' is less than min_bytes '1G'" --profile "$profile" \
  --matrix "$(edited mc2.ini "$matrix" 's/^min_bytes = 8$/min_bytes = 1G/; s/^max_bytes = 1G$/max_bytes = 8/')"
expect_bad "max_bytes '999999999G' is more than 64G" --profile "$profile" --matrix "$(edited mc3.ini "$matrix" 's/^max_bytes = 1G$/max_bytes = 999999999G/')"
expect_bad "cpu_configurations '1n1r' is one rank" --profile "$profile" --matrix "$(edited mc4.ini "$matrix" 's/^cpu_configurations = 2n2r$/cpu_configurations = 1n1r/')"
# std::stod read 0x10 as 16; a rate dlperf-reduce refuses would fail reduce.sh, not the generator.
expect_bad "link_gbps must be a number from 0 to 1e+06 (got '0x10')" --profile "$(edited pf1.ini "$profile" 's/^link_gbps = 200$/link_gbps = 0x10/')" --matrix "$matrix"
expect_bad "intra_gbps must be 0 (none) or 0.001 Gbit/s or more" --profile "$(edited pf2.ini "$profile" 's/^intra_gbps = 2400$/intra_gbps = 1e-300/')" --matrix "$matrix"
expect_bad "m11.ini:7: configurations '99999999999n1g' needs 1-4096 nodes" \
  --profile "$profile" --matrix "$(edited m11.ini "$matrix" 's/^configurations = .*/configurations = 99999999999n1g/')"
expect_bad "repeats must be an integer from 1 to 1000 (got '99999999999999999999')" \
  --profile "$profile" --matrix "$(edited m12.ini "$matrix" 's/^repeats = .*/repeats = 99999999999999999999/')"
expect_bad "repeats must be an integer from 1 to 1000 (got '5x')" --profile "$profile" --matrix "$(edited m13.ini "$matrix" 's/^repeats = .*/repeats = 5x/')"
expect_bad "time '99999999999999999999' is not a Slurm time limit" \
  --profile "$(edited p7.ini "$profile" 's/^time = 00:30:00$/time = 99999999999999999999/')" --matrix "$matrix"

# Issue 27 item 9: no default output directory (it was jobs/, the committed scripts when run
# in a checkout): without --output-dir (or --list) nothing is written, exit 2.
rc=0
(cd "$tmp" && "$gen" --profile "$profile" --matrix "$matrix" >"$tmp/stdout" 2>"$tmp/stderr") || rc=$?
if [ $rc -ne 2 ] || ! grep -q -- "--output-dir is required" "$tmp/stderr" || [ -e "$tmp/jobs" ]; then
  echo "FAIL: no --output-dir: exit $rc, $(cat "$tmp/stderr")" >&2; exit 1
fi
echo "ok: $(cat "$tmp/stderr")"

# A good run writes every file; --list names them without writing.
"$gen" --profile "$profile" --matrix "$matrix" --list >"$tmp/list"
[ ! -e "$tmp/out" ]
"$gen" --profile "$profile" --matrix "$matrix" --output-dir "$tmp/out" >/dev/null
[ "$(find "$tmp/out" -type f | wc -l)" -eq "$(wc -l <"$tmp/list")" ]
[ -z "$(find "$tmp/out" -name '.*')" ]  # no temporary files left
# A target that is a folder: refused before any script is replaced (it was renamed half-way, then
# failed with "cannot rename into place: Success").
rm -rf "$tmp/half" && mkdir -p "$tmp/half/reduce.sh"
rc=0
"$gen" --profile "$profile" --matrix "$matrix" --output-dir "$tmp/half" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
if [ $rc -ne 2 ] || ! grep -q "half/reduce.sh exists and is not a file" "$tmp/stderr" || [ "$(find "$tmp/half" -type f | wc -l)" -ne 0 ]; then
  echo "FAIL: a folder named reduce.sh: exit $rc, $(cat "$tmp/stderr"), files: $(find "$tmp/half" -type f | head -3)" >&2; exit 1
fi
echo "ok: $(cat "$tmp/stderr")"
# A folder the user may not write: one line with the reason, exit 3, nothing written (it named
# a temporary file and said "No such file or directory"). Root writes anywhere, so this runs as
# nobody, where the build tree lets nobody run the program.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null &&
  setpriv --reuid=65534 --regid=65534 --clear-groups "$gen" --version >/dev/null 2>&1; then
  chmod 755 "$tmp" && mkdir "$tmp/locked" && cp "$profile" "$matrix" "$tmp/" && chmod 644 "$tmp"/*.ini
  rc=0
  setpriv --reuid=65534 --regid=65534 --clear-groups "$gen" --profile "$tmp/generic.ini" --matrix "$tmp/matrix.ini" \
    --output-dir "$tmp/locked" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  if [ $rc -ne 3 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] ||
    ! grep -q "locked: cannot write into the output directory: Permission denied" "$tmp/stderr" || [ -n "$(ls -A "$tmp/locked")" ]; then
    echo "FAIL: an unwritable --output-dir: exit $rc, $(cat "$tmp/stderr")" >&2; exit 1
  fi
  echo "ok: $(cat "$tmp/stderr")"
else
  echo "skip: an unwritable --output-dir needs root and setpriv, and a build tree that uid 65534 may run"
fi
"$gen" --version | grep -q '^dlperf-jobs '
echo "bad input ok"
