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

# await_signal_handler PID: waits (at most 60 s) until the process catches SIGTERM (/proc/PID/status, SigCgt bit 15;
# cabert installs its handler first thing in main, just before parsing its options), so that a test's signal
# reaches the handler rather than killing a process still starting up (seconds under the sanitizers).
await_signal_handler() {
  local pid=$1 mask _
  for _ in $(seq 600); do
    mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2> /dev/null) || return 0
    [ -n "$mask" ] || return 0
    if (((16#$mask >> 14) & 1)); then
      sleep 0.2  # the options parsed (the log format set)
      return 0
    fi
    sleep 0.1
  done
}

train_tokenizer() {
  "$CABERT" -q tokenize train -i "$sample/gutenberg/11-0.txt" --input-format gutenberg --vocab-size 500 \
    --sentinels 4 --lowercase --byte-fallback --model-prefix "$work/tok"
}
