#!/usr/bin/python3
"""Write the Llama golden fixture: tests/golden/data/llama_reduced.h5.

An independent PyTorch reference for dlperf's Llama 3 model, written here in plain PyTorch after
Meta's reference implementation (github.com/meta-llama/llama3, llama/model.py: RMSNorm,
precompute_freqs_cis with apply_scaling, apply_rotary_emb, repeat_kv, Attention, FeedForward,
TransformerBlock, Transformer) and with its parameter names; no HuggingFace. A reduced Llama 3.1:
2 layers, hidden 64, 4 query / 2 key-value heads (head dim 16), SwiGLU feed-forward 176,
vocabulary 512, untied output head, RMSNorm eps 1e-5, RoPE theta 500,000 with Llama 3.1's
scaling (factor 8, low/high frequency factors 1/4, original context 8,192: at head dim 16 the
8 frequencies fall in all three of its regimes); batch 2 of 33-token windows (seq 32).

  h = tok_embeddings[tokens[:, :32]]
  per layer: h = h + wo(attention(RoPE(wq(n)), RoPE(wk(n)), wv(n))), n = attention_norm(h)
             h = h + w2(silu(w1(n)) * w3(n)),                        n = ffn_norm(h)
  logits = output(norm(h)); loss = mean cross-entropy(logits, tokens[:, 1:])
Attention is causal softmax(q k^T / sqrt(16)) v, each key/value head shared by 2 query heads;
RoPE rotates interleaved pairs (x[2i], x[2i+1]) as Meta's view_as_complex does.

Stored: the weights and tokens, the loss, the logits, every gradient (one forward and backward),
then the losses of 3 steps of Llama 3's optimizer: torch.optim.AdamW (beta2 0.95, eps 1e-8,
weight decay 0.1 on matrices, none on the RMSNorm weights) after clip_grad_norm_(1.0).
tests/golden/README.md describes the layout and the tolerance rule.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def apply_scaling(freqs, factor, low, high, old):
    """Llama 3.1's long-context rescaling of the RoPE frequencies (Meta's apply_scaling)."""
    out = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < old / high:
            out.append(f)
        elif wavelen > old / low:
            out.append(f / factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def rope_tables(cfg):
    """cos, sin (T, D/2) in float64."""
    d = cfg.hidden // cfg.heads
    freqs = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = apply_scaling(freqs, cfg.rope_factor, 1.0, 4.0, 8192.0)
    angles = torch.outer(torch.arange(cfg.seq_len, dtype=torch.float64), freqs)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    """x (B, T, heads, D): pairs (x[2i], x[2i+1]) rotated as complex numbers by the angles."""
    xr = x.reshape(*x.shape[:-1], -1, 2)
    x0, x1 = xr[..., 0], xr[..., 1]
    c = cos.to(x.dtype)[None, :, None, :]
    s = sin.to(x.dtype)[None, :, None, :]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).reshape(x.shape)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads, self.kv_heads, self.d = cfg.heads, cfg.kv_heads, cfg.hidden // cfg.heads
        self.wq = nn.Linear(cfg.hidden, cfg.heads * self.d, bias=False)     # (Hq*D, H)
        self.wk = nn.Linear(cfg.hidden, cfg.kv_heads * self.d, bias=False)  # (Hkv*D, H)
        self.wv = nn.Linear(cfg.hidden, cfg.kv_heads * self.d, bias=False)
        self.wo = nn.Linear(cfg.heads * self.d, cfg.hidden, bias=False)     # (H, Hq*D)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = apply_rope(self.wq(x).view(B, T, self.heads, self.d), cos, sin)
        k = apply_rope(self.wk(x).view(B, T, self.kv_heads, self.d), cos, sin)
        v = self.wv(x).view(B, T, self.kv_heads, self.d)
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=2)                                  # repeat_kv
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                     # (B, Hq, T, D)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)                 # (B, Hq, T, T)
        mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu(1)
        p = F.softmax(scores + mask, dim=-1)
        o = (p @ v).transpose(1, 2).reshape(B, T, -1)                        # (B, T, Hq*D)
        return self.wo(o)


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.w1 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.w2 = nn.Linear(cfg.ffn, cfg.hidden, bias=False)
        self.w3 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = Attention(cfg)
        self.feed_forward = FeedForward(cfg)
        self.attention_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.ffn_norm = RMSNorm(cfg.hidden, cfg.norm_eps)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.output = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied:  # Llama 3.2: the head is the embedding table (one parameter, both gradients summed)
            self.output.weight = self.tok_embeddings.weight
        self.cos, self.sin = rope_tables(cfg)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        return self.output(self.norm(h))


def loss_of(model, window):
    logits = model(window[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1)), logits


def decays(name, p):
    return p.dim() == 2  # matrices (and the embedding table), not the RMSNorm weights


def run(model, window, cfg):
    model.zero_grad(set_to_none=True)
    loss, logits = loss_of(model, window)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    stepper = gc.clone_as(model, next(model.parameters()).dtype)
    stepper.cos, stepper.sin = model.cos, model.sin
    groups = gc.sgd_param_groups(stepper, cfg.weight_decay, decays)
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        step_loss, _ = loss_of(stepper, window)
        losses.append(float(step_loss))
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(stepper.parameters(), 1.0)
        opt.step()
    return dict(loss=loss, logits=logits, grads=grads, losses=losses)


def count(layers, hidden, heads, kv_heads, ffn, vocab, tied):
    cfg = argparse.Namespace(layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=8, seq_len=1,
                             norm_eps=1e-5, rope_theta=500000.0, rope_factor=8.0, tied=False)
    block = sum(p.numel() for p in TransformerBlock(cfg).parameters())
    return vocab * hidden * (1 if tied else 2) + layers * block + hidden


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--output", default=os.path.join(here, "data", "llama_reduced.h5"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=176)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--init-std", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tied", action="store_true", help="Llama 3.2's tied head and RoPE factor 32 "
                    "(writes data/llama_tied_reduced.h5 unless --output is given)")
    cfg = ap.parse_args()
    cfg.norm_eps, cfg.rope_theta = 1e-5, 500000.0
    cfg.rope_factor = 32.0 if cfg.tied else 8.0
    if cfg.tied and cfg.output == os.path.join(here, "data", "llama_reduced.h5"):
        cfg.output = os.path.join(here, "data", "llama_tied_reduced.h5")
    torch.set_num_threads(1)

    # The published sizes through the same block class (one block instantiated, multiplied).
    n8 = count(32, 4096, 32, 8, 14336, 128256, False)
    n1 = count(16, 2048, 32, 8, 8192, 128256, True)
    assert n8 == 8030261248 and n1 == 1235814400, (n8, n1)
    print(f"check: Llama 3.1 8B {n8:,} and Llama 3.2 1B {n1:,} parameters through the same classes")

    gc.seed_everything(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    model32 = Transformer(cfg)
    with torch.no_grad():
        for name, p in model32.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5, generator=g)  # non-trivial norm gradients
            else:
                p.normal_(0.0, cfg.init_std, generator=g)
    window = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len + 1), generator=g)
    model64 = gc.clone_as(model32, torch.float64)
    model64.cos, model64.sin = model32.cos, model32.sin

    # RoPE regimes at this head dim: kept, blended and divided frequencies all occur.
    d = cfg.hidden // cfg.heads
    f0 = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = apply_scaling(f0, cfg.rope_factor, 1.0, 4.0, 8192.0)
    kept, divided = int((f == f0).sum()), int((f == f0 / cfg.rope_factor).sum())
    assert kept > 0 and divided > 0 and kept + divided < len(f), (kept, divided)

    r = run(model64, window, cfg)
    r32 = run(model32, window, cfg)
    # Imported here: bench/llama_pytorch_train.py imports this file for the model alone, where
    # setup-debian.sh --bench installs PyTorch but not h5py.
    import h5py

    with h5py.File(cfg.output, "w") as h5:
        gc.common_attrs(
            h5,
            f"Llama 3.1 golden fixture: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads}/{cfg.kv_heads} heads, "
            f"feed-forward {cfg.ffn}, vocab {cfg.vocab}, seq {cfg.seq_len}, batch {cfg.batch}, "
            f"{'head tied to the embeddings (Llama 3.2)' if cfg.tied else 'untied head'}; one "
            f"forward/backward of the next-token loss and {cfg.steps} AdamW steps, computed by PyTorch",
            layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, kv_heads=cfg.kv_heads, ffn=cfg.ffn,
            vocab=cfg.vocab, seq_len=cfg.seq_len, batch=cfg.batch, norm_eps=cfg.norm_eps,
            rope_theta=cfg.rope_theta, rope_scaling=f"factor {cfg.rope_factor:g}, low 1, high 4, original context 8192",
            tied=int(cfg.tied),
            init_std=cfg.init_std, seed=cfg.seed, lr=cfg.lr, beta1=0.9, beta2=0.95, adam_eps=1e-8,
            weight_decay=cfg.weight_decay, steps=cfg.steps, clip_grad_norm=1.0,
            weight_decay_on="matrices and the embedding table, not the RMSNorm weights")
        h5.create_dataset("tokens", data=window.numpy().astype(np.int32))
        gc.write_tensor(h5, "logits", r["logits"], r32["logits"])
        gc.write_scalar(h5, "loss", r["loss"], r32["loss"])
        pnames, worst_rel, worst_name = gc.write_params_and_grads(h5, model64, r["grads"], r32["grads"])
        gc.write_tensor(h5, "steps/losses", torch.tensor(r["losses"], dtype=torch.float64),
                        torch.tensor(r32["losses"], dtype=torch.float64))
    n_params = sum(p.numel() for p in model64.parameters())
    print(f"wrote {cfg.output} ({os.path.getsize(cfg.output):,} bytes)")
    print(f"  {len(pnames)} parameter tensors, {n_params:,} parameters; largest fp32-vs-fp64 relative gradient "
          f"difference {worst_rel:.2e} ({worst_name})")
    print(f"  loss {float(r['loss']):.6f}; AdamW step losses " + " ".join(f"{v:.6f}" for v in r["losses"]))


if __name__ == "__main__":
    main()
