#!/usr/bin/python3
"""BERT pretraining training throughput in PyTorch, the competitor side of bench/vs_pytorch.sh --model bert_base.

The same model dlperf trains (HuggingFace BertForPreTraining's structure: post-LN encoder, erf
GELU, dropout 0.1 on hidden states and attention probabilities, MLM head on the gathered masked
positions with the decoder tied to the word embeddings, NSP head on tanh(pooler(first token))),
written in plain PyTorch, synthetic token batches, AdamW (torch.optim.AdamW, eps 1e-6, weight decay
0.01 on weights only). fp32, or bf16 with torch.autocast('cpu', dtype=torch.bfloat16).

Method: --warmup untimed steps, then --iterations timed steps (monotonic clock around whole steps:
forward, backward, optimizer); prints `throughput X samples/s` = batch * iterations / elapsed.
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, H, heads, inter, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.attn_out, self.ln1 = nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.inter, self.out, self.ln2 = nn.Linear(H, inter), nn.Linear(inter, H), nn.LayerNorm(H, eps=1e-12)

    def forward(self, x, mask_bias):                                   # (B, S, H), (B, 1, 1, S)
        B, S, H = x.shape
        d = H // self.heads
        split = lambda t: t.view(B, S, self.heads, d).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        probs = F.dropout(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + mask_bias, dim=-1), self.p, self.training)
        ctx = (probs @ v).transpose(1, 2).reshape(B, S, H)
        x = self.ln1(x + F.dropout(self.attn_out(ctx), self.p, self.training))  # fp32 residual: CPU autocast has no bf16 layer norm
        return self.ln2(x + F.dropout(self.out(F.gelu(self.inter(x))), self.p, self.training))


class Bert(nn.Module):
    def __init__(self, a):
        super().__init__()
        H = a.hidden
        self.word, self.pos, self.token_type = nn.Embedding(a.vocab, H), nn.Embedding(512, H), nn.Embedding(2, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList(Layer(H, a.heads, a.intermediate, 0.1) for _ in range(a.layers))
        self.pooler, self.transform, self.tln = nn.Linear(H, H), nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.bias, self.nsp = nn.Parameter(torch.zeros(a.vocab)), nn.Linear(H, 2)

    def forward(self, ids, seg, mask, positions):
        S = ids.shape[1]
        x = self.word(ids) + self.pos(torch.arange(S))[None] + self.token_type(seg)
        x = F.dropout(self.ln(x), 0.1, self.training)
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        h = torch.gather(x, 1, positions[:, :, None].expand(-1, -1, x.shape[-1]))
        mlm = self.tln(F.gelu(self.transform(h)).float()) @ self.word.weight.t() + self.bias
        nsp = self.nsp(torch.tanh(self.pooler(x[:, 0])))
        return mlm, nsp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--max-predictions", type=int, default=20)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    model = Bert(a).train()
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, eps=1e-6)
    B, S, P = a.batch_size, a.seq_len, a.max_predictions
    ids = torch.randint(5, a.vocab, (B, S))
    seg = (torch.arange(S) >= S // 2).long().expand(B, S).contiguous()
    mask = torch.ones(B, S, dtype=torch.long)
    positions = torch.sort(torch.randint(1, S, (B, P)), dim=1).values
    labels = torch.randint(5, a.vocab, (B, P))
    nsp_labels = torch.randint(0, 2, (B,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            mlm, nsp = model(ids, seg, mask, positions)
            loss = F.cross_entropy(mlm.float().reshape(-1, a.vocab), labels.reshape(-1)) + F.cross_entropy(nsp.float(), nsp_labels)
        loss.backward()
        opt.step()
        return float(loss)

    for _ in range(a.warmup):
        step()
    t0 = time.monotonic()
    for _ in range(a.iterations):
        loss = step()
    dt = time.monotonic() - t0
    print(f"pytorch {torch.__version__} bert {a.precision} batch {B} seq {S}: loss {loss:.4f}")
    print(f"throughput {B * a.iterations / dt:.3f} samples/s")


if __name__ == "__main__":
    main()
