"""cabert's models in plain PyTorch: the modelling code `cabert export` writes beside the weights.

A reference implementation of the papers' formulas as cabert computes them (cabert's lib/models/ and the plain-ATen
kernels/reference/ are the C++ counterparts; SPEC.md section 2 lists the formulas). Module and parameter names are
cabert's own, so model.safetensors loads as written and `cabert export --from-hf` reads the directory back.

  embeddings      token (V x E) + segment (2 x E) [+ absolute position (P x E)], LayerNorm   (SPEC.md section 2)
  stack           Linear E -> H when E != H, then post-LN layers (BERT, Devlin et al. 2019):
                    h = LN(x + Out(Mix(x))),  y = LN(h + FFN(h)),  FFN = Linear(H->I), GELU, Linear(I->H)
                  or Tay et al. 2021's blocks (normalize_mixer_output): h = x + LN(Out(Mix(x)))
  Mix             the token mixer of the family:
    BERT          self-attention with Chang et al. 2021's relative and convolutional terms (Eq. 1, 4-7, section 5)
    CONVBERT      mixed attention of Jiang et al. 2020 (Eq. 6) with SDConv (Eq. 4-5) or a Table 2 ablation
    LIGHTCONV,    the convolution blocks of Wu et al. 2019 (Eq. 1-4); DILATEDCONV: Tay et al. 2021's dilated
    DYNAMICCONV,  depthwise convolution
    DILATEDCONV
  heads           masked-LM (Linear(H->E), GELU, LN(E), tied token embedding + bias), sequence classification
                  (BERT's pooler on [CLS] or the mean of the real positions), span (SQuAD start/end), ELECTRA's
                  replaced-token discriminator (Clark et al. 2020)
  encoder-        CabertForConditionalGeneration (AutoModelForSeq2SeqLM, generate): Wu et al. 2019's and Tay et al.
  decoders        2021's convolution models, the Transformer baseline and the T5-style Transformer with T5's
                  relative position bias (Raffel et al. 2020; the section at the end of this file)

Padding (attention_mask 0) is masked in every branch: a padded key gets no attention, and every convolution reads
zeros at padded positions and writes zeros there, so a padded batch gives every real position the outputs of the
unpadded sequence. Dropout is applied in training as in cabert (DropConnect on the convolution kernels included);
cabert's own dropout draws (Philox) are not reproduced, so only evaluation-mode outputs equal cabert's.
"""
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import (BaseModelOutput, MaskedLMOutput, QuestionAnsweringModelOutput,
                                           Seq2SeqLMOutput, SequenceClassifierOutput, TokenClassifierOutput)

from .configuration_cabert import CabertConfig

# ----------------------------------------------------------------------------------------------------------------
# Padding and convolutions over [B, T, C] (channels last; C channels in H contiguous head blocks of C/H).
# padding_left is K//2 for a centred kernel: output t reads inputs t + k - padding_left, k = 0..K-1, zero outside.
# ----------------------------------------------------------------------------------------------------------------


def zero_padding(x, mask):
    """x with the padded positions (mask False) set to zero; mask None = no padding."""
    return x if mask is None else x * mask.unsqueeze(-1).to(x.dtype)


def unfold_taps(x, kernel_size, padding_left):
    """[B, T, C] -> [B, T, C, K], element [b, t, c, k] = x[b, t + k - padding_left, c] (zero outside)."""
    padded = F.pad(x, (0, 0, padding_left, kernel_size - 1 - padding_left))
    return padded.unfold(1, kernel_size, 1)


def depthwise_conv(x, weight, bias, padding_left, mask, dilation=1):
    """Wu et al. 2019 Eq. 1, DepthwiseConv(X, W, i, c) = sum_j W[c, j] X[i + j - padding_left, c] (+ bias[c]);
    weight [C, K]. Also Chang et al. 2021 Eq. 7's DWConv of the values and Tay et al. 2021's dilated convolution
    (taps dilation apart)."""
    channels, kernel_size = weight.shape
    span = (kernel_size - 1) * dilation
    x = zero_padding(x, mask).transpose(1, 2)  # [B, C, T]
    x = F.pad(x, (padding_left, span - padding_left))
    out = F.conv1d(x, weight.unsqueeze(1), bias, dilation=dilation, groups=channels)
    return zero_padding(out.transpose(1, 2), mask)


