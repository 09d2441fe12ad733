#!/usr/bin/env bash
# No collective outside the watchdog (issue 28): one of 2 ranks is stopped (SIGSTOP) or
# killed (SIGKILL) exactly in one phase of dlperf-train, through the test-only hook
# DLPERF_TEST_FAULT=POINT:RANK:SIGNAL[:N] (src/core/test_fault.h). Each case must end the job
# within --timeout + SLACK seconds of the fault, non-zero, with one line from the surviving
# rank naming the phase it waited in and the rank at fault; the results file keeps the
# complete run written first, and its lock is free once the job has ended.
#   SIGSTOP: the survivor aborts the job (exit 3).
#   SIGKILL: mpirun runs with orte_abort_on_non_zero_status 0 (Open MPI 4) or
#            --enable-recovery (Open MPI 5), as srun without --kill-on-bad-exit, so the
#            survivor must notice by itself (Open MPI 5's mpirun then exits 0 whatever the
#            ranks do: the survivor's code is read from Open MPI's MPI_ABORT report); it aborts with 3, and
#            mpirun reports 3 or the killed rank's 137. "finalize" with SIGKILL runs under the
#            default (the job kept, mpirun itself never exits once every rank is gone).
# Usage: [PHASE_FAULT_ARGS="--pin-threads"] [PHASE_FAULT_DATASET=DLPERF_MAKE_DATASET] \
#          phase_fault_test.sh DLPERF_TRAIN MPIEXEC CASE...
#   PHASE_FAULT_DATASET: every run trains from a small JPEG folder tree this tool writes first
#   (--data: the "dataset" phase, where rank 0 indexes the files and shares the index).
#   CASE = POINT:VICTIM:SIGNAL[:N]=EXPECTED_PHASE   (EXPECTED_PHASE: where the survivor waits)
set -u
train=$1 mpiexec=$2
shift 2
timeout_s=3
slack_s=5  # MPI_Abort's teardown, the 50 ms watchdog poll, a loaded machine
dir=$(mktemp -d)
tag="phase$$"
trap 'pkill -KILL -f -- "--variant=[a-z-]*$tag" 2>/dev/null; rm -rf "$dir"' EXIT
results="$dir/results.h5"
data_args=()
if [ -n "${PHASE_FAULT_DATASET:-}" ]; then
  "$PHASE_FAULT_DATASET" --output "$dir/data" --classes 10 --images-per-class 4 --width 48 --height 40 \
    --layout folder --threads 1 >/dev/null || { echo "FAIL: $PHASE_FAULT_DATASET wrote no dataset"; exit 1; }
  data_args=(--data "$dir/data/train")
fi
small=(--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 4 --num-classes 10 --threads 1
       --iterations 4 --warmup 1 --flush-every 2 --timeout "$timeout_s" --lock-timeout 5 --output "$results"
       "${data_args[@]}" ${PHASE_FAULT_ARGS:-})
fail=0
start_all=$(date +%s)
# mpirun's way to let a job run on after one of its processes is gone: Open MPI 4's ORTE takes
# an MCA parameter; Open MPI 5's PRRTE rejects that and has a launch option instead.
if "$mpiexec" --version 2>/dev/null | grep -Eq '(Open MPI|OpenRTE)\) [0-4]\.'; then
  keep_going=(--mca orte_abort_on_non_zero_status 0)
else
  keep_going=(--enable-recovery)
fi

"$mpiexec" -np 2 --oversubscribe --bind-to none "$train" "${small[@]}" --variant="first-$tag" >"$dir/first.log" 2>&1 \
  || { echo "FAIL: the complete run failed"; cat "$dir/first.log"; exit 1; }

# The lock is free once the job's last process has gone. A killed rank may take a few
# seconds to finish exiting on a loaded machine (unmapping its memory; the kernel drops its
# flock only after that), still holding the lock meanwhile: wait for that process (the holder
# the lock file names, bounded), then the lock must be free.
lock_free_after_job() {
  flock -n "$results.lock" true && return 0
  local holder
  holder=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$results.lock")
  [ -n "$holder" ] || return 1
  ps -o pid=,stat=,args= -p "$holder" | grep -q "dlperf-train\|<defunct>" || { ps -fp "$holder"; return 1; }
  for _ in $(seq 1 300); do [ -d "/proc/$holder" ] || break; sleep 0.1; done
  flock -n "$results.lock" true
}

