"""Training-step time of a Hugging Face masked-LM model, the public baseline of `cabert bench --model`.

    hf_model_step.py HF_DIR --seq 128,512 [--batch 8] [--threads 2] [--repeats 3] [--warmup 1] [--optimizer fused]
                     [--device cpu|cuda|cuda:N] [--amp]

HF_DIR is a `cabert export` of a cabert checkpoint (config.json + model.safetensors), so the architecture is
exactly the preset's; loaded with transformers' AutoModelForMaskedLM (ConvBertForMaskedLM for convbert-*), in
training mode (dropout on, as cabert's bench). A step is what `cabert bench --model` times: zero_grad, forward
with labels (15% of positions predicted, position 1 always), cross-entropy, backward, AdamW(lr 1e-4) step, on
random ids in [5, vocab) with segments 0 | 1 halves. The AdamW is torch's fused kernel by default, as cabert's
and as transformers' Trainer picks on torch >= 2.8 ("adamw_torch_fused"); `--optimizer loop` takes torch's
per-tensor loop (the default of torch.optim.AdamW on the CPU, and of this script before 2026-11-28). Prints one
JSON object per length: median, quartiles, min and max in ms, tokens per second.

Timed as `cabert bench --model` times its steps: on the CPU by the wall clock; on CUDA (--device) by CUDA events
on the current stream around each step, the device synchronised before it, with the wall clock's median beside
them ("wall_median_ms"). --amp runs the forward (and the loss) under bfloat16 autocast, as `cabert bench --amp`.
"""
import argparse
import json
import statistics
import time

import torch
import transformers


def int_list(text):
    return [int(part) for part in text.split(",") if part]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hf_dir")
    parser.add_argument("--seq", type=int_list, default=[128, 512])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--optimizer", choices=["fused", "loop"], default="fused")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        if device.index is None:  # "cuda": the current device, named (set_device takes only an indexed one)
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)  # the events below record on its current stream
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    model = transformers.AutoModelForMaskedLM.from_pretrained(args.hf_dir).to(device)
    model.train()
    vocab = model.config.vocab_size
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.optimizer == "fused")
    for length in args.seq:
        if length > model.config.max_position_embeddings:
            raise SystemExit(f"--seq {length} exceeds max_position_embeddings {model.config.max_position_embeddings}")
        ids = torch.randint(5, vocab, (args.batch, length))
        segments = (torch.arange(length) >= length // 2).long().unsqueeze(0).expand(args.batch, length).contiguous()
        attention_mask = torch.ones_like(ids)
        selected = torch.rand(args.batch, length) < 0.15
        selected[:, 1] = True
        labels = torch.where(selected, ids, torch.full_like(ids, -100))
        ids, segments, attention_mask, labels = (t.to(device) for t in (ids, segments, attention_mask, labels))

        def step():
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
                loss = model(input_ids=ids, token_type_ids=segments, attention_mask=attention_mask,
                             labels=labels).loss
            loss.backward()
            optimizer.step()

        def timed_step():
            """(ms on the step's clock, wall ms until its work is done)"""
            if not cuda:
                start = time.perf_counter()
                step()
                ms = (time.perf_counter() - start) * 1000
                return ms, ms
            torch.cuda.synchronize(device)
            start_event = torch.cuda.Event(enable_timing=True)
            end_event = torch.cuda.Event(enable_timing=True)
            start = time.perf_counter()
            start_event.record()
            step()
            end_event.record()
            end_event.synchronize()
            return start_event.elapsed_time(end_event), (time.perf_counter() - start) * 1000

        for _ in range(args.warmup):
            timed_step()
        times, walls = [], []
        for _ in range(args.repeats):
            ms, wall = timed_step()
            times.append(ms)
            walls.append(wall)
        times.sort()
        quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        median = statistics.median(times)
        print(json.dumps({"model": type(model).__name__, "hf_dir": args.hf_dir, "batch": args.batch, "seq": length,
                          "threads": args.threads, "optimizer": args.optimizer, "device": str(device),
                          "dtype": "bfloat16 autocast" if args.amp else "float",
                          "clock": "CUDA events" if cuda else "wall clock",
                          "wall_median_ms": round(statistics.median(walls), 2),
                          "median_ms": round(median, 2), "q1_ms": round(quartiles[0], 2),
                          "q3_ms": round(quartiles[2], 2), "min_ms": round(times[0], 2), "max_ms": round(times[-1], 2),
                          "tokens_per_second": round(args.batch * length / (median / 1000), 1),
                          "torch": torch.__version__, "transformers": transformers.__version__}), flush=True)


if __name__ == "__main__":
    main()
