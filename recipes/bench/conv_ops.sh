#!/usr/bin/env bash
# Issue 5's comparison in one run: cabert's fused and reference convolution ops (cabert bench --op) and the
# public implementations (fairseq, HF ConvBERT, torch; public_baselines.py) on the same torch/LibTorch, the
# same BLAS and the same threads, back to back, joined into one table by compare.py.
#
#   bash recipes/bench/conv_ops.sh [OUT_DIR]        (default out/bench-conv-ops)
#
# Needs a built cabert (scripts/setup.sh) and the public packages (recipes/bench/README.md, "Install").
# Environment: SEQS (128,512,2048,8192), ATTENTION_SEQS (128,512,2048), KERNELS (17), THREADS (2), REPEATS (5),
# CABERT_BUILD_DIR (build), DEVICE (cpu; cuda or cuda:N runs every row on that GPU and adds fairseq's own CUDA
# kernels, which exist for K in 3,5,7,15,31,63,127,255: use e.g. KERNELS=15,31), ROWS (all: public_baselines.py's
# rows, comma separated), PYTHON (.venv/bin/python; scripts/gpu_check.sh passes the GPU machine's python3),
# WARMUP (1: untimed runs before the repeats), TARGET (5: the speed-up compare.py marks as met, issue 5's on the
# CPU; issue 18's on a GPU is 2x fairseq's CUDA kernels).
# Measure on an otherwise idle machine: both tools print the load average they started with.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/bench-conv-ops}
seqs=${SEQS:-128,512,2048,8192}
attention_seqs=${ATTENTION_SEQS:-128,512,2048}
kernels=${KERNELS:-17}
threads=${THREADS:-2}
repeats=${REPEATS:-5}
warmup=${WARMUP:-1}
target=${TARGET:-5}
cabert=${CABERT_BUILD_DIR:-build}/bin/cabert
python=${PYTHON:-.venv/bin/python}
rows=${ROWS:-all}
device=${DEVICE:-cpu}
shape=(--batch 8 --channels 256 --heads 4)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$out"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
set -x
"$cabert" -q --threads "$threads" bench --op lightconv,dynamicconv,sdconv,sdconv-branch,depthwise \
  --seq "$seqs" --kernel "$kernels" "${shape[@]}" --backward --repeats "$repeats" --warmup "$warmup" \
  --device "$device" --format json -o "$out/cabert-conv.bench" > "$out/cabert.jsonl"
# Blocks with attention heads hold B x heads x T x T scores: up to ATTENTION_SEQS only (T=8192 needs > 24 GiB).
"$cabert" -q --threads "$threads" bench --op convbert-attention,attention \
  --seq "$attention_seqs" --kernel "$kernels" "${shape[@]}" --backward --repeats "$repeats" --warmup "$warmup" \
  --device "$device" --format json -o "$out/cabert-attention.bench" >> "$out/cabert.jsonl"
"$python" recipes/bench/public_baselines.py --seq "$seqs" --kernel "$kernels" "${shape[@]}" \
  --threads "$threads" --repeats "$repeats" --warmup "$warmup" --rows "$rows" --device "$device" --format json \
  > "$out/public.json"
"$python" recipes/bench/compare.py "$out/cabert.jsonl" "$out/public.json" --target "$target" | tee "$out/comparison.md"
