#!/usr/bin/env bash
# The image input pipeline alone: dlperf-train --loader-only against torchvision's ImageFolder
# + DataLoader, side by side in one invocation, on the same synthetic ImageNet-like dataset.
#
# Same work on both sides: JPEGs of 500x375 (dlperf-make-dataset, ~100 KB each, 4:2:0,
# quality 90), RandomResizedCrop(224, scale 0.08-1, ratio 3/4-4/3, antialiased bilinear),
# horizontal flip, ImageNet normalisation, float32 NCHW batches of 32; the same number of
# workers (dlperf loader threads, torchvision DataLoader worker processes); files in the page
# cache for both (read once before the first measurement), so this compares decoding and
# augmentation, not the disk.
#
# Method. Each measurement is a fresh process: --warmup untimed batches, then --batches timed
# ones; images/s = batches * batch / elapsed, as each tool prints it. The tools alternate
# within each repeat (order reversed on every other repeat, so a drift of the machine favours
# neither), and the table gives the median over --repeats per tool and worker count and the
# ratio of the medians. Each measurement also records the CPU that other processes used
# meanwhile and is flagged above 10%: on a shared machine the ratio is the figure to trust,
# the absolute rates less so.
#
# Usage: bench/loader_vs_torchvision.sh [--quick] [options]   (--help lists them)
# Exit status: 0 all measurements succeeded; 1 one failed (its log is named); 2 bad usage or a
# missing tool.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=/usr/bin/python3                       # Debian's Python: python3-torchvision lives there
TV_LOADER="$ROOT/bench/torchvision_loader.py"
DLPERF_TRAIN=${DLPERF_TRAIN:-build/src/dlperf-train}
DLPERF_MAKE_DATASET=${DLPERF_MAKE_DATASET:-build/src/dlperf-make-dataset}
[[ $DLPERF_TRAIN = /* ]] || DLPERF_TRAIN="$ROOT/$DLPERF_TRAIN"
[[ $DLPERF_MAKE_DATASET = /* ]] || DLPERF_MAKE_DATASET="$ROOT/$DLPERF_MAKE_DATASET"

usage() {
  cat <<EOF
Usage: $0 [options]
  --workers LIST     comma list of worker counts (default: 1,N with N the number of cores)
  --batch-size B     images per batch (default 32)
  --image-size S     output size (default 224)
  --batches N        timed batches per measurement (default 40; --quick 15)
  --warmup W         untimed batches first (default 5; --quick 3)
  --repeats R        interleaved repeats; medians are reported (default 5; --quick 3)
  --data DIR         an ImageNet-style folder tree to use instead of the generated one
  --images N         generated dataset: images (default 1000: 10 classes x 100, 500x375)
  --quick            fewer batches and repeats; explicit options win
  --log-dir DIR      keep each run's output and results.tsv there (default: a new temporary dir)
  -h, --help         this text
Environment: DLPERF_TRAIN, DLPERF_MAKE_DATASET (default build/src/..., relative to the repository
root); the generated dataset is cached in \${DLPERF_BENCH_DATA:-\${TMPDIR:-/tmp}/dlperf-bench-imagenet-like}.
EOF
}
die_usage() { echo "error: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }

workers="" batch="" image="" batches="" warmup="" repeats="" data="" images="" quick=0 log_dir=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers)    need_value "$@"; workers=$2; shift 2 ;;
    --batch-size) need_value "$@"; batch=$2; shift 2 ;;
    --image-size) need_value "$@"; image=$2; shift 2 ;;
    --batches)    need_value "$@"; batches=$2; shift 2 ;;
    --warmup)     need_value "$@"; warmup=$2; shift 2 ;;
    --repeats)    need_value "$@"; repeats=$2; shift 2 ;;
    --data)       need_value "$@"; data=$2; shift 2 ;;
    --images)     need_value "$@"; images=$2; shift 2 ;;
    --log-dir)    need_value "$@"; log_dir=$2; shift 2 ;;
    --quick)      quick=1; shift ;;
    -h|--help)    usage; exit 0 ;;
    *)            die_usage "unknown option '$1'" ;;
  esac
done
if [[ $quick = 1 ]]; then : "${batches:=15}" "${warmup:=3}" "${repeats:=3}"; fi
: "${workers:=1,$(nproc)}" "${batch:=32}" "${image:=224}" "${batches:=40}" "${warmup:=5}" "${repeats:=5}" "${images:=1000}"
positive() { [[ $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || die_usage "$1 must be a positive integer (got '$2')"; }
positive --batch-size "$batch"; positive --image-size "$image"; positive --batches "$batches"; positive --repeats "$repeats"
positive --images "$images"
[[ $warmup =~ ^[0-9]+$ ]] || die_usage "--warmup must be an integer >= 0 (got '$warmup')"
IFS=, read -r -a WORKERS <<<"$workers"
for w in "${WORKERS[@]}"; do positive --workers "$w"; done

if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
  echo "error: torchvision is not importable by $PYTHON. Install it with:" >&2
  echo "  apt-get install -y python3-torch python3-torchvision" >&2
  exit 2
fi
for tool in "$DLPERF_TRAIN" "$DLPERF_MAKE_DATASET"; do
  if [[ ! -x $tool ]]; then
    echo "error: $tool not found. Build it from the repository root with:" >&2
    echo "  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j$(nproc)" >&2
    exit 2
  fi
done

if [[ -z $data ]]; then
  data=${DLPERF_BENCH_DATA:-${TMPDIR:-/tmp}/dlperf-bench-imagenet-like}
  classes=10; per_class=$(((images + classes - 1) / classes))
  stamp="$data/.made-$classes-x-$per_class-500x375"
  if [[ ! -e $stamp ]]; then
    echo "generating $((classes * per_class)) synthetic ImageNet-like JPEGs in $data ..."
    rm -rf "$data"
    "$DLPERF_MAKE_DATASET" --output "$data" --classes $classes --images-per-class $per_class --width 500 --height 375 \
      --layout folder >/dev/null
    touch "$stamp"
  fi
fi
[[ -d $data ]] || die_usage "--data $data is not a folder"
find "$data" -type f -iname '*.jp*g' -exec cat {} + >/dev/null  # into the page cache for both tools

if [[ -z $log_dir ]]; then log_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-loader-bench.XXXXXX"); else mkdir -p "$log_dir"; fi
results="$log_dir/results.tsv"
printf 'tool\tworkers\trepeat\timages_per_s\tother_cpu_percent\n' >"$results"

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
read -r n_files avg_kb < <(find "$data" -type f -iname '*.jp*g' -printf '%s\n' | awk '{s += $1; n++} END {print n, int(s / (n ? n : 1) / 1024)}')
echo "Image loader: dlperf-train --loader-only vs torchvision ImageFolder + DataLoader"
echo "  data: $data ($n_files JPEGs, ${avg_kb} KiB on average); batch $batch, ${image}x${image}, float32 NCHW"
echo "  machine: ${cpu:-unknown CPU}, $(nproc) cores; workers: ${WORKERS[*]} (dlperf threads = DataLoader processes)"
echo "  per measurement: $warmup warm-up + $batches timed batches (fresh process); $repeats interleaved repeats; medians"
echo "  torchvision $("$PYTHON" -c 'import torchvision; print(torchvision.__version__)'); logs: $log_dir"

# Contention, measured rather than assumed: CPU time all processes used (/proc/stat) minus what
# the measured process tree used (this shell's reaped children), as a share of all CPUs.
cpu_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
child_jiffies() { sed 's/.*) //' "/proc/$$/stat" | awk '{ print $14 + $15 }'; }
read -r b0 t0 < <(cpu_jiffies); sleep 2; read -r b1 t1 < <(cpu_jiffies)
busy=$((t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0))
echo "  CPU busy before start: ${busy}% (2 s sample); load average $(cut -d' ' -f1-3 /proc/loadavg)"
((busy <= 10)) || echo "  WARNING: the machine is not idle; other work competes with the measured one."
contended=0
failed=0

run_one() {  # TOOL WORKERS REPEAT
  local tool=$1 w=$2 rep=$3 log value b0 t0 c0 b1 t1 c1 other flag=""
  log="$log_dir/${tool}_w${w}_r${rep}.log"
  if [[ $tool = dlperf ]]; then
    cmd=("$DLPERF_TRAIN" --loader-only --data "$data" --batch-size "$batch" --image-size "$image" --precision fp32
         --loader-threads "$w" --iterations $((warmup + batches)) --warmup "$warmup")
  else
    cmd=("$PYTHON" "$TV_LOADER" --data "$data" --batch-size "$batch" --image-size "$image" --workers "$w"
         --batches "$batches" --warmup "$warmup")
  fi
  echo "${cmd[*]}" >"$log"
  read -r b0 t0 < <(cpu_jiffies); c0=$(child_jiffies)
  if "${cmd[@]}" >>"$log" 2>&1; then
    read -r b1 t1 < <(cpu_jiffies); c1=$(child_jiffies)
    value=$(grep -oE '(summary: loader|throughput) [0-9.]+ images/s' "$log" | tail -1 | grep -oE '[0-9.]+ images' | awk '{print $1}') || true
  else
    value=""
  fi
  if [[ -z $value ]]; then
    echo "  [repeat $rep] $tool $w workers: FAILED (see $log)" >&2; tail -5 "$log" | sed 's/^/    /' >&2
    failed=1; return
  fi
  other=$((t1 > t0 ? 100 * (b1 - b0 - (c1 - c0)) / (t1 - t0) : 0)); ((other >= 0)) || other=0
  if ((other > 10)); then flag="  <- other processes used ${other}% of the CPUs"; contended=$((contended + 1)); fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$w" "$rep" "$value" "$other" >>"$results"
  printf '  [repeat %s] %-11s %2s workers %10.1f images/s%s\n' "$rep" "$tool" "$w" "$value" "$flag"
}

order=()
for w in "${WORKERS[@]}"; do order+=("dlperf $w" "torchvision $w"); done
# shellcheck disable=SC2086  # "tool workers", split on purpose
for ((rep = 1; rep <= repeats; rep++)); do
  if ((rep % 2 == 0)); then for ((i = ${#order[@]} - 1; i >= 0; i--)); do run_one ${order[i]} "$rep"; done
  else for item in "${order[@]}"; do run_one $item "$rep"; done; fi
done

echo
awk -F'\t' -v ws="${WORKERS[*]}" '
  NR > 1 { k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $4 }
  function median(k,   i, j, t, a, m) {
    m = n[k]; if (m == 0) return -1
    for (i = 1; i <= m; i++) a[i] = v[k, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "| workers | dlperf images/s | torchvision images/s | dlperf / torchvision |\n|---|---|---|---|\n"
    nw = split(ws, W, " ")
    for (i = 1; i <= nw; i++) {
      d = median("dlperf" SUBSEP W[i]); t = median("torchvision" SUBSEP W[i])
      printf "| %s | %s | %s | %s |\n", W[i], d < 0 ? "failed" : sprintf("%.1f", d), t < 0 ? "failed" : sprintf("%.1f", t),
             (d > 0 && t > 0) ? sprintf("%.2fx", d / t) : "n/a"
    }
  }' "$results"
echo "(medians over $repeats repeats; raw values in $results)"
if ((contended > 0 || busy > 10)); then
  echo "WARNING: $contended measurement(s) ran alongside other work (CPUs ${busy}% busy before start): absolute rates are" \
       "unreliable, the ratios less so; rerun on an idle machine for the record."
fi
exit $failed
