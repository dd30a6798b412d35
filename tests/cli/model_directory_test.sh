# A model directory wherever a checkpoint is expected (issue 17, part 5): finetune --init PRETRAIN_DIR takes its
# newest checkpoint that reads back (a broken newer one is skipped with a warning), evaluate / export --model
# FINETUNE_DIR take its best.cabert, and a directory with neither is a usage error naming the flag.
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 32 -o "$work/corpus"
"$CABERT" -q pretrain --preset bert-tiny-composite --corpus "$work/corpus" --model-dir "$work/pt" --steps 4 \
  --batch-size 4 --save-every 2 --keep-checkpoints 2
[ -s "$work/pt/checkpoint-00000004.cabert" ] || fail "pretrain wrote no step-4 checkpoint: $(ls "$work/pt")"
printf 'not a checkpoint' > "$work/pt/checkpoint-00000009.cabert"   # a newer file that does not read back
head -n 101 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 31 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" finetune --init "$work/pt" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --epochs 1 \
  --model-dir "$work/ft" > "$work/ft.out" 2> "$work/ft.err" || fail "finetune --init DIR: $(cat "$work/ft.err")"
grep -q "skipping $work/pt/checkpoint-00000009.cabert, which does not read back" "$work/ft.err" \
  || fail "no warning about the broken checkpoint: $(cat "$work/ft.err")"
grep -q -- "--init $work/pt: using $work/pt/checkpoint-00000004.cabert" "$work/ft.err" \
  || fail "finetune did not say which checkpoint it took: $(cat "$work/ft.err")"
"$CABERT" evaluate --model "$work/ft" --data "$work/dev.tsv" > "$work/eval.out" 2> "$work/eval.err" \
  || fail "evaluate --model DIR: $(cat "$work/eval.err")"
grep -q -- "--model $work/ft: using $work/ft/best.cabert" "$work/eval.err" || fail "evaluate: $(cat "$work/eval.err")"
"$CABERT" -q evaluate --model "$work/ft/best.cabert" --data "$work/dev.tsv" > "$work/eval-file.out"
cmp -s "$work/eval.out" "$work/eval-file.out" || fail "evaluate of the directory and of best.cabert differ"
"$CABERT" -q export --model "$work/ft" -o "$work/hf" || fail "export --model DIR failed"
[ -s "$work/hf/model.safetensors" ] || fail "export --model DIR wrote no model.safetensors"
mkdir -p "$work/empty"
expect_exit 2 "--model: $work/empty is a directory with neither best.cabert nor a readable checkpoint-<step>.cabert" \
  "$CABERT" evaluate --model "$work/empty" --data "$work/dev.tsv"
# A fine-tuning starts afresh in its directory: an earlier one's best checkpoints go, so fewer --runs leave no stale
# run-<k>/ behind. A pre-training's directory, and one whose checkpoint the run starts from, are refused before
# anything is read or written.
"$CABERT" -q finetune --init "$work/pt/checkpoint-00000004.cabert" --task SST-2 --train "$work/train.tsv" \
  --dev "$work/dev.tsv" --epochs 1 --runs 3 --model-dir "$work/runs" > /dev/null || fail "finetune --runs 3 failed"
[ -s "$work/runs/run-2/best.cabert" ] || fail "finetune --runs 3 wrote no run-2/best.cabert: $(ls "$work/runs")"
"$CABERT" finetune --init "$work/pt/checkpoint-00000004.cabert" --task SST-2 --train "$work/train.tsv" \
  --dev "$work/dev.tsv" --epochs 1 --runs 2 --model-dir "$work/runs" > /dev/null 2> "$work/runs.err" \
  || fail "finetune --runs 2 into the same directory: $(cat "$work/runs.err")"
grep -qF "finetune: removed $work/runs/run-2/best.cabert (an earlier fine-tuning's; this one starts afresh)" \
  "$work/runs.err" || fail "finetune did not say what it removed: $(cat "$work/runs.err")"
[ ! -e "$work/runs/run-2" ] || fail "an earlier fine-tuning's run-2/ stayed: $(ls "$work/runs")"
[ -s "$work/runs/run-1/best.cabert" ] && [ -s "$work/runs/best.cabert" ] || fail "finetune --runs 2: $(ls -R "$work/runs")"
cp "$work/pt/metrics.cabert" "$work/pt-metrics.before"
expect_exit 2 "--model-dir $work/pt: holds a pre-training (checkpoint-00000009.cabert) whose metrics.cabert this" \
  "$CABERT" finetune --init "$work/pt/checkpoint-00000004.cabert" --task SST-2 --train "$work/train.tsv" \
  --dev "$work/dev.tsv" --model-dir "$work/pt"
cmp -s "$work/pt/metrics.cabert" "$work/pt-metrics.before" || fail "a refused finetune changed the pre-training's metrics"
cp "$work/runs/best.cabert" "$work/best.before"
expect_exit 2 "--model-dir $work/runs: this fine-tuning replaces $work/runs/best.cabert, which it starts from" \
  "$CABERT" finetune --init-from-task "$work/runs" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --model-dir "$work/runs"
cmp -s "$work/runs/best.cabert" "$work/best.before" || fail "a refused finetune changed the checkpoint it started from"
# Nor do a translation fine-tuning and a resumed pre-training write into a fine-tuning's directory (both would
# replace its metrics.cabert); refused before the data is read (there is none here).
cp "$work/runs/metrics.cabert" "$work/runs-metrics.before"
expect_exit 2 "--model-dir $work/runs: holds a fine-tuning (best.cabert) whose metrics.cabert this translation \
fine-tuning would replace; give it its own directory" "$CABERT" finetune --task translation \
  --preset wu-lightconv-tiny --tokenizer "$work/tok.model" --data "$work/absent" --model-dir "$work/runs"
expect_exit 2 "--model-dir $work/runs: holds a fine-tuning (best.cabert) whose metrics.cabert this pre-training \
would replace; give it its own directory" "$CABERT" pretrain --preset bert-tiny-composite --corpus "$work/corpus" \
  --model-dir "$work/runs" --steps 2 --resume
cmp -s "$work/runs/metrics.cabert" "$work/runs-metrics.before" || fail "a refused run changed the fine-tuning's metrics"
# An SST-2 model is not scored as CoLA: both label sentences 0/1, but one judges sentiment, the other acceptability.
expect_exit 2 "$work/runs/best.cabert was fine-tuned on SST-2; it cannot be evaluated as CoLA (SST-2's labels judge \
sentiment, CoLA's acceptability)" "$CABERT" evaluate --model "$work/runs/best.cabert" --task CoLA --data "$work/dev.tsv"
# The run moved to a machine without the tokenizer it records: evaluate says which file is gone and what to
# pass, and --tokenizer with the same file (another path) gives the same table.
mv "$work/tok.model" "$work/moved.model"
expect_exit 2 "$work/ft/best.cabert names tokenizer '$work/tok.model', which is not there; pass --tokenizer MODEL" \
  "$CABERT" evaluate --model "$work/ft/best.cabert" --data "$work/dev.tsv"
"$CABERT" -q evaluate --model "$work/ft/best.cabert" --tokenizer "$work/moved.model" --data "$work/dev.tsv" \
  > "$work/eval-moved.out" || fail "evaluate --tokenizer with the moved tokenizer failed"
cmp -s "$work/eval-file.out" "$work/eval-moved.out" || fail "evaluate with the moved tokenizer gives another table"
echo "model_directory: ok"
