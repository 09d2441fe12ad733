#!/usr/bin/env bash
# Benchmark of dlperf-reduce: generate RUNS synthetic runs x RANKS ranks x ITERS iterations
# (default 1,000 x 32 x 120, the issue's target "a few seconds at most") into one trace,
# then time dlperf-reduce on it REPEATS times and report the median wall time.
# Usage: bench/reduce_bench.sh [BUILD_DIR] [RUNS] [RANKS] [ITERS] [REPEATS]
set -euo pipefail
build=${1:-build}
runs=${2:-1000}
ranks=${3:-32}
iters=${4:-120}
repeats=${5:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trace="$work/bench.h5"

t0=$(date +%s.%N)
"$build/analysis/dlperf-synth-traces" "$trace" "$runs" "$ranks" "$iters"
t1=$(date +%s.%N)
echo "generated $runs runs x $ranks ranks x $iters iterations: $(du -h "$trace" | cut -f1) in $(echo "$t1 - $t0" | bc) s"

times=()
for _ in $(seq "$repeats"); do
  s=$(date +%s.%N)
  "$build/analysis/dlperf-reduce" "$trace" --csv "$work/out.csv" --json "$work/out.json" --plot "$work/out.svg" >"$work/out.md"
  e=$(date +%s.%N)
  times+=("$(echo "$e - $s" | bc)")
done
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
echo "dlperf-reduce (markdown + csv + json + svg), $repeats runs: ${times[*]} s; median $median s"
