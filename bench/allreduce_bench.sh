#!/bin/sh
# Allreduce sweep with dlperf-comm on this machine or inside a Slurm allocation.
#   bench/allreduce_bench.sh [BUILD_DIR] [RANKS] [extra dlperf-comm flags...]
# Under Slurm (SLURM_JOB_ID set) it launches with `srun --mpi=pmix`, else with mpirun.
# Method and columns: docs/communication.md (busbw = algbw * 2(n-1)/n, as nccl-tests).
set -eu
build=${1:-build}
ranks=${2:-2}
[ $# -ge 2 ] && shift 2 || shift $#
exe="$build/src/dlperf-comm"
[ -x "$exe" ] || { echo "allreduce_bench.sh: $exe not found; build the dlperf-comm target first" >&2; exit 2; }
if [ -n "${SLURM_JOB_ID:-}" ]; then
  exec srun --mpi=pmix -n "$ranks" "$exe" "$@"
fi
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun -np "$ranks" --oversubscribe "$exe" --min-bytes 8 --max-bytes 64M "$@"
