# Translation end to end on the shipped Multi30k slice, in seconds: joint tokenizer -> finetune --task
# translation (a tiny LightConv encoder-decoder) -> --resume of a finished run -> evaluate (beam search, hypotheses
# file, BLEU/chrF record) -> --summarize -> export; and bad parallel input refused with the file names (exit 3).
source "$(dirname "$0")/lib.sh"
slice="$CABERT_SOURCE_DIR/tests/data/mt/multi30k-slice"
cat "$slice/train.de" "$slice/train.en" |
  "$CABERT" -q tokenize train -i - --vocab-size 300 --sentinels 4 --model-prefix "$work/joint"

# A TSV dev set made from the test split's first 20 pairs (the reader of pairs as one file).
# (No `paste | head`: under pipefail, paste dies of SIGPIPE when head stops reading first.)
paste "$slice/test.de" "$slice/test.en" > "$work/test.tsv"
head -n 20 "$work/test.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --task translation --preset wu-lightconv-tiny --tokenizer "$work/joint.model" \
  --data "$slice" --dev "$work/dev.tsv" --epochs 2 --lr 3e-3 --max-tokens 1500 --average-last 2 \
  --model-dir "$work/model" > "$work/finetune.out"
grep -q "dev: best BLEU" "$work/finetune.out" || fail "finetune printed no best BLEU: $(cat "$work/finetune.out")"
for file in best last epoch-1 epoch-2 averaged metrics; do
  [ -s "$work/model/$file.cabert" ] || fail "finetune wrote no $file.cabert"
done
"$CABERT" inspect "$work/model/best.cabert" | grep "translation" > /dev/null || fail "best.cabert lacks the task metadata"

# Resuming a finished run trains nothing more and keeps the checkpoint.
before=$(md5sum < "$work/model/best.cabert")
"$CABERT" -q finetune --task translation --preset wu-lightconv-tiny --tokenizer "$work/joint.model" \
  --data "$slice" --dev "$work/dev.tsv" --epochs 2 --lr 3e-3 --max-tokens 1500 --model-dir "$work/model" --resume \
  > /dev/null
[ "$before" = "$(md5sum < "$work/model/best.cabert")" ] || fail "--resume of a finished run changed best.cabert"
# A fresh run (no --resume) over it is refused before anything is read: only --resume continues a translation run.
expect_exit 2 "--model-dir $work/model: holds an earlier run (averaged.cabert, ..., metrics.cabert); continue it with \
--resume, or give a new or empty directory" "$CABERT" -q finetune --task translation --preset wu-lightconv-tiny \
  --tokenizer "$work/joint.model" --data "$work/absent" --dev "$work/dev.tsv" --model-dir "$work/model"
[ "$before" = "$(md5sum < "$work/model/best.cabert")" ] || fail "a refused fresh run changed best.cabert"

"$CABERT" -q evaluate --model "$work/model/best.cabert" --data "$slice" --split test --beam 3 --max-examples 30 \
  --predictions "$work/hyp.en" -o "$work/test.metrics" > "$work/evaluate.out"
[ "$(wc -l < "$work/hyp.en")" = 30 ] || fail "expected 30 hypotheses, got $(wc -l < "$work/hyp.en")"
grep -q "translation-de-en" "$work/evaluate.out" || fail "evaluate table: $(cat "$work/evaluate.out")"
grep -q "BLEU = " "$work/evaluate.out" || fail "evaluate printed no sacreBLEU line: $(cat "$work/evaluate.out")"
"$CABERT" evaluate --summarize "$work/test.metrics" | grep "translation-de-en" > /dev/null || fail "--summarize lacks the task"
# Several data files: one --predictions file would hold only the last one's hypotheses (each overwrote the one
# before), so it is refused before anything is translated; a directory gets one file per data file.
expect_exit 2 "--predictions: with several data files, give a directory" "$CABERT" -q evaluate \
  --model "$work/model/best.cabert" --data "$work/dev.tsv" "$work/test.tsv" --predictions "$work/both.en"
[ ! -s "$work/out" ] && [ ! -e "$work/both.en" ] || fail "the refused evaluate printed or wrote something"
head -n 7 "$work/test.tsv" > "$work/seven.tsv"
"$CABERT" -q evaluate --model "$work/model/best.cabert" --data "$work/dev.tsv" "$work/seven.tsv" \
  --predictions "$work/hyps/" > /dev/null
[ "$(wc -l < "$work/hyps/dev.en")" = 20 ] && [ "$(wc -l < "$work/hyps/seven.en")" = 7 ] ||
  fail "expected 20 and 7 hypotheses: $(wc -l "$work"/hyps/*)"

# A translation checkpoint exports (it names its task plainly, not as a classification task's JSON).
"$CABERT" -q export --model "$work/model/best.cabert" -o "$work/exported"
[ -s "$work/exported/model.safetensors" ] || fail "export of a translation checkpoint wrote no model.safetensors"
grep -q "translation-de-en" "$work/exported/config.json" ||
  fail "the exported config does not name the task: $(cat "$work/exported/config.json")"

# Training goes on from a checkpoint (--init): the same architecture, its weights as the start.
"$CABERT" -q finetune --task translation --init "$work/model/best.cabert" --data "$slice" --dev "$work/dev.tsv" \
  --epochs 1 --lr 1e-3 --max-tokens 1500 --model-dir "$work/continued" > /dev/null
"$CABERT" inspect "$work/continued/best.cabert" | grep 'initialised_from" value: "[^"]*model/best.cabert' > /dev/null ||
  fail "--init is not recorded as the starting point"

# Bad parallel input: mismatched line counts name both files and counts; exit 3.
mkdir -p "$work/short"
head -n 5 "$slice/train.en" > "$work/short/train.en"
cp "$slice/train.de" "$work/short/train.de"
expect_exit 3 "train.en" "$CABERT" -q finetune --task translation --preset wu-lightconv-tiny \
  --tokenizer "$work/joint.model" --data "$work/short" --dev "$work/dev.tsv" --model-dir "$work/bad"
grep -q "train.de" "$work/err" || fail "the mismatch error does not name train.de: $(cat "$work/err")"
# An encoder preset cannot translate; a classification checkpoint is not an encoder-decoder.
expect_exit 2 "encoder-decoder" "$CABERT" -q finetune --task translation --preset bert-tiny-none \
  --tokenizer "$work/joint.model" --data "$slice" --dev "$work/dev.tsv" --model-dir "$work/bad2"
echo "translation CLI: ok"
