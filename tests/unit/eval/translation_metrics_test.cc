// Checks corpus BLEU, chrF and the 13a tokenizer against sacreBLEU.
//
// Every sacreBLEU constant below was printed once by
//   python3 -m venv /tmp/sbvenv && /tmp/sbvenv/bin/pip install sacrebleu   # got sacrebleu 2.6.0
//   /tmp/sbvenv/bin/python tests/data/mt/sacrebleu_reference_values.py tests/data/mt
// which uses sacrebleu.metrics.BLEU() / CHRF() with their defaults and prints scores with repr() (full
// precision). Signatures it reported: BLEU nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0,
// chrF nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 (nrefs:2 for the two-reference cases).
// The inline strings (tokenizer cases, edge corpus) are spelled identically in that script. The files under
// tests/data/mt and how they were made: tests/data/mt/PROVENANCE.md.
#include "lib/eval/translation_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/errors.h"

#ifndef CABERT_SOURCE_DIR
#error "CABERT_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace cabert::eval {
namespace {

// sacreBLEU's doubles are reproduced operation for operation, so the tolerance only absorbs libm rounding.
constexpr double kTolerance = 1e-9;

std::vector<std::string> read_lines(const std::string& name) {
  const std::string path = std::string(CABERT_SOURCE_DIR) + "/tests/data/mt/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

template <typename Action>
std::string error_message(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no cabert::Error thrown";
  return "";
}

void expect_bleu_counts(const BleuResult& result, std::array<int64_t, 4> correct, std::array<int64_t, 4> total,
                        int64_t hyp_length, int64_t ref_length) {
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(result.correct[n], correct[n]) << "order " << n + 1;
    EXPECT_EQ(result.total[n], total[n]) << "order " << n + 1;
  }
  EXPECT_EQ(result.hyp_length, hyp_length);
  EXPECT_EQ(result.ref_length, ref_length);
}

void expect_precisions(const BleuResult& result, std::array<double, 4> expected) {
  for (int n = 0; n < 4; ++n) EXPECT_NEAR(result.precisions[n], expected[n], kTolerance) << "order " << n + 1;
}

// ---- 13a tokenizer ---------------------------------------------------------------------------------------

TEST(Tokenize13a, MatchesSacrebleuTokenizer13a) {
  // Expected strings: sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(input), sacreBLEU 2.6.0.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"Hello, world!", "Hello , world !"},
      {"It costs 3.5 dollars, not 1,000.", "It costs 3.5 dollars , not 1,000 ."},
      {"U.S.A. and e.g. x.,y 1.,2 a..b ... 5. .5 ,5 5,",
       "U . S . A . and e . g . x . , y 1 . , 2 a . . b . . . 5 . . 5 , 5 5 ,"},
      {"\"Quoted\" text, (parens) [brackets] {braces} <angle> @user #tag $5.00 50% a&b ~x^y_z|w\\v`u",
       "\" Quoted \" text , ( parens ) [ brackets ] { braces } < angle > @ user # tag $ 5.00 50 % a & b ~ x ^ y _ z "
       "| w \\ v ` u"},
      {"don't -- e-mail 2-3 10- -4 A-1 1-A x-y", "don't -- e-mail 2 - 3 10 - -4 A-1 1 - A x-y"},
      {"café, naïve. Ünïcödé — «quoted» 3.5–4,0 km… straße,", "café , naïve . Ünïcödé — «quoted» 3.5–4,0 km… straße ,"},
      {"&quot;x&quot; &amp;lt; &amp;amp; &lt;b&gt; & ;", "\" x \" < & amp ; < b > & ;"},
      {"<skipped>word <skipped> end-\nnext a\nb line-", "word endnext a b line-"},
      // Python's whitespace: tab, NBSP, thin space, ideographic space, U+001C split; zero-width space does not.
      {"tab\tseparated\u00a0nbsp\u2009thin\u3000ideo\u200bzwsp\034fs  ", "tab separated nbsp thin ideo\u200bzwsp fs"},
      {"", ""},
      {"   ", ""},
      {"a-\n", "a"},
  };
  for (const auto& [input, expected] : cases) EXPECT_EQ(tokenize_13a(input), expected) << "input: " << input;
}

TEST(Tokenize13a, RejectsInvalidUtf8) {
  EXPECT_EQ(error_message([] { tokenize_13a("ab\xff"); }),
            "expected UTF-8 text, got invalid byte 0xFF at byte offset 2");
  // A UTF-16 surrogate and an overlong "/" are malformed too, as in Python's decoder.
  EXPECT_THROW(tokenize_13a("x \xed\xa0\x80"), DataError);
  EXPECT_THROW(tokenize_13a("\xc0\xaf"), DataError);
  EXPECT_THROW(tokenize_13a("truncated \xe2\x80"), DataError);
  EXPECT_EQ(tokenize_13a("four-byte \xf0\x9f\x98\x80!"), "four-byte \xf0\x9f\x98\x80 !");
}

