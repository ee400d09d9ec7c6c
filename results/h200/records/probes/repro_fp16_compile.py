"""transformer_lm's AMP fp16 + torch.compile NaN, without the suite: the same model (pre-norm
encoder layers, causal SDPA), the same tokens (Zipf unigrams, half followed by a fixed successor),
SGD with momentum 0.9 at lr 0.05, GradScaler, torch.compile's default mode. Only torch and numpy:
the model is a copy of workloads/transformer_lm.py's, so that the script runs (and can be filed
upstream) on its own.

    python3 repro_fp16_compile.py [--dtype fp16|bf16] [--layers 6] [--steps 30] [--eager]

Prints one JSON line per step (loss, GradScaler's scale) and, at the first non-finite loss, the
same batch through the compiled and the eager model with the same weights; then the process's
inductor cache hits and misses. Run it twice with one TORCHINDUCTOR_CACHE_DIR: the second run
loads the first one's graphs."""
import argparse
import json
import math

import numpy as np
import torch
from torch import nn


def make_tokens(n: int, vocab: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    draws = rng.choice(vocab, size=n, p=p / p.sum())
    successor = rng.permutation(vocab)
    follow = rng.random(n) < 0.5
    tokens = draws.copy()
    tokens[1:][follow[1:]] = successor[draws[:-1][follow[1:]]]
    return tokens


class LM(nn.Module):
    def __init__(self, vocab, seq_len, layers, d_model=512, heads=8, ff=2048):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(seq_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device, dtype=self.position.dtype)
        return self.head(self.norm(self.encoder(self.embed(tokens) + self.position[:n], mask=mask, is_causal=True)))


def loss_of(model, x, y, dtype):
    with torch.autocast(x.device.type, dtype=dtype):
        out = model(x)
    return nn.functional.cross_entropy(out.flatten(0, -2).float(), y.flatten())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--eager", action="store_true")
    a = ap.parse_args()
    dtype, vocab = {"fp16": torch.float16, "bf16": torch.bfloat16}[a.dtype], 10000
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    tokens = torch.from_numpy(make_tokens(4_000_000, vocab).astype(np.int64))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = LM(vocab, a.seq, a.layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler(dev, enabled=a.dtype == "fp16")
    run = model if a.eager else torch.compile(model)
    g = torch.Generator().manual_seed(0)
    for step in range(a.steps):
        at = torch.randint(len(tokens) - a.seq - 1, (a.batch,), generator=g)
        x = torch.stack([tokens[i:i + a.seq] for i in at]).to(dev)
        y = torch.stack([tokens[i + 1:i + a.seq + 1] for i in at]).to(dev)
        loss = loss_of(run, x, y, dtype)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        line = {"step": step, "loss": value, "scale": scaler.get_scale() if scaler.is_enabled() else None}
        if not math.isfinite(value):
            with torch.no_grad():  # the weights are those the step saw: GradScaler skipped its update
                line["again_compiled"] = loss_of(run, x, y, dtype).item()
                line["again_eager"] = loss_of(model, x, y, dtype).item()
        print(json.dumps(line), flush=True)
        if not math.isfinite(value):
            break
    c = torch._dynamo.utils.counters
    print(json.dumps({"inductor": {k: v for k, v in c["inductor"].items() if "cache" in k},
                      "aot_autograd": {k: v for k, v in c["aot_autograd"].items() if "cache" in k}}))


if __name__ == "__main__":
    main()
