#!/usr/bin/env bash
# The main job end to end on the sample the project ships (recipes/quickstart/data, see PROVENANCE.md):
# train a tokenizer, encode, build a pre-training corpus, and inspect it. Outputs go to out/quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cabert=${CABERT_BUILD_DIR:-build}/bin/cabert
data=recipes/quickstart/data
out=${CABERT_QUICKSTART_OUT:-out/quickstart}
mkdir -p "$out"
set -x
"$cabert" tokenize train -i "$data/gutenberg" --input-format gutenberg --vocab-size 4000 --lowercase \
  --model-prefix "$out/tokenizer"
for book in "$data"/gutenberg/*.txt; do
  "$cabert" tokenize encode -m "$out/tokenizer.model" -i "$book" -o "$out/$(basename "$book" .txt).tokens"
done
"$cabert" build-corpus -m "$out/tokenizer.model" -i "$data/gutenberg" --input-format gutenberg \
  --max-length 128 --shards 2 -o "$out/corpus"
"$cabert" inspect "$out/corpus-00000-of-00002" --limit 2 -m "$out/tokenizer.model"
