#!/usr/bin/env bash
# Training throughput of dlperf-train against PyTorch, side by side in one invocation, on the
# machine it runs on: ResNet-50 v1.5, VGG16 and BERT-base, fp32 and bf16 on the CPU, or with
# --device cuda on one GPU in fp16, bf16, tf32 and fp32 (see "On a GPU" below).
#
# Same machine, same threads (OMP_NUM_THREADS and torch.set_num_threads), same shapes, synthetic
# data, the same recipe on both sides:
#   resnet50   batch 32, 224x224, 1000 classes; SGD momentum 0.9, label smoothing 0.1
#              (torchvision's resnet50 is v1.5: stride 2 on the 3x3 convolution)
#   vgg16      batch 16, 224x224, 1000 classes; SGD momentum 0.9, weight decay 5e-4 on weights,
#              no label smoothing, classifier dropout 0.5 (torchvision's vgg16, configuration D)
#   bert_base  batch 16, sequence 128, 20 masked positions, vocabulary 30522; AdamW (eps 1e-6,
#              weight decay 0.01 on weights), dropout 0.1 (bench/bert_pytorch_train.py)
# bf16: dlperf computes in bf16 with f32 master weights; PyTorch uses
# torch.autocast('cpu', dtype=torch.bfloat16). The CNNs run in PyTorch in both memory formats
# (NCHW and channels_last), since either may be the faster one; the ratio is taken against the
# faster.
#
# Method. Every measurement is a fresh process that runs --warmup untimed training steps, then
# --iterations timed ones (monotonic clock around whole steps: forward, backward, optimizer);
# throughput = batch * iterations / elapsed, as each tool prints it (`throughput X samples/s`).
# Within each repeat the measurements are interleaved, the order reversed on every other repeat
# (a slow drift of the machine favours no tool); the table reports the median over --repeats of
# each (model, tool, precision, format) and the ratio dlperf median / best PyTorch median. Each
# measurement records how much CPU other processes took meanwhile and is flagged when that
# exceeds 10% of the CPUs: the machine must be otherwise idle for the numbers to mean much.
# The header names the CPU model, the ISA oneDNN runs on (as dlperf-train reports it), and the
# library versions, so a table says what it ran on.
#
# On a GPU (--device cuda): dlperf-train --backend cuda against bench/pytorch_cuda_train.py on
# the same GPU: torchvision's models in channels_last, eager, cudnn.benchmark, SGD; HuggingFace
# BertForPreTraining with SDPA attention and fused AdamW (transformers must be installed); the
# same batch (256 ResNet-50, 128 VGG16, 64 BERT), sequence and masked positions. Precisions as
# dlperf names them: fp16 (PyTorch: autocast + GradScaler), bf16 (autocast), tf32 (TF32 allowed
# in cuDNN and cuBLAS) and fp32 (TF32 off on both sides). PyTorch timings bracket the timed
# steps with torch.cuda.synchronize(); dlperf's are its own (its summary line). BERT also runs
# dlperf with LAMB (no PyTorch built-in), reported against dlperf's AdamW. The header names the
# GPU (nvidia-smi), driver, CUDA and cuDNN on both sides. PyTorch runs as
# `env -u LD_LIBRARY_PATH $PYTHON`, so a packed dlperf build's library path (source
# .gpu/env.sh, ../shared/tools/gpu-pack) cannot hand torch another cuDNN; dlperf-train is taken
# from PATH when DLPERF_TRAIN is not set.
#
# Usage: bench/vs_pytorch.sh [--model resnet50,vgg16,bert_base] [--device cuda] [--quick] [options]  (--help)
# Exit status: 0 all measurements succeeded; 1 one failed (its log is named); 2 bad usage or a
# missing tool (dlperf-train not built, PyTorch not installed).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DLPERF_TRAIN_SET=${DLPERF_TRAIN:+1}

