# The encoder recipes cannot rot: `make smoke` of recipes/chang2021 and recipes/convbert2020 runs every step
# (tokenize, build-corpus, pretrain each row, finetune each task with 2 seeds, summarise) and prints the table
# in the papers' layout; a second `make` finds everything up to date; an interrupted pre-training resumes from
# its last checkpoint and only what depends on it is redone. GLUE from ../shared/data when it is there, else
# the shipped SST-2 sample.
source "$(dirname "$0")/lib.sh"
recipes="$CABERT_SOURCE_DIR/recipes"
if [ -f "$CABERT_SOURCE_DIR/../shared/data/glue/CoLA/train.tsv" ]; then
  tasks="CoLA SST-2 MRPC STS-B"
else
  tasks="SST-2"
fi
run_make() { make --no-print-directory -C "$recipes/$1" CABERT="$CABERT" OUT="$work/$1" THREADS=1 "${@:2}"; }

# Every paper target takes a launcher prefix: `make -n paper LAUNCH=...` shows it in front of each training command
# (pretrain, finetune) and of nothing else (tokenize, build-corpus, evaluate, inspect run as one process).
launch="torchrun --nproc-per-node 8 --no-python"
for recipe in chang2021 convbert2020 tay2021 wu2019; do
  make --no-print-directory -n -C "$recipes/$recipe" paper CABERT="$CABERT" OUT="$work/dry-$recipe" \
    LAUNCH="$launch" > "$work/dry-$recipe.txt" 2>&1 || fail "$recipe: make -n paper failed: $(tail -n 5 "$work/dry-$recipe.txt")"
  # One line per cabert command: "PREFIX|subcommand".
  # (Global options may stand before the subcommand: --threads, --seed, -q.)
  grep -oE "($launch )?$CABERT( --threads [0-9]+)?( --seed [0-9]+)?( -q)? [a-z-]+" "$work/dry-$recipe.txt" |
    sed -E "s#^(.*)$CABERT( --threads [0-9]+)?( --seed [0-9]+)?( -q)? ([a-z-]+)\$#\1|\5#" > "$work/dry-$recipe.commands"
  if grep -Eq "^\|(pretrain|finetune)\$" "$work/dry-$recipe.commands"; then
    fail "$recipe: a training command of make paper lacks LAUNCH: $(grep -E '^\|(pretrain|finetune)' "$work/dry-$recipe.commands" | head -n 3)"
  fi
  grep -Eq "^$launch \|(pretrain|finetune)\$" "$work/dry-$recipe.commands" ||
    fail "$recipe: make paper shows no training command with LAUNCH: $(head -n 5 "$work/dry-$recipe.commands")"
  if grep -Ev "^\|" "$work/dry-$recipe.commands" | grep -Evq "^$launch \|(pretrain|finetune)\$"; then
    fail "$recipe: LAUNCH prefixes a command that does not train: $(grep -Ev '^\|' "$work/dry-$recipe.commands" | grep -Ev '(pretrain|finetune)$' | head -n 3)"
  fi
  grep -Eq "^\|(tokenize|evaluate)\$" "$work/dry-$recipe.commands" ||
    fail "$recipe: make -n paper shows no tokenize/evaluate command: $(sort -u "$work/dry-$recipe.commands")"
  if make --no-print-directory -n -C "$recipes/$recipe" paper CABERT="$CABERT" OUT="$work/dry-$recipe" 2>&1 |
    grep -q torchrun; then
    fail "$recipe: make paper without LAUNCH names torchrun"
  fi
done

