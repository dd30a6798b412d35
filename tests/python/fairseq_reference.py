"""fairseq 0.12.2's own modules on fixed random weights and inputs, written to a safetensors file that
tests/unit/models/fairseq_parity_test.cc reads: cabert's conv blocks and attention must give these outputs.

Usage: fairseq_reference.py SDIST.tar.gz OUT.safetensors   (exit 77 when the sdist is absent: CTest SKIP)

The sdist is PyPI's fairseq-0.12.2.tar.gz (scripts/setup.sh fetches it into build/fairseq-sdist when online:
`pip download fairseq==0.12.2 --no-deps --no-binary :all: --no-build-isolation`). Nothing of it is copied into
the project: the needed files are extracted into a temporary directory at run time and imported from there.
fairseq/__init__.py (hydra, omegaconf, the task and model registries) and fairseq/modules/__init__.py (every
module, CUDA extensions included) are NOT run: `fairseq` and `fairseq.modules` are empty stub packages whose
__path__ points into the extracted tree, so `import fairseq.modules.lightweight_convolution` executes that file
and the files it imports: fairseq/utils.py (softmax, get/set_incremental_state; torch and the standard library
only), fairseq/incremental_decoding_utils.py (with_incremental_state), fairseq/modules/fairseq_dropout.py,
unfold.py, quant_noise.py and multihead_attention.py (xformers absent: its ImportError branch).

Everything is float64, eval mode (dropout and DropConnect off). fairseq's utils.softmax computes in float32
whatever its input (LightweightConv1dTBC's kernel and MultiheadAttention's weights go through it), so those
outputs carry float32 rounding and the C++ side compares them to 1e-6; DynamicConv1dTBC (F.softmax in float64)
to 1e-10.
"""
import importlib
import os
import sys
import tarfile
import tempfile
import types

FILES = [
    "fairseq/utils.py",
    "fairseq/incremental_decoding_utils.py",
    "fairseq/modules/fairseq_dropout.py",
    "fairseq/modules/unfold.py",
    "fairseq/modules/quant_noise.py",
    "fairseq/modules/lightweight_convolution.py",
    "fairseq/modules/dynamic_convolution.py",
    "fairseq/modules/multihead_attention.py",
]


def import_fairseq_modules(sdist, root):
    prefix = "fairseq-0.12.2/"
    with tarfile.open(sdist) as tar:
        for name in FILES:
            member = tar.getmember(prefix + name)
            member.name = name
            tar.extract(member, root)
    for package in ("fairseq", "fairseq.modules"):
        stub = types.ModuleType(package)
        stub.__path__ = [os.path.join(root, *package.split("."))]
        sys.modules[package] = stub
    sys.modules["fairseq"].modules = sys.modules["fairseq.modules"]
    return {
        name: importlib.import_module("fairseq.modules." + name)
        for name in ("lightweight_convolution", "dynamic_convolution", "multihead_attention")
    }


