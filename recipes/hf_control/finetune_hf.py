"""Positive control of cabert's fine-tuning (issue 59): the weights `cabert export` wrote for a row that a
Hugging Face class computes exactly (absolute-position BERT), fine-tuned on a GLUE task with transformers' own
Trainer and the same data, hyperparameters, seeds and [CLS] pooling as `cabert finetune`; prints one JSON line per
seed with the best dev score over the epochs (cabert keeps its best epoch too).

    python finetune_hf.py --model EXPORT_DIR --task SST-2 --data GLUE/SST-2 --seeds 42 43 44 \
        --lr 3e-4 --epochs 3 --batch-size 32 --max-length 128 --max-train-examples 10000

Matched with cabert's defaults: AdamW (0.9, 0.999), eps 1e-6, no weight decay unless --weight-decay, linear warm-up
over 10% of the steps then linear decay to 0, gradient norm clipped at 1, dropout from the config, inputs
"[CLS] a [SEP] (b [SEP])" cut longest-first to --max-length, the first --max-train-examples training rows in file
order, the GLUE-style score (SST-2 accuracy, MRPC mean of F1 and accuracy, CoLA MCC, STS-B mean of Pearson and
Spearman), the head: cabert's is dropout -> dense -> tanh -> dropout -> output on [CLS], which is transformers'
ElectraClassificationHead / ConvBertClassificationHead (the classes cabert exports these rows as) with its GELU
replaced by tanh, done here (docs/export.md; BertForSequenceClassification's pooler -> dropout -> classifier lacks
the first dropout). Different by construction: the order of the batches and the dropout masks (each
framework's generator), the initial draw of the head, and the warm-up's rounding (transformers: ceil(0.1 x
steps), cabert: round).
"""
import argparse
import csv
import json
import math
import sys

import numpy as np
import sentencepiece
import torch
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

CLS, SEP, PAD = 2, 3, 0
# GLUE's column names per task: (first text, second text or None, label).
COLUMNS = {"SST-2": ("sentence", None, "label"), "CoLA": (3, None, 1), "MRPC": ("#1 String", "#2 String", "Quality"),
           "STS-B": ("sentence1", "sentence2", "score")}


def read_rows(path, task):
    first, second, label = COLUMNS[task]
    with open(path, newline="", encoding="utf-8-sig") as f:  # (GLUE's MRPC files start with a BOM)
        if task == "CoLA":  # no header: source, label, original label, sentence
            return [(r[first], None, r[label]) for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [(r[first], r[second] if second else None, r[label]) for r in reader]


def encode(sp, a, b, max_length):
    a, b = sp.encode(a), (sp.encode(b) if b is not None else None)
    budget = max_length - (3 if b is not None else 2)
    while len(a) + (len(b) if b is not None else 0) > budget:
        longer = a if b is None or len(a) >= len(b) else b
        longer.pop()
    ids = [CLS] + a + [SEP] + ((b + [SEP]) if b is not None else [])
    segments = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
    return ids, segments


class Rows(torch.utils.data.Dataset):
    def __init__(self, encoded, labels):
        self.encoded, self.labels = encoded, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.encoded[i][0], "token_type_ids": self.encoded[i][1], "labels": self.labels[i]}


def collate(rows):
    width = max(len(r["input_ids"]) for r in rows)
    pad = lambda xs, v: xs + [v] * (width - len(xs))
    ids = torch.tensor([pad(r["input_ids"], PAD) for r in rows])
    return {"input_ids": ids, "token_type_ids": torch.tensor([pad(r["token_type_ids"], 0) for r in rows]),
            "attention_mask": ids.ne(PAD).long(), "labels": torch.tensor([r["labels"] for r in rows])}


def ranks(x):
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    for value in np.unique(x):  # ties share their mean rank
        r[x == value] = r[x == value].mean()
    return r


def pearson(x, y):
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


def glue_score(task, predictions, labels):
    if task == "STS-B":
        return 100 * (pearson(predictions, labels) + pearson(ranks(predictions), ranks(labels))) / 2
    accuracy = float((predictions == labels).mean())
    if task == "SST-2":
        return 100 * accuracy
    tp = float(((predictions == 1) & (labels == 1)).sum())
    fp = float(((predictions == 1) & (labels == 0)).sum())
    fn = float(((predictions == 0) & (labels == 1)).sum())
    tn = float(((predictions == 0) & (labels == 0)).sum())
    if task == "MRPC":
        f1 = 2 * tp / (2 * tp + fp + fn) if tp > 0 else 0.0
        return 100 * (f1 + accuracy) / 2
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))  # CoLA: MCC
    return 100 * ((tp * tn - fp * fn) / denominator if denominator > 0 else 0.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, choices=sorted(COLUMNS))
    p.add_argument("--data", required=True, help="a GLUE task directory: train.tsv, dev.tsv")
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-train-examples", type=int, default=0)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--output-dir", default="hf-control-out")
    a = p.parse_args()

    sp = sentencepiece.SentencePieceProcessor(model_file=f"{a.model}/tokenizer.model")
    regression = a.task == "STS-B"
    splits = {}
    for split in ("train", "dev"):
        rows = read_rows(f"{a.data}/{split}.tsv", a.task)
        if split == "train" and a.max_train_examples > 0:
            rows = rows[: a.max_train_examples]
        encoded = [encode(sp, x, y, a.max_length) for x, y, _ in rows]
        labels = [float(l) if regression else int(l) for _, _, l in rows]
        splits[split] = Rows(encoded, labels)
    dev_labels = np.array(splits["dev"].labels)
    for seed in a.seeds:
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_pretrained(
            a.model, num_labels=1 if regression else 2, problem_type="regression" if regression else None)
        head = getattr(model, "classifier", None)
        if hasattr(head, "activation"):
            head.activation = torch.nn.Tanh()  # cabert's pooler: tanh, where ELECTRA's head has GELU
        args = TrainingArguments(
            output_dir=f"{a.output_dir}/seed-{seed}", learning_rate=a.lr, num_train_epochs=a.epochs,
            per_device_train_batch_size=a.batch_size, per_device_eval_batch_size=64, warmup_steps=0.1,
            lr_scheduler_type="linear", weight_decay=a.weight_decay, adam_beta1=0.9, adam_beta2=0.999,
            adam_epsilon=1e-6, max_grad_norm=1.0, seed=seed, eval_strategy="epoch", save_strategy="no",
            logging_strategy="no", report_to=[], use_cpu=not torch.cuda.is_available(),
            dataloader_num_workers=0)

        def metrics(prediction):
            logits = prediction.predictions
            predicted = logits.reshape(-1) if regression else logits.argmax(-1)
            return {"score": glue_score(a.task, predicted, dev_labels)}

        trainer = Trainer(model=model, args=args, train_dataset=splits["train"], eval_dataset=splits["dev"],
                          data_collator=collate, compute_metrics=metrics)
        trainer.train()
        scores = [e["eval_score"] for e in trainer.state.log_history if "eval_score" in e]
        print(json.dumps({"task": a.task, "seed": seed, "class": type(model).__name__, "best_score": max(scores),
                          "epoch_scores": scores}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
