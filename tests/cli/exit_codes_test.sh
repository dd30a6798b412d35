# Exit codes and messages: 2 usage, 3 bad input, 128+signal; no half-written outputs.
source "$(dirname "$0")/lib.sh"
expect_exit 2 "give --model CKPT (export) or --from-hf DIR (import)" "$CABERT" export
expect_exit 2 "not expected: --no-such-flag" "$CABERT" tokenize encode -m x --no-such-flag
expect_exit 2 "required" "$CABERT" tokenize train -i x
expect_exit 2 "cannot open input file $work/missing.txt" "$CABERT" tokenize encode -m "$work/missing.txt"
expect_exit 0 "" "$CABERT" --help
for sub in tokenize build-corpus pretrain finetune evaluate export bench inspect; do
  "$CABERT" --help | grep "^  $sub " > /dev/null || fail "$sub missing from cabert --help"
  "$CABERT" $sub --help >/dev/null || fail "$sub --help failed"
done

# Standard output that cannot be written (a full disk): exit 1 with the reason, not a silent 0.
if [ -w /dev/full ]; then
  for command in "pretrain --list-presets" "--dump-options pretrain"; do
    got=0; "$CABERT" $command > /dev/full 2> "$work/err" || got=$?
    [ "$got" = 1 ] || fail "'cabert $command > /dev/full' exited $got: $(cat "$work/err")"
    grep -qF "cannot write to standard output: No space left on device" "$work/err" || fail "$(cat "$work/err")"
  done
fi

# Plain text where a record file is expected.
expect_exit 3 "$CABERT_SOURCE_DIR/tests/data/sentences.txt: at byte offset 0: not a cabert record file" \
  "$CABERT" inspect "$CABERT_SOURCE_DIR/tests/data/sentences.txt"
train_tokenizer
"$CABERT" -q tokenize encode -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" -o "$work/tokens"

# --version names the commit the binary was built from (one of this checkout's, when built from one), and every
# file records it in its header as SemVer build metadata.
version=$("$CABERT" --version)
[[ "$version" =~ ^cabert\ ([0-9]+\.[0-9]+\.[0-9]+)\ \(commit\ (([0-9a-f]{12})(-dirty)?|unknown)\)$ ]] ||
  fail "cabert --version: '$version'"
number=${BASH_REMATCH[1]} commit=${BASH_REMATCH[2]} hash=${BASH_REMATCH[3]}
if [ -n "$hash" ] && git -C "$CABERT_SOURCE_DIR" rev-parse --git-dir > /dev/null 2>&1; then
  git -C "$CABERT_SOURCE_DIR" cat-file -e "$hash^{commit}" 2> /dev/null || fail "--version names $hash, not a commit here"
fi
"$CABERT" inspect "$work/tokens" --limit 0 > "$work/inspect.out"
grep -qxF "cabert_version: \"$number+$commit\"" "$work/inspect.out" ||
  fail "the header does not record $number+$commit: $(head -n 8 "$work/inspect.out")"

size=$(stat -c %s "$work/tokens")
head -c $((size - 20)) "$work/tokens" > "$work/truncated"
expect_exit 3 "$work/truncated: at byte offset" "$CABERT" tokenize decode -m "$work/tok.model" -i "$work/truncated" -o "$work/out.txt"
grep -qF "truncated file" "$work/err" || fail "truncation not named: $(cat "$work/err")"
[ ! -e "$work/out.txt" ] || fail "a failed decode left $work/out.txt behind"
# Wrong record type: a corpus given to decode.
"$CABERT" -q build-corpus -i "$work/tokens" -o "$work/corpus"
expect_exit 3 "expected tokenized text, got pretraining examples" "$CABERT" tokenize decode -m "$work/tok.model" -i "$work/corpus"
# Another tokenizer than the one that encoded the records.
"$CABERT" -q tokenize train -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" --vocab-size 60 --sentinels 1 --model-prefix "$work/other"
expect_exit 3 "encoded with a different tokenizer" "$CABERT" tokenize decode -m "$work/other.model" -i "$work/tokens"

# SIGTERM while build-corpus waits on a pipe: exit 143 and no output under the final name.
# interrupt STDERR_FILE ARGS...: cabert ARGS reading "One sentence." from a pipe (a FIFO) that stays open until it
# has its signal handler and has been sent SIGTERM; $code is its exit status.
interrupt() {
  local errors=$1 pid
  shift
  rm -f "$work/feed"
  mkfifo "$work/feed"
  "$CABERT" "$@" < "$work/feed" 2> "$errors" &
  pid=$!
  exec 3> "$work/feed"
  echo "One sentence." >&3
  await_signal_handler $pid
  kill -TERM $pid 2> /dev/null || true
  exec 3>&-
  code=0
  wait $pid || code=$?
}
interrupt "$work/text.err" -q build-corpus -m "$work/tok.model" -i - -o "$work/interrupted"
[ "$code" = 143 ] || fail "expected exit 143 after SIGTERM, got $code ($(cat "$work/text.err"))"
[ ! -e "$work/interrupted" ] || fail "an interrupted build-corpus left its output behind"
ls -a "$work" | grep '\.tmp\.' > /dev/null && fail "temporary file left behind"
# With --log-format json, the notice the signal handler writes is a JSON line like every other (it was text).
interrupt "$work/json.err" --log-format json build-corpus -m "$work/tok.model" -i - -o "$work/interrupted"
[ "$code" = 143 ] || fail "expected exit 143 after SIGTERM, got $code"
python3 - "$work/json.err" <<'PY' || fail "stderr under --log-format json: $(cat "$work/json.err")"
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
objects = [json.loads(line) for line in lines]  # every line parses
notice = [o for o in objects if o["message"].startswith("signal received")]
assert len(notice) == 1 and notice[0]["level"] == "warning" and notice[0]["subcommand"] == "build-corpus", lines
assert notice[0]["source"] == "cabert" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", notice[0]["time"]), lines
PY
echo "exit codes: ok"
