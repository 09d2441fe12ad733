#!/usr/bin/env bash
# Data-parallel scaling on one machine, the DLPerf way: ResNet-50 v1.5 (full depth) with
# 1 rank x 1 thread and 2 ranks x 1 thread (each rank pinned to its own core), repeats
# interleaved so both see the same machine noise, every run appended to one results file,
# then dlperf-reduce: median samples/s, speedup, scaling efficiency = speedup / ranks, and
# the share of communication time hidden behind backward.
#   bench/scaling_bench.sh [BUILD_DIR]    env: IMAGE=128 BATCH=16 ITERS=40 WARMUP=10 REPEATS=3 RESULTS=...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
train=$build/src/dlperf-train
reduce=$build/analysis/dlperf-reduce
[ -x "$train" ] || { echo "no $train: build first (cmake --build $build --target dlperf-train dlperf-reduce)" >&2; exit 2; }
image=${IMAGE:-128} batch=${BATCH:-16} iters=${ITERS:-40} warmup=${WARMUP:-10} repeats=${REPEATS:-3}
results=${RESULTS:-$(mktemp -d)/scaling.h5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--model resnet50 --batch-size "$batch" --image-size "$image" --iterations "$iters" --warmup "$warmup"
        --threads 1 --pin-threads --print-every 0 --output "$results")
echo "ResNet-50 v1.5, ${image}x${image}, batch $batch per rank, $iters iterations ($warmup warm-up), $repeats repeats -> $results"
for r in $(seq 0 $((repeats - 1))); do
  mpirun -np 1 --bind-to none "$train" "${common[@]}" --repeat-index "$r" | grep summary
  mpirun -np 2 --oversubscribe --bind-to none "$train" "${common[@]}" --repeat-index "$r" | grep summary
done
"$reduce" "$results" --warmup "$warmup" --window "$((iters - warmup))"
