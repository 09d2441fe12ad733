#!/usr/bin/env bash
# scripts/gpu-check.sh --dry-run on a machine without a GPU: the stage list, in order, each with
# its commands (each dlperf-train command parses, with dlperf-train as $2); the plan stage
# covers every model x precision at its benchmark batch and fails on fallbacks; bad usage exits
# 2; nothing is written. A few seconds.
set -euo pipefail
script=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$script" --dry-run)
stages=$(grep '^# stage' <<<"$out" | sed 's/^# stage //' | tr '\n' ' ')
[ "$stages" = "1: tests 2: plan 3: memcheck 4: racecheck 5: synccheck 6: resnet50 7: vgg16 8: bert 9: profile 10: variants 11: llama " ] ||
  fail "stage list: '$stages'"
for s in 1 2 3 4 5 6 7 8 9 10 11; do grep -q "^stage $s " <<<"$out" || fail "stage $s has no command"; done
for v in "" " --cuda-graph" " --data-on-device"; do
  [ "$(grep -c -- "--model resnet50 --precision fp16 --batch-size 256 --iterations 70 --warmup 20$v\$" <<<"$out")" = 3 ] ||
    fail "stage 10: three repeats of resnet50 fp16${v:- eager}"
done
for v in "" " --cuda-graph"; do
  [ "$(grep -c -- "--model bert_base --precision fp16 --batch-size 64 --iterations 70 --warmup 20$v\$" <<<"$out")" = 3 ] ||
    fail "stage 10: three repeats of bert_base fp16${v:- eager}"
done
grep -q -- '--find-max-batch' <<<"$out" || fail "stage 10 finds the largest batch"
grep -q -- '^stage 10 rn50-fp16-pytorch-max-batch .*pytorch_max_batch.py --model resnet50 --precision fp16' <<<"$out" ||
  fail "stage 10 finds PyTorch's largest batch"
grep -q -- '-L cuda\|dlperf_cuda_conformance_test' <<<"$out" || fail "stage 1 runs the cuda tests"
for m in resnet50:256 vgg16:128 bert_base:64; do
  for p in fp16 bf16 tf32 fp32; do
    grep -q -- "--model ${m%%:*} --precision $p --batch-size ${m#*:} --plan-only" <<<"$out" || fail "no plan of $m $p"
  done
done
grep -q -- '--bert-hidden 5120 --bert-heads 16 --bert-intermediate 20480 --plan-only' <<<"$out" || fail "no plan of BERT hidden 5120"
for t in memcheck racecheck synccheck; do grep -q -- "compute-sanitizer --tool $t" <<<"$out" || fail "no $t"; done
grep -q -- 'vs_pytorch.sh --device cuda --model resnet50 --batch-size 256 --precisions fp16,bf16,tf32' <<<"$out" || fail "resnet50 bench"
grep -q -- 'vs_pytorch.sh --device cuda --model vgg16 --batch-size 128' <<<"$out" || fail "vgg16 bench"
grep -q -- 'vs_pytorch.sh --device cuda --model bert_base --batch-size 64' <<<"$out" || fail "bert bench"
grep -q -- '--model resnet50 --precision fp16' <<<"$(grep '^stage 9' <<<"$out")" || fail "profile of resnet50 fp16"
grep -q -- '--model bert_base --precision fp16' <<<"$(grep '^stage 9' <<<"$out")" || fail "profile of bert fp16"
for m in "resnet50 --precision fp16" "resnet50 --precision bf16" "resnet50 --precision tf32" "vgg16 --precision fp16" "bert_base --precision fp16" \
  "llama3_2_1b --precision bf16 --seq-len 8192"; do
  grep -q -- "--model $m .*--profile-ops 10" <<<"$(grep '^stage 9 ops-run' <<<"$out")" || fail "op breakdown of $m"
done
[ "$(grep -c '^stage 9 ops-.*dlperf-reduce --ops' <<<"$out")" = 6 ] || fail "dlperf-reduce --ops after each op profile"
grep -q -- '--model llama3_2_1b --precision bf16 --seq-len 8192 --batch-size 1 --plan-only' <<<"$out" || fail "no plan of llama3_2_1b"
grep -q -- 'llama_vs_pytorch.sh --backend cuda --llama3-2-1b --precision bf16' <<<"$out" || fail "llama3_2_1b bench"
for a in fused unfused; do
  grep -q -- "--model llama3_2_1b --precision bf16 --seq-len 8192 --batch-size 1 --iterations 10 --warmup 3 --attention $a\$" <<<"$out" ||
    fail "stage 11 runs --attention $a"
done

