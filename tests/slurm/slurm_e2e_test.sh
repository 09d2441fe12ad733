#!/usr/bin/env bash
# End to end on a real Slurm: start munged, slurmctld and slurmd here (local_slurm.sh),
# generate CPU-backend jobs with dlperf-jobs (1 node x 1 rank and 1 node x 2 ranks), submit
# them with the generated submit_all.sh, and check what a user would: each job wrote its own
# results.d/<job>_<job id>.h5 with 2 complete runs, the job output has the dlperf-reduce
# table, the second job started only after the first ended and the reduce job after both
# (--dependency=afterany), and the reduce job's table covers the whole directory. Then a job
# whose time limit is too short: --signal=USR1 stops dlperf-train, its run is recorded as
# partial in its own file and the earlier runs are intact. Then a reduced Llama job on 2 ranks
# (submit_all.sh llm): tokens/s and MFU in its table. Every daemon started is stopped by PID on
# exit.
#   slurm_e2e_test.sh DLPERF_JOBS DLPERF_TRAIN DLPERF_REDUCE
# Exit 77 (CTest: skipped) when not root or Slurm/munge are not installed.
set -euo pipefail
jobs_exe=$(realpath "$1")
train_exe=$(realpath "$2")
reduce_exe=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)

if [ "$(id -u)" -ne 0 ]; then echo "slurm test: needs root to run slurmd; skipped"; exit 77; fi
for t in munged mungekey slurmctld slurmd sbatch srun squeue; do
  command -v "$t" >/dev/null || { echo "slurm test: $t not found (scripts/setup-debian.sh --tests installs it); skipped"; exit 77; }
done

# shellcheck source=local_slurm.sh
. "$here/local_slurm.sh"
# A developer may run this inside an allocation: the test's jobs must not inherit it.
while read -r v; do unset "$v"; done < <(env | grep -o '^SLURM_[A-Z_]*' || true)

dir=$(mktemp -d /tmp/dlperf-slurm.XXXXXX)
chmod 0755 "$dir"
cleanup() {
  local rc=$?
  set +e
  local_slurm_stop
  if [ $rc -ne 0 ]; then
    echo "slurm test failed (exit $rc); job outputs and daemon logs:" >&2
    for f in "$dir"/work/*.out "$dir"/slurm/log/*; do
      if [ -f "$f" ]; then echo "== $f" >&2; tail -n 30 "$f" >&2; fi
    done
  fi
  rm -rf "$dir"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

local_slurm_start "$dir/slurm" 2
echo "srun --mpi=list:"
srun --mpi=list 2>&1 | sed 's/^/  /'
srun --mpi=list 2>&1 | grep -q pmix || { echo "slurm test: this Slurm has no pmix plugin" >&2; exit 1; }

# dlperf-train and dlperf-reduce from this build: the profile's environment is "none" and
# sbatch passes PATH on (--export=ALL).
PATH="$(dirname "$train_exe"):$(dirname "$reduce_exe"):$PATH"
export PATH
mkdir -p "$dir/gen" "$dir/gen-short" "$dir/work"
cat >"$dir/profile.ini" <<'INI'
[cluster]
name = local-test
[slurm]
partition = debug
time = 00:10:00
cpus_per_task = 1
signal_seconds = 40
mpi = pmix
[environment]
load = none
INI
cat >"$dir/matrix.ini" <<'INI'
[matrix]
models = rn50
configurations =
cpu_configurations = 1n1r 1n2r
repeats = 2
iterations = 12
warmup = 2
[rn50]
batch_per_device = 4
extra_args = --resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --num-classes 10 --print-every 0
INI
# The same job with a one-minute limit and far more iterations than fit in it.
sed -e 's/^repeats = 2/repeats = 1/' -e 's/^iterations = 12/iterations = 1000000/' \
    -e 's/^batch_per_device = 4/batch_per_device = 4\ncpu_time = 1/' "$dir/matrix.ini" >"$dir/matrix-short.ini"
"$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix.ini" --output-dir "$dir/gen"
"$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix-short.ini" --output-dir "$dir/gen-short"
grep -q '^#SBATCH --time=1$' "$dir/gen-short/rn50_cpu_1n2r.sh"

status_of() {  # status attribute of run N in results file F
  h5dump -a "/runs/$(printf 'run_%06d' "$2")/status" "$1" | sed -n 's/.*(0): "\(.*\)".*/\1/p'
}
job_time() { scontrol show job "$1" | grep -o "$2=[0-9T:-]*" | cut -d= -f2; }

echo "== 1. submit_all.sh cpu: two jobs one after the other (2 repeats each), then the reduce job"
t0=$SECONDS
cd "$dir/work"
"$dir/gen/submit_all.sh" cpu --chdir="$dir/work" | tee submit.log
first=$(sed -n 's/^submitted rn50_cpu_1n1r.sh as job \([0-9]*\)$/\1/p' submit.log)
job=$(sed -n 's/^submitted rn50_cpu_1n2r.sh as job \([0-9]*\) (after job '"$first"')$/\1/p' submit.log)
reduce_job=$(sed -n 's/^submitted reduce.sh as job \([0-9]*\) .*/\1/p' submit.log)
[ -n "$first" ] && [ -n "$job" ] && [ -n "$reduce_job" ]
for j in "$first" "$job"; do
  state=$(local_slurm_wait_job "$j" 240)
  echo "job $j: $state ($((SECONDS - t0)) s)"
  [ "$state" = JobState=COMPLETED ]
