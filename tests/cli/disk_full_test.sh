#!/usr/bin/env bash
# A full file system (issue 18 rows 2 and 6), on a small tmpfs mounted for the test:
#  * dlperf-train appending to a results file there fails with one line "no space left on
#    <mount point> (tmpfs)", leaves the file as it was and no temporary behind;
#  * dlperf-reduce writing an output there fails (exit 3) and leaves the old output intact;
#  * dlperf-make-dataset running out of room removes the half-written image dataset (a part of
#    it trained with only a warning about empty classes).
# Needs root (mount); exits 77 (skipped) where a tmpfs cannot be mounted.
# Usage: disk_full_test.sh DLPERF_TRAIN DLPERF_REDUCE DLPERF_MAKE_DATASET
set -u
train=$1 reduce=$2 make=$3
dir=$(mktemp -d)
small="$dir/small"
mkdir -p "$small"
cleanup() {
  mountpoint -q "$small" && umount "$small"
  rm -rf "$dir"
}
trap cleanup EXIT
if ! mount -t tmpfs -o size=2m tmpfs "$small" 2>"$dir/mount.err"; then
  echo "cannot mount a tmpfs ($(cat "$dir/mount.err")): skipped"
  exit 77
fi
fail=0
bad() { echo "FAIL: $*"; fail=1; }
args=(--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 4 --num-classes 10 --threads 1
      --iterations 4 --warmup 1 --print-every 0 --output "$small/r.h5")

"$train" "${args[@]}" >/dev/null 2>&1 || { bad "the first run failed (exit $?)"; exit 1; }
cp "$small/r.h5" "$dir/r.before"
"$reduce" "$small/r.h5" --warmup 1 --window 3 >/dev/null 2>&1 || bad "reduce on the small file system failed"
echo old >"$small/o.json"

# Fill the file system.
dd if=/dev/zero of="$small/fill" bs=4k 2>/dev/null
df -h "$small" | tail -1

echo "== dlperf-train appending to a file on a full file system"
"$train" "${args[@]}" >"$dir/train.out" 2>"$dir/train.err"
rc=$?
cat "$dir/train.err"
[ "$rc" -eq 3 ] || bad "exit $rc, want 3"
[ "$(wc -l <"$dir/train.err")" -eq 1 ] || bad "want one line on stderr"
grep -q "no space left on $small (tmpfs)" "$dir/train.err" || bad "the message does not name the file system"
cmp -s "$small/r.h5" "$dir/r.before" || bad "r.h5 changed"
ls -a "$small" | grep -q 'tmp' && bad "a temporary was left: $(ls -a "$small")"

echo "== room for the old file, not for the grown one"
size=$(stat -c %s "$small/r.h5")
rm "$small/fill"
dd if=/dev/zero of="$small/fill" bs=1k count=$(( ($(df -k --output=avail "$small" | tail -1) * 1024 - size - 8192) / 1024 )) 2>/dev/null
"$train" "${args[@]}" >"$dir/train2.out" 2>"$dir/train2.err"
rc=$?
cat "$dir/train2.err"
if [ "$rc" -eq 0 ]; then
  echo "(the new run fitted in the space left: nothing to check here)"
else
  [ "$rc" -eq 3 ] || bad "exit $rc, want 3"
  grep -q "no space left on $small (tmpfs)" "$dir/train2.err" || bad "the message does not name the file system"
  cmp -s "$small/r.h5" "$dir/r.before" || bad "r.h5 changed"
  ls -a "$small" | grep -q 'tmp' && bad "a temporary was left: $(ls -a "$small")"
fi

echo "== the file system fills while a run is going (issue 27 item 11): one line, exit 3"
rm -f "$small/fill" "$small/r.h5"
long=(--resnet-width 8 --resnet-blocks 1,1,1,1 --image-size 32 --batch-size 4 --num-classes 10 --threads 1
      --iterations 100000 --warmup 1 --print-every 0 --output "$small/r.h5" --flush-every 1)
"$train" "${long[@]}" >"$dir/mid.out" 2>"$dir/mid.err" &
pid=$!
for _ in $(seq 100); do [ -s "$small/r.h5" ] && break; sleep 0.1; done
sleep 0.5
dd if=/dev/zero of="$small/fill" bs=4k 2>/dev/null
for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill "$pid" 2>/dev/null && bad "the run went on on a full file system"
wait "$pid"
rc=$?
grep -v ': WARNING: ' "$dir/mid.err" >"$dir/mid.lines"  # tiny networks run some reference kernels
cat "$dir/mid.lines"
[ "$rc" -eq 3 ] || bad "mid-run: exit $rc, want 3"
[ "$(wc -l <"$dir/mid.lines")" -eq 1 ] || bad "mid-run: want one line on stderr, got $(wc -l <"$dir/mid.lines")"
grep -q "no space left on $small (tmpfs)" "$dir/mid.lines" || bad "mid-run: the message does not name the file system"
rm -f "$small/fill"

echo "== dlperf-reduce writing an output on a full file system"
cp "$dir/r.before" "$dir/r.h5"
dd if=/dev/zero of="$small/fill2" bs=4k 2>/dev/null
"$reduce" "$dir/r.h5" --warmup 1 --window 3 --json "$small/o.json" >/dev/null 2>"$dir/reduce.err"
rc=$?
cat "$dir/reduce.err"
[ "$rc" -eq 3 ] || bad "reduce: exit $rc, want 3"
grep -q "no space left on $small (tmpfs)" "$dir/reduce.err" || bad "reduce: the message does not name the file system"
[ "$(cat "$small/o.json")" = old ] || bad "reduce: the old output was truncated"
ls -a "$small" | grep -q 'tmp' && bad "reduce: a temporary was left: $(ls -a "$small")"

rm -f "$small/fill2"

echo "== dlperf-make-dataset on a file system too small for the dataset"
dd if=/dev/zero of="$small/fill3" bs=4k count=$(( $(df --output=avail -k "$small" | tail -1) / 4 - 16 )) 2>/dev/null
"$make" --output "$small/img" --classes 2 --images-per-class 20 --width 64 --height 48 >/dev/null 2>"$dir/make.err"
rc=$?
cat "$dir/make.err"
[ "$rc" -eq 3 ] && [ "$(wc -l <"$dir/make.err")" -eq 1 ] || bad "make-dataset: exit $rc, want 3 and one line"
[ ! -e "$small/img" ] || bad "make-dataset: a half-written dataset was left: $(find "$small/img" | head -5)"
mkdir -p "$small/kept"
"$make" --output "$small/kept" --classes 2 --images-per-class 20 --width 64 --height 48 >/dev/null 2>&1
[ -d "$small/kept" ] && [ -z "$(ls -A "$small/kept")" ] || bad "make-dataset: a folder that existed was removed or left holding files"

[ "$fail" -eq 0 ] && echo "disk full ok"
exit "$fail"
