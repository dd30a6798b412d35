#include "lib/eval/squad_metrics.h"

#include <algorithm>
#include <map>

#include "lib/core/errors.h"

namespace cabert::eval {
namespace {

// Decodes one UTF-8 code point at `i` (advancing i); malformed bytes are returned as themselves.
uint32_t next_code_point(const std::string& s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (extra <= 0 || i + extra >= s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = c & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 2) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += extra + 1;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Python's str.lower() for the scripts that occur in English QA data: ASCII, Latin-1, Latin Extended-A,
// Latin Extended Additional (Vietnamese), Greek and Cyrillic capitals.
uint32_t lower(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;  // Latin-1 capitals
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x130) return 'i';  // İ -> i (Python adds a combining dot; English answers never hold it)
    if (cp == 0x178) return 0xFF;
    bool odd_capitals = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if (cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return odd_capitals ? (cp % 2 == 1 ? cp + 1 : cp) : (cp % 2 == 0 ? cp + 1 : cp);
  }
  if (cp >= 0x1E00 && cp <= 0x1EFF && !(cp >= 0x1E96 && cp <= 0x1E9F)) return cp % 2 == 0 ? cp + 1 : cp;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 32;  // Greek
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;                 // Cyrillic
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}

bool is_ascii_punctuation(uint32_t cp) {
  return cp < 0x80 &&
         ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126));
}

// Python's str.split() separators among the characters that occur in practice.
bool is_space(uint32_t cp) {
  return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85 || cp == 0xA0 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Python's \w, approximated: ASCII letters, digits and '_', and every non-ASCII character except spaces and
// the punctuation/symbols of the Latin-1 and General Punctuation blocks.
bool is_word(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (is_space(cp)) return false;
  if (cp >= 0xA1 && cp <= 0xBF)
    return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 || cp == 0xBA ||
           (cp >= 0xBC && cp <= 0xBE);
  if (cp == 0xD7 || cp == 0xF7) return false;
  if (cp >= 0x2000 && cp <= 0x206F) return false;
  return true;
}

std::vector<uint32_t> decode(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

bool is_article_at(const std::vector<uint32_t>& cps, size_t i, size_t* length) {
  static const char* kArticles[] = {"the", "an", "a"};
  if (i > 0 && is_word(cps[i - 1])) return false;
  for (const char* article : kArticles) {
    size_t n = std::char_traits<char>::length(article);
    if (i + n > cps.size()) continue;
    bool same = true;
    for (size_t k = 0; k < n && same; ++k) same = cps[i + k] == static_cast<uint32_t>(article[k]);
    if (!same) continue;
    if (i + n < cps.size() && is_word(cps[i + n])) continue;
    *length = n;
    return true;
  }
  return false;
}

}  // namespace

std::string normalize_answer(const std::string& text) {
  // lower -> remove punctuation -> remove articles (replaced by a space) -> collapse whitespace
  std::vector<uint32_t> cps;
  for (uint32_t cp : decode(text)) {
    if (!is_ascii_punctuation(cp)) cps.push_back(lower(cp));
  }
  std::vector<uint32_t> without_articles;
  for (size_t i = 0; i < cps.size();) {
    size_t length = 0;
    if (is_article_at(cps, i, &length)) {
      without_articles.push_back(' ');
      i += length;
    } else {
      without_articles.push_back(cps[i++]);
    }
  }
  std::string out;
  bool pending_space = false;
  for (uint32_t cp : without_articles) {
    if (is_space(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    append_utf8(out, cp);
  }
  return out;
}

std::vector<std::string> answer_tokens(const std::string& text) {
  std::vector<std::string> tokens;
  std::string normalised = normalize_answer(text), current;
  for (char c : normalised) {
    if (c == ' ') {
      if (!current.empty()) tokens.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) tokens.push_back(current);
  return tokens;
}

double exact_match(const std::string& prediction, const std::string& gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double token_f1(const std::string& prediction, const std::string& gold) {
  std::vector<std::string> p = answer_tokens(prediction), g = answer_tokens(gold);
  if (p.empty() || g.empty()) return p == g ? 1.0 : 0.0;
  std::map<std::string, int> gold_counts;
  for (const auto& token : g) ++gold_counts[token];
  int common = 0;
  for (const auto& token : p) {
    auto it = gold_counts.find(token);
    if (it != gold_counts.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0;
  double precision = static_cast<double>(common) / p.size(), recall = static_cast<double>(common) / g.size();
  return 2 * precision * recall / (precision + recall);
}

namespace {

std::vector<std::string> usable_golds(const std::vector<std::string>& golds) {
  std::vector<std::string> kept;
  for (const auto& gold : golds) {
    if (!normalize_answer(gold).empty()) kept.push_back(gold);
  }
  if (kept.empty()) kept.push_back("");
  return kept;
}

}  // namespace

double max_exact_match(const std::string& prediction, const std::vector<std::string>& golds) {
  double best = 0;
  for (const auto& gold : usable_golds(golds)) best = std::max(best, exact_match(prediction, gold));
  return best;
}

double max_token_f1(const std::string& prediction, const std::vector<std::string>& golds) {
  double best = 0;
  for (const auto& gold : usable_golds(golds)) best = std::max(best, token_f1(prediction, gold));
  return best;
}

SquadScores squad_scores(const std::vector<std::string>& predictions,
                         const std::vector<std::vector<std::string>>& golds) {
  if (predictions.size() != golds.size()) {
    throw Error(str("SQuAD scores: expected one prediction per question, got ", predictions.size(), " predictions for ",
                    golds.size(), " questions"));
  }
  SquadScores scores;
  scores.total = predictions.size();
  for (size_t i = 0; i < predictions.size(); ++i) {
    double em = max_exact_match(predictions[i], golds[i]), f1 = max_token_f1(predictions[i], golds[i]);
    bool answerable = !golds[i].empty();  // the official script: bool(qa['answers'])
    scores.exact += em;
    scores.f1 += f1;
    if (answerable) {
      scores.has_answer_exact += em;
      scores.has_answer_f1 += f1;
      ++scores.has_answer_total;
    } else {
      scores.no_answer_exact += em;
      scores.no_answer_f1 += f1;
      ++scores.no_answer_total;
    }
  }
  auto percent = [](double& sum, uint64_t n) { sum = n == 0 ? 0 : 100.0 * sum / n; };
  percent(scores.exact, scores.total);
  percent(scores.f1, scores.total);
  percent(scores.has_answer_exact, scores.has_answer_total);
  percent(scores.has_answer_f1, scores.has_answer_total);
  percent(scores.no_answer_exact, scores.no_answer_total);
  percent(scores.no_answer_f1, scores.no_answer_total);
  return scores;
}

}  // namespace cabert::eval
