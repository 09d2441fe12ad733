#!/usr/bin/env bash
# Issue 27 item 11, the class of faults at the edges of every program:
#  * standard output that cannot be written (> /dev/full) is exit 3 with one line on stderr for
#    dlperf-train (without --output its summary is the run's only record), dlperf-comm,
#    dlperf-make-dataset and dlperf-jobs --list, as dlperf-reduce already did;
#  * a stray positional word is refused (exit 2, one line) by each;
#  * dlperf-comm -e that overflows 64 bits, or that no node could hold, is one line, exit 2;
#  * every program's --help and --version: exit 0, or 3 with one line when nothing reached
#    standard output (dlperf-comm, dlperf-reduce and dlperf-jobs exited 0 on /dev/full).
# Usage: output_faults_test.sh DLPERF_TRAIN DLPERF_COMM DLPERF_MAKE_DATASET DLPERF_JOBS SOURCE_DIR DLPERF_REDUCE
set -u
train=$1 comm=$2 make=$3 jobs=$4 src=$5 reduce=$6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect CODE MENTION CMD...: exit CODE, exactly one line on stderr containing MENTION.
expect() {
  local code=$1 mention=$2 rc
  shift 2
  "$@" >"$dir/stdout" 2>"$dir/stderr"
  rc=$?
  if [ "$rc" -ne "$code" ] || [ "$(wc -l <"$dir/stderr")" -ne 1 ] || ! grep -qF -- "$mention" "$dir/stderr"; then
    fail "($*): exit $rc (want $code), stderr: $(head -c 600 "$dir/stderr")"
  else
    echo "ok   ($*): $(cat "$dir/stderr")"
  fi
}
# expect_full CODE MENTION CMD...: the same with standard output on /dev/full.
expect_full() {
  local code=$1 mention=$2 rc
  shift 2
  "$@" >/dev/full 2>"$dir/stderr.all"
  rc=$?
  grep -v -e ': WARNING: ' -e ': 1 rank: nothing crosses a link' "$dir/stderr.all" >"$dir/stderr"  # notes that are not the fault
  if [ "$rc" -ne "$code" ] || [ "$(wc -l <"$dir/stderr")" -ne 1 ] || ! grep -qF -- "$mention" "$dir/stderr"; then
    fail "($* > /dev/full): exit $rc (want $code), stderr: $(head -c 600 "$dir/stderr")"
  else
    echo "ok   ($* > /dev/full): $(cat "$dir/stderr")"
  fi
}

if [ ! -w /dev/full ]; then echo "no /dev/full here: skipped the full-device checks"; else
  tiny=(--image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 --num-classes 10 --threads 1 --batch-size 2 --iterations 2 --warmup 1)
  expect_full 3 "cannot write to standard output: write error (full disk or closed pipe?) (the summary was the run's only record" "$train" "${tiny[@]}"
  expect_full 3 "cannot write to standard output" "$comm" -b 8 -e 64 -n 1 -w 0
  expect_full 3 "cannot write to standard output: No space left on device (the dataset was written)" \
    "$make" --output "$dir/ds" --classes 2 --images-per-class 2 --width 32 --height 32 --threads 1
  expect_full 3 "cannot write to standard output" "$jobs" --profile "$src/jobs/profiles/generic.ini" --matrix "$src/jobs/matrix.ini" --list
  for prog in "$train" "$comm" "$make" "$jobs" "$reduce"; do
    for opt in --help --version; do expect_full 3 "$(basename "$prog"): cannot write to standard output" "$prog" "$opt"; done
  done
fi
for prog in "$train" "$comm" "$make" "$jobs" "$reduce"; do
  name=$(basename "$prog")
  "$prog" --version >"$dir/version" 2>&1 || fail "$name --version: exit $?"
  grep -q "^$name [0-9]" "$dir/version" || fail "$name --version printed: $(head -c 200 "$dir/version")"
  "$prog" --help >"$dir/help" 2>&1 || fail "$name --help: exit $?"
  grep -q -- "--version" "$dir/help" || fail "$name --help does not list --version"
done

expect 2 "unexpected argument 'extra-word'" "$train" --iterations 2 extra-word
expect 2 "too many positional options" "$comm" -b 8 extra-word
expect 2 "too many positional options" "$make" --output "$dir/ds2" extra-word
[ -e "$dir/ds2" ] && fail "dlperf-make-dataset wrote $dir/ds2 on exit 2"
expect 2 "too many positional options" "$jobs" --profile "$src/jobs/profiles/generic.ini" --matrix "$src/jobs/matrix.ini" --list extra-word

# -e: 2^54 KiB = 2^64 B wrapped around to 1 KiB before; 2^53 KiB fits 64 bits but no node.
expect 2 "--max-bytes (-e): '18014398509481985K' is larger than 2^64 bytes" "$comm" -e 18014398509481985K
expect 2 "is larger than 2^64 bytes" "$comm" -e 99999999999999999999
expect 2 "--max-bytes (-e) 8.59e+09 GiB needs about" "$comm" -e 9007199254740992K
expect 2 "is not a size" "$comm" -e -5
expect 2 "unknown unit 'KB'" "$comm" -e 5KB
# A timeout past the watchdog's clock aborted a healthy job at its first allreduce (exit 3); an
# infinite factor measured one row; an unwritable -o was found after the whole measurement.
expect 2 "--timeout must be 1 to 604800 seconds (got 1e+10)" "$comm" -e 1K --timeout 1e10
expect 2 "--factor (-f) must be greater than 1 and finite" "$comm" -b 8 -e 1K -f inf
expect 2 "--output (-o) $dir/nodir/x.comm: its folder $dir/nodir does not exist" "$comm" -e 1K -o "$dir/nodir/x.comm"
# Every task of an srun whose --mpi plugin this MPI does not speak is a lone rank.
expect 2 "dlperf-comm: MPI started this process as a job of its own (1 rank), but its launcher started 4" \
  env SLURM_STEP_NUM_TASKS=4 "$comm" -e 1K

if [ "$failures" -eq 0 ]; then echo "all output-fault checks passed"; else echo "$failures failed"; exit 1; fi
