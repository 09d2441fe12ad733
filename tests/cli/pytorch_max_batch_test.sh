#!/usr/bin/env bash
# bench/pytorch_max_batch.py (issue 26: --find-max-batch against PyTorch's largest batch) without
# a GPU or torch: a stand-in trainer that "runs out of memory" above a batch limit. The search
# tries the batches dlperf-train's search tries (the same doubling and bisection), prints
# dlperf's result line, passes the extra options to every attempt, and ends with exit 1 and the
# error on a failure that is not out of memory. A second.
set -euo pipefail
script=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/trainer.py" <<'PY'
import os, sys
args = sys.argv[1:]
b = int(args[args.index("--batch-size") + 1])
with open(os.environ["TRIALS"], "a") as f:
    f.write(f"{b} {' '.join(args)}\n")
if b == int(os.environ.get("BREAK_AT", "0")):
    sys.exit("RuntimeError: CUDNN_STATUS_EXECUTION_FAILED")
if b > int(os.environ["LIMIT"]):
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr)
    sys.exit(1)
print("throughput 123.0 samples/s")
PY

out=$(TRIALS=$work/t1 LIMIT=1065 python3 "$script" --trainer "$work/trainer.py" --model resnet50 --precision fp16 --batch-size 256 --image-size 160)
# dlperf-train --find-max-batch found "1065 (1066 runs out of memory; 14 attempts)" on an H100
grep -qx 'largest batch per device that trains: 1065 (1066 runs out of memory; 14 attempts)' <<<"$out" || fail "result line: $out"
[ "$(cut -d' ' -f1 "$work/t1" | tr '\n' ' ')" = "256 512 1024 2048 1536 1280 1152 1088 1056 1072 1064 1068 1066 1065 " ] ||
  fail "trials: $(cut -d' ' -f1 "$work/t1" | tr '\n' ' ')"
grep -v -- '--image-size 160' "$work/t1" && fail "an attempt lost the extra option"
grep -v -- '--warmup 2 --iterations 1' "$work/t1" && fail "an attempt is not three steps"
[ "$(grep -c ': out of memory (' <<<"$out")" = 8 ] || fail "attempts out of memory: $out"

# batch 1 does not fit: no batch, exit 1
set +e
out=$(TRIALS=$work/t2 LIMIT=0 python3 "$script" --trainer "$work/trainer.py" --batch-size 4 2>&1)
rc=$?
set -e
[ $rc = 1 ] && grep -q 'trains: none (batch 1 runs out of memory' <<<"$out" || fail "nothing fits: exit $rc: $out"

# a failure that is not out of memory ends the search with its message
set +e
out=$(TRIALS=$work/t3 LIMIT=1065 BREAK_AT=512 python3 "$script" --trainer "$work/trainer.py" 2>&1)
rc=$?
set -e
[ $rc = 1 ] && grep -q 'batch 512: exit 1, not out of memory: RuntimeError: CUDNN_STATUS_EXECUTION_FAILED' <<<"$out" ||
  fail "a non-memory failure: exit $rc: $out"
grep -q 'largest batch' <<<"$out" && fail "a failed search printed a result"

set +e
python3 "$script" --batch-size 0 >/dev/null 2>&1
rc=$?
set -e
[ $rc = 2 ] || fail "--batch-size 0 exits $rc, not 2"
echo "pytorch_max_batch: ok"
