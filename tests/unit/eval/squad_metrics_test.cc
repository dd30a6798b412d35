#include "lib/eval/squad_metrics.h"

#include <gtest/gtest.h>

namespace cabert::eval {
namespace {

TEST(SquadMetrics, NormalisationRemovesArticlesPunctuationAndCase) {
  EXPECT_EQ(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
  EXPECT_EQ(normalize_answer("  a cat, an owl and THE dog. "), "cat owl and dog");
  // Articles only as whole words: "theatre", "anthem", "Ana" stay.
  EXPECT_EQ(normalize_answer("theatre anthem Ana"), "theatre anthem ana");
  // Punctuation is removed before articles: "the-end" -> "theend", not an article.
  EXPECT_EQ(normalize_answer("the-end"), "theend");
  // "(a)" -> "a" once the brackets are gone -> article.
  EXPECT_EQ(normalize_answer("(a) 1,000"), "1000");
  EXPECT_EQ(normalize_answer("Ébola"), "ébola");
  // Python's str.lower() beyond Latin-1 (XQuAD has Vietnamese names); non-ASCII letters are word characters
  // for the article rule, non-ASCII dashes are not. Expected values from the official script.
  EXPECT_EQ(normalize_answer("Battle of Bạch Đằng"), "battle of bạch đằng");
  EXPECT_EQ(normalize_answer("Ωthe ŁÓDŹ"), "ωthe łódź");
  EXPECT_EQ(normalize_answer("x\u2014a\u2014y"), "x\u2014 \u2014y");
  EXPECT_EQ(normalize_answer(""), "");
}

TEST(SquadMetrics, ExactAndF1ByHand) {
  EXPECT_DOUBLE_EQ(exact_match("the Denver Broncos", "Denver Broncos."), 1.0);
  // pred {denver, broncos, team} vs gold {denver, broncos}: P = 2/3, R = 1, F1 = 0.8.
  EXPECT_DOUBLE_EQ(token_f1("Denver Broncos team", "Denver Broncos"), 0.8);
  EXPECT_DOUBLE_EQ(token_f1("Carolina", "Denver Broncos"), 0.0);
  // Repeated tokens count with multiplicity: pred {a-less: x, x}, gold {x}: common 1, P 1/2, R 1 -> 2/3.
  EXPECT_NEAR(token_f1("x x", "x"), 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(token_f1("", ""), 1.0);
  EXPECT_DOUBLE_EQ(token_f1("the", ""), 1.0);  // both normalise to no tokens
  EXPECT_DOUBLE_EQ(token_f1("x", ""), 0.0);
}

TEST(SquadMetrics, MaxOverGoldAnswers) {
  std::vector<std::string> golds = {"Denver Broncos", "The Broncos", "Broncos"};
  EXPECT_DOUBLE_EQ(max_exact_match("broncos", golds), 1.0);
  EXPECT_DOUBLE_EQ(max_token_f1("the Denver", golds), 2.0 / 3.0);
}

TEST(SquadMetrics, VersionTwoNoAnswerHandling) {
  // Question 0 answerable and answered right, 1 unanswerable and abstained, 2 unanswerable but answered.
  SquadScores scores = squad_scores({"Broncos", "", "Paris"}, {{"Denver Broncos"}, {}, {}});
  EXPECT_EQ(scores.total, 3u);
  EXPECT_EQ(scores.has_answer_total, 1u);
  EXPECT_EQ(scores.no_answer_total, 2u);
  EXPECT_NEAR(scores.exact, 100.0 / 3, 1e-9);
  // F1: question 0 -> 2/3 (P 1, R 1/2), 1 -> 1, 2 -> 0.
  EXPECT_NEAR(scores.f1, 100.0 * (2.0 / 3 + 1) / 3, 1e-9);
  EXPECT_NEAR(scores.no_answer_exact, 50.0, 1e-9);
  EXPECT_NEAR(scores.has_answer_f1, 100.0 * 2 / 3, 1e-9);
}

}  // namespace
}  // namespace cabert::eval
