#!/usr/bin/env bash
# A generated sbatch script's control flow without Slurm: srun, squeue, dlperf-train and
# dlperf-reduce are stand-ins on PATH that log their arguments. Checks: every repeat runs
# through srun --mpi=pmix --kill-on-bad-exit=1 with SRUN_CPUS_PER_TASK set and its own --repeat-index; a failed
# repeat does not stop the next ones but the script exits 1 at the end; the reduce table is
# printed; each job writes its own results.d/<job>_<job id>.h5 (never one file shared by jobs
# on different nodes); with less time left than the --signal lead, no repeat starts; outside
# Slurm the script says how to submit it and exits 2. Then submit_all.sh with a stand-in
# sbatch: the jobs are chained one after another (afterany on the previous), --concurrent
# submits them without a dependency, and reduce.sh waits for all and reads results.d.
#   script_behaviour_test.sh DLPERF_JOBS
set -euo pipefail
gen=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/run"
cat >"$tmp/profile.ini" <<'INI'
[slurm]
partition = debug
time = 00:10:00
cpus_per_task = 3
signal_seconds = 90
[environment]
load = none
[network]
UCX_TLS = tcp,self
INI
cat >"$tmp/matrix.ini" <<'INI'
[matrix]
models = rn50
configurations =
cpu_configurations = 1n2r 2n2r
repeats = 3
iterations = 12
warmup = 2
[rn50]
batch_per_device = 4
extra_args = --image-size 32
INI
"$gen" --profile "$tmp/profile.ini" --matrix "$tmp/matrix.ini" --output-dir "$tmp/gen" >/dev/null
script=$tmp/gen/rn50_cpu_1n2r.sh

