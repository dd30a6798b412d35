#!/usr/bin/env bash
# Whether two cabert binaries train alike: the same 200-step MLM pre-training, 1-epoch GLUE fine-tuning (SST-2
# from that pre-training) and 1-epoch translation (Multi30k slice) with each, then every checkpoint's tensors
# compared exactly (exported to safetensors and read back with the safetensors package) and every metrics record
# compared without its wall-clock fields. For refactors of the training loop, which must change neither.
#   bash scripts/training_parity.sh OLD_CABERT NEW_CABERT [OUT]   (default OUT: out/training-parity)
# Prints one line per comparison and "N passed, N failed"; exits 1 when anything differs.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$(realpath "$1") new=$(realpath "$2") out=${3:-out/training-parity}
python=${CABERT_PYTHON:-.venv/bin/python}
data=recipes/quickstart/data
mt=tests/data/mt/multi30k-slice
export OMP_WAIT_POLICY=passive
rm -rf "$out"
mkdir -p "$out/shared"
# The inputs both binaries read, made once.
"$new" -q tokenize train -i "$data/SST-2-unlabeled/sentences.txt" --vocab-size 2000 --lowercase \
  --model-prefix "$out/shared/tok"
"$new" -q build-corpus -m "$out/shared/tok.model" -i "$data/SST-2-unlabeled/sentences.txt" --max-length 48 \
  -o "$out/shared/corpus"
cat "$mt/train.de" "$mt/train.en" > "$out/shared/joint.txt"
"$new" -q tokenize train -i "$out/shared/joint.txt" --vocab-size 400 --sentinels 4 --model-prefix "$out/shared/joint"
head -n 1001 "$data/SST-2/train.tsv" > "$out/shared/train.tsv"
head -n 201 "$data/SST-2/dev.tsv" > "$out/shared/dev.tsv"

for side in old new; do
  cabert=${!side}
  run=$out/$side
  mkdir -p "$run"
  start=$(date +%s)
  "$cabert" -q --threads 1 pretrain --preset bert-tiny-composite --corpus "$out/shared/corpus" \
    --model-dir "$run/pretrain" --steps 200 --batch-size 16 --lr 1e-3 --eval-every 100 --save-every 100
  "$cabert" -q --threads 1 finetune --init "$run/pretrain/checkpoint-00000200.cabert" --task SST-2 \
    --train "$out/shared/train.tsv" --dev "$out/shared/dev.tsv" --epochs 1 --max-length 48 --lr 1e-3 \
    --log-every 5 --model-dir "$run/glue" > "$run/glue.out"
  "$cabert" -q --threads 1 finetune --task translation --preset wu-lightconv-tiny --tokenizer "$out/shared/joint.model" \
    --data "$mt" --dev-split test --max-dev-examples 20 --epochs 1 --lr 3e-3 --max-tokens 1200 --log-every 5 \
    --model-dir "$run/translation" > "$run/translation.out"
  echo "$side: trained in $(( $(date +%s) - start )) s"
done

passed=0 failed=0
check() {  # check NAME COMMAND...
  if "${@:2}" > "$out/check.log" 2>&1; then
    echo "same: $1"; passed=$((passed + 1))
  else
    echo "DIFFERENT: $1: $(tail -n 3 "$out/check.log")"; failed=$((failed + 1))
  fi
}
same_tensors() {  # two checkpoints, exported by the new binary, every tensor equal
  local a=$out/export/$3-old b=$out/export/$3-new
  "$new" -q export --model "$1" -o "$a" > /dev/null
  "$new" -q export --model "$2" -o "$b" > /dev/null
  "$python" - "$a/model.safetensors" "$b/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert a.keys() == b.keys(), f"tensor names differ: {sorted(set(a) ^ set(b))[:5]}"
bad = [name for name in a if a[name].dtype != b[name].dtype or a[name].shape != b[name].shape or (a[name] != b[name]).any()]
assert not bad, f"{len(bad)} of {len(a)} tensors differ, e.g. {bad[:3]}"
print(f"{len(a)} tensors equal")
PY
}
same_records() {  # two metrics.cabert files: every record equal but for the clock
  "$python" - <("$new" inspect --json "$1") <("$new" inspect --json "$2") <<'PY'
import json, sys
def records(path):
    rows = []
    for line in open(path):
        row = json.loads(line)
        if "header" in row or "summary" in row:  # who wrote the file, and how big it is
            continue
        for key in ("seconds", "wall_seconds", "checkpoint", "model"):  # the clock and the run's directory
            row.pop(key, None)
        if isinstance(row.get("values"), dict):
            row["values"].pop("tokens_per_second", None)
        rows.append(json.dumps(row, sort_keys=True))
    return rows
a, b = records(sys.argv[1]), records(sys.argv[2])
assert len(a) == len(b), f"{len(a)} records against {len(b)}"
diff = [i for i in range(len(a)) if a[i] != b[i]]
assert not diff, f"{len(diff)} records differ, first {diff[0]}: {a[diff[0]][:300]} / {b[diff[0]][:300]}"
print(f"{len(a)} records equal")
PY
}
for step in 00000100 00000200; do
  check "pre-training checkpoint $step" same_tensors "$out/old/pretrain/checkpoint-$step.cabert" \
    "$out/new/pretrain/checkpoint-$step.cabert" "pretrain-$step"
done
check "pre-training metrics" same_records "$out/old/pretrain/metrics.cabert" "$out/new/pretrain/metrics.cabert"
check "GLUE best.cabert" same_tensors "$out/old/glue/best.cabert" "$out/new/glue/best.cabert" glue
check "GLUE metrics" same_records "$out/old/glue/metrics.cabert" "$out/new/glue/metrics.cabert"
check "GLUE table" diff <(grep '^|' "$out/old/glue.out") <(grep '^|' "$out/new/glue.out")
for file in best last; do
  check "translation $file.cabert" same_tensors "$out/old/translation/$file.cabert" \
    "$out/new/translation/$file.cabert" "translation-$file"
done
check "translation metrics" same_records "$out/old/translation/metrics.cabert" "$out/new/translation/metrics.cabert"
check "translation table" diff <(grep '^|' "$out/old/translation.out") <(grep '^|' "$out/new/translation.out")
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
