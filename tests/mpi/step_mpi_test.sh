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
# Issue 25: --zero 1 --grad-accum 2 on 2 ranks records the stage, the accumulation, the global
# batch and per iteration and rank the bytes moved: with n = 2, 2(n-1)/n x 4P = 4P bytes, P the
# flat buffer's elements (the parameters plus < 16 floats of padding per tensor, < 256 tensors here).
"$mpiexec" -np 2 --oversubscribe --bind-to none "$train" --image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 \
  --num-classes 10 --threads 1 --batch-size 4 --iterations 6 --warmup 2 --print-every 0 --bucket-mb 0.05 \
  --zero 1 --grad-accum 2 --output "$dir/z.h5" >"$dir/zlog" 2>&1 || { cat "$dir/zlog"; exit 1; }
grep -q 'global batch: 16 (batch 4 x grad-accum 2 x 2 ranks)' "$dir/zlog"
grep -q '^zero: stage 1' "$dir/zlog"
params=$(sed -n 's/^parameters: //p' "$dir/zlog" | tr -d ,)
attr() { h5dump -a "/runs/run_000001/$1" "$dir/z.h5" | sed -n 's/^ *(0): //p'; }
[ "$(attr zero_stage)" = 1 ] && [ "$(attr grad_accum)" = 2 ] && [ "$(attr global_batch)" = 16 ] || { echo "attributes"; exit 1; }
lo=$(attr zero_shard_min) hi=$(attr zero_shard_max)  # balanced: within one element per bucket
[ "$lo" -gt 0 ] && [ $((hi - lo)) -le 64 ] && [ $((lo + hi)) -ge "$params" ] || { echo "shards $lo..$hi for $params parameters"; exit 1; }
bytes=$(h5dump -d /runs/run_000001/comm_bytes "$dir/z.h5" | sed -n 's/^ *([0-9]*,0): //p' | tr ', ' '\n\n' | grep . | sort -u)
[ "$(echo "$bytes" | wc -l)" = 1 ] && [ "$bytes" -ge $((4 * params)) ] && [ "$bytes" -lt $((4 * params + 16384)) ] ||
  { echo "comm_bytes per iteration and rank: $bytes (parameters $params)"; exit 1; }
echo "zero 1: $bytes bytes per step and rank for $params parameters"
# BERT's default optimizer, LAMB, sharded: each parameter's trust ratio from its norms summed over
# the shards (tests/mpi/zero_test.cpp compares it with replicated LAMB); the replicas end equal,
# and stage 2 (the same collectives, its gradients freed) ends with stage 1's parameters.
for z in 1 2; do
  "$mpiexec" -np 2 --oversubscribe --bind-to none "$train" --model bert_base --seq-len 16 --max-predictions 4 --bert-layers 1 \
    --bert-hidden 32 --bert-heads 2 --bert-intermediate 64 --bert-vocab 128 --threads 1 --batch-size 4 --iterations 6 --warmup 2 \
    --print-every 0 --bucket-mb 0.01 --zero "$z" >"$dir/lamb$z" 2>&1 || { cat "$dir/lamb$z"; exit 1; }
  grep -q "^zero: stage $z" "$dir/lamb$z" && grep -q 'bit-identical on all 2 ranks' "$dir/lamb$z" && grep -q 'lamb' "$dir/lamb$z" ||
    { echo "bert --zero $z (lamb)"; cat "$dir/lamb$z"; exit 1; }
  echo "zero $z with lamb: $(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/lamb$z"), $(grep -o 'checksum 0x[0-9a-f]*' "$dir/lamb$z")"
done
[ "$(grep -o 'checksum 0x[0-9a-f]*' "$dir/lamb1")" = "$(grep -o 'checksum 0x[0-9a-f]*' "$dir/lamb2")" ] ||
  { echo "bert with lamb: --zero 2 ended with other parameters than --zero 1"; exit 1; }
echo "step mpi ok"
