#!/usr/bin/env bash
# Bad input to dlperf-train: one line on stderr naming the flag, exit code 2, no output file.
# Usage: bad_input_test.sh DLPERF_TRAIN
set -u
train=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0

expect_usage_error() {  # flag-to-mention, then the arguments
  local mention=$1
  shift
  local out="$dir/out.h5"
  "$train" "$@" --output "$out" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  local lines
  lines=$(wc -l <"$dir/stderr")
  if [ "$rc" -ne 2 ]; then
    echo "FAIL ($*): exit $rc, expected 2"; failures=$((failures + 1))
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL ($*): $lines lines on stderr, expected 1:"; cat "$dir/stderr"; failures=$((failures + 1))
  elif ! grep -q -- "$mention" "$dir/stderr"; then
    echo "FAIL ($*): stderr does not mention '$mention':"; cat "$dir/stderr"; failures=$((failures + 1))
  elif [ -e "$out" ] || [ -e "$out.lock" ]; then
    echo "FAIL ($*): created $out"; failures=$((failures + 1))
  else
    echo "ok   ($*): $(cat "$dir/stderr")"
  fi
}

expect_usage_error --model --model resnet101
expect_usage_error --backend --backend tpu
expect_usage_error --precision --precision fp8
# tf32 and fp16 are CUDA precisions: the CPU backend says so in the fp16 error's style
expect_usage_error "--precision tf32 is for the cuda backend" --backend cpu --precision tf32
expect_usage_error "--precision fp16 is for the cuda backend" --backend cpu --precision fp16
expect_usage_error "--precision fp16 is for the cuda backend" --backend cpu --precision amp
expect_usage_error --batch-size --batch-size 0
expect_usage_error --batch-size --batch-size -4
expect_usage_error --iterations --iterations 0
expect_usage_error --warmup --iterations 10 --warmup 10
expect_usage_error --image-size --image-size 16
expect_usage_error --threads --threads 1025  # 0 is automatic (tests/cli/ranks_agree_test.sh)
expect_usage_error --threads --threads -1
expect_usage_error --batch-size --batch-size many
expect_usage_error --no-such-flag --no-such-flag
expect_usage_error --lr --lr 0
expect_usage_error --resnet-blocks --resnet-blocks 3,4,6
expect_usage_error --bucket-mb --bucket-mb 0
# Not a number or not finite: refused by name, not a run failed as diverged at its first step.
expect_usage_error "--lr must be positive and finite (got inf)" --lr inf
expect_usage_error "--momentum must be in \[0, 1) (got nan)" --momentum nan
expect_usage_error "--weight-decay must be 0 or more, finite (got nan)" --weight-decay nan
expect_usage_error "--label-smoothing must be in \[0, 1) (got nan)" --label-smoothing nan
expect_usage_error "--clip-grad-norm must be 0 (off) or positive and finite (got inf)" --clip-grad-norm inf
expect_usage_error "--bucket-mb must be from 0.0009765625 (1 KiB) to 1048576 (got inf)" --bucket-mb inf
# Below one element a bucket reached an internal check on 2 ranks; 100,000 threads crashed in
# oneDNN and 30,000 never stepped.
expect_usage_error "--bucket-mb must be from" --bucket-mb 1e-7
# As a float, 1e-50 became 0 and silently turned clipping off.
expect_usage_error "--clip-grad-norm 1e-50 is outside fp32's normal range" --clip-grad-norm 1e-50
expect_usage_error "--clip-grad-norm 1e+39 is outside fp32's normal range" --clip-grad-norm 1e39
# Sizes named by the options that shape them: 2^31 classes ended in an internal oneDNN error
# (exit 3) under --plan-only, and 10^7 BERT layers were blamed on --seq-len.
expect_usage_error "--num-classes 2147483648 with --resnet-width 64: the classifier" --num-classes 2147483648 --plan-only
expect_usage_error "--bert-layers 10000000 is more than 1000" --model bert_base --bert-layers 10000000
# --plan-only with --output exited 0 having written nothing.
expect_usage_error "--plan-only prints the plan and writes no trace: drop --output" --plan-only
expect_usage_error "--vgg-hidden 2147483648 with --vgg-width" --model vgg16 --vgg-hidden 2147483648 --plan-only
# Text the parser's types hid: an unset variable ran with the default; 1e-400 read as 0 turned
# the divergence check off; a warm-up as long as the run.
expect_usage_error "--optimizer was given an empty value" --optimizer ''
expect_usage_error "--max-loss-growth 1e-400 is too small: it would be read as 0" --max-loss-growth 1e-400
expect_usage_error "--weight-decay 1e-50 is too small: it would be read as 0" --weight-decay 1e-50
expect_usage_error "--lr-warmup 10 is not below --iterations 10" --iterations 10 --warmup 2 --lr-warmup 10
# A newline split the report's heading; 70,000 characters failed in HDF5 mid-run.
expect_usage_error "--variant 'a\\\\x0ab' holds a control character or invalid UTF-8" --variant "$(printf 'a\nb')"
# A byte that is not UTF-8 was stored, and the trace reader then refused the whole run.
expect_usage_error "--variant 'ab\\\\xffc' holds a control character or invalid UTF-8" --variant "$(printf 'ab\377c')"
expect_usage_error "--variant is 300 bytes long: at most 256" --variant "$(printf '%0300d' 0)"
# dlperf-reduce's CSV cell would run as a formula in a spreadsheet.
expect_usage_error "--variant '=HYPERLINK(1)' starts with '=', which a spreadsheet reads as a formula" --variant '=HYPERLINK(1)'
expect_usage_error "--variant '@x' starts with '@', which a spreadsheet reads as a formula" --variant=@x
expect_usage_error "--threads must be 0 (automatic) to 1024 per rank (got 100000)" --threads 100000
expect_usage_error "--loader-threads must be 0 (automatic) to 1024 (got 100000)" --data "$dir" --loader-threads 100000
# The loader's decoded batches held ahead: a billion grew until the OOM killer ended the run.
expect_usage_error "--prefetch 1000000000: the loader's 1000000002 batches of" --data "$dir" --prefetch 1000000000
expect_usage_error "--peak-tflops must be 0 (automatic) or positive and finite (got nan)" --model llama3_8b --peak-tflops nan
# Validation by meaning (issue 18 row 8): sizes no backend can hold, options the model ignores.
expect_usage_error --image-size --image-size 100000
expect_usage_error --batch-size --model bert_base --batch-size 100000000 --seq-len 512
expect_usage_error --seq-len --seq-len 64
expect_usage_error --bert-layers --bert-layers 2
expect_usage_error --dropout --dropout 0.2
expect_usage_error --image-size --model bert_base --image-size 32
expect_usage_error --resnet-width --model vgg16 --resnet-width 8
expect_usage_error --momentum --model bert_base --momentum 0.9
expect_usage_error --lock-timeout --lock-timeout -1
expect_usage_error "--timeout must be 1 to 604800 seconds (7 days; got 2147483647)" --timeout 2147483647
expect_usage_error --max-loss-growth --max-loss-growth 0.5
# Strict numbers and lists, the class not the case (issue 27 item 11): trailing text, a fifth
# stage, an empty part, a wrapped negative, an overflow, a stray positional word.
expect_usage_error --resnet-blocks --resnet-blocks 1,1,1,1,1
expect_usage_error --resnet-blocks --resnet-blocks 1,1,1,1x
expect_usage_error --resnet-blocks --resnet-blocks 1,,1,1
expect_usage_error --resnet-blocks --resnet-blocks 1,1,1,1,
expect_usage_error --resnet-blocks --resnet-blocks " 1,1,1,1"
expect_usage_error --resnet-blocks --resnet-blocks 1,1,1,99999999999
expect_usage_error --seed --seed -1
expect_usage_error --seed --seed 12x
expect_usage_error --seed --seed 99999999999999999999
expect_usage_error --iterations --iterations 99999999999999999999
expect_usage_error --iterations --iterations 10x
expect_usage_error --batch-size --batch-size 1e3
expect_usage_error --threads --threads 2.5
expect_usage_error --lr --lr 0.1x
expect_usage_error --max-bad-samples --max-bad-samples 5x
expect_usage_error --max-bad-samples --max-bad-samples 1%%
expect_usage_error "unexpected argument 'extra-word'" --iterations 3 extra-word
expect_usage_error "unexpected argument 'extra'" --pin-threads extra

