#!/usr/bin/env bash
# Real image data through the command line, as a user meets it:
#  * dlperf-make-dataset writes the same bytes twice and rejects bad arguments (exit 2);
#  * dlperf-train --data trains from the folder tree and from the tar shards, and the trace
#    records the source and the loader's counters (schema 1.1);
#  * --loader-only measures the loader;
#  * bad data: greyscale and CMYK images decode silently; a truncated file, a text file named
#    .JPEG and a dangling link give one warning line each and are counted, and the run fails
#    (exit 3, one line naming the limit) when they exceed --max-bad-samples; a missing or empty
#    dataset and bad loader flags are one-line usage errors (exit 2) that write nothing.
# Usage: real_data_test.sh DLPERF_TRAIN DLPERF_MAKE_DATASET
set -u
train=$1
make_dataset=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=(--model resnet50 --resnet-blocks 1,1,1,1 --resnet-width 16 --image-size 32 --num-classes 4 --batch-size 4
      --threads 1 --print-every 0)

# ---- dlperf-make-dataset ----------------------------------------------------------------
mk=(--classes 4 --images-per-class 12 --width 64 --height 48 --shard-size 10 --greyscale-every 5 --cmyk-every 7)
"$make_dataset" --output "$dir/ds" "${mk[@]}" --threads 2 >"$dir/mk.out" || fail "dlperf-make-dataset exit $?"
"$make_dataset" --output "$dir/ds2" "${mk[@]}" --threads 1 >/dev/null || fail "dlperf-make-dataset (again) exit $?"
diff -r "$dir/ds" "$dir/ds2" >/dev/null && echo "ok   dlperf-make-dataset is deterministic" || fail "two runs wrote different bytes"
[ "$(find "$dir/ds/train" -name '*.JPEG' | wc -l)" -eq 48 ] || fail "expected 48 .JPEG files"
[ "$(ls "$dir/ds/shards" | wc -l)" -eq 5 ] || fail "expected 5 shards"
"$make_dataset" --classes 2 >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "dlperf-make-dataset without --output: exit $rc"
"$make_dataset" --output "$dir/x" --layout zip >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- --layout "$dir/err" || fail "dlperf-make-dataset --layout zip: exit $rc"
# A negative seed wrapped to 2^64-1; 65,536 x 65,537 images ended in std::bad_alloc after the
# class folders were made; a second dataset into the same folder mixed its files with the first's.
mk_refused() {  # text-to-mention, then the arguments; exit 2, one line, the folder left as it was
  local mention=$1; shift
  local before; before=$(find "$dir/ds" | sort | md5sum)
  "$make_dataset" "$@" >/dev/null 2>"$dir/err"; local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "$mention" "$dir/err" && [ ! -e "$dir/y" ] &&
     [ "$(find "$dir/ds" | sort | md5sum)" = "$before" ]; then echo "ok   dlperf-make-dataset $*: $(cat "$dir/err")"
  else fail "dlperf-make-dataset $*: exit $rc: $(cat "$dir/err")"; fi
}
mk_refused "--seed takes an integer" --output "$dir/y" --seed -1
mk_refused "at most 100000 classes" --output "$dir/y" --classes 65536 --images-per-class 65537
# An unset variable: --tokens "$PREFIX" made an image dataset instead of tokens, and exited 0.
mk_refused "--tokens was given an empty value" --output "$dir/y" --tokens ""
# Options of the other mode were dropped: --tokens with --output wrote tokens and no folder.
mk_refused "--output is for images; --tokens writes a token dataset" --tokens "$dir/y" --output "$dir/y"
mk_refused "--vocab is for --tokens" --output "$dir/y" --vocab 10
# Each bad size names its own flag (one shared sentence named all three).
mk_refused "--documents must be positive (got 0)" --tokens "$dir/y" --documents 0
mk_refused "--document-tokens must be 2 or more (got 1)" --tokens "$dir/y" --document-tokens 1
mk_refused "--vocab must be from 2 to 2147483647 (got 0)" --tokens "$dir/y" --vocab 0
"$make_dataset" --tokens "$dir/tok" --documents 2 >/dev/null || fail "dlperf-make-dataset --tokens: exit $?"
before=$(md5sum <"$dir/tok.bin")
"$make_dataset" --tokens "$dir/tok" --documents 3 >/dev/null 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "tok.bin already exists" "$dir/err" && [ "$(md5sum <"$dir/tok.bin")" = "$before" ] &&
  echo "ok   dlperf-make-dataset --tokens over an earlier dataset: refused, the files kept" || fail "--tokens twice: exit $rc: $(cat "$dir/err")"
mk_refused "ds/train already holds files" --output "$dir/ds" --classes 5 --images-per-class 2 --width 16 --height 16
mk_refused "ds/shards already holds files" --output "$dir/ds" --classes 5 --images-per-class 2 --width 16 --height 16 --layout tar

