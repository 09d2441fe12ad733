#!/usr/bin/env bash
# The device-step options of dlperf-train on the CPU backend, end to end (issue 13):
#  * bad combinations are one line naming the flag, exit 2, nothing written;
#  * --profile-ops stores a per-op table that dlperf-reduce --ops prints, and --timeline writes
#    Chrome trace-event JSON (parsed here) with the run's phases and op calls;
#  * --find-max-batch under --memory-limit-mb finds a batch B that trains while B+1 runs out of
#    memory in a fresh run too, and that failure is one line, exit 2: the run does not fit (its
#    build ran out of memory), refused as a plan over the limit is.
# Usage: step_cli_test.sh DLPERF_TRAIN DLPERF_REDUCE
set -u
train=$1
reduce=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=(--image-size 32 --resnet-width 8 --resnet-blocks 1,1,1,1 --num-classes 10 --threads 1)

expect_usage_error() {  # flag-to-mention, then the arguments
  local mention=$1
  shift
  "$train" "${tiny[@]}" "$@" --output "$dir/bad.h5" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$dir/stderr")" -ne 1 ] || ! grep -q -- "$mention" "$dir/stderr" || [ -e "$dir/bad.h5" ]; then
    fail "($*): exit $rc, stderr: $(cat "$dir/stderr")"
  else
    echo "ok   ($*): $(cat "$dir/stderr")"
  fi
}
expect_usage_error --cuda-graph --cuda-graph
expect_usage_error --comm --comm nccl
expect_usage_error --comm --comm gloo
expect_usage_error --profile-ops --iterations 6 --warmup 2 --profile-ops 5
expect_usage_error --profile-ops --profile-ops -1
expect_usage_error --memory-limit-mb --find-max-batch
expect_usage_error --memory-limit-mb --memory-limit-mb -3
expect_usage_error "above this node's memory" --memory-limit-mb 9223372036854775807  # its byte count overflowed
# Above the plan's floor (1.8 MiB) but below the built model (5.6 MiB): the build runs out. It
# was a fault (exit 3, the job aborted); a run that does not fit is refused as the plan is.
expect_usage_error "the run does not fit: building it ran out of memory" --batch-size 8 --memory-limit-mb 3
expect_usage_error "drop --output" --memory-limit-mb 64 --find-max-batch  # the trace it was given was never written
expect_usage_error --data-on-device --model bert_base --data-on-device --data /nonexistent

# ---- per-op profile, --ops, --timeline ----
"$train" "${tiny[@]}" --batch-size 4 --iterations 6 --warmup 2 --print-every 0 --profile-ops 3 --output "$dir/r.h5" \
  >"$dir/log" 2>&1 || fail "profiled run: $(cat "$dir/log")"
# No --warmup/--window: the 6-iteration run is measured by its own (issue 27 item 4).
"$reduce" "$dir/r.h5" --ops --ops-top 5 >"$dir/ops" 2>&1 || fail "reduce --ops: $(cat "$dir/ops")"
cat "$dir/ops"
grep -q '^## Per-op profile: resnet50 fp32 batch 4 cpu' "$dir/ops" || fail "--ops has no profile heading"
grep -Eq '^rank 0, 3 iterations from 2; step [0-9.]+ ms, ops [0-9.]+ ms \([0-9.]+% of the step\)' "$dir/ops" || fail "--ops summary line"
[ "$(grep -c '^| layer\|^| conv1\|^| fc\|^| bn1' "$dir/ops")" -ge 1 ] || fail "--ops lists no named op"
grep -q '^| conv2d | ' "$dir/ops" || fail "--ops has no per-kind table"
"$reduce" "$dir/r.h5" --timeline "$dir/t.json" >/dev/null 2>&1 || fail "reduce --timeline"
# With --recompute block: the profiled batch norm skips its running statistics on the second
# forward as the bare one does (it refused, after the run was registered), and the profiled and
# bare runs train alike.
for r in none block; do
  "$train" "${tiny[@]}" --batch-size 4 --iterations 6 --warmup 2 --print-every 0 --recompute $r --profile-ops 3 >"$dir/rc_$r.log" 2>&1 ||
    fail "--recompute $r --profile-ops: $(tail -1 "$dir/rc_$r.log")"
done
[ "$(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/rc_none.log")" = "$(grep -o 'loss [0-9.]* -> [0-9.]*' "$dir/rc_block.log")" ] ||
  fail "--recompute block --profile-ops trains otherwise than --recompute none"
