#!/usr/bin/env python3
"""Joins one run of `cabert bench --op ... --format json` (JSON lines) with one run of public_baselines.py
--format json into the table of issue 5: per op and length, cabert's fused and reference paths, their ratio,
the fastest public implementation of the same op on the same torch, and fused vs that row (marked against
the target for the targeted ops and lengths); then the peak memory of the fused path along T (linear growth
means MiB / T stays flat). The table names the clocks both sides were timed by (on CUDA: events, both), and
says so when they differ (records of an older cabert or script: the wall clock, synchronised).

Usage: compare.py CABERT_JSONL PUBLIC_JSON [--target 5]
"""

import argparse
import json
import sys


def bad_input(message):
    """Bad input files: a sentence naming the file (and line) on stderr, exit code 3 as cabert's."""
    print(f"compare.py: {message}", file=sys.stderr)
    sys.exit(3)

# cabert op -> public rows that implement the same computation (issue 5's table).
PUBLIC_ROWS = {
    # (the -cuda rows: fairseq's own CUDA kernels, in a DEVICE=cuda run)
    "lightconv": ["fairseq-lightconv-band", "fairseq-lightconv-unfold", "fairseq-lightconv-conv1d",
                  "fairseq-lightconv-cuda"],
    "dynamicconv": ["fairseq-dynamicconv-band", "fairseq-dynamicconv-unfold", "fairseq-dynamicconv-cuda"],
    # HF has no SDConv module of its own: its self-attention block (SDConv + H/2 attention heads) is the
    # issue's SDConv row. convbert-attention is cabert's block of exactly that scope.
    "sdconv": ["hf-convbert-selfattn"],
    "sdconv-branch": ["hf-convbert-selfattn"],
    "convbert-attention": ["hf-convbert-selfattn"],
    "depthwise": ["depthwise-conv1d"],
    "attention": ["torch-mha", "torch-mha-weights"],
}


def older_clock(record):
    """The clock of a record from before records named theirs: the wall clock, synchronised on CUDA."""
    return "wall clock, synchronised" if str(record.get("device", "")).startswith("cuda") else "wall clock"


def load_cabert(path, clocks):
    rows = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                bad_input(f"{path}:{number}: expected one JSON bench record per line ({e})")
            if r.get("kind") != "op":
                continue
            clocks.add(r["timing"].get("clock") or older_clock(r))
            key = (r["op"], int(r["seq"]), int(r["kernel"]))
            rows.setdefault(key, {})[r["kernels"]] = {
                "ms": r["timing"]["median_ms"],
                "mib": int(r["timing"].get("peak_extra_bytes", 0)) / 2**20,
            }
    return rows


def load_public(path, clocks):
    try:
        with open(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        bad_input(f"{path}: expected the JSON output of public_baselines.py --format json ({e})")
    out = {}
    for r in data.get("results", []):
        if r.get("median_ms") is not None:
            clocks.add(r.get("clock") or older_clock(r))
            out[(r["row"], int(r["T"]), int(r["K"]))] = r["median_ms"]
    return data.get("header", ""), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cabert_jsonl")
    ap.add_argument("public_json")
    ap.add_argument("--target", type=float, default=5.0, help="speed-up to mark as met (issue 5: 5x)")
    ap.add_argument("--target-ops", default="lightconv,dynamicconv,sdconv",
                    help="ops whose speed-ups are marked against --target (issue 5: these three)")
    ap.add_argument("--target-seqs", default="512,2048", help="lengths whose speed-ups are marked (512,2048)")
    a = ap.parse_args()
    cabert_clocks, public_clocks = set(), set()
    cabert = load_cabert(a.cabert_jsonl, cabert_clocks)
    header, public = load_public(a.public_json, public_clocks)
    print(f"public rows: {header}\n")
    print(f"clocks: cabert {', '.join(sorted(cabert_clocks)) or '-'}; public {', '.join(sorted(public_clocks)) or '-'}"
          + ("" if cabert_clocks == public_clocks or not public_clocks else
             " (they differ: the ratios compare times read off different clocks)") + "\n")
    print("| op | T | K | fused ms | reference ms | fused vs reference | fastest public row | public ms "
          "| fused vs public | fused peak MiB | reference peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    target_ops = set(a.target_ops.split(","))
    target_seqs = {int(t) for t in a.target_seqs.split(",")}
    for (op, T, K) in sorted(cabert, key=lambda k: (list(PUBLIC_ROWS).index(k[0]) if k[0] in PUBLIC_ROWS else 99,
                                                     k[2], k[1])):
        targeted = op in target_ops and T in target_seqs
        mark = lambda ratio: f"{ratio:.1f}x" + ((" ✓" if ratio >= a.target else " ✗") if targeted else "")
        paths = cabert[(op, T, K)]
        fused = paths.get("fused") or paths.get("aten")
        ref = paths.get("reference")
        candidates = [(public[(row, T, K)], row) for row in PUBLIC_ROWS.get(op, []) if (row, T, K) in public]
        best = min(candidates) if candidates else None
        cells = [op, str(T), str(K), f"{fused['ms']:.2f}",
                 f"{ref['ms']:.2f}" if ref else "-",
                 mark(ref["ms"] / fused["ms"]) if ref else "-",
                 best[1] if best else "-", f"{best[0]:.2f}" if best else "-",
                 mark(best[0] / fused["ms"]) if best else "-",
                 f"{fused['mib']:.1f}", f"{ref['mib']:.1f}" if ref else "-"]
        print("| " + " | ".join(cells) + " |")

    print("\nPeak extra memory of the fused path per 1,000 positions (MiB; flat along T = linear in T):\n")
    lengths = sorted({T for (_, T, _) in cabert})
    print("| op | K | " + " | ".join(f"T={T}" for T in lengths) + " |")
    print("|---|---:|" + "---:|" * len(lengths))
    for op in PUBLIC_ROWS:
        for K in sorted({k for (o, _, k) in cabert if o == op}):
            cells = []
            for T in lengths:
                fused = cabert.get((op, T, K), {}).get("fused") or cabert.get((op, T, K), {}).get("aten")
                cells.append(f"{fused['mib'] / T * 1000:.1f}" if fused else "-")
            if any(c != "-" for c in cells):
                print(f"| {op} | {K} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
