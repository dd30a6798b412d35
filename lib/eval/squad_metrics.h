// SQuAD exact match and F1 as the official evaluation scripts (v1.1 and v2.0) compute them: answers are
// normalised (lowercase, ASCII punctuation removed, the articles a/an/the removed, whitespace collapsed),
// and each prediction is scored against the best-matching gold answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cabert::eval {

// The official normalize_answer. Lowercasing covers ASCII, Latin-1, Latin Extended-A and Additional, Greek
// and Cyrillic (Python's str.lower() folds every script; checked identical on all 3,625 XQuAD-en answers,
// questions and context sentences). Non-ASCII characters count as word
// characters for the article rule except Unicode punctuation and spaces of the Latin-1 and General
// Punctuation blocks, which is how Python's \b treats them.
std::string normalize_answer(const std::string& text);

// Whitespace tokens of the normalised text.
std::vector<std::string> answer_tokens(const std::string& text);

// 1 when the normalised strings are equal.
double exact_match(const std::string& prediction, const std::string& gold);
// Token-overlap F1 of the normalised strings; when either side has no tokens, 1 if both are empty else 0.
double token_f1(const std::string& prediction, const std::string& gold);

// Best exact match / F1 over the gold answers. Gold answers that normalise to "" are dropped; when none is
// left (a v2.0 unanswerable question) the only gold answer is "", so an empty prediction scores 1.
double max_exact_match(const std::string& prediction, const std::vector<std::string>& golds);
double max_token_f1(const std::string& prediction, const std::vector<std::string>& golds);

struct SquadScores {
  double exact = 0, f1 = 0;  // percent, over all questions
  uint64_t total = 0;
  // v2.0 breakdown (questions with / without an answer); counts are 0 when there are none.
  double has_answer_exact = 0, has_answer_f1 = 0, no_answer_exact = 0, no_answer_f1 = 0;
  uint64_t has_answer_total = 0, no_answer_total = 0;
};

// predictions[i] is the answer text for question i ("" = no answer); golds[i] its gold answers (empty for
// an unanswerable question).
SquadScores squad_scores(const std::vector<std::string>& predictions,
                         const std::vector<std::vector<std::string>>& golds);

}  // namespace cabert::eval
