"""transformer_lm: what is particular to this workload: logits per position, and a causal mask
(a position never sees the tokens after it)."""
import torch

import workloads


def test_transformer_lm_output_shape_and_causality():
    cls = workloads.get("transformer_lm")
    params = {**cls.defaults["cpu"], "seq_len": 16}
    model = cls(params).build_model().eval()
    x = torch.randint(0, 100, (2, 16))
    y = model(x)
    assert y.shape == (2, 16, params["vocab"])
    x2 = x.clone()
    x2[:, 10] = (x2[:, 10] + 1) % 100
    y2 = model(x2)
    assert torch.allclose(y[:, :10], y2[:, :10], atol=1e-5) and not torch.allclose(y[:, 10:], y2[:, 10:])
