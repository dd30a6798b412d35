#include "lib/eval/translation_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "lib/core/errors.h"
#include "lib/text/utf8.h"

namespace cabert::eval {
namespace {

constexpr int kBleuOrder = 4;

// ---- UTF-8 and Python's notion of whitespace ---------------------------------------------------------

// `where` names the text for the message ("hypothesis 7: "), empty when unknown.
[[noreturn]] void throw_invalid_utf8(std::string_view text, size_t pos, const std::string& where = "") {
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[pos]));
  throw DataError(str(where, "expected UTF-8 text, got invalid byte ", hex, " at byte offset ", pos));
}

// Python's str.isspace(), which str.split() and str.rstrip() use: more than ASCII whitespace (U+00A0,
// U+3000, the file/group/record/unit separators) but not U+200B.
bool is_python_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

// Calls visit(code_point, begin, end) for every code point; throws DataError on malformed UTF-8.
template <typename Visit>
void for_each_code_point(std::string_view text, Visit&& visit) {
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t code_point;
    const size_t length = text::decode_utf8_at(text, pos, &code_point);
    if (length == 0) throw_invalid_utf8(text, pos);
    visit(code_point, pos, pos + length);
    pos += length;
  }
}

// Python's ' '.join(text.split()).
std::string join_python_words(std::string_view text) {
  std::string joined;
  joined.reserve(text.size());
  bool in_word = false;
  for_each_code_point(text, [&](char32_t c, size_t begin, size_t end) {
    if (is_python_space(c)) {
      in_word = false;
      return;
    }
    if (!in_word && !joined.empty()) joined += ' ';
    in_word = true;
    joined.append(text.substr(begin, end - begin));
  });
  return joined;
}

// Python's text.rstrip().
std::string_view rstrip_python(std::string_view text) {
  size_t keep = 0;
  for_each_code_point(text, [&](char32_t c, size_t, size_t end) {
    if (!is_python_space(c)) keep = end;
  });
  return text.substr(0, keep);
}

// Python's ''.join(text.split()) as code points: what chrF counts.
std::u32string code_points_without_spaces(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for_each_code_point(text, [&](char32_t c, size_t, size_t) {
    if (!is_python_space(c)) out += c;
  });
  return out;
}

// ---- 13a ---------------------------------------------------------------------------------------------

void replace_all(std::string* text, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t hit = text->find(from); hit != std::string::npos; hit = text->find(from, start)) {
    out.append(*text, start, hit - start);
    out.append(to);
    start = hit + from.size();
  }
  if (start == 0) return;
  out.append(*text, start, std::string::npos);
  *text = std::move(out);
}

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(unsigned char c) { return c == '.' || c == ','; }

// The character class [\{-\~\[-\` -\&\(-\+\:-\@\/] of 13a's first rule: ASCII punctuation (and the space)
// except ' - . , which the later rules treat by context.
bool is_split_punctuation(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}

// The three context rules are two-character regexes applied with re.sub, i.e. left to right without
// overlapping matches: after a match the scan resumes behind its second character. Working on UTF-8 bytes
// gives the same result as Python on code points because every character they test is ASCII and no ASCII
// byte occurs inside a multi-byte sequence.
template <typename Matches, typename Emit>
std::string substitute_pairs(const std::string& text, Matches&& matches, Emit&& emit) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  size_t i = 0;
  while (i < text.size()) {
    const auto first = static_cast<unsigned char>(text[i]);
    if (i + 1 < text.size() && matches(first, static_cast<unsigned char>(text[i + 1]))) {
      emit(&out, text[i], text[i + 1]);
      i += 2;
    } else {
      out += text[i];
      ++i;
    }
  }
  return out;
}

std::string split_13a_punctuation(const std::string& text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    if (is_split_punctuation(static_cast<unsigned char>(c))) {
      out += ' ';
      out += c;
      out += ' ';
    } else {
      out += c;
    }
  }
  // ([^0-9])([\.,]) -> "\1 \2 ": period and comma not preceded by a digit.
  out = substitute_pairs(
      out, [](unsigned char a, unsigned char b) { return !is_digit(a) && is_period_or_comma(b); },
      [](std::string* o, char a, char b) {
        o->append({a, ' ', b, ' '});
      });
  // ([\.,])([^0-9]) -> " \1 \2": period and comma not followed by a digit.
  out = substitute_pairs(
      out, [](unsigned char a, unsigned char b) { return is_period_or_comma(a) && !is_digit(b); },
      [](std::string* o, char a, char b) {
        o->append({' ', a, ' ', b});
      });
  // ([0-9])(-) -> "\1 \2 ": a dash after a digit.
  return substitute_pairs(
      out, [](unsigned char a, unsigned char b) { return is_digit(a) && b == '-'; },
      [](std::string* o, char a, char b) {
        o->append({a, ' ', b, ' '});
      });
}

