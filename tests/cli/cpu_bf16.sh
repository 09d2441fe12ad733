# Sourced by the cli tests that run bf16 on the cpu backend, which computes it only on a CPU
# with native bf16 (AVX512-BF16 or AMX). `cpu_computes_bf16 DLPERF_TRAIN` fails only where
# dlperf-train refuses bf16 with its one-line error (AMD Zen 3, Intel before Cooper Lake): the
# bf16 runs are then left out, and the test says so. Any other failure of the probe counts as
# computing bf16, so that the runs themselves fail and show it.
cpu_computes_bf16() {
  local msg
  msg=$("$1" --plan-only --model resnet50 --precision bf16 --batch-size 1 --image-size 32 --num-classes 2 \
          --resnet-blocks 1,1,1,1 --resnet-width 8 --threads 1 2>&1) && return 0
  ! grep -q 'precision bf16 needs a CPU with' <<<"$msg"
}
