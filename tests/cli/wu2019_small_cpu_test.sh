# `make -C recipes/wu2019 small-cpu` end to end at a size that runs in about a minute: tiny models on the shipped
# Multi30k slice, a grid of 2 warm-ups (x pre-norm for the Transformer), then 2 seeds each trained until --patience
# stops them, averaged, beam 5 on the test split. Checked against the files the recipe wrote, read here with
# Python's json (not the recipe's sed/awk): the chosen point of each model is the grid's best val BLEU, the table's
# mean +- SEM is the seeds' test BLEU, every seed ran the epochs its patience allowed, the picture is a PNG; and a
# second `make` has nothing left to do; the progress saved without checkpoints and restored elsewhere leaves only
# what had not finished.
source "$(dirname "$0")/lib.sh"
python=${CABERT_PYTHON:-python3}
command -v make > /dev/null || { echo "make is absent: skipped"; exit 77; }
slice="$CABERT_SOURCE_DIR/tests/data/mt/multi30k-slice"
data="$work/data"
mkdir -p "$data"
for lang in de en; do
  gzip -c "$slice/train.$lang" > "$data/train.$lang.gz"
  head -n 30 "$slice/test.$lang" | gzip -c > "$data/val.$lang.gz"
  gzip -c "$slice/test.$lang" > "$data/test_2016_flickr.$lang.gz"
done
settings=(CABERT="$CABERT" DATA="$data" OUT="$work/out" SIZE=tiny VOCAB=300 MAX_TOKENS=1500 SC_LRS=3e-3
          "SC_WARMUPS=5 20" SC_GRID_EPOCHS=1 SC_EPOCHS=3 SC_PATIENCE=1 SC_AVERAGE=2 "SC_SEEDS=1 2")
make -s -C "$CABERT_SOURCE_DIR/recipes/wu2019" small-cpu "${settings[@]}" > "$work/make.out" 2> "$work/make.err" ||
  fail "make small-cpu failed: $(tail -n 30 "$work/make.err")"
sc="$work/out/small-cpu"
for m in wu-lightconv wu-dynamicconv transformer; do
  for s in 1 2; do
    "$CABERT" inspect --json --limit -1 "$sc/final/$m/seed$s/metrics.cabert" > "$sc/final/$m/seed$s/metrics.json"
    "$CABERT" inspect --json --limit -1 "$sc/final/$m/seed$s/test.metrics" > "$sc/final/$m/seed$s/test.json"
  done
  for point in "$sc/grid/$m"/*/; do "$CABERT" inspect --json --limit -1 "$point/metrics.cabert" > "$point/metrics.json"; done
done
[ "$(head -c 8 "$sc/curves_dev_by_update.png" | od -An -tx1 | tr -d ' ')" = "89504e470d0a1a0a" ] ||
  fail "curves_dev_by_update.png is not a PNG: $(ls "$sc")"
"$python" - "$sc" << 'EOF' || fail "the recipe's files disagree with its table (above)"
import glob, json, math, os, sys

sc = sys.argv[1]
table = open(os.path.join(sc, "table.md")).read()

sys.path.insert(0, os.path.join(os.environ["CABERT_SOURCE_DIR"], "tests", "cli"))
from recipe_records import checker, records
check = checker(table)
all_capped = []

for model in ["wu-lightconv", "wu-dynamicconv", "transformer"]:
    points = sorted(os.path.basename(p.rstrip("/")) for p in glob.glob(os.path.join(sc, "grid", model, "*/")))
    check(len(points) == (4 if model == "transformer" else 2), f"{model}: grid points {points}")
    best = {p: [r.get("score", 0.0) for r in records(os.path.join(sc, "grid", model, p, "metrics.json"))
                if r["kind"] == "BEST_OF_RUN"][-1] for p in points}
    chosen = open(os.path.join(sc, "chosen", model + ".point")).read().strip()
    check(best[chosen] == max(best.values()), f"{model}: chose {chosen} of {best}")
    bleu = []
    capped = []
    for seed in (1, 2):
        run = os.path.join(sc, "final", model, f"seed{seed}")
        scores = [r.get("score", 0.0) for r in records(os.path.join(run, "metrics.json")) if r["kind"] == "EPOCH"]
        # --patience 1 within --epochs 3: the run stops after the first epoch that does not beat the best.
        allowed = next((e for e in range(2, len(scores) + 1) if scores[e - 1] <= max(scores[:e - 1])), 3)
        check(len(scores) == allowed, f"{model} seed {seed}: {len(scores)} epochs for val BLEU {scores}")
        check(os.path.exists(os.path.join(run, "averaged.cabert")) == (len(scores) >= 2), f"{model}: averaged.cabert")
        if len(scores) == 3 and scores[-1] > max(scores[:-1]):
            capped.append(f"{model} seed {seed}")
        times = dict(line.split() for line in open(os.path.join(run, "time.txt")))
        check(float(times.get("cpu_seconds", 0)) > 0 and float(times["train_seconds"]) >= 0,
              f"{model} seed {seed}: time.txt {times}")  # the run's CPU seconds, from bash's times
        test = [r for r in records(os.path.join(run, "test.json")) if r["kind"] == "EVALUATION"]
        check(len(test) == 1 and test[0]["metrics"]["decode_tokens_per_second"] > 0, f"{model}: test record {test}")
        bleu.append(test[0].get("score", 0.0))
    mean = sum(bleu) / 2
    sem = math.sqrt(sum((b - mean) ** 2 for b in bleu) / 1 / 2)
    row = [line for line in table.splitlines() if line.startswith(f"| {model}-tiny | {chosen} |")]
    check(len(row) == 1, f"{model}: no table row with its chosen point {chosen}")
    check(f"| {mean:.2f} ± {sem:.2f} |" in row[0], f"{model}: expected test BLEU {mean:.2f} ± {sem:.2f} in {row[0]}")
    # train s: the mean of the runs' own clocks (BEST_OF_RUN seconds, carried across a resume), not time.txt's.
    clocks = [[r["seconds"] for r in records(os.path.join(sc, "final", model, f"seed{s}", "metrics.json"))
               if r["kind"] == "BEST_OF_RUN"][-1] for s in (1, 2)]
    check(f"| {sum(clocks) / 2:.0f} |" in row[0], f"{model}: expected train s {sum(clocks) / 2:.0f} in {row[0]}")
    # One lr (both ends of SC_LRS) and two warm-ups: every choice is on the grid's edge, and the table says which.
    warmup = "the shortest warm-up" if "-wu5" in chosen else "the longest warm-up"
    edge = f"{model}'s point is on the grid's edge (the smallest lr, the largest lr, {warmup})"
    check(edge in table, f"{model}: the table lacks '{edge}'")
    all_capped += capped
