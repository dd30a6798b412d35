#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/<target>/ (committed; a few small files each): files
# cabert writes (record files, --dump-config), the layouts of the shipped samples, and a few near-misses.
# The regress-* files (inputs that once failed, kept by hand) are left alone.
# Needs a built cabert ($CABERT, default build/bin/cabert) and the .venv with numpy and safetensors.
set -euo pipefail
cd "$(dirname "$0")/../.."
cabert=${CABERT:-build/bin/cabert}
python=${CABERT_PYTHON:-.venv/bin/python}
corpus=tests/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
find "$corpus" -type f ! -name 'regress-*' -delete 2>/dev/null || true
mkdir -p "$corpus"/{record_file,safetensors,model_config,glue,table,jsonl,squad,hf_import}_fuzz

# Record files: tokenized text, pre-training examples (two frames of records), an empty file.
tok=tests/data/legacy_checkpoints/tok.model
head -4 tests/data/sentences.txt > "$work/four.txt"
"$cabert" -q tokenize encode -m "$tok" -i "$work/four.txt" -o "$corpus/record_file_fuzz/tokens.cabert"
"$cabert" -q build-corpus -i "$corpus/record_file_fuzz/tokens.cabert" -o "$work/corpus" --max-length 16
cp "$work/corpus" "$corpus/record_file_fuzz/pretraining.cabert"
: | "$cabert" -q tokenize encode -m "$tok" -i - -o "$corpus/record_file_fuzz/empty.cabert"
head -c 100 "$corpus/record_file_fuzz/tokens.cabert" > "$corpus/record_file_fuzz/truncated.cabert"

# Safetensors: what Python's reference writer makes (several dtypes, metadata, a scalar, an empty tensor).
"$python" - "$corpus/safetensors_fuzz" <<'PY'
import sys, numpy as np
from safetensors.numpy import save_file
out = sys.argv[1]
save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, f"{out}/one.safetensors")
save_file({"a": np.ones((2, 2), dtype=np.float16), "b": np.array([1, 2, 3], dtype=np.int64),
           "c": np.array(True), "e": np.zeros((0, 4), dtype=np.uint8)},
          f"{out}/dtypes.safetensors", metadata={"format": "pt", "producer": "cabert"})