# Issue 25: accumulation, the sharded optimizer and the memory plan
expect_usage_error --grad-accum --grad-accum 0
expect_usage_error "--zero must be" --zero 3
expect_usage_error "--zero-gather 'layer' is unknown" --zero 1 --zero-gather layer
expect_usage_error "--zero-gather step applies to --zero 1 and 2" --zero-gather step
expect_usage_error "--cuda-graph and --zero 2 exclude each other" --backend cuda --zero 2 --cuda-graph
# The capture comes at the last warm-up iteration, never the first: with fewer than 2 it was measured.
expect_usage_error "--cuda-graph needs --warmup 2 or more (got 1)" --backend cuda --cuda-graph --warmup 1
# BERT's vocabulary starts with its 5 special tokens: 5 or fewer ids leave no word to draw
expect_usage_error "--bert-vocab 5 is too small: the vocabulary holds 5 special tokens" --model bert_base --bert-vocab 5
expect_usage_error "--recompute 'layer' is unknown" --recompute layer
expect_usage_error "vgg16 has no blocks" --model vgg16 --recompute block
expect_usage_error "--plan-ranks" --plan-ranks 4
# A model far beyond the memory is refused before anything is allocated (was "out of memory", exit 3)
expect_usage_error "the run needs at least" --num-classes 1000000 --memory-limit-mb 4096
expect_usage_error "--num-classes must be at least 2" --num-classes 1  # a loss of 0 that learns nothing
expect_usage_error "--memory-limit-mb" --memory-limit-mb 100 --resnet-width 64 --image-size 64 --batch-size 2 --iterations 2 --warmup 1
# srun with an --mpi plugin the MPI library does not speak starts every task as a lone rank:
# each trained alone and added a one-device run to the results.
SLURM_STEP_NUM_TASKS=8 expect_usage_error "MPI started this process as a job of its own (1 rank), but its launcher started 8 (SLURM_STEP_NUM_TASKS)" \
  --iterations 3 --warmup 1