# ---- training from both layouts, trace attributes and datasets --------------------------
declare -A fingerprint
for layout in folder tar; do
  path="$dir/ds"; [ $layout = tar ] && path="$dir/ds/shards"
  "$train" "${tiny[@]}" --iterations 6 --warmup 2 --data "$path" --output "$dir/$layout.h5" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ $rc -ne 0 ]; then fail "training from the $layout layout: exit $rc"; cat "$dir/err"; continue; fi
  [ -s "$dir/err" ] && { fail "$layout: unexpected stderr (greyscale/CMYK must decode silently)"; cat "$dir/err"; }
  grep -q "^data: .*($layout, 48 images, 4 classes); cpu decoder" "$dir/out" || fail "$layout: banner lacks the data line"
  grep -q "^loader: .* images/s decoded" "$dir/out" || fail "$layout: no loader summary"
  h5dump -a /runs/run_000001/data_source "$dir/$layout.h5" | grep -q "\"$layout\"" || fail "$layout: trace data_source"
  h5dump -a /runs/run_000001/decoder "$dir/$layout.h5" | grep -q '"cpu"' || fail "$layout: trace decoder"
  h5dump -a /dlperf_schema_version "$dir/$layout.h5" | grep -q '"1.3"' || fail "$layout: schema version"
  # data_images of the last iteration, rank 0: at least 6 batches of 4
  last=$(h5dump -d /runs/run_000001/data_images "$dir/$layout.h5" | grep -oE '\(5,0\): [0-9]+' | awk '{print $2}')
  [ "${last:-0}" -ge 24 ] || fail "$layout: data_images[5] = '${last:-}', expected >= 24"
  fingerprint[$layout]=$(h5dump -a /runs/run_000001/data_fingerprint "$dir/$layout.h5" | grep -oE '"[0-9a-f]{16}"')
  [ -n "${fingerprint[$layout]}" ] || fail "$layout: trace data_fingerprint is not 16 hex digits"
  echo "ok   trains from the $layout layout; trace data_source, decoder, data_images ($last), data_fingerprint ${fingerprint[$layout]}"
done
# The same dataset written elsewhere (ds2, byte for byte) is the same data: dlperf-reduce pools
# copies staged per job under other paths by this fingerprint.
"$train" "${tiny[@]}" --iterations 3 --warmup 1 --data "$dir/ds2" --output "$dir/copy.h5" >/dev/null 2>&1 || fail "training from the copy: exit $?"
copy=$(h5dump -a /runs/run_000001/data_fingerprint "$dir/copy.h5" | grep -oE '"[0-9a-f]{16}"')
if [ "$copy" = "${fingerprint[folder]}" ] && [ "${fingerprint[tar]}" != "${fingerprint[folder]}" ]; then
  echo "ok   a copy under another path has the same data_fingerprint, the tar layout another"
else fail "data_fingerprint: copy $copy, folder ${fingerprint[folder]}, tar ${fingerprint[tar]}"; fi

# --pin-threads with the automatic thread count (no OMP_NUM_THREADS; ctest sets it) leaves one
# core to the loader: before, the compute threads took every core and the loader shared one.
cores=$(lscpu -p=CORE 2>/dev/null | grep -v '^#' | sort -u | wc -l)
want=$((cores > 1 ? cores - 1 : 1))
env -u OMP_NUM_THREADS "$train" --model resnet50 --resnet-blocks 1,1,1,1 --resnet-width 16 --image-size 32 --num-classes 4 \
  --batch-size 4 --print-every 0 --iterations 3 --warmup 1 --data "$dir/ds" --pin-threads --output "$dir/pin.h5" >"$dir/out" 2>"$dir/err"; rc=$?
if [ $rc -eq 0 ] && grep -q "^pinned: 1 rank x $want cores\?, .*(--threads 0: equal shares)" "$dir/out" &&
   grep -q "^backend: cpu, .*, $want threads\?$" "$dir/out" && h5dump -d /runs/run_000001/settings "$dir/pin.h5" | grep -q "\"threads=$want\"" &&
   h5dump -a /runs/run_000001/threads_per_rank "$dir/pin.h5" | grep -q "(0): $want\b"; then
  echo "ok   --pin-threads --threads 0 with images: $want compute thread(s) of $cores cores, one left to the loader"
else fail "--pin-threads --threads 0 --data: exit $rc, expected $want compute threads"; cat "$dir/out" "$dir/err"; fi

# ---- --loader-only ----------------------------------------------------------------------
"$train" --data "$dir/ds/shards" --loader-only --batch-size 8 --image-size 32 --num-classes 4 --iterations 12 --warmup 2 \
  --loader-threads 2 >"$dir/out" 2>&1 || fail "--loader-only exit $?"
