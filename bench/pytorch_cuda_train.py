#!/usr/bin/env python3
"""PyTorch on one CUDA GPU, the competitor side of bench/vs_pytorch.sh --device cuda.

One process measures one configuration, the way a PyTorch user trains these networks on a GPU:
  resnet50, vgg16  torchvision's models (resnet50 is v1.5) in channels_last (model and input),
                   eager mode, torch.backends.cudnn.benchmark = True; SGD with momentum, weight
                   decay on conv and fc weights only, cross-entropy with label smoothing.
  bert_base        HuggingFace transformers' BertForPreTraining (BERT-base: 12 layers, hidden 768,
                   12 heads, vocabulary 30522) with SDPA attention, dropout 0.1; torch.optim.AdamW
                   (fused=True, eps 1e-6, weight decay 0.01 on weights only); masked-LM labels on
                   --max-predictions positions per sequence (-100 elsewhere), next-sentence labels.
                   BertForPreTraining projects every token onto the vocabulary (dlperf, like
                   NVIDIA's implementation, only the masked positions): that is the model users run.
                   --mlm-head masked runs the same modules the way NVIDIA's BERT does, like for
                   like with dlperf: the encoder, then the masked positions' hidden states
                   gathered, then the MLM head on those only (B x P rows, not B x S).
Precisions, named as dlperf-train names them:
  fp32  IEEE fp32: torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
  tf32  fp32 with TF32 tensor cores: both True
  fp16  torch.autocast('cuda', float16) with torch.amp.GradScaler (dynamic loss scaling)
  bf16  torch.autocast('cuda', bfloat16)
Synthetic data: one random batch made once on the GPU.

Method: --warmup untimed steps (cudnn.benchmark picks its algorithms there), then
--iterations timed steps between two torch.cuda.synchronize() calls around time.perf_counter():
the clock brackets finished GPU work; nothing else synchronises inside the timed loop (the loss
is read after it). throughput = batch * iterations / elapsed, printed as `throughput X
samples/s` like dlperf-train's summary. The first line names the GPU, PyTorch, CUDA and cuDNN.

On the GPU machine run it with the system Python (PyTorch there is `python3`) and without the
library path of dlperf's packed build, which would hand torch another cuDNN:
  env -u LD_LIBRARY_PATH python3 bench/pytorch_cuda_train.py --model resnet50 --precision fp16
"""

import argparse
import csv
import math
import sys
import time

import torch
import torch.nn as nn

DEFAULT_BATCH = {"resnet50": 256, "vgg16": 128, "bert_base": 64}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--model", choices=["resnet50", "vgg16", "bert_base"], default="resnet50")
    ap.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="fp16")
    ap.add_argument("--batch-size", type=int, default=0, help="0: 256 resnet50, 128 vgg16, 64 bert_base")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--max-predictions", type=int, default=20)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--mlm-head", choices=["all", "masked"], default="all",
                    help="bert_base: the MLM head over every token (BertForPreTraining's forward, what users run) or over "
                         "the masked positions only (NVIDIA's BERT and dlperf: like for like)")
    ap.add_argument("--iterations", type=int, default=50, help="measured training steps")
    ap.add_argument("--warmup", type=int, default=20, help="untimed training steps first")
    ap.add_argument("--lr", type=float, default=0.0, help="0: 0.1 (CNNs, SGD) or 1e-4 (BERT, AdamW)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=-1.0, help="-1: 3.0517578125e-5 resnet50, 5e-4 vgg16, 0.01 bert_base")
    ap.add_argument("--label-smoothing", type=float, default=-1.0, help="-1: 0.1 resnet50, 0 vgg16")
    ap.add_argument("--threads", type=int, default=0, help="accepted for the driver's uniform command line; unused on the GPU")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--profile-kernels", type=int, default=0, metavar="N",
                    help="after the timed steps, N more under torch.profiler (CUPTI): GPU time per kernel and step, "
                         "the counterpart of ncu's per-kernel summary of dlperf-train")
    ap.add_argument("--profile-top", type=int, default=40, help="kernels listed by --profile-kernels (all go to --profile-csv)")
    ap.add_argument("--profile-csv", default="", help="write every kernel's row of --profile-kernels to this file")
    a = ap.parse_args()
    a.batch_size = a.batch_size or DEFAULT_BATCH[a.model]
    for flag in ("batch_size", "image_size", "num_classes", "iterations", "seq_len", "max_predictions"):
        if getattr(a, flag) <= 0:
            ap.error(f"--{flag.replace('_', '-')} must be a positive integer")
    if a.profile_kernels < 0:
        ap.error("--profile-kernels must be 0 (off) or a number of steps")
    if a.warmup < 1:
        ap.error("--warmup must be at least 1 (cudnn.benchmark chooses its algorithms in the first step)")
    if a.max_predictions >= a.seq_len:
        ap.error("--max-predictions must be smaller than --seq-len")
    if not torch.cuda.is_available():
        sys.exit("error: torch.cuda.is_available() is False: no GPU, or a CPU-only PyTorch "
                 "(on the GPU machine run this with `env -u LD_LIBRARY_PATH python3`)")
    if a.precision == "bf16" and not torch.cuda.is_bf16_supported():
        sys.exit("error: --precision bf16 needs an Ampere or newer GPU")
    return a