PMI_SIZE=2 expect_usage_error "but its launcher started 2 (PMI_SIZE)" --iterations 3 --warmup 1
# Open MPI's mpirun -np 1 inside a larger srun step (its daemons' step): the launcher says 1.
OMPI_COMM_WORLD_SIZE=1 SLURM_STEP_NUM_TASKS=4 "$train" --threads 1 --resnet-blocks 1,1,1,1 --resnet-width 8 --image-size 32 \
  --batch-size 2 --iterations 2 --warmup 1 --print-every 0 >/dev/null 2>"$dir/stderr" ||
  { echo "FAIL: mpirun -np 1 inside an srun step refused: $(cat "$dir/stderr")"; failures=$((failures + 1)); }

# Options of cuDNN's engines did nothing on the cpu backend, and the trace recorded them.
expect_usage_error "--conv-autotune needs --backend cuda" --conv-autotune
expect_usage_error "--deterministic needs --backend cuda" --deterministic
# A count libgomp cannot read: it warned and the run took every CPU, not what the module meant.
# (libgomp's own warning comes first, printed as the library loads: our line is the last.)
for omp in abc 0 2000; do
  OMP_NUM_THREADS=$omp "$train" --iterations 3 --warmup 1 --output "$dir/omp.h5" >"$dir/stdout" 2>"$dir/stderr"
  rc=$?
  if [ "$rc" -ne 2 ] || ! tail -n 1 "$dir/stderr" | grep -q "^dlperf-train: OMP_NUM_THREADS='$omp' is not a thread count from 1 to 1024" ||
    [ -e "$dir/omp.h5" ]; then
    echo "FAIL (OMP_NUM_THREADS=$omp): exit $rc, expected 2 naming it:"; cat "$dir/stderr"; failures=$((failures + 1))
  else
    echo "ok   (OMP_NUM_THREADS=$omp): $(tail -n 1 "$dir/stderr")"
  fi