usage() {
  cat <<EOF
Usage: $0 [options]
  --model LIST       comma list of resnet50,vgg16,bert_base (default: all three)
  --device D         cpu (default) or cuda (one GPU; see the top of this script)
  --batch-size B     per-step batch (default cpu: resnet50 32, vgg16 16, bert_base 16;
                     cuda: resnet50 256, vgg16 128, bert_base 64)
  --image-size S     CNN input size (default 224; --quick: resnet50 112, vgg16 64)
  --num-classes C    CNN classes (default 1000)
  --seq-len S        BERT tokens per sequence (default 128)
  --iterations N     measured training steps per measurement (default cpu 5, cuda 50; --quick 3, cuda 10)
  --warmup W         untimed training steps first (default cpu 2, cuda 20; --quick 1, cuda 5)
  --threads T        OMP_NUM_THREADS and torch.set_num_threads (default: all cores, $(nproc))
  --repeats R        interleaved repeats; medians are reported (default 3)
  --precisions LIST  comma list of fp32,bf16 (default fp32,bf16); cuda: of fp16,bf16,tf32,fp32
                     (default all four)
  --formats LIST     PyTorch memory formats for the CNNs, comma list of nchw,channels_last
                     (default cpu: both; cuda: channels_last)
  --quick            small, fast configuration (CNNs at a reduced image size, a reduced BERT:
                     2 layers, hidden 256, 4 heads, vocabulary 8192) to check the script works;
                     explicit options win over it whatever their order
  --pytorch-only     measure PyTorch only (no dlperf-train needed)
  --log-dir DIR      keep each run's output and results.tsv there (default: a new temporary dir)
  -h, --help         this text
Environment: DLPERF_TRAIN (default build/src/dlperf-train, relative to the repository root; cuda:
dlperf-train on PATH if there is one), PYTHON (default cpu /usr/bin/python3, cuda python3).
EOF
}

die_usage() { echo "error: $*" >&2; echo "Try '$0 --help'." >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value"; }

models="resnet50,vgg16,bert_base" device=cpu batch="" image="" classes="" seq="" iterations="" warmup=""
threads="" repeats="" precisions="" formats="" quick=0 pytorch_only=0 log_dir=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --model)        need_value "$@"; models=$2; shift 2 ;;
    --device)       need_value "$@"; device=$2; shift 2 ;;
    --batch-size)   need_value "$@"; batch=$2; shift 2 ;;
    --image-size)   need_value "$@"; image=$2; shift 2 ;;
    --num-classes)  need_value "$@"; classes=$2; shift 2 ;;
    --seq-len)      need_value "$@"; seq=$2; shift 2 ;;
    --iterations)   need_value "$@"; iterations=$2; shift 2 ;;
    --warmup)       need_value "$@"; warmup=$2; shift 2 ;;
    --threads)      need_value "$@"; threads=$2; shift 2 ;;
    --repeats)      need_value "$@"; repeats=$2; shift 2 ;;
    --precisions)   need_value "$@"; precisions=$2; shift 2 ;;
    --formats)      need_value "$@"; formats=$2; shift 2 ;;
    --log-dir)      need_value "$@"; log_dir=$2; shift 2 ;;
    --quick)        quick=1; shift ;;
    --pytorch-only) pytorch_only=1; shift ;;
    -h|--help)      usage; exit 0 ;;
    *)              die_usage "unknown option '$1'" ;;
  esac
done

[[ $device =~ ^(cpu|cuda)$ ]] || die_usage "--device accepts cpu or cuda (got '$device')"
if [[ $device = cuda ]]; then
  PYTHON=${PYTHON:-python3}  # the GPU machine's PyTorch
  if [[ -z $DLPERF_TRAIN_SET ]] && command -v dlperf-train >/dev/null 2>&1; then DLPERF_TRAIN=$(command -v dlperf-train); fi
  if [[ $quick = 1 ]]; then : "${iterations:=10}" "${warmup:=5}"; fi
  : "${iterations:=50}" "${warmup:=20}" "${precisions:=fp16,bf16,tf32,fp32}" "${formats:=channels_last}"
  PRECISION_RE='^(fp16|bf16|tf32|fp32)$' PRECISION_NAMES="fp16,bf16,tf32,fp32"
