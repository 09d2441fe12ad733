#!/usr/bin/python3
"""Write the BERT golden fixture: tests/golden/data/bert_reduced.h5.

An independent PyTorch reference for dlperf's BERT pretraining model: a 2-layer BERT (hidden 64,
4 heads, intermediate 256, vocabulary 128, 64 positions, 2 token types), written here in plain
PyTorch with HuggingFace BertForPreTraining's parameter names, dropout disabled; sequence 16,
batch 2, 3 masked-LM predictions per sequence. One forward and backward of the pretraining loss
(masked LM + next sentence), then AdamW steps. tests/golden/README.md describes the layout.

The model, as BERT (Devlin et al. 2018) and NVIDIA's/HuggingFace's implementations define it:
  embeddings  word[input_ids] + position[0..S) + token_type[segment_ids] -> LayerNorm
  layer (x2)  self-attention: q,k,v = Linear(x) split into 4 heads of 16;
              scores = q k^T / sqrt(16) + (1 - input_mask) * -10000; softmax; context = p v;
              x = LayerNorm(x + attention.output.dense(context))
              x = LayerNorm(x + output.dense(GELU(intermediate.dense(x))))
  pooler      tanh(pooler.dense(x[:, 0]))
  MLM head    h = x gathered at masked_lm_positions; h = LayerNorm(GELU(transform.dense(h)));
              logits = h word_embeddings^T + cls.predictions.bias    (decoder tied to the embeddings)
  NSP head    logits = cls.seq_relationship(pooled)
  loss        mlm = mean cross-entropy over the valid predictions; nsp = mean cross-entropy over the
              batch; total = mlm + nsp
GELU is the erf form x/2 (1 + erf(x/sqrt 2)); layer norm eps 1e-12.

Padding conventions (NVIDIA's pretraining shards): input_mask is 1 on real tokens, 0 on padding;
a masked-LM slot whose position is 0 ([CLS], never masked) is padding and does not count in the
loss. The stored batch has both: sequence 1 is padded after 11 tokens, and has only 2 predictions.

Shapes (B=2, S=16, H=64, P=3): input_ids/segment_ids/input_mask (2,16); masked_lm_positions/ids
(2,3); next_sentence_labels (2,); mlm logits (2,3,128); nsp logits (2,2).
"""

import argparse
import math
import os
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ beside the committed scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_common as gc  # noqa: E402

