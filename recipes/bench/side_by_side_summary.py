"""Summary of a recipes/bench/side_by_side.sh run: per round ratios, and their medians across rounds.

    side_by_side_summary.py OUT_DIR/cabert.md

On a shared machine the same binary's time moves by 10-40% from minute to minute, so a ratio is only
meaningful between runs made close together: this takes ratios inside each round (the binaries and HF take
turns within it) and reports their median across rounds, with every round's value, so that the spread shows.
Ratios:
  - composite attention / SDPA on plain attention, per binary and length (SDPA runs from the same binary);
  - the first binary / each other binary, for every op and model row (above 1: the later binary is faster);
  - HF ConvBertForMaskedLM / each binary's convbert-small (the rounds of HF_DIR runs).
Also the best (smallest) time of every row over all rounds: the op rows' fastest repeat, the model rows'
first quartile.
"""
import collections
import json
import re
import statistics
import sys


def parse(path):
    """{(round, binary, row, length): (median ms, best ms)}, binaries in order of appearance."""
    times, binaries, current = {}, [], None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        heading = re.match(r"## round (\d+): (.*)", line)
        if heading:
            current = (int(heading.group(1)), heading.group(2).strip())
            if current[1] not in binaries and not current[1].startswith("HF"):
                binaries.append(current[1])
            continue
        if line.startswith('{"round"'):
            row = json.loads(line)
            times[(row["round"], "HF", "convbert-small", row["seq"])] = (row["median_ms"], row["q1_ms"])
            continue
        if current is None or not line.startswith("| ") or line.startswith("| op ") or line.startswith("| model "):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in ("composite-attention", "sdpa") and len(cells) >= 11:
            times[(current[0], current[1], cells[0], int(cells[4]))] = (float(cells[8]), float(cells[10].split("-")[0]))
        elif len(cells) >= 7 and re.match(r"[\d.]+ \(", cells[6]):
            median = float(cells[6].split()[0])
            q1 = float(cells[6].split("(")[1].split("-")[0])
            times[(current[0], current[1], cells[0], int(cells[3]))] = (median, q1)
    return times, binaries


def short(binary):
    return binary if binary == "HF" else binary.rstrip("/").split("/")[-1]


def ratio_rows(times, binaries):
    rounds = sorted({key[0] for key in times})
    rows = collections.OrderedDict()

    def add(name, numerator, denominator):
        values = []
        for r in rounds:
            if (r, *numerator) in times and (r, *denominator) in times:
                values.append(times[(r, *numerator)][0] / times[(r, *denominator)][0])
        if values:
            rows[name] = values

    measures = sorted({(key[2], key[3]) for key in times if key[1] != "HF"})
    for binary in binaries:
        for row, length in measures:
            if row == "composite-attention":
                add(f"composite / SDPA, T={length}: {short(binary)}", (binary, row, length), (binary, "sdpa", length))
    for binary in binaries[1:]:
        for row, length in measures:
            if row == "sdpa":
                continue
            add(f"{row} T={length}: {short(binaries[0])} / {short(binary)}", (binaries[0], row, length),
                (binary, row, length))
    for binary in binaries:
        for row, length in measures:
            if row == "convbert-small":
                add(f"HF / convbert-small T={length}: {short(binary)}", ("HF", row, length), (binary, row, length))
    return rows


def main():
    times, binaries = parse(sys.argv[1])
    if not times:
        sys.exit(f"{sys.argv[1]}: no benchmark rows (expected the Markdown of recipes/bench/side_by_side.sh)")
    print("| ratio (per round, median ms / median ms) | median over rounds | rounds |")
    print("|---|---:|---|")
    for name, values in ratio_rows(times, binaries).items():
        print(f"| {name} | {statistics.median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    print()
    print("| row | T | binary | best ms over rounds | median of round medians |")
    print("|---|---:|---|---:|---:|")
    grouped = collections.defaultdict(list)
    for (r, binary, row, length), value in times.items():
        grouped[(row, length, binary)].append(value)
    order = {binary: i for i, binary in enumerate(binaries + ["HF"])}
    for row, length, binary in sorted(grouped, key=lambda key: (key[0], key[1], order[key[2]])):
        values = grouped[(row, length, binary)]
        best = min(value[1] for value in values)
        median = statistics.median(value[0] for value in values)
        print(f"| {row} | {length} | {short(binary)} | {best:.1f} | {median:.1f} |")


if __name__ == "__main__":
    main()
