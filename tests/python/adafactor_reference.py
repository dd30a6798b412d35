"""transformers' Adafactor (transformers.optimization.Adafactor) as the independent reference for cabert's
(lib/train/adafactor.h): run by tests/cli/adafactor_parity_test.sh, read by the AdafactorParity gtests.

  adafactor_reference.py OUT.safetensors

Writes, in float64: the initial parameters ("init/<name>"), the gradient of every step ("grad/<step>/<name>"),
the learning rate of every step ("lr/<step>", a schedule that changes at each step) and, for every case, each
parameter after each step ("<case>/<step>/<name>"). The parameters: a matrix, a 3-d tensor (factored over its last
two dimensions), a vector and a bias; the bias takes no weight decay (a group of its own, as cabert excludes
biases). The cases: T5's (parameter scale, no first moment), HF's fine-tuning advice (no parameter scale), and one
with a first moment, weight decay and a clip threshold the gradients exceed.
"""
import sys

import torch
from safetensors.torch import save_file
from transformers.optimization import Adafactor

STEPS = 4
SHAPES = {"matrix": (5, 3), "cube": (2, 4, 3), "vector": (6,), "bias": (3,)}
CASES = {
    "t5": dict(scale_parameter=True, beta1=None, weight_decay=0.0, clip_threshold=1.0),
    "unscaled": dict(scale_parameter=False, beta1=None, weight_decay=0.0, clip_threshold=1.0),
    "momentum": dict(scale_parameter=True, beta1=0.9, weight_decay=0.1, clip_threshold=0.5),
}


def main(out):
    generator = torch.Generator().manual_seed(7)
    init = {n: torch.randn(s, generator=generator, dtype=torch.float64) for n, s in SHAPES.items()}
    init["vector"] *= 1e-4  # below eps[1]: the step is scaled by 1e-3, not by its RMS
    grads = [{n: torch.randn(s, generator=generator, dtype=torch.float64) * (t + 1) for n, s in SHAPES.items()}
             for t in range(STEPS)]
    lrs = [1e-2 * (0.5 ** t) for t in range(STEPS)]
    tensors = {f"init/{n}": v.clone() for n, v in init.items()}
    for t in range(STEPS):
        tensors[f"lr/{t + 1}"] = torch.tensor(lrs[t], dtype=torch.float64)
        for n, g in grads[t].items():
            tensors[f"grad/{t + 1}/{n}"] = g.clone()
    for case, options in CASES.items():
        params = {n: torch.nn.Parameter(v.clone()) for n, v in init.items()}
        decayed = [p for n, p in params.items() if n != "bias"]
        groups = [{"params": decayed}, {"params": [params["bias"]], "weight_decay": 0.0}]
        optimizer = Adafactor(groups, lr=lrs[0], relative_step=False, warmup_init=False, decay_rate=-0.8,
                              eps=(1e-30, 1e-3), **options)
        for t in range(STEPS):
            for group in optimizer.param_groups:
                group["lr"] = lrs[t]
            for n, p in params.items():
                p.grad = grads[t][n].clone()
            optimizer.step()
            for n, p in params.items():
                tensors[f"{case}/{t + 1}/{n}"] = p.detach().clone()
    save_file({k: v.contiguous() for k, v in tensors.items()}, out)


if __name__ == "__main__":
    main(sys.argv[1])
