#!/usr/bin/python3
"""PyTorch side of dlperf's CNN training benchmarks (bench/vs_pytorch.sh --model resnet50 or vgg16).

One process measures one configuration: torchvision's resnet50 (ResNet-50 v1.5, the default) or
vgg16 (`--model vgg16`: configuration D, dropout 0.5 in the classifier), synthetic data
(one random batch, generated once), cross-entropy with label smoothing, SGD with momentum and
weight decay on conv and fc weights only, like dlperf-train. Precision fp32, or bf16 through
torch.autocast('cpu', dtype=torch.bfloat16) with fp32 master weights; memory format NCHW or
channels_last (model and input).

Method: `--warmup` full training steps (zero_grad, forward, loss, backward, optimizer step), then
`--iterations` steps timed with time.perf_counter() (monotonic) from before the first to after the
last. The CPU runs synchronously, so the clock brackets finished work. throughput =
batch_size * iterations / elapsed. The result line has the same form as dlperf-train's summary:
`throughput <X> samples/s`.

Run with Debian's Python (/usr/bin/python3): python3-torch 1.13, python3-torchvision, and
libopenblas0-pthread (Debian's default reference BLAS would make fp32 products artificially slow).
"""

import argparse
import math
import os
import re
import sys
import time

import torch
import torch.nn as nn
import torchvision


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", choices=["resnet50", "vgg16"], default="resnet50", help="torchvision network")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--memory-format", choices=["nchw", "channels_last"], default="nchw")
    ap.add_argument("--iterations", type=int, default=10, help="measured training steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed training steps first")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (set OMP_NUM_THREADS too)")
    ap.add_argument("--lr", type=float, default=0.01,
                    help="constant; small enough that the loss on the fixed synthetic batch stays finite")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    for flag in ("batch_size", "image_size", "num_classes", "iterations", "threads"):
        if getattr(args, flag) <= 0:
            ap.error(f"--{flag.replace('_', '-')} must be a positive integer")
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")
    if args.image_size < 32:
        ap.error(f"--image-size must be >= 32 ({args.model} downsamples by 32)")
    return args


def onednn_version():
    m = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
    return m.group(1) if m else ("present" if torch.backends.mkldnn.is_available() else "absent")


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if os.environ.get("OMP_NUM_THREADS") not in (None, str(args.threads)):
        print(f"warning: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} but --threads {args.threads}",
              file=sys.stderr)
    if args.precision == "bf16" and not torch.backends.mkldnn.is_available():
        sys.exit("error: bf16 autocast needs PyTorch built with oneDNN (mkldnn)")

    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format
    model = getattr(torchvision.models, args.model)(num_classes=args.num_classes).to(memory_format=fmt)
    model.train()
    decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if not (n.endswith("weight") and p.dim() > 1)]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=args.lr, momentum=args.momentum)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    x = torch.randn(args.batch_size, 3, args.image_size, args.image_size)  # (N, 3, S, S)
    x = x.contiguous(memory_format=fmt)
    y = torch.randint(0, args.num_classes, (args.batch_size,))             # (N,)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    n_params = sum(p.numel() for p in model.parameters())
    print(f"pytorch {torch.__version__} torchvision {torchvision.__version__} "
          f"oneDNN {onednn_version()}; "
          f"{args.model} {n_params:,} parameters; precision {args.precision}; memory format "
          f"{args.memory_format}; batch {args.batch_size}; image {args.image_size}; "
          f"threads {torch.get_num_threads()}", flush=True)

    first_loss = None
    for i in range(args.warmup):
        loss = step()
        first_loss = float(loss) if first_loss is None else first_loss
    t0 = time.perf_counter()
    for i in range(args.iterations):
        loss = step()
    elapsed = time.perf_counter() - t0
    last_loss = float(loss)
    throughput = args.batch_size * args.iterations / elapsed
    print(f"warmup {args.warmup} iterations; measured {args.iterations} iterations in {elapsed:.3f} s "
          f"({elapsed / args.iterations:.3f} s/iteration); loss "
          f"{first_loss if first_loss is not None else float('nan'):.4f} -> {last_loss:.4f}")
    if not math.isfinite(last_loss):
        print("warning: the loss is not finite; the timing may not be representative", file=sys.stderr)
    print(f"throughput {throughput:.3f} samples/s", flush=True)


if __name__ == "__main__":
    main()