// ---- BLEU ------------------------------------------------------------------------------------------------

TEST(CorpusBleu, IdenticalCorpusScores100) {
  const std::vector<std::string> refs = read_lines("ref.en");
  ASSERT_EQ(refs.size(), 200u);
  const BleuResult result = corpus_bleu(refs, {refs});
  EXPECT_NEAR(result.score, 100.0, kTolerance);
  EXPECT_DOUBLE_EQ(result.brevity_penalty, 1.0);
  EXPECT_EQ(result.correct, result.total);
  EXPECT_NEAR(corpus_chrf(refs, {refs}).score, 100.0, kTolerance);
}

TEST(CorpusBleu, HandComputedTwoSentences) {
  // 13a leaves these untouched. Sentence 1, "the cat sat on the mat" vs "the cat is on the mat":
  //   1-grams: the x2, cat, on, mat match, sat does not          -> 5 / 6
  //   2-grams: "the cat", "on the", "the mat" match              -> 3 / 5
  //   3-grams: "on the mat" matches                              -> 1 / 4
  //   4-grams: none of the 3 matches                             -> 0 / 3
  // Sentence 2, "a dog runs" vs "a dog runs fast": 3/3, 2/2, 1/1, 0/0.
  // Corpus: correct 8/5/2/0, total 9/7/5/3, c = 9, r = 10, BP = exp(1 - 10/9).
  // No 4-gram matches: "exp" smoothing (sacreBLEU's default) uses 100 / (2 x 3) for p4; "none" gives 0.
  const std::vector<std::string> hyps = {"the cat sat on the mat", "a dog runs"};
  const std::vector<std::string> refs = {"the cat is on the mat", "a dog runs fast"};
  const double by_hand =
      std::exp(1.0 - 10.0 / 9.0) *
      std::exp((std::log(800.0 / 9) + std::log(500.0 / 7) + std::log(40.0) + std::log(100.0 / 6)) / 4);

  const BleuResult result = corpus_bleu(hyps, {refs});
  expect_bleu_counts(result, {8, 5, 2, 0}, {9, 7, 5, 3}, 9, 10);
  EXPECT_NEAR(result.score, by_hand, kTolerance);
  EXPECT_NEAR(result.score, 40.58841603380763, kTolerance);  // sacreBLEU
  expect_precisions(result, {88.88888888888889, 71.42857142857143, 40.0, 16.666666666666668});
  EXPECT_NEAR(result.brevity_penalty, 0.8948393168143697, kTolerance);
  EXPECT_NEAR(result.ratio, 0.9, kTolerance);
  EXPECT_EQ(format_bleu(result),
            "BLEU = 40.59 88.9/71.4/40.0/16.7 (BP = 0.895 ratio = 0.900 hyp_len = 9 ref_len = 10)");

  const BleuResult plain = corpus_bleu(hyps, {refs}, BleuOptions{BleuSmoothing::kNone});
  EXPECT_EQ(plain.score, 0.0);  // sacreBLEU smooth_method="none": 0.0
  EXPECT_EQ(plain.precisions[3], 0.0);
  EXPECT_NEAR(plain.precisions[0], 88.88888888888889, kTolerance);
}

TEST(CorpusBleu, Multi30kSliceMatchesSacrebleu) {
  const BleuResult result = corpus_bleu(read_lines("hyp.en"), {read_lines("ref.en")});
  EXPECT_NEAR(result.score, 56.12282844608048, kTolerance);
  expect_precisions(result, {80.64516129032258, 59.351305812973884, 49.28735632183908, 42.054655870445345});
  expect_bleu_counts(result, {2075, 1409, 1072, 831}, {2573, 2374, 2175, 1976}, 2573, 2439);
  EXPECT_DOUBLE_EQ(result.brevity_penalty, 1.0);
  EXPECT_NEAR(result.ratio, 1.054940549405494, kTolerance);
  // str(score) in sacreBLEU; the CLI prints the same with `-w 2`.
  EXPECT_EQ(format_bleu(result),
            "BLEU = 56.12 80.6/59.4/49.3/42.1 (BP = 1.000 ratio = 1.055 hyp_len = 2573 ref_len = 2439)");
  // Every order has matches, so "none" and "exp" agree (SPEC's "no smoothing at corpus level").
  EXPECT_EQ(corpus_bleu(read_lines("hyp.en"), {read_lines("ref.en")}, {BleuSmoothing::kNone}).score, result.score);
}

