#!/usr/bin/env bash
# A tiny dlperf-train run end to end: it trains, prints progress and the summary, appends a
# complete run to a results file twice (two repeats), and dlperf-reduce reads them back.
set -euo pipefail
train=$1
reduce=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--batch-size 4 --image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 --num-classes 10
      --iterations 6 --warmup 2 --print-every 3 --threads 1 --output "$dir/r.h5")
"$train" "${args[@]}" --repeat-index 0 | tee "$dir/log1"
"$train" "${args[@]}" --repeat-index 1 >"$dir/log2"
grep -q 'summary: throughput [0-9.]* samples/s' "$dir/log1"
grep -q 'iter     3/6' "$dir/log1"
"$reduce" "$dir/r.h5" --warmup 2 --window 4 | tee "$dir/table"
grep -Eq '^\| 1 \| 1 \| 4 \| [0-9.]+ \| 1\.00 \|' "$dir/table"
grep -q '| 1 | 1 | 2 |' "$dir/table"  # two runs in the repeats table
# Issue 27 item 4: with no option, each run is measured by its own warm-up (2) and length (6).
"$reduce" "$dir/r.h5" >"$dir/own"
grep -q "samples in iterations 3-6 (each run's own recorded warm-up and length)" "$dir/own"
grep -Eq '^\| 1 \| 1 \| 4 \| [0-9.]+ \| 1\.00 \|' "$dir/own"
# Issue 27 item 1: each rank's binding is in the trace (schema 1.3): its cores and their NUMA node.
h5dump -d /runs/run_000001/rank_binding "$dir/r.h5" | grep -Eq '"cpus [0-9][0-9,-]* \(numa [0-9?,]+\)' 
echo "tiny run ok"
