#!/usr/bin/python3
"""Shared helpers for the golden-fixture scripts (make_*_fixture.py).

The fixtures are the independent reference the C++ engine is checked against: PyTorch computes
one batch's loss and every gradient of a small model, and this module writes them into an HDF5
file in one layout for every model (tests/golden/README.md documents it):

  /params/<name>   float32, canonical PyTorch layout, PyTorch's parameter name
  /grads/<name>    float32, the gradient of the loss after one backward
  /param_names     fixed-length ASCII strings, the parameters in PyTorch's registration order

Method. The model is built, seeded and initialised in float32; those float32 weights (and the
float32 inputs) are what the fixture stores. The reference values are then computed from exactly
those stored numbers in float64 and rounded to float32 only when written, so they carry no float32
accumulation error of their own: whatever difference the C++ engine shows is its own. To give the
C++ tests a scale for their tolerances, the same computation is also run in float32 and the largest
difference between the float32 and float64 results is written as attributes on each reference
dataset (`fp32_max_abs_diff`, `fp32_max_rel_diff`, where the relative value is
max|a32 - a64| / max|a64|).

Run with Debian's Python (/usr/bin/python3), which has python3-torch and python3-h5py.
"""

import copy

import numpy as np
import torch


def seed_everything(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)


def to_np32(t):
    return t.detach().to(torch.float32).cpu().contiguous().numpy()


def diff_attrs(dset, ref64, other32):
    """Attach the float32-vs-float64 discrepancy of one tensor to its dataset."""
    a = ref64.detach().to(torch.float64)
    b = other32.detach().to(torch.float64)
    abs_diff = float((a - b).abs().max()) if a.numel() else 0.0
    scale = float(a.abs().max()) if a.numel() else 0.0
    dset.attrs["fp32_max_abs_diff"] = np.float64(abs_diff)
    dset.attrs["fp32_max_rel_diff"] = np.float64(abs_diff / scale if scale > 0 else 0.0)
    return abs_diff, (abs_diff / scale if scale > 0 else 0.0)


def write_scalar(h5, name, value64, value32=None):
    d = h5.create_dataset(name, data=np.float32(float(value64)))
    if value32 is not None:
        diff_attrs(d, torch.tensor(float(value64), dtype=torch.float64),
                   torch.tensor(float(value32), dtype=torch.float64))
    return d


def write_tensor(h5, name, t64, t32=None, dtype=np.float32):
    d = h5.create_dataset(name, data=t64.detach().cpu().numpy().astype(dtype))
    if t32 is not None:
        diff_attrs(d, t64, t32)
    return d


def write_params_and_grads(h5, model64, grads64, grads32):
    """Write /param_names, /params/<name> (model64's weights, float32) and /grads/<name> (grads64,
    with the float32 run's discrepancy as attributes). Returns (names, worst relative diff, its name)."""
    names = [n for n, _ in model64.named_parameters()]
    h5.create_dataset("param_names", data=np.array([n.encode("ascii") for n in names]))
    worst = (0.0, "")
    for name, p in model64.named_parameters():
        h5.create_dataset(f"params/{name}", data=to_np32(p))
        d = write_tensor(h5, f"grads/{name}", grads64[name], grads32[name])
        rel = float(d.attrs["fp32_max_rel_diff"])
        scale = float(grads64[name].abs().max())
        if scale < 1e-12:
            # Analytically zero (e.g. an attention key bias: softmax is shift-invariant); the
            # stored values are rounding noise, so compare these with an absolute tolerance.
            print(f"  note: gradient of {name} is zero up to rounding (max |g| {scale:.1e})")
            d.attrs["analytically_zero"] = np.int8(1)
            continue
        if rel > worst[0]:
            worst = (rel, name)
    return names, worst[0], worst[1]


def sgd_param_groups(model, weight_decay, decay_filter):
    """Two SGD groups: weight decay on the parameters decay_filter(name, p) selects, none on the rest."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if decay_filter(name, p) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def clone_as(model, dtype):
    m = copy.deepcopy(model)
    return m.to(dtype)


def common_attrs(h5, description, **attrs):
    h5.attrs["description"] = description
    h5.attrs["torch_version"] = str(torch.__version__)
    h5.attrs["reference_dtype"] = "float64 computation from the stored float32 weights and inputs"
    for k, v in attrs.items():
        if isinstance(v, str):
            v = str(v)
        elif isinstance(v, (list, tuple)):
            v = np.array(v, dtype=np.int64 if all(isinstance(x, int) for x in v) else np.float64)
        h5.attrs[k] = v
