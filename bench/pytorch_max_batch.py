#!/usr/bin/env python3
"""PyTorch's largest batch per GPU, the competitor of `dlperf-train --find-max-batch` (issue 26).

The same search as dlperf-train's (src/train/memory/max_batch.cpp): doubling from --batch-size until a
batch does not fit, then bisection between the largest that fit and the smallest that did not.
Each attempt is a fresh process of bench/pytorch_cuda_train.py at that batch training three
steps (--warmup 2 --iterations 1), as each of dlperf's attempts builds everything and trains
three steps: no allocator cache or fragmentation carries over from one attempt to the next.
An attempt that runs out of GPU memory (torch.OutOfMemoryError, "CUDA out of memory",
CUBLAS_STATUS_ALLOC_FAILED, cuDNN's allocation failure) does not fit; any other failure ends the
search with that error (exit 1), as it would end dlperf's.

Prints each attempt, then the line dlperf-train prints:
  largest batch per device that trains: N (N+1 runs out of memory; K attempts)

Run it on the GPU machine like pytorch_cuda_train.py (this script itself needs no torch):
  env -u LD_LIBRARY_PATH python3 bench/pytorch_max_batch.py --model resnet50 --precision fp16
"""

import argparse
import os
import subprocess
import sys
import time

OOM_MARKERS = ("OutOfMemoryError", "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
               "CUDA error: out of memory")


def search_max_batch(start, cap, fits):
    """dlperf's search (search_max_batch in src/train/memory/max_batch.cpp): (largest fitting, smallest
    failing, [(batch, fits)...]); 0 for "none"."""
    largest, smallest, trials = 0, 0, []
    b = start
    while True:
        ok = fits(b)
        trials.append((b, ok))
        if ok:
            largest = b
        else:
            smallest = b
        if smallest == 0:  # still doubling
            if b >= cap:
                break
            b = min(2 * b, cap)
            continue
        if smallest - largest <= 1:
            break
        b = (largest + smallest) // 2
        if b == 0:
            break  # batch 1 does not fit
    return largest, smallest, trials


class AttemptFailed(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["resnet50", "vgg16", "bert_base"], default="resnet50")
    ap.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp16")
    ap.add_argument("--batch-size", type=int, default=256, help="the first batch tried")
    ap.add_argument("--cap", type=int, default=1 << 20, help="stop doubling here")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one attempt may take")
    ap.add_argument("--trainer", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_cuda_train.py"),
                    help="the training script an attempt runs (tests give a stand-in)")
    a, extra = ap.parse_known_args()  # the rest goes to every attempt (--image-size, --seq-len, ...)
    if a.batch_size < 1 or a.cap < a.batch_size:
        ap.error("--batch-size must be positive and --cap at least --batch-size")

    def fits(b):
        cmd = [sys.executable, a.trainer, "--model", a.model, "--precision", a.precision, "--batch-size", str(b),
               "--warmup", "2", "--iterations", "1", *extra]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            raise AttemptFailed(f"batch {b}: no result within {a.timeout:.0f} s")
        out = p.stdout + p.stderr
        if p.returncode == 0 and "throughput" in p.stdout:
            ok = True
        elif any(m in out for m in OOM_MARKERS):
            ok = False
        else:
            last = [line for line in out.splitlines() if line.strip()][-1:] or ["(no output)"]
            raise AttemptFailed(f"batch {b}: exit {p.returncode}, not out of memory: {last[0]}")
        print(f"  batch {b}: {'trains' if ok else 'out of memory'} ({time.monotonic() - t0:.1f} s)", flush=True)
        return ok

    print(f"find-max-batch: pytorch, {a.model}, {a.precision}, cuda", flush=True)
    try:
        largest, smallest, trials = search_max_batch(a.batch_size, a.cap, fits)
    except AttemptFailed as e:
        sys.exit(f"pytorch_max_batch: {e}")
    if largest == 0:
        print(f"largest batch per device that trains: none (batch 1 runs out of memory; {len(trials)} attempts)")
        return 1
    if smallest == 0:
        print(f"largest batch per device that trains: at least {largest} (the cap; {len(trials)} attempts)")
    else:
        print(f"largest batch per device that trains: {largest} ({smallest} runs out of memory; {len(trials)} attempts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
