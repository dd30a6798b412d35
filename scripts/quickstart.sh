#!/usr/bin/env bash
# The main job end to end on the sample the project ships (recipes/quickstart/data, see PROVENANCE.md):
# train a tokenizer on two Project Gutenberg books, build a pre-training corpus, pre-train a tiny
# composite-attention encoder (Chang et al.) for a few minutes (3,000 steps of 32 x 64 tokens), fine-tune it on an SST-2 sample, fine-tune the
# same architecture without pre-training for comparison, evaluate both on SST-2 dev and print the table.
# Outputs go to out/quickstart (CABERT_QUICKSTART_OUT). CABERT_QUICKSTART_STEPS sets the pre-training steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cabert=${CABERT_BUILD_DIR:-build}/bin/cabert
data=recipes/quickstart/data
out=${CABERT_QUICKSTART_OUT:-out/quickstart}
steps=${CABERT_QUICKSTART_STEPS:-3000}
# OpenMP threads that spin while waiting crawl when anything else shares the cores (see README).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$out"
mkdir -p "$out"
set -x
"$cabert" tokenize train -i "$data/gutenberg" --input-format gutenberg --vocab-size 4000 --lowercase \
  --model-prefix "$out/tokenizer"
"$cabert" build-corpus -m "$out/tokenizer.model" -i "$data/gutenberg" --input-format gutenberg \
  --max-length 64 --shards 2 -o "$out/corpus"
"$cabert" inspect "$out/corpus-00000-of-00002" --limit 1 -m "$out/tokenizer.model"
"$cabert" pretrain --preset bert-tiny-composite --corpus "$out"/corpus-* --model-dir "$out/pretrain" \
  --steps "$steps" --batch-size 32 --lr 1e-3 --eval-every 500 --save-every 1000
checkpoint=$(ls "$out"/pretrain/checkpoint-*.cabert | tail -n 1)
"$cabert" finetune --init "$checkpoint" --task SST-2 --data "$data/SST-2" --lr 1e-3 \
  --max-length 64 --model-dir "$out/tiny-composite"
"$cabert" finetune --preset bert-tiny-composite --tokenizer "$out/tokenizer.model" --task SST-2 \
  --data "$data/SST-2" --lr 1e-3 --max-length 64 --model-dir "$out/tiny-composite-no-pretraining"
for model in tiny-composite tiny-composite-no-pretraining; do
  "$cabert" evaluate --model "$out/$model/best.cabert" --data "$data/SST-2/dev.tsv" \
    -o "$out/$model/sst2-dev.metrics" --predictions "$out/$model/sst2-dev.predictions.tsv"
done
set +x
echo
"$cabert" evaluate --summarize "$out"/*/sst2-dev.metrics
