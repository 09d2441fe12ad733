#!/usr/bin/env bash
# gpu-check.sh: the first hour on a GPU machine, as one command (issue 26). Runs, in stages of
# under 10 minutes each, everything a CUDA build must pass before its figures mean anything,
# and saves every output under one folder:
#
#   1  tests       ctest -L cuda (a build tree), or every packed CUDA test executable on PATH
#                  (../shared/tools/gpu-pack: no cmake, MPI, HDF5 or oneDNN installed there),
#                  the fused-attention test again with cuDNN's error and warning log,
#                  ZeRO-1, -2 and -2 with --grad-accum 2 on a reduced Llama, two ranks sharing
#                  the GPU (failing if a measured step maps or unmaps a chunk), a two-rank job
#                  eager and with --cuda-graph (graphs cut at the buckets), comm_mpi_tests' NCCL
#                  cases on one rank (pack it with `gpu-pack build-tests
#                  build-tests/tests/comm/comm_mpi_tests`); with two or more GPUs also those on 2
#                  ranks and a 2-rank ResNet-50 fp16 run with --comm nccl. The CUDA tests run
#                  with DLPERF_REQUIRE_GPU=1: one that finds no usable device fails
#   2  plan        dlperf-train --plan-only for every model x precision at its benchmark batch;
#                  fails on any "(fallback)" or "REFERENCE" kernel (tf32/fp16/bf16 must plan
#                  every convolution and GEMM on tensor cores, the stem included), and BERT with
#                  --bert-hidden 1024 and 5120 (the layer-norm launch limits)
#   3  memcheck    compute-sanitizer --tool memcheck on the conformance and step tests
#   4  racecheck   compute-sanitizer --tool racecheck on the same
#   5  synccheck   compute-sanitizer --tool synccheck on the same
#   6  resnet50    bench/vs_pytorch.sh --device cuda, ResNet-50 b256, fp16 bf16 tf32
#   7  vgg16       the same, VGG16 b128
#   8  bert        the same, BERT-base b64; then PyTorch's BERT with its MLM head on the masked
#                  positions only (--mlm-head masked), like for like with dlperf
#   9  profile     where the step goes, op by op (--profile-ops, then dlperf-reduce --ops) for
#                  ResNet-50 fp16, bf16 and tf32, VGG16 fp16, BERT fp16 and Llama 3.2 1B bf16
#                  (sequence 8,192); then per-kernel GPU
#                  time of ResNet-50 fp16 and tf32 and BERT fp16 (nsys, else ncu over the measured
#                  steps only), and PyTorch's kernels of the same ResNet-50 runs (CUPTI,
#                  bench/pytorch_cuda_train.py --profile-kernels) beside them
#  10  variants    ResNet-50 fp16 b256 eager, --cuda-graph and --data-on-device, and BERT-base fp16
#                  b64 eager and --cuda-graph, interleaved --repeats times (medians in
#                  10-variants.tsv), and --find-max-batch against
#                  PyTorch's largest batch (bench/pytorch_max_batch.py, the same search)
#  11  llama       llama3_2_1b bf16 (sequence 8,192, batch 1): --plan-only (fails while the
#                  attention is the flagged cuBLAS fallback, not cuDNN's fused SDPA), then
#                  bench/llama_vs_pytorch.sh --backend cuda --llama3-2-1b against PyTorch's SDPA model,
#                  then --attention fused against unfused (cuDNN's SDPA against cuBLAS products),
#                  ZeRO-1, -2 and -2 with --grad-accum 2 on two ranks sharing the GPU (no
#                  chunk mapped in a measured step, or the step fails),
#                  and the head over chunks of tokens against the whole head (tf32)
# A stage that runs past 9.5 minutes (GPU_CHECK_STAGE_LIMIT seconds, where set) has its running
# step stopped (exit 124 in summary.tsv).
#
# A GPU lent for a few minutes: --deadline caps the whole run, stages in the order given, e.g.
#   scripts/gpu-check.sh --stage 1,9,6,7,8,11 --repeats 1 --deadline 600
# (tests, where the step goes, the PyTorch comparison, Llama): the running step is stopped at
# the deadline and the rest is skipped, each skip a row of summary.tsv (status "skipped").
# Each step's results (the benches' measurements and tables, dlperf-train's summary lines) are
# also printed as they come, so a console's tail carries them; --archive FILE keeps a .tar.gz of
# the whole folder, rewritten after every step: one file to bring back from a machine that
# returns only a few (the device tool brings back 8), complete up to the last finished step
# even when the run is killed.
#
# Usage: scripts/gpu-check.sh [--stage N[,N...]] [--out DIR] [--build DIR | --packed] [--dry-run] [--repeats R]
#                             [--deadline S] [--archive FILE]
#   --stage     run only these stages, in the order given (default: all, in order)
#   --out       the folder for everything (default gpu-check-<UTC time>); one log per command,
#               summary.tsv (stage, step, exit status, seconds), environment.txt and memory.txt
#               (each run's plan beside its measured peaks)
#   --build     a CMake build tree with CUDA (ctest there); default build-tests when it has a
#               CTestTestfile.cmake and ctest is installed, else the packed executables on PATH
#   --packed    the executables on PATH (source .gpu/env.sh) even where a build tree exists
#   --dry-run   print the commands of the chosen stages, run nothing (works without a GPU)
#   --repeats   interleaved repeats of the PyTorch comparison (default 3; medians reported)
#   --deadline  seconds the whole run may take from its start (default: no limit beyond the
#               stages' own)
#   --archive   also keep FILE (.tar.gz of the folder), rewritten after every step
# On a packed machine: source .gpu/env.sh && scripts/gpu-check.sh
# Exit status: 0 every step that ran passed (skips are listed); 1 a step failed (summary.tsv
# names it); 2 bad usage.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGE_NAMES=(tests plan memcheck racecheck synccheck resnet50 vgg16 bert profile variants llama)
STAGE_LIMIT=${GPU_CHECK_STAGE_LIMIT:-570}  # seconds a stage may take: its steps run under `timeout` for what is left of it

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die_usage() { echo "gpu-check: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }

stages="" out="" build="" dry=0 repeats=3 packed=0 deadline=0 archive=""
while [ $# -gt 0 ]; do
  case $1 in
    --stage) [ $# -ge 2 ] || die_usage "--stage needs a value"; stages="${stages:+$stages,}$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die_usage "--out needs a value"; out=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || die_usage "--build needs a value"; build=$2; shift 2 ;;
    --repeats) [ $# -ge 2 ] || die_usage "--repeats needs a value"; repeats=$2; shift 2 ;;
    --deadline) [ $# -ge 2 ] || die_usage "--deadline needs a value"; deadline=$2; shift 2 ;;
    --archive) [ $# -ge 2 ] || die_usage "--archive needs a file"; archive=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --packed) packed=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown argument '$1'" ;;
  esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die_usage "--repeats must be a positive integer (got '$repeats')"
[[ $deadline =~ ^[0-9]+$ ]] || die_usage "--deadline must be a number of seconds (got '$deadline')"
if [ -z "$stages" ]; then
  stages=$(seq -s, 1 ${#STAGE_NAMES[@]})
fi
IFS=, read -r -a chosen <<<"$stages"
for s in "${chosen[@]}"; do
  [[ $s =~ ^[1-9][0-9]?$ ]] && [ "$s" -le ${#STAGE_NAMES[@]} ] || die_usage "--stage takes 1..${#STAGE_NAMES[@]} (got '$s')"
done
out=${out:-gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
if [ -n "$archive" ]; then  # an absolute path outside the folder it holds
  [[ $archive = /* ]] || archive=$PWD/$archive
  o=$(cd "$(dirname "$out")" 2>/dev/null && pwd)/$(basename "$out")
  case $archive in "$o"/*) die_usage "--archive $archive is inside --out $out" ;; esac
fi

# The CUDA toolkit's tools (compute-sanitizer, nsys, ncu) where the toolkit is not on PATH.
for d in /usr/local/cuda/bin /usr/local/cuda/compute-sanitizer /opt/nvidia/nsight-systems/*/bin /opt/nvidia/nsight-compute/*; do
  [ -d "$d" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH=$PATH:$d ;; esac
done
export PATH
# The packed Open MPI's PMIx finds no compression plugin it can load and says so, a dozen lines
# per mpirun, in every log of a multi-rank step: harmless, silenced.
export PMIX_MCA_pcompress_base_silence_warning=1
# On the GPU machine a CUDA test that finds no usable device fails instead of skipping
# (tests/cuda/gpu_presence.h): a driver too old for the build's CUDA runtime looks like no GPU,
# and a stage whose every test skipped would read as a pass.
export DLPERF_REQUIRE_GPU=1

# Where the tests come from: a build tree with ctest, or the packed executables on PATH.
[ $packed = 1 ] && [ -n "$build" ] && die_usage "--packed and --build exclude each other"
if [ $packed = 0 ] && [ -z "$build" ] && [ -f "$ROOT/build-tests/CTestTestfile.cmake" ] && command -v ctest >/dev/null; then
  build=$ROOT/build-tests
fi
if [ -n "$build" ] && [ ! -f "$build/CTestTestfile.cmake" ]; then die_usage "--build $build is not a CMake build tree"; fi
test_exe() {  # the path of a CUDA test executable
  if [ -n "$build" ]; then echo "$build/tests/cuda/$1"; else command -v "$1" || echo "$1"; fi
}
TRAIN=${DLPERF_TRAIN:-$( [ -n "$build" ] && [ -x "$build/src/dlperf-train" ] && echo "$build/src/dlperf-train" || echo dlperf-train)}
REDUCE=$( [ -n "$build" ] && [ -x "$build/analysis/dlperf-reduce" ] && echo "$build/analysis/dlperf-reduce" || echo dlperf-reduce)
# The benches take a path: a packed dlperf-train is found on PATH here, not from the repository.
[[ $TRAIN = */* ]] || TRAIN=$(command -v "$TRAIN" || echo "$TRAIN")
export DLPERF_TRAIN=$TRAIN  # bench/vs_pytorch.sh runs the same one (the bench steps also name it)
SANITIZED_TESTS=(dlperf_cuda_cnn_conformance_test dlperf_cuda_bert_conformance_test dlperf_cuda_step_test dlperf_cuda_mapped_buffer_test)

failed=0 skipped=0 stage_t0=$(date +%s)
run_end=$(( deadline > 0 ? $(date +%s) + deadline : 0 ))  # --deadline: when everything stops
# step STAGE NAME COMMAND...: runs (or prints) one command, its output in $out/STAGE-NAME.log.
step() {
  local stage=$1 name=$2; shift 2
  if [ $dry = 1 ]; then printf 'stage %s %-24s %s\n' "$stage" "$name" "$*"; return 0; fi
  local log="$out/$stage-$name.log" t0 rc left
  t0=$(date +%s)
  left=$((STAGE_LIMIT - (t0 - stage_t0)))
  [ $left -ge 10 ] || left=10
  if [ "$run_end" -gt 0 ]; then
    if [ $((run_end - t0)) -lt 10 ]; then  # past --deadline: recorded, not run
      printf '%s\t%s\tskipped\t0\n' "$stage" "$name" >>"$out/summary.tsv"
      skipped=$((skipped + 1))
      return 0
    fi
    [ $((run_end - t0)) -lt $left ] && left=$((run_end - t0))
  fi
  echo "== stage $stage $name: $*" | tee "$log"
  if declare -F "$1" >/dev/null; then  # a function of this script (plan_check): timeout runs programs only
    timeout "$left" bash -c "$(declare -f "$1"); \"\$@\"" _ "$@" >>"$log" 2>&1
  else
    timeout "$left" "$@" >>"$log" 2>&1
  fi
  rc=$?
  printf '%s\t%s\t%s\t%s\n' "$stage" "$name" "$rc" "$(($(date +%s) - t0))" >>"$out/summary.tsv"
  # what the step measured, on the console too: the benches' rows and tables, training summaries
  # (and what remapping cost)
  grep -E '^ *\[repeat [0-9]+\]|^summary: |^throughput |^device memory remapped|^ *[a-z0-9_]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x$' "$log" | sed 's/^ */   /' || true
  if [ $rc -ne 0 ]; then
    failed=1
    echo "   FAILED (exit $rc): $log" >&2
    tail -5 "$log" >&2
  fi
  save_archive
  return $rc
}

# --archive: the folder as one .tar.gz, replaced whole (written aside, then renamed) so that a run
# killed mid-write leaves the previous step's archive intact.
save_archive() {
  [ -n "$archive" ] || return 0
  tar -C "$(dirname "$out")" -czf "$archive.part" "$(basename "$out")" && mv -f "$archive.part" "$archive" ||
    echo "gpu-check: could not write --archive $archive" >&2
}

# --plan-only output with a fallback or a reference kernel fails the step.
plan_check() {
  local out_file rc
  out_file=$(mktemp)
  "$@" >"$out_file" 2>&1
  rc=$?
  cat "$out_file"
  if [ $rc -eq 0 ] && grep -E '\(fallback\)|REFERENCE' "$out_file" >/dev/null; then
    echo "gpu-check: fallback or reference kernels planned:" >&2
    grep -E '\(fallback\)|REFERENCE' "$out_file" >&2
    rc=1
  fi
  rm -f "$out_file"
  return $rc
}

# A ZeRO run whose mapped chunks (the sharded master; under --zero 2 the gradients too) take
# turns in a pool mapped once (issue 25): a measured step that maps or unmaps a chunk fails the
# step, on every rank's line. A GPU without virtual memory management maps nothing in chunks and
# prints no such line (dlperf-train warns instead): passed, with a note.
remap_check() {
  local out_file rc lines
  out_file=$(mktemp)
  "$@" >"$out_file" 2>&1
  rc=$?
  cat "$out_file"
  lines=$(grep '^device memory remapped' "$out_file")
  if [ $rc -eq 0 ] && [ -z "$lines" ]; then
    echo "gpu-check: no remapping line: nothing was mapped in chunks (a GPU without virtual memory management?)" >&2
  elif [ $rc -eq 0 ] && grep -v 'a measured step 0\.0 chunk maps, 0\.0 unmaps' <<<"$lines" >&2; then
    echo "gpu-check: chunks mapped or unmapped in measured steps (above); they should take turns in a pool mapped once" >&2
    rc=1
  fi
  rm -f "$out_file"
  return $rc
}

# The command, then a failure unless gtest says that COUNT tests passed: a build without NCCL, or
# a filter that matches nothing, exits 0 with none run.
all_passed() {  # count command...
  local count=$1 out_file rc
  shift
  out_file=$(mktemp)
  "$@" >"$out_file" 2>&1
  rc=$?
  cat "$out_file"
  if [ $rc -eq 0 ] && ! grep -q "\[  PASSED  \] $count tests\?\." "$out_file"; then
    echo "gpu-check: expected $count tests to pass" >&2
    rc=1
  fi
  rm -f "$out_file"
  return $rc
}

# The same two-rank job once per variant (its extra arguments, split at spaces; "" for none):
# every run's replicas end bit-identical, and every variant's last loss is within the tolerance
# (a fraction) of the first variant's. Usage: same_training_check TOL VARIANT... -- COMMAND...
same_training_check() {
  local tol=$1 rc=0 dir last base="" v i=0 variants=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do variants+=("$1"); shift; done
  shift  # the --
  dir=$(mktemp -d)
  for v in "${variants[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086  # a variant's words are separate arguments
    "$@" $v >"$dir/$i" 2>&1 || { cat "$dir/$i"; echo "gpu-check: the run with '$v' failed" >&2; rc=1; continue; }
    grep -E '^zero: |^replicas: |^summary: |loss [0-9.]+ -> ' "$dir/$i"
    grep -q 'bit-identical on all 2 ranks' "$dir/$i" || { echo "gpu-check: '$v': the replicas differ" >&2; rc=1; }
    last=$(grep -oE 'loss [0-9.]+ -> [0-9.]+' "$dir/$i" | tail -1 | awk '{print $4}')
    if [ $i = 1 ]; then base=$last
    elif [ -z "$base" ] || [ -z "$last" ] || ! awk -v a="$last" -v b="$base" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t * b) }'; then
      echo "gpu-check: the run with '$v' ended at loss '$last', the one with '${variants[0]}' at '$base'" >&2
      rc=1
    fi
  done
  rm -rf "$dir"
  return $rc
}

stage_tests() {
  local comm_tests  # comm_mpi_tests' NCCL cases (packed: gpu-pack build-tests build-tests/tests/comm/comm_mpi_tests)
  if [ -n "$build" ]; then comm_tests=$build/tests/comm/comm_mpi_tests; else comm_tests=$(command -v comm_mpi_tests || echo comm_mpi_tests); fi
  if [ -n "$build" ]; then
    step 1 ctest-cuda ctest --test-dir "$build" -L cuda --output-on-failure --timeout 300
  else
    for t in dlperf_cuda_kernel_limits_test dlperf_cuda_conformance_test dlperf_cuda_cnn_conformance_test \
             dlperf_cuda_bert_conformance_test dlperf_cuda_llama_conformance_test dlperf_cuda_recompute_conformance_test \
             dlperf_cuda_train_conformance_test dlperf_cuda_step_test dlperf_cuda_real_shapes_test dlperf_cuda_mapped_buffer_test; do
      step 1 "${t#dlperf_cuda_}" "$(test_exe "$t")" --gtest_output="xml:$out/1-${t}.xml"
    done
    step 1 staged_mpi_np2 mpirun -np 2 --oversubscribe --bind-to none "$(test_exe cuda_staged_mpi_test)"
  fi
  # ZeRO-1 and -2 with the f32 master sharded in mapped device memory (and, stage 2, the
  # gradients; with --grad-accum 2 they take turns once per micro-batch), two ranks sharing the
  # GPU through the staged communicator: the summary's plan against the allocated peak, and no
  # chunk mapped in a measured step (remap_check; issue 25). A reduced Llama, a minute at most each.
  local z
  for z in 1 2 "2 --grad-accum 2"; do
    step 1 "zero${z// --grad-accum /-accum}-mapped-master-np2" remap_check mpirun -np 2 --oversubscribe --bind-to none "$TRAIN" --backend cuda --comm mpi \
      --model llama3_2_1b --precision bf16 --zero $z --llama-layers 4 --llama-hidden 1024 --llama-heads 16 --llama-kv-heads 4 \
      --llama-ffn 3584 --llama-vocab 8192 --seq-len 512 --batch-size 2 --iterations 12 --warmup 4
  done
  # NCCL's own path (set-up, events, allreduce, reduce-scatter, all-gather, the corrupt check,
  # abort) on one rank: the only NCCL a one-GPU machine can run (the multi-GPU steps are below).
  if [ $dry = 1 ] || [ -x "$comm_tests" ]; then
    step 1 nccl-communicator-np1 all_passed 2 mpirun -np 1 "$comm_tests" --gtest_filter='NcclCommunicator.*' --gtest_color=no
  else
    echo "gpu-check: comm_mpi_tests not found: pack it (gpu-pack build-tests build-tests/tests/comm/comm_mpi_tests)" >&2
  fi
  # --cuda-graph with a gradient exchange (the step's graphs cut at each bucket's start, the
  # buckets launched and joined between them), never run before: eager and replayed, within 1 %.
  step 1 graph-buckets-np2 same_training_check 0.01 "" "--cuda-graph" -- mpirun -np 2 --oversubscribe --bind-to none "$TRAIN" \
    --backend cuda --comm mpi --model resnet50 --precision fp16 --batch-size 32 --iterations 30 --warmup 10 --bucket-mb 4
  # BERT's LAMB sharded (--zero 1 and 2: each parameter's norms summed on the device, then over
  # the ranks) against replicated LAMB (--zero 0), two ranks sharing the GPU: within 2 %.
  step 1 bert-lamb-zero-np2 same_training_check 0.02 "--zero 0" "--zero 1" "--zero 2" -- mpirun -np 2 --oversubscribe --bind-to none "$TRAIN" --backend cuda --comm mpi \
    --model bert_base --precision fp32 --seq-len 128 --max-predictions 20 --bert-layers 2 --batch-size 8 --iterations 12 --warmup 4 \
    --bucket-mb 1
  # cuDNN's fused attention is dlperf's own graph of the pattern cuDNN's SDPA engines match
  # (sdpa_graph.cpp): its test again with cuDNN's error and warning log, which says why an
  # operation or engine was rejected where the graph does not plan. A few seconds.
  step 1 sdpa-cudnn-log env CUDNN_LOGERR_DBG=1 CUDNN_LOGWARN_DBG=1 CUDNN_LOGDEST_DBG=stderr \
    "$(test_exe dlperf_cuda_llama_conformance_test)" --gtest_filter='LlamaConformance.FusedAttention*'
  # NCCL needs a GPU per rank: only where there are two (the dry run lists the steps anyway)
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ $dry = 1 ] || [ "$gpus" -ge 2 ]; then
    if [ $dry = 1 ] || [ -x "$comm_tests" ]; then
      step 1 nccl-communicator mpirun -np 2 --bind-to none "$comm_tests" --gtest_filter='NcclCommunicator.*'
    else
      echo "gpu-check: comm_mpi_tests not found: pack it (gpu-pack build-tests build-tests/tests/comm/comm_mpi_tests)" >&2
    fi
    step 1 nccl-train-np2 mpirun -np 2 --bind-to none "$TRAIN" --backend cuda --comm nccl --model resnet50 --precision fp16 \
      --batch-size 64 --iterations 30 --warmup 10
  else
    echo "gpu-check: $gpus GPU(s): the NCCL steps need two or more"
  fi
}

stage_plan() {
  local m b p
  for m in resnet50:256 vgg16:128 bert_base:64; do
    b=${m#*:}; m=${m%%:*}
    for p in fp16 bf16 tf32 fp32; do
      step 2 "plan-$m-$p" plan_check "$TRAIN" --backend cuda --model "$m" --precision "$p" --batch-size "$b" --plan-only
    done
  done
  for h in 1024 5120; do  # BERT-large's width, and one past the 4,096 the layer-norm kernels once stopped at
    step 2 "plan-bert-hidden$h-fp16" plan_check "$TRAIN" --backend cuda --model bert_base --precision fp16 --batch-size 8 \
      --bert-hidden "$h" --bert-heads 16 --bert-intermediate $((4 * h)) --plan-only
  done
  # Llama 3.1 8B on 8 ranks, against this GPU's memory (the sharded f32 master in mapped chunks;
  # issue 25): "fits" on an 80 GB GPU
  step 2 plan-llama3_8b-zero1-8ranks plan_check "$TRAIN" --backend cuda --model llama3_8b --seq-len 8192 --batch-size 1 \
    --precision bf16 --zero 1 --recompute block --plan-only --plan-ranks 8
}

stage_sanitizer() {  # stage tool...
  local stage=$1 tool t; shift
  for tool in "$@"; do
    for t in "${SANITIZED_TESTS[@]}"; do
      # CudaStep.OutOfMemoryIsRecoverable fails a cudaMalloc on purpose, which the sanitizer
      # counts as an error: the rest of the step test runs under it.
      local only=()
      [ "$t" = dlperf_cuda_step_test ] && only=(--gtest_filter=-CudaStep.OutOfMemoryIsRecoverable)
      step "$stage" "$tool-${t#dlperf_cuda_}" compute-sanitizer --tool "$tool" --error-exitcode 1 "$(test_exe "$t")" "${only[@]}"
    done
  done
}

stage_bench() {  # stage model batch
  step "$1" "vs-pytorch-$2" env DLPERF_TRAIN="$TRAIN" "$ROOT/bench/vs_pytorch.sh" --device cuda --model "$2" --batch-size "$3" \
    --precisions fp16,bf16,tf32 --repeats "$repeats" --log-dir "$out/$1-$2-runs"
}

# BERT's ratio above is against BertForPreTraining as users run it, its MLM head over all 128
# tokens; dlperf (as NVIDIA's BERT) projects only the 20 masked ones. The same PyTorch model
# with its head on the gathered masked rows (--mlm-head masked) is the like-for-like figure.
stage_bert_like_for_like() {
  local p
  for p in fp16 bf16 tf32; do
    step 8 "pytorch-bert_base-$p-mlm-masked" env -u LD_LIBRARY_PATH python3 "$ROOT/bench/pytorch_cuda_train.py" --model bert_base \
      --precision "$p" --batch-size 64 --mlm-head masked
  done
}

profile_one() {  # name dlperf-train args...
  local name=$1; shift
  if command -v nsys >/dev/null || [ $dry = 1 ]; then
    step 9 "nsys-$name" nsys profile --force-overwrite true -o "$out/9-$name" "$TRAIN" "$@"
    step 9 "kernels-$name" nsys stats --report cuda_gpu_kern_sum --format csv --output "$out/9-$name" "$out/9-$name.nsys-rep"
  else  # ncu replays each kernel alone: the measured steps only (dlperf-train starts the
    # profiler at the first of them), the GPU's clocks and caches left as they run
    step 9 "ncu-$name" ncu --profile-from-start off --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      --print-summary per-kernel "$TRAIN" "$@"
  fi
}

# PyTorch's kernels on the same GPU, from CUPTI over a few steps after its timed ones
# (bench/pytorch_cuda_train.py --profile-kernels): the other side of profile_one's summary.
pytorch_kernels() {  # name pytorch_cuda_train.py args...
  local name=$1; shift
  step 9 "pytorch-kernels-$name" env -u LD_LIBRARY_PATH python3 "$ROOT/bench/pytorch_cuda_train.py" "$@" --iterations 10 \
    --warmup 10 --profile-kernels 2 --profile-csv "$out/9-pytorch-kernels-$name.csv"
}

# The op-level breakdown dlperf records itself (CUDA events around every op's forward and
# backward over 10 measured steps): cheap, and it names each op's cuDNN engine beside its time.
ops_one() {  # name dlperf-train args...
  local name=$1; shift
  [ $dry = 1 ] || rm -f "$out/9-ops-$name.h5"  # --output appends: one run per file
  step 9 "ops-run-$name" "$TRAIN" "$@" --iterations 25 --warmup 10 --profile-ops 10 --output "$out/9-ops-$name.h5" &&
    step 9 "ops-$name" "$REDUCE" --ops --ops-top 25 "$out/9-ops-$name.h5"
}

stage_profile() {
  ops_one resnet50-fp16 --backend cuda --model resnet50 --precision fp16 --batch-size 256
  ops_one resnet50-bf16 --backend cuda --model resnet50 --precision bf16 --batch-size 256
  ops_one resnet50-tf32 --backend cuda --model resnet50 --precision tf32 --batch-size 256
  ops_one vgg16-fp16 --backend cuda --model vgg16 --precision fp16 --batch-size 128
  ops_one bert-fp16 --backend cuda --model bert_base --precision fp16 --batch-size 64
  ops_one llama3_2_1b-bf16 --backend cuda --model llama3_2_1b --precision bf16 --seq-len 8192 --batch-size 1
  # two measured steps each (ncu's replay of one kernel at a time is slow)
  profile_one resnet50-fp16 --backend cuda --model resnet50 --precision fp16 --batch-size 256 --iterations 12 --warmup 10
  pytorch_kernels resnet50-fp16 --model resnet50 --precision fp16 --batch-size 256
  # the row at parity with PyTorch (0.98x on an H200, 2026-11-27): where its kernels' time goes
  profile_one resnet50-tf32 --backend cuda --model resnet50 --precision tf32 --batch-size 256 --iterations 12 --warmup 10
  pytorch_kernels resnet50-tf32 --model resnet50 --precision tf32 --batch-size 256
  profile_one bert-fp16 --backend cuda --model bert_base --precision fp16 --batch-size 64 --iterations 12 --warmup 10
}

# dlperf-train's "summary: throughput X samples/s" of each run of stage 10, and the median per
# variant (the runs of one repeat are interleaved, so a drift of the GPU favours none).
variants_table() {
  local v
  printf 'variant\truns\tmedian samples/s\n' >"$out/10-variants.tsv"
  for v in rn50-fp16-eager rn50-fp16-cuda-graph rn50-fp16-data-on-device bert-fp16-eager bert-fp16-cuda-graph; do
    grep -h -o 'summary: throughput [0-9.]*' "$out"/10-"$v"-*.log 2>/dev/null | awk '{print $3}' | sort -g |
      awk -v v="$v" '{a[NR] = $1} END {if (NR) printf "%s\t%d\t%s\n", v, NR, (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'
  done >>"$out/10-variants.tsv"
  cat "$out/10-variants.tsv"
}

# --repeats rounds of one model in fp16, eager and each variant given (--cuda-graph, ...) in
# turn within a round, so that a drift of the GPU favours none.
variant_runs() {  # name model batch variant...
  local name=$1 model=$2 batch=$3 r v extra
  shift 3
  for r in $(seq 1 "$repeats"); do
    for v in eager "$@"; do
      extra=()
      [ "$v" = eager ] || extra=("--$v")
      step 10 "$name-$v-$r" "$TRAIN" --backend cuda --model "$model" --precision fp16 --batch-size "$batch" --iterations 70 --warmup 20 \
        "${extra[@]}"
    done
  done
}

stage_variants() {
  variant_runs rn50-fp16 resnet50 256 cuda-graph data-on-device
  step 10 rn50-fp16-find-max-batch "$TRAIN" --backend cuda --model resnet50 --precision fp16 --batch-size 256 --find-max-batch
  # PyTorch's largest batch by the same search, a fresh process per attempt (bench/pytorch_max_batch.py)
  step 10 rn50-fp16-pytorch-max-batch env -u LD_LIBRARY_PATH python3 "$ROOT/bench/pytorch_max_batch.py" --model resnet50 --precision fp16 \
    --batch-size 256
  # BERT's step is many short kernels (a 21 ms step at b64 on an H100): where replaying the
  # step from graphs (LAMB and dropout captured, since 2026-11-28) can show.
  variant_runs bert-fp16 bert_base 64 cuda-graph
  [ $dry = 1 ] || variants_table
}

stage_llama() {
  step 11 plan-llama3_2_1b-bf16 plan_check "$TRAIN" --backend cuda --model llama3_2_1b --precision bf16 --seq-len 8192 --batch-size 1 \
    --plan-only
  # --deterministic keeps only engines without cuDNN's non-determinism note: does the fused
  # attention's backward (dQ accumulated with atomics) still plan, or fall back to cuBLAS (a
  # warning in the log)? Reported, not failed: cuDNN's deterministic backward is another graph.
  step 11 plan-llama3_2_1b-bf16-deterministic "$TRAIN" --backend cuda --model llama3_2_1b --precision bf16 --seq-len 8192 \
    --batch-size 1 --plan-only --deterministic
  step 11 vs-pytorch-llama3_2_1b env DLPERF_TRAIN="$TRAIN" "$ROOT/bench/llama_vs_pytorch.sh" --backend cuda --llama3-2-1b --precision bf16 --repeats "$repeats" \
    --iterations 10 --warmup 3 --log-dir "$out/11-llama-runs"
  # cuDNN's fused SDPA against the cuBLAS products it replaces (--attention): tokens/s and the
  # memory of each in the summary lines.
  local attention
  for attention in fused unfused; do
    step 11 "llama3_2_1b-bf16-attention-$attention" "$TRAIN" --backend cuda --model llama3_2_1b --precision bf16 --seq-len 8192 \
      --batch-size 1 --iterations 10 --warmup 3 --attention "$attention"
  done
  # The step replayed from CUDA graphs (AdamW's update captured too, since 2026-11-28): against
  # llama3_2_1b-bf16-attention-fused above, the same run eager, what the launches cost.
  step 11 llama3_2_1b-bf16-attention-fused-cuda-graph "$TRAIN" --backend cuda --model llama3_2_1b --precision bf16 --seq-len 8192 \
    --batch-size 1 --iterations 10 --warmup 3 --attention fused --cuda-graph
  # ZeRO at a real model's scale (issue 25): two ranks sharing the GPU through --comm mpi, the
  # f32 master (and under --zero 2 the gradients) in mapped chunks. The summary line gives what
  # remapping costs a measured step (chunk maps, unmaps, ms in the driver): at 1.2 B parameters
  # about 1,200 chunks of the master came and went each step (Llama 3.1 8B on 8 ranks, ~14,000)
  # until --zero 1's chunks took turns in a pool mapped once: a measured step that maps one now
  # fails (remap_check), --zero 2 with --grad-accum 2 included.
  # The all-gathers run into the next forward by default; zero1-gather-step waits for them at
  # the step's end, for the difference.
  local z name
  for z in 1 2 "2 --grad-accum 2" "1 --zero-gather step"; do
    name=${z// --zero-gather /-gather-}
    step 11 "llama3_2_1b-bf16-zero${name// --grad-accum /-accum}-np2" remap_check mpirun -np 2 --oversubscribe --bind-to none "$TRAIN" --backend cuda --comm mpi \
      --model llama3_2_1b --precision bf16 --zero $z --seq-len 2048 --batch-size 1 --iterations 8 --warmup 3
  done
  # The head over chunks of tokens on the GPU: tf32 logits of 8,192 tokens are 4.2 GB of f32, so
  # --logits-chunk auto runs 4 chunks of 2,048; against the whole head (the cost of recomputing
  # three chunks' logits, and the memory it saves: the summary lines).
  local chunk
  for chunk in auto 0; do
    step 11 "llama3_2_1b-tf32-logits-chunk-$chunk" "$TRAIN" --backend cuda --model llama3_2_1b --precision tf32 --seq-len 8192 \
      --batch-size 1 --iterations 10 --warmup 3 --logits-chunk "$chunk"
  done
}

if [ $dry = 0 ]; then
  mkdir -p "$out" || die_usage "cannot create $out"
  printf 'stage\tstep\texit\tseconds\n' >"$out/summary.tsv"
  {
    echo "date: $(date -u +%FT%TZ)"
    echo "revision: $(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    echo "tests from: ${build:-packed executables on PATH}"
    echo "dlperf-train: $(command -v "$TRAIN" || echo "$TRAIN")"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi: not found"
    nvcc --version 2>/dev/null | tail -1 || true
    "$TRAIN" --version 2>&1 | head -3 || true
  } >"$out/environment.txt"
  command -v "$TRAIN" >/dev/null || [ -x "$TRAIN" ] || { echo "gpu-check: dlperf-train not found (source .gpu/env.sh, or --build DIR)" >&2; exit 2; }
fi

for s in "${chosen[@]}"; do
  name=${STAGE_NAMES[$((s - 1))]}
  [ $dry = 1 ] && echo "# stage $s: $name" || echo "== stage $s: $name ($(date -u +%T))"
  stage_t0=$(date +%s)
  case $name in
    tests) stage_tests ;;
    plan) stage_plan ;;
    memcheck) stage_sanitizer 3 memcheck ;;
    racecheck) stage_sanitizer 4 racecheck ;;
    synccheck) stage_sanitizer 5 synccheck ;;
    resnet50) stage_bench 6 resnet50 256 ;;
    vgg16) stage_bench 7 vgg16 128 ;;
    bert) stage_bench 8 bert_base 64; stage_bert_like_for_like ;;
    profile) stage_profile ;;
    variants) stage_variants ;;
    llama) stage_llama ;;
  esac
done
[ $dry = 1 ] && exit 0
# The memory plan against each run's measured peaks (issue 25): the summary lines' figures, one
# per log (plan = formulas + what building the model allocated; allocated = the backend's counter).
grep -H -o 'peak memory [0-9]* MiB (allocated [0-9.]* MiB, plan [0-9.]* MiB)' "$out"/*.log 2>/dev/null | sed "s|^$out/||" >"$out/memory.txt" || true
save_archive
[ $skipped -eq 0 ] || echo "gpu-check: $skipped steps skipped at --deadline (summary.tsv lists them)"
echo "gpu-check: everything is in $out (summary.tsv)${archive:+, and in $archive}"
exit $failed
