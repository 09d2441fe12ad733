#!/usr/bin/env bash
# Ranks started with different options (as an MPMD launch starts them; issue 18 row 7) stop at start-up,
# before any allreduce, with one line naming the first differing option and the rank, exit 2.
# Usage: ranks_agree_test.sh DLPERF_TRAIN MPIEXEC
set -u
train=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
common=(--resnet-blocks 1,1,1,1 --image-size 32 --num-classes 10 --threads 1 --iterations 4 --warmup 1 --print-every 0)

mpmd() {  # name, want-regex, rank 0's extra arguments, "::", rank 1's
  local name=$1 want=$2
  shift 2
  local a=() b=()
  while [ "$1" != "::" ]; do a+=("$1"); shift; done
  shift
  b=("$@")
  # One app context whose ranks pick their own command line, not `mpirun A : B`: Open MPI
  # 5.0.7's mpirun (PRRTE 3.0.8, Debian 13) segfaults on every MPMD launch, whatever the programs.
  local wrapper=$dir/$name.sh
  {
    echo '#!/usr/bin/env bash'
    printf 'a=(' && printf '%q ' "$train" "${common[@]}" "${a[@]}" --output "$dir/$name.h5" && echo ')'
    printf 'b=(' && printf '%q ' "$train" "${common[@]}" "${b[@]}" --output "$dir/$name.h5" && echo ')'
    echo 'if [ "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}}" = 0 ]; then exec "${a[@]}"; else exec "${b[@]}"; fi'
  } >"$wrapper"
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 bash "$wrapper" >"$dir/$name.log" 2>&1
  local rc=$?
  local lines
  lines=$(grep -c '^dlperf-train' "$dir/$name.log")
  if [ "$rc" -ne 2 ]; then echo "FAIL $name: exit $rc, want 2"; tail -20 "$dir/$name.log"; fail=1
  elif [ "$lines" -ne 1 ]; then echo "FAIL $name: $lines dlperf-train lines, want 1"; cat "$dir/$name.log"; fail=1
  elif ! grep -Eq "$want" "$dir/$name.log"; then echo "FAIL $name: no '$want'"; cat "$dir/$name.log"; fail=1
  elif [ -e "$dir/$name.h5" ]; then echo "FAIL $name: a run was written"; fail=1
  else echo "ok   $name: $(grep '^dlperf-train' "$dir/$name.log")"; fi
}

mpmd batch 'rank 1 was started with --batch-size 8 but rank 0 with --batch-size 4' \
  --batch-size 4 --resnet-width 8 :: --batch-size 8 --resnet-width 8
mpmd width 'rank 1 was started with --resnet-width 16 but rank 0 with --resnet-width 8' \
  --batch-size 4 --resnet-width 8 :: --batch-size 4 --resnet-width 16

# Ranks that agree on the options but not on the machine, as a mixed partition would have them
# (ONEDNN_MAX_CPU_ISA set on rank 1 only). isa_run NAME ISA: rank 1 held to ISA.
isa_run() {
  local wrapper=$dir/$1.sh
  {
    echo '#!/usr/bin/env bash'
    echo "[ \"\${OMPI_COMM_WORLD_RANK:-\${PMIX_RANK:-}}\" = 0 ] || export ONEDNN_MAX_CPU_ISA=$2"
    printf 'exec ' && printf '%q ' "$train" "${common[@]}" --batch-size 4 --resnet-width 8 --output "$dir/$1.h5" && echo
  } >"$wrapper"
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 bash "$wrapper" >"$dir/$1.log" 2>&1
}
# SSE4.1 blocks the weights 8-wide in another order than AVX2 and AVX-512 (16-wide): the
# gradients were averaged element by element across layouts, silently wrong (AVX2) or an MPI
# truncation error and a crash (AVX-512). Refused at start-up, before any allreduce.
isa_run isa_layout SSE41
rc=$?
if [ "$rc" -ne 2 ]; then echo "FAIL isa_layout: exit $rc, want 2"; tail -20 "$dir/isa_layout.log"; fail=1
elif [ "$(grep -c '^dlperf-train' "$dir/isa_layout.log")" -ne 1 ] ||
  ! grep -Eq '^dlperf-train: rank 1 keeps the parameters in another layout than rank 0 \(its kernels: sse41; rank 0.s: [a-z0-9_]+\), so their gradients cannot be averaged' "$dir/isa_layout.log"; then
  echo "FAIL isa_layout: want one line naming the layouts"; cat "$dir/isa_layout.log"; fail=1
elif [ -e "$dir/isa_layout.h5" ]; then echo "FAIL isa_layout: a run was written"; fail=1
else echo "ok   isa_layout: $(grep '^dlperf-train' "$dir/isa_layout.log")"; fi
# ISAs that block alike (AVX-512 with and without BF16 or AMX, in fp32) train together: the run is
# recorded with each rank's ISA, and rank 0 warns, instead of the trace naming rank 0's alone.
if grep -qw avx512f /proc/cpuinfo; then
  isa_run isa AVX512_CORE
  rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL isa: exit $rc"; tail -20 "$dir/isa.log"; fail=1
  elif ! grep -q '^dlperf-train: WARNING: the ranks differ in oneDNN ISA' "$dir/isa.log"; then
    echo "skip isa: rank 0's ISA is avx512_core already (no second ISA that blocks alike)"
  elif ! grep -Eq '^dlperf-train: WARNING: the ranks differ in oneDNN ISA: [a-z0-9_]+ \(rank 0\); avx512_core \(rank 1\)' "$dir/isa.log"; then
    echo "FAIL isa: no warning naming both ISAs"; cat "$dir/isa.log"; fail=1
  elif ! grep -aq 'avx512_core (rank 1)' "$dir/isa.h5"; then echo "FAIL isa: the trace does not record rank 1's ISA"; fail=1
  else echo "ok   isa: $(grep '^dlperf-train: WARNING: the ranks differ' "$dir/isa.log")"; fi
