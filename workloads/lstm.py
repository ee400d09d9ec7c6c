"""A word-level LSTM language model: embedding 512, two LSTM layers of 1024, linear to the vocabulary."""
from torch import nn

from workloads.base import SequenceWorkload, register


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab: int, embed: int = 512, hidden: int = 1024, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


@register
class LSTM(SequenceWorkload):
    name = "lstm"
    defaults = {
        "cpu": {"batch_size": 8, "seq_len": 16, "vocab": 10000, "lr": 1.0},
        "gpu": {"batch_size": 128, "seq_len": 128, "vocab": 10000, "lr": 1.0},
    }

    def build_model(self):
        return LSTMLanguageModel(self.params["vocab"])

    @classmethod
    def knob_reason(cls, knob, value, cuda):
        if knob == "precision" and value == "amp-fp16" and not cuda:  # bf16 trains on a CPU
            return ("under CPU autocast fp16, nn.LSTM runs oneDNN's fp16 LSTM, which oneDNN cannot build for "
                    "training ('could not create a primitive descriptor'); AMP fp16 for the LSTM needs a GPU")
        if knob == "compile" and value:
            return "torch.compile does not trace nn.LSTM (dynamo's allow_rnn is off): the model would run eager"
        return super().knob_reason(knob, value, cuda)
