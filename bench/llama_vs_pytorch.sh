#!/usr/bin/env bash
# Llama pretraining tokens/s of dlperf-train against plain PyTorch (bench/llama_pytorch_train.py:
# the golden fixture's reference model with F.scaled_dot_product_attention where PyTorch has it),
# side by side on the CPU, same threads, same shapes, same recipe (AdamW beta2 0.95, clip 1.0),
# synthetic tokens, fp32 and bf16 (PyTorch: torch.autocast). Default shape, issue 24's: 4 layers,
# hidden 1,024, 16/4 heads, feed-forward 3,584, vocabulary 32,000, sequence 1,024, batch 2.
#
# Method: every measurement a fresh process (--warmup untimed steps, --iterations timed ones; the
# tokens/s each tool prints); the two tools interleaved within each repeat, the
# order reversed every other repeat; the table gives the median over --repeats and the ratio
# dlperf / PyTorch, plus dlperf's MFU line. The load average is printed with each measurement:
# the machine must be idle for the figures to mean anything.
#
# Usage: bench/llama_vs_pytorch.sh [--quick | --llama3-2-1b] [--backend cpu|cuda] [--repeats N] [--threads T]
#                                   [--precision fp32,bf16] [--iterations N] [--warmup W] [--log-dir DIR]
#   --quick: 2 layers, hidden 256, 4/2 heads, ffn 704, vocab 2,048, seq 256 (proves the script works)
#   --llama3-2-1b: the whole Llama 3.2 1B (16 layers, hidden 2,048, 32/8 heads, ffn 8,192, vocab
#            128,256, tied head), sequence 8,192, batch 1: issue 24's GPU comparison (--backend cuda)
#   --backend cuda: both on the GPU (dlperf --backend cuda; PyTorch --device cuda, run without
#            LD_LIBRARY_PATH so that it loads its own cuDNN, not a packed one)
#   --iterations/--warmup: timed and untimed steps per measurement (default 10 and 3)
#   --log-dir: keep each measurement's output there (default: a new temporary directory)
# Exit: 0 done, 1 a measurement failed (its log is named), 2 bad usage or a missing tool.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TRAIN=${DLPERF_TRAIN:-$ROOT/build/src/dlperf-train}
[[ $TRAIN = */* ]] || TRAIN=$(command -v "$TRAIN" || echo "$TRAIN")  # a command name: from PATH
PYTHON=${PYTHON:-$(command -v python3 || echo /usr/bin/python3)}
repeats=3 threads=$(nproc) precisions= iters=10 warmup=3 log= backend=cpu preset=
shape=(4 1024 16 4 3584 32000 1024 2)  # layers hidden heads kv ffn vocab seq batch
while [ $# -gt 0 ]; do
  case $1 in
    --quick) shape=(2 256 4 2 704 2048 256 2); iters=4; warmup=1 ;;
    --llama3-2-1b) shape=(16 2048 32 8 8192 128256 8192 1); preset=llama3_2_1b ;;
    --backend) backend=$2; shift ;;
    --repeats) repeats=$2; shift ;;
    --threads) threads=$2; shift ;;
    --precision) precisions=$2; shift ;;
    --iterations) iters=$2; shift ;;
    --warmup) warmup=$2; shift ;;
    --log-dir) log=$2; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$TRAIN" ] || { echo "no dlperf-train at $TRAIN (build it, or set DLPERF_TRAIN)" >&2; exit 2; }
[ "$backend" = cpu ] || [ "$backend" = cuda ] || { echo "--backend takes cpu or cuda (got '$backend')" >&2; exit 2; }
# The default precisions leave bf16 out on a CPU that dlperf-train refuses it on (no AVX512-BF16,
# no AMX), saying so; asked for by name it still runs (and fails there).
if [ -z "$precisions" ]; then
  precisions=fp32,bf16
  source "$ROOT/scripts/lib/cpu_bf16.sh"
  if [ "$backend" = cpu ] && refusal=$(cpu_bf16_refusal "$TRAIN"); then
    precisions=fp32
    echo "# bf16 left out: $refusal"
  fi
fi
read -r L H NH KV F V T B <<<"${shape[*]}"
# The model on each side: the preset by name (dlperf) and its tied head (PyTorch), or the shape.
if [ -n "$preset" ]; then
  dlperf_model=(--model "$preset" --seq-len "$T" --batch-size "$B")
  torch_extra=(--tied)
else
  dlperf_model=(--model llama3_8b --llama-layers "$L" --llama-hidden "$H" --llama-heads "$NH" --llama-kv-heads "$KV"
                --llama-ffn "$F" --llama-vocab "$V" --seq-len "$T" --batch-size "$B")
  torch_extra=()
fi
python_env=()
[ "$backend" = cuda ] && python_env=(env -u LD_LIBRARY_PATH)
"${python_env[@]}" "$PYTHON" -c 'import torch' 2>/dev/null || { echo "$PYTHON has no torch (apt-get install python3-torch)" >&2; exit 2; }
if [ -n "$log" ]; then mkdir -p "$log"; else log=$(mktemp -d); fi
for v in "$repeats" "$threads" "$iters"; do [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "--repeats, --threads and --iterations take positive integers (got '$v')" >&2; exit 2; }; done
[[ $warmup =~ ^[0-9]+$ ]] || { echo "--warmup takes an integer >= 0 (got '$warmup')" >&2; exit 2; }
if [ "$backend" = cuda ]; then where=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); else where="$threads threads; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"; fi
echo "# Llama ${preset:-reduced} $L layers, hidden $H, $NH/$KV heads, ffn $F, vocab $V, seq $T, batch $B; $backend: $where"
run() {  # tool precision repeat -> prints tokens/s
  local tool=$1 p=$2 r=$3 out="$log/$1.$2.$3.log"
  if [ "$tool" = dlperf ]; then
    OMP_NUM_THREADS=$threads "$TRAIN" --backend "$backend" "${dlperf_model[@]}" --precision "$p" --threads "$threads" \
      --iterations $((iters + warmup)) --warmup "$warmup" --print-every 0 >"$out" 2>&1 || { echo "FAILED: $out" >&2; return 1; }
  else
    OMP_NUM_THREADS=$threads "${python_env[@]}" "$PYTHON" "$ROOT/bench/llama_pytorch_train.py" --layers "$L" --hidden "$H" --heads "$NH" \
      --kv-heads "$KV" --ffn "$F" --vocab "$V" --seq-len "$T" --batch-size "$B" --precision "$p" --threads "$threads" \
      --iterations "$iters" --warmup "$warmup" --device "$backend" "${torch_extra[@]}" >"$out" 2>&1 || { echo "FAILED: $out" >&2; return 1; }
  fi
  # tokens/s as each tool prints it (dlperf's llm line, PyTorch's tokens/s line): the samples/s of
  # dlperf's summary has 2 decimals, too coarse at well under one sequence a second.
  local tps
  if [ "$tool" = dlperf ]; then tps=$(sed -n 's/^llm: \([0-9.]*\) tokens\/s.*/\1/p' "$out"); else tps=$(sed -n 's/^tokens\/s \([0-9.]*\)$/\1/p' "$out"); fi
  [ -n "$tps" ] || { echo "FAILED: no tokens/s in $out" >&2; return 1; }
  echo "  $tool $p repeat $r: $tps tokens/s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  echo "$tps"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
echo "| precision | dlperf tokens/s | PyTorch tokens/s | ratio | dlperf MFU |"
echo "|---|---|---|---|---|"
for p in ${precisions//,/ }; do
  : >"$log/d.$p" && : >"$log/t.$p"
  for r in $(seq "$repeats"); do
    if [ $((r % 2)) -eq 1 ]; then run dlperf "$p" "$r" >>"$log/d.$p"; run torch "$p" "$r" >>"$log/t.$p"
    else run torch "$p" "$r" >>"$log/t.$p"; run dlperf "$p" "$r" >>"$log/d.$p"; fi
  done
  d=$(median <"$log/d.$p") t=$(median <"$log/t.$p")
  mfu=$(grep -ho 'MFU [0-9.]*% of [0-9.]* TFLOP/s' "$log"/dlperf."$p".*.log | tail -1)
  awk -v d="$d" -v t="$t" -v p="$p" -v m="$mfu" 'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %s |\n", p, d, t, d / t, m }'
done
echo "# logs: $log"