// ---- n-gram counting ---------------------------------------------------------------------------------
// Counts live in vectors sorted by n-gram, so that clipping and merging are linear walks; word n-grams are
// views into the tokenised line, character n-grams packed integers, never string copies.

template <typename View>
using Counts = std::vector<std::pair<View, int64_t>>;

template <typename View>
Counts<View> count_sorted(std::vector<View>* grams) {
  std::sort(grams->begin(), grams->end());
  Counts<View> counts;
  counts.reserve(grams->size());
  for (const View& gram : *grams) {
    if (!counts.empty() && counts.back().first == gram) {
      ++counts.back().second;
    } else {
      counts.emplace_back(gram, 1);
    }
  }
  return counts;
}

// Sum over hypothesis n-grams of min(hypothesis count, reference count).
template <typename View>
int64_t clipped_matches(const Counts<View>& hyp, const Counts<View>& ref) {
  int64_t matches = 0;
  auto h = hyp.begin();
  auto r = ref.begin();
  while (h != hyp.end() && r != ref.end()) {
    if (h->first < r->first) {
      ++h;
    } else if (r->first < h->first) {
      ++r;
    } else {
      matches += std::min(h->second, r->second);
      ++h, ++r;
    }
  }
  return matches;
}

// Per n-gram the larger of the two counts (sacreBLEU's multi-reference clipping).
template <typename View>
Counts<View> merge_max(const Counts<View>& a, const Counts<View>& b) {
  Counts<View> merged;
  merged.reserve(a.size() + b.size());
  auto x = a.begin();
  auto y = b.begin();
  while (x != a.end() || y != b.end()) {
    if (y == b.end() || (x != a.end() && x->first < y->first)) {
      merged.push_back(*x++);
    } else if (x == a.end() || y->first < x->first) {
      merged.push_back(*y++);
    } else {
      merged.emplace_back(x->first, std::max(x->second, y->second));
      ++x, ++y;
    }
  }
  return merged;
}

int64_t ngrams_in(int64_t length, int n) { return std::max<int64_t>(0, length - n + 1); }

// ---- BLEU --------------------------------------------------------------------------------------------

// A 13a-tokenised line; the words are [begin, end) byte ranges of `text`.
struct Words {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> spans;
};

Words tokenize_for_bleu(const std::string& line) {
  Words words;
  // sacreBLEU's BLEU._preprocess_segment strips trailing whitespace before tokenising.
  words.text = tokenize_13a(std::string(rstrip_python(line)));
  uint32_t begin = 0;
  for (uint32_t i = 0; i <= words.text.size(); ++i) {
    if (i == words.text.size() || words.text[i] == ' ') {
      if (i > begin) words.spans.emplace_back(begin, i);
      begin = i + 1;
    }
  }
  return words;
}

using WordCounts = std::array<Counts<std::string_view>, kBleuOrder>;

// `words` must outlive the result, which points into its text.
WordCounts count_word_ngrams(const Words& words) {
  WordCounts counts;
  const std::string_view text = words.text;
  std::vector<std::string_view> grams;
  for (int n = 1; n <= kBleuOrder; ++n) {
    grams.clear();
    for (size_t i = 0; i + n <= words.spans.size(); ++i) {
      const uint32_t begin = words.spans[i].first;
      grams.push_back(text.substr(begin, words.spans[i + n - 1].second - begin));
    }
    counts[n - 1] = count_sorted(&grams);
  }
  return counts;
}

// sacreBLEU's _get_closest_ref_len: the reference length nearest the hypothesis length, the shorter on a tie.
int64_t closest_reference_length(int64_t hyp_length, const std::vector<int64_t>& ref_lengths) {
  int64_t best = ref_lengths.front();
  for (int64_t length : ref_lengths) {
    const int64_t diff = std::llabs(hyp_length - length), best_diff = std::llabs(hyp_length - best);
    if (diff < best_diff || (diff == best_diff && length < best)) best = length;
  }
  return best;
}

// Adds one sentence's statistics to `result` (its lengths, correct and total fields).
void add_bleu_segment(const std::string& hypothesis, const std::vector<const std::string*>& references,
                      BleuResult* result) {
  std::vector<Words> ref_words;
  ref_words.reserve(references.size());  // no reallocation: the counts below point into these strings
  for (const std::string* reference : references) ref_words.push_back(tokenize_for_bleu(*reference));
  WordCounts ref_counts = count_word_ngrams(ref_words.front());
  std::vector<int64_t> ref_lengths{static_cast<int64_t>(ref_words.front().spans.size())};
  for (size_t r = 1; r < ref_words.size(); ++r) {
    const WordCounts more = count_word_ngrams(ref_words[r]);
    for (int n = 0; n < kBleuOrder; ++n) ref_counts[n] = merge_max(ref_counts[n], more[n]);
    ref_lengths.push_back(static_cast<int64_t>(ref_words[r].spans.size()));
  }

  const Words hyp_words = tokenize_for_bleu(hypothesis);
  const WordCounts hyp_counts = count_word_ngrams(hyp_words);
  const auto hyp_length = static_cast<int64_t>(hyp_words.spans.size());
  result->hyp_length += hyp_length;
  result->ref_length += closest_reference_length(hyp_length, ref_lengths);
  for (int n = 0; n < kBleuOrder; ++n) {
    result->total[n] += ngrams_in(hyp_length, n + 1);
    result->correct[n] += clipped_matches(hyp_counts[n], ref_counts[n]);
  }
}

