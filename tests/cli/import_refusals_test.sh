# export --from-hf refuses a directory whose config.json and model.safetensors disagree, before it allocates a
# tensor: one case per kind of refusal (sizes the tensors lack, absurd or mistyped sizes, sizes beyond the file's
# bytes, missing and extra tensors, dtypes), each exit 3 with its exact message, and nothing written. The data
# segment is capped as in hostile_inputs_test.sh, so an allocation of a claimed size would fail as exit 1.
source "$(dirname "$0")/lib.sh"
capped() { ( ulimit -d 1500000; "$@" ); }
if grep -qa __asan_init "$CABERT"; then
  capped() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=3000" "$@"; }
fi
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 32 -o "$work/corpus"
"$CABERT" -q pretrain --preset bert-tiny-absolute --set hidden_size=32 --set embedding_size=32 \
  --set intermediate_size=64 --set num_layers=2 --set num_heads=2 --corpus "$work/corpus" \
  --model-dir "$work/pt" --steps 1 --batch-size 4 --save-every 1
"$CABERT" -q export --model "$work/pt/checkpoint-00000001.cabert" -o "$work/good"
grep -q '"model_type": "bert"' "$work/good/config.json" || fail "not a BERT export: $(head -c 300 "$work/good/config.json")"
"$CABERT" -q export --from-hf "$work/good" -o "$work/good.cabert" || fail "the unedited export does not import"

# edit 'PYTHON' : a copy of the export in $work/case, edited by the Python statements, which see `config` (the
# parsed config.json, its "cabert" block removed, as transformers writes it) and `tensors` (name -> [dtype,
# shape, bytes] of model.safetensors); both are written back (the weights in the reference writer's layout).
edit() {
  rm -rf "$work/case" && cp -r "$work/good" "$work/case"
  python3 - "$work/case" "$1" <<'PY'
import json, struct, sys
d, statements = sys.argv[1], sys.argv[2]
config = json.load(open(f"{d}/config.json"))
del config["cabert"]
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
metadata = header.pop("__metadata__", None)
tensors = {k: [v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]] for k, v in header.items()}
exec(statements)
json.dump(config, open(f"{d}/config.json", "w"), indent=2)
out, offset, blob = {}, 0, b""
if metadata: out["__metadata__"] = metadata
for k in sorted(tensors):
    dtype, shape, body = tensors[k]
    out[k] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(body)]}
    offset, blob = offset + len(body), blob + body
text = json.dumps(out, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
open(f"{d}/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + blob)
PY
}
# refused MESSAGE: the import of $work/case exits 3 with MESSAGE and writes neither the checkpoint nor the tokenizer.
refused() {
  expect_exit 3 "$1" capped "$CABERT" export --from-hf "$work/case" -o "$work/out.cabert"
  [ ! -e "$work/out.cabert" ] && [ ! -e "$work/out.tokenizer.model" ] || fail "a refused import wrote: $(ls "$work")"
}
c="$work/case/config.json" w="$work/case/model.safetensors"
ffn=bert.encoder.layer.0.intermediate.dense.weight

# The control: HF's keys alone (no "cabert" block) import.
edit 'pass'
"$CABERT" -q export --from-hf "$work/case" -o "$work/hf-keys.cabert" || fail "HF's keys alone do not import"

# Sizes the tensors do not have.
edit 'config["intermediate_size"] = 48'
refused "$w: tensor '$ffn' has shape [64, 32] but $c describes [48, 32]"
# Absurd sizes, negative ones, non-integers, heads that do not divide the hidden size.
edit 'config["hidden_size"] = 1e12'
refused "$c: 'hidden_size' must be a positive integer, got 1000000000000.0"
edit 'config["vocab_size"] = 2 ** 40'
refused "$c: 'vocab_size' must be a positive integer, got 1099511627776"
edit 'config["num_attention_heads"] = -2'
refused "$c: 'num_attention_heads' must be a positive integer, got -2"
edit 'config["num_attention_heads"] = 3'
refused "$c: model config 'hf-bert' expected hidden_size divisible by num_heads, got 32 and 3"
edit 'config["type_vocab_size"] = 2.5'
refused "$c: 'type_vocab_size' must be an integer, got 2.5"
# Sizes that need more bytes than the file holds: 1e6 layers of H x (H + 2 I) = 32 x 160 weights, and the rest.
edit 'config["num_hidden_layers"] = 1000000'
key() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$c" "$1"; }
need=$(($(key vocab_size) * 32 + $(key max_position_embeddings) * 32 + 1000000 * 32 * 160))
bytes=$(($(stat -c %s "$w") - 8 - $(python3 -c 'import struct,sys; print(struct.unpack("<Q", open(sys.argv[1],"rb").read(8))[0])' "$w")))
count=$(python3 -c 'import json,struct,sys; r=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",r[:8])[0]; print(len([k for k in json.loads(r[8:8+n]) if k != "__metadata__"]))' "$w")
refused "$c: its sizes need at least $need weights ($((need * 2)) bytes even as F16/BF16; the largest part: num_hidden_layers 1000000 x hidden_size 32 x (hidden_size 32 + 2 x intermediate_size 64)), but $w holds $bytes bytes of tensors ($count tensors)"
# A missing tensor, an extra layer.
edit "del tensors['$ffn']"
refused "$w: no tensor '$ffn', which the model $c describes needs"
edit "tensors['bert.encoder.layer.2.output.dense.weight'] = tensors['bert.encoder.layer.0.output.dense.weight']"
refused "$w: tensor 'bert.encoder.layer.2.output.dense.weight' [32, 64] is no part of the model $c describes (num_hidden_layers 2)"
# Dtypes: another than config.json's "dtype", an integer one, one torch cannot read.
edit "config['dtype'] = 'float16'"
refused "$w: tensor 'bert.embeddings.word_embeddings.weight' has dtype F32 but $c says 'dtype' F16"
edit "t = tensors['$ffn']; t[0] = 'I32'"
refused "$w: tensor '$ffn' has dtype I32; expected floating-point weights"
edit "t = tensors['$ffn']; t[0], t[2] = 'F8_E4M3', t[2][:len(t[2]) // 4]"
refused "$w: tensor '$ffn' has dtype F8_E4M3, which cabert cannot read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)"
edit "config['dtype'] = 'int8'"
refused "$c: 'dtype' is \"int8\"; cabert imports float32, float16, bfloat16 or float64 weights"
echo "import refusals: ok"