done
state=$(local_slurm_wait_job "$reduce_job" 120)
echo "reduce job $reduce_job: $state"
[ "$state" = JobState=COMPLETED ]
out="dlperf_rn50_cpu_1n2r_$job.out"
cat "$out"
[ "$(grep -c '^dlperf: repeat [01] of 2$' "$out")" -eq 2 ]
grep -Eq '^\| 1 \| 2 \| 4 \| [0-9.]+ \|' "$out"                 # the throughput table: 1 node x 2 ranks
grep -Eq '^\| 1 \| 2 \| 2 \| [0-9.]+ \|' "$out"                 # the repeats table: 2 runs
# One file per job, named after the script and the job id (and its .lock, docs/trace-schema.md).
ls results.d
[ "$(find results.d -type f -name '*.h5' | sort | tr '\n' ' ')" = "results.d/rn50_cpu_1n1r_$first.h5 results.d/rn50_cpu_1n2r_$job.h5 " ]
mine=results.d/rn50_cpu_1n2r_$job.h5
[ "$(status_of "$mine" 1)" = complete ] && [ "$(status_of "$mine" 2)" = complete ]
h5dump -a /runs/run_000002/slurm_job_id "$mine" | grep -q "\"$job\""
# The reduce job reads the directory: both configurations, 2 runs each.
cat "dlperf_reduce_$reduce_job.out"
grep -Eq '^\| 1 \| 1 \| 2 \| [0-9.]+ \|' "dlperf_reduce_$reduce_job.out"
grep -Eq '^\| 1 \| 2 \| 2 \| [0-9.]+ \|' "dlperf_reduce_$reduce_job.out"
ended=$(job_time "$first" EndTime)
started=$(job_time "$job" StartTime)
echo "first job ended $ended, second job started $started"
[[ ! "$started" < "$ended" ]]  # chained: not before the first job ended
ended=$(job_time "$job" EndTime)
started=$(job_time "$reduce_job" StartTime)
echo "matrix ended $ended, reduce job started $started"
[[ ! "$started" < "$ended" ]]  # afterany: not before the matrix ended
[ -s results.csv ] && [ -s results.json ] && [ -s results.svg ]

echo "== 2. a job with a 1-minute limit: stopped by --signal=USR1@40, recorded as partial"
t0=$SECONDS
short=$(sbatch --parsable --chdir="$dir/work" "$dir/gen-short/rn50_cpu_1n2r.sh")
state=$(local_slurm_wait_job "$short" 200)
echo "job $short: $state ($((SECONDS - t0)) s)"
out="dlperf_rn50_cpu_1n2r_$short.out"
cat "$out"
# dlperf-train exits 4 for a partial run; the script stops its repeats and ends non-zero.
[ "$state" = JobState=FAILED ]
grep -q 'recorded as partial' "$out"
grep -q 'repeat 0 stopped early by a signal, recorded as partial' "$out"
short_file=results.d/rn50_cpu_1n2r_$short.h5
[ "$(status_of "$short_file" 1)" = partial ]
h5dump -a /runs/run_000001/status_reason "$short_file" | grep -q 'stopped by signal 10'
[ "$(status_of "$mine" 1)" = complete ] && [ "$(status_of "$mine" 2)" = complete ]
"$reduce_exe" --warmup 2 --window 10 results.d | grep -Eq '^\| 1 \| 2 \| 2 \| [0-9.]+ \| .* \| 1 \|$'  # 2 runs, 1 excluded

echo "== 3. the language-model job (issue 24): a reduced Llama on 2 ranks through submit_all.sh llm"
cat >"$dir/matrix-llm.ini" <<'INI'
[matrix]
models = llama3_2_1b
configurations =
repeats = 1
iterations = 6
warmup = 2
[llama3_2_1b]
configurations =
cpu_configurations = 1n2r
batch_per_device = 1
cpu_batch_per_device = 1
cpu_extra_args = --llama-layers 2 --llama-hidden 64 --llama-heads 4 --llama-kv-heads 2 --llama-ffn 128 --llama-vocab 256 --seq-len 64 --print-every 0
INI
"$jobs_exe" --profile "$dir/profile.ini" --matrix "$dir/matrix-llm.ini" --output-dir "$dir/gen-llm"
mkdir -p "$dir/work-llm"
cd "$dir/work-llm"
"$dir/gen-llm/submit_all.sh" llm --chdir="$dir/work-llm" | tee submit.log
llm_job=$(sed -n 's/^submitted llama3_2_1b_cpu_1n2r.sh as job \([0-9]*\).*/\1/p' submit.log)
[ -n "$llm_job" ]
state=$(local_slurm_wait_job "$llm_job" 240)
echo "job $llm_job: $state"
out="dlperf_llama3_2_1b_cpu_1n2r_$llm_job.out"
cat "$out"
[ "$state" = JobState=COMPLETED ]
grep -q '^replicas: parameters bit-identical on all 2 ranks' "$out"
grep -q '| tokens/s | TFLOP/s/device | MFU |' "$out"             # the job's table: the LLM columns
grep -Eq '^\| 1 \| 2 \| 1 \| [0-9.]+ \|' "$out"                  # 1 node x 2 ranks, batch 1
h5dump -a /runs/run_000001/status "results.d/llama3_2_1b_cpu_1n2r_$llm_job.h5" | grep -q '"complete"'
cd "$dir/work"

echo "== 4. outside Slurm the script explains itself and exits 2"
rc=0
env -u SLURM_JOB_ID bash "$dir/gen/rn50_cpu_1n2r.sh" 2>err.txt || rc=$?
[ $rc -eq 2 ] && grep -q 'sbatch' err.txt
echo "slurm end-to-end ok"
