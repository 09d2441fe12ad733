#!/usr/bin/env bash
# Plans full-size ResNet-50, VGG16 and BERT-base with dlperf-train --plan-only under
# ONEDNN_MAX_CPU_ISA=<isa> and fails if any planned primitive is one of oneDNN's reference
# implementations (dlperf-train marks them "<- REFERENCE" and counts them on its "kernels:"
# line). fp32 everywhere; bf16 where the ISA computes it natively, and elsewhere bf16 must keep
# its clear one-line error (exit 2); no fp32 convolution in channels-last (brgemm) layout, which
# oneDNN 3.7.2 cannot plan on AMD Zen 5. Exits 77 (skipped) when this CPU does not offer <isa>.
#   no_reference_kernels_test.sh DLPERF_TRAIN ISA
set -euo pipefail
train=$1 isa=$2
export ONEDNN_MAX_CPU_ISA=$isa OMP_NUM_THREADS=2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# oneDNN caps at what the CPU has: a lower effective ISA than asked means this CPU lacks it.
tiny=(--plan-only --model resnet50 --batch-size 1 --image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 --num-classes 2)
effective=$("$train" "${tiny[@]}" | sed -n 's/^kernels: [0-9]* planned on \([a-z0-9_]*\),.*/\1/p')
if [[ $effective != "$isa" ]]; then
  echo "SKIP: this CPU does not offer $isa (oneDNN runs $effective under the cap)"
  exit 77
fi

bf16=0
[[ $isa = avx512_core_bf16 || $isa = avx512_core_amx ]] && bf16=1
failed=0
# The benchmarks' shapes (bench/vs_pytorch.sh): implementation choice can depend on them.
for model in resnet50 vgg16 bert_base; do
  case $model in resnet50) batch=32 ;; *) batch=16 ;; esac
  for precision in fp32 bf16; do
    log="$dir/$model-$precision.log"
    rc=0
    "$train" --plan-only --model "$model" --precision "$precision" --batch-size "$batch" >"$log" 2>&1 || rc=$?
    if [[ $precision = bf16 && $bf16 = 0 ]]; then
      if [[ $rc -eq 2 ]] && grep -q 'precision bf16 needs a CPU with AVX512-BF16 or AMX' "$log"; then
        echo "$isa $model bf16: refused with the clear error, as it must be without native bf16"
      else
        echo "FAIL: $isa $model bf16 without native bf16: expected the one-line error and exit 2, got exit $rc:"
        cat "$log"
        failed=1
      fi
      continue
    fi
    summary=$(grep '^kernels:' "$log" || true)
    if [[ $rc -ne 0 || -z $summary ]]; then
      echo "FAIL: $isa $model $precision: dlperf-train --plan-only exited $rc:"
      cat "$log"
      failed=1
    elif [[ $summary != *", 0 reference" ]] || grep -q 'REFERENCE' "$log"; then
      echo "FAIL: $isa $model $precision: $summary"
      grep 'REFERENCE' "$log" | head -20
      failed=1
    elif [[ $summary != *" on $isa,"* ]]; then
      echo "FAIL: $isa $model $precision: planned on another ISA: $summary"
      failed=1
    elif [[ $precision = fp32 ]] && grep -E ' k[0-9]+/[0-9]+ -> [0-9]+ +brg' "$log" >"$dir/nhwc"; then
      # oneDNN's brgemm convolutions take channels-last only: an fp32 one is the layout in which
      # oneDNN 3.7.2 dies (SIGFPE) planning on AMD Zen 5 (docs/onednn-zen5-sigfpe.md), which dlperf
      # avoids by planning fp32 convolutions blocked.
      echo "FAIL: $isa $model fp32: convolutions planned channels-last (brgemm):"
      head -5 "$dir/nhwc"
      failed=1
    else
      echo "$isa $model $precision: $summary"
    fi
  done
done
exit $failed