// sacreBLEU's my_log: log(0) is floored instead of -inf, so one empty order drives the score to exactly 0.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

// sacreBLEU's BLEU.compute_bleu (effective_order off), operation for operation so that the doubles agree.
void finish_bleu(BleuSmoothing smoothing, BleuResult* result) {
  const auto hyp_length = static_cast<double>(result->hyp_length);
  const auto ref_length = static_cast<double>(result->ref_length);
  result->brevity_penalty = 1.0;
  if (hyp_length < ref_length) result->brevity_penalty = hyp_length > 0 ? std::exp(1 - ref_length / hyp_length) : 0.0;
  result->ratio = ref_length > 0 ? hyp_length / ref_length : 0.0;
  result->precisions.fill(0.0);
  result->score = 0.0;
  if (std::all_of(result->correct.begin(), result->correct.end(), [](int64_t c) { return c == 0; })) return;

  double smooth_exp = 1.0;
  for (int n = 0; n < kBleuOrder; ++n) {
    const auto correct = static_cast<double>(result->correct[n]);
    const auto total = static_cast<double>(result->total[n]);
    if (result->total[n] == 0) break;
    if (result->correct[n] > 0) {
      result->precisions[n] = 100.0 * correct / total;
    } else if (smoothing == BleuSmoothing::kExp) {
      smooth_exp *= 2;
      result->precisions[n] = 100.0 / (smooth_exp * total);
    }
  }
  double log_sum = 0.0;
  for (double precision : result->precisions) log_sum += floored_log(precision);
  result->score = result->brevity_penalty * std::exp(log_sum / kBleuOrder);
}

// ---- chrF --------------------------------------------------------------------------------------------

// A character n-gram packed into two integers, 21 bits per code point, three per half: sorting and comparing
// these is several times faster than comparing u32string_views, and chrF sorts ~6 x 60 of them per line.
using CharGram = std::pair<uint64_t, uint64_t>;
static_assert(kChrfCharOrder <= 6, "CharGram holds at most 6 code points");

// The n-gram `shorter` (n - 1 code points) extended by its n-th code point `next`.
CharGram extend(CharGram shorter, char32_t next, int n) {
  const uint64_t bits = static_cast<uint64_t>(next) << (21 * ((n - 1) % 3));
  if (n <= 3)
    shorter.first |= bits;
  else
    shorter.second |= bits;
  return shorter;
}

using CharCounts = std::array<Counts<CharGram>, kChrfCharOrder>;
using ChrfStats = std::array<ChrfOrderStats, kChrfCharOrder>;

CharCounts count_char_ngrams(const std::u32string& chars) {
  CharCounts counts;
  std::vector<CharGram> grams(chars.size()), sorted;  // grams[i]: the current order's n-gram starting at i
  for (int n = 1; n <= kChrfCharOrder && static_cast<size_t>(n) <= chars.size(); ++n) {
    const size_t count = chars.size() - n + 1;
    for (size_t i = 0; i < count; ++i) grams[i] = extend(grams[i], chars[i + n - 1], n);
    sorted.assign(grams.begin(), grams.begin() + count);
    counts[n - 1] = count_sorted(&sorted);
  }
  return counts;
}

// sacreBLEU's CHRF._compute_f_score with eps_smoothing off: precision and recall averaged over the orders
// where both sides have n-grams, then F-beta of the averages. Same operation order as Python.
double chrf_f_score(const ChrfStats& stats) {
  const double factor = kChrfBeta * kChrfBeta;
  double average_precision = 0.0, average_recall = 0.0;
  int effective_order = 0;
  for (const ChrfOrderStats& order : stats) {
    if (order.hyp > 0 && order.ref > 0) {
      average_precision += static_cast<double>(order.match) / static_cast<double>(order.hyp);
      average_recall += static_cast<double>(order.match) / static_cast<double>(order.ref);
      ++effective_order;
    }
  }
  if (effective_order > 0) {
    average_precision /= effective_order;
    average_recall /= effective_order;
  }
  if (average_precision + average_recall == 0.0) return 0.0;
  double score = (1 + factor) * average_precision * average_recall;
  score /= factor * average_precision + average_recall;
  return 100 * score;
}