only=$("$script" --dry-run --stage 2)
[ "$(grep -c '^# stage' <<<"$only")" = 1 ] || fail "--stage 2 runs one stage"
[ "$(grep -c '^stage 2 plan-' <<<"$only")" = 15 ] || fail "--stage 2: 12 model x precision plans, 2 BERT widths and Llama 3.1 8B on 8 ranks"
grep -q '^stage 2 plan-llama3_8b-zero1-8ranks .*--zero 1 --recompute block --plan-only --plan-ranks 8' <<<"$only" ||
  fail "--stage 2 plans Llama 3.1 8B on 8 ranks"

# Every dlperf-train command of the stages parses: without a GPU each stops at "no CUDA device"
# (exit 2), never at an option error; a plan for other ranks (--plan-ranks) needs no device and
# prints it. Skipped where a GPU is visible (the commands would run).
train=${2:-}
if [ -n "$train" ] && ! nvidia-smi -L >/dev/null 2>&1; then
  grep -o 'dlperf-train --backend cuda.*' <<<"$out" | sed 's/^dlperf-train //' | while read -r line; do
    set +e
    # shellcheck disable=SC2086
    msg=$("$train" $line 2>&1)
    rc=$?
    set -e
    if [[ $line == *--plan-ranks* ]]; then
      [ $rc = 0 ] && grep -q '^memory plan per rank (8 ranks' <<<"$msg" || fail "dlperf-train $line: exit $rc: $msg"
    else
      [ $rc = 2 ] && grep -q 'no CUDA device' <<<"$msg" || fail "dlperf-train $line: exit $rc: $msg"
    fi
  done
fi

# packed executables (../shared/tools/gpu-pack): each CUDA test by name on PATH, the two-rank test under mpirun
packed=$("$script" --dry-run --packed --stage 1)
for t in kernel_limits conformance cnn_conformance bert_conformance train_conformance step real_shapes mapped_buffer; do
  grep -q "dlperf_cuda_${t}_test --gtest_output=xml:" <<<"$packed" || fail "packed stage 1 runs dlperf_cuda_${t}_test"
done
grep -q 'mpirun -np 2 .*cuda_staged_mpi_test' <<<"$packed" || fail "packed stage 1 runs the two-rank test"
grep -q 'zero1-mapped-master-np2 .*mpirun -np 2 .*dlperf-train --backend cuda --comm mpi .*--zero 1' <<<"$packed" ||
  fail "stage 1 runs ZeRO-1 with the mapped master on two ranks"
for z in "1" "2" "2 --grad-accum 2"; do
  grep -q "^stage 1 zero${z// --grad-accum /-accum}-mapped-master-np2  *remap_check mpirun -np 2 .*dlperf-train --backend cuda --comm mpi .*--zero $z " <<<"$packed" ||
    fail "stage 1 runs --zero $z on two ranks, checking that measured steps map no chunk"
  grep -q "^stage 11 llama3_2_1b-bf16-zero${z// --grad-accum /-accum}-np2  *remap_check mpirun -np 2 .*--zero $z " <<<"$out" ||
    fail "stage 11 runs --zero $z on two ranks, checking that measured steps map no chunk"
done
grep -q "sdpa-cudnn-log .*CUDNN_LOGERR_DBG=1 .*dlperf_cuda_llama_conformance_test --gtest_filter=LlamaConformance.FusedAttention" <<<"$packed" ||
  fail "stage 1 reruns the fused-attention test with cuDNN's log"
grep -q 'ctest' <<<"$packed" && fail "packed stage 1 needs no ctest"
grep -q "comm_mpi_tests --gtest_filter=NcclCommunicator" <<<"$packed" || fail "stage 1 lists the NCCL communicator test"
grep -q -- "mpirun -np 2 --bind-to none .*dlperf-train --backend cuda --comm nccl" <<<"$packed" || fail "stage 1 lists a 2-rank NCCL run"

# packed, dlperf-train found on PATH: the benches get its path (they take DLPERF_TRAIN as a path;
# a bare name sent them looking in the repository, and a GPU session's comparison never ran)
mkdir "$work/bin"
printf '#!/bin/sh\nexit 0\n' >"$work/bin/dlperf-train"
chmod +x "$work/bin/dlperf-train"
benches=$(PATH=$work/bin:$PATH "$script" --dry-run --packed --stage 6,8,11 | grep -E 'vs_pytorch.sh|llama_vs_pytorch.sh')
[ "$(grep -c "env DLPERF_TRAIN=$work/bin/dlperf-train " <<<"$benches")" = 3 ] || fail "packed benches do not get dlperf-train's path: $benches"

