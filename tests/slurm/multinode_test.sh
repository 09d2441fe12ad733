#!/usr/bin/env bash
# Multi-node Slurm end to end, on one machine: a cluster of network namespaces
# (netns_cluster.sh: one slurmd per "node", each with its own host name, Slurm temporary
# directory and a veth into a bridge), Open MPI over UCX's TCP transport between them, and
# the generated job scripts submitted with sbatch as a user would. One mode per CTest test:
#
#   jobs     4 nodes: the multi-node CPU-backend jobs (*_cpu_2n2r.sh, *_cpu_4n2r.sh, every
#            model) through submit_all.sh, one after another: each job completes and writes
#            its own results.d/<job>_<job id>.h5 (the default), whose runs are complete and
#            spread over 2 or 4 hosts with local ranks 0,1 on each, every rank's host is in the
#            trace, the replicas are bit-identical, and reduce.sh prints the table of the whole
#            results.d and writes results.csv, .json, .svg.
#   fabric   2 nodes, every link shaped with tc (tbf) to HIGH and then LOW bandwidth:
#            dlperf-comm's bus bandwidth (1 rank per node, its nccl-tests-shaped row) within
#            TOLERANCE of the link, and the 2-node job's exposed communication up and scaling
#            efficiency down at LOW (dlperf-reduce over the jobs' default results.d files), its
#            communication time no faster than the link allows.
#   faults   2 nodes: a rank on the second node killed (SIGKILL) inside MPI start-up, one
#            killed mid-run, then the second node's switch port taken down mid-allreduce: each
#            job ends within --timeout plus Slurm's step teardown, the error names the lost
#            rank and its host, and the runs before the fault stay complete in the results file
#            (all three jobs append to one file, DLPERF_RESULTS: the later faults must not
#            damage the earlier jobs' runs). Then issue 28's phases across the nodes: a rank of
#            node 2 stopped or killed in the parameter broadcast, a step, the trace gather and
#            the final barrier (phase_job).
#
#   multinode_test.sh MODE DLPERF_JOBS DLPERF_TRAIN DLPERF_REDUCE DLPERF_COMM
# DLPERF_MULTINODE_KEEP=1 keeps the directory (logs, job outputs, results) of a failed run.
# The job scripts come from dlperf-jobs with a test profile and matrix (reduced networks, few
# iterations): the committed jobs/*_cpu_2n2r.sh and *_cpu_4n2r.sh are the same generator's
# output for jobs/profiles/generic.ini, and the only differences are the profile's and the
# matrix's knobs (partition, CPUs per task, environment, [network], shapes, repeats).
# Exit 77 (CTest: skipped) where network namespaces, veths or a bridge cannot be made, or
# Slurm, munge or python3-h5py are missing; the reason is printed.
set -Eeuo pipefail
# The check that failed, for the last line of a failed run (ctest and CI show its head and tail).
failed_check=''
trap '[ -n "$failed_check" ] || failed_check="line $LINENO: $BASH_COMMAND"' ERR  # the first one: set -e exits there
mode=$1
jobs_exe=$(realpath "$2")
train_exe=$(realpath "$3")
reduce_exe=$(realpath "$4")
comm_exe=$(realpath "$5")
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3

# shellcheck source=netns_cluster.sh
. "$here/netns_cluster.sh"
if ! why=$(netns_cluster_can_start); then echo "multinode test: $why; skipped"; exit 77; fi
if ! "$python" -c 'import h5py' 2>/dev/null; then
  echo "multinode test: $python cannot import h5py (scripts/setup-debian.sh --tests installs python3-h5py); skipped"
  exit 77
fi
# A developer may run this inside an allocation: the test's jobs must not inherit it.
while read -r v; do unset "$v"; done < <(env | grep -o '^SLURM_[A-Z_]*' || true)

