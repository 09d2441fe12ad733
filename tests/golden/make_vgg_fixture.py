#!/usr/bin/python3
"""Write the VGG golden fixture: tests/golden/data/vgg_reduced.h5.

An independent PyTorch reference for dlperf's VGG16 (configuration D): the same 13 convolutions
(3x3, pad 1, ReLU), 5 max pools and 3 fully connected layers, with channel widths divided by 16
(4, 8, 16, 32, 32), classifier hidden width 64, 10 classes, and torchvision's parameter names
(`features.N.weight`, `classifier.N.weight`, N the index in torchvision's nn.Sequential). Dropout
is disabled (p = 0) so the result is deterministic; the modules keep their indices. One forward
and backward with label-smoothed cross-entropy, then SGD steps. tests/golden/README.md describes
the layout.

Input 64x64 rather than 32x32, so the last feature map is 2x2 and not 1x1: the classifier's input
is then the flatten of a (C, 2, 2) map, and the C++ side must flatten in PyTorch's (C, H, W) order
to match. torchvision's AdaptiveAvgPool2d((7, 7)) is the identity at the 224x224 VGG16 input (the
feature map is already 7x7); here it is left out, which is the same thing at 224.

Shapes (N=4): input (4,3,64,64) -> features (4,32,2,2) -> flatten (4,128)
  -> classifier.0 (64,128) -> ReLU -> classifier.3 (64,64) -> ReLU -> classifier.6 (10,64)
"""

import argparse
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

CFG_D = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


class VGG(nn.Module):
    """torchvision's VGG without the adaptive pool (see the module docstring)."""

    def __init__(self, cfg, divisor, hidden, classes, image_size):
        super().__init__()
        layers, c_in, size = [], 3, image_size
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
                size //= 2
            else:
                c_out = v // divisor
                layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU()]  # (c_out, c_in, 3, 3), (c_out,)
                c_in = c_out
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(c_in * size * size, hidden), nn.ReLU(), nn.Dropout(0.0),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.0),
            nn.Linear(hidden, classes))

    def forward(self, x, activations=None):
        x = self.features(x)                  # (N, C, H, W)
        if activations is not None:
            activations["features"] = x
        return self.classifier(torch.flatten(x, 1))  # (N, C*H*W) -> (N, classes)


def init_weights(model, generator):
    """Seeded init that keeps activations O(1) through 16 layers without batch norm: He-normal
    (fan_in) weights, and non-zero biases ~ U(-0.1, 0.1) so the bias paths are exercised."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in), generator=generator)
                m.bias.uniform_(-0.1, 0.1, generator=generator)


def decays(name, p):
    return name.endswith("weight") and p.dim() > 1


def run(model, x, labels, args):
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    acts = {}
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(x, acts)
    loss = criterion(logits, labels)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    stepper = gc.clone_as(model, next(model.parameters()).dtype)
    opt = torch.optim.SGD(gc.sgd_param_groups(stepper, args.weight_decay, decays),
                          lr=args.lr, momentum=args.momentum)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        step_loss = criterion(stepper(x), labels)
        losses.append(float(step_loss))
        step_loss.backward()
        opt.step()
    return loss, logits, acts, grads, losses


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--output", default=os.path.join(here, "data", "vgg_reduced.h5"))
    ap.add_argument("--width-divisor", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    if args.image_size % 32:
        ap.error("--image-size must be a multiple of 32 (five 2x2 max pools)")
    torch.set_num_threads(1)

    # Names and count check against torchvision's VGG16 (configuration D).
    import torchvision
    tv = torchvision.models.vgg16()
    count = sum(p.numel() for p in tv.parameters())
    print(f"VGG16 parameters: torchvision.models.vgg16() {count:,}")
    assert count == 138_357_544
    ours = VGG(CFG_D, 1, 4096, 1000, 224)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in tv.named_parameters()], "names/shapes differ from torchvision"
    del tv, ours

    gc.seed_everything(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    model32 = VGG(CFG_D, args.width_divisor, args.hidden, args.classes, args.image_size)
    init_weights(model32, g)
    x32 = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g)  # (N,3,S,S)
    labels = torch.randint(0, args.classes, (args.batch,), generator=g)             # (N,)
    model64 = gc.clone_as(model32, torch.float64)

    loss, logits, acts, grads, losses = run(model64, x32.double(), labels, args)
    loss32, logits32, acts32, grads32, losses32 = run(model32, x32, labels, args)

    with h5py.File(args.output, "w") as h5:
        gc.common_attrs(
            h5,
            f"VGG configuration D golden fixture: widths /{args.width_divisor}, classifier hidden "
            f"{args.hidden}, {args.classes} classes, batch {args.batch}, "
            f"{args.image_size}x{args.image_size}, dropout off, no adaptive pool; one forward/backward "
            f"with label-smoothed cross-entropy and {args.steps} SGD steps, computed by PyTorch",
            config="D", width_divisor=args.width_divisor, hidden=args.hidden, classes=args.classes,
            batch=args.batch, image_size=args.image_size, label_smoothing=args.label_smoothing,
            lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay, steps=args.steps,
            seed=args.seed, dropout=0.0,
            weight_decay_on="conv and fc weights (ndim > 1); not biases")
        h5.create_dataset("input", data=x32.numpy())
        h5.create_dataset("labels", data=labels.numpy().astype(np.int32))
        gc.write_tensor(h5, "logits", logits, logits32)
        gc.write_scalar(h5, "loss", loss, loss32)
        gc.write_tensor(h5, "activations/features", acts["features"], acts32["features"])
        names, worst_rel, worst_name = gc.write_params_and_grads(h5, model64, grads, grads32)
        gc.write_tensor(h5, "steps/losses", torch.tensor(losses, dtype=torch.float64),
                        torch.tensor(losses32, dtype=torch.float64))

    n_params = sum(p.numel() for p in model64.parameters())
    print(f"wrote {args.output} ({os.path.getsize(args.output):,} bytes)")
    print(f"  {len(names)} parameter tensors, {n_params:,} parameters; largest fp32-vs-fp64 "
          f"relative gradient difference {worst_rel:.2e} ({worst_name})")
    print(f"  loss {float(loss):.6f}; SGD step losses " + " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
