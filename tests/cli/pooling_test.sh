# finetune --pooling mean end to end: the checkpoint records it, evaluate reloads it (the dev score of
# best.cabert is reproduced exactly), export keeps cabert's names (Hugging Face's classifiers pool [CLS]), and
# the options that cannot apply are refused with exit 2.
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 48 -o "$work/corpus"
"$CABERT" -q pretrain --preset bert-tiny-absolute --corpus "$work/corpus" --model-dir "$work/pt" --steps 10 \
  --batch-size 8 --eval-every 10 --eval-examples 16 --save-every 10
checkpoint="$work/pt/checkpoint-00000010.cabert"
head -n 301 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 121 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" \
  --epochs 2 --lr 1e-3 --pooling mean --model-dir "$work/mean" > "$work/mean.out"
"$CABERT" inspect "$work/mean/best.cabert" | grep 'key: "pooling" value: "mean"' > /dev/null ||
  fail "best.cabert does not record the pooling"
best=$(sed -n 's/.*SST-2 dev: best \([0-9.]*\).*/\1/p' "$work/mean.out")
[ -n "$best" ] || fail "finetune printed no best dev score: $(cat "$work/mean.out")"
"$CABERT" -q evaluate --model "$work/mean/best.cabert" --data "$work/dev.tsv" > "$work/eval.out"
grep -q "| SST-2 | .* | 120 | $best |" "$work/eval.out" ||
  fail "evaluate of the mean-pooled model does not reproduce its dev score $best: $(cat "$work/eval.out")"

"$CABERT" export --model "$work/mean/best.cabert" -o "$work/hf" 2> "$work/export.err"
grep -q "pools the mean of the last layer" "$work/export.err" "$work/hf/README.md" ||
  fail "export of a mean-pooled classifier does not say why it is not a Hugging Face class: $(cat "$work/export.err")"
grep -q '"model_type": "cabert"' "$work/hf/config.json" || fail "export of a mean-pooled classifier: $(head "$work/hf/config.json")"

expect_exit 2 "--pooling: expected cls or mean, got 'max'" "$CABERT" finetune --init "$checkpoint" --task SST-2 \
  --train "$work/train.tsv" --dev "$work/dev.tsv" --pooling max --model-dir "$work/max"
expect_exit 2 "--pooling mean: an encoder-decoder learns SST-2 as text-to-text" "$CABERT" finetune \
  --preset tay-dilatedconv-tiny --tokenizer "$work/tok.model" --task SST-2 --train "$work/train.tsv" \
  --dev "$work/dev.tsv" --pooling mean --model-dir "$work/t2t"
echo "pooling: ok"
