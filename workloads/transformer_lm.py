"""A Transformer-encoder language model on the LSTM's tokens: embedding 512, six pre-norm encoder
layers (8 heads, feed-forward 2048, attention through PyTorch's scaled_dot_product_attention with
a causal mask), linear to the vocabulary: attention set against recurrence on the same data."""
import torch
from torch import nn

from workloads.base import SequenceWorkload, register


class TransformerLanguageModel(nn.Module):
    def __init__(self, vocab: int, seq_len: int, d_model: int = 512, heads: int = 8, layers: int = 6,
                 ff: int = 2048):
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
        h = self.encoder(self.embed(tokens) + self.position[:n], mask=mask, is_causal=True)
        return self.head(self.norm(h))


@register
class TransformerLM(SequenceWorkload):
    name = "transformer_lm"
    attention = True
    defaults = {
        "cpu": {"batch_size": 8, "seq_len": 16, "vocab": 10000, "lr": 0.05},
        "gpu": {"batch_size": 128, "seq_len": 128, "vocab": 10000, "lr": 0.05},
    }

    def build_model(self):
        return TransformerLanguageModel(self.params["vocab"], self.params["seq_len"])
