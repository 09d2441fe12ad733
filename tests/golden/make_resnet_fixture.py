#!/usr/bin/python3
"""Write the ResNet v1.5 golden fixture: tests/golden/data/resnet_reduced.h5.

An independent PyTorch reference for dlperf's C++ ResNet-50 v1.5: a reduced ResNet of the same
shape (one bottleneck per stage, base width 8, 10 classes, 32x32 input, batch 4) with
torchvision's parameter names and layouts; one training-mode forward and backward with
label-smoothed cross-entropy; BN running statistics after that forward; and the losses of three
SGD steps (momentum, weight decay on conv and fc weights only). tests/golden/README.md describes
the layout; `make_resnet_fixture.py --help` the options.

The model is written here in plain PyTorch rather than taken from torchvision because
torchvision fixes the stem at 64 channels; the script checks that at width 64 it has exactly
torchvision's parameter names and shapes, gives torchvision's outputs, and that full ResNet-50
v1.5 has 25,557,032 parameters.

Shapes of the stored configuration (N=4, W=8):
  input (4,3,32,32) -conv1 s2-> (4,8,16,16) -maxpool s2-> (4,8,8,8)
  layer1 (4,32,8,8)  layer2 (4,64,4,4)  layer3 (4,128,2,2)  layer4 (4,256,1,1)
  avgpool (4,256) -fc-> logits (4,10)
"""

import argparse
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

BN_EPS = 1e-5
BN_MOMENTUM = 0.1
EXPANSION = 4


class Bottleneck(nn.Module):
    """torchvision's Bottleneck, v1.5: the stride sits on the 3x3 convolution (conv2)."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        out = planes * EXPANSION
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)                # (planes, inplanes, 1, 1)
        self.bn1 = nn.BatchNorm2d(planes, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)  # (planes, planes, 3, 3)
        self.bn2 = nn.BatchNorm2d(planes, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)                     # (4*planes, planes, 1, 1)
        self.bn3 = nn.BatchNorm2d(out, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, 1, stride=stride, bias=False),       # (4*planes, inplanes, 1, 1)
                nn.BatchNorm2d(out, eps=BN_EPS, momentum=BN_MOMENTUM))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    """ResNet v1.5 with `blocks` bottlenecks per stage and base width `width` (64 for ResNet-50)."""

    def __init__(self, blocks, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)   # (W, 3, 7, 7)
        self.bn1 = nn.BatchNorm2d(width, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = width
        for s, n in enumerate(blocks):
            planes = width * (2 ** s)
            layer = []
            for b in range(n):
                stride = 2 if (s > 0 and b == 0) else 1
                layer.append(Bottleneck(inplanes, planes, stride))
                inplanes = planes * EXPANSION
            setattr(self, f"layer{s + 1}", nn.Sequential(*layer))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)                                 # (classes, 8W*4), (classes,)
        self.num_stages = len(blocks)

    def forward(self, x, activations=None):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        if activations is not None:
            activations["stem"] = x
        for s in range(self.num_stages):
            x = getattr(self, f"layer{s + 1}")(x)
            if activations is not None:
                activations[f"layer{s + 1}"] = x
        x = torch.flatten(self.avgpool(x), 1)
        if activations is not None:
            activations["avgpool"] = x
        return self.fc(x)


def init_weights(model, generator):
    """Seeded init: torchvision's kaiming-normal convs and default Linear init, but non-trivial
    BN affine parameters (weight ~ U(0.5, 1.5), bias ~ U(-0.2, 0.2)) so their gradients and the
    BN backward are exercised."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
                m.weight.normal_(0.0, (2.0 / fan_out) ** 0.5, generator=generator)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5, generator=generator)
                m.bias.uniform_(-0.2, 0.2, generator=generator)
            elif isinstance(m, nn.Linear):
                bound = 1.0 / m.in_features ** 0.5
                m.weight.uniform_(-bound, bound, generator=generator)
                m.bias.uniform_(-bound, bound, generator=generator)


def decays(name, p):
    """Weight decay on convolution and fully connected weights only (not BN, not biases)."""
    return name.endswith("weight") and p.dim() > 1


def check_against_torchvision():
    """Our ResNet at width 64 must be torchvision's, name for name and number for number."""
    import torchvision
    from torchvision.models.resnet import Bottleneck as TvBottleneck, ResNet as TvResNet

    full = torchvision.models.resnet50()
    count = sum(p.numel() for p in full.parameters())
    ours_full = ResNet([3, 4, 6, 3], 64, 1000)
    ours_count = sum(p.numel() for p in ours_full.parameters())
    print(f"ResNet-50 v1.5 parameters: torchvision.models.resnet50() {count:,}; "
          f"this script's ResNet([3,4,6,3], 64, 1000) {ours_count:,}")
    assert count == 25_557_032 and ours_count == count
    tv_shapes = {k: tuple(v.shape) for k, v in full.state_dict().items()}
    our_shapes = {k: tuple(v.shape) for k, v in ours_full.state_dict().items()}
    assert tv_shapes == our_shapes, "state_dict names/shapes differ from torchvision's resnet50"
    assert [n for n, _ in full.named_parameters()] == [n for n, _ in ours_full.named_parameters()]
    # v1.5: the stride of a stage's first block is on conv2, and on the downsample conv.
    assert full.layer2[0].conv2.stride == (2, 2) and full.layer2[0].conv1.stride == (1, 1)
    assert ours_full.layer2[0].conv2.stride == (2, 2) and ours_full.layer2[0].conv1.stride == (1, 1)

    # Numerical identity on a reduced net (torchvision's stem is fixed at 64).
    g = torch.Generator().manual_seed(7)
    ours = ResNet([1, 1, 1, 1], 64, 10).double()
    init_weights(ours, g)
    tv = TvResNet(TvBottleneck, [1, 1, 1, 1], num_classes=10).double()
    tv.load_state_dict(ours.state_dict(), strict=True)
    x = torch.randn(2, 3, 32, 32, generator=g, dtype=torch.float64)
    y_ours, y_tv = ours(x), tv(x)
    err = float((y_ours - y_tv).abs().max())
    assert err < 1e-12, f"forward differs from torchvision's ResNet by {err}"
    print(f"check: names, shapes and training-mode forward match torchvision (max diff {err:.1e})")


