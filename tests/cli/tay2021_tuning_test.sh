# `make -C recipes/tay2021 smoke` with its per-cell tuning (issue 60) at a size that runs in about a minute: one
# model (t5-tiny) pre-trained for a few steps, then for each initialisation and task a grid of 2 learning rates x
# 2 schedules on a dev split carved from the training data, and 2 seeds at the chosen point scored on the reported
# split. Checked against the recipe's files, read with Python's json (not the recipe's sed/awk): the carved splits
# partition the training file, each cell's chosen point is its grid's best carved-dev score, every seed has one
# evaluation record of the reported split, and the table has a row per cell; a second make has nothing to do.
source "$(dirname "$0")/lib.sh"
python=${CABERT_PYTHON:-python3}
command -v make > /dev/null || { echo "make is absent: skipped"; exit 77; }
settings=(CABERT="$CABERT" OUT="$work/out" MODELS=t5 STEPS=4 BATCH=4 SEEDS=2 EPOCHS=1 MAX_TRAIN=40
          "TUNE_LRS=1e-3 3e-3" VOCAB=1000 MAX_SENTENCES=20000 CORPUS="$sample/gutenberg"
          SST2="$sample/SST-2")
make -s -C "$CABERT_SOURCE_DIR/recipes/tay2021" smoke "${settings[@]}" > "$work/make.out" 2> "$work/make.err" ||
  fail "make smoke failed: $(tail -n 30 "$work/make.err")"
for f in "$work"/out/tune/*/*/*/metrics.cabert "$work"/out/ft/*/*/report-*.metrics; do
  "$CABERT" inspect --json --limit -1 "$f" > "${f%.*}.json"
done
"$python" - "$work/out" "$sample/SST-2/train.tsv" << 'PY' || fail "the recipe's files disagree with its table (above)"
import glob, json, os, sys

out, sst2_train = sys.argv[1], sys.argv[2]
table = open(os.path.join(out, "smoke-table.md")).read()

sys.path.insert(0, os.path.join(os.environ["CABERT_SOURCE_DIR"], "tests", "cli"))
from recipe_records import checker, records
check = checker(table)

train = open(sst2_train).read().splitlines()
carved_train = open(os.path.join(out, "carved/sst2/train.tsv")).read().splitlines()
carved_dev = open(os.path.join(out, "carved/sst2/dev.tsv")).read().splitlines()
check(carved_train[0] == carved_dev[0] == train[0], "the carved splits lack the header")
check(sorted(carved_train[1:] + carved_dev[1:]) == sorted(train[1:]), "the carved splits do not partition train.tsv")
check(carved_dev[1:] == train[1:][9::10], "dev.tsv is not every 10th training example")
for init in ("pretrained", "raw"):
    for task in ("sst2", "trec"):
        cell = os.path.join(out, "tune", f"t5-{init}", task)
        points = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(cell, "*/metrics.json")))
        check(points == ["lr1e-3-constant", "lr1e-3-linear", "lr3e-3-constant", "lr3e-3-linear"], f"{cell}: {points}")
        best = {p: [r.get("score", 0.0) for r in records(os.path.join(cell, p, "metrics.json"))
                    if r["kind"] == "BEST_OF_RUN"][-1] for p in points}
        chosen = open(os.path.join(cell, "chosen.flags")).read().split()
        point = f"lr{chosen[1]}-{chosen[3]}"
        # The best carved-dev score; on a tie the first point in the grid's order (TUNE_LRS, then TUNE_SCHEDULES).
        order = [f"lr{lr}-{schedule}" for lr in ("1e-3", "3e-3") for schedule in ("linear", "constant")]
        expected = next(p for p in order if best[p] == max(best.values()))
        check(chosen[0] == "--lr" and chosen[2] == "--lr-schedule" and point == expected,
              f"{cell}: chose {chosen} of {best}, expected {expected}")
        reports = sorted(glob.glob(os.path.join(out, "ft", f"t5-{init}", task, "report-*.json")))
        check(len(reports) == 2, f"{task} {init}: {reports}")
        for report in reports:
            evaluations = [r for r in records(report) if r["kind"] == "EVALUATION"]
            check(len(evaluations) == 1, f"{report}: {evaluations}")
        check(f"| t5-tiny {init} {task} | {' '.join(chosen)} |" in table, f"no table row for t5-tiny {init} {task}")
    check(f"| t5-tiny {init} |" in table, f"no score row for t5-tiny {init}")
PY
make -q -C "$CABERT_SOURCE_DIR/recipes/tay2021" "$work/out/smoke-table.md" "${settings[@]}" ||
  fail "a second make smoke would run again: $(make -n -C "$CABERT_SOURCE_DIR/recipes/tay2021" "$work/out/smoke-table.md" "${settings[@]}" | head)"