ChrfStats chrf_segment_stats(const std::u32string& hyp_chars, const CharCounts& hyp_counts,
                             const std::string& reference) {
  const std::u32string ref_chars = code_points_without_spaces(reference);
  const CharCounts ref_counts = count_char_ngrams(ref_chars);
  ChrfStats stats;
  for (int n = 0; n < kChrfCharOrder; ++n) {
    const int64_t ref_total = ngrams_in(static_cast<int64_t>(ref_chars.size()), n + 1);
    // sacreBLEU does not count hypothesis n-grams of an order the reference is too short to have.
    stats[n].hyp = ref_total > 0 ? ngrams_in(static_cast<int64_t>(hyp_chars.size()), n + 1) : 0;
    stats[n].ref = ref_total;
    stats[n].match = clipped_matches(hyp_counts[n], ref_counts[n]);
  }
  return stats;
}

// ---- shared ------------------------------------------------------------------------------------------

void check_streams(const std::vector<std::string>& hypotheses,
                   const std::vector<std::vector<std::string>>& references) {
  if (references.empty()) throw UsageError("expected at least one reference stream, got 0");
  for (size_t k = 0; k < references.size(); ++k) {
    if (references[k].size() != hypotheses.size()) {
      throw DataError(str("expected ", hypotheses.size(), " lines in reference stream ", k + 1,
                          " (one per hypothesis), got ", references[k].size()));
    }
  }
}

// Runs add(hypothesis, references of that sentence) for every sentence, after checking that all of them
// are UTF-8 (checked here, where the message can say which line is broken).
template <typename Add>
void for_each_segment(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references, Add&& add) {
  std::vector<const std::string*> segment_refs(references.size());
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    if (size_t bad = text::find_invalid_utf8(hypotheses[i]); bad != std::string_view::npos) {
      throw_invalid_utf8(hypotheses[i], bad, str("hypothesis ", i + 1, ": "));
    }
    for (size_t k = 0; k < references.size(); ++k) {
      if (size_t bad = text::find_invalid_utf8(references[k][i]); bad != std::string_view::npos) {
        throw_invalid_utf8(references[k][i], bad, str("reference stream ", k + 1, ", line ", i + 1, ": "));
      }
      segment_refs[k] = &references[k][i];
    }
    add(hypotheses[i], segment_refs);
  }
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  // Checked up front so that the offset refers to `line`; the steps below keep UTF-8 valid (they only remove
  // or surround ASCII characters).
  if (size_t bad = text::find_invalid_utf8(line); bad != std::string_view::npos) throw_invalid_utf8(line, bad);
  std::string text = line;
  replace_all(&text, "<skipped>", "");
  replace_all(&text, "-\n", "");
  replace_all(&text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    replace_all(&text, "&quot;", "\"");
    replace_all(&text, "&amp;", "&");
    replace_all(&text, "&lt;", "<");
    replace_all(&text, "&gt;", ">");
  }
  return join_python_words(split_13a_punctuation(" " + text + " "));
}

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references, const BleuOptions& options) {
  check_streams(hypotheses, references);
  BleuResult result;
  for_each_segment(hypotheses, references, [&](const std::string& hyp, const std::vector<const std::string*>& refs) {
    add_bleu_segment(hyp, refs, &result);
  });
  finish_bleu(options.smoothing, &result);
  return result;
}

std::string format_bleu(const BleuResult& result) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", result.score,
                result.precisions[0], result.precisions[1], result.precisions[2], result.precisions[3],
                result.brevity_penalty, result.ratio, static_cast<long long>(result.hyp_length),
                static_cast<long long>(result.ref_length));
  return buffer;
}

ChrfResult corpus_chrf(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references) {
  check_streams(hypotheses, references);
  ChrfResult result;
  for_each_segment(hypotheses, references, [&](const std::string& hyp, const std::vector<const std::string*>& refs) {
    const std::u32string hyp_chars = code_points_without_spaces(hyp);
    const CharCounts hyp_counts = count_char_ngrams(hyp_chars);
    ChrfStats best;
    double best_f = -1.0;
    for (const std::string* reference : refs) {
      const ChrfStats stats = chrf_segment_stats(hyp_chars, hyp_counts, *reference);
      const double f = chrf_f_score(stats);
      if (f > best_f) best_f = f, best = stats;
    }
    for (int n = 0; n < kChrfCharOrder; ++n) {
      result.orders[n].hyp += best[n].hyp;
      result.orders[n].ref += best[n].ref;
      result.orders[n].match += best[n].match;
    }
  });
  result.score = chrf_f_score(result.orders);
  return result;
}

std::string format_chrf(const ChrfResult& result) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "chrF%d = %.2f", kChrfBeta, result.score);
  return buffer;
}

}  // namespace cabert::eval
