"""The configuration of a model exported by `cabert export` (cabert's docs/export.md).

`cabert export` writes this file beside `model.safetensors` for the models no transformers class computes
(Chang et al.'s relative and convolutional attention variants, ConvBERT's ablations, Wu et al.'s and Tay et
al.'s convolution blocks as encoders). config.json's `auto_map` points transformers' Auto classes here and at
modeling_cabert.py, so that

    AutoModelForMaskedLM.from_pretrained(DIR, trust_remote_code=True)

computes what cabert computes. The exact model is `config.cabert["model"]`: cabert's ModelConfig
(formats/model.proto) as protobuf JSON, field names as in the .proto; the top-level keys (hidden_size,
num_hidden_layers, ...) repeat its sizes under the names transformers' tools look for.
"""
from transformers import PretrainedConfig


class CabertConfig(PretrainedConfig):
    model_type = "cabert"

    def __init__(self, cabert=None, **kwargs):
        # cabert's "cabert" block: {"model": ModelConfig JSON, "head", "pooling", "checkpoint_kind", ...}
        self.cabert = dict(cabert or {})
        super().__init__(**kwargs)

    @property
    def model(self):
        """cabert's ModelConfig as a dict (formats/model.proto field names)."""
        return self.cabert.get("model", {})