check_table() {  # recipe, rows...
  local recipe=$1; shift
  local table="$work/$recipe/smoke/table.md"
  [ -s "$table" ] || fail "$recipe: no table.md"
  for task in $tasks; do
    # (A task at its floor is headed "TASK (floor)".)
    grep -Eq "^\| model \|.* $task( \(floor\))? \|" "$table" || fail "$recipe: no $task column in $(cat "$table")"
  done
  # With a task at its floor, a second GLUE column: the average without it (- when fewer than two tasks remain).
  local glue=" \| -?[0-9]+\.[0-9] \(-?[0-9]+\.[0-9]\)" more=""
  grep -q "^| model |.* GLUE | GLUE w/o floor |$" "$table" && more="( \| -| \| -?[0-9]+\.[0-9] \(-?[0-9]+\.[0-9]\))"
  for row in "$@"; do
    # mean ± SEM (best) in every task cell, and the GLUE average of the means (of the best runs).
    grep -Eq "^\| $row( \|  *-?[0-9]+\.[0-9] ± [0-9]+\.[0-9] \(-?[0-9]+\.[0-9]\))+$glue$more \|$" \
      "$table" || fail "$recipe: row '$row' is not 'mean ± SEM (best)' for every task: $(cat "$table")"
    grep -Eq "^\| $row \| (-|[0-9]+) \| " "$table" || fail "$recipe: no cost row for '$row': $(cat "$table")"
  done
  # Each task's control under the rows (the GLUE of the controls too), and its truncated training / dev examples.
  grep -Eq "^\| control( \| -?[0-9]+\.[0-9])+( \| (-|-?[0-9]+\.[0-9])){1,2} \|$" "$table" ||
    fail "$recipe: no control row: $(cat "$table")"
  grep -Eq "^\| truncated train / dev( \| [0-9]+ of [0-9]+ / [0-9]+ of [0-9]+)+( \| -){1,2} \|$" "$table" ||
    fail "$recipe: no truncated-examples row: $(cat "$table")"
  grep -q "^Control: the task's score on its dev set" "$table" || fail "$recipe: the table does not say what the control is"
  grep -q "Command: \`make -C recipes/$recipe smoke" "$table" || fail "$recipe: the table does not say its command"
  head -n 1 "$table" | grep -q "^One pre-training run per row (PRETRAIN_SEEDS=1)" ||
    fail "$recipe: the smoke table's first line does not say it has one pre-training run per row: $(head -n 1 "$table")"
}

run_make chang2021 smoke > "$work/chang.out"
check_table chang2021 absolute none fixed dynamic composite composite-no-pretraining
grep -q "composite-no-pretraining | - | - |" "$work/chang2021/smoke/table.md" ||
  fail "the row without pre-training claims a pre-training cost"
grep -Eq "^\| composite \| [0-9]+ \| MLM [0-9]+\.[0-9] \| [0-9]+ \|$" "$work/chang2021/smoke/table.md" ||
  fail "the MLM row's cost does not give its held-out MLM accuracy: $(cat "$work/chang2021/smoke/table.md")"
# (`table` is phony, so make -q asks about the file it prints.)
run_make chang2021 "$work/chang2021/smoke/table.md" SCALE=smoke -q || fail "a finished make smoke is not up to date"

# A pre-trained model whose fine-tunings are all done is not needed any more: deleted, make remakes nothing.
pt="$work/chang2021/smoke/pt/composite/seed-1"
mv "$pt/final.cabert" "$work/composite-final.cabert"
run_make chang2021 "$work/chang2021/smoke/table.md" SCALE=smoke -q ||
  fail "a deleted pre-trained model whose fine-tunings are done makes make run again"
mv "$work/composite-final.cabert" "$pt/final.cabert"
# Interrupt the composite pre-training after its step-10 checkpoint (before its fine-tunings, which an interrupted
# run has not reached): make resumes it (not from step 0) and redoes only the composite row's fine-tuning.
rm -r "$pt/final.cabert" "$pt/checkpoint-00000020.cabert" "$work/chang2021/smoke/ft/composite/seed-1"
before=$(md5sum < "$work/chang2021/smoke/ft/fixed/seed-1/SST-2/metrics.cabert")
run_make chang2021 smoke > "$work/chang-resumed.out"
[ -s "$pt/checkpoint-00000020.cabert" ] || fail "the resumed pre-training wrote no step-20 checkpoint"
grep -q "resum.* step 10" "$pt/pretrain.log" || fail "pre-training did not resume from step 10: $(tail -n 5 "$pt/pretrain.log")"
[ "$before" = "$(md5sum < "$work/chang2021/smoke/ft/fixed/seed-1/SST-2/metrics.cabert")" ] ||
  fail "resuming one row redid another row's fine-tuning"

