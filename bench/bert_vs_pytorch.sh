#!/usr/bin/env bash
# BERT-base pretraining throughput: dlperf-train against PyTorch, side by side in one invocation.
#
# Same machine, same threads (OMP_NUM_THREADS and torch.set_num_threads), same shapes (batch 16,
# sequence 128, 20 masked-LM predictions, vocabulary 30522 by default), synthetic tokens, AdamW
# (eps 1e-6, weight decay 0.01 on weights), dropout 0.1. Precisions fp32 and bf16 (PyTorch:
# torch.autocast('cpu', dtype=torch.bfloat16); dlperf: bf16 compute, f32 master weights).
#
# Method. Every measurement is a fresh process that runs --warmup untimed training steps, then
# --iterations timed ones (whole steps: forward, backward, optimizer); throughput = batch *
# iterations / elapsed, as each tool prints it (`throughput X samples/s`). The tools alternate
# within each repeat (the order reversed on every other repeat, so a drift of the machine favours
# neither); the table reports the median over --repeats per (tool, precision) and the ratio
# dlperf median / PyTorch median.
#
# Usage: bench/bert_vs_pytorch.sh [--quick] [options]   (--help lists them)
# Exit status: 0 all measurements succeeded; 1 one failed (its log is named); 2 bad usage or a
# missing tool.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=/usr/bin/python3                       # Debian's Python: python3-torch lives there
PYTORCH_TRAIN="$ROOT/bench/bert_pytorch_train.py"
DLPERF_TRAIN=${DLPERF_TRAIN:-build/src/dlperf-train}
[[ $DLPERF_TRAIN = /* ]] || DLPERF_TRAIN="$ROOT/$DLPERF_TRAIN"

usage() {
  cat <<EOF
Usage: $0 [options]
  --batch-size B     sequences per step (default 16)
  --seq-len S        tokens per sequence (default 128)
  --iterations N     measured steps per measurement (default 5; --quick 3)
  --warmup W         untimed steps first (default 2; --quick 1)
  --threads T        OMP_NUM_THREADS and torch.set_num_threads (default 2)
  --repeats R        alternating repeats; medians are reported (default 3; --quick 1)
  --precisions LIST  comma list of fp32,bf16 (default fp32,bf16)
  --quick            reduced BERT (2 layers, hidden 256, 4 heads, vocabulary 8192) to check the
                     script works; explicit options win
  --log-dir DIR      keep each run's output there (default: a new temporary dir)
  -h, --help         this text
Environment: DLPERF_TRAIN (default build/src/dlperf-train, relative to the repository root).
Environment: DLPERF_TRAIN (default build/src/dlperf-train, relative to the repository root).
EOF
}
die_usage() { echo "error: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }

batch=16 seq=128 iterations="" warmup="" threads=2 repeats="" precisions=fp32,bf16 quick=0 log_dir=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch-size)  need_value "$@"; batch=$2; shift 2 ;;
    --seq-len)     need_value "$@"; seq=$2; shift 2 ;;
    --iterations)  need_value "$@"; iterations=$2; shift 2 ;;
    --warmup)      need_value "$@"; warmup=$2; shift 2 ;;
    --threads)     need_value "$@"; threads=$2; shift 2 ;;
    --repeats)     need_value "$@"; repeats=$2; shift 2 ;;
    --precisions)  need_value "$@"; precisions=$2; shift 2 ;;
    --quick)       quick=1; shift ;;
    --log-dir)     need_value "$@"; log_dir=$2; shift 2 ;;
    -h|--help)     usage; exit 0 ;;
    *)             die_usage "unknown option '$1'" ;;
  esac
done
if [[ $quick = 1 ]]; then
  : "${iterations:=3}" "${warmup:=1}" "${repeats:=1}"
  size=(--layers 2 --hidden 256 --heads 4 --intermediate 1024 --vocab 8192)
  dsize=(--bert-layers 2 --bert-hidden 256 --bert-heads 4 --bert-intermediate 1024 --bert-vocab 8192)
else
  : "${iterations:=5}" "${warmup:=2}" "${repeats:=3}"
  size=() dsize=()
fi
for v in batch seq iterations warmup threads repeats; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die_usage "--$v must be a positive integer (got '${!v}')"
done
IFS=, read -ra precs <<< "$precisions"
for p in "${precs[@]}"; do [[ $p = fp32 || $p = bf16 ]] || die_usage "--precisions takes fp32 and/or bf16 (got '$p')"; done
[[ -x $DLPERF_TRAIN ]] || die_usage "dlperf-train not found at $DLPERF_TRAIN (build it, or set DLPERF_TRAIN)"
$PYTHON -c 'import torch' 2>/dev/null || die_usage "$PYTHON has no torch (apt-get install python3-torch libopenblas0-pthread)"
[[ -n $log_dir ]] || log_dir=$(mktemp -d -t bert_vs_pytorch.XXXXXX)
mkdir -p "$log_dir"
export OMP_NUM_THREADS=$threads

run_one() {  # tool precision repeat -> prints throughput
  local tool=$1 prec=$2 rep=$3 log="$log_dir/$1_$2_$3.log"
  if [[ $tool = dlperf ]]; then
    "$DLPERF_TRAIN" --model bert_base --optimizer adamw --precision "$prec" --batch-size "$batch" --seq-len "$seq" \
      --threads "$threads" --iterations $((warmup + iterations)) --warmup "$warmup" --print-every 0 "${dsize[@]}" > "$log" 2>&1 ||
      { echo "dlperf-train failed, see $log" >&2; exit 1; }
  else
    "$PYTHON" "$PYTORCH_TRAIN" --precision "$prec" --batch-size "$batch" --seq-len "$seq" --threads "$threads" \
      --iterations "$iterations" --warmup "$warmup" "${size[@]}" > "$log" 2>&1 ||
      { echo "pytorch failed, see $log" >&2; exit 1; }
  fi
  grep -o 'throughput [0-9.]* samples/s' "$log" | head -1 | awk '{print $2}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A results
for ((r = 0; r < repeats; r++)); do
  for p in "${precs[@]}"; do
    order=(dlperf pytorch); ((r % 2)) && order=(pytorch dlperf)
    for t in "${order[@]}"; do
      v=$(run_one "$t" "$p" "$r")
      results[$t,$p]+="$v "
      echo "repeat $((r + 1))/$repeats $p $t: $v samples/s" >&2
    done
  done
done

title="BERT-base"; [[ $quick = 1 ]] && title="reduced BERT (--quick)"
echo "$title pretraining, batch $batch, seq $seq, AdamW, $threads threads, median of $repeats runs x $iterations steps"
printf '%-9s %16s %16s %8s\n' precision dlperf PyTorch ratio
for p in "${precs[@]}"; do
  d=$(tr ' ' '\n' <<< "${results[dlperf,$p]}" | grep . | median)
  t=$(tr ' ' '\n' <<< "${results[pytorch,$p]}" | grep . | median)
  printf '%-9s %10.3f seq/s %10.3f seq/s %7.2fx\n' "$p" "$d" "$t" "$(awk -v a="$d" -v b="$t" 'BEGIN {print a / b}')"
done
echo "logs: $log_dir"
