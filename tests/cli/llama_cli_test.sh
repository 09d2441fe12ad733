#!/usr/bin/env bash
# Llama through dlperf-train as a user meets it (issue 24): --plan-only prints the published
# parameter counts without allocating them (the 8B's 32 GB of f32 weights on any machine), bad
# combinations are one line and exit 2 with nothing written, and a reduced Llama trains on two
# MPI ranks with a falling loss, replicas bit-identical, into a complete run.
# Then the same on a Megatron indexed dataset written by dlperf-make-dataset --tokens, and a
# corrupt one refused in one line.
# dlperf-reduce shows tokens/s, TFLOP/s per device and MFU for the LLM runs, and --ops the
# per-op profile of a Llama run (--profile-ops).
# Usage: llama_cli_test.sh DLPERF_TRAIN MPIEXEC DLPERF_MAKE_DATASET DLPERF_REDUCE
set -u
train=$1 mpiexec=$2 make_dataset=$3 reduce=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0

for want in "llama3_8b 8,030,261,248" "llama3_2_1b 1,235,814,400"; do
  set -- $want
  if ! timeout 120 "$train" --model "$1" --plan-only --threads 1 >"$dir/plan.log" 2>&1; then echo "FAIL plan $1"; cat "$dir/plan.log"; fail=1
  elif ! grep -q "$2 parameters" "$dir/plan.log"; then echo "FAIL plan $1: no '$2 parameters'"; cat "$dir/plan.log"; fail=1
  elif ! grep -Eq '^kernels: [0-9]+ planned .*, 0 reference' "$dir/plan.log"; then echo "FAIL plan $1: reference kernels"; grep kernels "$dir/plan.log"; fail=1
  else echo "ok   plan $1: $(head -1 "$dir/plan.log" | grep -o '[0-9,]* parameters')"; fi
done

# --grad-accum N x --batch-size b reads the samples of --batch-size N b (the synthetic pool holds 4
# steps' worth, not 4 micro-batches): at a learning rate too small to move the weights, the
# per-step losses are the same (b 1 x 4 repeated one batch of 4 every step).
accum_losses() {
  "$train" --model llama3_8b --llama-layers 1 --llama-hidden 64 --llama-heads 2 --llama-kv-heads 1 --llama-ffn 128 --llama-vocab 512 \
    --seq-len 32 --threads 1 --iterations 8 --warmup 1 --lr 1e-12 --print-every 1 "$@" 2>&1 | awk '/^iter/ {for (i = 1; i < NF; i++) if ($i == "loss") printf "%s ", $(i + 1)}'
}
one=$(accum_losses --batch-size 4) two=$(accum_losses --batch-size 2 --grad-accum 2) four=$(accum_losses --batch-size 1 --grad-accum 4)
if [ -z "$one" ] || [ "$one" != "$two" ] || [ "$one" != "$four" ]; then
  echo "FAIL grad-accum data: batch 4: $one; 2 x 2: $two; 1 x 4: $four"; fail=1
else echo "ok   grad-accum reads the samples of the whole batch: $one"; fi