else
  PYTHON=${PYTHON:-/usr/bin/python3}  # Debian's Python: python3-torch lives there
  PRECISION_RE='^(fp32|bf16)$' PRECISION_NAMES="fp32,bf16"
fi
DLPERF_TRAIN=${DLPERF_TRAIN:-build/src/dlperf-train}
if [[ $DLPERF_TRAIN != */* ]] && command -v "$DLPERF_TRAIN" >/dev/null 2>&1; then DLPERF_TRAIN=$(command -v "$DLPERF_TRAIN")  # a command name on PATH
elif [[ $DLPERF_TRAIN != /* ]]; then DLPERF_TRAIN="$ROOT/$DLPERF_TRAIN"; fi
# PyTorch on the GPU runs without the library path of a packed dlperf build (another cuDNN).
if [[ $device = cuda ]]; then PY=(env -u LD_LIBRARY_PATH "$PYTHON"); else PY=("$PYTHON"); fi
if [[ $quick = 1 ]]; then
  : "${iterations:=3}" "${warmup:=1}"
fi
precisions_given=${precisions:+1}
: "${classes:=1000}" "${seq:=128}" "${iterations:=5}" "${warmup:=2}" "${threads:=$(nproc)}" "${repeats:=3}"
: "${precisions:=fp32,bf16}" "${formats:=nchw,channels_last}"

positive() { [[ $2 =~ ^[0-9]+$ && $2 -gt 0 ]] || die_usage "$1 must be a positive integer (got '$2')"; }
[[ -z $batch ]] || positive --batch-size "$batch"
[[ -z $image ]] || positive --image-size "$image"
positive --num-classes "$classes"; positive --seq-len "$seq"
positive --iterations "$iterations"; positive --threads "$threads"; positive --repeats "$repeats"
[[ $warmup =~ ^[0-9]+$ ]] || die_usage "--warmup must be an integer >= 0 (got '$warmup')"
IFS=, read -r -a MODELS <<<"$models"
IFS=, read -r -a PRECISIONS <<<"$precisions"
IFS=, read -r -a FORMATS <<<"$formats"
for m in "${MODELS[@]}"; do [[ $m =~ ^(resnet50|vgg16|bert_base)$ ]] || die_usage "--model accepts resnet50,vgg16,bert_base (got '$m')"; done
for p in "${PRECISIONS[@]}"; do [[ $p =~ $PRECISION_RE ]] || die_usage "--precisions accepts $PRECISION_NAMES on $device (got '$p')"; done
for f in "${FORMATS[@]}"; do [[ $f =~ ^(nchw|channels_last)$ ]] || die_usage "--formats accepts nchw,channels_last (got '$f')"; done

# The shapes of one model: batch, image size (CNNs) and the reduced BERT of --quick.
model_batch() {
  if [[ -n $batch ]]; then echo "$batch"; return; fi
  if [[ $device = cuda ]]; then case $1 in resnet50) echo 256 ;; vgg16) echo 128 ;; *) echo 64 ;; esac
  else case $1 in resnet50) echo 32 ;; *) echo 16 ;; esac; fi
}
model_image() {
  if [[ -n $image ]]; then echo "$image"; return; fi
  if [[ $quick = 1 ]]; then case $1 in resnet50) echo 112 ;; *) echo 64 ;; esac; else echo 224; fi
}
for m in "${MODELS[@]}"; do
  s=$(model_image "$m")
  case $m in
    resnet50) ((s >= 32)) || die_usage "--image-size must be >= 32 (ResNet-50 downsamples by 32)" ;;
    vgg16) ((s >= 32 && s % 32 == 0)) || die_usage "--image-size must be a multiple of 32 (VGG16's five 2x2 pools)" ;;
  esac
done
BERT_QUICK_DLPERF=(--bert-layers 2 --bert-hidden 256 --bert-heads 4 --bert-intermediate 1024 --bert-vocab 8192)
BERT_QUICK_PYTORCH=(--layers 2 --hidden 256 --heads 4 --intermediate 1024 --vocab 8192)

if ! "${PY[@]}" -c 'import torch, torchvision' 2>/dev/null; then
  echo "error: PyTorch is not importable by $PYTHON. Install it with:" >&2
  echo "  apt-get install -y python3-torch python3-torchvision libopenblas0-pthread" >&2
  exit 2
fi
if [[ $device = cuda ]]; then
  "${PY[@]}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "error: $PYTHON's PyTorch sees no CUDA device (torch.cuda.is_available() is False)" >&2; exit 2; }
  if [[ ,$models, = *,bert_base,* ]] && ! "${PY[@]}" -c 'import transformers' 2>/dev/null; then
    echo "error: --device cuda --model bert_base needs HuggingFace transformers importable by $PYTHON" >&2; exit 2
  fi
fi
if [[ $pytorch_only = 0 && ! -x $DLPERF_TRAIN ]]; then
  echo "error: dlperf-train not found at $DLPERF_TRAIN. Build it from the repository root with:" >&2
  echo "  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j$(nproc)" >&2
  echo "or set DLPERF_TRAIN=/path/to/dlperf-train, or pass --pytorch-only." >&2
  exit 2
fi

# bf16 on a CPU without native bf16 (no AVX512-BF16, no AMX: AMD Zen 3, Intel before Cooper
# Lake) is refused by dlperf-train with a one-line error. The default list then leaves it out,
# saying so, rather than failing every bf16 measurement; asked for by name, it still runs (and
# fails there).
bf16_note=""
if [[ $device = cpu && $pytorch_only = 0 && -z $precisions_given && ,$precisions, = *,bf16,* ]]; then
  source "$ROOT/scripts/lib/cpu_bf16.sh"
  if refusal=$(cpu_bf16_refusal "$DLPERF_TRAIN"); then
    precisions=fp32
    PRECISIONS=(fp32)
    bf16_note="bf16 left out: $refusal"
  fi
fi

if [[ -z $log_dir ]]; then
  log_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-bench.XXXXXX")
else
  mkdir -p "$log_dir"
fi
results="$log_dir/results.tsv"
printf 'model\ttool\tprecision\tformat\trepeat\tsamples_per_s\tother_cpu_percent\n' >"$results"

export OMP_NUM_THREADS=$threads
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
vendor=$(lscpu 2>/dev/null | sed -n 's/^Vendor ID: *//p' | head -1)
family=$(lscpu 2>/dev/null | sed -n 's/^CPU family: *//p' | head -1)
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
features=""
for f in avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile; do [[ " $flags " = *" $f "* ]] && features+="${features:+ }$f"; done
torch_version=$("${PY[@]}" -c 'import torch; print(torch.__version__)')
torch_onednn=$("${PY[@]}" -c 'import re, torch; m = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show()); print(m.group(1) if m else "?")')
# The BLAS PyTorch's matmuls (nn.Linear: all of BERT's GEMMs) run on: Debian's python3-torch links
# libblas.so.3, which is the netlib reference BLAS unless an optimised one provides the alternative.
torch_blas=$("${PY[@]}" -c 'import re, torch; torch.ones(8, 8) @ torch.ones(8, 8)
print(next((l.split()[-1] for l in open("/proc/self/maps") if re.search(r"lib(open)?blas|blis|mkl_rt", l)), "?"))' 2>/dev/null) || true
backend_line=""
if [[ $pytorch_only = 0 ]]; then
  # dlperf-train's own account of the ISA oneDNN dispatches to, or of the GPU (one tiny fp32 run).
  backend_line=$("$DLPERF_TRAIN" --model resnet50 --backend "$device" --batch-size 1 --image-size 32 --num-classes 2 --iterations 1 \
                   --warmup 0 --resnet-blocks 1,1,1,1 --resnet-width 8 --threads "$threads" --print-every 0 2>&1 |
                 sed -n 's/^backend: //p' | head -1) || true
fi
echo "Training throughput, synthetic data: dlperf-train vs PyTorch, side by side"
echo "  machine: ${cpu:-unknown CPU} (${vendor:-?}, family ${family:-?}), $(nproc) cores; ${features:-no AVX2/AVX-512}"
if [[ $device = cuda ]]; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1) || true
  echo "  GPU: ${gpu:-$("${PY[@]}" -c 'import torch; print(torch.cuda.get_device_name())')} (nvidia-smi: name, memory, driver)"
  echo "  PyTorch $torch_version, CUDA $("${PY[@]}" -c 'import torch; print(torch.version.cuda)'), cuDNN" \
       "$("${PY[@]}" -c 'import torch; print(torch.backends.cudnn.version())') (env -u LD_LIBRARY_PATH $PYTHON), formats: ${FORMATS[*]}"
else
  echo "  PyTorch $torch_version with oneDNN $torch_onednn and BLAS ${torch_blas:-?} ($PYTHON), formats: ${FORMATS[*]}"
  if [[ ${torch_blas:-} = */blas/libblas.so* ]]; then
    echo "  WARNING: PyTorch's matmuls run the netlib reference BLAS: install an optimised one for a fair" \
         "competitor (apt-get install libopenblas0-pthread)"
  fi
  [[ -z $bf16_note ]] || echo "  $bf16_note"
fi
[[ -z $backend_line ]] || echo "  dlperf: $backend_line ($DLPERF_TRAIN)"
echo "  threads $threads (OMP_NUM_THREADS, torch.set_num_threads); per measurement: $warmup warm-up + $iterations timed"
echo "  iterations (fresh process); $repeats interleaved repeats; medians"
echo "  date: $(date -u +%Y-%m-%d); logs: $log_dir"

# The comparison assumes an otherwise idle machine. Contention is measured, not assumed: around
# each run, the CPU time all processes used (/proc/stat) minus the CPU time of the measured process
# (this shell's reaped-children time, /proc/$$/stat) is what other work took, as a percentage of
# the CPUs' capacity over that interval.
cpu_jiffies() {    # prints "busy total" summed over all CPUs (idle and iowait are not busy)
  awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t }' /proc/stat  # guest time is inside user
}
child_jiffies() {  # user + system time of this shell's finished children
  sed 's/.*) //' "/proc/$$/stat" | awk '{ print $14 + $15 }'
}
read -r busy0 total0 < <(cpu_jiffies); sleep 2; read -r busy1 total1 < <(cpu_jiffies)
busy=$((total1 > total0 ? 100 * (busy1 - busy0) / (total1 - total0) : 0))
echo "  CPU busy before start: ${busy}% (2 s sample); load average $(cut -d' ' -f1-3 /proc/loadavg)"
if ((busy > 10)); then
  echo "  WARNING: the machine is not idle; other work competes for the $threads threads."
fi
OTHER_LOAD_LIMIT=10   # percent of the CPUs; a measurement above it is flagged
contended=0

# The command of one measurement, in the array CMD.
build_cmd() {
  local model=$1 tool=$2 prec=$3 fmt=$4 b s
  b=$(model_batch "$model"); s=$(model_image "$model")
  # dlperf-train's --iterations counts the warm-up too; the PyTorch scripts count measured ones.
  local steps=(--iterations $((warmup + iterations)) --warmup "$warmup")
  case $tool/$model in
    dlperf/resnet50)
      CMD=("$DLPERF_TRAIN" --model resnet50 --batch-size "$b" --image-size "$s" --num-classes "$classes" --momentum 0.9) ;;
    dlperf/vgg16)
      CMD=("$DLPERF_TRAIN" --model vgg16 --batch-size "$b" --image-size "$s" --num-classes "$classes" --momentum 0.9
           --weight-decay 5e-4 --label-smoothing 0 --dropout 0.5) ;;
    dlperf/bert_base | dlperf_lamb/bert_base)
      CMD=("$DLPERF_TRAIN" --model bert_base --optimizer "$([[ $tool = dlperf ]] && echo adamw || echo lamb)" --batch-size "$b" --seq-len "$seq")
      [[ $quick = 0 ]] || CMD+=("${BERT_QUICK_DLPERF[@]}") ;;
    pytorch/*) [[ $device = cpu ]] || {
      CMD=("${PY[@]}" "$ROOT/bench/pytorch_cuda_train.py" --model "$model" --batch-size "$b" --iterations "$iterations"
           --warmup "$warmup")
      if [[ $model = bert_base ]]; then
        CMD+=(--seq-len "$seq"); [[ $quick = 0 ]] || CMD+=("${BERT_QUICK_PYTORCH[@]}")
      else
        CMD+=(--image-size "$s" --num-classes "$classes" --momentum 0.9)
        [[ $model = resnet50 ]] || CMD+=(--weight-decay 5e-4 --label-smoothing 0)
      fi
      CMD+=(--precision "$prec")
      return; } ;;&
    pytorch/resnet50 | pytorch/vgg16)
      CMD=("$PYTHON" "$ROOT/bench/pytorch_train.py" --model "$model" --batch-size "$b" --image-size "$s"
           --num-classes "$classes" --memory-format "$fmt" --iterations "$iterations" --warmup "$warmup" --momentum 0.9)
      [[ $model = resnet50 ]] || CMD+=(--weight-decay 5e-4 --label-smoothing 0) ;;
    pytorch/bert_base)
      CMD=("$PYTHON" "$ROOT/bench/bert_pytorch_train.py" --batch-size "$b" --seq-len "$seq" --iterations "$iterations"
           --warmup "$warmup")
      [[ $quick = 0 ]] || CMD+=("${BERT_QUICK_PYTORCH[@]}") ;;
  esac
  CMD+=(--precision "$prec" --threads "$threads")
  [[ $tool = pytorch ]] || CMD+=(--backend "$device" "${steps[@]}" --print-every 0)
}

failed=0
# run_one MODEL TOOL PRECISION FORMAT REPEAT: one measurement, appended to results.tsv.
run_one() {
  local model=$1 tool=$2 prec=$3 fmt=$4 rep=$5 log value b0 t0 c0 b1 t1 c1 other flag=""
  log="$log_dir/${model}_${tool}_${prec}_${fmt}_r${rep}.log"
  build_cmd "$model" "$tool" "$prec" "$fmt"
  echo "${CMD[*]}" >"$log"
  read -r b0 t0 < <(cpu_jiffies); c0=$(child_jiffies)
  if "${CMD[@]}" >>"$log" 2>&1; then
    read -r b1 t1 < <(cpu_jiffies); c1=$(child_jiffies)
    value=$(grep -oE 'throughput [0-9.]+ samples/s' "$log" | tail -1 | awk '{print $2}') || true
  else
    value=""
  fi
  if [[ -z $value ]]; then
    echo "  [repeat $rep] $model $tool $prec $fmt: FAILED (see $log)" >&2
    tail -5 "$log" | sed 's/^/    /' >&2
    failed=1
    return
  fi
  other=$((t1 > t0 ? 100 * (b1 - b0 - (c1 - c0)) / (t1 - t0) : 0))
  ((other >= 0)) || other=0
  if ((other > OTHER_LOAD_LIMIT)); then flag="  <- other processes used ${other}% of the CPUs"; contended=$((contended + 1)); fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$tool" "$prec" "$fmt" "$rep" "$value" "$other" >>"$results"
  printf '  [repeat %s] %-9s %-7s %-4s %-13s %10.3f samples/s%s\n' "$rep" "$model" "$tool" "$prec" "$fmt" "$value" "$flag"
}

# The measurement order of one repeat (model by model); reversed on even repeats.
order=()
for model in "${MODELS[@]}"; do
  for prec in "${PRECISIONS[@]}"; do
    [[ $pytorch_only = 1 ]] || order+=("$model dlperf $prec -")
    # LAMB has no PyTorch built-in: on the GPU dlperf's LAMB is measured beside its AdamW.
    [[ $pytorch_only = 1 || $device != cuda || $model != bert_base ]] || order+=("$model dlperf_lamb $prec -")
    if [[ $model = bert_base ]]; then
      order+=("$model pytorch $prec -")
    else
      for fmt in "${FORMATS[@]}"; do order+=("$model pytorch $prec $fmt"); done
    fi
  done
done
# shellcheck disable=SC2086  # each order item is "model tool precision format", split on purpose
for ((rep = 1; rep <= repeats; rep++)); do
  if ((rep % 2 == 0)); then
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do run_one ${order[i]} "$rep"; done
  else
    for item in "${order[@]}"; do run_one $item "$rep"; done
  fi
done

# Medians per (model, tool, precision, format); best PyTorch format per (model, precision); ratio
# dlperf / best.
echo
for model in "${MODELS[@]}"; do
  b=$(model_batch "$model")
  if [[ $model = bert_base ]]; then
    shape="batch $b, sequence $seq$([[ $quick = 1 ]] && echo ', reduced (--quick)' || true)"; fmts="-"
  else
    s=$(model_image "$model"); shape="batch $b, ${s}x${s}, $classes classes"; fmts="${FORMATS[*]}"
  fi
  echo "$model: $shape"
  awk -F'\t' -v model="$model" -v precs="${PRECISIONS[*]}" -v fmts="$fmts" -v with_dlperf=$((1 - pytorch_only)) '
    NR > 1 && $1 == model { key = $2 SUBSEP $3 SUBSEP $4; n[key]++; v[key, n[key]] = $6 }
    function median(key,   i, j, t, a, m) {
      m = n[key]; if (m == 0) return -1
      for (i = 1; i <= m; i++) a[i] = v[key, i]
      for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    function cell(x) { return x < 0 ? "failed" : sprintf("%.2f", x) }
    END {
      np = split(precs, P, " "); nf = split(fmts, F, " ")
      printf "  %-9s", "precision"
      if (with_dlperf) printf " %12s", "dlperf"
      for (f = 1; f <= nf; f++) printf " %22s", F[f] == "-" ? "pytorch" : "pytorch " F[f]
      if (with_dlperf) printf " %12s", "dlperf/best"
      printf "   (median samples/s)\n"
      for (p = 1; p <= np; p++) {
        printf "  %-9s", P[p]
        if (with_dlperf) { d = median("dlperf" SUBSEP P[p] SUBSEP "-"); printf " %12s", cell(d) }
        best = -1; bestf = ""
        for (f = 1; f <= nf; f++) {
          m = median("pytorch" SUBSEP P[p] SUBSEP F[f]); printf " %22s", cell(m)
          if (m > best) { best = m; bestf = F[f] }
        }
        if (with_dlperf) printf " %12s", (d > 0 && best > 0) ? sprintf("%.2fx", d / best) : "n/a"
        if (nf > 1) printf "   best PyTorch: %s", bestf == "" ? "none" : bestf
        printf "\n"
      }
    }' "$results"
done
if [[ $device = cuda && $pytorch_only = 0 && ,$models, = *,bert_base,* ]]; then
  echo "bert_base, dlperf LAMB (the default optimizer) against dlperf AdamW (the column above):"
  awk -F'\t' -v precs="${PRECISIONS[*]}" '
    NR > 1 && $1 == "bert_base" && ($2 == "dlperf" || $2 == "dlperf_lamb") { k = $2 SUBSEP $3; n[k]++; v[k, n[k]] = $6 }
    function median(k,   i, j, t, a, m) {
      m = n[k]; if (m == 0) return -1
      for (i = 1; i <= m; i++) a[i] = v[k, i]
      for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
      np = split(precs, P, " ")
      for (p = 1; p <= np; p++) {
        l = median("dlperf_lamb" SUBSEP P[p]); w = median("dlperf" SUBSEP P[p])
        printf "  %-9s lamb %12s   lamb/adamw %s\n", P[p], l < 0 ? "failed" : sprintf("%.2f", l), (l > 0 && w > 0) ? sprintf("%.3f", l / w) : "n/a"
      }
    }' "$results"
fi
echo "(each cell: median over repeats of batch*iterations/elapsed; raw values in $results)"
if ((contended > 0 || busy > 10)); then
  echo "WARNING: $contended measurement(s) ran alongside other work (more than ${OTHER_LOAD_LIMIT}% of the CPUs" \
       "used by other processes; CPUs ${busy}% busy before start): these numbers are unreliable;" \
       "rerun on an idle machine."
fi
exit $failed
