# Adafactor against transformers' own (transformers.optimization.Adafactor): tests/python/adafactor_reference.py
# runs it for four steps on fixed parameters, gradients and learning rates in three settings (T5's, without the
# parameter scale, with a first moment, weight decay and clipping), and the AdafactorParity gtests
# (tests/unit/train/adafactor_test.cc) check that cabert's steps give the same parameters to 1e-12. Then the
# command line: --optimizer adafactor fine-tunes text-to-text, its header and records say so, and an optimiser
# translation does not take is refused (exit 2). The parity part is skipped (the rest runs) without a Python that
# has torch, safetensors and transformers ($CABERT_PYTHON).
source "$(dirname "$0")/lib.sh"
train_tokenizer
head -n 201 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 41 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" finetune --preset tay-lightconv-tiny --tokenizer "$work/tok.model" --task SST-2 --train "$work/train.tsv" \
  --dev "$work/dev.tsv" --epochs 1 --optimizer adafactor --lr-schedule constant --model-dir "$work/ft" \
  > "$work/ft.out" 2> "$work/ft.err" || fail "finetune --optimizer adafactor: $(cat "$work/ft.err")"
grep -q "then constant, adafactor" "$work/ft.err" || fail "the header names no optimiser: $(cat "$work/ft.err")"
grep -q "; lr 0.001, " "$work/ft.err" || fail "Adafactor's default lr is not T5's 1e-3: $(cat "$work/ft.err")"
"$CABERT" inspect --json --limit 1 "$work/ft/metrics.cabert" > "$work/ft.json"
grep -q '"optimizer":"adafactor"' "$work/ft.json" || fail "metrics.cabert lacks --optimizer: $(cat "$work/ft.json")"
expect_exit 2 "--optimizer: expected adamw or adafactor, got 'sgd'" "$CABERT" -q finetune --preset tay-lightconv-tiny \
  --tokenizer "$work/tok.model" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --optimizer sgd \
  --model-dir "$work/sgd"
[ ! -e "$work/sgd" ] || fail "the refused run made its model directory"
expect_exit 2 "--optimizer: not for --task translation" "$CABERT" -q finetune --task translation \
  --preset transformer-tiny --tokenizer "$work/tok.model" --data "$work" --optimizer adafactor --model-dir "$work/mt"

python=${CABERT_PYTHON:-}
if [ -z "$python" ] || ! "$python" -c 'import torch, safetensors, transformers' 2> /dev/null; then
  echo "parity with transformers skipped: CABERT_PYTHON unset or without torch, safetensors and transformers"
  exit 0
fi
tests_binary="$(dirname "$CABERT")/../tests/cabert_tests"
[ -x "$tests_binary" ] || fail "no gtest binary at $tests_binary (build the target cabert_tests)"
"$python" "$CABERT_SOURCE_DIR/tests/python/adafactor_reference.py" "$work/adafactor.safetensors" ||
  fail "adafactor_reference.py failed"
CABERT_ADAFACTOR_REFERENCE="$work/adafactor.safetensors" "$tests_binary" --gtest_filter='AdafactorParity.*' \
  > "$work/gtest.out" 2>&1 || fail "cabert's Adafactor differs from transformers': $(cat "$work/gtest.out")"
grep -q "\[  PASSED  \] 3 tests" "$work/gtest.out" || fail "expected 3 parity tests to pass: $(cat "$work/gtest.out")"
grep -q "SKIPPED" "$work/gtest.out" && fail "a parity test skipped: $(cat "$work/gtest.out")"
echo "cabert's Adafactor equals transformers': $(grep -c '^\[       OK \]' "$work/gtest.out") tests"