else
  echo "skip isa: no AVX-512 here, so no two ISAs that block the weights alike"
fi

# The automatic thread count (--threads 0, the default) is each rank's own: the CPUs the launcher
# bound it to. It counted the machine's CPUs (2 threads on one bound core ran 100x slower, and
# exited 0), and, recorded as if given, failed the agreement on nodes of different sizes.
unset OMP_NUM_THREADS  # ctest sets it to 1; here the count must come from the binding (nproc follows it too)
own=(--resnet-blocks 1,1,1,1 --image-size 32 --num-classes 10 --iterations 4 --warmup 1 --print-every 0 --batch-size 2 --resnet-width 8)
cpus=$(nproc)
taskset -c 0 "$train" "${own[@]}" >"$dir/one.log" 2>&1 && grep -q '^backend: cpu, .*, 1 thread$' "$dir/one.log" &&
  echo "ok   automatic threads within taskset -c 0: 1 thread" || { echo "FAIL taskset -c 0"; cat "$dir/one.log"; fail=1; }
OMP_NUM_THREADS=1 "$train" "${own[@]}" >"$dir/omp.log" 2>&1 && grep -q '^backend: cpu, .*, 1 thread$' "$dir/omp.log" &&
  echo "ok   OMP_NUM_THREADS=1: 1 thread" || { echo "FAIL OMP_NUM_THREADS"; cat "$dir/omp.log"; fail=1; }
if [ "$cpus" -ge 2 ]; then
  # Rank 0 on one core, rank 1 on all: 1 + N threads on N CPUs; the run goes on, rank 0 warns once.
  wrapper=$dir/auto.sh
  {
    echo '#!/usr/bin/env bash'
    printf 'cmd=(' && printf '%q ' "$train" "${own[@]}" --output "$dir/auto.h5" && echo ')'
    echo 'if [ "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}}" = 0 ]; then exec taskset -c 0 "${cmd[@]}"; else exec "${cmd[@]}"; fi'
  } >"$wrapper"
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 bash "$wrapper" >"$dir/auto.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then echo "FAIL auto: exit $rc"; tail -20 "$dir/auto.log"; fail=1
  elif [ "$(grep -c "WARNING: 1 node(s) run more compute threads than the CPUs their ranks may use (first: [^,]*, $((cpus + 1)) threads on $cpus CPUs, or a rank more than its own)" "$dir/auto.log")" -ne 1 ]; then
    echo "FAIL auto: not one oversubscription warning"; cat "$dir/auto.log"; fail=1
  # Recorded per rank, not as rank 0's count (dlperf-reduce filed it beside 1-thread runs).
  elif ! grep -q "^dlperf-train: WARNING: the ranks run different numbers of compute threads: 1 (rank 0); $cpus (rank 1)" "$dir/auto.log" ||
    ! grep -aq "threads=1 (rank 0); $cpus (rank 1)" "$dir/auto.h5"; then
    echo "FAIL auto: the thread counts are not said and recorded per rank"; cat "$dir/auto.log"; fail=1
  else echo "ok   automatic threads differ per rank, oversubscription said once, counts recorded per rank"; fi
  # Pinned, overlapping launcher sets (core 0, and all) are refused on every rank alike (one rank
  # refused alone before, and the others waited for it).
  sed -i 's/^cmd=(\(.*\))$/cmd=(\1 --pin-threads)/' "$wrapper"
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 bash "$wrapper" >"$dir/autopin.log" 2>&1
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(grep -c "^dlperf-train: --pin-threads: the ranks on this node are bound to different but overlapping CPU sets" "$dir/autopin.log")" -ge 1 ]
  then echo "ok   automatic threads on overlapping sets under --pin-threads: refused"
  else echo "FAIL autopin: exit $rc"; cat "$dir/autopin.log"; fail=1; fi
  # Both ranks on the node's whole set (--bind-to none): each counted every CPU and the plan
  # refused 2 x N threads on N cores; now each takes its share, one thread per core.
  cores=$(lscpu -p=CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  share=$((cores / 2 > 0 ? cores / 2 : 1))
  timeout 120 "$mpiexec" --oversubscribe --bind-to none -np 2 "$train" "${own[@]}" --pin-threads >"$dir/share.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^pinned: 2 ranks x $share \(core\|hardware thread\)s\?, .*(--threads 0: equal shares)" "$dir/share.log" &&
     grep -q "^backend: cpu, .*, $share threads\?$" "$dir/share.log"
  then echo "ok   --pin-threads --threads 0 on a shared set: $(grep '^pinned:' "$dir/share.log")"
  else echo "FAIL share: exit $rc (expected $share per rank)"; cat "$dir/share.log"; fail=1; fi
  # OMP_PROC_BIND binds the main thread to one CPU before main(): --pin-threads saw one core.
  OMP_PROC_BIND=true "$train" "${own[@]}" --threads 2 --pin-threads >"$dir/bind.log" 2>&1 &&
    grep -q "^dlperf-train: note: OMP_PROC_BIND=true had bound the main thread to cpus 0; .* the launcher's cpus 0-" "$dir/bind.log" &&
    echo "ok   OMP_PROC_BIND=true --pin-threads: $(grep '^dlperf-train: note' "$dir/bind.log")" ||
    { echo "FAIL OMP_PROC_BIND"; cat "$dir/bind.log"; fail=1; }
fi

[ "$fail" -eq 0 ] && echo "ranks agree ok"
exit "$fail"