cat >"$tmp/bin/srun" <<'SH'
#!/bin/bash
opts=()
while [[ $1 == -* ]]; do opts+=("$1"); shift; done
echo "srun ${opts[*]} SRUN_CPUS_PER_TASK=$SRUN_CPUS_PER_TASK UCX_TLS=$UCX_TLS" >>"$LOG"
exec "$@"
SH
cat >"$tmp/bin/squeue" <<'SH'
#!/bin/bash
echo "${FAKE_TIME_LEFT:-9:59}"
SH
cat >"$tmp/bin/dlperf-train" <<'SH'
#!/bin/bash
echo "dlperf-train $*" >>"$LOG"
case " $* " in *" --repeat-index ${FAKE_FAIL_REPEAT:-none} "*) echo "dlperf-train: simulated failure" >&2; exit 3 ;; esac
case " $* " in *" --repeat-index ${FAKE_PARTIAL_REPEAT:-none} "*) echo "run stopped early: stopped by signal 10; recorded as partial"; exit 4 ;; esac
echo "summary: fake"
SH
cat >"$tmp/bin/dlperf-reduce" <<'SH'
#!/bin/bash
echo "dlperf-reduce $*" >>"$LOG"
echo "| node_num | gpu_num |"
SH
chmod +x "$tmp"/bin/*

# run NAME [VAR=value ...]: runs the script in Slurm-like surroundings; sets rc.
run() {
  local name=$1
  shift
  export LOG=$tmp/$name.log
  : >"$LOG"
  rc=0
  (cd "$tmp/run" && env PATH="$tmp/bin:$PATH" SLURM_JOB_ID=42 SLURM_CPUS_PER_TASK=3 "$@" bash "$script" >"$tmp/$name.out" 2>"$tmp/$name.err") || rc=$?
}
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log "$tmp"/*.out "$tmp"/*.err; do echo "== $f" >&2; cat "$f" >&2; done; exit 1; }

run ok
[ $rc -eq 0 ] || fail "all repeats ok: exit $rc"
[ "$(grep -c '^srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores --distribution=block:block SRUN_CPUS_PER_TASK=3 UCX_TLS=tcp,self$' "$LOG")" -eq 3 ] || fail "srun lines"
for i in 0 1 2; do
  grep -q "^dlperf-train --model resnet50 --backend cpu --precision fp32 --batch-size 4 --iterations 12 --warmup 2 --threads 3 --pin-threads --image-size 32 --output results.d/rn50_cpu_1n2r_42.h5 --repeat-index $i$" "$LOG" ||
    fail "repeat $i arguments"
done
[ -d "$tmp/run/results.d" ] || fail "results.d not created"
grep -q '^dlperf-reduce --warmup 2 --window 10 results.d/rn50_cpu_1n2r_42.h5$' "$LOG" || fail "reduce arguments"
grep -q '| node_num | gpu_num |' "$tmp/ok.out" || fail "table not printed"

run one_fails FAKE_FAIL_REPEAT=1 DLPERF_RESULTS=/data/r.h5
[ $rc -eq 1 ] || fail "a failed repeat: exit $rc, want 1"
[ "$(grep -c '^dlperf-train ' "$LOG")" -eq 3 ] || fail "repeats after the failure did not run"
grep -q -- '--output /data/r.h5 --repeat-index 2$' "$LOG" || fail "DLPERF_RESULTS not used"
grep -q 'repeat 1 failed (exit 3); going on with the next' "$tmp/one_fails.err" || fail "failure message"
grep -q '1 of 3 repeats failed' "$tmp/one_fails.err" || fail "summary message"
grep -q '^dlperf-reduce ' "$LOG" || fail "no reduce after a failure"

# dlperf-train exits 4 when a signal (--signal=USR1 before the time limit) stopped it: the run
# is partial, no time is left for another repeat, and the job reports it.
run partial FAKE_PARTIAL_REPEAT=1
[ $rc -eq 1 ] || fail "a partial repeat: exit $rc, want 1"
[ "$(grep -c '^dlperf-train ' "$LOG")" -eq 2 ] || fail "a repeat started after the partial one"
grep -q 'repeat 1 stopped early by a signal, recorded as partial; no further repeats' "$tmp/partial.err" || fail "partial message"
grep -q '2 of 3 repeats failed, stopped early or were not started' "$tmp/partial.err" || fail "partial summary"
grep -q '^dlperf-reduce ' "$LOG" || fail "no reduce after a partial repeat"

run no_time FAKE_TIME_LEFT=1:29
[ $rc -eq 1 ] || fail "no time left: exit $rc, want 1"
grep -q '^dlperf-train ' "$LOG" && fail "a repeat started with 89 s left and a 90 s signal lead"
grep -q '89 s left, too little for repeat 0 of 3: not started' "$tmp/no_time.err" || fail "no-time message"

run long_job FAKE_TIME_LEFT=1-02:03:04 DLPERF_RESULTS_DIR="$tmp/scratch/rd"
[ $rc -eq 0 ] || fail "days-hours:minutes:seconds time left: exit $rc"
grep -q -- "--output $tmp/scratch/rd/rn50_cpu_1n2r_42.h5 --repeat-index 0$" "$LOG" || fail "DLPERF_RESULTS_DIR not used"
[ -d "$tmp/scratch/rd" ] || fail "DLPERF_RESULTS_DIR not created"

rc=0
env -u SLURM_JOB_ID bash "$script" >"$tmp/outside.out" 2>"$tmp/outside.err" || rc=$?
[ $rc -eq 2 ] || fail "outside Slurm: exit $rc, want 2"
grep -q "sbatch $script" "$tmp/outside.err" || fail "outside Slurm: no sbatch hint"

# submit_all.sh with a stand-in sbatch that logs its arguments and hands out job ids 100, 101, ...
cat >"$tmp/bin/sbatch" <<'SH'
#!/bin/bash
n=$(( $(wc -l <"$LOG") + 100 ))
echo "sbatch $*" >>"$LOG"
echo "$n;cluster"
SH
chmod +x "$tmp/bin/sbatch"
submit() {
  local name=$1
  shift
  export LOG=$tmp/$name.log
  : >"$LOG"
  rc=0
  (cd "$tmp/run" && PATH="$tmp/bin:$PATH" "$tmp/gen/submit_all.sh" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err") || rc=$?
}
submit chained cpu --account=proj
[ $rc -eq 0 ] || fail "submit_all.sh cpu: exit $rc"
[ "$(sed -n 1p "$LOG")" = "sbatch --parsable --account=proj $tmp/gen/rn50_cpu_1n2r.sh" ] || fail "first job: $(sed -n 1p "$LOG")"
[ "$(sed -n 2p "$LOG")" = "sbatch --parsable --dependency=afterany:100 --account=proj $tmp/gen/rn50_cpu_2n2r.sh" ] ||
  fail "second job not chained after the first: $(sed -n 2p "$LOG")"
[ "$(sed -n 3p "$LOG")" = "sbatch --parsable --dependency=afterany:100:101 --account=proj $tmp/gen/reduce.sh" ] ||
  fail "reduce job: $(sed -n 3p "$LOG")"
grep -q '^submitted rn50_cpu_2n2r.sh as job 101 (after job 100)$' "$tmp/chained.out" || fail "chained message"

submit concurrent cpu --concurrent
[ $rc -eq 0 ] || fail "submit_all.sh cpu --concurrent: exit $rc"
[ "$(grep -c -- '--dependency' "$LOG")" -eq 1 ] || fail "--concurrent: only reduce.sh may have a dependency"
grep -q "^sbatch --parsable --dependency=afterany:100:101 $tmp/gen/reduce.sh$" "$LOG" || fail "--concurrent reduce job"

submit no_gpu gpu
[ $rc -eq 2 ] || fail "no GPU jobs in the matrix: exit $rc, want 2"
submit bad_word bogus
[ $rc -eq 2 ] || fail "unknown first word: exit $rc, want 2"
# Issue 27 item 9: the selector after sbatch options ('--account=x cpu' submitted a script named
# 'cpu'), --concurrent anywhere; a bare word is refused before anything is submitted.
submit after_options --account=proj cpu
[ $rc -eq 0 ] || fail "--account=proj cpu: exit $rc: $(cat "$tmp/after_options.err")"
[ "$(sed -n 1p "$LOG")" = "sbatch --parsable --account=proj $tmp/gen/rn50_cpu_1n2r.sh" ] || fail "selector after options: $(sed -n 1p "$LOG")"
submit late_concurrent --account=proj cpu --concurrent
[ $rc -eq 0 ] && [ "$(grep -c -- '--dependency' "$LOG")" -eq 1 ] || fail "--concurrent after the selector: exit $rc, $(cat "$LOG")"
submit bare_value --account proj cpu
[ $rc -eq 2 ] && [ ! -s "$LOG" ] || fail "--account proj (a bare word): exit $rc, submitted: $(cat "$LOG")"
grep -q "'proj' is neither gpu, cpu, data, comm, llm nor all" "$tmp/bare_value.err" || fail "bare word message: $(cat "$tmp/bare_value.err")"
submit two_selectors cpu gpu
[ $rc -eq 2 ] && [ ! -s "$LOG" ] || fail "two selectors: exit $rc"

# reduce.sh reads the whole results directory and writes results.csv/.json/.svg beside it.
script=$tmp/gen/reduce.sh
run reduce
[ $rc -eq 0 ] || fail "reduce.sh: exit $rc"
grep -q '^dlperf-reduce --warmup 2 --window 10 results.d --csv results.csv --json results.json --plot results.svg$' "$LOG" ||
  fail "reduce.sh arguments"

# A fabric-health job (issue 27 item 3): dlperf-comm allreduce, reduce_scatter and all_gather
# in turn through srun with the training jobs' network settings, one record per op in
# results.d/comm_<tag>_<op>_<job id>.comm, all reduced at the end with the profile's [fabric]
# rates; every op runs whatever the one before gave, and the job exits with the worst status;
# submit_all.sh comm submits it.
printf '[fabric]\nlink_gbps = 100\n' >>"$tmp/profile.ini"
printf '[comm]\nconfigurations = 2n4g\ncpu_configurations = 2n2r\nmax_bytes = 64M\n' >>"$tmp/matrix.ini"
"$gen" --profile "$tmp/profile.ini" --matrix "$tmp/matrix.ini" --output-dir "$tmp/gen" >/dev/null
cat >"$tmp/bin/dlperf-comm" <<'SH'
#!/bin/bash
echo "dlperf-comm $*" >>"$LOG"
op=allreduce out=
while [ $# -gt 0 ]; do case $1 in --op) op=$2; shift ;; --output) out=$2; shift ;; esac; shift; done
echo "dlperf-comm record 1" >"$out"
rc=FAKE_COMM_RC_$op
exit "${!rc:-0}"
SH
chmod +x "$tmp/bin/dlperf-comm"
script=$tmp/gen/comm_2n4g.sh
run comm
[ $rc -eq 0 ] || fail "comm_2n4g.sh: exit $rc"
grep -q '^srun --mpi=pmix --kill-on-bad-exit=1 .* UCX_TLS=tcp,self$' "$LOG" || fail "comm job: srun line"
for op in allreduce reduce_scatter all_gather; do
  grep -q "^dlperf-comm --backend nccl --op $op -b 8 -e 64M -f 2 -n 20 -w 5 --output results.d/comm_2n4g_${op}_42.comm$" "$LOG" ||
    fail "comm job: dlperf-comm arguments for $op"
  [ -f "$tmp/run/results.d/comm_2n4g_${op}_42.comm" ] || fail "comm job: no $op record in results.d"
done
[ "$(grep -c '^dlperf-comm ' "$LOG")" -eq 3 ] || fail "comm job: not 3 dlperf-comm runs"
grep -q '^dlperf-reduce results.d/comm_2n4g_allreduce_42.comm results.d/comm_2n4g_reduce_scatter_42.comm results.d/comm_2n4g_all_gather_42.comm --link-gbps 100 --link-warn 0.8$' "$LOG" ||
  fail "comm job: reduce arguments"
run comm_fail FAKE_COMM_RC_reduce_scatter=1
[ $rc -eq 1 ] && grep -q -- '--op all_gather' "$LOG" && grep -q 'dlperf-comm --op reduce_scatter exited 1' "$tmp/comm_fail.err" ||
  fail "comm job with a wrong reduce_scatter element: exit $rc, want 1 with all_gather still run"
run comm_worst FAKE_COMM_RC_allreduce=3 FAKE_COMM_RC_all_gather=1
[ $rc -eq 3 ] && [ "$(grep -c '^dlperf-comm ' "$LOG")" -eq 3 ] || fail "comm job with a fault and a wrong element: exit $rc, want the worst, 3"
script=$tmp/gen/comm_cpu_2n2r.sh
run comm_cpu
[ $rc -eq 0 ] && grep -q '^dlperf-comm --backend mpi --op all_gather -b 8 -e 64M ' "$LOG" && ! grep -q gpus-per-node "$script" || fail "comm_cpu_2n2r.sh: exit $rc"
grep -q '^#SBATCH --partition=debug$' "$script" || fail "comm_cpu_2n2r.sh: not the [cpu] partition"
submit comm_only comm
[ $rc -eq 0 ] && [ "$(sed -n 1p "$LOG")" = "sbatch --parsable $tmp/gen/comm_2n4g.sh" ] &&
  [ "$(sed -n 2p "$LOG")" = "sbatch --parsable --dependency=afterany:100 $tmp/gen/comm_cpu_2n2r.sh" ] || fail "submit_all.sh comm: exit $rc, $(cat "$LOG")"
echo "script behaviour ok"
