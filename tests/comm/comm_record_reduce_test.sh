#!/usr/bin/env bash
# dlperf-comm --output writes a record that dlperf-reduce tabulates (issue 27 item 3): real
# 2-rank allreduce and reduce_scatter runs under mpirun (the busbw factor of each), then the
# fabric-health table, grouped by op, against a link rate it cannot reach
# (a WARNING) and one it passes (none); a corrupted run's record is a WARNING whatever the
# rate; a truncated record and a wrong suffix are one line, exit 2, nothing written.
# Beside a training trace, the training tables come first and --csv is written.
#   comm_record_reduce_test.sh MPIEXEC DLPERF_COMM DLPERF_REDUCE DLPERF_SYNTH_TRACES
set -uo pipefail
mpiexec=$1 comm=$2 reduce=$3 synth=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir "$tmp/results.d"
"$mpiexec" -np 2 --oversubscribe "$comm" -b 1K -e 1M -f 4 -n 3 -w 1 -o "$tmp/results.d/comm_1n2r_1.comm" >"$tmp/out.txt" 2>&1 ||
  { cat "$tmp/out.txt"; fail "dlperf-comm -o exited $?"; }
rec=$tmp/results.d/comm_1n2r_1.comm
[ "$(head -n 1 "$rec")" = "dlperf-comm record 1" ] || fail "no record header"
grep -q '^result op=allreduce backend=mpi type=float redop=sum ranks=2 nodes=1 .* status=PASS$' "$rec" || fail "no result line"
[ "$(grep -c "^row " "$rec")" -eq 6 ] || fail "expected 6 rows (1K 4K ... 1M)"
# A real 2-rank reduce_scatter record beside it: op and redop named, nccl-tests' bus factor
# (n-1)/n = 1/2 at 2 ranks (allreduce's 2(n-1)/n = 1), so busbw = algbw / 2 in every row.
rs=$tmp/results.d/comm_1n2r_reduce_scatter_1.comm
"$mpiexec" -np 2 --oversubscribe "$comm" --op reduce_scatter -b 1K -e 1M -f 4 -n 3 -w 1 -o "$rs" >"$tmp/rs.txt" 2>&1 ||
  { cat "$tmp/rs.txt"; fail "dlperf-comm --op reduce_scatter -o exited $?"; }
grep -q '^result op=reduce_scatter backend=mpi type=float redop=sum ranks=2 nodes=1 .* status=PASS$' "$rs" || fail "no reduce_scatter result line"
[ "$(grep -c "^row " "$rs")" -eq 6 ] || fail "reduce_scatter: expected 6 rows"
awk '/^row / { if ($5 <= 0 || ($6 - $5 / 2) > 0.011 || ($5 / 2 - $6) > 0.011) bad = 1 } END { exit bad }' "$rs" ||
  { cat "$rs"; fail "reduce_scatter busbw is not algbw / 2 at 2 ranks"; }
awk '/^row / { if ($5 <= 0 || ($6 - $5) > 0.011 || ($5 - $6) > 0.011) bad = 1 } END { exit bad }' "$rec" ||
  { cat "$rec"; fail "allreduce busbw is not algbw at 2 ranks"; }

