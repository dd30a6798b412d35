# Live metrics (issue 17, part 4): metrics.cabert grows while a run goes on (`inspect --json` on the running job
# shows its records, with "complete":false), a run killed outright leaves a file that still reads, a resumed run
# carries the records up to its checkpoint (each step once) and its wall_seconds go on from them, and finetune
# appends the mean training loss of every --log-every updates.
source "$(dirname "$0")/lib.sh"
train_tokenizer
"$CABERT" -q build-corpus -m "$work/tok.model" -i "$sample/gutenberg/11-0.txt" --input-format gutenberg \
  --max-length 32 -o "$work/corpus"
run=(pretrain --preset bert-tiny-composite --corpus "$work/corpus" --model-dir "$work/pt" --batch-size 4
     --save-every 5 --threads 1)

# count FIELD=VALUE in the JSON lines of `inspect`; the summary line is the last one.
train_records() { "$CABERT" inspect --json --limit -1 "$1" | grep -c '"phase":"train"' || true; }

"$CABERT" -q "${run[@]}" --steps 100000 &
pid=$!
seen=0
for _ in $(seq 1 600); do
  if [ -s "$work/pt/metrics.cabert" ]; then
    seen=$(train_records "$work/pt/metrics.cabert")
    [ "$seen" -ge 12 ] && break
  fi
  kill -0 "$pid" 2>/dev/null || fail "the run ended before its metrics could be read"
  sleep 0.2
done
[ "$seen" -ge 12 ] || fail "metrics.cabert showed $seen train records while the run went on"
"$CABERT" inspect --json --limit 0 "$work/pt/metrics.cabert" | tail -n 1 | grep '"complete":false' > /dev/null \
  || fail "a running job's metrics do not say they are incomplete"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
"$CABERT" inspect "$work/pt/metrics.cabert" > "$work/killed.txt" || fail "the killed run's metrics do not read"
grep -q "still being written" "$work/killed.txt" || fail "inspect does not say the file is unfinished"

checkpoint=$(ls "$work/pt"/checkpoint-*.cabert | tail -n 1)
at=$((10#$(basename "$checkpoint" .cabert | sed 's/checkpoint-//')))
[ "$at" -ge 5 ] || fail "no checkpoint before the kill: $(ls "$work/pt")"
"$CABERT" -q "${run[@]}" --resume --steps $((at + 3)) \
  2> "$work/resume.err" || fail "resume: $(cat "$work/resume.err")"
"$CABERT" inspect --json --limit -1 "$work/pt/metrics.cabert" > "$work/resumed.json"
tail -n 1 "$work/resumed.json" | grep '"complete":true' > /dev/null || fail "the finished run's metrics lack their footer"
steps=$(grep '"phase":"train"' "$work/resumed.json" | sed 's/.*"step":"\{0,1\}\([0-9]*\).*/\1/' | tr '\n' ' ')
expected=$(seq 1 $((at + 3)) | tr '\n' ' ')
[ "$steps" = "$expected" ] || fail "train steps after the resume: '$steps', expected '$expected'"
walls=$(grep '"phase":"train"' "$work/resumed.json" | sed 's/.*"wall_seconds":\([0-9.e+-]*\).*/\1/')
echo "$walls" | sort -g -c || fail "wall_seconds go back across the resume: $(echo "$walls" | tr '\n' ' ')"

# inspect's text mode shows every value of a record, sorted by name (a map's order is unspecified).
"$CABERT" inspect --limit 1 "$work/pt/metrics.cabert" | grep '^record 1:' > "$work/record1.txt"
keys=$(sed 's/.*values: {\([^}]*\)}.*/\1/' "$work/record1.txt" | tr ',' '\n' | sed 's/^ *\([a-z_]*\):.*/\1/' | tr '\n' ' ')
# (Files and grep -m 1 instead of `| head`: under pipefail, the writer dies of SIGPIPE when head stops reading first.)
"$CABERT" inspect --json --limit 1 "$work/pt/metrics.cabert" > "$work/record1.json"
json_keys=$(grep -m 1 '"phase"' "$work/record1.json" | python3 -c \
  'import json, sys; print(" ".join(sorted(json.loads(sys.stdin.readline())["values"])) + " ")')
[ "$keys" = "$json_keys" ] || fail "inspect text mode shows values '$keys', the record holds '$json_keys'"

# finetune: TRAIN records every --log-every updates, readable with the epochs' records.
head -n 101 "$sample/SST-2/train.tsv" > "$work/train.tsv"
head -n 31 "$sample/SST-2/dev.tsv" > "$work/dev.tsv"
"$CABERT" -q finetune --init "$checkpoint" --task SST-2 --train "$work/train.tsv" --dev "$work/dev.tsv" --epochs 2 \
  --batch-size 10 --log-every 4 --model-dir "$work/ft"
"$CABERT" inspect --json --limit -1 "$work/ft/metrics.cabert" > "$work/ft.json"
trains=$(grep -c '"kind":"TRAIN"' "$work/ft.json" || true)
[ "$trains" = 5 ] || fail "finetune wrote $trains TRAIN records for 20 updates at --log-every 4: $(cat "$work/ft.json")"
grep -m 1 '"kind":"TRAIN"' "$work/ft.json" | grep '"step":"4".*"train_loss":' > /dev/null \
  || fail "the first TRAIN record: $(grep -m 1 '"kind":"TRAIN"' "$work/ft.json")"
[ "$(grep -c '"kind":"EPOCH"' "$work/ft.json")" = 2 ] || fail "finetune lost its EPOCH records"
echo "live_metrics: ok"
