#!/usr/bin/env bash
# Issue 16's measurements in one run: composite attention (every relative term) through the fused tiled kernel
# and the plain-ATen reference, torch SDPA on plain attention, and the unfused plain attention, forward +
# backward over T = 128 .. 8192 with peak memory (and T = 16384 at B = 1, fused only); then model training
# steps: bert-small-composite and convbert-small with both kernel paths, optionally an earlier cabert binary
# (BASELINE_CABERT) on the same shapes, and HF ConvBertForMaskedLM on an export of the same convbert-small.
#
#   bash recipes/bench/attention.sh [OUT_DIR]          (default out/bench-attention)
#
# Needs a built cabert and, for the HF row, transformers in .venv (recipes/bench/requirements.txt).
# Environment: SEQS (128,512,1024,2048), LONG_SEQS (4096,8192), THREADS (2), REPEATS (3), CABERT_BUILD_DIR
# (build), BASELINE_CABERT (unset: no earlier-binary rows), PARTS (ops,models: which halves run), DEVICE (cpu;
# cuda or cuda:N runs every row there, cabert's and HF's timed by CUDA events), AMP (set: the model rows again
# under bfloat16 autocast, cabert's --amp and HF's torch.autocast), PYTHON (.venv/bin/python). Measure on an
# otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/bench-attention}
seqs=${SEQS:-128,512,1024,2048}
long_seqs=${LONG_SEQS:-4096,8192}
threads=${THREADS:-2}
repeats=${REPEATS:-3}
cabert=${CABERT_BUILD_DIR:-build}/bin/cabert
baseline=${BASELINE_CABERT:-}
python=${PYTHON:-.venv/bin/python}
parts=${PARTS:-ops,models}
device=${DEVICE:-cpu}
precisions=("")
[ -n "${AMP:-}" ] && precisions+=(--amp)
shape=(--batch 8 --channels 256 --heads 4 --kernel 17 --device "$device")
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$out"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
set -x
: > "$out/ops.md"
: > "$out/ops-long.md"
: > "$out/ops-16k.md"
if [[ ",$parts," == *,ops,* ]]; then
  # Ops: the reference holds several B x H x T x T tensors, so both paths run up to SEQS, the fused one beyond.
  "$cabert" -q --threads "$threads" bench --op composite-attention,sdpa,attention --seq "$seqs" "${shape[@]}" \
    --backward --repeats "$repeats" --warmup 1 -o "$out/ops.bench" > "$out/ops.md"
  "$cabert" -q --threads "$threads" bench --op composite-attention,sdpa --kernels fused --seq "$long_seqs" \
    "${shape[@]}" --backward --repeats "$repeats" --warmup 1 -o "$out/ops-long.bench" > "$out/ops-long.md"
  "$cabert" -q --threads "$threads" bench --op composite-attention,sdpa --kernels fused --seq 16384 --batch 1 \
    --channels 256 --heads 4 --kernel 17 --device "$device" --backward --repeats 1 --warmup 0 -o "$out/ops-16k.bench" \
    > "$out/ops-16k.md"
fi
: > "$out/models.md"
: > "$out/hf-convbert.jsonl"
if [[ ",$parts," == *,models,* ]]; then
  # Models: a convbert-small checkpoint (one step on the shipped sample) gives the HF export its exact config;
  # every model row then uses its vocabulary size.
  work="$out/convbert-small"
  rm -rf "$work"
  mkdir -p "$work"
  data=recipes/quickstart/data
  "$cabert" -q tokenize train -i "$data/SST-2-unlabeled/sentences.txt" --vocab-size 4000 --lowercase \
    --model-prefix "$work/tokenizer"
  "$cabert" -q build-corpus -m "$work/tokenizer.model" -i "$data/SST-2-unlabeled/sentences.txt" --max-length 64 \
    -o "$work/corpus"
  "$cabert" -q pretrain --preset convbert-small --set max_length=512 --corpus "$work"/corpus* --model-dir "$work/pt" \
    --steps 1 --batch-size 8
  "$cabert" -q export --model "$(ls "$work"/pt/checkpoint-*.cabert | tail -n 1)" -o "$work/hf"
  vocab=$("$python" -c "import json, sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$work/hf/config.json")
  for precision in "${precisions[@]}"; do
    for binary in "$cabert" $baseline; do
      # shellcheck disable=SC2086  # $precision: nothing, or --amp
      "$binary" -q --threads "$threads" bench --model bert-small-composite --set max_length=512 \
        --set vocab_size="$vocab" --seq 512 --batch 8 --repeats "$repeats" --warmup 1 --device "$device" $precision
      # shellcheck disable=SC2086
      "$binary" -q --threads "$threads" bench --model convbert-small --set max_length=512 --set vocab_size="$vocab" \
        --seq 128,512 --batch 8 --repeats "$repeats" --warmup 1 --device "$device" $precision
    done
  done > "$out/models.md"
  for precision in "${precisions[@]}"; do
    # shellcheck disable=SC2086
    "$python" recipes/bench/hf_model_step.py "$work/hf" --seq 128,512 --batch 8 --threads "$threads" \
      --repeats "$repeats" --warmup 1 --device "$device" $precision
  done > "$out/hf-convbert.jsonl"
fi
set +x
cat "$out"/ops.md "$out"/ops-long.md "$out"/ops-16k.md "$out"/models.md "$out"/hf-convbert.jsonl
