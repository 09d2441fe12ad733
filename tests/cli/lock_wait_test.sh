#!/usr/bin/env bash
# Another process holds the results file's lock (issue 18 row 1): dlperf-train says whom it
# waits for and for how long, gives up after --lock-timeout with one error line and exit 3,
# ends at once on SIGTERM with exit 4 and nothing written, and with 2 ranks the lock (not a
# rank's "own work") is what the message is about. Then, the lock free, a run appends.
# Usage: lock_wait_test.sh DLPERF_TRAIN MPIEXEC
set -u
train=$1 mpiexec=$2
dir=$(mktemp -d)
holder= held=
cleanup() {
  for h in $holder $held; do pkill -P "$h" 2>/dev/null; kill "$h" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
fail=0
base=(--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 4 --num-classes 10 --threads 1 --print-every 0)
small=("${base[@]}" --iterations 4 --warmup 1 --output "$dir/r.h5")
bad() { echo "FAIL: $*"; fail=1; }

# flock(1) holds r.h5.lock while its command sleeps (-o: the sleep does not inherit the lock,
# so ending flock frees it). flock(1) records no holder: dlperf says so.
flock -o "$dir/r.h5.lock" sleep 300 &
holder=$!
for _ in $(seq 50); do flock -n "$dir/r.h5.lock" true 2>/dev/null || break; sleep 0.1; done

echo "== 1 rank, --lock-timeout 2"
start=$SECONDS
timeout 60 "$train" "${small[@]}" --lock-timeout 2 >"$dir/out1" 2>"$dir/err1"
rc=$?
took=$((SECONDS - start))
cat "$dir/err1"
[ "$rc" -eq 3 ] || bad "exit $rc, want 3 (124: it hung)"
[ "$took" -le 20 ] || bad "took $took s for a 2 s lock timeout"
grep -q 'waiting for the lock .*r.h5.lock, held by an unknown process' "$dir/err1" || bad "no waiting line naming the holder"
[ "$(grep -c 'gave up after [0-9]* s waiting for the lock .*(--lock-timeout 2 s)' "$dir/err1")" -eq 1 ] || bad "no single give-up line"
[ -e "$dir/r.h5" ] && bad "r.h5 was created"

echo "== 1 rank, SIGTERM while waiting"
"$train" "${small[@]}" --lock-timeout 120 >"$dir/out2" 2>"$dir/err2" &
job=$!
for _ in $(seq 100); do grep -q 'waiting for the lock' "$dir/err2" && break; sleep 0.1; done
kill -TERM "$job"
waited=0
while kill -0 "$job" 2>/dev/null && [ "$waited" -lt 50 ]; do sleep 0.2; waited=$((waited + 1)); done
if kill -0 "$job" 2>/dev/null; then
  bad "still running 10 s after SIGTERM"; kill -KILL "$job"
fi
wait "$job"; rc=$?
cat "$dir/err2"
[ "$rc" -eq 4 ] || bad "exit $rc after SIGTERM, want 4"
grep -q 'stopped by a signal after waiting .* for the lock .*nothing was written' "$dir/err2" || bad "no stop message"
[ -e "$dir/r.h5" ] && bad "r.h5 was created"

echo "== 2 ranks, --lock-timeout 3 --timeout 2"
start=$SECONDS
timeout 90 "$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${small[@]}" --lock-timeout 3 --timeout 2 \
  >"$dir/out3" 2>&1
rc=$?
took=$((SECONDS - start))
grep dlperf-train "$dir/out3"
[ "$rc" -eq 3 ] || bad "2 ranks: exit $rc, want 3"
[ "$took" -le 40 ] || bad "2 ranks: took $took s"
grep -q 'gave up after [0-9]* s waiting for the lock' "$dir/out3" || bad "2 ranks: no lock message"
grep -q 'has not started\|no heartbeat' "$dir/out3" && bad "2 ranks: a rank was blamed instead of the lock"

echo "== the lock free: the run appends, and no holder record is left behind"
pkill -P "$holder" 2>/dev/null; kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; holder=
"$train" "${small[@]}" --lock-timeout 5 >"$dir/out4" 2>&1 || bad "run after the lock was freed: exit $?"
[ -s "$dir/r.h5.lock" ] && bad "the lock file still names a holder: $(cat "$dir/r.h5.lock")"
h5dump -a /runs/run_000001/status "$dir/r.h5" | grep -q '"complete"' || bad "no complete run appended"

# The lock taken while the run trains, held at its final write: rank 0 stops as it opens the
# "write" phase (DLPERF_TEST_FAULT), the lock is taken, rank 0 goes on. $1: a stop signal first.
final_write_held() {
  local label=$1 stop=$2 extra=("${@:3}")
  rm -f "$dir/r.h5" "$dir/r.h5.lock"
  DLPERF_TEST_FAULT=write:0:STOP timeout 120 "$mpiexec" -x DLPERF_TEST_FAULT -np 2 --oversubscribe --bind-to none "$train" \
    "${base[@]}" --warmup 1 --output "$dir/r.h5" --timeout 60 "${extra[@]}" >"$dir/$label" 2>&1 &
  local job=$! stopped=
  if [ "$stop" = yes ]; then
    for _ in $(seq 100); do [ -s "$dir/r.h5" ] && break; sleep 0.1; done
    sleep 1
    pkill -TERM -f "^$train .*$dir/r.h5"  # the ranks, as Slurm signals them
  fi
  for _ in $(seq 300); do
    stopped=$(ps -ww -eo pid=,stat=,args= | awk -v t="$train" -v d="$dir/r.h5" '$2 ~ /T/ && $3 == t && index($0, d) { print $1; exit }')
    [ -n "$stopped" ] && break; sleep 0.1
  done
  [ -n "$stopped" ] || { bad "$label: rank 0 never reached its final write"; wait "$job"; return; }
  flock -o "$dir/r.h5.lock" sleep 300 &
  held=$!
  for _ in $(seq 50); do flock -n "$dir/r.h5.lock" true 2>/dev/null || break; sleep 0.1; done
  local start=$SECONDS
  kill -CONT "$stopped"
  wait "$job"; rc=$?
  took=$((SECONDS - start))
  pkill -P "$held" 2>/dev/null; kill "$held" 2>/dev/null; wait "$held" 2>/dev/null; held=
  grep 'dlperf-train' "$dir/$label"
}

echo "== 2 ranks, the lock held at the final write (--lock-timeout 3): every rank exits 3, no abort"
final_write_held final1 no --iterations 4 --lock-timeout 3
[ "$rc" -eq 3 ] || bad "final write: exit $rc, want 3"
[ "$took" -le 30 ] || bad "final write: took $took s after the lock was taken"
grep -q 'gave up after [0-9]* s waiting for the lock .*; the run ran 4 iterations (the results file keeps its last good flush' \
  "$dir/final1" || bad "final write: no line saying what the file keeps"
grep -qi 'aborting the job\|MPI_ABORT' "$dir/final1" && bad "final write: the job was aborted rather than ended together"

echo "== 2 ranks, SIGTERM, then the lock held at the final write (--lock-timeout 300): 20 s at most, exit 3"
final_write_held final2 yes --iterations 100000 --lock-timeout 300
[ "$rc" -eq 3 ] || bad "stopped run's final write: exit $rc, want 3"
[ "$took" -le 40 ] || bad "stopped run's final write: took $took s after the lock was taken (Slurm's KillWait is 30 s)"
grep -q "gave up after 20 s waiting for the lock .*(a stopped run's wait 20 s); nothing was written; the run stopped after" "$dir/final2" ||
  bad "stopped run: no give-up line"
grep -q 'recorded as partial' "$dir/final2" && bad "stopped run: said 'recorded as partial' with nothing recorded"

echo "== 2 ranks, the lock taken while a flush waits for it, then SIGTERM: the flush gives way, 20 s at most"
rm -f "$dir/r.h5" "$dir/r.h5.lock"
timeout 120 "$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${base[@]}" --warmup 1 --output "$dir/r.h5" --timeout 60 \
  --iterations 100000 --flush-every 1 --lock-timeout 300 >"$dir/final3" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$dir/r.h5" ] && break; sleep 0.1; done
flock -o "$dir/r.h5.lock" sleep 300 &
held=$!
for _ in $(seq 50); do grep -q 'waiting for the lock' "$dir/final3" && break; sleep 0.1; done  # a flush waits
start=$SECONDS
pkill -TERM -f "^$train .*$dir/r.h5"
wait "$job"; rc=$?
took=$((SECONDS - start))
pkill -P "$held" 2>/dev/null; kill "$held" 2>/dev/null; wait "$held" 2>/dev/null; held=
grep 'dlperf-train: gave up' "$dir/final3"
[ "$rc" -eq 3 ] || bad "flush waiting: exit $rc, want 3"
[ "$took" -le 40 ] || bad "flush waiting: took $took s after SIGTERM (the flush waited out --lock-timeout)"
grep -q "gave up after 20 s waiting for the lock .*(a stopped run's wait 20 s)" "$dir/final3" || bad "flush waiting: no give-up line"

[ "$fail" -eq 0 ] && echo "lock wait ok"
exit "$fail"