# This directory plays the cluster's shared file system (job scripts, submit directory,
# results) and holds the cluster's state. Named after this
# process, so a later run removes it if this one is killed before its EXIT trap runs (the
# namespaces and daemons of such a run go at the next netns_cluster_start).
for old in /var/tmp/dlperf-multinode-*.*; do
  [ -d "$old" ] || continue
  owner=${old#/var/tmp/dlperf-multinode-}
  kill -0 "${owner%%.*}" 2>/dev/null || rm -rf "$old"
done
dir=$(mktemp -d "/var/tmp/dlperf-multinode-$$.XXXXXX")
chmod 0755 "$dir"
work=$dir/work
mkdir -p "$work" "$dir/gen"
cleanup() {
  local rc=$?
  set +e
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "multinode test ($mode) failed (exit $rc); job outputs and daemon logs:" >&2
    for f in "$work"/*.out "$dir"/cluster/log/*; do
      if [ -f "$f" ]; then echo "== $f" >&2; tail -n 40 "$f" >&2; fi
    done
  fi
  netns_cluster_stop
  if [ $rc -ne 0 ] && [ "${DLPERF_MULTINODE_KEEP:-0}" = 1 ]; then
    echo "multinode test: kept $dir (DLPERF_MULTINODE_KEEP=1)" >&2
  else
    rm -rf "$dir"
  fi
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "multinode test ($mode) FAILED (exit $rc) at ${failed_check:-an unrecorded check}" >&2
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# dlperf's programs from this build: the profile's environment is "none" and sbatch passes
# PATH on (--export=ALL), as it passes the results knob DLPERF_RESULTS (the faults mode's).
PATH="$(dirname "$train_exe"):$(dirname "$reduce_exe"):$(dirname "$comm_exe"):$PATH"
export PATH

# The test cluster's profile. [network], exported by the job scripts before srun: Open MPI
# over UCX (as the generic profile's InfiniBand cluster), with UCX's TCP transport between
# nodes and shared memory within one, as on an Ethernet cluster; Open MPI's UCX PML accepts
# TCP-only UCX once pml_ucx_tls/devices say "any". Not ob1 with the TCP BTL: Open MPI 4.1.4's
# TCP BTL crashed inside MPI_Init in 2 of 30 launches of 8 ranks on 4 of these nodes (a
# fragment for the PML arriving before its callback is registered: a call through NULL).
cat >"$dir/profile.ini" <<'INI'
[cluster]
name = netns-test
description = network namespaces on one machine (tests/slurm/netns_cluster.sh)
[slurm]
partition = debug
time = 00:15:00
cpus_per_task = 1
signal_seconds = 30
mpi = pmix
[environment]
load = none
[network]
OMPI_MCA_pml = ucx
OMPI_MCA_pml_ucx_tls = any
OMPI_MCA_pml_ucx_devices = any
UCX_TLS = tcp,sm,self
INI
# The same for the test's own sruns (dlperf-comm).
export OMPI_MCA_pml=ucx OMPI_MCA_pml_ucx_tls=any OMPI_MCA_pml_ucx_devices=any UCX_TLS=tcp,sm,self

rn50_small="--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --num-classes 10"

# sbatch SCRIPT [sbatch options] on the head node, from the submit directory; prints the job id.
submit() {
  local script=$1
  shift
  netns_cluster_exec sbatch --parsable --chdir="$work" "$@" "$script" | cut -d';' -f1
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# The multi-node jobs of every model, 2 and 4 nodes x 2 ranks, through submit_all.sh.
mode_jobs() {
  netns_cluster_start "$dir/cluster" 4 2
  cat >"$dir/matrix.ini" <<INI
[matrix]
models = rn50 vgg16 bert_base
configurations =
cpu_configurations = 2n2r 4n2r
repeats = 2
iterations = 6
warmup = 2
extra_args = --print-every 0
[rn50]
batch_per_device = 4
extra_args = $rn50_small
[vgg16]
batch_per_device = 2
extra_args = --vgg-width 8 --vgg-hidden 32 --image-size 32 --num-classes 10
[bert_base]
batch_per_device = 2
extra_args = --seq-len 16 --max-predictions 4 --bert-layers 1 --bert-hidden 32 --bert-heads 2 --bert-intermediate 64 --bert-vocab 128
INI
  "$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix.ini" --output-dir "$dir/gen"

  echo "== submit_all.sh cpu: 3 models x (2n2r, 4n2r), 2 repeats each, then the reduce job"
  local t0=$SECONDS
  (cd "$work" && netns_cluster_exec "$dir/gen/submit_all.sh" cpu --chdir="$work") | tee "$work/submit.log"
  local script id state nodes out model file files=''
  while read -r script id; do
    netns_cluster_wait_job "$id" 600
    state=$NETNS_CLUSTER_JOB_STATE
    echo "$script job $id: $state ($((SECONDS - t0)) s)"
    out=$(ls "$work"/*_"$id".out)
    [ "$state" = COMPLETED ] || { cat "$out"; return 1; }
    nodes=${script##*_cpu_}
    nodes=${nodes%%n*}
    [ "$(grep -c '^dlperf: repeat [01] of 2$' "$out")" -eq 2 ]
    [ "$(grep -c "^replicas: parameters bit-identical on all $((2 * nodes)) ranks" "$out")" -eq 2 ]
    grep -Eq "^\| $nodes \| $((2 * nodes)) \| [0-9]+ \| [0-9.]+ \|" "$out"   # the job's own table
    grep -q "^export UCX_TLS='tcp,sm,self'$" "$dir/gen/$script"
    # The job's runs, in its own file (the default users get), as h5py reads them: this job's
    # two runs and nothing else.
    file=$work/results.d/${script%.sh}_$id.h5
    [ -f "$file" ] || { echo "job $id wrote no $file" >&2; ls -l "$work/results.d" >&2; return 1; }
    model=${script%%_cpu_*}
    [ "$model" != rn50 ] || model=resnet50
    "$python" "$here/check_multinode_runs.py" --host-regex "m${NETNS_CLUSTER_TAG}n[1-4]" --job-id "$id" \
      --expect "$model:$nodes:2:2" "$file" </dev/null
    files+="$file "
  done < <(sed -n 's/^submitted \([^ ]*_cpu_[^ ]*\.sh\) as job \([0-9]*\).*/\1 \2/p' "$work/submit.log")
  # Six jobs, one results file each and no other (beside them only dlperf-train's .lock files).
  [ "$(echo "$files" | wc -w)" -eq 6 ] || { echo "6 multi-node jobs expected in submit_all.sh's output" >&2; return 1; }
  [ "$(find "$work/results.d" -name '*.h5' | sort | tr '\n' ' ')" = "$(echo "$files" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/^ //')" ] ||
    { echo "results.d/ holds other files than the jobs' own:" >&2; ls -l "$work/results.d" >&2; return 1; }
  id=$(sed -n 's/^submitted reduce.sh as job \([0-9]*\).*/\1/p' "$work/submit.log")
  netns_cluster_wait_job "$id" 120
  state=$NETNS_CLUSTER_JOB_STATE
  echo "reduce job $id: $state"
  [ "$state" = COMPLETED ]
  out=$(ls "$work"/*_"$id".out)
  cat "$out"
  for m in resnet50 vgg16 bert_base; do grep -q "^## $m " "$out"; done
  # The throughput table's rows (node_num, gpu_num, batch, samples/s, speedup, efficiency), per model.
  [ "$(grep -Ec '^\| 2 \| 4 \| [0-9]+ \| [0-9.]+ \| [^|]* \| [^|]* \|$' "$out")" -eq 3 ]
  [ "$(grep -Ec '^\| 4 \| 8 \| [0-9]+ \| [0-9.]+ \| [^|]* \| [^|]* \|$' "$out")" -eq 3 ]
  # reduce.sh's files beside results.d.
  [ -s "$work/results.csv" ] && [ -s "$work/results.json" ] && [ -s "$work/results.svg" ]
}

# Reads one row of dlperf-reduce's markdown: "node_num gpu_num" ($2) of table number $3
# (1: throughput, 3: phases) in file $1; prints its cells separated by blanks, % signs dropped.
table_row() {
  awk -v want="$2" -v table="$3" '
    /^\| node_num/ { n++ }
    n == table && /^\| [0-9]/ {
      split($0, c, "|"); key = c[2] + 0 " " c[3] + 0
      if (key == want) { line = ""; for (i = 2; i < length(c); i++) { v = c[i]; gsub(/[ %]/, "", v); line = line v " " } print line; exit }
    }' "$1"
}

# Every link at HIGH, then at LOW bandwidth: dlperf-comm's bus bandwidth against the link, and
# a 2-node job's exposed communication and scaling efficiency against a 1-node baseline.
mode_fabric() {
  local high=${DLPERF_MULTINODE_HIGH:-100mbit} low=${DLPERF_MULTINODE_LOW:-20mbit}
  # Bus bandwidth / link rate must lie in [min, max]: TCP/IPv4 headers and Ethernet framing
  # take 4.4% of a 1500-byte frame (the shaper counts frames), acknowledgements share the
  # shaped links, and the allreduce adds a reduction and a latency per step: 0.75 leaves room
  # for those on a loaded 2-core machine; above 1.05 the link would not be what was set.
  local min_ratio=0.75 max_ratio=1.05
  netns_cluster_start "$dir/cluster" 2 2
  cat >"$dir/matrix.ini" <<INI
[matrix]
models = rn50
configurations =
cpu_configurations = 1n1r 2n1r
repeats = 2
iterations = 12
warmup = 2
extra_args = --print-every 0
[rn50]
batch_per_device = 4
extra_args = $rn50_small
INI
  "$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix.ini" --output-dir "$dir/gen"

  # Each job's runs in its own results.d/<job>_<job id>.h5, as the scripts write them by default.
  echo "== baseline: 1 node x 1 rank (no traffic between nodes)"
  local id state out base
  id=$(submit "$dir/gen/rn50_cpu_1n1r.sh")
  netns_cluster_wait_job "$id" 300
  state=$NETNS_CLUSTER_JOB_STATE
  echo "rn50_cpu_1n1r.sh job $id: $state"
  [ "$state" = COMPLETED ]
  base=$work/results.d/rn50_cpu_1n1r_$id.h5
  [ -f "$base" ] || { echo "job $id wrote no $base" >&2; return 1; }

  local rate bits bytes comm busbw ratio params
  for rate in "$high" "$low"; do
    echo "== every link at $rate (tbf on both ends of each veth)"
    netns_cluster_shape "$rate"
    netns_cluster_exec tc qdisc show dev "$(netns_cluster_link_dev 1)"
    bits=$(netns_cluster_rate_bits "$rate")
    # A message that takes about a quarter of a second on the link: latency is negligible.
    bytes=4096
    while [ $((bytes * 2 * 32)) -le "$bits" ]; do bytes=$((bytes * 2)); done
    comm=$(netns_cluster_exec srun -N2 --ntasks-per-node=1 --mpi=pmix dlperf-comm --min-bytes "$bytes" --max-bytes "$bytes" \
             --iters 8 --warmup 2 --timeout 60)
    echo "$comm"
    # 2 ranks: busbw = algbw = size / time, from the in-place time column (the gradients' case;
    # it has more digits than the GB/s columns). nccl-tests' row: size count type redop root,
    # then time algbw busbw #wrong out of place and in place. Exactly one such row (one size),
    # no element wrong in either case, and the summary line's verdict.
    [ "$(echo "$comm" | grep -Ec '^ *[0-9]+ +[0-9]+ +float +sum +-?[0-9]+( +[0-9.]+){3} +[0-9]+( +[0-9.]+){3} +[0-9]+ *$')" -eq 1 ] ||
      { echo "dlperf-comm printed no single nccl-tests-shaped row for $bytes bytes" >&2; return 1; }
    busbw=$(echo "$comm" | awk '$1 ~ /^[0-9]+$/ { printf "%.4f", $1 / $10 / 1e3 }')
    [ "$(echo "$comm" | awk '$1 ~ /^[0-9]+$/ { print $9 + $13 }')" = 0 ]  # #wrong
    echo "$comm" | grep -q '^# dlperf-comm result: .* wrong=0 status=PASS$'
    ratio=$(awk -v b="$busbw" -v r="$bits" 'BEGIN { printf "%.3f", b * 8e9 / r }')
    echo "bus bandwidth $busbw GB/s = $ratio x the link's $rate (accepted: $min_ratio .. $max_ratio)"
    awk -v x="$ratio" -v lo="$min_ratio" -v hi="$max_ratio" 'BEGIN { exit !(x >= lo && x <= hi) }'

    id=$(submit "$dir/gen/rn50_cpu_2n1r.sh")
    netns_cluster_wait_job "$id" 300
    state=$NETNS_CLUSTER_JOB_STATE
    echo "rn50_cpu_2n1r.sh job $id at $rate: $state"
    [ "$state" = COMPLETED ]
    out=$work/dlperf_rn50_cpu_2n1r_$id.out
    params=$(sed -n 's/^parameters: \([0-9,]*\)$/\1/p' "$out" | head -1 | tr -d ,)
    [ -n "$params" ] || { echo "no 'parameters: N' line in $out: no floor for the communication time" >&2; return 1; }
    "$reduce_exe" --warmup 2 --window 10 "$base" "$work/results.d/rn50_cpu_2n1r_$id.h5" >"$work/reduce-$rate.md"
    sed -n '/^| node_num/,/^$/p' "$work/reduce-$rate.md"
  done
  netns_cluster_shape none

  # table 1: node gpu batch samples/s speedup efficiency; table 3: node gpu step data forward
  # backward exposed optimizer other comm_total_ms hidden.
  local eff_high eff_low exp_high exp_low comm_low step_high step_low
  read -r _ _ _ _ _ eff_high < <(table_row "$work/reduce-$high.md" "2 2" 1)
  read -r _ _ _ _ _ eff_low < <(table_row "$work/reduce-$low.md" "2 2" 1)
  read -r _ _ step_high _ _ _ exp_high _ _ _ < <(table_row "$work/reduce-$high.md" "2 2" 3)
  read -r _ _ step_low _ _ _ exp_low _ _ comm_low _ < <(table_row "$work/reduce-$low.md" "2 2" 3)
  local exp_ms_high exp_ms_low floor_ms
  exp_ms_high=$(awk -v s="$step_high" -v p="$exp_high" 'BEGIN { printf "%.1f", s * p / 100 }')
  exp_ms_low=$(awk -v s="$step_low" -v p="$exp_low" 'BEGIN { printf "%.1f", s * p / 100 }')
  # 2 ranks: each sends and receives half the gradients twice (reduce-scatter, allgather), so
  # an allreduce of 4*params bytes takes at least that many bytes over the link.
  floor_ms=$(awk -v p="$params" -v r="$(netns_cluster_rate_bits "$low")" 'BEGIN { printf "%.1f", 4 * p * 8 / r * 1000 }')
  echo "2 nodes x 1 rank, $params parameters: efficiency $eff_high% at $high, $eff_low% at $low;" \
       "exposed communication $exp_ms_high ms/step ($exp_high%) at $high, $exp_ms_low ms/step ($exp_low%) at $low;" \
       "communication at $low $comm_low ms/step, the link's floor $floor_ms ms"
  awk -v h="$eff_high" -v l="$eff_low" 'BEGIN { exit !(l < h) }' || { echo "efficiency did not drop at $low" >&2; return 1; }
  awk -v h="$exp_ms_high" -v l="$exp_ms_low" 'BEGIN { exit !(l > h) }' || { echo "exposed communication did not grow at $low" >&2; return 1; }
  awk -v c="$comm_low" -v f="$floor_ms" 'BEGIN { exit !(c >= 0.9 * f) }' || { echo "communication faster than the link allows" >&2; return 1; }
}

# Node 2's first rank of repeat 1 of the running job: "PID RANK" (the rank from Slurm's
# environment of the process), or nothing yet.
repeat1_rank_on_node2() {
  local p
  for p in $(ip netns pids "$(netns_cluster_ns 2)"); do
    if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dlperf-train ] &&
       tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--repeat-index 1 '; then
      echo "$p $(tr '\0' '\n' <"/proc/$p/environ" | sed -n 's/^SLURM_PROCID=//p')"
      return
    fi
  done
}

# srun's line for task RANK of HOST killed by a signal, in file OUT: "srun: error: HOST: task 2:
# Killed", or one line for several tasks of the node ended by the same signal in one report
# ("tasks 2-3: Killed", "tasks 2,3: Killed"), as when the step is torn down while the victim's
# exit is still being reported.
srun_reports_killed() {
  local host=$1 rank=$2 out=$3 list item items
  while read -r list; do
    IFS=, read -ra items <<<"$list"
    for item in "${items[@]}"; do
      if [[ $item == *-* ]]; then
        [ "$rank" -ge "${item%-*}" ] && [ "$rank" -le "${item#*-}" ] && { echo "srun named task $rank of $host killed (tasks $list)"; return 0; }
      elif [ "$item" = "$rank" ]; then
        echo "srun named task $rank of $host killed (tasks $list)"; return 0
      fi
    done
  done < <(sed -n "s/^srun: error: $host: tasks\{0,1\} \([0-9,-]*\): Killed\$/\1/p" "$out")
  return 1
}

# Submits the 2-node job (2 repeats), lets repeat 0 complete, injects fault $1 into repeat 1,
# and measures the time until the job stops running:
#   startup  SIGKILL to one of node 2's ranks as soon as it exists (inside MPI start-up,
#            where dlperf's watchdog does not run yet)
#   rank     SIGKILL to one of node 2's ranks after 4 iterations
#   link     node 2's switch port down after 4 iterations (mid-allreduce on this slow fabric)
# Writes "SECONDS OUTPUT RANK" to file $2 (the job's output; RANK killed, none for the link).
fault_job() {
  local kind=$1 report=$2 id out found='' pid rank=none t0 t1 state host2 waited=0
  host2=$(netns_cluster_host 2)
  id=$(submit "$dir/gen/rn50_cpu_2n2r.sh")
  out=$work/dlperf_rn50_cpu_2n2r_$id.out
  echo "== fault '$kind' in job $id: waiting for repeat 1"
  while :; do
    case $(netns_cluster_job_state "$id") in
      "" | PENDING | CONFIGURING | RUNNING) ;;
      *) echo "job $id ended before the fault" >&2; cat "$out" >&2; return 1 ;;
    esac
    [ $waited -lt 6000 ] || { echo "repeat 1 of job $id did not get there in 300 s" >&2; return 1; }
    if [ -f "$out" ] && grep -q '^dlperf: repeat 1 of 2$' "$out"; then
      if [ "$kind" = startup ]; then
        found=$(repeat1_rank_on_node2)
        [ -n "$found" ] && break
      elif sed -n '/^dlperf: repeat 1 of 2$/,$p' "$out" | grep -Eq '^iter +4/'; then
        break
      fi
    fi
    sleep 0.05
    waited=$((waited + 1))
  done
  case $kind in
    startup | rank)
      [ -n "$found" ] || found=$(repeat1_rank_on_node2)
      read -r pid rank <<<"$found"
      [ -n "${rank:-}" ] || { echo "no rank of repeat 1 found on $host2" >&2; return 1; }
      t0=$(now)
      kill -KILL "$pid"
      echo "killed rank $rank (PID $pid) on $host2"
      ;;
    link)
      t0=$(now)
      netns_cluster_exec ip link set "$(netns_cluster_link_dev 2)" down
      echo "took $host2's switch port $(netns_cluster_link_dev 2) down"
      ;;
  esac
  waited=0
  while [ "$(netns_cluster_job_state "$id")" = RUNNING ] && [ $waited -lt 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  t1=$(now)
  state=$(netns_cluster_job_state "$id")
  if [ "$kind" = link ]; then netns_cluster_exec ip link set "$(netns_cluster_link_dev 2)" up; fi
  echo "job $id: $state $(elapsed "$t0" "$t1") s after the fault"
  # The node's slurmd (cut off until now) ends what is left of the step; then the job is gone.
  netns_cluster_wait_job "$id" 120
  state=$NETNS_CLUSTER_JOB_STATE
  echo "job $id finally: $state"
  cat "$out"
  [ "$state" = FAILED ]  # the script went on after the failed repeat, then exited 1
  echo "$(elapsed "$t0" "$t1") $out $rank" >"$report"
}

# Issue 28's phases across nodes: a rank of node 2 stopped or killed exactly in one phase
# (DLPERF_TEST_FAULT=POINT:RANK:SIGNAL[:N], the test-only hook of src/core/test_fault.h, passed
# through sbatch and srun like any environment variable) of a one-repeat job. The job ends
# within bound $3 of the fault, FAILED, and a surviving rank names the phase (regex $2) and the
# rank at fault with its host, or srun names the killed task (SIGKILL: --kill-on-bad-exit ends
# the step before any watchdog needs to).
phase_job() {
  local spec=$1 expect=$2 bound=$3 victim sig id out t1 fault_t took host2 waited=0
  IFS=: read -r _ victim sig _ <<<"$spec"
  host2=$(netns_cluster_host 2)
  id=$(DLPERF_TEST_FAULT=$spec DLPERF_RESULTS=$work/phases.h5 submit "$dir/gen-phase/rn50_cpu_2n2r.sh")
  out=$work/dlperf_rn50_cpu_2n2r_$id.out
  while :; do
    case $(netns_cluster_job_state "$id") in
      "" | PENDING | CONFIGURING | RUNNING) ;;
      *) break ;;
    esac
    [ $waited -lt 1800 ] || { echo "phase $spec: job $id still running after 180 s" >&2; cat "$out" >&2; return 1; }
    sleep 0.1
    waited=$((waited + 1))
  done
  t1=$(now)
  netns_cluster_wait_job "$id" 120
  fault_t=$(grep -ao 'raises signal [0-9]* at [a-z-]* #[0-9]* (t=[0-9.]*' "$out" | grep -o '[0-9.]*$' | head -1 || true)
  [ -n "$fault_t" ] || { echo "phase $spec: the fault never fired in job $id" >&2; cat "$out" >&2; return 1; }
  took=$(elapsed "$fault_t" "$t1")
  echo "phase $spec on $host2: job $id $NETNS_CLUSTER_JOB_STATE $took s after the fault (bound $bound s)"
  [ "$NETNS_CLUSTER_JOB_STATE" = FAILED ] || { cat "$out" >&2; return 1; }
  awk -v s="$took" -v b="$bound" 'BEGIN { exit !(s <= b) }' || { cat "$out" >&2; return 1; }
  local line
  line=$(grep -aE "^dlperf-train: rank [0-9] \([^)]*\): phase $expect[: ].*rank $victim \($host2\)" "$out" | head -1 || true)
  if [ -n "$line" ]; then
    echo "${line:0:200}"
    return 0
  fi
  if [ "$sig" = KILL ] && srun_reports_killed "$host2" "$victim" "$out"; then return 0; fi
  echo "phase $spec: no rank named phase $expect and rank $victim ($host2)" >&2
  grep -av '^iter' "$out" | tail -20 >&2
  return 1
}

# Three faults, each in the second repeat of its own 2-node x 2-rank job.
mode_faults() {
  local timeout_s=10 rate=${DLPERF_MULTINODE_FAULT_RATE:-20mbit}
  # The bound on fault to job end: --timeout for the surviving ranks to give up, srun's
  # KillWait + 2 s for a step whose tasks do not all report back, and 10 s for this loaded
  # machine (process start-up, slurmctld's polling, the job script's reduce step).
  local bound=$((timeout_s + 5 + 2 + 10))
  # A node cut off: srun's RPCs to that node's slurmd and slurmstepd go unanswered; each gives up
  # after MessageTimeout (netns_cluster.sh sets 10 s) before the step is torn down without it.
  local link_bound=$((bound + 10))
  netns_cluster_start "$dir/cluster" 2 2
  # A slow fabric keeps the ranks inside allreduces most of the time: the link is cut mid-allreduce.
  netns_cluster_shape "$rate"
  cat >"$dir/matrix.ini" <<INI
[matrix]
models = rn50
configurations =
cpu_configurations = 2n2r
repeats = 2
iterations = 20
warmup = 2
extra_args = --print-every 1 --timeout $timeout_s
[rn50]
batch_per_device = 4
extra_args = $rn50_small
INI
  "$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix.ini" --output-dir "$dir/gen"
  export DLPERF_RESULTS=$work/faults.h5
  local host2 secs rank out
  host2=$(netns_cluster_host 2)

  # srun --kill-on-bad-exit ends the step when a task dies; before the job scripts asked for
  # it, a rank lost inside MPI start-up left the others blocked until the time limit.
  fault_job startup "$dir/fault-startup"
  read -r secs out rank <"$dir/fault-startup"
  echo "rank $rank on $host2 killed in start-up: job ended $secs s later (bound $bound s)"
  awk -v s="$secs" -v b="$bound" 'BEGIN { exit !(s <= b) }'
  if sed -n '/^dlperf: repeat 1 of 2$/,$p' "$out" | grep -q '^ranks: '; then
    echo "repeat 1 got past start-up before the kill: not the fault this was to inject" >&2
    return 1
  fi
  srun_reports_killed "$host2" "$rank" "$out"

  fault_job rank "$dir/fault-rank"
  read -r secs out rank <"$dir/fault-rank"
  echo "rank $rank on $host2 killed: job ended $secs s later (bound $bound s)"
  awk -v s="$secs" -v b="$bound" 'BEGIN { exit !(s <= b) }'
  # srun names the lost task and its node (dlperf's own "rank N (host)" when its watchdog
  # fires first, as when a rank hangs instead).
  srun_reports_killed "$host2" "$rank" "$out" || grep -E "rank $rank \($host2\)" "$out" || {
    echo "neither srun nor dlperf named rank $rank on $host2; srun said:" >&2; grep "^srun: " "$out" >&2; return 1; }

  fault_job link "$dir/fault-link"
  read -r secs out _ <"$dir/fault-link"
  echo "$host2's link cut: job ended $secs s later (bound $link_bound s)"
  awk -v s="$secs" -v b="$link_bound" 'BEGIN { exit !(s <= b) }'
  # The allreduce's timeout, or the watchdog's line when a silent heartbeat is noticed first
  # (src/comm/watchdog.h): either names a rank of the cut node.
  grep -E "(allreduce|phase [a-z-]+:) .*rank [23] \($host2\)" "$out" | head -3
  grep -Eq "(allreduce|phase [a-z-]+:) .*rank [23] \($host2\)" "$out"

  # The rank killed in start-up took repeat 1 of the first job down before any run was
  # registered; the other two faulted repeats left a run that is not complete.
  echo "== the results file: each job's first repeat complete and intact, the faulted ones not complete"
  "$python" "$here/check_multinode_runs.py" --host-regex "m${NETNS_CLUSTER_TAG}n[12]" --expect resnet50:2:2:3 --incomplete 2 "$DLPERF_RESULTS"
  # DLPERF_RESULTS replaces the per-job files: no job wrote results.d/.
  [ ! -e "$work/results.d" ] || { echo "DLPERF_RESULTS set, yet the jobs wrote results.d/:" >&2; ls -l "$work/results.d" >&2; return 1; }

  echo "== phases across the 2 nodes: a rank of $host2 stopped or killed in one phase of a one-repeat job"
  netns_cluster_shape none
  sed -e 's/^repeats = 2$/repeats = 1/' -e 's/^iterations = 20$/iterations = 8/' "$dir/matrix.ini" >"$dir/matrix-phase.ini"
  "$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix-phase.ini" --output-dir "$dir/gen-phase" >/dev/null
  phase_job broadcast:2:STOP "(broadcast|clock)" "$bound"  # rank 0, the root, may be past it
  phase_job step:3:STOP:3 step "$bound"
  phase_job "gather:2:STOP" "(gather|barrier)" "$bound"
  phase_job barrier:3:KILL barrier "$bound"
  # The faulted runs never completed; the file they were recorded in is still readable.
  if [ -e "$work/phases.h5" ]; then h5dump -H "$work/phases.h5" >/dev/null; fi
}

main() {
  case $mode in
    faults) mode_faults ;;
    jobs) mode_jobs ;;
    fabric) mode_fabric ;;
    *) echo "usage: $0 jobs|fabric|faults DLPERF_JOBS DLPERF_TRAIN DLPERF_REDUCE DLPERF_COMM" >&2; exit 2 ;;
  esac
  echo "multinode $mode ok"
}
main
