# Run from the repository root at commit 91c81466d9e4, each in its own process on one machine:
#   TRAINPERF_COMPILE_CACHE=/tmp/probe-cache [VAR=VALUE] python3 probe.py transformer_lm VARIANT 30
# with VAR=VALUE TORCHINDUCTOR_AUTOGRAD_CACHE=0 (aot-off) or TORCHINDUCTOR_FORCE_DISABLE_CACHES=1
# (no-caches), in the order fp16-fresh, fp16-cached, fp16-aot-off, fp16-no-caches, bf16-fresh,
# bf16-cached. "max|g*scale|" is a misnomer: GradScaler unscales the gradients in place in its step,
# so it is the largest unscaled gradient. Python's max() passes over NaN, so max|p| and max|g| can
# hide a non-finite value; `trainperf probe`, which this became, counts them instead.
"""probe.py WORKLOAD VARIANT STEPS: train a cell's first steps, syncing every step; print per step
the loss, GradScaler's scale, the largest |param| and |grad| (unscaled), and the compile cache counts."""
import json, math, sys, time
import torch
from workloads import cli, compiled, harness, matrix, config

def aot():
    c = torch._dynamo.utils.counters["aot_autograd"]
    return c["autograd_cache_hit"], c["autograd_cache_miss"], c["autograd_cache_bypass"]


w, v, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = matrix.resolve(config.load(config.CONFIG, {"preset": "gpu" if torch.cuda.is_available() else "cpu"}))
spec = matrix.cell(cfg, w, v, "timing", 0)["spec"]
t = harness.Trainer(spec)
print("knobs", json.dumps({k: spec["knobs"][k] for k in ("precision", "compile", "sdpa_backend")}), flush=True)
for i in range(n):
    x, y = next(t.batches)
    t0 = time.perf_counter()
    loss = t.step(x, y)
    l = float(loss)
    pm = max(float(p.detach().abs().max()) for p in t.model.parameters())
    gm = max((float(p.grad.detach().abs().max()) for p in t.model.parameters() if p.grad is not None), default=0.0)
    print(f"step {i} loss {l:.6f} scale {t.scaler.get_scale() if t.scaler.is_enabled() else 1:.0f} "
          f"max|p| {pm:.4g} max|g*scale| {gm:.4g} fx {compiled.cache_counts()} aot {aot()} {time.perf_counter()-t0:.2f}s", flush=True)
    if not math.isfinite(l):
        break