def run(model, x, labels, args):
    """One forward+backward (loss, logits, activations, grads), then args.steps SGD steps.
    Returns (loss, logits, activations, running stats after the first forward, step losses)."""
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    acts = {}
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(x, acts)
    loss = criterion(logits, labels)
    loss.backward()
    running = {n: b.detach().clone() for n, b in model.named_buffers()
               if n.endswith("running_mean") or n.endswith("running_var")}
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    # The SGD steps start again from the stored weights (a copy; `model` keeps its grads).
    stepper = gc.clone_as(model, next(model.parameters()).dtype)
    opt = torch.optim.SGD(gc.sgd_param_groups(stepper, args.weight_decay, decays),
                          lr=args.lr, momentum=args.momentum)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        step_loss = criterion(stepper(x), labels)
        losses.append(float(step_loss))          # recorded before this step's update
        step_loss.backward()
        opt.step()
    return loss, logits, acts, running, grads, losses


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--output", default=os.path.join(here, "data", "resnet_reduced.h5"))
    ap.add_argument("--blocks", type=int, nargs=4, default=[1, 1, 1, 1])
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--skip-torchvision-check", action="store_true")
    args = ap.parse_args()

    torch.set_num_threads(1)  # float64 reference: deterministic, and the shapes are tiny
    if not args.skip_torchvision_check:
        check_against_torchvision()

    gc.seed_everything(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    model32 = ResNet(args.blocks, args.width, args.classes)
    init_weights(model32, g)
    x32 = torch.randn(args.batch, 3, args.image_size, args.image_size, generator=g)  # (N,3,S,S)
    labels = torch.randint(0, args.classes, (args.batch,), generator=g)             # (N,)
    model64 = gc.clone_as(model32, torch.float64)

    ref = run(model64, x32.double(), labels, args)
    f32 = run(model32, x32, labels, args)
    loss, logits, acts, running, grads, losses = ref
    loss32, logits32, acts32, running32, grads32, losses32 = f32

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with h5py.File(args.output, "w") as h5:
        gc.common_attrs(
            h5,
            f"ResNet v1.5 golden fixture: blocks {args.blocks}, width {args.width}, "
            f"{args.classes} classes, batch {args.batch}, {args.image_size}x{args.image_size}; "
            f"one training-mode forward/backward with label-smoothed cross-entropy "
            f"and {args.steps} SGD steps, computed by PyTorch",
            blocks=args.blocks, width=args.width, classes=args.classes, batch=args.batch,
            image_size=args.image_size, label_smoothing=args.label_smoothing, lr=args.lr,
            momentum=args.momentum, weight_decay=args.weight_decay, steps=args.steps,
            seed=args.seed, bn_eps=BN_EPS, bn_momentum=BN_MOMENTUM,
            weight_decay_on="conv and fc weights (ndim > 1); not BN parameters, not biases")
        h5.create_dataset("input", data=x32.numpy())
        h5.create_dataset("labels", data=labels.numpy().astype(np.int32))
        gc.write_tensor(h5, "logits", logits, logits32)
        gc.write_scalar(h5, "loss", loss, loss32)
        for name in acts:
            gc.write_tensor(h5, f"activations/{name}", acts[name], acts32[name])
        names, worst_rel, worst_name = gc.write_params_and_grads(h5, model64, grads, grads32)
        for name in running:
            gc.write_tensor(h5, f"buffers/{name}", running[name], running32[name])
        gc.write_tensor(h5, "steps/losses", torch.tensor(losses, dtype=torch.float64),
                        torch.tensor(losses32, dtype=torch.float64))

    assert abs(losses[0] - float(loss)) < 1e-12
    n_params = sum(p.numel() for p in model64.parameters())
    print(f"wrote {args.output} ({os.path.getsize(args.output):,} bytes)")
    print(f"  {len(names)} parameter tensors, {n_params:,} parameters; "
          f"largest fp32-vs-fp64 relative gradient difference {worst_rel:.2e} ({worst_name})")
    print(f"  loss {float(loss):.6f}; SGD step losses " + " ".join(f"{v:.6f}" for v in losses))


if __name__ == "__main__":
    main()
