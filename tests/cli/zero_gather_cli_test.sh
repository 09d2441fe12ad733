#!/usr/bin/env bash
# ZeRO's all-gather into the next forward (--zero-gather forward, the default) against waiting for
# it at the step's end (--zero-gather step) and against the replicated run (--zero 0): on two
# ranks every model ends with the same parameters bit for bit (the checksum of the replicas).
# bf16 makes a late wait visible, not just racy: forward reads the bf16 compute copies, which
# the exchange rebuilds only once the layer's buckets have arrived, so a layer that read its
# weights before its model announced it (Model::reading) would train on the previous step's
# weights and end with other parameters. fp32 runs (forward reads the gathered values in
# place) are compared as well (alone on a CPU without native bf16). Buckets of 10-50 KiB: a dozen or more per model, so forward waits
# for them one by one.
# Usage: zero_gather_cli_test.sh DLPERF_TRAIN MPIEXEC
set -u
train=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
common=(--threads 1 --iterations 6 --warmup 2 --print-every 0)
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/cpu_bf16.sh"
precisions=(bf16 fp32)
if ! cpu_computes_bf16 "$train"; then
  precisions=(fp32)
  echo "note: bf16 left out: this CPU has no native bf16 (AVX512-BF16 or AMX), and dlperf-train refuses it"
fi

checksum() {  # label, arguments...: prints the replicas' checksum, or FAIL
  local label=$1
  shift
  if ! timeout 120 "$mpiexec" -x DLPERF_GUARD_DECOMMITTED=1 --oversubscribe --bind-to none -np 2 "$train" "$@" "${common[@]}" \
       >"$dir/$label.log" 2>&1; then
    echo "FAIL"; return
  fi
  grep -o 'bit-identical on all 2 ranks (checksum [0-9a-fx]*)' "$dir/$label.log" | grep -o '0x[0-9a-f]*' || echo "FAIL"
}

compare() {  # label, arguments...
  local label=$1
  shift
  for precision in "${precisions[@]}"; do
    local z0 fwd step
    z0=$(checksum "$label-$precision-z0" "$@" --precision "$precision" --zero 0)
    fwd=$(checksum "$label-$precision-forward" "$@" --precision "$precision" --zero 1 --zero-gather forward)
    step=$(checksum "$label-$precision-step" "$@" --precision "$precision" --zero 1 --zero-gather step)
    if [ "$z0" = FAIL ] || [ "$fwd" = FAIL ] || [ "$step" = FAIL ] || [ "$z0" != "$fwd" ] || [ "$fwd" != "$step" ]; then
      echo "FAIL $label $precision: zero 0 $z0, zero 1 gather forward $fwd, gather step $step"
      for l in z0 forward step; do tail -3 "$dir/$label-$precision-$l.log"; done
      fail=1
    else
      echo "ok   $label $precision: zero 0, zero 1 with the all-gather into forward and at the step's end: $fwd"
    fi
  done
  grep -q 'weights all-gathered into the next forward' "$dir/$label-fp32-forward.log" &&
    grep -q "weights all-gathered at the step's end" "$dir/$label-fp32-step.log" || { echo "FAIL $label: banner"; fail=1; }
}

compare llama --model llama3_8b --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 \
  --llama-vocab 512 --seq-len 32 --batch-size 2 --lr 3e-3 --bucket-mb 0.01 --optimizer adamw
compare llama-tied --model llama3_2_1b --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 176 \
  --llama-vocab 512 --seq-len 32 --batch-size 2 --lr 3e-3 --bucket-mb 0.01
compare resnet50 --model resnet50 --resnet-blocks 1,1,1,1 --resnet-width 16 --image-size 32 --num-classes 10 --batch-size 4 \
  --bucket-mb 0.05
compare bert --model bert_base --bert-layers 2 --bert-hidden 64 --bert-heads 4 --bert-intermediate 128 --bert-vocab 512 \
  --seq-len 32 --max-predictions 4 --batch-size 2 --optimizer adamw --lr 3e-3 --bucket-mb 0.01
compare vgg16 --model vgg16 --vgg-width 16 --vgg-hidden 256 --image-size 32 --num-classes 10 --batch-size 4 --lr 0.05 --bucket-mb 0.05

[ "$fail" -eq 0 ] && echo "zero gather cli ok"
exit "$fail"