# A directory with only records: the fabric table alone, exit 0.
"$reduce" "$tmp/results.d" --intra-gbps 1000000 >"$tmp/hi.md" 2>"$tmp/hi.err" || { cat "$tmp/hi.err"; fail "reduce exited $?"; }
grep -q '^## Fabric health' "$tmp/hi.md" || fail "no fabric-health section"
grep -q '^| 1 MiB | [0-9.]* | [0-9.]* | [0-9.]* | [0-9]*% |$' "$tmp/hi.md" || { cat "$tmp/hi.md"; fail "no 1 MiB row with % of link"; }
grep -q '^WARNING: 1 node(s) x 2 rank(s) .* below 80%' "$tmp/hi.md" || { cat "$tmp/hi.md"; fail "no warning against an unreachable link"; }
grep -q 'warning' "$tmp/hi.err" || fail "no stderr warning"
# Grouped by op: allreduce's section, then reduce_scatter's, each record named with its op;
# each op warned about on its own.
a=$(grep -n '^### allreduce$' "$tmp/hi.md" | cut -d: -f1) r=$(grep -n '^### reduce_scatter$' "$tmp/hi.md" | cut -d: -f1)
[ -n "$a" ] && [ -n "$r" ] && [ "$a" -lt "$r" ] || { cat "$tmp/hi.md"; fail "no allreduce then reduce_scatter sections"; }
sed -n "$r,\$p" "$tmp/hi.md" | grep -q '^#### 1 node(s) x 2 rank(s) reduce_scatter, mpi, float: .*comm_1n2r_reduce_scatter_1.comm (status PASS)$' ||
  { cat "$tmp/hi.md"; fail "the reduce_scatter record is not under its op"; }
# MPI's in-place reduce-scatter is not measured (dlperf-comm's n/a): n/a, not 0.00 GB/s.
sed -n "$r,\$p" "$tmp/hi.md" | grep -q '^| 1 MiB | [0-9.]* | n/a | [0-9.]* | [0-9]*% |$' || { cat "$tmp/hi.md"; fail "reduce_scatter in place: not n/a"; }
grep -q '^WARNING: 1 node(s) x 2 rank(s) reduce_scatter .* below 80%' "$tmp/hi.md" && [ "$(grep -c '^WARNING:' "$tmp/hi.md")" -eq 2 ] ||
  { cat "$tmp/hi.md"; fail "not one warning per op"; }
"$reduce" "$tmp/results.d" --intra-gbps 0.001 --link-gbps 1000000 >"$tmp/lo.md" 2>&1 || fail "reduce (low rate) exited $?"
! grep -q WARNING "$tmp/lo.md" || { cat "$tmp/lo.md"; fail "warned against a link the run exceeds (a 1-node run is checked against --intra-gbps only)"; }

# reduce.sh's outputs of training runs, with only records: a note, nothing written, exit 0.
"$reduce" "$tmp/results.d" --csv "$tmp/r.csv" >/dev/null 2>"$tmp/csv.err" || fail "--csv with only records exited $?"
[ ! -e "$tmp/r.csv" ] && grep -q 'only dlperf-comm records' "$tmp/csv.err" || fail "--csv with only records: $(cat "$tmp/csv.err")"

# Beside training runs (a synthetic trace): their tables first, then the fabric's; --csv written.
"$synth" "$tmp/results.d/train.h5" 2 2 30 >/dev/null || fail "dlperf-synth-traces"
"$reduce" "$tmp/results.d" --csv "$tmp/r.csv" --intra-gbps 1000000 >"$tmp/mix.md" 2>/dev/null || fail "reduce (traces and records) exited $?"
[ -s "$tmp/r.csv" ] || fail "--csv beside records: not written"
t=$(grep -n '^| node_num' "$tmp/mix.md" | head -n 1 | cut -d: -f1) f=$(grep -n '^## Fabric health' "$tmp/mix.md" | cut -d: -f1)
[ -n "$t" ] && [ -n "$f" ] && [ "$t" -lt "$f" ] && grep -q '^WARNING: 1 node' "$tmp/mix.md" || { cat "$tmp/mix.md"; fail "traces and records together"; }
rm -f "$tmp/results.d/train.h5"*

# A run with a wrong element: status FAIL in the record, a WARNING in the table.
"$mpiexec" -np 2 --oversubscribe "$comm" -b 1K -e 64K -n 2 -w 0 --corrupt-rank 1 -o "$tmp/bad.comm" >/dev/null 2>&1
grep -q 'status=FAIL$' "$tmp/bad.comm" || fail "a corrupted run's record does not say FAIL"
"$reduce" "$tmp/bad.comm" >"$tmp/bad.md" 2>/dev/null
grep -q '^WARNING: .*status FAIL' "$tmp/bad.md" || { cat "$tmp/bad.md"; fail "no warning for status FAIL"; }

