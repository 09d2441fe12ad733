#!/usr/bin/env bash
# Bad input that only one rank sees (its node's copy of the data is damaged) ends the job with
# that rank's one line and exit 2 within seconds. The rank used to wait in MPI_Finalize for
# peers that went on, and after --timeout the job ended with exit 3 and only heartbeat lines:
# the reason was never printed. Each rank gets its own copy at the same path through a private
# mount namespace (unshare -m, root); skipped (77) where that is not possible.
#   one_rank_bad_data_test.sh DLPERF_TRAIN DLPERF_MAKE_DATASET MPIEXEC
set -u
train=$1 make=$2 mpiexec=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unshare -m --propagation private true 2>/dev/null || { echo "skip: unshare -m is not permitted here"; exit 77; }
mkdir -p "$dir/r0" "$dir/r1" "$dir/at"
"$make" --tokens "$dir/r0/c4" --documents 200 --vocab 512 --seed 1 >/dev/null || { echo "FAIL: dlperf-make-dataset"; exit 1; }
cp "$dir/r0/c4.idx" "$dir/r0/c4.bin" "$dir/r1/"
cp "$dir/r0/c4.bin" "$dir/good.bin"
# Token ids 65535 at the end of the file: read at start-up by the rank whose copy it is.
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(-64,2); f.write(b'\xff'*64)" "$dir/r1/c4.bin"
cp "$dir/r1/c4.bin" "$dir/bad.bin"
cat >"$dir/wrap.sh" <<WRAP
#!/usr/bin/env bash
exec unshare -m --propagation private bash -c 'mount --bind "\$0/r\${OMPI_COMM_WORLD_RANK:-\$PMIX_RANK}" "\$0/at" && exec "\$@"' "$dir" "$train" "\$@"
WRAP
chmod +x "$dir/wrap.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
llama=(--model llama3_8b --llama-layers 1 --llama-hidden 64 --llama-heads 2 --llama-kv-heads 1 --llama-ffn 128 --llama-vocab 512
  --seq-len 32 --batch-size 2 --threads 1 --iterations 20 --warmup 1 --print-every 0 --timeout 120 --data "$dir/at/c4")
fail=0
case_run() {  # name, want-regex: every rank reads its own copy
  local name=$1 want=$2 start end rc lines
  start=$(date +%s)
  timeout 200 "$mpiexec" --oversubscribe --bind-to none -np 2 "$dir/wrap.sh" "${llama[@]}" --output "$dir/$name.h5" >"$dir/$name.log" 2>&1
  rc=$?
  end=$(date +%s)
  lines=$(grep -c '^dlperf-train' "$dir/$name.log")
  if [ "$rc" -ne 2 ]; then echo "FAIL $name: exit $rc, want 2"; cat "$dir/$name.log"; fail=1
  elif [ "$lines" -ne 1 ] || ! grep -Eq "$want" "$dir/$name.log"; then echo "FAIL $name: want one line like '$want'"; cat "$dir/$name.log"; fail=1
  elif [ $((end - start)) -gt 60 ]; then echo "FAIL $name: $((end - start)) s (the --timeout of 120 s, not the 10 s grace)"; fail=1
  else echo "ok   $name ($((end - start)) s): $(grep '^dlperf-train' "$dir/$name.log")"; fi
}
want_ids='/at/c4\.bin: token [0-9]+ is id 65535, outside the vocabulary \[0, 512\)'
case_run rank1_alone "^dlperf-train: rank 1 \([^)]*\): .*$want_ids"
cp "$dir/bad.bin" "$dir/r0/c4.bin" && cp "$dir/good.bin" "$dir/r1/c4.bin"
case_run rank0_alone "^dlperf-train: .*$want_ids"
cp "$dir/bad.bin" "$dir/r1/c4.bin"
case_run both "^dlperf-train: .*$want_ids"  # alike: rank 0's one line, at once
exit $fail