def set_math(precision):
    tf32 = precision == "tf32"
    if precision in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def decay_groups(model, weight_decay):
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]  # conv, linear, embedding weights
    rest = [p for n, p in model.named_parameters() if p.dim() <= 1]  # biases, norm parameters
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def cnn(a, dev):
    import torchvision
    model = getattr(torchvision.models, a.model)(num_classes=a.num_classes).to(dev, memory_format=torch.channels_last).train()
    wd = a.weight_decay if a.weight_decay >= 0 else (3.0517578125e-5 if a.model == "resnet50" else 5e-4)
    ls = a.label_smoothing if a.label_smoothing >= 0 else (0.1 if a.model == "resnet50" else 0.0)
    opt = torch.optim.SGD(decay_groups(model, wd), lr=a.lr or 0.1, momentum=a.momentum)
    criterion = nn.CrossEntropyLoss(label_smoothing=ls)
    x = torch.randn(a.batch_size, 3, a.image_size, a.image_size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.num_classes, (a.batch_size,), device=dev)
    desc = f"torchvision {torchvision.__version__} {a.model}, channels_last, batch {a.batch_size}, {a.image_size}x{a.image_size}"
    return model, opt, lambda: criterion(model(x), y), desc


def bert(a, dev):
    import transformers
    from transformers import BertConfig, BertForPreTraining
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                     intermediate_size=a.intermediate, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                     max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="gelu")
    try:
        model = BertForPreTraining._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, ValueError):  # older or newer spellings of the same request
        cfg._attn_implementation = "sdpa"
        model = BertForPreTraining(cfg)
    model = model.to(dev).train()
    attn = getattr(model.config, "_attn_implementation", "?")
    if attn != "sdpa":
        print(f"warning: attention implementation is {attn}, not sdpa", file=sys.stderr)
    opt = torch.optim.AdamW(decay_groups(model, a.weight_decay if a.weight_decay >= 0 else 0.01), lr=a.lr or 1e-4, eps=1e-6,
                            fused=True)
    B, S, P = a.batch_size, a.seq_len, a.max_predictions
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    ids = torch.randint(5, a.vocab, (B, S), generator=g)
    segments = (torch.arange(S) >= S // 2).long().expand(B, S).contiguous()
    mask = torch.ones(B, S, dtype=torch.long)
    # P distinct masked positions per sequence, never the first ([CLS]) token
    positions = torch.stack([torch.randperm(S - 1, generator=g)[:P] + 1 for _ in range(B)])
    labels = torch.full((B, S), -100, dtype=torch.long)
    labels.scatter_(1, positions, torch.randint(5, a.vocab, (B, P), generator=g))
    nsp = torch.randint(0, 2, (B,), generator=g)
    ids, segments, mask, labels, nsp = (t.to(dev) for t in (ids, segments, mask, labels, nsp))

    def loss_fn():
        out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels, next_sentence_label=nsp)
        return out.loss

    if a.mlm_head == "masked":
        # BertForPreTraining's own modules and loss, the MLM head on the gathered rows only.
        rows = (positions + torch.arange(B).unsqueeze(1) * S).reshape(-1).to(dev)
        masked_labels = labels.gather(1, positions.to(dev)).reshape(-1)
        ce = nn.CrossEntropyLoss()

        def loss_fn():  # noqa: F811 (the like-for-like variant of the one above)
            hidden, pooled = model.bert(input_ids=ids, token_type_ids=segments, attention_mask=mask, return_dict=False)[:2]
            picked = hidden.reshape(B * S, -1).index_select(0, rows)
            return ce(model.cls.predictions(picked), masked_labels) + ce(model.cls.seq_relationship(pooled), nsp)

    desc = (f"transformers {transformers.__version__} BertForPreTraining ({attn} attention), batch {B}, sequence {S}, "
            f"{P} masked positions, MLM head on {'the masked positions' if a.mlm_head == 'masked' else 'every token'}, "
            f"AdamW fused")
    return model, opt, loss_fn, desc


