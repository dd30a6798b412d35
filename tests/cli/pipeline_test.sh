# tokenize train -> encode | build-corpus -> inspect, through pipes; decode round trip.
source "$(dirname "$0")/lib.sh"
train_tokenizer 2> "$work/train.err"
# -q: nothing on stderr (SentencePiece logged its 2 KB command line whatever the level).
[ ! -s "$work/train.err" ] || fail "tokenize train -q wrote to stderr: $(cat "$work/train.err")"
[ -s "$work/tok.model" ] && [ -s "$work/tok.vocab" ] || fail "tokenizer files missing"
head -5 "$work/tok.vocab" | cut -f1 | tr '\n' ' ' | grep -F '[PAD] [UNK] [CLS] [SEP] [MASK]' > /dev/null || fail "special tokens not at ids 0-4"

sentences="$CABERT_SOURCE_DIR/tests/data/sentences.txt"
"$CABERT" -q tokenize encode -m "$work/tok.model" < "$sentences" \
  | "$CABERT" -q build-corpus -i - -o "$work/corpus" --max-length 32
"$CABERT" inspect "$work/corpus" --json --limit -1 > "$work/inspect.json"
grep -q '"message_type":"cabert.pb.PretrainingExample"' "$work/inspect.json" || fail "inspect header"
# 4 documents; every example starts with [CLS]=2 and stays within 32 tokens.
python3 - "$work/inspect.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
records = [l for l in lines if "token_ids" in l]
summary = lines[-1]["summary"]
assert summary["records"] == len(records) > 0, summary
assert all(r["token_ids"][0] == 2 and len(r["token_ids"]) <= 32 for r in records)
docs = {int(r.get("document", 0)) for r in records}
assert docs == {0, 1, 2, 3}, docs
used = sorted((int(r.get("document", 0)), int(r.get("first_sentence", 0)) + k)
              for r in records for k in range(int(r.get("sentences_a", 0)) + int(r.get("sentences_b", 0))))
assert used == sorted(set(used)) and len(used) == 13, used   # 13 sentences, each used exactly once
PY

# Decode(encode(x)) is the normalised x (lower-cased here; byte fallback covers characters Alice lacks),
# line by line, blank lines kept.
"$CABERT" -q tokenize encode -m "$work/tok.model" -i "$sentences" -o "$work/tokens"
"$CABERT" -q tokenize decode -m "$work/tok.model" -i "$work/tokens" -o "$work/decoded.txt"
[ "$(wc -l < "$work/decoded.txt")" = "$(wc -l < "$sentences")" ] || fail "decode changed the line count"
tr 'A-Z' 'a-z' < "$sentences" | diff - "$work/decoded.txt" || fail "round trip differs"
# The same corpus from text directly (tokenized on the fly) equals the piped one.
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sentences" -o "$work/corpus2" --max-length 32
"$CABERT" inspect "$work/corpus2" --json --limit -1 | grep -v '"header"' > "$work/a"
grep -v '"header"' "$work/inspect.json" > "$work/b"
diff "$work/a" "$work/b" >/dev/null || fail "text input and token-record input gave different corpora"

# A corpus built with a relative -m records the tokenizer's absolute path and its sentinel count, and its header's
# options under their long names: pretraining from another directory, even after the model file moved away,
# treats the same ids as special (it warned and treated the sentinels as ordinary tokens).
mkdir -p "$work/here" "$work/elsewhere"
cp "$work/tok.model" "$work/here/moved.model"
(cd "$work/here" && "$CABERT" -q build-corpus -m moved.model -i "$sentences" -o corpus --max-length 32)
# (Through a file, not `| head -1`: under pipefail, inspect dies of SIGPIPE writing its summary line after head quit.)
"$CABERT" inspect "$work/here/corpus" --json --limit 0 > "$work/inspect0.json"
sed -n 1p "$work/inspect0.json" > "$work/header.json"
python3 - "$work/header.json" "$work/here/moved.model" <<'PY'
import json, sys
header = json.load(open(sys.argv[1]))["header"]
assert header["metadata"]["tokenizer"] == sys.argv[2], header["metadata"]
assert header["metadata"]["sentinels"] == "4", header["metadata"]
assert header["options"]["model"] == "moved.model" and header["options"]["output"] == "corpus", header["options"]
PY
rm "$work/here/moved.model"
(cd "$work/elsewhere" && "$CABERT" pretrain --preset bert-tiny-composite --corpus ../here/corpus --model-dir m \
  --steps 1 --batch-size 2 --eval-examples 1 2> err) || fail "pretrain from another directory: $(cat "$work/elsewhere/err")"
if grep -q "does not name a tokenizer" "$work/elsewhere/err"; then fail "the corpus's sentinel count was not used"; fi

# inspect: -m adds the pieces in JSON lines too (it did only in text); a checkpoint's tensor bytes show as their
# size, and a file without token fields has no token count in its summary; --config takes no --json.
"$CABERT" inspect "$work/tokens" -m "$work/tok.model" --json --limit 1 | sed -n 2p > "$work/record.json"
python3 - "$work/record.json" <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
assert len(record["pieces"]) == len(record["ids"]) > 0 and all(isinstance(p, str) for p in record["pieces"]), record
PY
"$CABERT" inspect "$work/elsewhere/m/checkpoint-00000001.cabert" --limit 2 > "$work/checkpoint.txt"
grep -q 'data: <[0-9]* bytes>' "$work/checkpoint.txt" || fail "tensor bytes not summarised: $(head -c 600 "$work/checkpoint.txt")"
grep -q "^# summary: [0-9]* records, [0-9]* record bytes$" "$work/checkpoint.txt" ||
  fail "checkpoint summary: $(grep '^# summary' "$work/checkpoint.txt")"
expect_exit 2 "--json excludes --config" "$CABERT" inspect --config --json "$work/tokens"
echo "pipeline: ok"
