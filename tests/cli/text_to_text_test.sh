# Tay et al.'s pipeline end to end on the shipped sample, in seconds: build-corpus -> pretrain --objective
# span-corruption (a tiny dilated-convolution encoder-decoder) -> --resume of the finished run -> finetune
# SST-2 as text-to-text from that checkpoint and from scratch (--runs 2) -> evaluate (predictions keep the
# task's labels) -> --summarize; a generic TSV task with --label-text; and the mismatches refused (exit 2).
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 48 -o "$work/corpus"
"$CABERT" -q pretrain --preset tay-dilatedconv-tiny --objective span-corruption --corpus "$work/corpus" \
  --model-dir "$work/pt" --steps 12 --batch-size 8 --lr 3e-3 --eval-every 6 --eval-examples 16 --save-every 6
checkpoint="$work/pt/checkpoint-00000012.cabert"
[ -s "$checkpoint" ] || fail "pretrain wrote no step-12 checkpoint: $(ls "$work/pt")"
"$CABERT" inspect "$work/pt/metrics.cabert" --json --limit -1 > "$work/pt.json"
python3 - "$work/pt.json" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
evals = [r for r in records if r.get("phase") == "eval"]
assert len(evals) == 2, evals                      # steps 6 and 12
for r in evals:
    v = r["values"]
    assert 0.05 < v["noise_fraction"] < 0.25, v     # T5's 0.15, on short rows
    assert v["span_loss"] > 0 and 0 <= v["span_accuracy"] <= 1, v
PY
# A finished run resumes to nothing; the checkpoint stays as it was.
before=$(md5sum < "$checkpoint")
"$CABERT" -q pretrain --preset tay-dilatedconv-tiny --objective span-corruption --corpus "$work/corpus" \
  --model-dir "$work/pt" --steps 12 --batch-size 8 --resume
[ "$before" = "$(md5sum < "$checkpoint")" ] || fail "--resume of a finished run changed the checkpoint"

# SST-2 as text-to-text: pre-trained and raw (Tay's two columns), 2 seeds each.
head -n 301 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 101 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --epochs 1 --lr 1e-3 --runs 2 --model-dir "$work/pretrained" > "$work/pretrained.out"
grep -q "SST-2 dev: best .* mean .* (SEM over 2 runs)" "$work/pretrained.out" ||
  fail "finetune summary: $(cat "$work/pretrained.out")"
grep -q "unmatched" "$work/pretrained.out" || fail "the unmatched fraction is not reported: $(cat "$work/pretrained.out")"
"$CABERT" -q finetune --preset tay-dilatedconv-tiny --tokenizer "$work/tok.model" --task SST-2 \
  --train "$work/train.tsv" --dev "$work/dev.tsv" --epochs 1 --lr 1e-3 --model-dir "$work/raw" > /dev/null
"$CABERT" inspect "$work/pretrained/best.cabert" | grep 'text_to_text' > /dev/null || fail "best.cabert lacks text_to_text"

"$CABERT" -q evaluate --model "$work/pretrained/best.cabert" --data "$work/dev.tsv" --predictions "$work/pred.tsv" \
  -o "$work/dev.metrics" > "$work/evaluate.out"
grep -q "| SST-2 |" "$work/evaluate.out" || fail "evaluate table: $(cat "$work/evaluate.out")"
[ "$(wc -l < "$work/pred.tsv")" = 101 ] || fail "expected 100 predictions + header, got $(wc -l < "$work/pred.tsv")"
# Predictions are SST-2's labels (or, for an output matching no label, that output); gold is 0/1.
awk -F'\t' 'NR > 1 && $3 != "0" && $3 != "1" { exit 1 }' "$work/pred.tsv" || fail "gold column: $(head -3 "$work/pred.tsv")"
# Two SST-2 files into one --predictions directory would both be SST-2.tsv: refused before anything is scored
# or written, so the SST-2.tsv an earlier run wrote there is kept.
head -n 51 "$work/dev.tsv" > "$work/dev-half.tsv"
"$CABERT" -q evaluate --model "$work/pretrained/best.cabert" --data "$work/dev.tsv" --predictions "$work/subs/" \
  > /dev/null
cp "$work/subs/SST-2.tsv" "$work/subs-before.tsv"
expect_exit 2 "would both be written to" "$CABERT" -q evaluate --model "$work/pretrained/best.cabert" \
  --data "$work/dev.tsv" "$work/dev-half.tsv" --predictions "$work/subs/"