LN_EPS = 1e-12
MASK_VALUE = -10000.0


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class Embeddings(nn.Module):
    def __init__(self, vocab, hidden, positions, types):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)             # (V, H)
        self.position_embeddings = nn.Embedding(positions, hidden)     # (P, H)
        self.token_type_embeddings = nn.Embedding(types, hidden)       # (T, H)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LN_EPS)

    def forward(self, input_ids, segment_ids):                         # (B, S), (B, S) -> (B, S, H)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)[None] \
            + self.token_type_embeddings(segment_ids)
        return self.LayerNorm(x)


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)                         # (H, H), (H,)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def forward(self, x, mask_bias):                                   # (B, S, H), (B, 1, 1, S)
        B, S, H = x.shape
        d = H // self.heads

        def split(t):                                                  # (B, S, H) -> (B, heads, S, d)
            return t.view(B, S, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_bias    # (B, heads, S, S)
        probs = torch.softmax(scores, dim=-1)
        return (probs @ v).transpose(1, 2).reshape(B, S, H)           # (B, S, H)


class DenseLayerNorm(nn.Module):
    """`dense` then residual add then `LayerNorm`: BertSelfOutput and BertOutput."""

    def __init__(self, d_in, hidden):
        super().__init__()
        self.dense = nn.Linear(d_in, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LN_EPS)

    def forward(self, h, residual):
        return self.LayerNorm(self.dense(h) + residual)


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.self = SelfAttention(hidden, heads)
        self.output = DenseLayerNorm(hidden, hidden)

    def forward(self, x, mask_bias):
        return self.output(self.self(x, mask_bias), x)


class Intermediate(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.dense = nn.Linear(hidden, inter)                          # (I, H), (I,)

    def forward(self, x):
        return gelu(self.dense(x))


class Layer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.attention = Attention(hidden, heads)
        self.intermediate = Intermediate(hidden, inter)
        self.output = DenseLayerNorm(inter, hidden)                    # dense (H, I)

    def forward(self, x, mask_bias):
        x = self.attention(x, mask_bias)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    def __init__(self, layers, hidden, heads, inter):
        super().__init__()
        self.layer = nn.ModuleList([Layer(hidden, heads, inter) for _ in range(layers)])

    def forward(self, x, mask_bias):
        for layer in self.layer:
            x = layer(x, mask_bias)
        return x


class Pooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x):                                              # (B, S, H) -> (B, H)
        return torch.tanh(self.dense(x[:, 0]))


class Bert(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embeddings = Embeddings(cfg.vocab, cfg.hidden, cfg.positions, cfg.types)
        self.encoder = Encoder(cfg.layers, cfg.hidden, cfg.heads, cfg.intermediate)
        self.pooler = Pooler(cfg.hidden)

    def forward(self, input_ids, segment_ids, input_mask):
        mask_bias = (1.0 - input_mask[:, None, None, :].to(self.pooler.dense.weight.dtype)) * MASK_VALUE
        x = self.encoder(self.embeddings(input_ids, segment_ids), mask_bias)
        return x, self.pooler(x)


class Transform(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LN_EPS)

    def forward(self, x):
        return self.LayerNorm(gelu(self.dense(x)))


class Predictions(nn.Module):
    """MLM head; the decoder weight is the word-embedding matrix (tied), with its own bias."""

    def __init__(self, hidden, vocab):
        super().__init__()
        self.transform = Transform(hidden)
        self.bias = nn.Parameter(torch.zeros(vocab))                   # (V,)

    def forward(self, h, word_embeddings):                             # (B, P, H), (V, H) -> (B, P, V)
        return self.transform(h) @ word_embeddings.t() + self.bias


class Heads(nn.Module):
    def __init__(self, hidden, vocab):
        super().__init__()
        self.predictions = Predictions(hidden, vocab)
        self.seq_relationship = nn.Linear(hidden, 2)                   # (2, H), (2,)


class BertForPreTraining(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.bert = Bert(cfg)
        self.cls = Heads(cfg.hidden, cfg.vocab)

    def forward(self, input_ids, segment_ids, input_mask, masked_lm_positions, acts=None):
        seq, pooled = self.bert(input_ids, segment_ids, input_mask)   # (B, S, H), (B, H)
        idx = masked_lm_positions.long()[:, :, None].expand(-1, -1, seq.shape[-1])
        h = torch.gather(seq, 1, idx)                                  # (B, P, H)
        mlm_logits = self.cls.predictions(h, self.bert.embeddings.word_embeddings.weight)
        nsp_logits = self.cls.seq_relationship(pooled)                 # (B, 2)
        if acts is not None:
            acts["sequence_output"] = seq
            acts["pooled_output"] = pooled
        return mlm_logits, nsp_logits


def pretraining_losses(mlm_logits, nsp_logits, masked_lm_positions, masked_lm_ids, nsp_labels):
    """mlm: mean over valid slots (position != 0) of the cross-entropy; nsp: batch mean."""
    valid = (masked_lm_positions != 0).reshape(-1)
    logits = mlm_logits.reshape(-1, mlm_logits.shape[-1])[valid]
    mlm = F.cross_entropy(logits, masked_lm_ids.long().reshape(-1)[valid])
    nsp = F.cross_entropy(nsp_logits, nsp_labels.long())
    return mlm, nsp, mlm + nsp


def init_weights(model, generator, std):
    """Seeded init: weights and embeddings ~ N(0, std) (std larger than BERT's 0.02 so attention
    is far from uniform in this small model); biases ~ U(-0.1, 0.1); layer-norm weights
    ~ U(0.5, 1.5) and biases ~ U(-0.1, 0.1), so every parameter's gradient is non-trivial."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.uniform_(0.5, 1.5, generator=generator)
            elif name.endswith("bias"):
                p.uniform_(-0.1, 0.1, generator=generator)
            else:
                p.normal_(0.0, std, generator=generator)


def check_against_torch_encoder(model, batch):
    """Each encoder layer must equal torch.nn.TransformerEncoderLayer (post-LN, erf GELU) given the
    same weights: an independent check of the attention, masking and layer-norm wiring."""
    input_ids, segment_ids, input_mask = batch[:3]
    x = model.bert.embeddings(input_ids, segment_ids)
    mask_bias = (1.0 - input_mask[:, None, None, :].double()) * MASK_VALUE
    worst = 0.0
    for layer in model.bert.encoder.layer:
        H = x.shape[-1]
        ref = nn.TransformerEncoderLayer(H, layer.attention.self.heads, layer.intermediate.dense.out_features,
                                         dropout=0.0, activation="gelu", layer_norm_eps=LN_EPS,
                                         batch_first=True, norm_first=False).double().train()
        a = layer.attention
        with torch.no_grad():
            ref.self_attn.in_proj_weight.copy_(torch.cat([a.self.query.weight, a.self.key.weight, a.self.value.weight]))
            ref.self_attn.in_proj_bias.copy_(torch.cat([a.self.query.bias, a.self.key.bias, a.self.value.bias]))
            ref.self_attn.out_proj.weight.copy_(a.output.dense.weight)
            ref.self_attn.out_proj.bias.copy_(a.output.dense.bias)
            ref.norm1.load_state_dict(a.output.LayerNorm.state_dict())
            ref.linear1.load_state_dict(layer.intermediate.dense.state_dict())
            ref.linear2.load_state_dict(layer.output.dense.state_dict())
            ref.norm2.load_state_dict(layer.output.LayerNorm.state_dict())
            y_ref = ref(x, src_key_padding_mask=input_mask == 0)
            x = layer(x, mask_bias)
        worst = max(worst, float((x - y_ref).abs().max()))
    t = torch.linspace(-6, 6, 101, dtype=torch.float64)
    worst = max(worst, float((gelu(t) - F.gelu(t)).abs().max()))
    assert worst < 1e-10, f"encoder differs from torch.nn.TransformerEncoderLayer by {worst}"
    print(f"check: encoder layers and GELU match torch.nn.TransformerEncoderLayer (max diff {worst:.1e})")


def make_batch(cfg, g):
    """Synthetic pretraining batch in NVIDIA's shard layout, with padding in sequence 1."""
    B, S, P = cfg.batch, cfg.seq_len, cfg.max_predictions
    lengths = [S] + [S - 5] * (B - 1)                                  # real tokens per sequence
    input_ids = torch.zeros(B, S, dtype=torch.int64)
    segment_ids = torch.zeros(B, S, dtype=torch.int64)
    input_mask = torch.zeros(B, S, dtype=torch.int64)
    positions = torch.zeros(B, P, dtype=torch.int64)
    ids = torch.zeros(B, P, dtype=torch.int64)
    for b, n in enumerate(lengths):
        input_ids[b, :n] = torch.randint(5, cfg.vocab, (n,), generator=g)
        input_ids[b, 0] = 1                                            # [CLS]
        input_mask[b, :n] = 1
        segment_ids[b, n // 2:n] = 1                                   # second sentence
        n_pred = P if b == 0 else P - 1                                # sequence 1: one empty slot
        pos = torch.randperm(n - 1, generator=g)[:n_pred] + 1          # never position 0
        pos, _ = torch.sort(pos)
        positions[b, :n_pred] = pos
        ids[b, :n_pred] = torch.randint(5, cfg.vocab, (n_pred,), generator=g)
        input_ids[b, pos] = 4                                          # [MASK]
    nsp = torch.randint(0, 2, (B,), generator=g)
    nsp[0], nsp[-1] = 0, 1                                             # both classes present
    return input_ids, segment_ids, input_mask, positions, ids, nsp


def decays(name, p):
    """AdamW weight decay as BERT applies it: not on biases, not on layer norm."""
    return not (name.endswith("bias") or "LayerNorm" in name)


def run(model, batch, cfg):
    input_ids, segment_ids, input_mask, positions, ids, nsp = batch
    acts = {}
    model.zero_grad(set_to_none=True)
    mlm_logits, nsp_logits = model(input_ids, segment_ids, input_mask, positions, acts)
    mlm, nsp_loss, total = pretraining_losses(mlm_logits, nsp_logits, positions, ids, nsp)
    total.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    stepper = gc.clone_as(model, next(model.parameters()).dtype)
    groups = gc.sgd_param_groups(stepper, cfg.weight_decay, decays)
    opt = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps)
    losses = []
    for _ in range(cfg.steps):
        opt.zero_grad(set_to_none=True)
        out = stepper(input_ids, segment_ids, input_mask, positions)
        step_total = pretraining_losses(*out, positions, ids, nsp)[2]
        losses.append(float(step_total))
        step_total.backward()
        opt.step()
    return dict(mlm_logits=mlm_logits, nsp_logits=nsp_logits, mlm=mlm, nsp=nsp_loss, total=total,
                acts=acts, grads=grads, losses=losses)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--output", default=os.path.join(here, "data", "bert_reduced.h5"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--intermediate", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--types", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--max-predictions", type=int, default=3)
    ap.add_argument("--init-std", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--adam-eps", type=float, default=1e-6)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=3)
    cfg = ap.parse_args()
    assert cfg.batch >= 2 and cfg.seq_len > 6 and cfg.hidden % cfg.heads == 0
    torch.set_num_threads(1)

    # Full BERT-base through the same code: ~110 M parameters (tied decoder counted once).
    base = argparse.Namespace(vocab=30522, hidden=768, positions=512, types=2, layers=12, heads=12,
                              intermediate=3072)
    n_base = sum(p.numel() for p in BertForPreTraining(base).parameters())
    print(f"BERT-base (BertForPreTraining, tied decoder counted once): {n_base:,} parameters")

    gc.seed_everything(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    model32 = BertForPreTraining(cfg)
    init_weights(model32, g, cfg.init_std)
    batch = make_batch(cfg, g)
    model64 = gc.clone_as(model32, torch.float64)
    model32.train()
    model64.train()

    check_against_torch_encoder(model64, batch)
    r = run(model64, batch, cfg)
    r32 = run(model32, batch, cfg)

    names = ["input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
             "next_sentence_labels"]
    with h5py.File(cfg.output, "w") as h5:
        gc.common_attrs(
            h5,
            f"BERT pretraining golden fixture: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} "
            f"heads, intermediate {cfg.intermediate}, vocab {cfg.vocab}, seq {cfg.seq_len}, batch "
            f"{cfg.batch}, {cfg.max_predictions} predictions, dropout off; one forward/backward of "
            f"mlm + nsp loss and {cfg.steps} AdamW steps, computed by PyTorch",
            layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, intermediate=cfg.intermediate,
            vocab=cfg.vocab, positions=cfg.positions, types=cfg.types, seq_len=cfg.seq_len,
            batch=cfg.batch, max_predictions=cfg.max_predictions, layer_norm_eps=LN_EPS,
            attention_mask_value=MASK_VALUE, dropout=0.0, init_std=cfg.init_std, seed=cfg.seed,
            optimizer="AdamW (torch.optim.AdamW: decoupled decay, bias-corrected moments)",
            lr=cfg.lr, beta1=cfg.beta1, beta2=cfg.beta2, adam_eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay, steps=cfg.steps,
            weight_decay_on="all parameters except biases and LayerNorm weights/biases",
            gelu="erf", tied="cls.predictions decoder weight = bert.embeddings.word_embeddings.weight; "
                             "its gradient holds both uses")
        for name, t in zip(names, batch):
            h5.create_dataset(name, data=t.numpy().astype(np.int32))
        valid = (batch[3] != 0).to(torch.float32)
        h5.create_dataset("masked_lm_weights", data=valid.numpy())
        gc.write_tensor(h5, "mlm_logits", r["mlm_logits"], r32["mlm_logits"])
        gc.write_tensor(h5, "nsp_logits", r["nsp_logits"], r32["nsp_logits"])
        for k in ("mlm", "nsp", "total"):
            gc.write_scalar(h5, f"loss/{k}", r[k], r32[k])
        for k in r["acts"]:
            gc.write_tensor(h5, f"activations/{k}", r["acts"][k], r32["acts"][k])
        pnames, worst_rel, worst_name = gc.write_params_and_grads(h5, model64, r["grads"], r32["grads"])
        gc.write_tensor(h5, "steps/losses", torch.tensor(r["losses"], dtype=torch.float64),
                        torch.tensor(r32["losses"], dtype=torch.float64))

    n_params = sum(p.numel() for p in model64.parameters())
    print(f"wrote {cfg.output} ({os.path.getsize(cfg.output):,} bytes)")
    print(f"  {len(pnames)} parameter tensors, {n_params:,} parameters; largest fp32-vs-fp64 "
          f"relative gradient difference {worst_rel:.2e} ({worst_name})")
    print(f"  loss mlm {float(r['mlm']):.6f} nsp {float(r['nsp']):.6f} total {float(r['total']):.6f}; "
          f"AdamW step losses " + " ".join(f"{v:.6f}" for v in r["losses"]))


if __name__ == "__main__":
    main()