def main():
    a = parse_args()
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    set_math(a.precision)
    model, opt, loss_fn, desc = (bert if a.model == "bert_base" else cnn)(a, dev)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    n_params = sum(p.numel() for p in model.parameters())
    print(f"pytorch {torch.__version__} CUDA {torch.version.cuda} cuDNN {torch.backends.cudnn.version()} on "
          f"{torch.cuda.get_device_name()}; {desc}; {n_params:,} parameters; precision {a.precision} (matmul tf32 "
          f"{torch.backends.cuda.matmul.allow_tf32}, cudnn tf32 {torch.backends.cudnn.allow_tf32})", flush=True)
    first = None
    for _ in range(a.warmup):
        loss = step()
        first = loss if first is None else first
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.iterations):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    last = float(loss)
    print(f"warmup {a.warmup}; measured {a.iterations} iterations in {elapsed:.3f} s ({1e3 * elapsed / a.iterations:.2f} ms/iteration); "
          f"loss {float(first):.4f} -> {last:.4f}; peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    if not math.isfinite(last):
        print("warning: the loss is not finite; the timing may not be representative", file=sys.stderr)
    print(f"throughput {a.batch_size * a.iterations / elapsed:.3f} samples/s", flush=True)
    if a.profile_kernels:
        profile_kernels(step, a)


def profile_kernels(step, a):
    """GPU time of every kernel (and copy or fill) over a.profile_kernels steps after the timed
    ones, per step and sorted, from CUPTI's activity records: the kernels ran as they do in the
    timed loop (not replayed one by one, as ncu does)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.profile_kernels):
            step()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.events():
        if not str(e.device_type).endswith("CUDA"):
            continue
        calls, us = rows.get(e.name, (0, 0.0))
        rows[e.name] = (calls + 1, us + e.time_range.elapsed_us())
    n = a.profile_kernels
    total = sum(us for _, us in rows.values())
    ranked = sorted(rows.items(), key=lambda kv: -kv[1][1])
    print(f"kernels: {len(rows)} distinct, {sum(c for c, _ in rows.values()) / n:.0f} launches and "
          f"{total / n / 1e3:.3f} ms of GPU time per step (over {n} profiled steps; kernels may overlap)")
    print(f"{'ms/step':>9} {'share':>6} {'calls/step':>10}  kernel")
    for name, (calls, us) in ranked[:a.profile_top]:
        print(f"{us / n / 1e3:9.3f} {100 * us / total:5.1f}% {calls / n:10.1f}  {name[:160]}")
    if a.profile_csv:
        with open(a.profile_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "calls_per_step", "ms_per_step", "share"])
            for name, (calls, us) in ranked:
                w.writerow([name, calls / n, us / n / 1e3, us / total])


if __name__ == "__main__":
    main()