# Across sittings: with the composite row's last fine-tuning unfinished, small-cpu-save keeps the tokenizer and
# every finished unit's records but no checkpoint, not the corpus and nothing of the unfinished unit; restored
# elsewhere, make has only that unit left (its pre-training and fine-tunings), and the table says it was carried.
rm "$work/chang2021/smoke/ft/composite/seed-1/${tasks##* }/time.txt"
run_make chang2021 small-cpu-save SCALE=smoke SC_PROGRESS="$work/chang-progress.tar.gz" > /dev/null ||
  fail "make small-cpu-save failed"
saved=$(tar -tzf "$work/chang-progress.tar.gz")
grep -qx "spm.model" <<< "$saved" && grep -qx "pt/fixed/seed-1/metrics.cabert" <<< "$saved" &&
  grep -qx "ft/fixed/seed-1/SST-2/metrics.cabert" <<< "$saved" &&
  grep -qx "ft/composite-no-pretraining/SST-2/metrics.cabert" <<< "$saved" ||
  fail "the save lacks the tokenizer or a finished unit's records: $saved"
checkpoints=$(grep '\.cabert$' <<< "$saved" | grep -v '/metrics\.cabert$' || true)
[ -z "$checkpoints" ] || fail "the save holds checkpoints: $checkpoints"
! grep -q "^corpus\|/composite/" <<< "$saved" || fail "the save holds the corpus or the unfinished unit: $saved"
run_make chang2021 small-cpu-restore SCALE=smoke SC_PROGRESS="$work/chang-progress.tar.gz" OUT="$work/restored" \
  > /dev/null || fail "make small-cpu-restore failed"
left=$(run_make chang2021 -n "$work/restored/smoke/table.md" SCALE=smoke OUT="$work/restored" 2>&1)
n_tasks=$(wc -w <<< "$tasks")
[ "$(grep -c -- " finetune " <<< "$left")" = "$n_tasks" ] && [ "$(grep -c -- " pretrain " <<< "$left")" = 1 ] &&
  grep -q -- "--model-dir $work/restored/smoke/pt/composite/seed-1 " <<< "$left" ||
  fail "after the restore make would run more or less than the unfinished unit: $left"
! grep -q -- " tokenize train " <<< "$left" || fail "after the restore make would train the tokenizer again: $left"
run_make chang2021 smoke OUT="$work/restored" > "$work/chang-restored.out" || fail "the restored make smoke failed"
grep -q "carried across sittings (small-cpu-restore)" "$work/restored/smoke/table.md" ||
  fail "the restored table gives a wall time: $(sed -n 3,5p "$work/restored/smoke/table.md")"
cmp <(sed -n '/^| model/,/^$/p' "$work/chang2021/smoke/table.md") \
    <(sed -n '/^| model/,/^$/p' "$work/restored/smoke/table.md") ||
  fail "the table carried across sittings differs from the one made in one"

run_make convbert2020 smoke > "$work/convbert.out"
check_table convbert2020 electra bnk-conventional bnk-dynamic bnk-sdconv
# ELECTRA rows give the generator's MLM and the discriminator's RTD accuracy, beside RTD's trivial accuracy.
grep -Eq "^\| bnk-sdconv \| [0-9]+ \| MLM [0-9]+\.[0-9], RTD [0-9]+\.[0-9] \(trivial [0-9]+\.[0-9]\) \| [0-9]+ \|$" "$work/convbert2020/smoke/table.md" ||
  fail "an ELECTRA row's cost does not give both held-out accuracies: $(cat "$work/convbert2020/smoke/table.md")"

# Data-parallel scaling: three runs (1 process, 2 processes, 2 threads), each with its measured tokens/s and the
# ratio to one process.
make --no-print-directory -C "$CABERT_SOURCE_DIR/recipes/data_parallel" scaling CABERT="$CABERT" OUT="$work/dp" \
  STEPS=3 BATCH=8 MAX_LENGTH=32 > "$work/dp.out" 2>&1 || fail "make scaling failed: $(tail -n 20 "$work/dp.out")"
for row in "one process \| 1 x 1 \| 8 \| [0-9]+ \| 1.00" "data parallel \| 2 x 1 \| 16 \| [0-9]+ \| [0-9]+\.[0-9]{2}" \
           "intra-op threads \| 1 x 2 \| 8 \| [0-9]+ \| [0-9]+\.[0-9]{2}"; do
  grep -Eq "^\| $row \|$" "$work/dp/scaling.md" || fail "scaling.md lacks the row '$row': $(cat "$work/dp/scaling.md")"
done
