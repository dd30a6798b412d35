#!/usr/bin/env python3
"""Regenerates ref.en, ref2.en and hyp.en (the translation-metric test data) from Multi30k.

    python3 tests/data/mt/make_mt_test_data.py ../shared/data/mt/multi30k/test_2016_flickr.en.gz tests/data/mt

ref.en  = lines 201..400 of Multi30k test_2016_flickr.en, unchanged.
hyp.en  = a deterministic degradation of each ref.en line (rule chosen by line index, see `degrade`), standing
          in for system output until a model exists.
ref2.en = a second, paraphrased reference stream (see `paraphrase`) so that multi-reference BLEU/chrF is tested.
Plain Python, no randomness: the same input always gives byte-identical files.
"""
import gzip
import sys

FIRST_LINE, LAST_LINE = 201, 400  # 1-based, inclusive: a slice with quotes, numbers and hyphens

SUBSTITUTIONS = {
    "man": "person", "woman": "lady", "boy": "kid", "girl": "child", "dog": "puppy", "A": "The",
    "is": "was", "are": "were", "in": "inside", "on": "upon", "a": "the", "shirt": "top", "with": "carrying",
}

EDGE_SUFFIXES = [
    " It cost 3.5 dollars, not 1,000.",
    ' "Really?" she asked -- it\'s a 2-3 score.',
    " A café with naïve art; très bien!",
    " See &quot;tag&quot; &amp; co. (U.S.A.)",
    " Rated 10-2, 4.5/5 @home #1 [ok] {x} ~50% $20 <3",
]

# Some of these agree with SUBSTITUTIONS, so that the second reference matches n-grams the first one misses.
PARAPHRASES = {"man": "person", "dog": "puppy", "children": "kids", "shirt": "top", "people": "persons"}

SPECIAL = {57: "", 123: '"...!?" -- (ok) [yes]; ...', 150: "Ünïcödé straße — «quoted» 3.5–4,0 km."}


def substitute(words):
    return [SUBSTITUTIONS.get(w, w) for w in words]


def degrade(i, line):
    if i in SPECIAL:
        return SPECIAL[i]
    words = line.split()
    rule = i % 10
    if rule == 0:
        return line
    if rule == 1:
        words = [w for j, w in enumerate(words) if j % 4 != 3]
    elif rule == 2 and len(words) > 3:
        words[1], words[2] = words[2], words[1]
    elif rule == 3:
        words = substitute(words)
    elif rule == 4:
        words = words[: (len(words) * 6 + 9) // 10]
        return " ".join(words).rstrip(".") + "."
    elif rule == 5:
        words[0] = words[0].lower()
        return " ".join(words).rstrip(".")
    elif rule == 6 and len(words) > 2:
        words = words[:2] + words[1:-1] + ["very"] + words[-1:]
    elif rule == 7 and len(words) > 3:
        words = words[:1] + words[1:-1][::-1] + words[-1:]
    elif rule == 8:
        words = [w for j, w in enumerate(substitute(words)) if j % 5 != 4]
    elif rule == 9:
        return line + EDGE_SUFFIXES[(i // 10) % len(EDGE_SUFFIXES)]
    return " ".join(words)


def paraphrase(i, line):
    if i % 7 == 0:
        return line
    words = line.split()
    if words and words[0] == "A":
        words[0] = "One"
    words = [PARAPHRASES.get(w, w) for w in words]
    if i % 7 == 3 and len(words) > 4:
        words = words[:-2]
    return " ".join(words).rstrip(".")


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(line + "\n" for line in lines))


def main(source, out_dir):
    with gzip.open(source, "rt", encoding="utf-8") as f:
        refs = f.read().split("\n")[FIRST_LINE - 1:LAST_LINE]
    assert len(refs) == LAST_LINE - FIRST_LINE + 1
    write_lines(f"{out_dir}/ref.en", refs)
    write_lines(f"{out_dir}/ref2.en", [paraphrase(i, r) for i, r in enumerate(refs)])
    write_lines(f"{out_dir}/hyp.en", [degrade(i, r) for i, r in enumerate(refs)])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
