# Sourced by the cli tests and the bench scripts that run bf16 on the cpu backend, which
# computes it only on a CPU with native bf16 (AVX512-BF16 or AMX); elsewhere (AMD Zen 3, Intel
# before Cooper Lake) dlperf-train refuses bf16 with a one-line error, and the bf16 runs are
# left out, saying so. One probe for all of them: a tiny --plan-only run in bf16.

# cpu_bf16_refusal DLPERF_TRAIN: prints dlperf-train's refusal (without its "dlperf-train: "
# prefix) and succeeds where bf16 is refused; fails, printing nothing, otherwise. Any other
# failure of the probe counts as computing bf16, so that the runs themselves fail and show it.
cpu_bf16_refusal() {
  local msg
  msg=$("$1" --plan-only --model resnet50 --precision bf16 --batch-size 1 --image-size 32 --num-classes 2 \
          --resnet-blocks 1,1,1,1 --resnet-width 8 --threads 1 2>&1) && return 1
  grep -m1 'precision bf16 needs a CPU with' <<<"$msg" | sed 's/^dlperf-train: //' | grep .
}

# cpu_computes_bf16 DLPERF_TRAIN: succeeds unless dlperf-train refuses bf16 on this CPU.
cpu_computes_bf16() { ! cpu_bf16_refusal "$1" >/dev/null; }