def lightweight_conv(x, weight, padding_left, mask):
    """Wu et al. 2019 Eq. 2: LightConv(X, W, i, c) = DepthwiseConv(X, softmax(W)_{ceil(cH/d)}, i, c): the kernel
    [H, K] (already normalised, Eq. 3) shared by the d/H channels of each head."""
    heads, kernel_size = weight.shape
    per_channel = weight.repeat_interleave(x.shape[-1] // heads, 0)  # [C, K]
    taps = unfold_taps(zero_padding(x, mask), kernel_size, padding_left)
    return zero_padding((taps * per_channel).sum(-1), mask)


def dynamic_conv(x, kernels, padding_left, mask):
    """Wu et al. 2019 Eq. 4 (and ConvBERT's SDConv, Jiang et al. 2020 Eq. 5): position i's own kernel
    kernels[b, i, h, :] (normalised), shared by the channels of head h:
    out[b, i, c] = sum_j kernels[b, i, h(c), j] x[b, i + j - padding_left, c]."""
    batch, length, heads, kernel_size = kernels.shape
    channels = x.shape[-1]
    taps = unfold_taps(zero_padding(x, mask), kernel_size, padding_left)
    taps = taps.reshape(batch, length, heads, channels // heads, kernel_size)
    out = (taps * kernels.unsqueeze(3)).sum(-1).reshape(batch, length, channels)
    return zero_padding(out, mask)


def drop_connect(kernel, p, training):
    """DropConnect on a normalised kernel (Wu et al. 2019 section 3, weight dropout)."""
    return F.dropout(kernel, p, training) if p > 0 else kernel


def relative_index(length, radius, device):
    """[i, j] -> r(i, j) + n with r(i, j) = clamp(j - i, -n, n) (Chang et al. 2021 section 3, Shaw et al.'s
    clipping: beyond +-n the edge weight is reused)."""
    positions = torch.arange(length, device=device)
    return (positions.unsqueeze(0) - positions.unsqueeze(1)).clamp(-radius, radius) + radius


def key_padding_bias(mask, dtype):
    """0 for real keys, the dtype's lowest value for padded ones: [B, 1, 1, T], added to the attention scores."""
    bias = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return bias.masked_fill(~mask, torch.finfo(dtype).min)[:, None, None, :]


# ----------------------------------------------------------------------------------------------------------------
# Layers shared by the families.
# ----------------------------------------------------------------------------------------------------------------


class CabertEmbeddings(nn.Module):
    """SPEC.md section 2: token + segment [+ absolute position], LayerNorm, dropout ([B, T] ids -> [B, T, E])."""

    def __init__(self, model, dropout):
        super().__init__()
        width = model["embedding_size"]
        self.token = nn.Embedding(model["vocab_size"], width)
        self.segment = nn.Embedding(2, width)
        self.position = (nn.Embedding(model["max_length"], width)
                         if model.get("attention", {}).get("absolute_positions") else None)
        self.norm = nn.LayerNorm(width, eps=model["layer_norm_eps"])
        self.dropout = nn.Dropout(dropout)
        self.max_length = model["max_length"]

    def forward(self, input_ids, token_type_ids):
        length = input_ids.shape[1]
        if length > self.max_length:
            raise ValueError(f"expected sequences of at most {self.max_length} tokens, got {length}")
        x = self.token(input_ids) + self.segment(token_type_ids)
        if self.position is not None:
            x = x + self.position(torch.arange(length, device=input_ids.device)).unsqueeze(0)
        return self.dropout(self.norm(x))


class GroupedLinear(nn.Module):
    """ConvBERT's grouped linear (Jiang et al. 2020 section 3.3): g independent blocks, weight [g, in/g, out/g]."""

    def __init__(self, inputs, outputs, groups):
        super().__init__()
        self.groups = groups
        self.weight = nn.Parameter(torch.zeros(groups, inputs // groups, outputs // groups))
        self.bias = nn.Parameter(torch.zeros(outputs))

    def forward(self, x):
        rows = x.numel() // x.shape[-1]
        grouped = x.reshape(rows, self.groups, -1).transpose(0, 1)  # [g, rows, in/g]
        y = torch.bmm(grouped, self.weight).transpose(0, 1).reshape(rows, -1)
        return (y + self.bias).view(*x.shape[:-1], -1)


class FeedForward(nn.Module):
    """FFN(h) = Linear(I->H)(act(Linear(H->I)(h))) (Vaswani et al. 2017 Eq. 2), act = BERT's exact (erf) GELU or,
    with ffn_activation RELU (fairseq's lightconv and transformer models, Wu et al. 2019's setting), ReLU as in
    Vaswani et al.'s Eq. 2; grouped in ConvBERT when g > 1."""

    def __init__(self, hidden, intermediate, groups, activation="GELU"):
        super().__init__()
        if activation not in ("GELU", "RELU"):
            raise ValueError(f"expected ffn_activation GELU or RELU, got {activation!r}")
        self.activation = F.relu if activation == "RELU" else F.gelu
        if groups > 1:
            self.grouped_in = GroupedLinear(hidden, intermediate, groups)
            self.grouped_out = GroupedLinear(intermediate, hidden, groups)
        else:
            self.__setattr__("in", nn.Linear(hidden, intermediate))  # cabert's name: ffn.in
            self.out = nn.Linear(intermediate, hidden)

    def forward(self, x):
        if hasattr(self, "grouped_in"):
            return self.grouped_out(self.activation(self.grouped_in(x)))
        return self.out(self.activation(getattr(self, "in")(x)))


class SeparableConv(nn.Module):
    """Depthwise convolution over every input channel (kernel K, centred, padding masked), then a pointwise
    Linear: Chang et al. 2021 section 5's convolutional Q/K/V projections (GELU in between) and ConvBERT's
    SepConv (Jiang et al. 2020 Eq. 4, Ks = SepConv(X), no GELU)."""

    def __init__(self, inputs, outputs, kernel_size, depthwise_bias, gelu):
        super().__init__()
        self.depthwise_weight = nn.Parameter(torch.zeros(inputs, kernel_size))
        self.depthwise_bias = nn.Parameter(torch.zeros(inputs)) if depthwise_bias else None
        self.pointwise = nn.Linear(inputs, outputs)
        self.kernel_size, self.gelu = kernel_size, gelu

    def forward(self, x, mask):
        y = depthwise_conv(x, self.depthwise_weight, self.depthwise_bias, self.kernel_size // 2, mask)
        return self.pointwise(F.gelu(y) if self.gelu else y)


def split_heads(x, heads):
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)  # [B, N, T, d]


def merge_heads(x):
    batch, heads, length, size = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * size)


# ----------------------------------------------------------------------------------------------------------------
# The token mixers, one per family.
# ----------------------------------------------------------------------------------------------------------------


class CompositeAttention(nn.Module):
    """Self-attention with every variant of Chang et al. 2021 (SPEC.md section 2), per head h, d = H/N,
    r = r(i, j) = clamp(j - i, -n, n):

      Eq. 1  alpha_ij = q_i.k_j / sqrt(d)                           (absolute / none)
      Eq. 4           + beta_h[r]                                   (fixed lightweight convolution, Raffel et al.)
      Eq. 5           + q_i.W^C[r] / sqrt(d)                        (dynamic lightweight convolution, Shaw et al.)
      Eq. 6           + q_i.W^C[r] / sqrt(d) + beta_h[r]            (composite attention)
      key variant     + k_j.W^K'[r(j, i)] / sqrt(d)                 (composite-key)
      softmax over the real keys j, context_i = sum_j p_ij v_j
      Eq. 7  context += s_h DWConv_{2n+1}(V)                        (fixed depthwise convolution of the values)

    In the conv-q/k/v variants (section 5) the first half of the heads take their queries / keys / values from a
    depthwise-separable convolution (depthwise 2n+1, GELU, pointwise), the other half from the Linear.
    """

    def __init__(self, model, dropout):
        super().__init__()
        a = model.get("attention", {})
        self.hidden, self.heads = model["hidden_size"], model["num_heads"]
        self.head_size = self.hidden // self.heads
        self.radius = a.get("relative_radius", 0)
        window = 2 * self.radius + 1
        half = self.head_size * (self.heads // 2)
        for name in ("query", "key", "value"):
            if a.get(f"conv_{name}"):
                setattr(self, f"{name}_conv", SeparableConv(self.hidden, half, window, True, True))
                setattr(self, name, nn.Linear(self.hidden, self.hidden - half))
            else:
                setattr(self, f"{name}_conv", None)
                setattr(self, name, nn.Linear(self.hidden, self.hidden))
        zeros = lambda *shape: nn.Parameter(torch.zeros(*shape))
        self.relative_beta = zeros(self.heads, window) if a.get("relative_fixed") else None  # beta [N, 2n+1]
        self.relative_query = zeros(window, self.head_size) if a.get("relative_dynamic") else None  # W^C
        self.relative_key = zeros(window, self.head_size) if a.get("relative_key") else None  # W^K'
        if a.get("depthwise_values"):
            self.depthwise_weight = zeros(self.hidden, window)  # [H, 2n+1]
            self.depthwise_bias = zeros(self.hidden)
            self.depthwise_scale = nn.Parameter(torch.ones(self.heads))  # s_h
        else:
            self.depthwise_weight = None
        self.attention_dropout = nn.Dropout(dropout)
        # T5's positions (seq2seq.relative_buckets): the encoder's one RelativePositionBias, owned by the model and
        # set by share_position_bias (not registered here, so that its table keeps the model's name); None otherwise
        self.position_bias = None

    def project(self, x, mask, name):
        linear, conv = getattr(self, name), getattr(self, f"{name}_conv")
        return linear(x) if conv is None else torch.cat([conv(x, mask), linear(x)], -1)

    def scores(self, q, k, mask):
        """alpha [B, N, T, T] before the softmax: Eq. 1 and the relative terms of Eq. 4-6 and the key variant."""
        length = q.shape[2]
        scale = 1.0 / math.sqrt(self.head_size)
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        index = relative_index(length, self.radius, q.device)  # [i, j] -> r(i, j) + n
        if self.relative_query is not None:  # Eq. 5: q_i.W^C[r(i, j)] / sqrt(d)
            band = torch.matmul(q, self.relative_query.t())  # [B, N, T, 2n+1]: q_i.W^C[r] for every r
            scores = scores + band.gather(3, index.expand(*band.shape[:2], length, length)) * scale
        if self.relative_beta is not None:  # Eq. 4: beta_h[r(i, j)]
            scores = scores + self.relative_beta[:, index]
        if self.position_bias is not None:  # T5's bias, in place of beta: table_h[bucket(j - i)]
            scores = scores + self.position_bias(length, length)
        if self.relative_key is not None:  # key variant: k_j.W^K'[r(j, i)] / sqrt(d)
            band = torch.matmul(k, self.relative_key.t())  # [B, N, T(j), 2n+1]
            # row j, column i of the gather is band[j, r(j, i)]; transposed to [i, j]
            scores = scores + band.gather(3, index.expand(*band.shape[:2], length, length)).transpose(-1, -2) * scale
        if mask is not None:
            scores = scores + key_padding_bias(mask, scores.dtype)
        return scores

    def forward(self, x, mask):
        values = self.project(x, mask, "value")
        q = split_heads(self.project(x, mask, "query"), self.heads)
        k = split_heads(self.project(x, mask, "key"), self.heads)
        probabilities = self.attention_dropout(torch.softmax(self.scores(q, k, mask), -1))
        context = merge_heads(torch.matmul(probabilities, split_heads(values, self.heads)))
        if self.depthwise_weight is not None:  # Eq. 7: + s_h DWConv_{2n+1}(V), on the projected values
            conv = depthwise_conv(values, self.depthwise_weight, self.depthwise_bias, self.radius, mask)
            context = context + conv * self.depthwise_scale.repeat_interleave(self.head_size)
        return context


class MixedAttention(nn.Module):
    """ConvBERT's mixed attention (Jiang et al. 2020 Eq. 6):
      Mixed-Attn(K, Q, Ks, V; W_f) = Cat(Self-Attn(Q, K, V), SDConv(Q, Ks, V; W_f))
    with the bottleneck (section 3.1: N / gamma attention heads of size H / N) and the span-based dynamic
    convolution (Eq. 4-5): Ks = SepConv_k(X), kernel_i = softmax_k(W_f (Q_i * Ks_i)) per conv head,
    out_i = sum_j kernel_i[j] V'_{i+j-k/2}, V' = Linear(X); or a Table 2 ablation: plain dynamic convolution
    (kernel from X alone, Wu et al. Eq. 4), a depthwise-separable convolution of X, or no convolution."""

    def __init__(self, model, dropout):
        super().__init__()
        cb = model.get("convbert", {})
        hidden, heads = model["hidden_size"], model["num_heads"]
        self.head_size = hidden // heads
        self.heads = max(1, heads // cb.get("head_ratio", 1)) if cb.get("bottleneck") else heads
        width = self.heads * self.head_size
        self.kind = cb.get("conv_kind", "SDCONV")
        self.kernel_size = cb.get("conv_kernel_size", 1)
        self.query, self.key, self.value = (nn.Linear(hidden, width) for _ in range(3))
        if self.kind in ("SDCONV", "DEPTHWISE_SEPARABLE"):
            self.key_conv = SeparableConv(hidden, width, self.kernel_size, False, False)
        if self.kind == "SDCONV":
            self.conv_kernel = nn.Linear(width, self.heads * self.kernel_size)  # W_f
        if self.kind == "PLAIN_DYNAMIC":
            self.conv_kernel = nn.Linear(hidden, self.heads * self.kernel_size)
        if self.kind in ("SDCONV", "PLAIN_DYNAMIC"):
            self.conv_value = nn.Linear(hidden, width)  # V'
        self.attention_dropout = nn.Dropout(dropout)

    def convolution(self, x, q_flat, mask):
        batch, length = x.shape[:2]
        if self.kind == "DEPTHWISE_SEPARABLE":
            return self.key_conv(x, mask)
        if self.kind == "SDCONV":  # Eq. 4: the kernel from the span-aware key Ks and the query
            logits = self.conv_kernel(q_flat * self.key_conv(x, mask))
        else:  # PLAIN_DYNAMIC: the kernel from the input alone
            logits = self.conv_kernel(x)
        kernels = torch.softmax(logits.view(batch, length, self.heads, self.kernel_size), -1)
        return dynamic_conv(self.conv_value(x), kernels, self.kernel_size // 2, mask)  # Eq. 5

    def forward(self, x, mask):
        q_flat = self.query(x)
        q, k, v = split_heads(q_flat, self.heads), split_heads(self.key(x), self.heads), split_heads(self.value(x),
                                                                                                    self.heads)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)  # Eq. 1
        if mask is not None:
            scores = scores + key_padding_bias(mask, scores.dtype)
        context = merge_heads(torch.matmul(self.attention_dropout(torch.softmax(scores, -1)), v))
        if self.kind == "NO_CONV":
            return context
        return torch.cat([context, zero_padding(self.convolution(x, q_flat, mask), mask)], -1)


class ConvBlock(nn.Module):
    """The convolution block of Wu et al. 2019 (section 3): Linear(d->2d) + GLU (or Linear(d->d)), then
      Eq. 2-3  LightConv: one kernel W in R^{H x k}, softmax over k, shared by the d/H channels of each head;
      Eq. 4    DynamicConv: position i's kernel softmax_k(W^Q X_i), W^Q in R^{(H k) x d};
    over the depthwise convolution of Eq. 1, centred (padding k/2) or causal (k-1). Tay et al. 2021's gated block
    X1 = W^I X * sigmoid(W^S X), X2 = Conv(X1) is the same with the GLU; its dilated kind is a plain depthwise
    kernel per channel with dilation 2^(i mod cycle) in layer i. The layer applies W^O (the output Linear)."""

    def __init__(self, model, layer_index):
        super().__init__()
        b = model.get("conv_block", {})
        family = model.get("family", "BERT")
        self.hidden = model["hidden_size"]
        self.dynamic, self.dilated = family == "DYNAMICCONV", family == "DILATEDCONV"
        self.glu, self.weight_dropout = b.get("glu", False), b.get("weight_dropout", 0.0)
        kernels = b.get("kernel_sizes", [])
        self.kernel_size = kernels[min(layer_index, len(kernels) - 1)]
        cycle = b.get("dilation_cycle", 0)
        self.dilation = 2 ** (layer_index % cycle if cycle > 0 else layer_index) if self.dilated else 1
        span = (self.kernel_size - 1) * self.dilation
        self.padding_left = span if b.get("causal") else (span // 2 if self.dilated else self.kernel_size // 2)
        shared = b.get("share_weights_across_channels", False)
        self.heads = self.hidden if self.dilated or not shared else (b.get("conv_heads") or model["num_heads"])
        self.input = nn.Linear(self.hidden, 2 * self.hidden if self.glu else self.hidden)
        if self.dynamic:
            self.kernel_projection = nn.Linear(self.hidden, self.heads * self.kernel_size, bias=False)  # W^Q
        else:  # lightweight: [H, k]; dilated: [C, k]
            self.weight = nn.Parameter(torch.zeros(self.heads, self.kernel_size))

    def forward(self, x, mask):
        y = self.input(x)
        if self.glu:  # GLU(a, b) = a * sigmoid(b) (Dauphin et al. 2017)
            y = F.glu(y, -1)
        if self.dilated:
            return depthwise_conv(y, self.weight, None, self.padding_left, mask, self.dilation)
        if self.dynamic:  # Eq. 4
            logits = self.kernel_projection(y).view(*y.shape[:2], self.heads, self.kernel_size)
            kernels = drop_connect(torch.softmax(logits, -1), self.weight_dropout, self.training)
            return dynamic_conv(y, kernels, self.padding_left, mask)
        kernel = drop_connect(torch.softmax(self.weight, -1), self.weight_dropout, self.training)  # Eq. 3
        return lightweight_conv(y, kernel, self.padding_left, mask)


def build_mixer(model, layer_index, attention_dropout):
    """(cabert's module name, the mixer) of the family, as lib/models/mixer_registry.cc's table."""
    family = model.get("family", "BERT")
    if family == "BERT":
        return "attention", CompositeAttention(model, attention_dropout)
    if family == "CONVBERT":
        return "attention", MixedAttention(model, attention_dropout)
    if family in ("LIGHTCONV", "DYNAMICCONV", "DILATEDCONV"):
        return "conv", ConvBlock(model, layer_index)
    raise ValueError(f"unknown cabert encoder family {family!r}")


def mixer_width(model, mixer):
    if isinstance(mixer, MixedAttention):
        return mixer.heads * mixer.head_size * (1 if mixer.kind == "NO_CONV" else 2)
    return model["hidden_size"]


class CabertLayer(nn.Module):
    """Post-LN layer: h = LN(x + Drop(Out(Mix(x)))), y = LN(h + Drop(FFN(h))) (SPEC.md section 2); Tay et al.
    2021's blocks: h = x + LN(Drop(Out(Mix(x)))) (XA = LN(Conv(X)) + X), y as above (XB = LN(FFN(XA) + XA));
    or, in an encoder-decoder with seq2seq.normalize_before, pre-LN (below)."""

    def __init__(self, model, layer_index, dropout, attention_dropout):
        super().__init__()
        hidden, eps = model["hidden_size"], model["layer_norm_eps"]
        self.mixer_name, mixer = build_mixer(model, layer_index, attention_dropout)
        setattr(self, self.mixer_name, mixer)
        self.output = nn.Linear(mixer_width(model, mixer), hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=eps)
        groups = max(1, model.get("convbert", {}).get("ffn_groups", 1)) if model.get("family") == "CONVBERT" else 1
        self.ffn = FeedForward(hidden, model["intermediate_size"], groups, model.get("ffn_activation", "GELU"))
        self.ffn_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.normalize_mixer_output = model.get("normalize_mixer_output", False)
        # the encoder-decoders' pre-norm (fairseq's --encoder-normalize-before; Xiong et al. 2020):
        # h = x + Drop(Out(Mix(LN(x)))), y = h + Drop(FFN(LN(h)))
        self.normalize_before = model.get("seq2seq", {}).get("normalize_before", False)

    def forward(self, x, mask):
        mixer = getattr(self, self.mixer_name)
        if self.normalize_before:
            h = x + self.dropout(self.output(mixer(self.attention_norm(x), mask)))
            return h + self.dropout(self.ffn(self.ffn_norm(h)))
        mixed = self.dropout(self.output(mixer(x, mask)))
        h = x + self.attention_norm(mixed) if self.normalize_mixer_output else self.attention_norm(x + mixed)
        return self.ffn_norm(h + self.dropout(self.ffn(h)))


class CabertStack(nn.Module):
    """Linear E -> H when E != H, then the layers ([B, T, E] -> [B, T, H])."""

    main_input_name = "input_ids"  # generate() asks an encoder-decoder's `encoder` for it

    def __init__(self, model, dropout, attention_dropout):
        super().__init__()
        self.embedding_projection = (nn.Linear(model["embedding_size"], model["hidden_size"])
                                     if model["embedding_size"] != model["hidden_size"] else None)
        self.layers = nn.ModuleList(
            CabertLayer(model, i, dropout, attention_dropout) for i in range(model["num_layers"]))

    def forward(self, x, mask, output_hidden_states=False):
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        states = [x]
        for layer in self.layers:
            x = layer(x, mask)
            states.append(x)
        return x, (tuple(states) if output_hidden_states else None)


# ----------------------------------------------------------------------------------------------------------------
# transformers' classes.
# ----------------------------------------------------------------------------------------------------------------


class CabertPreTrainedModel(PreTrainedModel):
    config_class = CabertConfig
    base_model_prefix = "encoder"
    main_input_name = "input_ids"

    def _init_weights(self, module):
        """BERT's initialisation (N(0, range) weights, zero biases, LayerNorm 1/0), for heads a checkpoint lacks."""
        std = self.config.model.get("initializer_range", 0.02)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, std)
            if getattr(module, "bias", None) is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()


def real_positions(input_ids, attention_mask):
    """attention_mask as bool [B, T] (True = real token), or None when there is no padding."""
    if attention_mask is None:
        return None
    return attention_mask.to(device=input_ids.device).bool()


class CabertModel(CabertPreTrainedModel):
    """The encoder: embeddings and stack. last_hidden_state [B, T, H]; hidden_states: the embedding output (after
    the projection to H) and every layer's output."""

    def __init__(self, config):
        super().__init__(config)
        model = config.model
        self.embeddings = CabertEmbeddings(model, model.get("dropout", 0.0))
        self.stack = CabertStack(model, model.get("dropout", 0.0), model.get("attention_dropout", 0.0))
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.token

    def set_input_embeddings(self, value):
        self.embeddings.token = value

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        mask = real_positions(input_ids, attention_mask)
        hidden, states = self.stack(self.embeddings(input_ids, token_type_ids), mask, bool(output_hidden_states))
        return BaseModelOutput(last_hidden_state=hidden, hidden_states=states)


class CabertMlmHead(nn.Module):
    """Linear(H->E), GELU, LN(E), then the tied token embedding plus an output bias (SPEC.md section 2)."""

    def __init__(self, model):
        super().__init__()
        self.transform = nn.Linear(model["hidden_size"], model["embedding_size"])
        self.norm = nn.LayerNorm(model["embedding_size"], eps=model["layer_norm_eps"])
        self.bias = nn.Parameter(torch.zeros(model["vocab_size"]))

    def forward(self, hidden, token_embedding):
        return F.linear(self.norm(F.gelu(self.transform(hidden))), token_embedding, self.bias)


class CabertForMaskedLM(CabertPreTrainedModel):
    """Masked-LM logits [B, T, V] at every position (Devlin et al. 2019's MLM head, tied to the token table)."""

    def __init__(self, config):
        super().__init__(config)
        self.encoder = CabertModel(config)
        self.mlm_head = CabertMlmHead(config.model)
        self.post_init()

    def get_input_embeddings(self):
        return self.encoder.embeddings.token

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        out = self.encoder(input_ids, attention_mask, token_type_ids, output_hidden_states)
        logits = self.mlm_head(out.last_hidden_state, self.encoder.embeddings.token.weight)
        loss = None
        if labels is not None:  # -100 = not predicted, as transformers' masked-LM classes
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class CabertForSequenceClassification(CabertPreTrainedModel):
    """cabert's classification / regression head (lib/models/task_model.h): pooled -> Dropout -> Linear(H->H) ->
    tanh -> Dropout -> Linear(H->C), BERT's pooler trained from scratch; pooled = h[CLS] (Devlin et al. 2019,
    Chang et al. 2021) or the mean of the real positions (Reimers and Gurevych 2019), as the model was
    fine-tuned (config.cabert["pooling"]). logits [B, C] (C = 1 for regression)."""

    def __init__(self, config):
        super().__init__(config)
        model = config.model
        hidden, dropout = model["hidden_size"], model.get("dropout", 0.0)
        self.num_labels = config.num_labels
        self.pooling = config.cabert.get("pooling", "cls")
        self.encoder = CabertModel(config)
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.Tanh(), nn.Dropout(dropout),
                                  nn.Linear(hidden, config.num_labels))  # cabert's head.1 and head.4
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        out = self.encoder(input_ids, attention_mask, token_type_ids, output_hidden_states)
        hidden = out.last_hidden_state
        if self.pooling == "mean":
            weights = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).unsqueeze(-1)
            weights = weights.to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1)
        else:
            pooled = hidden[:, 0]
        logits = self.head(pooled)
        loss = None
        if labels is not None:
            if self.config.problem_type == "regression":
                loss = F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            else:
                loss = F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class CabertForQuestionAnswering(CabertPreTrainedModel):
    """The span head (SQuAD, Devlin et al. 2019 section 4.2): Linear(H->2) at every position -> start and end
    logits; padding can never be a start or an end (-1e4)."""

    def __init__(self, config):
        super().__init__(config)
        self.encoder = CabertModel(config)
        self.head = nn.Sequential(nn.Linear(config.model["hidden_size"], 2))  # cabert's head.0
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        out = self.encoder(input_ids, attention_mask, token_type_ids, output_hidden_states)
        logits = self.head(out.last_hidden_state)
        if attention_mask is not None:
            logits = logits.masked_fill(~real_positions(input_ids, attention_mask).unsqueeze(-1), -1e4)
        start, end = logits.unbind(-1)
        return QuestionAnsweringModelOutput(start_logits=start, end_logits=end, hidden_states=out.hidden_states)


class CabertForPreTraining(CabertPreTrainedModel):
    """ELECTRA's discriminator (Clark et al. 2020 section 2): replaced-token logits [B, T] =
    Linear(H->1)(GELU(Linear(H->H)(h))). The generator is exported beside it, in generator/, as a masked LM."""

    def __init__(self, config):
        super().__init__(config)
        hidden = config.model["hidden_size"]
        self.encoder = CabertModel(config)
        self.discriminator_dense = nn.Linear(hidden, hidden)
        self.discriminator_out = nn.Linear(hidden, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        out = self.encoder(input_ids, attention_mask, token_type_ids, output_hidden_states)
        logits = self.discriminator_out(F.gelu(self.discriminator_dense(out.last_hidden_state))).squeeze(-1)
        return TokenClassifierOutput(logits=logits, hidden_states=out.hidden_states)


# ----------------------------------------------------------------------------------------------------------------
# The encoder-decoders (cabert's lib/models/seq2seq_model, SPEC.md section 6): Wu et al. 2019's LightConv and
# DynamicConv translation models and their Transformer baseline (Vaswani et al. 2017), Tay et al. 2021's gated
# lightweight / dynamic / dilated convolution models.
#   embed(x)  = sqrt(d) * TokenTable[x] + sinusoidal positions, dropout      (Vaswani et al. section 3.4-3.5)
#               or, with seq2seq.relative_buckets (t5-*), no positions here and T5's relative position bias in
#               the self-attention logits, one table per stack (Raffel et al. 2020 section 2.1)
#   encoder   = the layers above (CabertLayer of the config's family), [one plain self-attention layer on top]
#   decoder   = per layer: causal mixer (masked self-attention or a causal convolution), encoder-decoder
#               attention, FFN; each a post-LN (or pre-LN) sublayer
#   logits    = decoder output x TokenTable^T (tied, seq2seq.tie_output) or Linear(d -> V) without bias
# Token ids: [PAD]=0, the decoder input starts with [CLS]=2 (BOS), a target ends with [SEP]=3 (EOS).
# ----------------------------------------------------------------------------------------------------------------


def sinusoidal_encoding(positions, dim, dtype):
    """Vaswani et al. 2017 section 3.5 in fairseq's layout (all sines, then all cosines): for position p and
    i < d/2, enc[i] = sin(p w_i), enc[d/2 + i] = cos(p w_i), w_i = 10000^(-i / (d/2 - 1)); a zero column when d
    is odd. Computed in double, as cabert does, then cast."""
    half = dim // 2
    steps = torch.arange(half, dtype=torch.float64, device=positions.device)
    frequencies = torch.exp(steps * (-math.log(10000.0) / (half - 1)))
    angles = positions.to(torch.float64).unsqueeze(-1) * frequencies
    encoding = torch.cat([torch.sin(angles), torch.cos(angles)], -1)
    if dim % 2 == 1:
        encoding = torch.cat([encoding, torch.zeros_like(encoding[..., :1])], -1)
    return encoding.to(dtype)


def sinusoidal_positions(mask, dim, dtype):
    """[B, T] bool -> [B, T, d]: real tokens numbered 1, 2, ... in order (fairseq's make_positions), padding zero."""
    real = mask.long()
    return sinusoidal_encoding(torch.cumsum(real, 1) * real, dim, dtype) * mask.unsqueeze(-1).to(dtype)


def t5_relative_buckets(offsets, bidirectional, buckets, max_distance):
    """T5's relative position buckets (Raffel et al. 2020, section 2.1; cabert's lib/models/relative_position_bias.h)
    of the offsets r = j - i (key minus query position, int64, any shape). Bidirectional (encoder): r > 0 takes the
    upper half of the buckets and |r| is bucketed in B' = B/2; causal (decoder): -r (clamped at 0) in B' = B. An
    offset m < B'/2 is its own bucket, a larger one goes to B'/2 + floor(log(m / (B'/2)) / log(D / (B'/2)) *
    (B' - B'/2)), at most B' - 1. In float32 and in this order of operations, as cabert (and T5) round it."""
    side = buckets
    if bidirectional:
        side = buckets // 2
        base = (offsets > 0).long() * side
        distance = offsets.abs()
    else:
        base = torch.zeros_like(offsets)
        distance = (-offsets).clamp_min(0)
    exact = side // 2
    spread = (torch.log(distance.float().clamp_min(1) / float(exact)) / math.log(max_distance / exact)
              * float(side - exact))
    far = (exact + spread.long()).clamp_max(side - 1)
    return base + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """T5's relative position bias (Raffel et al. 2020, section 2.1): a learned scalar per head and bucket, table
    [N, B], one for all the self-attention layers of a stack (the encoder's bidirectional, the decoder's causal)."""

    def __init__(self, heads, buckets, max_distance, bidirectional):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(heads, buckets))
        self.buckets, self.max_distance, self.bidirectional = buckets, max_distance, bidirectional

    def forward(self, queries, keys):
        """The bias of queries 0..queries-1 against keys 0..keys-1: [1, N, queries, keys]."""
        positions = torch.arange(max(queries, keys), device=self.table.device)
        offsets = positions[:keys].unsqueeze(0) - positions[:queries].unsqueeze(1)
        bucket = t5_relative_buckets(offsets, self.bidirectional, self.buckets, self.max_distance)
        return self.table[:, bucket].unsqueeze(0)


def share_position_bias(stack, bias, kind):
    """Gives every self-attention layer (of class `kind`) under `stack` the stack's one T5 bias table, unregistered
    (object.__setattr__), so that the table is loaded and saved once, under the model's name."""
    for module in stack.modules():
        if isinstance(module, kind):
            object.__setattr__(module, "position_bias", bias)


def attend(q, k, v, bias, dropout):
    """Vaswani et al. 2017 Eq. 1: softmax(q k^T / sqrt(d) + bias) v; bias -inf (or the lowest value) hides a key."""
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    return torch.matmul(dropout(torch.softmax(scores, -1)), v)


class CausalSelfAttention(nn.Module):
    """The decoder's masked self-attention (Vaswani et al. 2017 section 3.2.3): position i attends to the real
    target positions j <= i; N heads of d = H/N."""

    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attention_dropout = nn.Dropout(dropout)
        self.position_bias = None  # T5's positions: the decoder's one RelativePositionBias (share_position_bias)

    def forward(self, x, mask):
        length = x.shape[1]
        future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        bias = torch.zeros(length, length, dtype=x.dtype, device=x.device).masked_fill(future, float("-inf"))
        if mask is not None:
            bias = bias + key_padding_bias(mask, x.dtype)
        if self.position_bias is not None:  # every position against every one (generate recomputes the prefix)
            bias = bias + self.position_bias(length, length).to(x.dtype)
        q, k, v = (split_heads(f(x), self.heads) for f in (self.query, self.key, self.value))
        return merge_heads(attend(q, k, v, bias, self.attention_dropout))


class CrossAttention(nn.Module):
    """Encoder-decoder attention (Vaswani et al. 2017 section 3.2.3): queries from the decoder, keys and values
    from the encoder output (memory); padded source positions get no attention."""

    def __init__(self, hidden, heads, dropout):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attention_dropout = nn.Dropout(dropout)

    def forward(self, x, memory, memory_mask):
        bias = None if memory_mask is None else key_padding_bias(memory_mask, x.dtype)
        q = split_heads(self.query(x), self.heads)
        k, v = split_heads(self.key(memory), self.heads), split_heads(self.value(memory), self.heads)
        return merge_heads(attend(q, k, v, bias, self.attention_dropout))


def decoder_model(model):
    """The decoder seen as a stack of its own (cabert's seq2seq_decoder_config): family seq2seq.decoder_family,
    seq2seq.decoder_layers layers, kernels seq2seq.decoder_kernel_sizes, causal convolutions (padding (k-1) x
    dilation on the left: Wu et al. 2019 section 3, the decoder sees no later token)."""
    s = model["seq2seq"]
    decoder = copy.deepcopy(model)
    decoder["family"] = s.get("decoder_family", "BERT")
    decoder["num_layers"] = s["decoder_layers"]
    block = dict(decoder.get("conv_block", {}))
    block["kernel_sizes"] = list(s.get("decoder_kernel_sizes", []))
    block["causal"] = True
    decoder["conv_block"] = block
    return decoder


class CabertDecoderLayer(nn.Module):
    """Post-LN (Vaswani et al. 2017 section 3.1; Tay et al. 2021's h = x + LN(Mix(x)) for the mixer with
    normalize_mixer_output):
      h = LN(x + Drop(Out(Mix(x)))),  c = LN(h + Drop(CrossOut(CrossAttn(h, memory)))),  y = LN(c + Drop(FFN(c)))
    or pre-LN with seq2seq.normalize_before: h = x + Drop(Out(Mix(LN(x)))), and so on for each sublayer."""

    def __init__(self, decoder, layer_index):
        super().__init__()
        hidden, eps = decoder["hidden_size"], decoder["layer_norm_eps"]
        heads, dropout = decoder["num_heads"], decoder.get("dropout", 0.0)
        attention_dropout = decoder.get("attention_dropout", 0.0)
        family = decoder["family"]
        if family == "BERT":
            self.mixer_name, mixer = "attention", CausalSelfAttention(hidden, heads, attention_dropout)
        elif family in ("LIGHTCONV", "DYNAMICCONV", "DILATEDCONV"):
            self.mixer_name, mixer = "conv", ConvBlock(decoder, layer_index)
        else:
            raise ValueError(f"the {family} family has no causal form for the decoder")
        setattr(self, self.mixer_name, mixer)
        norm = lambda: nn.LayerNorm(hidden, eps=eps)
        self.output, self.mixer_norm = nn.Linear(hidden, hidden), norm()
        self.cross_attention = CrossAttention(hidden, heads, attention_dropout)
        self.cross_output, self.cross_norm = nn.Linear(hidden, hidden), norm()
        self.ffn = FeedForward(hidden, decoder["intermediate_size"], 1, decoder.get("ffn_activation", "GELU"))
        self.ffn_norm = norm()
        self.dropout = nn.Dropout(dropout)
        self.normalize_mixer_output = decoder.get("normalize_mixer_output", False)
        self.normalize_before = decoder["seq2seq"].get("normalize_before", False)

    def forward(self, x, mask, memory, memory_mask):
        mixer = getattr(self, self.mixer_name)
        if self.normalize_before:
            h = x + self.dropout(self.output(mixer(self.mixer_norm(x), mask)))
            c = h + self.dropout(self.cross_output(self.cross_attention(self.cross_norm(h), memory, memory_mask)))
            return c + self.dropout(self.ffn(self.ffn_norm(c)))
        projected = self.dropout(self.output(mixer(x, mask)))
        h = x + self.mixer_norm(projected) if self.normalize_mixer_output else self.mixer_norm(x + projected)
        c = self.cross_norm(h + self.dropout(self.cross_output(self.cross_attention(h, memory, memory_mask))))
        return self.ffn_norm(c + self.dropout(self.ffn(c)))


class CabertSourceEncoder(nn.Module):
    """What generate() runs once per batch (get_encoder()): the source side of CabertForConditionalGeneration.
    It holds the model without registering it, so that the weights keep cabert's names."""

    def __init__(self, model):
        super().__init__()
        self.__dict__["model"] = model

    def forward(self, input_ids=None, attention_mask=None, output_hidden_states=None, return_dict=None, **kwargs):
        return self.model.encode(input_ids, attention_mask, output_hidden_states)


class CabertForConditionalGeneration(CabertPreTrainedModel, GenerationMixin):
    """cabert's encoder-decoder (lib/models/seq2seq_model.h) for AutoModelForSeq2SeqLM and generate().

    generate() recomputes the whole decoder prefix at every step (no cache: correctness over speed), which gives
    what cabert's incremental decoder gives. generation_config.json carries cabert's greedy search settings:
    decoder_start_token_id 2 ([CLS] = BOS), eos_token_id 3 ([SEP]), [PAD] never generated (suppress_tokens [0]),
    EOS forced at max_length (forced_eos_token_id 3). cabert's `--max-len` of M generated tokens before EOS is
    max_new_tokens = M + 1 here."""

    base_model_prefix = "cabert_seq2seq"  # no module of that name: the checkpoint's names are used as they are

    def __init__(self, config):
        super().__init__(config)
        model = config.model
        s = model["seq2seq"]
        hidden, vocab = model["hidden_size"], model["vocab_size"]
        dropout = model.get("dropout", 0.0)
        self.embed_scale = math.sqrt(hidden)
        self.source_table = nn.Embedding(vocab, hidden)
        self.target_table = None if s.get("share_embeddings") else nn.Embedding(vocab, hidden)
        self.dropout = nn.Dropout(dropout)
        self.encoder = CabertStack(model, dropout, model.get("attention_dropout", 0.0))
        self.encoder_top_attention = None
        if s.get("encoder_top_attention"):  # Tay et al.'s convolutions + one plain self-attention layer
            top = copy.deepcopy(model)
            top["family"], top["attention"] = "BERT", {}
            self.encoder_top_attention = CabertLayer(top, model["num_layers"], dropout,
                                                     model.get("attention_dropout", 0.0))
        decoder = decoder_model(model)
        self.decoder = nn.ModuleList(CabertDecoderLayer(decoder, i) for i in range(decoder["num_layers"]))
        pre_norm = s.get("normalize_before", False)
        eps = model["layer_norm_eps"]
        self.encoder_norm = nn.LayerNorm(hidden, eps=eps) if pre_norm else None
        self.decoder_norm = nn.LayerNorm(hidden, eps=eps) if pre_norm else None
        self.output_projection = None if s.get("tie_output") else nn.Linear(hidden, vocab, bias=False)
        # T5's positions (seq2seq.relative_buckets > 0): no sinusoidal embeddings; one bias table for the encoder's
        # self-attention layers (buckets of j - i both ways) and one for the decoder's (causal); none in the
        # cross-attention. cabert's names: encoder_position_bias.table, decoder_position_bias.table.
        self.encoder_position_bias = self.decoder_position_bias = None
        buckets = s.get("relative_buckets", 0)
        if buckets > 0:
            distance, heads = s["relative_max_distance"], model["num_heads"]
            self.encoder_position_bias = RelativePositionBias(heads, buckets, distance, bidirectional=True)
            self.decoder_position_bias = RelativePositionBias(heads, buckets, distance, bidirectional=False)
            share_position_bias(self.encoder, self.encoder_position_bias, CompositeAttention)
            share_position_bias(self.decoder, self.decoder_position_bias, CausalSelfAttention)
        self.post_init()

    def get_encoder(self, modality=None):
        return CabertSourceEncoder(self)

    def get_input_embeddings(self):
        return self.source_table

    def target_embedding(self):
        return self.target_table if self.target_table is not None else self.source_table

    def embed(self, table, ids, mask):
        x = table(ids) * self.embed_scale
        if self.encoder_position_bias is not None:  # T5's positions: the attention biases, nothing here
            return self.dropout(x)
        return self.dropout(x + sinusoidal_positions(mask, self.config.model["hidden_size"], table.weight.dtype))

    def encode(self, input_ids, attention_mask=None, output_hidden_states=False):
        """source [B, S] -> memory [B, S, d] (BaseModelOutput)."""
        mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        x, states = self.encoder(self.embed(self.source_table, input_ids, mask), mask, bool(output_hidden_states))
        if self.encoder_top_attention is not None:
            x = self.encoder_top_attention(x, mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return BaseModelOutput(last_hidden_state=x, hidden_states=states)

    def decode(self, decoder_input_ids, decoder_mask, memory, memory_mask):
        """target_in [B, T] (BOS first) -> logits [B, T, V]."""
        x = self.embed(self.target_embedding(), decoder_input_ids, decoder_mask)
        for layer in self.decoder:
            x = layer(x, decoder_mask, memory, memory_mask)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if self.output_projection is not None:
            return self.output_projection(x)
        return torch.matmul(x, self.target_embedding().weight.t())

    def forward(self, input_ids=None, attention_mask=None, decoder_input_ids=None, decoder_attention_mask=None,
                encoder_outputs=None, labels=None, output_hidden_states=None, return_dict=None, **kwargs):
        if encoder_outputs is None:
            encoder_outputs = self.encode(input_ids, attention_mask, output_hidden_states)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
        memory = encoder_outputs.last_hidden_state
        memory_mask = (torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)
                       if attention_mask is None else attention_mask.bool())
        if decoder_input_ids is None and labels is not None:  # teacher forcing: BOS, then the targets shifted right
            shifted = labels[:, :-1].masked_fill(labels[:, :-1] == -100, 0)
            bos = torch.full_like(labels[:, :1], getattr(self.config, "decoder_start_token_id", None) or 2)
            decoder_input_ids = torch.cat([bos, shifted], 1)
        decoder_mask = (torch.ones_like(decoder_input_ids, dtype=torch.bool) if decoder_attention_mask is None
                        else decoder_attention_mask.bool())
        logits = self.decode(decoder_input_ids, decoder_mask, memory, memory_mask)
        loss = None
        if labels is not None:  # plain cross-entropy; cabert trains with label smoothing (seq2seq.label_smoothing)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return Seq2SeqLMOutput(loss=loss, logits=logits, encoder_last_hidden_state=memory,
                               encoder_hidden_states=encoder_outputs.hidden_states)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, encoder_outputs=None, **kwargs):
        # The whole prefix every step: the decoder is recomputed, nothing is cached.
        return {"decoder_input_ids": input_ids, "attention_mask": attention_mask, "encoder_outputs": encoder_outputs}
