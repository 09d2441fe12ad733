#!/usr/bin/python3
"""torchvision's ImageNet input pipeline alone, as the reference training scripts build it:
ImageFolder + DataLoader(num_workers=W, shuffle, drop_last) with RandomResizedCrop(S)
(scale 0.08-1, ratio 3/4-4/3, bilinear, antialiased), RandomHorizontalFlip, ToTensor,
Normalize(ImageNet mean/std): float32 NCHW batches, what dlperf-train --loader-only --precision
fp32 produces. Takes --warmup batches untimed, then times --batches batches (monotonic clock,
re-entering the loader across epochs) and prints `throughput X images/s`."""
import argparse
import os
import time

import torch
import torchvision
from torchvision import datasets, transforms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="ImageNet-style folder tree (DIR or DIR/train holding <class>/*.JPEG)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--batches", type=int, default=40, help="timed batches")
    ap.add_argument("--warmup", type=int, default=5, help="untimed batches first (workers start, caches fill)")
    ap.add_argument("--prefetch-factor", type=int, default=2, help="batches each worker loads ahead (DataLoader's default 2)")
    a = ap.parse_args()
    root = os.path.join(a.data, "train") if os.path.isdir(os.path.join(a.data, "train")) else a.data
    t = transforms.Compose([
        transforms.RandomResizedCrop(a.image_size, antialias=True),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(root, t)
    kw = dict(num_workers=a.workers, persistent_workers=True, prefetch_factor=a.prefetch_factor) if a.workers > 0 else {}
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, drop_last=True, **kw)
    it = iter(loader)

    def batch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    for _ in range(a.warmup):
        x, _ = batch()
    assert x.shape == (a.batch_size, 3, a.image_size, a.image_size) and x.dtype == torch.float32
    t0 = time.perf_counter()
    for _ in range(a.batches):
        batch()
    dt = time.perf_counter() - t0
    print(f"torchvision {torchvision.__version__}, torch {torch.__version__}: {len(ds)} images, {a.workers} workers, "
          f"batch {a.batch_size}, {a.image_size}x{a.image_size}")
    print(f"throughput {a.batches * a.batch_size / dt:.2f} images/s")


if __name__ == "__main__":
    main()