# the plan check itself: a fallback or a reference kernel in --plan-only output fails the step
fake=$work/dlperf-train
printf '#!/bin/sh\necho "  conv1  forward  (256,4,224,224)  cudnn_legacy algo 1 (fallback)"\n' >"$fake"
chmod +x "$fake"
if DLPERF_TRAIN=$fake "$script" --stage 2 --out "$work/o" >/dev/null 2>&1; then fail "a fallback passed the plan stage"; fi
grep -q "plan-resnet50-fp16	1	" "$work/o/summary.tsv" || fail "the fallback is in summary.tsv"
printf '#!/bin/sh\necho "kernels: 3 planned, 0 reference"\necho "summary: throughput 7.50 samples/s"\n' >"$fake"
DLPERF_TRAIN=$fake "$script" --stage 2 --out "$work/p" --archive p.tgz >"$work/p.log" 2>&1 || fail "a clean plan failed the plan stage"
# each step's results reach the console; --archive holds the whole folder (a device brings back few files)
[ "$(grep -c '^   summary: throughput 7.50 samples/s' "$work/p.log")" = 15 ] || fail "the steps' summary lines are not on the console"
[ "$(tar -tzf "$work/p.tgz" | grep -c '^p/2-plan-.*\.log$')" = 15 ] || fail "--archive lacks the logs: $(tar -tzf "$work/p.tgz")"
tar -xzOf "$work/p.tgz" p/summary.tsv | grep -q "plan-bert_base-tf32	0	" || fail "--archive lacks summary.tsv"
[ ! -e "$work/p.tgz.part" ] || fail "--archive left its .part"

# the remapping check: a measured step that maps a chunk fails the step, one that maps none
# passes, and so does a run that maps nothing in chunks (no remapping line: a GPU without
# virtual memory management). Stage 11 through a stand-in mpirun that runs the command itself.
printf '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != none ]; do shift; done\nshift\nexec "$@"\n' >"$work/bin/mpirun"
cat >"$fake" <<'FAKE'
#!/bin/sh
case "$*" in
  *"--zero 2 --grad-accum 2"*) n=2.0 ;;
  *"--zero 2 "*) exit 0 ;;
  *) n=0.0 ;;
esac
echo "device memory remapped (this rank): a measured step $n chunk maps, $n unmaps, 0.0 creates, 0.0 releases, 0.0 waits for queued work, 0.00 ms in the driver; whole run 40 chunk maps, 0 unmaps, 40 creates, 0 releases, 0 waits for queued work; 0.010 s in the driver"
FAKE
chmod +x "$work/bin/mpirun" "$fake"
PATH=$work/bin:$PATH DLPERF_TRAIN=$fake "$script" --stage 11 --out "$work/m" >"$work/m.log" 2>&1 && fail "a remapping measured step passed stage 11"
for row in "zero1-np2	0" "zero1-gather-step-np2	0" "zero2-np2	0" "zero2-accum2-np2	1"; do
  grep -q "^11	llama3_2_1b-bf16-$row	" "$work/m/summary.tsv" || fail "remap check: no row '$row' in $(cat "$work/m/summary.tsv")"
done
grep -q 'chunks mapped or unmapped in measured steps' "$work/m/11-llama3_2_1b-bf16-zero2-accum2-np2.log" || fail "the remap failure does not say why"

# --deadline: a step with under 10 s left is not run but listed as skipped; the stage order is
# the one given; skips alone are not a failure.
DLPERF_TRAIN=$fake "$script" --stage 2,1 --deadline 3 --out "$work/q" >"$work/q.log" 2>&1 || fail "skips failed the run: $(cat "$work/q.log")"
[ "$(grep -c '	skipped	' "$work/q/summary.tsv")" = "$(($(wc -l <"$work/q/summary.tsv") - 1))" ] || fail "--deadline ran a step"
sed -n 2p "$work/q/summary.tsv" | grep -q '^2	plan-' || fail "--stage 2,1 did not start with stage 2"
grep -q 'steps skipped at --deadline' "$work/q.log" || fail "no line on the skipped steps"
for bad in "--stage 0" "--stage 12" "--stage x" "--repeats 0" "--bogus" "--packed --build /nonexistent" "--deadline soon" \
  "--out $work/r --archive $work/r/a.tgz" "--archive"; do
  set +e
  # shellcheck disable=SC2086
  "$script" --dry-run $bad >/dev/null 2>&1
  rc=$?
  set -e
  [ $rc = 2 ] || fail "'$bad' exits $rc, not 2"
done
for f in "$work"/* "$work"/.[!.]*; do
  case ${f##*/} in bin | dlperf-train | m | m.log | o | p | p.log | p.tgz | q | q.log | '*' | '.[!.]*') ;; *) fail "the dry run wrote $f" ;; esac
done
echo "gpu-check dry run: ok"
