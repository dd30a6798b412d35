# Hostile and broken files (issue 15): every one is refused with exit 3 naming the file and where, and none
# makes cabert allocate what the file merely claims. The data segment is capped at 1.5 GB (cabert itself
# needs ~0.5 GB), so an allocation driven by a claimed size would fail as std::bad_alloc (exit 1).
source "$(dirname "$0")/lib.sh"
capped() { ( ulimit -d 1500000; "$@" ); }
# Under AddressSanitizer (scripts/sanitize.sh) no ulimit fits: its shadow memory alone reserves terabytes of
# address space. Its own limit on resident memory stands in (a report fails the run). GCC links ASan's runtime
# as a library, clang into the binary: either way the binary names __asan_init.
if grep -qa __asan_init "$CABERT"; then
  capped() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=3000" "$@"; }
fi

# The cabert magic, then a header-frame marker claiming an 8 GiB frame; the file is 100 bytes.
magic='\x5a\x2a\x4d\x18\x08\x00\x00\x00CABERT\x00\x01'
marker_8g='\x5b\x2a\x4d\x18\x18\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x01\x00\x00\x00\xff\xff\xff\xff\x01\x00\x00\x00'
{ printf "$magic$marker_8g"; head -c 52 /dev/zero; } > "$work/claims-8g.cabert"
[ "$(stat -c %s "$work/claims-8g.cabert")" = 100 ] || fail "the crafted file is not 100 bytes"
expect_exit 3 "$work/claims-8g.cabert: at byte offset 16: truncated file: the frame needs 8589934591 bytes, only 52 remain" \
  capped "$CABERT" inspect "$work/claims-8g.cabert"
# The same marker claiming a small compressed frame that decompresses to 8 GiB.
marker_small='\x5b\x2a\x4d\x18\x18\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x01\x00\x00\x00'
{ printf "$magic$marker_small"; head -c 16 /dev/zero; } > "$work/inflates-8g.cabert"
expect_exit 3 "$work/inflates-8g.cabert: at byte offset 16: corrupted zstd frame" \
  capped "$CABERT" inspect "$work/inflates-8g.cabert"

# Token files of two tokenizers: build-corpus without -m refuses the second; inspect -m with the smaller
# tokenizer never reads past its vocabulary.
train_tokenizer
"$CABERT" -q tokenize train -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" --vocab-size 60 --sentinels 1 \
  --model-prefix "$work/small"
"$CABERT" -q tokenize encode -m "$work/tok.model" -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" -o "$work/big.tokens"
"$CABERT" -q tokenize encode -m "$work/small.model" -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" -o "$work/small.tokens"
expect_exit 3 "$work/small.tokens: encoded with another tokenizer (checksum " \
  "$CABERT" -q build-corpus -i "$work/big.tokens" -i "$work/small.tokens" -o "$work/mixed"
[ ! -e "$work/mixed" ] || fail "a refused build-corpus left $work/mixed behind"
expect_exit 3 "$work/big.tokens: record 1: token id" "$CABERT" inspect "$work/big.tokens" -m "$work/small.model"
grep -qF "is outside the vocabulary of $work/small.model (size 60)" "$work/err" || fail "vocabulary not named: $(cat "$work/err")"
grep -qF "$work/big.tokens: encoded with a different tokenizer (checksum " "$work/err" ||
  fail "inspect -m with another tokenizer does not say so: $(cat "$work/err")"

# An empty directory where shards are expected is a usage error, not a crash.
mkdir -p "$work/no-shards"
expect_exit 2 "$work/no-shards: the directory holds no files" \
  "$CABERT" pretrain --corpus "$work/no-shards" --model-dir "$work/m" --preset bert-tiny-none --steps 1
# Task files cabert did not write: invalid UTF-8 and a NaN regression label are bad input with file and line.
printf 'text\tlabel\nok\t1\n\xff\xfe\t0\n' > "$work/bytes.tsv"
expect_exit 3 "$work/bytes.tsv:3: invalid UTF-8 at byte column 1 (0xff); expected UTF-8 text" \
  "$CABERT" finetune --preset bert-tiny-none --tokenizer "$work/small.model" --task mine --format tsv \
  --train "$work/bytes.tsv" --dev "$work/bytes.tsv" --model-dir "$work/ft"
printf 'text\tlabel\nx\t0.5\ny\tinf\n' > "$work/inf.tsv"
expect_exit 3 "$work/inf.tsv:3: expected a finite regression label, got 'inf'" \
  "$CABERT" finetune --preset bert-tiny-none --tokenizer "$work/small.model" --task mine --regression --format tsv \
  --train "$work/inf.tsv" --dev "$work/inf.tsv" --model-dir "$work/ft"
# A line past --max-line-bytes is refused, not read whole.
{ printf 'text\tlabel\n'; head -c 5000 /dev/zero | tr '\0' 'a'; printf '\t1\n'; } > "$work/long.tsv"
expect_exit 3 "$work/long.tsv:2: the line is longer than 4096 bytes (the bound is --max-line-bytes)" \
  "$CABERT" --max-line-bytes 4096 finetune --preset bert-tiny-none --tokenizer "$work/small.model" --task mine \
  --format tsv --train "$work/long.tsv" --dev "$work/long.tsv" --model-dir "$work/ft"
[ ! -e "$work/ft/best.cabert" ] || fail "a refused fine-tuning left a checkpoint"
# Pre-training text that is not UTF-8 (Latin-1 bytes) is refused at its line and column by every reader of raw
# text, and nothing is left under the output's name.
printf 'hello world\nbad \xff\xfe bytes\n' > "$work/latin1.txt"
expect_exit 3 "$work/latin1.txt:2: invalid UTF-8 at byte column 5 (0xff); expected UTF-8 text" \
  "$CABERT" tokenize encode -m "$work/small.model" -i "$work/latin1.txt" -o "$work/latin1.tokens"
[ ! -e "$work/latin1.tokens" ] || fail "a refused encode left its output"
expect_exit 3 "$work/latin1.txt:2: invalid UTF-8 at byte column 5 (0xff)" \
  "$CABERT" build-corpus -m "$work/small.model" -i "$work/latin1.txt" -o "$work/latin1.corpus"
[ ! -e "$work/latin1.corpus" ] || fail "a refused build-corpus left its output"
expect_exit 3 "$work/latin1.txt:2: invalid UTF-8 at byte column 5 (0xff)" \
  "$CABERT" tokenize train -i "$work/latin1.txt" --vocab-size 100 --sentinels 0 --model-prefix "$work/latin1"
# A truncated second shard is refused before the first step (it was found when training reached it), and the
# run leaves no checkpoint.
"$CABERT" -q build-corpus -m "$work/small.model" -i "$CABERT_SOURCE_DIR/tests/data/sentences.txt" -o "$work/two" \
  --shards 2 --max-length 32
second="$work/two-00001-of-00002"
head -c $(( $(stat -c %s "$second") - 20 )) "$second" > "$work/cut" && mv "$work/cut" "$second"
expect_exit 3 "$second: at byte offset " "$CABERT" pretrain --corpus "$work/two-00000-of-00002" --corpus "$second" \
  --model-dir "$work/cut-run" --preset bert-tiny-none --steps 1 --batch-size 2 --eval-examples 0
grep -qF "truncated file" "$work/err" || fail "the truncation is not named: $(cat "$work/err")"
[ ! -e "$work/cut-run" ] || fail "pretrain refused a truncated shard after making its model directory"
echo "hostile inputs: ok"