grep -qE '^summary: loader [0-9.]+ images/s \(1 rank x 2 threads' "$dir/out" && echo "ok   --loader-only" ||
  { fail "--loader-only summary"; cat "$dir/out"; }
# Training's options do not apply to it: refused, where they were accepted and left unused.
for extra in "--plan-only" "--zero 1" "--grad-accum 3" "--profile-ops 2"; do
  # shellcheck disable=SC2086  # the option and its value are words
  "$train" --data "$dir/ds/shards" --loader-only --batch-size 8 --image-size 32 --num-classes 4 --iterations 12 --warmup 2 $extra \
    >/dev/null 2>"$dir/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "--loader-only measures the image loader alone, no model: ${extra%% *} does not apply" "$dir/err" &&
    echo "ok   --loader-only $extra: refused" || fail "--loader-only $extra: exit $rc: $(cat "$dir/err")"
done

# ---- bad samples ------------------------------------------------------------------------
cp -r "$dir/ds" "$dir/bad"
cls="$dir/bad/train/n00000002"
head -c 700 "$cls/n00000002_0.JPEG" >"$dir/t" && mv "$dir/t" "$cls/n00000002_0.JPEG"
echo "not a jpeg" >"$cls/n00000002_1.JPEG"
ln -s /nonexistent/x.JPEG "$cls/n00000002_99.JPEG"
# 49 samples: 0.1% allows none, so the first bad one fails the run.
"$train" "${tiny[@]}" --iterations 30 --warmup 2 --data "$dir/bad" --loader-threads 1 >"$dir/out" 2>"$dir/err"; rc=$?
[ $rc -eq 3 ] || fail "bad samples over the limit: exit $rc, expected 3"
grep -q "more than --max-bad-samples allows (0)" "$dir/err" && echo "ok   bad samples over the limit fail the run (exit $rc)" ||
  { fail "no limit message"; cat "$dir/err"; }
"$train" "${tiny[@]}" --iterations 30 --warmup 2 --data "$dir/bad" --max-bad-samples 3 --output "$dir/bad.h5" >"$dir/out" 2>"$dir/err"
rc=$?
n=$(grep -c "warning: rank 0: skipping bad sample" "$dir/err")
if [ $rc -ne 0 ] || [ "$n" -ne 3 ] || [ "$(wc -l <"$dir/err")" -ne 3 ]; then
  fail "within --max-bad-samples 3: exit $rc, $n warnings (expected 0 and 3 lines)"; cat "$dir/err"
else
  h5dump -d /runs/run_000001/data_bad_samples "$dir/bad.h5" | grep -q '(0): 3' && echo "ok   3 bad samples warned once each, counted in the trace" ||
    fail "trace data_bad_samples != 3"
fi
"$train" "${tiny[@]}" --iterations 4 --warmup 1 --data "$dir/bad" --max-bad-samples 10% >/dev/null 2>&1 ||
  fail "--max-bad-samples 10% (3 of 49 bad) exit $?"

# ---- usage errors: one line, exit 2, nothing written ------------------------------------
mkdir -p "$dir/empty/train/n0" "$dir/nojpeg/a" && echo x >"$dir/nojpeg/a/readme.txt"
expect_usage_error() {  # text-to-mention, then the arguments
  local mention=$1
  shift
  "$train" "$@" --output "$dir/u.h5" >/dev/null 2>"$dir/err"
  local rc=$?
  if [ $rc -ne 2 ] || [ "$(wc -l <"$dir/err")" -ne 1 ] || ! grep -q -- "$mention" "$dir/err" || [ -e "$dir/u.h5" ]; then
    fail "($*): exit $rc, expected 2 and one line mentioning '$mention'"; cat "$dir/err"
  else
    echo "ok   ($*): $(cat "$dir/err")"
  fi
}
expect_usage_error "no such file" --data "$dir/missing"
expect_usage_error "no images found" --data "$dir/empty"
expect_usage_error "no images found" --data "$dir/nojpeg"
expect_usage_error "more than --num-classes" --data "$dir/ds" --num-classes 2
expect_usage_error --decoder --data "$dir/ds" --decoder gpu
expect_usage_error --decoder --data "$dir/ds" --decoder fpga
expect_usage_error --loader-threads --data "$dir/ds" --loader-threads -1
expect_usage_error --prefetch --data "$dir/ds" --prefetch 0
expect_usage_error --max-bad-samples --data "$dir/ds" --max-bad-samples lots
expect_usage_error --max-bad-samples --data "$dir/ds" --max-bad-samples 150%
expect_usage_error "need --data" --loader-threads 2
expect_usage_error "image models" --model bert_base --loader-threads 2
expect_usage_error "drop --output" --data "$dir/ds" --loader-only

if [ "$failures" -eq 0 ]; then echo "all real-data checks passed"; else echo "$failures failed"; exit 1; fi