bad() {  # want-regex, arguments...
  local want=$1
  shift
  "$train" --threads 1 --iterations 3 --warmup 1 --output "$dir/bad.h5" "$@" >"$dir/bad.log" 2>&1
  local rc=$? lines
  lines=$(wc -l <"$dir/bad.log")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$want" "$dir/bad.log" || [ -e "$dir/bad.h5" ]; then
    echo "FAIL bad $*: exit $rc, $lines lines, want 2, 1 line matching '$want', no file"; cat "$dir/bad.log"; fail=1
  else echo "ok   bad: $(cat "$dir/bad.log")"; fi
}
small=(--model llama3_8b --llama-layers 1 --llama-vocab 64 --llama-ffn 32 --seq-len 16)
bad 'multiple of --llama-heads' "${small[@]}" --llama-hidden 64 --llama-heads 5
bad 'multiple of --llama-kv-heads' "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 3
bad 'must be even' "${small[@]}" --llama-hidden 36 --llama-heads 4 --llama-kv-heads 2
bad '--dropout does not apply' "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --dropout 0.1
bad '--llama-layers does not apply' --model bert_base --llama-layers 2
bad 'optimizer adamw' "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --optimizer lamb
bad 'needs at least .* GiB' --model llama3_8b
bad "--logits-chunk 24 must divide the batch's 16 tokens" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --logits-chunk 24
bad "--logits-chunk 'half' is not a number" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --logits-chunk half
bad '--logits-chunk does not apply' --model bert_base --logits-chunk 16
# --attention picks the cuda attention (cuDNN's fused SDPA or the cuBLAS products): cuda only
bad "--attention 'flash' is unknown: use auto, fused or unfused" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --attention flash
bad '--attention unfused needs --backend cuda' "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --attention unfused
bad '--attention does not apply' --backend cuda --model resnet50 --attention fused
# --logits-chunk: the head in 4 chunks of 48 tokens trains to the same losses as the whole head
# (4 digits printed), named in the banner, with less memory allocated.
chunk_run() {  # chunk, log
  timeout 120 "$train" --model llama3_8b --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 \
    --llama-vocab 4000 --seq-len 48 --batch-size 4 --threads 1 --iterations 4 --warmup 1 --print-every 1 --logits-chunk "$1" >"$2" 2>&1
}
if chunk_run 0 "$dir/whole.log" && chunk_run 48 "$dir/chunk.log"; then
  whole_losses=$(grep -o 'loss *[0-9.]*' "$dir/whole.log" | tr -s ' ') chunk_losses=$(grep -o 'loss *[0-9.]*' "$dir/chunk.log" | tr -s ' ')
  alloc() { sed -n 's/.*(allocated \([0-9.]*\) MiB.*/\1/p' "$1"; }
  if ! head -1 "$dir/chunk.log" | grep -q 'logits in 4 chunks of 48 tokens'; then echo "FAIL logits-chunk: banner"; head -1 "$dir/chunk.log"; fail=1
  elif [ -z "$whole_losses" ] || [ "$whole_losses" != "$chunk_losses" ]; then echo "FAIL logits-chunk: losses $chunk_losses, whole $whole_losses"; fail=1
  elif ! awk -v w="$(alloc "$dir/whole.log")" -v c="$(alloc "$dir/chunk.log")" 'BEGIN { exit !(c + 2 < w) }'; then
    echo "FAIL logits-chunk: allocated $(alloc "$dir/chunk.log") MiB, whole $(alloc "$dir/whole.log") MiB"; fail=1
  else echo "ok   logits-chunk 48: the whole head's losses; allocated $(alloc "$dir/chunk.log") MiB, whole $(alloc "$dir/whole.log") MiB"; fi
else
  echo "FAIL logits-chunk runs"; tail -3 "$dir/whole.log" "$dir/chunk.log"; fail=1
fi
# --profile-ops times Llama's own ops as well: --ops names each kind beside the products. The
# head in 2 chunks: the profiler's wrappers pass row views and backward_add through.
if timeout 120 "$train" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --threads 1 --iterations 5 --warmup 2 \
     --print-every 0 --profile-ops 2 --logits-chunk 8 --output "$dir/prof.h5" >"$dir/prof.log" 2>&1 &&
   "$reduce" "$dir/prof.h5" --ops --ops-top 5 >"$dir/ops" 2>&1; then
  missing=""
  for k in causal_attention rms_norm rope swiglu token_cross_entropy linear embedding; do
    grep -q "^| $k | " "$dir/ops" || missing="$missing $k"
  done
  if [ -n "$missing" ]; then echo "FAIL --profile-ops llama: no$missing in --ops"; cat "$dir/ops"; fail=1
  else echo "ok   --profile-ops llama: $(grep -c '^| [a-z_]* | [0-9]* | ' "$dir/ops") kinds of op timed"; fi
else
  echo "FAIL --profile-ops llama"; cat "$dir/prof.log" "$dir/ops" 2>/dev/null; fail=1
fi
# The memory plan (issue 25) against a given limit: 8B unsharded on one 80 GB rank is refused,
# the plan printed first and one error line last; nothing written.
"$train" --model llama3_8b --precision bf16 --plan-only --memory-limit-mb 81920 >"$dir/plan80.log" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'DOES NOT FIT' "$dir/plan80.log" || ! tail -1 "$dir/plan80.log" | grep -q 'the run needs at least .* GiB per rank' ||
   [ -e "$dir/bad.h5" ]; then
  echo "FAIL plan 8B on 80 GB: exit $rc"; cat "$dir/plan80.log"; fail=1
else echo "ok   plan 8B on 80 GB: $(tail -1 "$dir/plan80.log")"; fi

# Two ranks, fp32: the loss falls and the replicas stay bit-identical.
timeout 240 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" --model llama3_8b --llama-layers 2 --llama-hidden 64 \
  --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 --llama-vocab 128 --seq-len 48 --batch-size 4 --lr 3e-3 --threads 1 \
  --iterations 30 --warmup 5 --print-every 10 --output "$dir/r.h5" >"$dir/two.log" 2>&1