# The ablation rows, asked for after the first table: fine-tunings from the same pre-trained checkpoint with the
# decoder redrawn or the sentinel prefix, each through its own grid, and nothing else (make builds the missing
# rows although the table is newer than what they are made from).
make -n -C "$CABERT_SOURCE_DIR/recipes/tay2021" smoke "${settings[@]}" \
  "ABLATIONS=reinit-decoder sentinel-prefix" > "$work/dry.txt" 2>&1 || fail "make -n with ABLATIONS failed"
[ "$(grep -c -- " finetune " "$work/dry.txt")" = 20 ] ||
  fail "with ABLATIONS make would run other than the 20 ablation fine-tunings: $(grep -- " finetune " "$work/dry.txt")"
for flag in --reinit-decoder --target-sentinel-prefix; do
  n=$(grep -c -- "finetune --init $work/out/pt/t5/final.cabert $flag" "$work/dry.txt" || true)
  [ "$n" = 10 ] || fail "expected 10 fine-tunings with $flag (2 tasks x 4 grid points + 2 final), got $n"
done
# Adafactor points asked for after the first table: one more grid point per cell (4 cells), with T5's optimiser
# and a constant schedule, and the cells' final runs again since their grids grew.
make -n -C "$CABERT_SOURCE_DIR/recipes/tay2021" smoke "${settings[@]}" TUNE_ADAFACTOR_LRS=1e-3 > "$work/dry.txt" 2>&1 ||
  fail "make -n with TUNE_ADAFACTOR_LRS failed"
n=$(grep -c -- " finetune .* --optimizer adafactor --lr 1e-3 --lr-schedule constant .*adafactor-lr1e-3-constant" \
  "$work/dry.txt" || true)
[ "$n" = 4 ] || fail "expected 4 Adafactor grid points, got $n: $(grep -- " finetune " "$work/dry.txt")"
[ "$(grep -c -- " finetune " "$work/dry.txt")" = 8 ] ||
  fail "expected 4 grid points and 4 final runs: $(grep -- " finetune " "$work/dry.txt")"
# small-cpu: the same table through SIZE_SETS (here a narrower FFN) and MODEL_SIZE, under OUT/small-cpu; then
# carried across sittings: a save after all but one pre-trained cell keeps that model's final.cabert and no other
# checkpoint nor the corpus, and the restored folder leaves make only that cell to run, with no pre-training.
sc_settings=("${settings[@]}" OUT="$work/sc" SIZE_SETS=intermediate_size=48 MODEL_SIZE=tiny-f48
             SC_PROGRESS="$work/progress.tar.gz")
make -s -C "$CABERT_SOURCE_DIR/recipes/tay2021" small-cpu "${sc_settings[@]}" > "$work/sc.out" 2> "$work/sc.err" ||
  fail "make small-cpu failed: $(tail -n 30 "$work/sc.err")"
grep -q "with intermediate_size=48 encoder-decoders" "$work/sc/small-cpu/small-cpu-table.md" ||
  fail "the small-cpu table does not name its SIZE_SETS: $(head -n 3 "$work/sc/small-cpu/small-cpu-table.md")"
grep -q "| t5-tiny-f48 pretrained trec |" "$work/sc/small-cpu/small-cpu-table.md" ||
  fail "the small-cpu table has no row for t5-tiny-f48"
grep -q 'intermediate_size: 48' "$work/sc/small-cpu/pt/t5/config.textproto" ||
  fail "the pre-trained model does not have SIZE_SETS' FFN: $(cat "$work/sc/small-cpu/pt/t5/config.textproto")"
rm -r "$work/sc/small-cpu/ft/t5-pretrained/trec"
make -s -C "$CABERT_SOURCE_DIR/recipes/tay2021" small-cpu-save "${sc_settings[@]}" > /dev/null ||
  fail "make small-cpu-save failed"
saved=$(tar -tzf "$work/progress.tar.gz")
grep -qx "pt/t5/final.cabert" <<< "$saved" || fail "the save lacks the final.cabert an unfinished cell needs: $saved"
checkpoints=$(grep '\.cabert$' <<< "$saved" | grep -v '/metrics\.cabert$' | grep -vx 'pt/t5/final.cabert' || true)
[ -z "$checkpoints" ] || fail "the save holds checkpoints: $checkpoints"
! grep -qx corpus <<< "$saved" || fail "the save holds the corpus"
restored=("${sc_settings[@]}" OUT="$work/restored")
make -s -C "$CABERT_SOURCE_DIR/recipes/tay2021" small-cpu-restore "${restored[@]}" > /dev/null ||
  fail "make small-cpu-restore failed"
left=$(make -n -C "$CABERT_SOURCE_DIR/recipes/tay2021" "$work/restored/small-cpu/small-cpu-table.md" SCALE=small-cpu \
       "${restored[@]}" 2>&1)
[ "$(grep -c -- " finetune " <<< "$left")" = 1 ] && grep -q "ft/t5-pretrained/trec" <<< "$left" ||
  fail "after the restore make would run more than the unfinished cell: $left"
! grep -q -- " pretrain \| build-corpus \|tokenize train" <<< "$left" ||
  fail "after the restore make would pre-train again: $left"
echo "ok"