TEST(CorpusBleu, TwoReferenceStreamsMatchSacrebleu) {
  const BleuResult result = corpus_bleu(read_lines("hyp.en"), {read_lines("ref.en"), read_lines("ref2.en")});
  EXPECT_NEAR(result.score, 56.792372090688225, kTolerance);
  expect_precisions(result, {81.1504080839487, 59.983150800336986, 49.97701149425287, 42.76315789473684});
  expect_bleu_counts(result, {2088, 1424, 1087, 845}, {2573, 2374, 2175, 1976}, 2573, 2362);
  EXPECT_NEAR(result.ratio, 1.0893310753598646, kTolerance);
}

TEST(CorpusBleu, ClosestReferenceLengthPrefersTheShorterOnATie) {
  // Hypothesis of 5 tokens, references of 4 and 6: both 1 away, sacreBLEU takes 4 (then BP = 1, ratio 1.25).
  const BleuResult result = corpus_bleu({"a b c d e"}, {{"a b c d"}, {"a b c d e f"}});
  EXPECT_EQ(result.ref_length, 4);
  EXPECT_NEAR(result.ratio, 1.25, kTolerance);
  EXPECT_NEAR(result.score, 100.00000000000004, kTolerance);  // sacreBLEU; n-grams clipped by the longer ref
  expect_bleu_counts(result, {5, 4, 3, 2}, {5, 4, 3, 2}, 5, 4);
}

TEST(CorpusBleu, StripsTrailingWhitespaceBeforeTokenizing) {
  // sacreBLEU rstrips, so the final "\n" goes before 13a could join "a-\n" into "a": the tokens stay equal.
  EXPECT_NEAR(corpus_bleu({"x y z w a-\n"}, {{"x y z w a-"}}).score, 100.00000000000004, kTolerance);
}

// Hand-written lines with what the Multi30k slice lacks: an empty hypothesis, an empty reference, HTML
// escapes, "<skipped>", "-\n", non-ASCII letters and punctuation, numbers, tabs and NBSP.
const std::vector<std::string> kEdgeHyps = {
    "The café's naïve owner paid 3.5 euros, not 1,000.",
    "\"Hello,\" she said -- \"it's 9-5 work.\"",
    "",
    "tab\tseparated\u00a0nbsp words  ",
    "<skipped>A line-\nbroken &quot;quote&quot; &amp;lt; end",
    "Ünïcödé — «quoted» 3.5–4,0 km…",
    "short",
    "x.,y 1.,2 a..b U.S.A. $5.00 (parens) [a]{b} @user #tag",
};
const std::vector<std::string> kEdgeRefs = {
    "The café's naive owner paid 3.5 euros, not 1,000 .",
    "\"Hello\", she said - \"it is 9-5 work\".",
    "An empty hypothesis gets nothing.",
    "tab separated nbsp words",
    "A linebroken \"quote\" < end",
    "Unicode — «quoted» 3.5-4.0 km...",
    "",
    "x., y 1.,2 a.. b U.S.A. $5.00 (parens) [a] {b} @user #tag",
};

TEST(CorpusBleu, EdgeCasesMatchSacrebleu) {
  const BleuResult result = corpus_bleu(kEdgeHyps, {kEdgeRefs});
  EXPECT_NEAR(result.score, 67.93763638329344, kTolerance);
  expect_precisions(result, {90.78947368421052, 79.71014492753623, 73.01587301587301, 71.9298245614035});
  expect_bleu_counts(result, {69, 55, 46, 41}, {76, 69, 63, 57}, 76, 87);
  EXPECT_NEAR(result.brevity_penalty, 0.8652499605112198, kTolerance);
  EXPECT_NEAR(result.ratio, 0.8735632183908046, kTolerance);
  EXPECT_EQ(format_bleu(result),
            "BLEU = 67.94 90.8/79.7/73.0/71.9 (BP = 0.865 ratio = 0.874 hyp_len = 76 ref_len = 87)");
}

TEST(CorpusBleu, DegenerateCorporaScoreZero) {
  // No matching n-gram at all, hypotheses shorter than 4 tokens (no 4-grams), and an empty corpus (where
  // sacreBLEU itself raises IndexError): all 0, as compute_bleu's early exits give.
  EXPECT_EQ(corpus_bleu({"x y z w"}, {{"a b c d"}}).score, 0.0);
  EXPECT_EQ(corpus_bleu({"a b c"}, {{"a b c"}}).score, 0.0);
  const BleuResult empty = corpus_bleu({}, {{}});
  EXPECT_EQ(empty.score, 0.0);
  EXPECT_EQ(empty.ratio, 0.0);
  EXPECT_EQ(corpus_chrf({}, {{}}).score, 0.0);
}