save_file({}, f"{out}/empty.safetensors")
PY
chmod 644 "$corpus"/safetensors_fuzz/*

# Model configs: --dump-config of each family, one with overrides, one invalid.
for preset in bert-tiny-composite-conv-qkv convbert-tiny lightconv-tiny wu-dynamicconv-tiny; do
  "$cabert" pretrain --preset "$preset" --dump-config > "$corpus/model_config_fuzz/$preset.textproto"
done
{ cat "$corpus/model_config_fuzz/bert-tiny-composite-conv-qkv.textproto"
  printf '#set attention.relative_radius=3\n#set num_heads=4\n#set dropout=0.2\n'; } \
  > "$corpus/model_config_fuzz/overrides.textproto"
printf 'family: BERT\nvocab_size: 100\nhidden_size: 30\nnum_heads: 4\n' > "$corpus/model_config_fuzz/invalid.textproto"

# GLUE: the layouts of the distribution files (synthetic sentences).
g=$corpus/glue_fuzz
printf 'gj04\t1\t\tThe cat sat on the mat.\ngj04\t0\t*\tCat the mat on sat.\n' > "$g/cola_train.tsv"
printf 'index\tsentence\n0\tThe dog barked.\n' > "$g/cola_test.tsv"
printf 'sentence\tlabel\nit is a charming film . \t1\nbleak and dull \t0\n' > "$g/sst2_dev.tsv"
printf '\xef\xbb\xbfQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t11\t12\tHe left early.\tHe went away early.\n0\t13\t14\tIt rained "a lot.\tThe sun shone.\n' > "$g/mrpc_dev.tsv"
printf 'index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\r\n0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man is dancing.\tA man dances.\t5.000\r\n1\tmain-news\tx\t2012\t1\tnone\tnone\tA.\tB.\t0.5' > "$g/stsb_dev.tsv"
printf 'index\tpromptID\tpairID\tgenre\tsentence1\tsentence2\tlabel1\tgold_label\n0\t1\t1n\tfiction\tA man reads.\tSomeone reads.\tentailment\tentailment\n1\t2\t2c\ttravel\tIt is hot.\tIt is cold.\tcontradiction\tcontradiction\n' > "$g/mnli_dev_matched.tsv"

# Generic tables: CSV with quoting (a field across lines, doubled quotes), TSV, the TREC sample's layout.
t=$corpus/table_fuzz
printf 'id,text,label\n1,"a ""quoted"", field",pos\n2,"two\nlines",neg\n3,plain,pos\n' > "$t/quoted.csv"
printf 'text\tlabel\nhello world\t1\ngoodbye\t0\n' > "$t/simple.tsv"
printf 'label,text,text_b,id\r\n0,one,two,a\r\n1,three,four,b' > "$t/crlf.csv"
head -3 recipes/tay2021/data/trec/TREC_10.label | sed 's/ /,/' > "$t/trec.csv"

# JSONL: strings, numbers, booleans, nested values, a blank line, a bad line.
j=$corpus/jsonl_fuzz
printf '{"text": "good film", "label": 1}\n\n{"text": "bad", "label": 0, "text_b": "x", "id": 7}\n' > "$j/simple.jsonl"
printf '{"text": "caf\\u00e9 \\ud83d\\ude00", "label": true, "text_b": [1, {"a": null}], "id": "q1"}\n{"text": 1.5e3, "label": "x"}\n[1, 2]\n{"text": \n' > "$j/mixed.jsonl"

# SQuAD v1.1 and v2.0 (answer_start in code points; a non-ASCII context).
s=$corpus/squad_fuzz
cat > "$s/v1.json" <<'JSON'
{"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat on the mat.",
 "qas": [{"id": "q1", "question": "Where did the cat sit?", "answers": [{"text": "on the mat", "answer_start": 12}]}]}]}]}
JSON
cat > "$s/v2.json" <<'JSON'
{"version": "v2.0", "data": [{"title": "Ünï", "paragraphs": [{"context": "Café Ölé is in Zürich.",
 "qas": [{"id": "a", "question": "Where?", "answers": [{"text": "Zürich", "answer_start": 15}], "is_impossible": false},
         {"id": 2, "question": "Who?", "answers": [], "is_impossible": true}]}]}]}
JSON
# Hugging Face directories (export --from-hf): the pair (config.json, model.safetensors) of real exports of
# pre-trained models, shrunk to a few kilobytes, as one input: a 4-byte little-endian length, config.json, the weights.
# A BERT (HF's own class), a ConvBERT and a cabert-only model (Chang et al.'s composite attention).
h=$corpus/hf_import_fuzz
small=(--set hidden_size=8 --set embedding_size=8 --set intermediate_size=16 --set num_heads=2 --set num_layers=1
       --set max_length=16)
for preset in bert-tiny-absolute convbert-tiny bert-tiny-composite-conv-qkv; do
  "$cabert" -q pretrain --preset "$preset" "${small[@]}" --corpus "$work/corpus" --model-dir "$work/$preset" \
    --steps 1 --batch-size 2 --save-every 1 --eval-examples 1
  "$cabert" -q export --model "$work/$preset/checkpoint-00000001.cabert" -o "$work/$preset-hf"
  "$python" - "$work/$preset-hf" "$h/$preset.pair" <<'PY2'
import struct, sys
config = open(f"{sys.argv[1]}/config.json", "rb").read()
weights = open(f"{sys.argv[1]}/model.safetensors", "rb").read()
open(sys.argv[2], "wb").write(struct.pack("<I", len(config)) + config + weights)
PY2
done
# Near-misses: the BERT's config with HF's keys alone, one with a layer more than its tensors.
"$python" - "$h/bert-tiny-absolute.pair" "$h" <<'PY2'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<I", raw[:4])[0]
config, weights = json.loads(raw[4:4 + n]), raw[4 + n:]
del config["cabert"]
for name, edit in (("hf-keys", {}), ("one-layer-more", {"num_hidden_layers": 2})):
    text = json.dumps({**config, **edit}).encode()
    open(f"{sys.argv[2]}/{name}.pair", "wb").write(struct.pack("<I", len(text)) + text + weights)
PY2
echo "seed corpora written to $corpus"
du -sh "$corpus"/*
