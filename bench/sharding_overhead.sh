#!/usr/bin/env bash
# CPU overhead of issue 25's options: dlperf-train's throughput with --zero 1 and 2 (their
# all-gathers run into the next forward; "--zero-gather step" waits for them at the step's end), with
# --grad-accum 2 and with --recompute block, each against --zero 0 on the same ranks, batch and
# model, interleaved (baseline, option, baseline, option, ...) so a machine that slows down mid-way biases
# neither; ratio = median option / median baseline (samples/s; accumulation counts every
# micro-batch). Needs an idle machine for figures worth quoting; the machine state is printed.
#   bench/sharding_overhead.sh [BUILD_DIR] [RANKS] [REPEATS] [llama] [extra dlperf-train flags...]
# The model: a reduced ResNet-50 (blocks 1,1,1,1, width 32, 64x64 images, batch 16), or with
# "llama" a reduced Llama (2 layers, hidden 256, 4/2 heads, ffn 704, vocab 8,000, seq 256, batch 4).
# Each run: ITERS timed iterations after WARMUP (environment; default 40 and 10). On a CPU without
# AVX-512 (an AMD Zen 3) the Llama's step takes 0.7 s, so 40 runs of 50 steps take 24 minutes.
set -eu
build=${1:-build}
ranks=${2:-2}
repeats=${3:-3}
[ $# -ge 3 ] && shift 3 || shift $#
exe="$build/src/dlperf-train"
[ -x "$exe" ] || { echo "sharding_overhead.sh: $exe not found; build the dlperf-train target first" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=$(( $(nproc) / ranks )); [ "$threads" -ge 1 ] || threads=1
model=(--model resnet50 --resnet-blocks 1,1,1,1 --resnet-width 32 --image-size 64 --num-classes 100 --batch-size 16)
if [ "${1:-}" = llama ]; then
  shift
  model=(--model llama3_8b --llama-layers 2 --llama-hidden 256 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 704 --llama-vocab 8000
         --seq-len 256 --batch-size 4)
fi
base=("${model[@]}" --iterations "${ITERS:-40}" --warmup "${WARMUP:-10}" --print-every 0 --threads "$threads" "$@")
run() {  # prints samples/s
  mpirun -np "$ranks" --oversubscribe --bind-to none "$exe" "${base[@]}" "$@" | sed -n 's/^summary: throughput \([0-9.]*\) samples.*/\1/p'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
echo "# ${model[*]}"
echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; $ranks ranks x $threads threads; $repeats repeats of ${ITERS:-40} iterations after ${WARMUP:-10}"
declare -A rates
for ((i = 0; i < repeats; ++i)); do
  for opt in "--zero 0" "--zero 1" "--zero 1 --zero-gather step" "--zero 2" "--zero 2 --zero-gather step" "--grad-accum 2" "--zero 2 --grad-accum 2" "--recompute block"; do
    # shellcheck disable=SC2086
    rates[$opt]+="$(run $opt) "
  done
done
b=$(echo "${rates["--zero 0"]}" | tr ' ' '\n' | grep . | median)
printf '%-30s %10s %8s   %s\n' option "samples/s" ratio "runs"
for opt in "--zero 0" "--zero 1" "--zero 1 --zero-gather step" "--zero 2" "--zero 2 --zero-gather step" "--grad-accum 2" "--zero 2 --grad-accum 2" "--recompute block"; do
  m=$(echo "${rates[$opt]}" | tr ' ' '\n' | grep . | median)
  printf '%-30s %10.1f %8.3f   %s\n' "$opt" "$m" "$(awk -v a="$m" -v b="$b" 'BEGIN {print (b > 0) ? a / b : 0}')" "${rates[$opt]}"
done
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
