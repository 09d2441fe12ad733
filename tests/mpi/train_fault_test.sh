#!/usr/bin/env bash
# dlperf-train under faults, as a cluster job meets them:
#  1. one of 3 ranks is SIGKILLed mid-run: the job ends non-zero within the bound;
#  2. one of 3 ranks is SIGSTOPped (a hang): the others notice within --timeout, name the
#     rank, and the job ends non-zero;
#  3. every rank gets SIGTERM (Slurm's time limit): all stop at one iteration, exit 4 (a
#     partial run), and the run is in results.h5 as partial with its iterations, beside an
#     earlier complete run;
#  4. the runs interrupted by 1 and 2 never damaged that file: dlperf-reduce still reads it.
# Usage: train_fault_test.sh DLPERF_TRAIN DLPERF_REDUCE MPIEXEC
set -u
train=$1 reduce=$2 mpiexec=$3
dir=$(mktemp -d)
trap 'pkill -KILL -f "variant=$tag" 2>/dev/null; rm -rf "$dir"' EXIT
tag="fault$$"
fail=0
results="$dir/results.h5"
small=(--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 4 --num-classes 10 --threads 1
       --output "$results" --flush-every 5)

# The ranks: processes named dlperf-train (mpirun's own command line holds the same words).
rank_pids() {
  for p in $(pgrep -x dlperf-train); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--variant=$1" && echo "$p"
  done | sort -n
}
wait_for_ranks() {  # variant, count
  for _ in $(seq 1 100); do
    [ "$(rank_pids "$1" | wc -l)" -ge "$2" ] && return 0
    sleep 0.2
  done
  return 1
}
# Training has started when rank 0 has printed a few iterations (start-up takes seconds on a
# loaded machine, and a rank stopped before training would leave the others in start-up
# collectives, which are not what this test is about).
wait_for_training() {  # log
  for _ in $(seq 1 300); do
    [ "$(grep -c '^iter ' "$1" 2>/dev/null)" -ge 3 ] && return 0
    sleep 0.2
  done
  return 1
}

echo "== a complete run first"
"$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${small[@]}" --iterations 8 --warmup 2 --variant=ok-$tag >"$dir/ok.log" 2>&1 \
  || { echo "FAIL: the complete run failed"; cat "$dir/ok.log"; fail=1; }

run_fault() {  # name, signal, bound, regex
  local name=$1 sig=$2 bound=$3 regex=$4 v="$1-$tag"
  local start=$(date +%s)
  "$mpiexec" -np 3 --oversubscribe --bind-to none "$train" "${small[@]}" --iterations 100000 --warmup 2 --timeout 5 \
    --print-every 1 --variant="$v" >"$dir/$name.log" 2>&1 &
  local job=$!
  wait_for_ranks "$v" 3 || { echo "FAIL $name: ranks did not start"; fail=1; return; }
  wait_for_training "$dir/$name.log" || { echo "FAIL $name: training did not start"; fail=1; }
  sleep 1  # well into training
  local victim
  victim=$(rank_pids "$v" | sed -n 2p)
  kill "-$sig" "$victim"
  local waited=0
  while kill -0 "$job" 2>/dev/null && [ "$waited" -lt "$bound" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$job" 2>/dev/null; then
    echo "FAIL $name: job still running ${bound} s after SIG$sig"; fail=1
    kill -KILL "$job"; pkill -KILL -f -- "--variant=$v"
    return
  fi
  wait "$job"; local rc=$?
  pkill -KILL -f -- "--variant=$v" 2>/dev/null  # the stopped rank, if mpirun left it
  if [ "$rc" -eq 0 ]; then echo "FAIL $name: job exited 0"; fail=1; return; fi
  if ! grep -Eq "$regex" "$dir/$name.log"; then
    echo "FAIL $name: output does not match '$regex':"; tail -20 "$dir/$name.log"; fail=1; return
  fi
  echo "ok   $name: exit $rc after $(( $(date +%s) - start )) s: $(grep -Eo "$regex.{0,80}" "$dir/$name.log" | head -1)"
}

run_fault killed KILL 30 "rank [0-9]|exited on signal 9"
run_fault stopped STOP 30 "rank [0-9]+ \\([^)]*\\)"

# A run of 2 ranks, SIGTERM to those whose rank matches $2 (a regex), then: exit 4, recorded as
# partial, and rank 0's line matching $3.
term_run() {  # label, ranks, line
  local label=$1 ranks=$2 line=$3 v="$1-$tag" job waited rc
  "$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${small[@]}" --iterations 100000 --warmup 2 --print-every 1 \
    --variant="$v" >"$dir/$label.log" 2>&1 &
  job=$!
  wait_for_ranks "$v" 2 || { echo "FAIL $label: ranks did not start"; fail=1; }
  wait_for_training "$dir/$label.log" || { echo "FAIL $label: training did not start"; fail=1; }
  sleep 1
  for p in $(rank_pids "$v"); do tr '\0' '\n' <"/proc/$p/environ" | grep -qE "^OMPI_COMM_WORLD_RANK=($ranks)\$" && kill -TERM "$p"; done
  waited=0
  while kill -0 "$job" 2>/dev/null && [ "$waited" -lt 30 ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$job" 2>/dev/null; then
    echo "FAIL $label: still running 30 s after SIGTERM"; fail=1; kill -KILL "$job"; return
  fi
  wait "$job"; rc=$?
  if [ "$rc" -ne 4 ]; then echo "FAIL $label: exit $rc, want 4 (partial)"; tail -5 "$dir/$label.log"; fail=1
  elif ! grep -qE "run stopped early: $line; recorded as partial" "$dir/$label.log"; then
    echo "FAIL $label: no line '$line; recorded as partial'"; tail -5 "$dir/$label.log"; fail=1
  else echo "ok   $label: $(grep 'stopped early' "$dir/$label.log")"; fi
}
echo "== SIGTERM to every rank"
term_run term '0|1' 'stopped by signal 15 after [0-9]+ iterations'
# Slurm signals each rank on its own: a signal to rank 1 alone stops every rank, and rank 0's
# line (it writes the record) says where the signal went.
echo "== SIGTERM to rank 1 alone"
term_run term1 '1' 'stopped by a signal to 1 of 2 ranks, not rank 0, after [0-9]+ iterations'

echo "== the results file after all of it"
h5dump -A "$results" >"$dir/dump.txt" 2>&1 || { echo "FAIL: h5dump cannot read $results"; fail=1; }
complete=$(grep -c '"complete"' "$dir/dump.txt")
partial=$(grep -c '"partial"' "$dir/dump.txt")
echo "runs: complete $complete, partial $partial"
[ "$complete" -ge 1 ] || { echo "FAIL: the complete run is gone"; fail=1; }
[ "$partial" -ge 1 ] || { echo "FAIL: no partial run"; fail=1; }
"$reduce" "$results" --warmup 2 --window 4 >"$dir/reduce.txt" 2>&1 || { echo "FAIL: dlperf-reduce"; cat "$dir/reduce.txt"; fail=1; }
grep -q "excluded" "$dir/reduce.txt" && grep -q '| 1 | 2 | 4 |' "$dir/reduce.txt" \
  || { echo "FAIL: reduce table lacks the complete 2-rank run"; cat "$dir/reduce.txt"; fail=1; }

[ "$fail" -eq 0 ] && echo "all fault checks passed"
exit "$fail"
