#!/usr/bin/env python3
"""Prints the sacreBLEU values that tests/unit/eval/translation_metrics_test.cc keeps as constants.

    python3 -m venv /tmp/sbvenv && /tmp/sbvenv/bin/pip install sacrebleu==2.6.0
    /tmp/sbvenv/bin/python tests/data/mt/sacrebleu_reference_values.py tests/data/mt

Scores are printed with repr() (full double precision), never the rounded CLI string. The inline cases
(TOKENIZER_CASES, EDGE_HYPS, EDGE_REFS) are spelled identically in the C++ test.
"""
import sys

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

TOKENIZER_CASES = [
    "Hello, world!",
    "It costs 3.5 dollars, not 1,000.",
    "U.S.A. and e.g. x.,y 1.,2 a..b ... 5. .5 ,5 5,",
    '"Quoted" text, (parens) [brackets] {braces} <angle> @user #tag $5.00 50% a&b ~x^y_z|w\\v`u',
    "don't -- e-mail 2-3 10- -4 A-1 1-A x-y",
    "café, naïve. Ünïcödé — «quoted» 3.5–4,0 km… straße,",
    "&quot;x&quot; &amp;lt; &amp;amp; &lt;b&gt; & ;",
    "<skipped>word <skipped> end-\nnext a\nb line-",
    "tab\tseparated\u00a0nbsp\u2009thin\u3000ideo\u200bzwsp\x1cfs  ",
    "",
    "   ",
    "a-\n",
]

EDGE_HYPS = [
    "The café's naïve owner paid 3.5 euros, not 1,000.",
    '"Hello," she said -- "it\'s 9-5 work."',
    "",
    "tab\tseparated\u00a0nbsp words  ",
    "<skipped>A line-\nbroken &quot;quote&quot; &amp;lt; end",
    "Ünïcödé — «quoted» 3.5–4,0 km…",
    "short",
    "x.,y 1.,2 a..b U.S.A. $5.00 (parens) [a]{b} @user #tag",
]
EDGE_REFS = [
    "The café's naive owner paid 3.5 euros, not 1,000 .",
    '"Hello", she said - "it is 9-5 work".',
    "An empty hypothesis gets nothing.",
    "tab separated nbsp words",
    'A linebroken "quote" < end',
    "Unicode — «quoted» 3.5-4.0 km...",
    "",
    "x., y 1.,2 a.. b U.S.A. $5.00 (parens) [a] {b} @user #tag",
]

HAND_HYPS = ["the cat sat on the mat", "a dog runs"]
HAND_REFS = ["the cat is on the mat", "a dog runs fast"]


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        text = f.read()
    assert text.endswith("\n")
    return text[:-1].split("\n")


def show(name, hyps, refs):
    bleu = BLEU()
    b = bleu.corpus_score(hyps, refs)
    b_none = BLEU(smooth_method="none").corpus_score(hyps, refs)
    chrf = CHRF()
    c = chrf.corpus_score(hyps, refs)
    print(f"== {name}")
    print(f"  {b}")
    print(f"  {bleu.get_signature()}")
    print(f"  bleu score={b.score!r} precisions={b.precisions!r}")
    print(f"  bp={b.bp!r} ratio={b.ratio!r} sys_len={b.sys_len} ref_len={b.ref_len}")
    print(f"  counts={b.counts} totals={b.totals}")
    print(f"  bleu smooth=none score={b_none.score!r}")
    print(f"  {c}")
    print(f"  {chrf.get_signature()}")
    print(f"  chrf score={c.score!r}")


def main(data_dir):
    print(f"sacrebleu {sacrebleu.__version__}")
    tok = Tokenizer13a()
    for case in TOKENIZER_CASES:
        print(f"tok {case!r} -> {tok(case)!r}")
    hyp = read_lines(f"{data_dir}/hyp.en")
    ref = read_lines(f"{data_dir}/ref.en")
    ref2 = read_lines(f"{data_dir}/ref2.en")
    show("multi30k single reference", hyp, [ref])
    show("multi30k two references", hyp, [ref, ref2])
    show("edge cases", EDGE_HYPS, [EDGE_REFS])
    show("hand-computed", HAND_HYPS, [HAND_REFS])
    show("chrF by hand", ["ab"], [["abc"]])
    show("closest reference length tie", ["a b c d e"], [["a b c d"], ["a b c d e f"]])
    show("code points", ["café"], [["cafe"]])
    show("trailing -newline", ["x y z w a-\n"], [["x y z w a-"]])


if __name__ == "__main__":
    main(sys.argv[1])
