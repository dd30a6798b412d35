#!/usr/bin/env bash
# Several cabert binaries (builds of different commits) on the same attention ops and model training steps,
# taking turns binary by binary and round by round, so that a busy or noisy machine weighs on all of them alike;
# when HF_DIR names a `cabert export` of a convbert-small checkpoint (recipes/bench/attention.sh makes one), HF
# ConvBertForMaskedLM on the same shapes takes its turn in every round too, so that each round's ratio to HF has
# its own baseline. Prints Markdown tables, one per binary and round, and HF's rows as JSON lines tagged with
# their round (OUT_DIR/hf-convbert.jsonl).
#
#   BINARIES="old/bin/cabert build/bin/cabert" bash recipes/bench/side_by_side.sh [OUT_DIR]
#
# Environment: BINARIES (default: build/bin/cabert), ROUNDS (2), SEQS (512,1024,2048: the op rows), THREADS (2),
# REPEATS (3), VOCAB (4000: the model rows' vocabulary, as the export's), HF_DIR (unset: no HF rows).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/bench-side-by-side}
binaries=${BINARIES:-build/bin/cabert}
rounds=${ROUNDS:-2}
seqs=${SEQS:-512,1024,2048}
threads=${THREADS:-2}
repeats=${REPEATS:-3}
vocab=${VOCAB:-4000}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$out"
rm -f "$out/hf-convbert.jsonl"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in $(seq 1 "$rounds"); do
  for binary in $binaries; do
    echo "## round $round: $binary"
    echo
    # (a binary from before issue 16 has no composite-attention op: it gets the model rows only)
    "$binary" -q --threads "$threads" bench --op composite-attention,sdpa --kernels fused --seq "$seqs" \
      --batch 8 --channels 256 --heads 4 --kernel 17 --backward --repeats "$repeats" --warmup 1 ||
      echo "(no composite-attention op in this binary)"
    echo
    "$binary" -q --threads "$threads" bench --model bert-small-composite --kernels fused --set max_length=512 \
      --set vocab_size="$vocab" --seq 512 --batch 8 --repeats "$repeats" --warmup 1
    echo
    "$binary" -q --threads "$threads" bench --model convbert-small --kernels fused --set max_length=512 \
      --set vocab_size="$vocab" --seq 128,512 --batch 8 --repeats "$repeats" --warmup 1
    echo
  done
  if [ -n "${HF_DIR:-}" ]; then
    echo "## round $round: HF ConvBertForMaskedLM"
    echo
    .venv/bin/python recipes/bench/hf_model_step.py "$HF_DIR" --seq 128,512 --batch 8 --threads "$threads" \
      --repeats "$repeats" --warmup 1 | sed "s/^{/{\"round\": $round, /" | tee -a "$out/hf-convbert.jsonl"
    echo
  fi
done | tee "$out/cabert.md"