# The runs the --epochs cap stopped while their last epoch was their best: named as not converged.
not_converged = ("stopped them while their last epoch still had their best val BLEU): "
                 f"{', '.join(all_capped) or 'none'}.")
check(not_converged in table, f"the table lacks '{not_converged}'")
EOF
make -q -C "$CABERT_SOURCE_DIR/recipes/wu2019" "$sc/table.md" "${settings[@]}" ||
  fail "a second make small-cpu would run again: $(make -n -C "$CABERT_SOURCE_DIR/recipes/wu2019" "$sc/table.md" "${settings[@]}" | head)"
# The table's minutes for the final runs are their wall seconds (train and test) summed, not their CPU seconds.
for t in "$sc"/final/*/seed*/time.txt; do printf 'train_seconds 600\ncpu_seconds 1150.5\ntest_seconds 60\n' > "$t"; done
rm "$sc/table.md"
make -s -C "$CABERT_SOURCE_DIR/recipes/wu2019" "$sc/table.md" "${settings[@]}" > /dev/null 2>&1 ||
  fail "remaking the table failed"
grep -q ' 66 min for the final runs and tests' "$sc/table.md" ||
  fail "expected 66 min (6 runs x 660 s) for the final runs: $(grep -o '[0-9]* min for the final' "$sc/table.md")"
grep -q 'training had 1.92 cores busy' "$sc/table.md" ||
  fail "expected 1.92 cores busy (1150.5 / 600): $(grep -o 'had [^ ]* cores busy' "$sc/table.md")"
# Across sittings: the saved progress (no checkpoints) restored into another OUT leaves only the table to make;
# with one final run unfinished at the save, that run (and the table) is all that is left.
recipe="$CABERT_SOURCE_DIR/recipes/wu2019"
make -s -C "$recipe" small-cpu-save "${settings[@]}" SC_PROGRESS="$work/progress.tar.gz" > /dev/null ||
  fail "small-cpu-save failed"
tar -tzf "$work/progress.tar.gz" | grep -q 'best.cabert$' && fail "the saved progress holds checkpoints"
restored=(CABERT="$CABERT" DATA="$data" OUT="$work/restored" SIZE=tiny VOCAB=300 MAX_TOKENS=1500 SC_LRS=3e-3
          "SC_WARMUPS=5 20" SC_GRID_EPOCHS=1 SC_EPOCHS=3 SC_PATIENCE=1 SC_AVERAGE=2 "SC_SEEDS=1 2")
make -s -C "$recipe" small-cpu-restore "${restored[@]}" SC_PROGRESS="$work/progress.tar.gz" > /dev/null ||
  fail "small-cpu-restore failed"
make -n -C "$recipe" small-cpu "${restored[@]}" > "$work/after-restore" || fail "make -n after the restore failed"
grep -q ' finetune ' "$work/after-restore" && fail "after the restore, make would train again: $(grep ' finetune ' "$work/after-restore" | head -n 3)"
grep -q 'export --metrics' "$work/after-restore" || fail "after the restore, make would not remake the table"
rm "$sc/final/transformer/seed2/test.metrics"
make -s -C "$recipe" small-cpu-save "${settings[@]}" SC_PROGRESS="$work/partial.tar.gz" > /dev/null
rm -rf "$work/restored"
make -s -C "$recipe" small-cpu-restore "${restored[@]}" SC_PROGRESS="$work/partial.tar.gz" > /dev/null
[ -e "$work/restored/small-cpu/final/transformer/seed2" ] && fail "the unfinished final run was saved"
make -n -C "$recipe" small-cpu "${restored[@]}" > "$work/after-partial"
[ "$(grep -c ' finetune ' "$work/after-partial")" = 1 ] && grep ' finetune ' "$work/after-partial" | grep -q 'seed2' ||
  fail "expected one training run, transformer seed 2, left after restoring: $(grep ' finetune ' "$work/after-partial")"
echo "ok"