# --ops when no throughput can be made (a window past the run): the profile is still shown.
"$reduce" "$dir/r.h5" --warmup 5 --window 5 --ops >"$dir/ops2" 2>"$dir/ops2.err" || fail "--ops past the window: $(cat "$dir/ops2.err")"
grep -q '^## Per-op profile' "$dir/ops2" && grep -q 'note: no throughput table' "$dir/ops2.err" || fail "--ops past the window: $(cat "$dir/ops2.err")"
python3 - "$dir/t.json" <<'PY' || fail "timeline JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
cats = {e["cat"] for e in ev}
assert {"iteration", "phase", "conv2d", "batch_norm"} <= cats, cats
its = [e for e in ev if e["cat"] == "iteration"]
assert [e["name"] for e in its] == ["iteration 2", "iteration 3", "iteration 4"], its
for it in its:  # every op call of an iteration lies within it
    calls = [e for e in ev if e.get("args", {}).get("iteration") == int(it["name"].split()[1]) and e["cat"] not in ("phase", "iteration")]
    assert calls, it
    for c in calls:
        assert it["ts"] - 1 <= c["ts"] and c["ts"] + c["dur"] <= it["ts"] + it["dur"] + 1, (c, it)
# Perfetto's rule for complete slices (issue 27 item 6): on one (pid, tid) track each lies inside
# the open one or after it; every track is named.
named = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
tracks = {}
for e in ev:
    tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
for key, slices in tracks.items():
    assert key in named, ("unnamed track", key)
    slices.sort(key=lambda s: (s[0], -s[1]))
    open_ends = []
    for start, end in slices:
        while open_ends and open_ends[-1] <= start + 1e-6:
            open_ends.pop()
        assert not open_ends or end <= open_ends[-1] + 1e-6, ("overlapping slices on track", key, start, end, open_ends[-1])
        open_ends.append(end)
print("timeline: %d spans on %d tracks, categories %s" % (len(ev), len(tracks), sorted(cats)))
PY
"$reduce" "$dir/r.h5" --timeline "$dir/t2.json" --timeline-steps 9-12 >"$dir/out" 2>&1
rc=$?
{ [ $rc -eq 2 ] && [ ! -e "$dir/t2.json" ]; } || fail "--timeline-steps past the run: exit $rc, $(cat "$dir/out")"

# ---- --find-max-batch on the CPU under a memory limit ----
limit=(--memory-limit-mb 16 --iterations 3 --warmup 1 --print-every 0)
"$train" "${tiny[@]}" "${limit[@]}" --batch-size 8 --find-max-batch >"$dir/find" 2>&1 || fail "find-max-batch: $(cat "$dir/find")"
cat "$dir/find"
best=$(sed -n 's/^largest batch per device that trains: \([0-9][0-9]*\) (\([0-9]*\) runs out of memory.*/\1/p' "$dir/find")
if [ -z "$best" ]; then
  fail "find-max-batch printed no result"
else
  "$train" "${tiny[@]}" "${limit[@]}" --batch-size "$best" >"$dir/fit" 2>&1 || fail "batch $best does not train in a fresh run: $(tail -3 "$dir/fit")"
  "$train" "${tiny[@]}" "${limit[@]}" --batch-size $((best + 1)) >"$dir/oom" 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q '^dlperf-train: the run does not fit: building it ran out of memory' "$dir/oom" ||
    [ "$(grep -c '^dlperf-train' "$dir/oom")" -ne 1 ]; then fail "batch $((best + 1)): exit $rc, $(tail -3 "$dir/oom")"; fi
  echo "ok   find-max-batch: $best trains, $((best + 1)) runs out of memory: $(grep -m1 'out of memory' "$dir/oom" | cut -c1-160)"
fi

# The progress line's rate is over each iteration's period, from the previous one's end: the
# host's work between two steps counts. The run stops itself (SIGSTOP) at its first flush, when
# iteration 4 is retired, for about 2 s: the rate of the next step to end after it (5, or 6 where
# the trainer has queued step 5 before retiring 4) must show it: its period (4 samples over the
# rate) at least 1.5 s, which no load can fake; it was a step's own span before.
DLPERF_TEST_FAULT=flush:0:STOP "$train" "${tiny[@]}" --batch-size 4 --iterations 8 --warmup 1 --flush-every 4 --print-every 1 \
  --output "$dir/gap.h5" >"$dir/gap" 2>&1 &
gap_pid=$!
for _ in $(seq 1 300); do
  [ "$(ps -o stat= -p "$gap_pid" 2>/dev/null | cut -c1)" = T ] && break
  sleep 0.1
done
sleep 2
kill -CONT "$gap_pid" 2>/dev/null
wait "$gap_pid" || fail "the stopped run: $(tail -3 "$dir/gap")"
rate() { sed -n "s/^iter *$1\/8 .* \([0-9.]*\) samples\/s .*/\1/p" "$dir/gap"; }
r5=$(rate 5) r6=$(rate 6)
if [ -z "$r5" ] || [ -z "$r6" ] || ! awk -v a="$r5" -v b="$r6" 'BEGIN { m = a < b ? a : b; exit !(m > 0 && 4 / m >= 1.5) }'; then
  fail "neither iteration 5 nor 6 shows the 2 s stop in its rate ($r5, $r6 samples/s of 4-sample steps)"; cat "$dir/gap"
else
  echo "ok   progress rate over the period: iterations 5 and 6 at $r5 and $r6 samples/s of 4-sample steps, one after a 2 s stop"
fi

if [ "$failures" -eq 0 ]; then echo "all step CLI checks passed"; else echo "$failures failed"; exit 1; fi
