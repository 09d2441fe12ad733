#!/usr/bin/env bash
# Cost and saving of --logits-chunk (docs/llm.md): a reduced Llama's step time, tokens/s and
# allocation peak with its output head over the whole batch and in 2, 4 and 8 chunks of tokens,
# one rank, interleaved (whole, 2, 4, 8, whole, ...) so a machine that slows down mid-way biases
# none; ratio = median tokens/s / the whole head's. Every run must report the whole head's
# losses (the chunks change where the head's weight gradient is summed, not the model). Needs
# an idle machine for figures worth quoting; the machine state is printed.
#   bench/logits_chunk.sh [BUILD_DIR] [REPEATS] [extra dlperf-train flags...]
# The model: issue 24's CPU benchmark shape (4 layers, hidden 1,024, 16/4 heads, ffn 3,584,
# vocabulary 32,000, seq 1,024, batch 2: 2,048 tokens, 262 MB of f32 logits), fp32 unless
# --precision is given.
set -eu
build=${1:-build}
repeats=${2:-3}
[ $# -ge 2 ] && shift 2 || shift $#
exe="$build/src/dlperf-train"
[ -x "$exe" ] || { echo "logits_chunk.sh: $exe not found; build the dlperf-train target first" >&2; exit 2; }
tokens=2048
base=(--model llama3_8b --llama-layers 4 --llama-hidden 1024 --llama-heads 16 --llama-kv-heads 4 --llama-ffn 3584 --llama-vocab 32000
      --seq-len 1024 --batch-size 2 --iterations 6 --warmup 1 --print-every 0 "$@")
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
echo "# ${base[*]}"
echo "# machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), load average $(cut -d' ' -f1-3 /proc/loadavg) at start; $repeats repeats"
declare -A rates steps alloc losses
chunks=(0 $((tokens / 2)) $((tokens / 4)) $((tokens / 8)))
for ((i = 0; i < repeats; ++i)); do
  for c in "${chunks[@]}"; do
    out=$("$exe" "${base[@]}" --logits-chunk "$c" 2>&1) || { echo "logits_chunk.sh: --logits-chunk $c failed:" >&2; echo "$out" | tail -3 >&2; exit 1; }
    rates[$c]+="$(echo "$out" | sed -n 's/^llm: \([0-9.]*\) tokens\/s.*/\1/p') "
    steps[$c]+="$(echo "$out" | sed -n 's/.*median step \([0-9.]*\) ms.*/\1/p') "
    alloc[$c]=$(echo "$out" | sed -n 's/.*(allocated \([0-9.]*\) MiB.*/\1/p')
    losses[$c]=$(echo "$out" | grep -o 'loss [0-9.]* -> [0-9.]*' | tail -1)
  done
done
whole=$(echo "${rates[0]}" | tr ' ' '\n' | grep . | median)
printf '%-14s %12s %8s %14s %16s   %s\n' chunk tokens/s ratio "step ms" "allocated MiB" "loss"
for c in "${chunks[@]}"; do
  m=$(echo "${rates[$c]}" | tr ' ' '\n' | grep . | median)
  s=$(echo "${steps[$c]}" | tr ' ' '\n' | grep . | median)
  label=$([ "$c" = 0 ] && echo whole || echo "$((tokens / c)) x $c")
  printf '%-14s %12.1f %8.3f %14.1f %16s   %s\n' "$label" "$m" "$(awk -v a="$m" -v b="$whole" 'BEGIN {print (b > 0) ? a / b : 0}')" "$s" \
    "${alloc[$c]}" "${losses[$c]}"
  [ "${losses[$c]}" = "${losses[0]}" ] || { echo "logits_chunk.sh: --logits-chunk $c reported ${losses[$c]}, the whole head ${losses[0]}" >&2; exit 1; }
done
echo "# load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
