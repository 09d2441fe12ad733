#!/usr/bin/env bash
# The main job on a fresh Debian 12 or 13 machine, about 10 minutes on 2 cores: install what is
# missing, configure, build, then benchmark ResNet-50 v1.5 (full depth, CPU backend,
# synthetic data) the DLPerf way at a size that fits a laptop: 1 rank and 2 MPI ranks,
# 3 repeated runs each, every run appended to results.h5, and dlperf-reduce prints the
# throughput and scaling table.
#   scripts/quickstart.sh [BUILD_DIR]          (environment: IMAGE, BATCH, ITERS, WARMUP, REPEATS)
# It builds every program README.md goes on to use (dlperf-train, dlperf-reduce, dlperf-comm,
# dlperf-make-dataset, dlperf-jobs) into BUILD_DIR (default: build/ in the checkout).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/quickstart.sh [BUILD_DIR]   (environment: IMAGE, BATCH, ITERS, WARMUP, REPEATS, DLPERF_RESULTS)"
case ${1:-} in
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; echo "$usage"; exit 0 ;;
  -*) echo "quickstart.sh: unknown option '$1'; $usage" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "quickstart.sh: one build folder at most; $usage" >&2; exit 2; }
build=${1:-$root/build}
image=${IMAGE:-128} batch=${BATCH:-16} iters=${ITERS:-30} warmup=${WARMUP:-10} repeats=${REPEATS:-3}

"$root/scripts/setup-debian.sh"
# The CPU benchmark needs no CUDA backend: leave it out here to keep the build short
# (scripts/run-tests.sh builds and checks it).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLPERF_CUDA=OFF -DDLPERF_BUILD_TESTS=OFF >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep -E '^-- +(dlperf|  )' "$build.configure.log" || true
cmake --build "$build" -j"$(nproc)" --target dlperf-train dlperf-reduce dlperf-comm dlperf-make-dataset dlperf-jobs

results=${DLPERF_RESULTS:-$root/results.h5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # containers often run as root
# On the CPU backend a "device" is a rank: here one pinned core each, so the speedup of 2 ranks
# over 1 is DLPerf's speedup of 2 devices over 1.
common=(--model resnet50 --backend cpu --precision fp32 --batch-size "$batch" --image-size "$image"
        --iterations "$iters" --warmup "$warmup" --print-every 10 --threads 1 --pin-threads --output "$results")
for r in $(seq 0 $((repeats - 1))); do
  for n in 1 2; do
    echo "== $n rank(s) x 1 thread, repeat $r"
    mpirun -np "$n" --oversubscribe --bind-to none "$build/src/dlperf-train" "${common[@]}" --repeat-index "$r"
  done
done
"$build/analysis/dlperf-reduce" "$results"  # each run measured by its own warm-up and length
