# cabert export end to end on the shipped sample: pretrain (a tiny ConvBERT, MLM) -> export -> --from-hf import
# of that directory -> finetune --init the imported checkpoint -> export of the fine-tuned model; the files a
# Python user needs are there; bad input exits 3 naming the file and nothing is left half-written.
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 48 -o "$work/corpus"
"$CABERT" -q pretrain --preset convbert-tiny --corpus "$work/corpus" --model-dir "$work/pt" --steps 4 \
  --batch-size 8 --save-every 4
checkpoint="$work/pt/checkpoint-00000004.cabert"
[ -s "$checkpoint" ] || fail "pretrain wrote no step-4 checkpoint: $(ls "$work/pt")"

"$CABERT" export --model "$checkpoint" -o "$work/hf" 2> "$work/export.err"
grep -q "Hugging Face ConvBertForMaskedLM" "$work/export.err" || fail "export: $(cat "$work/export.err")"
for file in model.safetensors config.json tokenizer.model tokenizer_config.json README.md; do
  [ -s "$work/hf/$file" ] || fail "export lacks $file: $(ls "$work/hf")"
done
cmp -s "$work/tok.model" "$work/hf/tokenizer.model" || fail "the exported tokenizer differs from the model's"
python3 - "$work/hf" <<'PY'
import json, struct, sys
d = sys.argv[1]
config = json.load(open(f"{d}/config.json"))
assert config["model_type"] == "convbert" and config["architectures"] == ["ConvBertForMaskedLM"], config
assert config["cabert"]["model"]["convbert"]["conv_kernel_size"] == 5, config["cabert"]
# Float values as written (0.1), not widened from float32 (0.10000000149011612).
assert (config["hidden_dropout_prob"], config["initializer_range"], config["layer_norm_eps"]) == (0.1, 0.02, 1e-12), config
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
assert header["__metadata__"] == {"format": "pt"}, header["__metadata__"]
assert "convbert.encoder.layer.0.attention.self.key_conv_attn_layer.depthwise.weight" in header, list(header)
assert header["convbert.encoder.layer.0.attention.self.key_conv_attn_layer.depthwise.weight"]["shape"][1] == 1
tokenizer = json.load(open(f"{d}/tokenizer_config.json"))
assert tokenizer["special_ids"] == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}, tokenizer
assert [s["id"] for s in tokenizer["sentinels"]] == [5, 6, 7, 8], tokenizer["sentinels"]
PY

# In again, and fine-tuned from there.
"$CABERT" export --from-hf "$work/hf" -o "$work/imported.cabert" 2> "$work/import.err"
grep -q "imported .* tensors of a convbert mlm model" "$work/import.err" || fail "import: $(cat "$work/import.err")"
[ -s "$work/imported.tokenizer.model" ] || fail "the import did not copy the tokenizer"
head -n 201 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 51 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --init "$work/imported.cabert" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --epochs 1 --model-dir "$work/ft" > "$work/ft.out"
[ -s "$work/ft/best.cabert" ] || fail "finetune --init of the imported checkpoint wrote no model: $(cat "$work/ft.out")"
"$CABERT" export --model "$work/ft/best.cabert" -o "$work/ft-hf" 2> "$work/ft.err"
grep -q "Hugging Face ConvBertModel" "$work/ft.err" || fail "fine-tuned export: $(cat "$work/ft.err")"
grep -q '"SST-2"' "$work/ft-hf/config.json" || fail "the fine-tuned export does not name its task"
grep -q '"objective": "none"' "$work/ft-hf/config.json" || fail "the fine-tuned export's objective: $(grep objective "$work/ft-hf/config.json")"

# Pictures: the ConvBERT's attention maps and span-based dynamic kernels for a sentence; both runs' curves.
"$CABERT" -q export --model "$checkpoint" --pictures "$work/pics" --sentence "Alice was beginning to get very tired."
"$CABERT" -q export --metrics "$work/pt/metrics.cabert" "$work/ft/metrics.cabert" --labels pretrain finetune \
  --pictures "$work/pics"
for picture in attention_layer0 attention_layer1 conv_kernels_layer0 conv_kernels_layer1 attention_by_offset \
               curves_train curves_dev curves_dev_by_update; do
  [ "$(head -c 8 "$work/pics/$picture.png" | od -An -tx1 | tr -d ' ')" = "89504e470d0a1a0a" ] ||
    fail "$picture.png is not a PNG: $(ls "$work/pics")"
done
expect_exit 2 "--pictures: nothing to draw" "$CABERT" export --model "$checkpoint" --pictures "$work/none"
# Another tokenizer's ids would label the maps with other tokens (a larger one indexed past the embeddings, exit 1):
# refused as the export refuses it, exit 3, nothing drawn.
"$CABERT" -q tokenize train -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" --vocab-size 60 --sentinels 1 \
  --model-prefix "$work/other"
expect_exit 3 "$checkpoint: the checkpoint was trained with tokenizer " "$CABERT" export --model "$checkpoint" \
  --pictures "$work/other-pics" --sentence "Alice was tired." --tokenizer "$work/other.model"
[ ! -e "$work/other-pics" ] || fail "a refused picture export drew: $(ls "$work/other-pics")"
# An option of a kind of picture without that kind is refused, not ignored.
expect_exit 2 "--labels requires --metrics" "$CABERT" export --model "$checkpoint" --labels a --pictures "$work/none"
expect_exit 2 "--max-tokens requires --sentence" "$CABERT" export --model "$checkpoint" --max-tokens 12 \
  --pictures "$work/none"
expect_exit 2 "--max-offset requires --sentence" "$CABERT" export --metrics "$work/pt/metrics.cabert" \
  --max-offset 4 --pictures "$work/none"
expect_exit 2 "--sentence requires --model" "$CABERT" export --metrics "$work/pt/metrics.cabert" --sentence "Alice." \
  --pictures "$work/none"
[ ! -e "$work/none" ] || fail "a refused picture export drew: $(ls "$work/none")"
expect_exit 2 "--labels: expected one label per --metrics file" "$CABERT" export --metrics "$work/pt/metrics.cabert" \
  --labels a b --pictures "$work/none"

# Bad input: exit 3, the file named, no checkpoint left behind.
printf 'not safetensors' > "$work/hf/model.safetensors"
expect_exit 3 "$work/hf/model.safetensors: at byte offset 0" "$CABERT" export --from-hf "$work/hf" -o "$work/bad.cabert"
[ ! -e "$work/bad.cabert" ] || fail "a failed import left $work/bad.cabert"
expect_exit 2 "--from-hf needs -o CKPT" "$CABERT" export --from-hf "$work/hf"
echo "export: ok"