rc=$?
loss=$(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/two.log")
if [ "$rc" -ne 0 ]; then echo "FAIL two ranks: exit $rc"; tail -20 "$dir/two.log"; fail=1
elif ! grep -q 'bit-identical on all 2 ranks' "$dir/two.log"; then echo "FAIL two ranks: replicas differ"; tail -5 "$dir/two.log"; fail=1
elif ! awk -v s="$loss" 'BEGIN { split(s, a, " "); exit !(a[4] < a[2] - 1.0) }'; then echo "FAIL two ranks: $loss"; fail=1
elif [ ! -s "$dir/r.h5" ]; then echo "FAIL two ranks: no run written"; fail=1
elif ! grep -Eq '^llm: [0-9.]+ tokens/s \([0-9.]+ per device\); [0-9.e+-]+ model TFLOP/s per device; MFU [0-9.]+% of' "$dir/two.log"; then
  echo "FAIL two ranks: no llm line"; tail -5 "$dir/two.log"; fail=1
elif ! h5dump -a /runs/run_000001/mfu "$dir/r.h5" >/dev/null 2>&1; then echo "FAIL two ranks: no mfu in the trace"; fail=1
else echo "ok   two ranks: $loss"; fi

"$reduce" "$dir/r.h5" --warmup 5 --window 25 --csv "$dir/r.csv" >"$dir/table" 2>&1
if ! grep -Eq '^\| 1 \| 2 \| 4 \| [0-9.]+ \|.*\| [0-9.]+ \| [0-9.]+ \| [0-9.]+% \|$' "$dir/table" ||
   ! grep -q 'tokens/s | TFLOP/s/device | MFU' "$dir/table" || ! head -1 "$dir/r.csv" | grep -q ',tokens_per_s,tflops_per_device,mfu,grad_accum,zero$'; then
  echo "FAIL dlperf-reduce: no tokens/s and MFU columns"; cat "$dir/table"; fail=1
else echo "ok   dlperf-reduce: $(grep -E '^\| 1 \| 2 ' "$dir/table" | head -1)"; fi

# Two ranks on indexed-dataset tokens: a blend of two datasets weighted 3:1 (Megatron's
# "W1 PREFIX1 W2 PREFIX2" --data-path, comma-separated).
"$make_dataset" --tokens "$dir/c4" --documents 40 --vocab 128 >/dev/null || { echo "FAIL make-dataset --tokens"; fail=1; }
"$make_dataset" --tokens "$dir/c4b" --documents 20 --vocab 128 --seed 2 >/dev/null || { echo "FAIL make-dataset --tokens"; fail=1; }
timeout 240 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" --model llama3_8b --llama-layers 2 --llama-hidden 64 \
  --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 --llama-vocab 128 --seq-len 48 --batch-size 4 --lr 3e-3 --threads 1 \
  --iterations 30 --warmup 5 --print-every 10 --data "3,$dir/c4,1,$dir/c4b" --output "$dir/d.h5" >"$dir/data.log" 2>&1
rc=$?
loss=$(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/data.log")
if [ "$rc" -ne 0 ]; then echo "FAIL indexed data: exit $rc"; tail -20 "$dir/data.log"; fail=1
elif ! grep -q 'bit-identical on all 2 ranks' "$dir/data.log"; then echo "FAIL indexed data: replicas differ"; fail=1
elif ! awk -v s="$loss" 'BEGIN { split(s, a, " "); exit !(a[4] < a[2] - 0.8) }'; then echo "FAIL indexed data: $loss"; fail=1
elif ! h5dump -a /runs/run_000001/data_source "$dir/d.h5" | grep -q megatron; then echo "FAIL indexed data: data_source"; fail=1
elif ! grep -q "^data: Megatron indexed dataset blend of 2: 0.75 $dir/c4, 0.25 $dir/c4b\$" "$dir/data.log"; then
  echo "FAIL indexed data: no blend in the banner"; grep '^data' "$dir/data.log"; fail=1
else echo "ok   indexed data, two ranks: $loss"; fi
# The summary's loss is the global batch's: two ranks of 4 print what one rank of 8 prints over
# the same windows (it printed rank 0's half of the batch).
global=(--model llama3_8b --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 --llama-vocab 128
        --seq-len 48 --threads 1 --iterations 3 --warmup 1 --data "$dir/c4")
timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" "${global[@]}" --batch-size 4 >"$dir/g2.log" 2>&1
timeout 120 "$train" "${global[@]}" --batch-size 8 >"$dir/g1.log" 2>&1
l2=$(grep -o 'loss [0-9.]* -> [0-9.]* (mean over ranks)' "$dir/g2.log" | cut -d' ' -f1-4)
l1=$(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/g1.log")
if [ -z "$l1" ] || [ "$l1" != "$l2" ] || ! grep -q 'rank 0 loss' "$dir/g2.log"; then
  echo "FAIL global loss: one rank '$l1', two ranks '$l2'"; fail=1
else echo "ok   global loss: $l2 on two ranks as on one"; fi
# An MFU above 100% was printed without a word (dlperf-reduce warned); --zero on one rank was
# silent that it shards nothing.
"$train" "${global[@]}" --batch-size 2 --peak-tflops 0.000001 --zero 1 >"$dir/mfu.log" 2>&1
if ! grep -q '^dlperf-train: WARNING: MFU [0-9.e+]*% is above 100%: the peak per device (1e-06 TFLOP/s, --peak-tflops)' "$dir/mfu.log" ||
   ! grep -q '^zero: stage 1 on one rank shards nothing' "$dir/mfu.log"; then
  echo "FAIL MFU above 100% or --zero on one rank not said:"; tail -5 "$dir/mfu.log"; fail=1
else echo "ok   $(grep -o 'WARNING: MFU .*above 100%' "$dir/mfu.log")"; fi
cp "$dir/c4.bin" "$dir/bad.bin"
printf 'NOTMEGA!' | cat - <(tail -c +9 "$dir/c4.idx") >"$dir/bad.idx"
v128=(--model llama3_8b --llama-layers 1 --llama-vocab 128 --llama-ffn 32 --seq-len 16 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2)
bad "bad.idx: wrong magic" "${v128[@]}" --data "$dir/bad"
head -c 100 "$dir/c4.bin" >"$dir/bad.bin"
cp "$dir/c4.idx" "$dir/bad.idx"
bad "bad.bin: .* truncated or mismatched" "${v128[@]}" --data "$dir/bad"
cp "$dir/c4.bin" "$dir/bad.bin"
bad "outside the vocabulary \[0, 64\)" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --data "$dir/bad"
bad "no file .*nothing.idx" "${small[@]}" --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --data "$dir/nothing"
bad "weight '0' of .*c4 is not a positive number" "${v128[@]}" --data "0,$dir/c4,1,$dir/c4b"
bad "expected WEIGHT,PREFIX pairs, got 3 items" "${v128[@]}" --data "1,$dir/c4,1"
bad "--llama-vocab must be 2 or more" --model llama3_8b --llama-layers 1 --llama-vocab 1 --llama-ffn 32 --seq-len 16 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2
bad "no file .*nothing.idx" "${v128[@]}" --data "$dir/c4,$dir/nothing"

# --find-max-batch honours --recompute, --grad-accum and --zero (issue 25 item 8): each trial
# builds what the run would, so under one memory limit recomputing fits a larger batch, an
# accumulation buffer a smaller one, 2 ranks sharding AdamW's moments a larger one, and the
# head in chunks of one sequence (--logits-chunk) a larger one.
fmb=(--model llama3_8b --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 --llama-vocab 16000
     --seq-len 64 --threads 1 --memory-limit-mb 120 --batch-size 1 --find-max-batch)
largest() {  # label, command...: the largest batch it printed, or nothing
  local label=$1
  shift
  timeout 300 "$@" >"$dir/fmb.log" 2>&1 || { echo "FAIL find-max-batch $label: exit $?" >&2; tail -5 "$dir/fmb.log" >&2; return; }
  sed -n 's/^largest batch per device that trains: \([0-9]*\) (.*/\1/p' "$dir/fmb.log"
}
none=$(largest none "$train" "${fmb[@]}")
block=$(largest block "$train" "${fmb[@]}" --recompute block)
accum=$(largest accum "$train" "${fmb[@]}" --grad-accum 2)
zero0=$(largest zero0 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" "${fmb[@]}" --zero 0)
zero1=$(largest zero1 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" "${fmb[@]}" --zero 1)
chunked=$(largest chunked "$train" "${fmb[@]}" --logits-chunk 64)  # one sequence's (64, 16000) f32 logits at a time
if [ -z "$none" ] || [ -z "$block" ] || [ -z "$accum" ] || [ -z "$zero0" ] || [ -z "$zero1" ] || [ -z "$chunked" ] ||
   [ "$block" -le "$none" ] || [ "$accum" -ge "$none" ] || [ "$zero1" -le "$zero0" ] || [ "$chunked" -le "$none" ]; then
  echo "FAIL find-max-batch: recompute none $none, block $block; grad-accum 2 $accum; 2 ranks zero 0 $zero0, zero 1 $zero1;" \
    "logits-chunk 64 $chunked"; fail=1
else
  echo "ok   find-max-batch under 120 MiB: batch $none; $block with --recompute block; $accum with --grad-accum 2; 2 ranks: $zero0, $zero1 with --zero 1; $chunked with --logits-chunk 64"
fi

[ "$fail" -eq 0 ] && echo "llama cli ok"
exit "$fail"
