#!/usr/bin/env bash
# ResNet-50 v1.5 training on the CPU backend from real JPEGs against synthetic data: does the
# loader keep the step fed when it has cores of its own? Both runs use --threads T compute
# threads pinned to their own cores (--pin-threads); the real-data run's loader gets the
# remaining cores (--loader-threads, default: all cores minus T). The dataset is the
# synthetic ImageNet-like one (dlperf-make-dataset, 500x375 JPEGs, RandomResizedCrop to the
# image size), in the page cache.
#
# Method: as bench/loader_vs_torchvision.sh: fresh processes, --warmup iterations dropped,
# throughput as dlperf-train prints it (samples in the window / its wall time), the two
# alternating within each repeat (order reversed every other repeat), medians over --repeats,
# and the ratio real / synthetic. The data wait per step is printed too. Measurements during
# which other processes used more than 10% of the CPUs are flagged.
#
# Usage: bench/real_vs_synthetic.sh [--quick] [options]   (--help lists them)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DLPERF_TRAIN=${DLPERF_TRAIN:-build/src/dlperf-train}
DLPERF_MAKE_DATASET=${DLPERF_MAKE_DATASET:-build/src/dlperf-make-dataset}
[[ $DLPERF_TRAIN = /* ]] || DLPERF_TRAIN="$ROOT/$DLPERF_TRAIN"
[[ $DLPERF_MAKE_DATASET = /* ]] || DLPERF_MAKE_DATASET="$ROOT/$DLPERF_MAKE_DATASET"

usage() {
  cat <<EOF
Usage: $0 [options]
  --precision P      fp32 or bf16 (default fp32)
  --threads T        compute threads (default: cores - 1, at least 1)
  --loader-threads L loader threads of the real-data run (default: cores - T, at least 1)
  --batch-size B     (default 32; --quick 16)
  --image-size S     (default 224; --quick 128)
  --iterations N     measured iterations per run (default 8; --quick 4)
  --warmup W         dropped iterations first (default 2; --quick 1)
  --repeats R        interleaved repeats; medians (default 3)
  --data DIR         an ImageNet-style folder tree instead of the generated one
  --quick            a smaller, faster configuration; explicit options win
  --log-dir DIR      keep each run's output and results.tsv there
  -h, --help         this text
EOF
}
die_usage() { echo "error: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }
precision="" threads="" loader="" batch="" image="" iterations="" warmup="" repeats="" data="" quick=0 log_dir=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --precision)      need_value "$@"; precision=$2; shift 2 ;;
    --threads)        need_value "$@"; threads=$2; shift 2 ;;
    --loader-threads) need_value "$@"; loader=$2; shift 2 ;;
    --batch-size)     need_value "$@"; batch=$2; shift 2 ;;
    --image-size)     need_value "$@"; image=$2; shift 2 ;;
    --iterations)     need_value "$@"; iterations=$2; shift 2 ;;
    --warmup)         need_value "$@"; warmup=$2; shift 2 ;;
    --repeats)        need_value "$@"; repeats=$2; shift 2 ;;
    --data)           need_value "$@"; data=$2; shift 2 ;;
    --log-dir)        need_value "$@"; log_dir=$2; shift 2 ;;
    --quick)          quick=1; shift ;;
    -h|--help)        usage; exit 0 ;;
    *)                die_usage "unknown option '$1'" ;;
  esac
done
cores=$(nproc)
if [[ $quick = 1 ]]; then : "${batch:=16}" "${image:=128}" "${iterations:=4}" "${warmup:=1}"; fi
: "${precision:=fp32}" "${threads:=$((cores > 1 ? cores - 1 : 1))}" "${batch:=32}" "${image:=224}" "${iterations:=8}"
: "${warmup:=2}" "${repeats:=3}"
: "${loader:=$((cores - threads > 0 ? cores - threads : 1))}"
[[ $precision =~ ^(fp32|bf16)$ ]] || die_usage "--precision accepts fp32 or bf16 (got '$precision')"
for v in "$threads" "$loader" "$batch" "$image" "$iterations" "$repeats"; do [[ $v =~ ^[0-9]+$ && $v -gt 0 ]] || die_usage "'$v' must be a positive integer"; done
[[ $warmup =~ ^[0-9]+$ ]] || die_usage "--warmup must be an integer >= 0"
for tool in "$DLPERF_TRAIN" "$DLPERF_MAKE_DATASET"; do
  [[ -x $tool ]] || { echo "error: $tool not found: build dlperf first (cmake --build build)" >&2; exit 2; }
done
if [[ -z $data ]]; then
  data=${DLPERF_BENCH_DATA:-${TMPDIR:-/tmp}/dlperf-bench-imagenet-like}
  if [[ ! -e $data/.made-10-x-100-500x375 ]]; then
    echo "generating 1000 synthetic ImageNet-like JPEGs in $data ..."
    rm -rf "$data"
    "$DLPERF_MAKE_DATASET" --output "$data" --classes 10 --images-per-class 100 --width 500 --height 375 --layout folder >/dev/null
    touch "$data/.made-10-x-100-500x375"
  fi
fi
find "$data" -type f -iname '*.jp*g' -exec cat {} + >/dev/null
if [[ -z $log_dir ]]; then log_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-real-vs-synthetic.XXXXXX"); else mkdir -p "$log_dir"; fi
results="$log_dir/results.tsv"
printf 'data\trepeat\tsamples_per_s\tdata_wait_ms\tstep_ms\tother_cpu_percent\n' >"$results"

echo "ResNet-50 v1.5, CPU backend, $precision: real JPEGs vs synthetic data"
echo "  machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $cores cores; $threads compute threads (pinned),"\
     "$loader loader threads for real data"
echo "  batch $batch, ${image}x${image}; $warmup warm-up + $iterations measured iterations per run; $repeats interleaved repeats; medians"
echo "  data: $data; logs: $log_dir"
cpu_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
child_jiffies() { sed 's/.*) //' "/proc/$$/stat" | awk '{ print $14 + $15 }'; }
contended=0
failed=0
run_one() {  # synthetic|real REPEAT
  local kind=$1 rep=$2 log value wait b0 t0 c0 b1 t1 c1 other flag=""
  log="$log_dir/${kind}_r${rep}.log"
  cmd=("$DLPERF_TRAIN" --model resnet50 --backend cpu --precision "$precision" --batch-size "$batch" --image-size "$image"
       --iterations $((warmup + iterations)) --warmup "$warmup" --threads "$threads" --pin-threads --print-every 0)
  [[ $kind = synthetic ]] || cmd+=(--data "$data" --loader-threads "$loader")
  echo "${cmd[*]}" >"$log"
  read -r b0 t0 < <(cpu_jiffies); c0=$(child_jiffies)
  if "${cmd[@]}" >>"$log" 2>&1; then
    read -r b1 t1 < <(cpu_jiffies); c1=$(child_jiffies)
    value=$(grep -oE 'throughput [0-9.]+ samples/s' "$log" | awk '{print $2}') || true
  else
    value=""
  fi
  if [[ -z $value ]]; then echo "  [repeat $rep] $kind: FAILED (see $log)" >&2; failed=1; return; fi
  wait=$(grep -oE 'data wait median [0-9.]+ ms' "$log" | awk '{print $4}') || true
  step=$(grep -oE 'median step [0-9.]+ ms' "$log" | awk '{print $3}') || true
  other=$((t1 > t0 ? 100 * (b1 - b0 - (c1 - c0)) / (t1 - t0) : 0)); ((other >= 0)) || other=0
  if ((other > 10)); then flag="  <- other processes used ${other}% of the CPUs"; contended=$((contended + 1)); fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$kind" "$rep" "$value" "${wait:-0}" "${step:-0}" "$other" >>"$results"
  printf '  [repeat %s] %-9s %8.2f samples/s%s%s\n' "$rep" "$kind" "$value" "${wait:+, data wait $wait ms}" "$flag"
}
for ((rep = 1; rep <= repeats; rep++)); do
  if ((rep % 2 == 0)); then run_one real "$rep"; run_one synthetic "$rep"; else run_one synthetic "$rep"; run_one real "$rep"; fi
done
echo
awk -F'\t' '
  NR > 1 { n[$1]++; v[$1, n[$1]] = $3; if ($1 == "real" && $5 > 0) { share[++ns] = $4 / $5 } }
  function median(k,   i, j, t, a, m) {
    m = n[k]; if (m == 0) return -1
    for (i = 1; i <= m; i++) a[i] = v[k, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    s = median("synthetic"); r = median("real")
    printf "| data | samples/s (median) |\n|---|---|\n| synthetic | %.2f |\n| real JPEGs | %.2f |\n", s, r
    if (s > 0 && r > 0) printf "real / synthetic = %.3f (%+.1f%%)\n", r / s, 100 * (r / s - 1)
    # What real data adds to a step, measured inside each run: robust to a busy machine.
    for (i = 2; i <= ns; i++) { t = share[i]; for (j = i - 1; j >= 1 && share[j] > t; j--) share[j + 1] = share[j]; share[j + 1] = t }
    if (ns > 0) printf "data wait of the real-data runs: median %.3f%% of the median step\n", 100 * share[int((ns + 1) / 2)]
  }' "$results"
((contended == 0)) || echo "WARNING: $contended measurement(s) ran alongside other work: rerun on an idle machine for the record."
exit $failed
