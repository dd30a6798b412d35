// Corpus BLEU (Papineni et al. 2002) and chrF (Popović 2015) computed exactly as sacreBLEU computes them by
// default (Post 2018, github.com/mjpost/sacrebleu; checked against sacreBLEU 2.6.0), so that cabert's
// translation scores can be put beside published ones:
//   BLEU: `sacrebleu.corpus_bleu(hyps, [refs])` and the `sacrebleu` CLI, signature
//         nrefs:N|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
//         13a tokenisation (mteval-v13a.pl), n-grams 1..4, clipped counts summed over the corpus, geometric
//         mean of the four precisions, brevity penalty exp(1 - r/c), score x 100.
//   chrF: `sacrebleu.corpus_chrf(hyps, [refs])`, signature nrefs:N|case:mixed|eff:yes|nc:6|nw:0|space:no
//         character n-grams 1..6 with whitespace removed, beta 2, statistics summed over the corpus, then
//         precision and recall averaged over the orders that have both hypothesis and reference n-grams
//         (sacreBLEU's default "effective order" averaging, not the eps smoothing of chrF++.py).
//
// Smoothing: sacreBLEU's corpus BLEU default is smooth_method="exp" (mteval's NIST smoothing: the k-th order
// with zero matches gets precision 100 / (2^k x total)). SPEC section 6 says "no smoothing at corpus level";
// the two agree whenever every order has at least one match (any real test set) and differ only on toy
// corpora, where "none" gives 0. The default here is kExp because that is what sacreBLEU prints; kNone is
// there for SPEC's reading. Both follow sacreBLEU in scoring 0 when no n-gram matches at all, or when the
// hypotheses hold no n-gram of some order.
//
// Text is UTF-8; characters are Unicode code points as in Python, and "whitespace" is Python's str.split()
// set (includes U+00A0 and U+3000, excludes U+200B). Invalid UTF-8 throws DataError. Not provided (not
// sacreBLEU defaults): lowercasing, other tokenizers, chrF++ word n-grams, sentence-level scores.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace cabert::eval {

// sacreBLEU's "13a" tokenizer (Tokenizer13a): drops "<skipped>" and "-\n", turns newlines into spaces,
// unescapes &quot; &amp; &lt; &gt; (in that order, once each), splits off ASCII punctuation except
// apostrophe, hyphen, period and comma; splits period and comma unless between digits ("3.5", "1,000" stay
// whole); splits a hyphen after a digit. Non-ASCII punctuation ("«", "—") is left attached. Returns the
// tokens joined by single spaces. corpus_bleu strips trailing whitespace before calling it, as sacreBLEU
// does; this function does not (it matters only for a trailing "-\n").
std::string tokenize_13a(const std::string& line);

enum class BleuSmoothing {
  kExp,   // sacreBLEU's default (see the file comment)
  kNone,  // plain corpus BLEU: any order without a match gives 0
};

struct BleuOptions {
  BleuSmoothing smoothing = BleuSmoothing::kExp;
};

struct BleuResult {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // percent, smoothed as the score uses them (sacreBLEU's .precisions)
  double brevity_penalty = 0;
  double ratio = 0;                           // hyp_length / ref_length, 0 when ref_length is 0
  int64_t hyp_length = 0, ref_length = 0;     // 13a tokens; ref_length sums the closest reference per sentence
  std::array<int64_t, 4> correct{}, total{};  // clipped matches and hypothesis n-grams per order 1..4
};

// `references` holds one stream per reference set, each with one line per hypothesis (sacreBLEU's layout:
// corpus_bleu(hyps, [refs_a, refs_b])). With several references a hypothesis n-gram is clipped by its
// largest count in any reference, and the reference length is the one closest to the hypothesis length (the
// shorter on a tie). Throws DataError when a stream's length differs from the hypotheses', UsageError when
// there is no stream.
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, const BleuOptions& options = {});

// "BLEU = 56.12 80.6/59.4/49.3/42.1 (BP = 1.000 ratio = 1.055 hyp_len = 2573 ref_len = 2439)": sacreBLEU's
// str(score), i.e. its CLI line with `-w 2`, without the signature (the CLI's default -w 1 shows "56.1").
std::string format_bleu(const BleuResult& result);

inline constexpr int kChrfCharOrder = 6;
inline constexpr int kChrfBeta = 2;

// Corpus totals of one character n-gram order.
struct ChrfOrderStats {
  int64_t hyp = 0;    // hypothesis n-grams (counted only in sentences whose reference has n-grams of this order)
  int64_t ref = 0;    // reference n-grams
  int64_t match = 0;  // clipped matches
};

struct ChrfResult {
  double score = 0;                                     // 0..100
  std::array<ChrfOrderStats, kChrfCharOrder> orders{};  // n = 1..6
};

// Same stream layout and errors as corpus_bleu. With several references each sentence contributes the
// statistics of the reference that gives it the best sentence-level chrF (the first on a tie).
ChrfResult corpus_chrf(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references);

// "chrF2 = 77.17": sacreBLEU's str(score) (CLI with `-w 2`), without the signature.
std::string format_chrf(const ChrfResult& result);

}  // namespace cabert::eval