TEST(CorpusBleu, MismatchedStreamsAreDataErrors) {
  EXPECT_EQ(error_message([] {
              corpus_bleu({"a", "b"}, {{"a"}});
            }),
            "expected 2 lines in reference stream 1 (one per hypothesis), got 1");
  EXPECT_EQ(error_message([] {
              corpus_chrf({"a", "b"}, {{"a", "b"}, {"a", "b", "c"}});
            }),
            "expected 2 lines in reference stream 2 (one per hypothesis), got 3");
  EXPECT_THROW(corpus_bleu({"a"}, {{"a"}, {}}), DataError);
  EXPECT_EQ(error_message([] { corpus_bleu({"a"}, {}); }), "expected at least one reference stream, got 0");
  EXPECT_THROW(corpus_chrf({"a"}, {}), UsageError);
}

TEST(CorpusBleu, InvalidUtf8NamesTheLine) {
  EXPECT_EQ(error_message([] {
              corpus_bleu({"ok", "bad \xff"}, {{"ok", "ok"}});
            }),
            "hypothesis 2: expected UTF-8 text, got invalid byte 0xFF at byte offset 4");
  EXPECT_EQ(error_message([] {
              corpus_chrf({"ok", "ok"}, {{"ok", "ok"}, {"ok", "\xc3"}});
            }),
            "reference stream 2, line 2: expected UTF-8 text, got invalid byte 0xC3 at byte offset 0");
}

// ---- chrF ------------------------------------------------------------------------------------------------

TEST(CorpusChrf, HandComputed) {
  // "ab" vs "abc": 1-grams 2 matches of 2 (hyp) and 3 (ref); 2-grams 1 of 1 and 2; 3-grams: the hypothesis
  // has none, so the order drops out; 4..6: the reference has none. Averages over the 2 remaining orders:
  // P = (1 + 1) / 2 = 1, R = (2/3 + 1/2) / 2 = 7/12; F2 = 5 P R / (4 P + R) = 7/11.
  const ChrfResult result = corpus_chrf({"ab"}, {{"abc"}});
  EXPECT_NEAR(result.score, 700.0 / 11.0, kTolerance);
  EXPECT_NEAR(result.score, 63.636363636363626, kTolerance);  // sacreBLEU
  EXPECT_EQ(result.orders[0].match, 2);
  EXPECT_EQ(result.orders[0].ref, 3);
  EXPECT_EQ(result.orders[2].hyp, 0);
  EXPECT_EQ(result.orders[2].ref, 1);
  EXPECT_EQ(format_chrf(result), "chrF2 = 63.64");
  // Whitespace is removed before counting.
  EXPECT_NEAR(corpus_chrf({"a b"}, {{"a  bc"}}).score, result.score, kTolerance);
}

TEST(CorpusChrf, CountsCodePointsNotBytes) {
  // "café" vs "cafe": per order 1..4, 3/4, 2/3, 1/2, 0/1 in both precision and recall (5, 6: no reference
  // n-grams); F2 of equal P and R is that average: (3/4 + 2/3 + 1/2 + 0) / 4 = 23/48.
  const ChrfResult result = corpus_chrf({"café"}, {{"cafe"}});
  EXPECT_NEAR(result.score, 2300.0 / 48.0, kTolerance);
  EXPECT_NEAR(result.score, 47.91666666666667, kTolerance);  // sacreBLEU
  EXPECT_EQ(result.orders[0].hyp, 4);
}

TEST(CorpusChrf, SacrebleuValues) {
  const std::vector<std::string> hand_hyps = {"the cat sat on the mat", "a dog runs"};
  const std::vector<std::string> hand_refs = {"the cat is on the mat", "a dog runs fast"};
  EXPECT_NEAR(corpus_chrf(hand_hyps, {hand_refs}).score, 63.2786478093039, kTolerance);
  EXPECT_NEAR(corpus_chrf(read_lines("hyp.en"), {read_lines("ref.en")}).score, 77.16879296708372, kTolerance);
  EXPECT_NEAR(corpus_chrf(kEdgeHyps, {kEdgeRefs}).score, 66.97194372026537, kTolerance);
  EXPECT_EQ(format_chrf(corpus_chrf(read_lines("hyp.en"), {read_lines("ref.en")})), "chrF2 = 77.17");
}

TEST(CorpusChrf, TwoReferenceStreamsPickTheBestReferencePerSentence) {
  EXPECT_NEAR(corpus_chrf(read_lines("hyp.en"), {read_lines("ref.en"), read_lines("ref2.en")}).score, 77.83587885466544,
              kTolerance);
  EXPECT_NEAR(corpus_chrf({"a b c d e"}, {{"a b c d"}, {"a b c d e f"}}).score, 91.3677130044843, kTolerance);
  // The exact reference wins over a worse one in either position.
  EXPECT_NEAR(corpus_chrf({"abc"}, {{"abd"}, {"abc"}}).score, 100.0, kTolerance);
  EXPECT_NEAR(corpus_chrf({"abc"}, {{"abc"}, {"abd"}}).score, 100.0, kTolerance);
}

}  // namespace
}  // namespace cabert::eval
