#!/usr/bin/env bash
# Two ranks on the CPU backend with the device-step machinery (issue 13): every iteration's
# gradient buckets are timed and gathered into the trace, and dlperf-reduce --timeline shows
# rank 1's allreduce buckets beside its phases (Chrome trace-event JSON, parsed here).
# Usage: step_mpi_test.sh DLPERF_TRAIN DLPERF_REDUCE MPIEXEC
set -euo pipefail
train=$1
reduce=$2
mpiexec=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpiexec" -np 2 --oversubscribe --bind-to none "$train" --image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 \
  --num-classes 10 --threads 1 --batch-size 4 --iterations 6 --warmup 2 --print-every 0 --bucket-mb 0.05 \
  --profile-ops 2 --output "$dir/r.h5" >"$dir/log" 2>&1 || { cat "$dir/log"; exit 1; }
grep -q 'gradients in [0-9]* buckets' "$dir/log"
"$reduce" "$dir/r.h5" --warmup 2 --window 4 --timeline "$dir/t.json" --timeline-rank 1 --timeline-steps 2-5 >/dev/null
python3 - "$dir/t.json" "$dir/r.h5" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
its = [e for e in ev if e["cat"] == "iteration"]
buckets = [e for e in ev if e["cat"] == "allreduce"]
assert len(its) == 4, its
assert len(buckets) >= 4 * 3, len(buckets)  # several buckets per iteration
for b in buckets:
    it = next(i for i in its if i["name"] == "iteration %d" % b["args"]["iteration"])
    # a bucket starts during its iteration's backward and ends before the iteration does
    assert it["ts"] <= b["ts"] and b["ts"] + b["dur"] <= it["ts"] + it["dur"] + 1, (b, it)
assert not [e for e in ev if e["cat"] == "conv2d"], "the profile is rank 0's"
print("rank 1: %d iterations, %d allreduce spans" % (len(its), len(buckets)))
PY
echo "step mpi ok"
