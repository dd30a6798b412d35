#!/usr/bin/env python3
"""Forward+backward timings of the public convolution/attention implementations that cabert's fused kernels
are compared with (issue 5), run on the same torch/LibTorch as cabert (the project's .venv).

Rows (public modules, imported from the installed packages, never copied):
  fairseq-dynamicconv-band    fairseq.modules.DynamicConv1dTBC, forward(x, unfold=False)  (_forward_expanded)
  fairseq-dynamicconv-unfold  fairseq.modules.DynamicConv1dTBC, forward(x, unfold=True)   (_forward_unfolded)
  fairseq-lightconv-band      fairseq.modules.LightweightConv1dTBC, forward(x, unfold=False) (its default)
  fairseq-lightconv-conv1d    fairseq.modules.LightweightConv1d (B x C x T, F.conv1d with groups=H)
  hf-convbert-selfattn        transformers ConvBertSelfAttention (SDConv + attention heads, head_ratio 2)
  torch-mha                   torch.nn.MultiheadAttention, H heads, need_weights=False (SDPA kernel)
  depthwise-conv1d            torch.nn.Conv1d(C, C, K, groups=C), for scale
Extra rows (only with --rows ... or --rows all):
  fairseq-lightconv-unfold    fairseq.modules.LightweightConv1dTBC, forward(x, unfold=True)
  fairseq-lightconv-cuda      fairseq.modules.lightconv_layer.LightconvLayer: fairseq's CUDA kernels (--device cuda;
                              the lightconv_cuda extension built from fairseq's source, K in 3,5,7,15,31,63,127,255)
  fairseq-dynamicconv-cuda    fairseq.modules.dynamicconv_layer.DynamicconvLayer (dynamicconv_cuda), likewise
  torch-mha-weights           torch.nn.MultiheadAttention with need_weights=True (the math path that returns
                              the averaged attention weights, the default call in PyTorch 1.x code)

With --device cuda every row runs on the GPU, timed as `cabert bench --device cuda` times its rows: CUDA events
on the current stream around each run, the device synchronised before it ("clock": "CUDA events"; the wall clock
until the run's work is done beside them, "wall_median_ms"); the peak extra memory is the CUDA caching
allocator's peak above what the inputs hold (torch.cuda.max_memory_allocated).

Every (row, T) case runs in a fresh child process by default (clean allocator, and a failed or killed case does
not take the table down). Peak extra memory is the kernel's peak RSS (VmHWM, reset through /proc/self/clear_refs
just before the first forward) minus the RSS at that point, after one untimed pass at T=32 has paged in the code
and initialised MKL/oneDNN. Install and usage: recipes/bench/README.md.
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

# OpenMP threads that busy-wait between parallel regions make runs 10-30x slower on a 2-core machine as soon
# as anything else runs; this must be in the environment before torch (libgomp) is loaded.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# transformers must never reach for the network here.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

DEFAULT_ROWS = [
    "fairseq-dynamicconv-band",
    "fairseq-dynamicconv-unfold",
    "fairseq-lightconv-band",
    "fairseq-lightconv-conv1d",
    "hf-convbert-selfattn",
    "torch-mha",
    "depthwise-conv1d",
]
EXTRA_ROWS = ["fairseq-lightconv-unfold", "torch-mha-weights", "fairseq-lightconv-cuda", "fairseq-dynamicconv-cuda"]
# The kernel sizes fairseq's generated CUDA kernels exist for (fairseq/modules/*_layer/cuda_function_gen.py).
FAIRSEQ_CUDA_KERNEL_SIZES = (3, 5, 7, 15, 31, 63, 127, 255)
ALL_ROWS = DEFAULT_ROWS + EXTRA_ROWS

FAIRSEQ_VERSION = "0.12.2"
PRETOUCH_T = 32


# ----------------------------------------------------------------------------------------------- fairseq
def fairseq_dir(explicit):
    """Directory of the `fairseq` package: --fairseq-src / $FAIRSEQ_SRC (a source tree or the package dir),
    an installed `fairseq` (located without importing it), or <venv>/src/fairseq-0.12.2 (README's layout)."""
    import importlib.util

    def package_dir(c):
        for d in (c, c / "fairseq"):
            if (d / "modules" / "dynamic_convolution.py").is_file():
                return d.resolve()
        return None

    for c, what in ((explicit, "--fairseq-src"), (os.environ.get("FAIRSEQ_SRC"), "$FAIRSEQ_SRC")):
        if c:  # given explicitly: use it or fail, never fall back silently
            d = package_dir(Path(c))
            if d is None:
                raise RuntimeError("%s=%s holds no fairseq/modules/dynamic_convolution.py" % (what, c))
            return d
    candidates = []
    try:
        spec = importlib.util.find_spec("fairseq")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(list(spec.submodule_search_locations)[0]))
    candidates.append(Path(sys.prefix) / "src" / f"fairseq-{FAIRSEQ_VERSION}")
    for c in candidates:
        d = package_dir(c)
        if d is not None:
            return d
    raise RuntimeError(
        "fairseq not found (looked in: %s); see recipes/bench/README.md" % ", ".join(str(c) for c in candidates)
    )


