"""One markdown row of finetune_hf.py's results, laid out as `cabert evaluate --summarize` lays out cabert's: per
task the mean over the pre-training runs of each run's mean over its fine-tuning seeds, +- the SEM over the
pre-training runs (over the fine-tuning seeds when there is one pre-training run), and the best run in brackets;
then the GLUE-style average of the task means.

    python table.py ROW TASK... -- FILE.jsonl...   (each file: one pre-training run's seeds on one task)
"""
import json
import math
import sys


def mean_sem(values):
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))


def main():
    split = sys.argv.index("--")
    row, tasks, files = sys.argv[1], sys.argv[2:split], sys.argv[split + 1:]
    runs = {task: [] for task in tasks}  # task -> one list of fine-tuning scores per pre-training run
    for path in files:
        scores = [json.loads(line) for line in open(path) if line.startswith('{"task"')]  # (Trainer prints dicts too)
        if scores:
            runs[scores[0]["task"]].append([s["best_score"] for s in scores])
    cells = []
    for task in tasks:
        if not runs[task]:
            cells.append("-")
            continue
        per_run = [sum(r) / len(r) for r in runs[task]]
        mean, sem = mean_sem(per_run if len(per_run) > 1 else runs[task][0])
        best = max(max(r) for r in runs[task])
        cells.append(f"{mean:.1f} ± {sem:.1f} ({best:.1f})")
    means = [float(c.split(" ")[0]) for c in cells if c != "-"]
    glue = f"{sum(means) / len(means):.1f}" if len(means) >= 2 else "-"  # as the summary: from two tasks on
    print(f"| {row} | " + " | ".join(cells) + f" | {glue} |")


if __name__ == "__main__":
    main()