# Bad input: one line, exit 2, nothing written.
head -n 2 "$rec" >"$tmp/cut.comm"
"$reduce" "$tmp/cut.comm" >"$tmp/cut.out" 2>"$tmp/cut.err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/cut.err")" -eq 1 ] && grep -q 'no result line' "$tmp/cut.err" && [ ! -s "$tmp/cut.out" ] ||
  { cat "$tmp/cut.err"; fail "a truncated record: rc=$rc"; }
# Beside a good record, a bad one is skipped like an unreadable trace: named, the table, exit 4.
cp "$tmp/cut.comm" "$tmp/results.d/cut.comm"
"$reduce" "$tmp/results.d" >"$tmp/skip.md" 2>"$tmp/skip.err"
rc=$?
[ $rc -eq 4 ] && grep -q '^dlperf-reduce: skipped .*cut.comm: has no result line' "$tmp/skip.err" && grep -q '^## Fabric health' "$tmp/skip.md" ||
  { cat "$tmp/skip.err"; fail "a bad record beside a good one: rc=$rc"; }
# Numbers that contradict each other (an edited or damaged record) would tabulate a PASS over
# wrong elements or a bandwidth its own time does not give: one line naming the line, exit 2.
inconsistent() {  # want, sed expression applied to the good record
  sed "$2" "$rec" >"$tmp/edit.comm"
  cmp -s "$rec" "$tmp/edit.comm" && fail "the edit '$2' changed nothing"
  "$reduce" "$tmp/edit.comm" >"$tmp/edit.out" 2>"$tmp/edit.err"
  local rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/edit.err")" -eq 1 ] && grep -q -- "$1" "$tmp/edit.err" && [ ! -s "$tmp/edit.out" ] ||
    { cat "$tmp/edit.err"; fail "inconsistent record ($2): rc=$rc, want '$1'"; }
  echo "ok   inconsistent record: $(cat "$tmp/edit.err")"
}
inconsistent 'status=PASS, but its rows count 3 wrong elements' '0,/^row /{/^row /s/ [0-9]*$/ 3/}'
inconsistent 'is not bytes / time' '0,/^row /s/^\(row [0-9]* [0-9]* [0-9.]*\) [0-9.]*/\1 99.0000/'
inconsistent 'busbw .* is not algbw x 1 for allreduce on 2 ranks' '$s/^\(row \([^ ]* \)\{4\}\)[0-9.]*/\1777.0000/'
inconsistent 'sizes=7 but 6 rows' 's/ sizes=6 / sizes=7 /'
inconsistent 'status=MAYBE is not PASS, FAIL or NO_PEERS' 's/status=PASS$/status=MAYBE/'
inconsistent 'elements of float are not 1024 bytes' '0,/^row /s/^row 1024 256 /row 1024 1 /'
inconsistent 'elements of int8 are not 1024 bytes' 's/ type=float / type=int8 /'
inconsistent 'type=float32 is not a dlperf-comm type' 's/ type=float / type=float32 /'
inconsistent 'backend=gloo is not mpi or nccl' 's/ backend=mpi / backend=gloo /'
inconsistent 'redop=max for op=allreduce' 's/ redop=sum / redop=max /'
inconsistent 'max_bytes=2097152 but the rows run from 1024 to 1048576 bytes' 's/ max_bytes=1048576 / max_bytes=2097152 /'
inconsistent ':[0-9]*: a second result line' '$a\
result op=allreduce backend=mpi type=float redop=sum ranks=2 nodes=1 status=PASS'
inconsistent ':1: has Windows (CRLF) line endings' 's/$/\r/'
sed 's/ type=float / type=half /' "$rs" >"$tmp/edit.comm"
"$reduce" "$tmp/edit.comm" >/dev/null 2>"$tmp/edit.err"
[ $? -eq 2 ] && grep -q 'op=reduce_scatter with type=half (dlperf-comm measures the sharded ops in float only)' "$tmp/edit.err" ||
  { cat "$tmp/edit.err"; fail "a half reduce_scatter record was accepted"; }
