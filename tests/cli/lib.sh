# Helpers for the CLI tests (sourced). $CABERT is the binary, $CABERT_SOURCE_DIR the source tree.
set -euo pipefail
: "${CABERT:?set CABERT to the cabert binary}"
: "${CABERT_SOURCE_DIR:?set CABERT_SOURCE_DIR to the source tree}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sample="$CABERT_SOURCE_DIR/recipes/quickstart/data"

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_exit CODE MESSAGE_SUBSTRING command...: runs the command, checks its exit code and stderr.
expect_exit() {
  local want=$1 message=$2; shift 2
  local got=0
  "$@" >"$work/out" 2>"$work/err" || got=$?
  [ "$got" = "$want" ] || fail "expected exit $want, got $got from: $* (stderr: $(cat "$work/err"))"
  [ -z "$message" ] || grep -qF -- "$message" "$work/err" || fail "stderr of '$*' lacks '$message': $(cat "$work/err")"
}

train_tokenizer() {
  "$CABERT" -q tokenize train -i "$sample/gutenberg/11-0.txt" --input-format gutenberg --vocab-size 500 \
    --sentinels 4 --lowercase --byte-fallback --model-prefix "$work/tok"
}
