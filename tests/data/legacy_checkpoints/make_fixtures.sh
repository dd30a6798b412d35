#!/usr/bin/env bash
# How the checkpoints in this folder were made: with the cabert of commit 34874e7 (before the mixer registry,
# the tasks room and the config room of issue 9), so that tests/unit/models/legacy_checkpoint_test.cc can
# check that checkpoints written by that code still load and predict the same. Kept for the record; re-running
# it with a newer cabert makes new checkpoints, not legacy ones.
#   usage: make_fixtures.sh CABERT_BINARY
set -euo pipefail
cabert=${1:?usage: make_fixtures.sh CABERT_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A 160-piece tokenizer on the shipped Alice sample and 256 / 24 SST-2 rows from the quick-start slice.
"$cabert" -q tokenize train -i "$root/recipes/quickstart/data/gutenberg/11-0.txt" --input-format gutenberg \
  --vocab-size 160 --sentinels 4 --lowercase --model-prefix "$here/tok"
mkdir -p "$work/sst2"
head -n 257 "$root/recipes/quickstart/data/SST-2/train.tsv" > "$work/sst2/train.tsv"
head -n 25 "$root/recipes/quickstart/data/SST-2/dev.tsv" > "$here/dev.tsv"
cp "$here/dev.tsv" "$work/sst2/dev.tsv"

small=(--set hidden_size=16 --set embedding_size=8 --set intermediate_size=24 --set num_heads=2 --set max_length=64)
finetune() {  # NAME PRESET [--set ...]
  local name=$1 preset=$2
  shift 2
  "$cabert" -q --threads 1 --seed 7 finetune --preset "$preset" --tokenizer "$here/tok.model" --task SST-2 \
    --data "$work/sst2" --model-dir "$work/$name" --epochs 4 --batch-size 16 --lr 3e-3 --max-length 48 "${small[@]}" "$@" \
    > /dev/null
  cp "$work/$name/best.cabert" "$here/$name.cabert"
  "$cabert" -q --threads 1 evaluate --model "$here/$name.cabert" --data "$here/dev.tsv" \
    --predictions "$here/$name.predictions.tsv" > /dev/null
}
# Every tensor name of the three mixer families: all of Chang et al.'s switches at once, ConvBERT with
# SDConv and a grouped FFN, and both Wu et al. blocks.
finetune bert-all-switches bert-tiny-composite-conv-qkv --set attention.relative_key=true \
  --set attention.depthwise_values=true
finetune convbert convbert-tiny --set convbert.ffn_groups=2
finetune lightconv lightconv-tiny
finetune dynamicconv dynamicconv-tiny

# NAME.outputs.txt: encoder hidden states and logits on fixed ids at full precision, printed by dump_outputs.cc
# compiled against the same commit's library (build/lib/libcabert_lib.a), for each NAME above:
#   dump_outputs NAME.cabert > NAME.outputs.txt