[ "$(wc -l < "$work/subs/SST-2.tsv")" = 101 ] || fail "the first file's predictions were overwritten"
cmp -s "$work/subs/SST-2.tsv" "$work/subs-before.tsv" || fail "the refused run changed $work/subs/SST-2.tsv"
[ ! -s "$work/out" ] || fail "the refused run printed a table: $(cat "$work/out")"
# Several files where a later one is bad: no file's predictions are written (the first file's were, before it
# failed).
{ head -n 11 "$work/dev.tsv"; printf 'a sentence\tnot-a-label\n'; } > "$work/dev-bad.tsv"
mkdir -p "$work/multi"
expect_exit 3 "$work/dev-bad.tsv:12: " "$CABERT" -q evaluate --model "$work/pretrained/best.cabert" \
  --data "$work/dev.tsv" "$work/dev-bad.tsv" --predictions "$work/multi/"
[ -z "$(ls -A "$work/multi")" ] || fail "a failed evaluate left predictions: $(ls -A "$work/multi")"
# A submission (a test file without labels) holds only SST-2's labels: outputs that match none are written as
# --unmatched-label (or the file is refused, exit 3, when the model wrote any and none was given).
# (No `tail | head`: under pipefail, tail dies of SIGPIPE when head stops reading first; it failed CI once.)
{ printf 'index\tsentence\n'; sed -n '2,41p' "$work/dev.tsv" | cut -f1 | awk '{print NR-1 "\t" $0}'; } \
  > "$work/test.tsv"
"$CABERT" -q evaluate --model "$work/raw/best.cabert" --data "$work/test.tsv" --predictions "$work/sub/" \
  --unmatched-label 0 > /dev/null
[ "$(wc -l < "$work/sub/SST-2.tsv")" = 41 ] || fail "expected 40 submission rows + header"
awk -F'\t' 'NR == 1 && $0 != "index\tprediction" { exit 1 } NR > 1 && $2 != "0" && $2 != "1" { exit 1 }' \
  "$work/sub/SST-2.tsv" || fail "the submission holds more than SST-2's labels: $(head -4 "$work/sub/SST-2.tsv")"
expect_exit 2 "--unmatched-label positive: expected one of SST-2's labels (0, 1)" "$CABERT" -q evaluate \
  --model "$work/raw/best.cabert" --data "$work/test.tsv" --predictions "$work/sub2/" --unmatched-label positive
"$CABERT" -q evaluate --model "$work/raw/best.cabert" --data "$work/dev.tsv" -o "$work/raw.metrics" > /dev/null
"$CABERT" evaluate --summarize "$work/dev.metrics" "$work/raw.metrics" > "$work/summary.md"
grep -q "SST-2" "$work/summary.md" || fail "--summarize: $(cat "$work/summary.md")"

# --task text-to-text: a generic TSV of input text and target text; labels given texts with --label-text.
printf 'text\tlabel\nwho wrote alice\tHUM\nwhat is a rabbit\tDESC\nwho is the queen\tHUM\nwhat is a hole\tDESC\n' \
  > "$work/qc.tsv"
"$CABERT" -q finetune --preset tay-lightconv-tiny --tokenizer "$work/tok.model" --task text-to-text \
  --train "$work/qc.tsv" --dev "$work/qc.tsv" --label-text HUM=person --epochs 1 --model-dir "$work/qc" > "$work/qc.out"
grep -q "| text-to-text |" "$work/qc.out" || fail "text-to-text table: $(cat "$work/qc.out")"

# Mismatches: span corruption of an encoder, text-to-text on an encoder, an unknown label in --label-text.
expect_exit 2 "is an encoder" "$CABERT" -q pretrain --preset bert-tiny-none --objective span-corruption \
  --corpus "$work/corpus" --model-dir "$work/bad"
expect_exit 2 "needs an encoder-decoder" "$CABERT" -q finetune --preset bert-tiny-none --tokenizer "$work/tok.model" \
  --task text-to-text --train "$work/qc.tsv" --dev "$work/qc.tsv" --model-dir "$work/bad2"
expect_exit 2 "expected one of the labels of SST-2 (0, 1), got 'pos'" "$CABERT" -q finetune --init "$checkpoint" \
  --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --label-text pos=positive --model-dir "$work/bad3"
# A model of a single-sentence task is not scored as a pair task with the same labels (SST-2 as MRPC).
expect_exit 2 "was fine-tuned on SST-2; it cannot be evaluated as MRPC" "$CABERT" -q evaluate \
  --model "$work/pretrained/best.cabert" --task MRPC --data "$work/dev.tsv"
# --resume continues every fine-tuning from MODEL_DIR/last.cabert: the finished two-run fine-tuning above trains
# nothing more and reports the same runs.
"$CABERT" -q finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --epochs 1 --lr 1e-3 --runs 2 --model-dir "$work/pretrained" --resume > "$work/resumed.out"
diff <(grep '^|' "$work/pretrained.out") <(grep '^|' "$work/resumed.out") > /dev/null ||
  fail "a finished fine-tuning resumed reports other runs: $(cat "$work/resumed.out")"
echo "text-to-text CLI: ok"
