#!/usr/bin/env bash
# The main job end to end on the sample the project ships (recipes/quickstart/data, see PROVENANCE.md):
# train a tokenizer on 20,000 unlabelled movie-review sentences (SST-2 training rows without their labels), build
# a pre-training corpus from them, pre-train a small composite-attention encoder (Chang et al.; E 64, H 64, 2
# layers) for a few minutes (9,000 MLM steps of 32 x 64 tokens), fine-tune it on 2,000 labelled SST-2 sentences
# (5 seeds), fine-tune the same architecture without pre-training (5 seeds) for comparison, evaluate the best
# model of each on SST-2 dev and print the table (mean +- SEM over the seeds, best run in brackets).
# Outputs go to out/quickstart (CABERT_QUICKSTART_OUT). CABERT_QUICKSTART_STEPS sets the pre-training steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cabert=${CABERT_BUILD_DIR:-build}/bin/cabert
data=recipes/quickstart/data
out=${CABERT_QUICKSTART_OUT:-out/quickstart}
steps=${CABERT_QUICKSTART_STEPS:-9000}
# OpenMP threads that spin while waiting crawl when anything else shares the cores (see docs/benchmarks.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$out"
mkdir -p "$out"
set -x
model=(--preset bert-tiny-composite --set embedding_size=64 --set hidden_size=64 --set intermediate_size=256)
"$cabert" tokenize train -i "$data/SST-2-unlabeled/sentences.txt" --vocab-size 4000 --lowercase \
  --model-prefix "$out/tokenizer"
"$cabert" build-corpus -m "$out/tokenizer.model" -i "$data/SST-2-unlabeled/sentences.txt" --max-length 64 \
  --shards 2 -o "$out/corpus"
"$cabert" inspect "$out/corpus-00000-of-00002" --limit 1 -m "$out/tokenizer.model"
"$cabert" pretrain "${model[@]}" --corpus "$out"/corpus-* --model-dir "$out/pretrain" \
  --steps "$steps" --batch-size 32 --lr 1e-3 --eval-every 500 --save-every 1000
checkpoint=$(ls "$out"/pretrain/checkpoint-*.cabert | tail -n 1)
# Mean pooling: masked-LM pre-training never trains [CLS], and this small model's last layer attends from [CLS]
# to its neighbours; the mean of the last layer sees the whole sentence (docs/training.md: `finetune --pooling mean`).
"$cabert" finetune --init "$checkpoint" --task SST-2 --data "$data/SST-2" --lr 1e-3 --max-length 64 \
  --pooling mean --runs 5 --name "pre-trained" --model-dir "$out/pretrained"
"$cabert" finetune "${model[@]}" --tokenizer "$out/tokenizer.model" --task SST-2 --data "$data/SST-2" --lr 1e-3 \
  --max-length 64 --pooling mean --runs 5 --name "no pre-training" --model-dir "$out/no-pretraining"
for model in pretrained no-pretraining; do
  "$cabert" evaluate --model "$out/$model/best.cabert" --data "$data/SST-2/dev.tsv" \
    -o "$out/$model/sst2-dev.metrics" --predictions "$out/$model/sst2-dev.predictions.tsv"
done
set +x
echo
# Runs repeat bit for bit on one machine, but another CPU can sum in another order: name the machine and build.
echo "$("$cabert" --version) on $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1) ($(nproc) cores)"
echo "SST-2 dev accuracy, mean ± SEM over 5 fine-tuning seeds (best run):"
"$cabert" evaluate --summarize "$out"/pretrained/metrics.cabert "$out"/no-pretraining/metrics.cabert \
  --aggregate mean-best