def load_fairseq(explicit_src, full_import):
    """Import fairseq's DynamicConv1dTBC, LightweightConv1dTBC and LightweightConv1d.

    With full_import, plain `import fairseq.modules`. By default the real files fairseq/modules/
    {dynamic_convolution,lightweight_convolution,unfold,fairseq_dropout}.py, fairseq/utils.py and
    fairseq/incremental_decoding_utils.py are imported unchanged, but fairseq/__init__.py and
    fairseq/modules/__init__.py are not executed: they import all of fairseq (hydra, omegaconf, every task and
    model), and on Python >= 3.11 that import fails in fairseq/dataclass/configs.py ("ValueError: mutable
    default <class 'fairseq.dataclass.configs.CommonConfig'> for field common is not allowed"). The two
    package objects are registered as empty packages whose __path__ is fairseq's real directories."""
    if full_import:
        import fairseq
        from fairseq.modules import DynamicConv1dTBC, LightweightConv1d, LightweightConv1dTBC

        where = str(Path(fairseq.__file__).parent)
        return (DynamicConv1dTBC, LightweightConv1dTBC, LightweightConv1d), {
            "fairseq": getattr(fairseq, "__version__", "?"),
            "fairseq_path": where,
            "fairseq_import": "full",
        }
    import importlib
    import types

    d = fairseq_dir(explicit_src)
    version = (d / "version.txt").read_text().strip() if (d / "version.txt").is_file() else "?"
    if "fairseq" not in sys.modules:
        pkg = types.ModuleType("fairseq")
        pkg.__path__ = [str(d)]
        pkg.__file__ = str(d / "__init__.py")
        pkg.__version__ = version
        sys.modules["fairseq"] = pkg
        mods = types.ModuleType("fairseq.modules")
        mods.__path__ = [str(d / "modules")]
        mods.__file__ = str(d / "modules" / "__init__.py")
        sys.modules["fairseq.modules"] = mods
        pkg.modules = mods
    dc = importlib.import_module("fairseq.modules.dynamic_convolution")
    lc = importlib.import_module("fairseq.modules.lightweight_convolution")
    return (dc.DynamicConv1dTBC, lc.LightweightConv1dTBC, lc.LightweightConv1d), {
        "fairseq": version,
        "fairseq_path": str(d),
        "fairseq_import": "modules-only (package __init__ bypassed)",
    }


# ----------------------------------------------------------------------------------------------- rows
class Unsupported(Exception):
    """A case the public module cannot run (reported as skipped, not as an error)."""


