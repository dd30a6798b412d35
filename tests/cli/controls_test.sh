# The controls of a fine-tuning table (issue 59 item 2), checked against a hand computation from the data files:
# each dev record's control (the majority training label's score), the truncated training and dev examples (token
# counts from `tokenize encode`), and `evaluate --summarize`: the control row, the truncated row, the floor mark
# (mean - control <= SEM over the runs) and the GLUE average with and without the floor tasks, in markdown, TSV
# and JSON alike.
source "$(dirname "$0")/lib.sh"
train_tokenizer
head -n 201 "$sample/SST-2/train.tsv" > "$work/sst-train.tsv"
head -n 101 "$sample/SST-2/dev.tsv" > "$work/sst-dev.tsv"
# A CoLA-shaped task (no header; source, label, mark, sentence) from other SST-2 rows.
sed -n '202,401p' "$sample/SST-2/train.tsv" | awk -F'\t' '{print "src\t" $2 "\t\t" $1}' > "$work/cola-train.tsv"
sed -n '102,181p' "$sample/SST-2/dev.tsv" | awk -F'\t' '{print "src\t" $2 "\t\t" $1}' > "$work/cola-dev.tsv"
for pair in SST-2:sst CoLA:cola; do
  task=${pair%:*} lower=${pair#*:}
  "$CABERT" --threads 1 finetune --preset bert-tiny-absolute --tokenizer "$work/tok.model" --task "$task" \
    --train "$work/$lower-train.tsv" --dev "$work/$lower-dev.tsv" --epochs 1 --runs 2 --max-length 12 \
    --batch-size 32 --name tiny --model-dir "$work/ft/$task" > /dev/null 2> "$work/$task.err" ||
    fail "finetune $task: $(cat "$work/$task.err")"
  grep -q "finetune: $task dev control: score" "$work/$task.err" || fail "$task: the log does not give the control"
  "$CABERT" inspect "$work/ft/$task/metrics.cabert" --json --limit -1 > "$work/$task.json"
done
# Sentences' token counts: [CLS] sentence [SEP] is longer than 12 when the sentence has more than 10 pieces.
for split in sst-train sst-dev cola-train cola-dev; do
  if [[ $split == sst* ]]; then tail -n +2 "$work/$split.tsv" | cut -f1; else cut -f4 "$work/$split.tsv"; fi |
    "$CABERT" -q tokenize encode -m "$work/tok.model" -o "$work/$split.tokens"
  "$CABERT" inspect "$work/$split.tokens" --json --limit -1 > "$work/$split.tokens.json"
done
for format in markdown tsv json; do
  "$CABERT" evaluate --summarize "$work/ft" --format "$format" > "$work/summary.$format"
done
python3 - "$work" <<'PY'
import json, math, sys
work = sys.argv[1]

def rows(path, label, header):
    lines = open(path).read().splitlines()[1 if header else 0:]
    return [line.split("\t")[label] for line in lines]

def long_examples(split):
    lines = [json.loads(l) for l in open(f"{work}/{split}.tokens.json")]
    return sum(len(l["ids"]) + 2 > 12 for l in lines if "ids" in l)

def by_hand(task, lower, header, label):
    train, dev = rows(f"{work}/{lower}-train.tsv", label, header), rows(f"{work}/{lower}-dev.tsv", label, header)
    majority = "1" if train.count("1") > train.count("0") else "0"  # a tie: the first label, "0"
    if task == "CoLA":
        control = 0.0  # MCC of a constant
    else:
        control = 100 * dev.count(majority) / len(dev)
    records = [json.loads(l) for l in open(f"{work}/{task}.json")]
    best = [r for r in records if r.get("kind") == "BEST_OF_RUN"]
    assert len(best) == 2, best
    for r in records:
        if r.get("kind") not in ("EPOCH", "BEST_OF_RUN"):
            continue
        assert abs(r.get("control_score", 0) - control) < 1e-9 and "control_score" in r, (task, r, control)
        assert f"majority training label '{majority}' ({train.count(majority)} of {len(train)})" in r["control"], r
        assert int(r["train_truncated"]) == long_examples(f"{lower}-train"), (r, long_examples(f"{lower}-train"))
        assert int(r["train_examples"]) == len(train) and int(r["dev_truncated"]) == long_examples(f"{lower}-dev"), r
    scores = [r.get("score", 0) for r in best]
    mean = sum(scores) / 2
    sem = math.sqrt(sum((s - mean) ** 2 for s in scores)) / math.sqrt(2)  # sd with n - 1 = 1, / sqrt(2)
    return {"control": control, "mean": mean, "sem": sem, "floor": mean - control <= sem + 1e-9,
            "truncated": f"{long_examples(lower + '-train')} of {len(train)} / {long_examples(lower + '-dev')} of {len(dev)}"}

tasks = {"CoLA": by_hand("CoLA", "cola", False, 1), "SST-2": by_hand("SST-2", "sst", True, 1)}
order = ["CoLA", "SST-2"]
floors = [t for t in order if tasks[t]["floor"]]
glue = sum(tasks[t]["mean"] for t in order) / 2
control_glue = sum(tasks[t]["control"] for t in order) / 2

summary = json.load(open(f"{work}/summary.json"))
assert summary["floor_tasks"] == floors, (summary["floor_tasks"], tasks)
model = summary["models"][0]
assert abs(model["glue"] - glue) < 1e-9, (model["glue"], glue)
assert abs(summary["control_glue"] - control_glue) < 1e-9
for t in order:
    cell = model["tasks"][t]
    assert abs(cell["mean"] - tasks[t]["mean"]) < 1e-9 and abs(cell["sem"] - tasks[t]["sem"]) < 1e-9, (cell, tasks[t])
    assert abs(summary["controls"][t]["low"] - tasks[t]["control"]) < 1e-9
# Without the floor tasks one GLUE task is left at most: no second average (it needs two tasks), shown as "-".
assert "glue_without_floor" not in model, model

head = [f"{t} (floor)" if t in floors else t for t in order] + ["GLUE"] + (["GLUE w/o floor"] if floors else [])
fmt = lambda x: f"{x:.1f}"
rest = ["-"] if floors else []
want_tsv = ["\t".join(["model"] + head),
            "\t".join(["tiny"] + [f"{fmt(tasks[t]['mean'])} +- {fmt(tasks[t]['sem'])}" for t in order] + [fmt(glue)] + rest),
            "\t".join(["control"] + [fmt(tasks[t]["control"]) for t in order] + [fmt(control_glue)] + rest),
            "\t".join(["truncated train / dev"] + [tasks[t]["truncated"] for t in order] + ["-"] + rest)]
got_tsv = open(f"{work}/summary.tsv").read().splitlines()
assert got_tsv == want_tsv, (got_tsv, want_tsv)
markdown = open(f"{work}/summary.markdown").read().splitlines()
for want, line in zip(want_tsv, [markdown[0]] + markdown[2:5]):
    assert line == "| " + want.replace("\t", " | ").replace(" +- ", " ± ") + " |", (line, want)
assert any(l.startswith("Control: the task's score on its dev set") for l in markdown), markdown
PY
echo "controls: ok"