"$mpiexec" -np 2 --oversubscribe "$comm" -e 1K -o "$tmp/x.txt" >/dev/null 2>"$tmp/suffix.err"
rc=$?
[ $rc -eq 2 ] && [ ! -e "$tmp/x.txt" ] && grep -q 'must be a file named \*.comm' "$tmp/suffix.err" || fail "-o x.txt: rc=$rc"
# The name a link points to counts: a link x.comm to a training trace replaced the trace.
printf 'HDF5 stand-in\n' >"$tmp/train.h5" && ln -s train.h5 "$tmp/link.comm" && mkdir "$tmp/odir"
for o in "$tmp/link.comm" "$tmp/odir/.comm"; do
  "$comm" -e 1K -o "$o" >/dev/null 2>"$tmp/link.err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/link.err")" -eq 1 ] && grep -q 'must be a file named \*.comm' "$tmp/link.err" || fail "-o $o: rc=$rc"
done
[ "$(cat "$tmp/train.h5")" = "HDF5 stand-in" ] && [ -z "$(ls -A "$tmp/odir")" ] || fail "a refused -o wrote"
# Bad input on one rank only (a script that differs per node), or other options: every rank ends
# with one line, exit 2 (the good rank waited in its first collective for ever).
{
  echo '#!/usr/bin/env bash'
  echo 'if [ "${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-}}" = 0 ]; then exec "$1" -e 1K -n 2 -w 1 --timeout 10; fi'
  echo 'c=$1; shift; exec "$c" -e 1K --timeout 10 "$@"'
} >"$tmp/mpmd.sh"
for case in "-n 0|rank 1: --iters (-n) must be at least 1" "-n 2 -w 1 -d int8|rank 1 was started with other options than rank 0" \
  "-h|rank 1 was started with other options than rank 0"; do
  # shellcheck disable=SC2086  # the options are words
  timeout 60 "$mpiexec" -np 2 --oversubscribe bash "$tmp/mpmd.sh" "$comm" ${case%%|*} >/dev/null 2>"$tmp/mpmd.err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(grep -c '^dlperf-comm' "$tmp/mpmd.err")" -eq 1 ] && grep -qF "dlperf-comm: ${case#*|}" "$tmp/mpmd.err" ||
    { cat "$tmp/mpmd.err"; fail "rank 1 given ${case%%|*}: rc=$rc"; }
  echo "ok   rank 1 given ${case%%|*}: $(grep '^dlperf-comm' "$tmp/mpmd.err")"
done
"$comm" -b 8 -e 16 -f 1.000000000001 >/dev/null 2>"$tmp/factor.err"  # measured sizes for ever
rc=$?
[ $rc -eq 2 ] && grep -q 'gives more than 4096 sizes' "$tmp/factor.err" || fail "-f 1.000000000001: rc=$rc"
"$comm" -e 1K -o '' >/dev/null 2>"$tmp/empty.err"  # an unset variable: refused, not a run that records nothing
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/empty.err")" -eq 1 ] && grep -q 'was given an empty value' "$tmp/empty.err" || fail "-o '': rc=$rc"
"$comm" -e 1K --timeout 1e-400 >/dev/null 2>"$tmp/tiny.err"  # read as 0, it was blamed as "got 0"
rc=$?
[ $rc -eq 2 ] && grep -q -- '--timeout 1e-400 is too small: it would be read as 0' "$tmp/tiny.err" || fail "--timeout 1e-400: rc=$rc"
"$reduce" "$rec" --link-warn 2 >/dev/null 2>&1
[ $? -eq 2 ] || fail "--link-warn 2 accepted"
echo "dlperf-comm records reduce: ok"
