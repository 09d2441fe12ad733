#!/usr/bin/env bash
# VGG16 training throughput: dlperf-train against PyTorch, side by side in one invocation.
#
# Same machine, same threads (OMP_NUM_THREADS and torch.set_num_threads), same shapes (batch 16,
# 224x224, 1000 classes by default), synthetic data, the same recipe on both sides: SGD with
# momentum 0.9, weight decay 5e-4 on weights only, no label smoothing, classifier dropout 0.5
# (torchvision's vgg16 and dlperf's --model vgg16).
# Precisions fp32 and bf16 (PyTorch: torch.autocast('cpu', dtype=torch.bfloat16)); PyTorch in both
# memory formats (NCHW and channels_last), since either may be the faster one.
#
# Method. Every measurement is a fresh process that runs --warmup untimed training steps, then
# --iterations timed ones (monotonic clock around whole steps: forward, backward, optimizer);
# throughput = batch * iterations / elapsed, as each tool prints it (`throughput X samples/s`).
# The tools are interleaved within each repeat (the order reversed on every other repeat, so a slow
# drift of the machine does not favour one tool), and the table reports the median over --repeats of
# each (tool, precision, format), and the ratio dlperf median / best PyTorch median per precision.
# Each measurement also records how much CPU other processes took meanwhile, and is flagged when
# that exceeds 10% of the CPUs (the machine must be otherwise idle for the numbers to mean much).
#
# Usage: bench/vgg16_vs_pytorch.sh [--quick] [--pytorch-only] [options]   (--help lists them)
# Exit status: 0 all measurements succeeded; 1 one failed (its log is named); 2 bad usage or a
# missing tool (dlperf-train not built, PyTorch not installed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=/usr/bin/python3                       # Debian's Python: python3-torch lives there
PYTORCH_TRAIN="$ROOT/bench/pytorch_train.py"
DLPERF_TRAIN=${DLPERF_TRAIN:-build/src/dlperf-train}
[[ $DLPERF_TRAIN = /* ]] || DLPERF_TRAIN="$ROOT/$DLPERF_TRAIN"

usage() {
  cat <<EOF
Usage: $0 [options]
  --batch-size B     per-step batch (default 16; --quick 16)
  --image-size S     square input size, a multiple of 32 (default 224; --quick 64)
  --num-classes C    classes (default 1000)
  --iterations N     measured training steps per measurement (default 5; --quick 3)
  --warmup W         untimed training steps first (default 2; --quick 1)
  --threads T        OMP_NUM_THREADS and torch.set_num_threads (default 2)
  --repeats R        interleaved repeats; medians are reported (default 3)
  --precisions LIST  comma list of fp32,bf16 (default fp32,bf16)
  --formats LIST     PyTorch memory formats, comma list of nchw,channels_last (default both)
  --quick            small, fast configuration (image 64, 3 iterations, 1 warm-up); explicit
                     options win over it whatever their order
  --pytorch-only     measure PyTorch only (no dlperf-train needed)
  --log-dir DIR      keep each run's output and results.tsv there (default: a new temporary dir)
  -h, --help         this text
Environment: DLPERF_TRAIN (default build/src/dlperf-train, relative to the repository root).
EOF
}

die_usage() { echo "error: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }

batch="" image="" classes="" iterations="" warmup="" threads="" repeats=""
precisions="" formats="" quick=0 pytorch_only=0 log_dir=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch-size)   need_value "$@"; batch=$2; shift 2 ;;
    --image-size)   need_value "$@"; image=$2; shift 2 ;;
    --num-classes)  need_value "$@"; classes=$2; shift 2 ;;
    --iterations)   need_value "$@"; iterations=$2; shift 2 ;;
    --warmup)       need_value "$@"; warmup=$2; shift 2 ;;
    --threads)      need_value "$@"; threads=$2; shift 2 ;;
    --repeats)      need_value "$@"; repeats=$2; shift 2 ;;
    --precisions)   need_value "$@"; precisions=$2; shift 2 ;;
    --formats)      need_value "$@"; formats=$2; shift 2 ;;
    --log-dir)      need_value "$@"; log_dir=$2; shift 2 ;;
    --quick)        quick=1; shift ;;
    --pytorch-only) pytorch_only=1; shift ;;
    -h|--help)      usage; exit 0 ;;
    *)              die_usage "unknown option '$1'" ;;
  esac
done

if [[ $quick = 1 ]]; then
  : "${image:=64}" "${iterations:=3}" "${warmup:=1}"
fi
: "${batch:=16}" "${image:=224}" "${classes:=1000}" "${iterations:=5}" "${warmup:=2}"
: "${threads:=2}" "${repeats:=3}" "${precisions:=fp32,bf16}" "${formats:=nchw,channels_last}"

positive() { [[ $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || die_usage "$1 must be a positive integer (got '$2')"; }
positive --batch-size "$batch"; positive --image-size "$image"; positive --num-classes "$classes"
positive --iterations "$iterations"; positive --threads "$threads"; positive --repeats "$repeats"
[[ $warmup =~ ^[0-9]+$ ]] || die_usage "--warmup must be an integer >= 0 (got '$warmup')"
[[ $image -ge 32 && $((image % 32)) -eq 0 ]] || die_usage "--image-size must be a multiple of 32 (VGG16's five 2x2 pools)"
IFS=, read -r -a PRECISIONS <<<"$precisions"
IFS=, read -r -a FORMATS <<<"$formats"
for p in "${PRECISIONS[@]}"; do [[ $p =~ ^(fp32|bf16)$ ]] || die_usage "--precisions accepts fp32,bf16 (got '$p')"; done
for f in "${FORMATS[@]}"; do [[ $f =~ ^(nchw|channels_last)$ ]] || die_usage "--formats accepts nchw,channels_last (got '$f')"; done

if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
  echo "error: PyTorch is not importable by $PYTHON. Install it with:" >&2
  echo "  apt-get install -y python3-torch python3-torchvision libopenblas0-pthread" >&2
  exit 2
fi
if [[ $pytorch_only = 0 && ! -x $DLPERF_TRAIN ]]; then
  echo "error: dlperf-train not found at $DLPERF_TRAIN. Build it from the repository root with:" >&2
  echo "  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j$(nproc)" >&2
  echo "or set DLPERF_TRAIN=/path/to/dlperf-train, or pass --pytorch-only." >&2
  exit 2
fi

if [[ -z $log_dir ]]; then
  log_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-bench.XXXXXX")
else
  mkdir -p "$log_dir"
fi
results="$log_dir/results.tsv"
printf 'tool\tprecision\tformat\trepeat\tsamples_per_s\tother_cpu_percent\n' >"$results"

export OMP_NUM_THREADS=$threads
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)')
echo "VGG16 training, synthetic data: batch $batch, ${image}x${image}, $classes classes; SGD momentum 0.9, wd 5e-4, dropout 0.5"
echo "  machine: ${cpu:-unknown CPU}, $(nproc) cores; threads $threads (OMP_NUM_THREADS, torch.set_num_threads)"
echo "  per measurement: $warmup warm-up + $iterations timed iterations (fresh process); $repeats interleaved repeats; medians"
echo "  PyTorch $torch_version ($PYTHON), formats: ${FORMATS[*]}"
[[ $pytorch_only = 1 ]] || echo "  dlperf: $DLPERF_TRAIN"
echo "  logs: $log_dir"

# The comparison assumes an otherwise idle machine. Contention is measured, not assumed: around
# each run, the CPU time all processes used (/proc/stat) minus the CPU time of the measured process
# (this shell's reaped-children time, /proc/$$/stat) is what other work took, as a percentage of
# the CPUs' capacity over that interval.
cpu_jiffies() {    # prints "busy total" summed over all CPUs (idle and iowait are not busy)
  awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat  # guest time is inside user
}
child_jiffies() {  # user + system time of this shell's finished children
  sed 's/.*) //' "/proc/$$/stat" | awk '{ print $14 + $15 }'
}
read -r busy0 total0 < <(cpu_jiffies); sleep 2; read -r busy1 total1 < <(cpu_jiffies)
busy=$((total1 > total0 ? 100 * (busy1 - busy0) / (total1 - total0) : 0))
echo "  CPU busy before start: ${busy}% (2 s sample); load average $(cut -d' ' -f1-3 /proc/loadavg)"
if ((busy > 10)); then
  echo "  WARNING: the machine is not idle; other work competes for the $threads threads."
fi
OTHER_LOAD_LIMIT=10   # percent of the CPUs; a measurement above it is flagged
contended=0

failed=0
# run_one TOOL PRECISION FORMAT REPEAT: one measurement, appended to results.tsv.
run_one() {
  local tool=$1 prec=$2 fmt=$3 rep=$4 log value b0 t0 c0 b1 t1 c1 other flag=""
  log="$log_dir/${tool}_${prec}_${fmt}_r${rep}.log"
  if [[ $tool = dlperf ]]; then
    # dlperf-train's --iterations counts the warm-up too; PyTorch's script counts measured ones.
    cmd=("$DLPERF_TRAIN" --model vgg16 --backend cpu --batch-size "$batch" --image-size "$image"
         --num-classes "$classes" --precision "$prec" --iterations $((warmup + iterations))
         --warmup "$warmup" --threads "$threads" --momentum 0.9 --weight-decay 5e-4 --label-smoothing 0
         --dropout 0.5)
  else
    cmd=("$PYTHON" "$PYTORCH_TRAIN" --model vgg16 --batch-size "$batch" --image-size "$image" --num-classes "$classes"
         --precision "$prec" --memory-format "$fmt" --iterations "$iterations" --warmup "$warmup"
         --threads "$threads" --momentum 0.9 --weight-decay 5e-4 --label-smoothing 0)
  fi
  echo "${cmd[*]}" >"$log"
  read -r b0 t0 < <(cpu_jiffies); c0=$(child_jiffies)
  if "${cmd[@]}" >>"$log" 2>&1; then
    read -r b1 t1 < <(cpu_jiffies); c1=$(child_jiffies)
    value=$(grep -oE 'throughput [0-9.]+ samples/s' "$log" | tail -1 | awk '{print $2}') || true
  else
    value=""
  fi
  if [[ -z $value ]]; then
    echo "  [repeat $rep] $tool $prec $fmt: FAILED (see $log)" >&2
    tail -5 "$log" | sed 's/^/    /' >&2
    failed=1
    return
  fi
  other=$((t1 > t0 ? 100 * (b1 - b0 - (c1 - c0)) / (t1 - t0) : 0))
  ((other >= 0)) || other=0
  if ((other > OTHER_LOAD_LIMIT)); then flag="  <- other processes used ${other}% of the CPUs"; contended=$((contended + 1)); fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$prec" "$fmt" "$rep" "$value" "$other" >>"$results"
  printf '  [repeat %s] %-7s %-4s %-13s %10.3f samples/s%s\n' "$rep" "$tool" "$prec" "$fmt" "$value" "$flag"
}

# The measurement order of one repeat; reversed on even repeats.
order=()
for prec in "${PRECISIONS[@]}"; do
  [[ $pytorch_only = 1 ]] || order+=("dlperf $prec -")
  for fmt in "${FORMATS[@]}"; do order+=("pytorch $prec $fmt"); done
done
# shellcheck disable=SC2086  # each order item is "tool precision format", split on purpose
for ((rep = 1; rep <= repeats; rep++)); do
  if ((rep % 2 == 0)); then
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do run_one ${order[i]} "$rep"; done
  else
    for item in "${order[@]}"; do run_one $item "$rep"; done
  fi
done

# Medians per (tool, precision, format); best PyTorch format per precision; ratio dlperf / best.
echo
awk -F'\t' -v precs="${PRECISIONS[*]}" -v fmts="${FORMATS[*]}" -v with_dlperf=$((1 - pytorch_only)) '
  NR > 1 { key = $1 SUBSEP $2 SUBSEP $3; n[key]++; v[key, n[key]] = $5 }
  function median(key,   i, j, t, a, m) {
    m = n[key]; if (m == 0) return -1
    for (i = 1; i <= m; i++) a[i] = v[key, i]
    for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  function cell(x) { return x < 0 ? "failed" : sprintf("%.2f", x) }
  END {
    np = split(precs, P, " "); nf = split(fmts, F, " ")
    printf "%-9s", "precision"
    if (with_dlperf) printf " %12s", "dlperf"
    for (f = 1; f <= nf; f++) printf " %22s", "pytorch " F[f]
    if (with_dlperf) printf " %14s", "dlperf/best"
    printf "   (median samples/s)\n"
    for (p = 1; p <= np; p++) {
      printf "%-9s", P[p]
      if (with_dlperf) { d = median("dlperf" SUBSEP P[p] SUBSEP "-"); printf " %12s", cell(d) }
      best = -1; bestf = ""
      for (f = 1; f <= nf; f++) {
        m = median("pytorch" SUBSEP P[p] SUBSEP F[f]); printf " %22s", cell(m)
        if (m > best) { best = m; bestf = F[f] }
      }
      if (with_dlperf) printf " %14s", (d > 0 && best > 0) ? sprintf("%.2fx", d / best) : "n/a"
      printf "   best PyTorch: %s\n", bestf == "" ? "none" : bestf
    }
  }' "$results"
echo "(each cell: median over repeats of batch*iterations/elapsed; raw values in $results)"
if ((contended > 0 || busy > 10)); then
  echo "WARNING: $contended measurement(s) ran alongside other work (more than ${OTHER_LOAD_LIMIT}% of the CPUs" \
       "used by other processes; CPUs ${busy}% busy before start): these numbers are unreliable;" \
       "rerun on an idle machine."
fi
exit $failed