done
# --threads given: OMP_NUM_THREADS is not read.
OMP_NUM_THREADS=abc "$train" --threads 1 --resnet-blocks 1,1,1,1 --resnet-width 8 --image-size 32 --batch-size 2 --plan-only \
  >/dev/null 2>&1 || { echo "FAIL: OMP_NUM_THREADS refused with --threads 1"; failures=$((failures + 1)); }

# A results file whose name holds a newline, is only blanks or is a folder: no script lists it.
for name in "$(printf 'a\nb.h5')" ' ' "sub/"; do
  mkdir -p "$dir/names/sub"
  (cd "$dir/names" && "$train" --iterations 3 --warmup 1 --output "$name" >"$dir/stdout" 2>"$dir/stderr")
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$dir/stderr")" -ne 1 ] || ! grep -q -- "--output '" "$dir/stderr" ||
    [ "$(find "$dir/names" -mindepth 1 ! -name sub | wc -l)" -ne 0 ]; then
    echo "FAIL (--output '$name'): exit $rc, expected 2 with one line and no file:"; cat "$dir/stderr"; ls -la "$dir/names"
    failures=$((failures + 1))
  else
    echo "ok   (--output '$name'): $(cat "$dir/stderr")"
  fi
done

# --output in a folder that does not exist: the folder is named (the message named the lock file).
"$train" --resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 2 --num-classes 10 --threads 1 --iterations 3 \
  --warmup 1 --output "$dir/missing/r.h5" >"$dir/stdout" 2>"$dir/stderr"
rc=$?
if [ "$rc" -ne 2 ] || [ "$(grep -vc ': WARNING: ' "$dir/stderr")" -ne 1 ] ||
   ! grep -q "the folder $dir/missing does not exist" "$dir/stderr" || [ -e "$dir/missing" ]; then
  echo "FAIL (--output in a missing folder): exit $rc:"; cat "$dir/stderr"; failures=$((failures + 1))
else
  echo "ok   (--output in a missing folder): $(grep -v ': WARNING: ' "$dir/stderr")"
fi

# --help and --version succeed and list every option with its default
"$train" --help >"$dir/help" 2>&1 || { echo "FAIL: --help exit $?"; failures=$((failures + 1)); }
for opt in --model --backend --precision --batch-size --image-size --num-classes --iterations --warmup --seed --threads \
  --lr --momentum --weight-decay --label-smoothing --print-every --output --lock-timeout --max-loss-growth; do
  grep -q -- "$opt" "$dir/help" || { echo "FAIL: --help lacks $opt"; failures=$((failures + 1)); }
done
# Every precision the parser accepts is named where --precision is described.
for p in fp32 tf32 bf16 fp16; do
  sed -n '/--precision/,/--batch-size/p' "$dir/help" | grep -qw "$p" || { echo "FAIL: --help does not list $p for --precision"; failures=$((failures + 1)); }
done
"$train" --version | grep -q '^dlperf-train [0-9]' || { echo "FAIL: --version"; failures=$((failures + 1)); }

if [ "$failures" -eq 0 ]; then echo "all bad-input checks passed"; else echo "$failures failed"; exit 1; fi
