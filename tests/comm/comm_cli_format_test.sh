#!/usr/bin/env bash
# dlperf-comm's output has nccl-tests' shape, so what parses all_reduce_perf parses it: the
# one-letter options (-b -e -f -n -w -d), a row per size with size, count, type, redop, root
# and time/algbw/busbw/#wrong out of place and in place, "# Out of bounds values : 0 OK",
# "# Avg bus bandwidth : X" with X the mean busbw of every row and placement, and the final
# "# dlperf-comm result:" line whose keys docs/communication.md documents for ReFrame.
#   comm_cli_format_test.sh MPIEXEC DLPERF_COMM
set -euo pipefail
mpiexec=$1
exe=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$mpiexec" -np 2 --oversubscribe "$exe" -b 8 -e 64K -f 8 -n 2 -w 1 -d int32 >"$out"
cat "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
grep -Eq '^# +size +count +type +redop +root +time +algbw +busbw +#wrong +time +algbw +busbw +#wrong$' "$out" || fail "column header"
grep -Eq '^# .*out-of-place .*in-place$' "$out" || fail "placement header"
rows=$(grep -v '^#' "$out")
[ "$(wc -l <<<"$rows")" -eq 5 ] || fail "want 5 sizes (8 B ... 32 KiB x 8 > 64 KiB)"
awk 'NF != 13 || $3 != "int32" || $4 != "sum" || $5 != -1 || $1 != $2 * 4 || $9 != 0 || $13 != 0 { print "bad row: " $0; bad = 1 }
     END { exit bad }' <<<"$rows" || fail "rows"
[ "$(awk '{ print $1 }' <<<"$rows" | tr '\n' ' ')" = "8 64 512 4096 32768 " ] || fail "sizes"
grep -q '^# Out of bounds values : 0 OK$' "$out" || fail "out of bounds line"
avg=$(sed -n 's/^# Avg bus bandwidth    : \([0-9.e+-]*\) *$/\1/p' "$out")
[ -n "$avg" ] || fail "avg bus bandwidth line"
# The mean of the printed busbw columns (rounded to 0.01 there).
awk -v avg="$avg" '{ s += $8 + $12; n += 2 } END { d = s / n - avg; if (d < -0.01 || d > 0.01) { print "mean " s / n " vs " avg; exit 1 } }' \
  <<<"$rows" || fail "avg is not the mean busbw"
last=$(tail -n 1 "$out")
[[ $last =~ ^#\ dlperf-comm\ result:\ op=allreduce\ backend=mpi\ type=int32\ redop=sum\ ranks=2\ nodes=1\ sizes=5\ min_bytes=8\ max_bytes=32768\ avg_busbw_gbs=[0-9.]+\ peak_busbw_gbs=[0-9.]+\ peak_bytes=[0-9]+\ wrong=0\ status=PASS$ ]] ||
  fail "result line: $last"
# Half and bfloat16 are NCCL-only: one line naming the flag, exit 2.
rc=0
"$mpiexec" -np 1 "$exe" -d half >"$out" 2>&1 || rc=$?
if [ $rc -ne 2 ] || ! grep -q '^dlperf-comm: --datatype (-d) half: MPI has no such type' "$out"; then
  cat "$out"
  fail "-d half on mpi: exit $rc"
fi
# One rank (issue 27 item 3): busbw is 0 by definition, so never status=PASS; one line on stderr.
rc=0
"$mpiexec" -np 1 "$exe" -b 8 -e 64 -n 1 -w 0 >"$out" 2>"$out.err" || rc=$?
tail -n 1 "$out" | grep -q ' wrong=0 status=NO_PEERS$' || fail "1 rank: $(tail -n 1 "$out")"
grep -q '^dlperf-comm: 1 rank: nothing crosses a link' "$out.err" || fail "1 rank: no note on stderr: $(cat "$out.err")"
rm -f "$out.err"
echo "nccl-tests format ok"