for case in "$@"; do
  spec=${case%%=*} expect=${case#*=}
  IFS=: read -r point victim sig _ <<<"$spec"
  survivor=$((1 - victim))
  keep=("${keep_going[@]}")
  [ "$sig" = KILL ] && [ "$point" = finalize ] && keep=()
  [ "$sig" = STOP ] && keep=()
  log="$dir/$point-$victim-$sig.log"
  DLPERF_TEST_FAULT=$spec timeout -k 5 60 "$mpiexec" -np 2 --oversubscribe --bind-to none "${keep[@]}" "$train" "${small[@]}" \
    --variant="case-$tag" >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  # Open MPI 5's output forwarding may put NUL bytes at the start of a line (a rank stopped or
  # killed mid-write): drop them so that each line's text starts the line.
  tr -d '\000' <"$log" >"$log.txt" && mv "$log.txt" "$log"
  # Open MPI 5's mpirun under --enable-recovery exits 0 even when a rank called MPI_Abort: the
  # survivor's abort code then comes from Open MPI's own report of it.
  if [ "$rc" -eq 0 ] && [ "${keep[0]:-}" = --enable-recovery ] &&
     grep -aq "MPI_ABORT was invoked on rank $survivor in communicator" "$log"; then
    rc=$(grep -a -A2 "MPI_ABORT was invoked on rank $survivor in communicator" "$log" | sed -n 's/^ *Errorcode: \([0-9]*\)$/\1/p' | head -1)
    rc=${rc:-0}
  fi
  # mpirun may return while the ranks it killed are still going (a stopped one gets SIGCONT,
  # runs on, then SIGKILL): the job has ended once none of its processes is left.
  pkill -KILL -f -- "--variant=case-$tag" 2>/dev/null
  for _ in $(seq 1 100); do pgrep -f -- "--variant=case-$tag" >/dev/null || break; sleep 0.1; done
  fault_t=$(grep -ao 'raises signal [0-9]* at [a-z-]* #[0-9]* (t=[0-9.]*' "$log" | grep -o '[0-9.]*$')
  if [ -z "$fault_t" ]; then echo "FAIL $case: the fault never fired (exit $rc)"; grep -av "^iter" "$log" | tail -12 | cut -c1-300; fail=1; continue; fi
  took=$(awk -v a="$end" -v b="$fault_t" 'BEGIN { printf "%.1f", a - b }')
  # The survivor names the phase it waited in and the rank at fault; in MPI_Finalize no
  # heartbeat is left to tell which peer is missing, so that line names the phase only.
  who=".*rank $victim \\("
  [ "$expect" = finalize ] && who=""
  line=$(grep -aE "^dlperf-train: rank $survivor \\([^)]*\\): phase $expect[: ]$who" "$log" | head -1)
  if [ "$rc" -eq 124 ] || awk -v t="$took" -v b=$((timeout_s + slack_s)) 'BEGIN { exit !(t > b) }'; then
    echo "FAIL $case: the job ended ${took} s after the fault (bound $timeout_s + $slack_s s)"; fail=1
  elif [ "$rc" -eq 0 ]; then
    echo "FAIL $case: exit 0"; grep -av "^iter" "$log" | tail -12 | cut -c1-300; fail=1
  elif [ "$sig" = STOP ] && [ "$rc" -ne 3 ]; then
    echo "FAIL $case: exit $rc, want 3"; tail -5 "$log"; fail=1
  elif [ "$sig" = KILL ] && [ "$rc" -ne 3 ] && [ "$rc" -ne 137 ]; then
    echo "FAIL $case: exit $rc, want 3 (or mpirun's 137 for the killed rank)"; tail -5 "$log"; fail=1
  elif [ -z "$line" ] && ! { [ "$sig" = KILL ] && [ "$point" = finalize ]; }; then
    echo "FAIL $case: no line from rank $survivor naming phase $expect and rank $victim:"; grep -av '^iter' "$log" | tail -15 | cut -c1-300; fail=1
  elif ! lock_free_after_job; then
    echo "FAIL $case: the results lock outlived the job: $(cat "$results.lock")"; fail=1
  else
    printf 'ok   %-22s exit %3s, %4s s after the fault: %s\n' "$case" "$rc" "$took" "${line:0:160}"
  fi
done

# The complete run written first is still there, and the file is readable.
if ! h5dump -A -g /runs/run_000001 "$results" >"$dir/dump.txt" 2>&1 || ! grep -q '"complete"' "$dir/dump.txt"; then
  echo "FAIL: the first (complete) run is gone or unreadable"; head -20 "$dir/dump.txt"; fail=1
fi
echo "phase_fault_test: $# cases in $(( $(date +%s) - start_all )) s"
[ "$fail" -eq 0 ] && echo "all phase fault checks passed"
exit "$fail"
