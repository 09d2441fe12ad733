#!/usr/bin/python3
"""Llama pretraining throughput in PyTorch, the competitor side of bench/llama_vs_pytorch.sh.

The same reduced Llama 3.1 dlperf trains, from the plain-PyTorch reference the golden fixture is
written with (tests/golden/make_llama_fixture.py, after Meta's llama/model.py; dlperf matches it
gradient for gradient), with its attention replaced by F.scaled_dot_product_attention(is_causal=
True) where PyTorch has it (2.0 and later; 1.13 keeps the explicit causal softmax). Synthetic
token windows, next-token cross-entropy, AdamW (beta2 0.95, eps 1e-8, weight decay 0.1 on
matrices) after clip_grad_norm_(1.0), as dlperf's Llama recipe. fp32, or bf16 with
torch.autocast(device, dtype=torch.bfloat16). --device cuda: the model, batches and optimizer
(AdamW fused=True, PyTorch's fastest) on the GPU, SDPA's flash/cuDNN kernels; --tied: Llama 3.2's
head tied to the embeddings (RoPE factor 32), for llama3_2_1b.

Method: --warmup untimed steps, then --iterations timed steps (monotonic clock around whole steps:
forward, backward, optimizer; on cuda the device synchronised before each clock reading); prints
`throughput X samples/s` = batch * iterations / elapsed.
"""

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
import make_llama_fixture as ref  # noqa: E402


def sdpa_forward(self, x, cos, sin):
    B, T, _ = x.shape
    q = ref.apply_rope(self.wq(x).view(B, T, self.heads, self.d), cos, sin).transpose(1, 2)
    k = ref.apply_rope(self.wk(x).view(B, T, self.kv_heads, self.d), cos, sin).transpose(1, 2)
    v = self.wv(x).view(B, T, self.kv_heads, self.d).transpose(1, 2)
    rep = self.heads // self.kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.wo(o.transpose(1, 2).reshape(B, T, -1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in [("layers", 4), ("hidden", 1024), ("heads", 16), ("kv-heads", 4), ("ffn", 3584), ("vocab", 32000),
                          ("seq-len", 1024), ("batch-size", 2), ("iterations", 10), ("warmup", 3), ("threads", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tied", action="store_true", help="Llama 3.2's tied head (RoPE factor 32)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if hasattr(F, "scaled_dot_product_attention"):
        ref.Attention.forward = sdpa_forward
    cfg = argparse.Namespace(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads, ffn=a.ffn, vocab=a.vocab,
                             seq_len=a.seq_len, norm_eps=1e-5, rope_theta=500000.0, rope_factor=32.0 if a.tied else 8.0,
                             tied=a.tied)
    torch.manual_seed(0)
    model = ref.Transformer(cfg)
    with torch.no_grad():  # Llama's init, as dlperf's: N(0, 0.02) matrices (nn.Embedding's N(0, 1) would
        for p in model.parameters():  # make a tied head's first logits ~50x too large)
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    model.cos, model.sin = model.cos.float(), model.sin.float()
    model.to(dev)
    model.cos, model.sin = model.cos.to(dev), model.sin.to(dev)
    groups = ref.gc.sgd_param_groups(model, 0.1, ref.decays)
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **({"fused": True} if a.device == "cuda" else {}))
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, a.vocab, (a.batch_size, a.seq_len + 1), generator=g).to(dev) for _ in range(4)]
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    def step(i):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss, _ = ref.loss_of(model, batches[i % 4])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()  # read after the clock: no host sync per step

    for i in range(a.warmup):
        step(i)
    sync()
    t0 = time.monotonic()
    for i in range(a.iterations):
        loss = step(i)
    sync()
    dt = time.monotonic() - t0
    attn = "sdpa" if hasattr(F, "scaled_dot_product_attention") else "explicit softmax"
    where = torch.cuda.get_device_name() if a.device == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"pytorch {torch.__version__} ({attn}), {where}, loss {float(loss):.4f}")
    print(f"throughput {a.batch_size * a.iterations / dt:.3f} samples/s")
    print(f"tokens/s {a.batch_size * a.seq_len * a.iterations / dt:.1f}")


if __name__ == "__main__":
    main()