def quadratic_bytes(row, T, K, B, C, H):
    """Rough size of the largest tensors of a case (fp32, with their gradients and the copies autograd
    keeps), to skip cases that cannot fit instead of swapping or being killed."""
    f = 4
    if row in ("fairseq-dynamicconv-band", "fairseq-lightconv-band"):
        return 4 * B * H * T * (T + K - 1) * f
    if row in ("fairseq-dynamicconv-unfold", "fairseq-lightconv-unfold"):
        return 3 * T * B * C * K * f
    if row == "hf-convbert-selfattn":
        return 4 * B * (H // 2 or 1) * T * T * f + 3 * B * T * (C // 2) * K * f
    if row == "torch-mha-weights":
        return 4 * B * H * T * T * f
    return 8 * B * T * C * f


def load_fairseq_cuda_layer(row, fairseq_opts):
    """fairseq's LightconvLayer / DynamicconvLayer, whose import loads the compiled lightconv_cuda /
    dynamicconv_cuda extension; Unsupported when it was not built."""
    import importlib

    _, versions = load_fairseq(*fairseq_opts)  # registers fairseq's packages without running fairseq/__init__.py
    name = "lightconv" if row == "fairseq-lightconv-cuda" else "dynamicconv"
    try:
        module = importlib.import_module("fairseq.modules.%s_layer.%s_layer" % (name, name))
    except ImportError as e:
        raise Unsupported("%s_cuda is not built (%s): build fairseq/modules/%s_layer as recipes/bench/README.md "
                          "says under 'On a GPU' and put that folder on PYTHONPATH" % (name, e, name))
    return (module.LightconvLayer if name == "lightconv" else module.DynamicconvLayer), versions


def build_case(row, T, K, B, C, H, fairseq_opts, device="cpu"):
    """Return (module, input tensor, forward function) on `device`. Output has the input's shape."""
    import torch

    P = (K - 1) // 2  # centred padding (fairseq's encoder: K // 2 for odd K; the left part for even K)
    same = P if K % 2 == 1 else "same"
    versions = {}
    if row.startswith("fairseq-") and not row.endswith("-cuda"):
        (DynamicConv1dTBC, LightweightConv1dTBC, LightweightConv1d), versions = load_fairseq(*fairseq_opts)
    if row in ("fairseq-dynamicconv-band", "fairseq-dynamicconv-unfold"):
        m = DynamicConv1dTBC(C, kernel_size=K, padding_l=P, num_heads=H, weight_dropout=0.0, weight_softmax=True)
        unfold = row.endswith("unfold")
        x = torch.randn(T, B, C)
        fwd = lambda: m(x, unfold=unfold)  # noqa: E731
    elif row in ("fairseq-lightconv-band", "fairseq-lightconv-unfold"):
        m = LightweightConv1dTBC(C, kernel_size=K, padding_l=P, num_heads=H, weight_dropout=0.0,
                                 weight_softmax=True)
        unfold = row.endswith("unfold")
        x = torch.randn(T, B, C)
        fwd = lambda: m(x, unfold=unfold)  # noqa: E731
    elif row == "fairseq-lightconv-conv1d":
        m = LightweightConv1d(C, kernel_size=K, padding=same, num_heads=H, weight_softmax=True, weight_dropout=0.0)
        x = torch.randn(B, C, T)
        fwd = lambda: m(x)  # noqa: E731
    elif row == "hf-convbert-selfattn":
        import transformers
        from transformers import ConvBertConfig
        from transformers.models.convbert.modeling_convbert import ConvBertSelfAttention

        if K % 2 == 0:
            raise Unsupported("ConvBertSelfAttention needs an odd conv_kernel_size (its unfold pads (K-1)//2)")
        cfg = ConvBertConfig(hidden_size=C, num_attention_heads=H, head_ratio=2, conv_kernel_size=K,
                             attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
        m = ConvBertSelfAttention(cfg)
        x = torch.randn(B, T, C)
        # an attention mask of ones, in the additive form ConvBertModel hands to its layers
        mask = torch.zeros(B, 1, 1, T)
        fwd = lambda: m(x, attention_mask=mask)[0]  # noqa: E731
        versions = {"transformers": transformers.__version__,
                    "convbert_attention_heads": m.num_attention_heads}
    elif row in ("torch-mha", "torch-mha-weights"):
        m = torch.nn.MultiheadAttention(C, H, dropout=0.0)
        need = row == "torch-mha-weights"
        x = torch.randn(T, B, C)
        fwd = lambda: m(x, x, x, need_weights=need)[0]  # noqa: E731
    elif row == "depthwise-conv1d":
        m = torch.nn.Conv1d(C, C, K, groups=C, padding=same, bias=False)
        x = torch.randn(B, C, T)
        fwd = lambda: m(x)  # noqa: E731
    elif row in ("fairseq-lightconv-cuda", "fairseq-dynamicconv-cuda"):
        if not str(device).startswith("cuda"):
            raise Unsupported("fairseq's CUDA kernels run with --device cuda only")
        if K not in FAIRSEQ_CUDA_KERNEL_SIZES:
            raise Unsupported("fairseq's CUDA kernels exist for K in %s only" % (FAIRSEQ_CUDA_KERNEL_SIZES,))
        layer, versions = load_fairseq_cuda_layer(row, fairseq_opts)
        m = layer(C, kernel_size=K, padding_l=P, weight_softmax=True, num_heads=H, weight_dropout=0.0)
        x = torch.randn(T, B, C)
        fwd = lambda: m(x)  # noqa: E731
    else:
        raise ValueError("unknown row " + row)
    m.train()
    if str(device) != "cpu":
        m.to(device)
        x = x.to(device)
        if row == "hf-convbert-selfattn":
            mask = mask.to(device)
            fwd = lambda: m(x, attention_mask=mask)[0]  # noqa: E731
        else:
            fwd = _rebind(row, m, x, fwd)
    x.requires_grad_(True)
    return m, x, fwd, versions


def _rebind(row, m, x, fwd):
    """The forward of build_case's row again, on the moved input (the lambdas there closed over the CPU one)."""
    if row in ("fairseq-dynamicconv-band", "fairseq-dynamicconv-unfold", "fairseq-lightconv-band",
               "fairseq-lightconv-unfold"):
        unfold = row.endswith("unfold")
        return lambda: m(x, unfold=unfold)
    if row in ("torch-mha", "torch-mha-weights"):
        need = row == "torch-mha-weights"
        return lambda: m(x, x, x, need_weights=need)[0]
    return lambda: m(x)


# ----------------------------------------------------------------------------------------------- memory
def _status_kb(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------- one case
def run_case(row, T, K, a):
    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    res = {"row": row, "T": T, "K": K, "device": a.device}
    cuda = a.device.startswith("cuda")
    if cuda:
        # The timing events record on the current stream of the current device: a.device's ("cuda" alone is
        # the current device already; set_device takes only an indexed one).
        if torch.device(a.device).index is not None:
            torch.cuda.set_device(a.device)

    def sync():
        if cuda:
            torch.cuda.synchronize(a.device)

    est = quadratic_bytes(row, T, K, a.batch, a.channels, a.heads)
    if a.max_gb > 0 and est > a.max_gb * 2**30:
        res["skipped"] = "est. %.1f GiB > --max-gb %g" % (est / 2**30, a.max_gb)
        return res
    try:
        fs = (a.fairseq_src, a.fairseq_full_import)
        # One untimed pass of the same row at a short length first: it pages in the code and initialises
        # MKL/oneDNN, so that the peak below is the case's own memory and not these one-time costs.
        # (With a dense upstream gradient like the timed runs: sum()'s expanded one takes other kernels.)
        m, x, fwd, _ = build_case(row, PRETOUCH_T, K, a.batch, a.channels, a.heads, fs, a.device)
        for _ in range(2):
            y = fwd()
            y.backward(torch.randn_like(y))
        del m, x, fwd, y
        torch.manual_seed(0)
        m, x, fwd, versions = build_case(row, T, K, a.batch, a.channels, a.heads, fs, a.device)
        res.update(versions)
        params = [p for p in m.parameters() if p.requires_grad]
        g = torch.randn_like(x)  # random upstream gradient (every row's output has its input's shape)
        sync()
        can_reset = reset_peak_rss()
        rss0 = _status_kb("VmRSS")
        if cuda:
            torch.cuda.reset_peak_memory_stats(a.device)
            cuda0 = torch.cuda.memory_allocated(a.device)
        times, walls = [], []
        for i in range(a.warmup + a.repeats):
            x.grad = None
            for p in params:
                p.grad = None
            sync()
            if cuda:
                start_event = torch.cuda.Event(enable_timing=True)
                end_event = torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            if cuda:
                start_event.record()
            y = fwd()
            y.backward(g)
            if cuda:
                end_event.record()
                end_event.synchronize()
            t1 = time.perf_counter()
            if i == 0 and y.shape != x.shape:
                raise RuntimeError("output shape %s != input shape %s" % (tuple(y.shape), tuple(x.shape)))
            del y
            if i >= a.warmup:
                walls.append((t1 - t0) * 1e3)
                times.append(start_event.elapsed_time(end_event) if cuda else walls[-1])
        hwm = _status_kb("VmHWM")
        if cuda:
            res["peak_extra_mib"] = round((torch.cuda.max_memory_allocated(a.device) - cuda0) / 2**20, 1)
        elif can_reset and rss0 is not None and hwm is not None:
            res["peak_extra_mib"] = round(max(0, hwm - rss0) / 1024.0, 1)
        res["times_ms"] = [round(t, 3) for t in times]
        res.update(summarize(times))
        res["clock"] = "CUDA events" if cuda else "wall clock"
        res["wall_median_ms"] = round(quantile(sorted(walls), 0.5), 3)
    except Unsupported as e:
        res["skipped"] = str(e)
    except Exception as e:  # noqa: BLE001 - report any failure as this case's result
        res["error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160] if str(e) else "")
    return res


def quantile(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    pos = (len(sorted_vals) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(times):
    s = sorted(times)
    return {"median_ms": round(quantile(s, 0.5), 3), "p25_ms": round(quantile(s, 0.25), 3),
            "p75_ms": round(quantile(s, 0.75), 3), "min_ms": round(s[0], 3), "max_ms": round(s[-1], 3)}


def run_isolated(row, T, K, a):
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", json.dumps([row, T, K]),
           "--batch", str(a.batch), "--channels", str(a.channels), "--heads", str(a.heads),
           "--threads", str(a.threads), "--repeats", str(a.repeats), "--warmup", str(a.warmup),
           "--max-gb", str(a.max_gb), "--device", a.device]
    if a.fairseq_src:
        cmd += ["--fairseq-src", a.fairseq_src]
    if a.fairseq_full_import:
        cmd += ["--fairseq-full-import"]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=a.case_timeout if a.case_timeout > 0 else None)
    except subprocess.TimeoutExpired:
        return {"row": row, "T": T, "K": K, "error": "timeout after %g s (--case-timeout)" % a.case_timeout}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:160]
    return {"row": row, "T": T, "K": K, "error": "child exited %d: %s" % (p.returncode, tail)}


# ----------------------------------------------------------------------------------------------- header
def machine_facts(threads):
    import torch

    cfg = torch.__config__.show()
    par = torch.__config__.parallel_info()

    def setting(name):
        m = re.search(r"\b%s=([^,\s]*)" % re.escape(name), cfg)
        return m.group(1) if m else "?"

    def version_of(pattern):
        m = re.search(pattern, cfg)
        return m.group(1) if m else "?"

    def line_with(text, src):
        for line in src.splitlines():
            if text in line:
                return line.strip().lstrip("- ").strip()
        return "?"

    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        cpu = platform.processor() or "?"
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "?"
    facts = {
        "torch": torch.__version__,
        "blas": setting("BLAS_INFO"),
        "lapack": setting("LAPACK_INFO"),
        "use_openmp": setting("USE_OPENMP"),
        "openmp": version_of(r"OpenMP (\d+)"),
        "mkl": version_of(r"Math Kernel Library Version (\S+)"),
        "onednn": version_of(r"MKL-DNN (v[\d.]+)"),
        "parallel_backend": line_with("ATen parallel backend", par).split(":", 1)[-1].strip(),
        "cpu_capability": line_with("CPU capability", cfg).split(":", 1)[-1].strip(),
        "threads": threads,
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
        # as cabert bench's BenchEnvironment.allocator: a caching malloc moves these timings 2-3x
        "allocator": ("LD_PRELOAD=" + os.environ["LD_PRELOAD"]) if os.environ.get("LD_PRELOAD") else " ".join(
            ["glibc malloc"] + sorted(k + "=" + v for k, v in os.environ.items()
                                      if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", ""),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "loadavg_at_start": load,
        "python": platform.python_version(),
    }
    try:
        commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short",
                                 "HEAD"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        facts["git_commit"] = commit or "?"
    except OSError:
        facts["git_commit"] = "?"
    return facts


def header_line(facts, versions, a):
    blas = "BLAS %s" % facts["blas"]
    if facts["blas"] == "mkl" and facts["mkl"] != "?":
        blas += " %s" % facts["mkl"]
    parts = ["torch %s" % facts["torch"], "%s, LAPACK %s, oneDNN %s" % (blas, facts["lapack"], facts["onednn"]),
             "OpenMP %s (USE_OPENMP=%s), ATen parallel backend %s" % (facts["openmp"], facts["use_openmp"],
                                                                      facts["parallel_backend"]),
             "CPU capability %s" % facts["cpu_capability"], "threads %d" % facts["threads"],
             "OMP_WAIT_POLICY=%s" % facts["OMP_WAIT_POLICY"], "allocator: %s" % facts["allocator"], "CPU %s x%s" % (facts["cpu"], facts["cores"]),
             "loadavg %s" % facts["loadavg_at_start"], "python %s" % facts["python"]]
    for k in ("transformers", "fairseq"):
        if k in versions:
            parts.append("%s %s" % (k, versions[k]))
    if "fairseq_import" in versions:
        parts.append("fairseq import: " + versions["fairseq_import"])
    parts.append("B=%d C=%d H=%d fp32, fwd+bwd, %d repeats after %d warm-up" % (a.batch, a.channels, a.heads,
                                                                             a.repeats, a.warmup))
    parts.append("git %s" % facts["git_commit"])
    return "; ".join(parts)


# ----------------------------------------------------------------------------------------------- output
def fmt_ms(v):
    return "%.1f" % v if v >= 10 else "%.2f" % v


def cell(r, short=False):
    for k in ("skipped", "error"):
        if k in r:
            return k if short else "%s (%s)" % (k, r[k])
    return None


def print_table(results, facts, versions, a):
    head = header_line(facts, versions, a)
    if a.format == "json":
        print(json.dumps({"machine": facts, "versions": versions, "settings": {
            "batch": a.batch, "channels": a.channels, "heads": a.heads, "threads": a.threads,
            "repeats": a.repeats, "warmup": a.warmup, "dtype": "float32", "pass": "forward+backward",
            "device": a.device},
            "header": head, "results": results}, indent=1))
        return
    if a.layout == "wide":
        seqs = sorted({r["T"] for r in results})
        keys = []
        for r in results:
            if (r["row"], r["K"]) not in keys:
                keys.append((r["row"], r["K"]))
        cols = ["row", "K"] + ["T=%d median ms" % t for t in seqs]
        lines = []
        for row, K in keys:
            vals = []
            for t in seqs:
                rr = [r for r in results if r["row"] == row and r["K"] == K and r["T"] == t]
                if not rr:
                    vals.append("")
                else:
                    vals.append(cell(rr[0], short=True) or fmt_ms(rr[0]["median_ms"]))
            lines.append([row, str(K)] + vals)
        notes = ["%s T=%d K=%d: %s" % (r["row"], r["T"], r["K"], cell(r)) for r in results if cell(r)]
    else:
        cols = ["row", "T", "K", "median ms", "min ms", "max ms", "p25 ms", "p75 ms", "peak extra MiB"]
        lines, notes = [], []
        for r in results:
            c = cell(r)
            if c:
                lines.append([r["row"], str(r["T"]), str(r["K"]), c, "", "", "", "", ""])
            else:
                mem = r.get("peak_extra_mib")
                lines.append([r["row"], str(r["T"]), str(r["K"]), fmt_ms(r["median_ms"]), fmt_ms(r["min_ms"]),
                              fmt_ms(r["max_ms"]), fmt_ms(r["p25_ms"]), fmt_ms(r["p75_ms"]),
                              "" if mem is None else "%.0f" % mem])
    if a.format == "tsv":
        print("# " + head)
        print("\t".join(cols))
        for ln in lines:
            print("\t".join(ln))
        for n in notes:
            print("# " + n)
    else:
        print(head)
        print()
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join("---" for _ in cols) + "|")
        for ln in lines:
            print("| " + " | ".join(ln) + " |")
        if notes:
            print()
            for n in notes:
                print("- " + n)


# ----------------------------------------------------------------------------------------------- main
def int_list(s):
    try:
        vals = [int(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected a comma list of integers: %r" % s)
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError("expected positive integers: %r" % s)
    return vals


def row_list(s):
    if s == "all":
        return list(ALL_ROWS)
    rows = [r.strip() for r in s.split(",") if r.strip()]
    bad = [r for r in rows if r not in ALL_ROWS]
    if bad:
        raise argparse.ArgumentTypeError("unknown row(s) %s; known: %s, or all" % (", ".join(bad), ", ".join(ALL_ROWS)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int_list, default=[128, 512, 2048], help="sequence lengths T (default 128,512,2048)")
    ap.add_argument("--kernel", type=int_list, default=[17], help="kernel sizes K, comma list (default 17)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per case (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed repeats first (default 1)")
    ap.add_argument("--rows", type=row_list, default=list(DEFAULT_ROWS),
                    help="comma list of row ids, or 'all' (default: %s)" % ",".join(DEFAULT_ROWS))
    ap.add_argument("--format", choices=["md", "tsv", "json"], default="md")
    ap.add_argument("--layout", choices=["long", "wide"], default="long",
                    help="md/tsv: one line per case (long) or rows x T medians like issue 5's table (wide)")
    ap.add_argument("--max-gb", type=float, default=12.0,
                    help="skip a case whose estimated largest tensors exceed this many GiB (0: never skip)")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="run every case in this process instead of a child process per case")
    ap.add_argument("--case-timeout", type=float, default=0, help="seconds per isolated case (0: none)")
    ap.add_argument("--fairseq-src", default=None,
                    help="fairseq source tree or package dir (default: $FAIRSEQ_SRC, an installed fairseq, or "
                         "<venv>/src/fairseq-%s)" % FAIRSEQ_VERSION)
    ap.add_argument("--fairseq-full-import", action="store_true",
                    help="import fairseq the ordinary way (`from fairseq.modules import ...`); fails on Python 3.11")
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    ap.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.threads < 1 or a.repeats < 1 or a.warmup < 0:
        ap.error("--threads and --repeats must be >= 1, --warmup >= 0")
    if a.channels % a.heads:
        ap.error("--channels must be a multiple of --heads")

    if a._child is not None:
        row, T, K = json.loads(a._child)
        print(json.dumps(run_case(row, T, K, a)))
        sys.stdout.flush()
        return 0

    import torch

    torch.set_num_threads(a.threads)
    facts = machine_facts(a.threads)
    results = []
    for K in a.kernel:
        for row in a.rows:
            for T in a.seq:
                r = run_isolated(row, T, K, a) if a.isolate else run_case(row, T, K, a)
                results.append(r)
                state = cell(r) or "median %s ms" % fmt_ms(r["median_ms"])
                print("[public_baselines] %s T=%d K=%d: %s" % (row, T, K, state), file=sys.stderr, flush=True)
    versions = {}
    for r in results:
        for k in ("transformers", "fairseq", "fairseq_path", "fairseq_import"):
            if k in r:
                versions[k] = r[k]
        r.pop("fairseq_path", None)
        r.pop("fairseq_import", None)
    print_table(results, facts, versions, a)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