def main():
    if len(sys.argv) != 3:
        print("usage: fairseq_reference.py SDIST.tar.gz OUT.safetensors", file=sys.stderr)
        return 2
    sdist, out_path = sys.argv[1], sys.argv[2]
    if not os.path.exists(sdist):
        print(f"fairseq_reference: {sdist} absent (scripts/setup.sh fetches it when online); skipped")
        return 77
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(1234)
    torch.set_default_dtype(torch.float64)
    with tempfile.TemporaryDirectory() as root:
        fs = import_fairseq_modules(sdist, root)
        tensors = {}
        T, B, C, H, K = 7, 2, 8, 2, 5
        x = torch.randn(T, B, C)  # fairseq's T x B x C
        lengths = [T, 4]
        pad = torch.zeros(B, T, dtype=torch.bool)  # fairseq: True = padding
        pad[1, lengths[1]:] = True
        x_masked = x.masked_fill(pad.t().unsqueeze(2), 0)  # as LightConvEncoderLayer masks before the conv
        tensors["input"] = x.transpose(0, 1).contiguous()  # cabert's B x T x C
        tensors["pad"] = pad.to(torch.uint8)

        def conv_case(name, module, incremental):
            module.eval()
            with torch.no_grad():
                if incremental:  # causal, one position at a time with fairseq's input buffer
                    state = {}
                    steps = [module(x[t:t + 1], incremental_state=state) for t in range(T)]
                    tensors[name + ".steps"] = torch.cat(steps, 0).transpose(0, 1).contiguous()
                    full = module(x)
                else:
                    full = module(x_masked)
            tensors[name + ".output"] = full.transpose(0, 1).contiguous()

        light_mod = fs["lightweight_convolution"]
        dyn_mod = fs["dynamic_convolution"]
        for causal in (False, True):
            tag = "causal" if causal else "centred"
            padding = K - 1 if causal else K // 2
            light = light_mod.LightweightConv1dTBC(C, K, padding_l=padding, num_heads=H, weight_softmax=True,
                                                   weight_dropout=0.1)
            torch.nn.init.normal_(light.weight)
            tensors[f"lightweight.{tag}.weight"] = light.weight.detach().view(H, K).clone()
            conv_case(f"lightweight.{tag}", light, causal)
            dynamic = dyn_mod.DynamicConv1dTBC(C, K, padding_l=padding, num_heads=H, weight_softmax=True,
                                               weight_dropout=0.1)
            tensors[f"dynamic.{tag}.kernel_projection"] = dynamic.weight_linear.weight.detach().clone()
            conv_case(f"dynamic.{tag}", dynamic, causal)

        mha_mod = fs["multihead_attention"]
        S = 6
        memory = torch.randn(S, B, C)
        memory_pad = torch.zeros(B, S, dtype=torch.bool)
        memory_pad[1, 3:] = True
        tensors["memory"] = memory.transpose(0, 1).contiguous()
        tensors["memory_pad"] = memory_pad.to(torch.uint8)

        def attention_weights(name, mha):
            for part in ("q_proj", "k_proj", "v_proj", "out_proj"):
                linear = getattr(mha, part)
                tensors[f"{name}.{part}.weight"] = linear.weight.detach().clone()
                tensors[f"{name}.{part}.bias"] = torch.randn(C) * 0.1
                with torch.no_grad():
                    linear.bias.copy_(tensors[f"{name}.{part}.bias"])

        with torch.no_grad():
            encoder_self = mha_mod.MultiheadAttention(C, H, dropout=0.1, self_attention=True).eval()
            attention_weights("self_attention", encoder_self)
            out, _ = encoder_self(query=x, key=x, value=x, key_padding_mask=pad)
            tensors["self_attention.output"] = out.transpose(0, 1).contiguous()

            causal_self = mha_mod.MultiheadAttention(C, H, dropout=0.1, self_attention=True).eval()
            attention_weights("causal_attention", causal_self)
            future = torch.triu(torch.full((T, T), float("-inf")), 1)
            out, _ = causal_self(query=x, key=x, value=x, attn_mask=future)
            tensors["causal_attention.output"] = out.transpose(0, 1).contiguous()
            state = {}
            steps = [causal_self(query=x[t:t + 1], key=x[t:t + 1], value=x[t:t + 1], incremental_state=state)[0]
                     for t in range(T)]
            tensors["causal_attention.steps"] = torch.cat(steps, 0).transpose(0, 1).contiguous()

            cross = mha_mod.MultiheadAttention(C, H, dropout=0.1, encoder_decoder_attention=True).eval()
            attention_weights("cross_attention", cross)
            out, _ = cross(query=x, key=memory, value=memory, key_padding_mask=memory_pad, static_kv=True)
            tensors["cross_attention.output"] = out.transpose(0, 1).contiguous()
            state = {}
            steps = [cross(query=x[t:t + 1], key=memory, value=memory, key_padding_mask=memory_pad,
                           incremental_state=state, static_kv=True)[0] for t in range(T)]
            tensors["cross_attention.steps"] = torch.cat(steps, 0).transpose(0, 1).contiguous()

    save_file({k: v.contiguous() for k, v in tensors.items()}, out_path)
    print(f"fairseq_reference: {len(tensors)} tensors -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
