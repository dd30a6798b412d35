#include "lib/tasks/squad_features.h"

#include <algorithm>
#include <numeric>

#include "lib/core/errors.h"

namespace cabert::tasks {

using text::SpecialTokens;

namespace {

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

const std::string kWordBoundary = "\xE2\x96\x81";  // U+2581, SentencePiece's whitespace marker

void append_word(const std::string& text, size_t begin, size_t end, const text::Tokenizer& tokenizer,
                 std::vector<ContextToken>* out) {
  std::vector<int> ids = tokenizer.encode(text.substr(begin, end - begin));
  std::vector<size_t> lengths;
  size_t total = 0;
  bool aligned = true;
  for (size_t k = 0; k < ids.size(); ++k) {
    std::string piece = tokenizer.id_to_piece(ids[k]);
    if (piece.compare(0, kWordBoundary.size(), kWordBoundary) == 0) piece.erase(0, kWordBoundary.size());
    if (ids[k] == SpecialTokens::kUnk) aligned = false;
    lengths.push_back(piece.size());
    total += piece.size();
  }
  if (total != end - begin) aligned = false;
  size_t position = begin;
  for (size_t k = 0; k < ids.size(); ++k) {
    ContextToken token;
    token.id = ids[k];
    if (aligned) {
      token.byte_begin = position;
      token.byte_end = position + lengths[k];
      position = token.byte_end;
    } else {
      token.byte_begin = begin;
      token.byte_end = end;
    }
    out->push_back(token);
  }
}

// Index of the first token that ends after `byte`, and of the last token that starts before `byte_end`.
int first_token_ending_after(const std::vector<ContextToken>& tokens, size_t byte) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t].byte_end > byte) return static_cast<int>(t);
  }
  return -1;
}
int last_token_starting_before(const std::vector<ContextToken>& tokens, size_t byte_end) {
  for (size_t t = tokens.size(); t-- > 0;) {
    if (tokens[t].byte_begin < byte_end) return static_cast<int>(t);
  }
  return -1;
}

std::vector<int> top_indices(const std::vector<float>& logits, int length, int n) {
  std::vector<int> order(length);
  std::iota(order.begin(), order.end(), 0);
  int keep = std::min(n, length);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](int a, int b) { return logits[a] > logits[b]; });
  order.resize(keep);
  return order;
}

}  // namespace

std::vector<ContextToken> tokenize_with_offsets(const std::string& text, const text::Tokenizer& tokenizer) {
  std::vector<ContextToken> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_ascii_space(text[i])) ++i;
    size_t begin = i;
    while (i < text.size() && !is_ascii_space(text[i])) ++i;
    if (i > begin) append_word(text, begin, i, tokenizer, &tokens);
  }
  return tokens;
}

SquadFeatures squad_features(const SquadData& data, const text::Tokenizer& tokenizer, const SquadOptions& options) {
  if (options.doc_stride < 1) throw UsageError(str("--doc-stride: expected at least 1, got ", options.doc_stride));
  SquadFeatures features;
  features.context_tokens.reserve(data.contexts.size());
  for (const auto& context : data.contexts)
    features.context_tokens.push_back(tokenize_with_offsets(context, tokenizer));

  for (size_t q = 0; q < data.questions.size(); ++q) {
    const SquadQuestion& question = data.questions[q];
    const std::vector<ContextToken>& tokens = features.context_tokens[question.context_index];
    std::vector<int> query = tokenizer.encode(question.question);
    if (static_cast<int>(query.size()) > options.max_query_length) query.resize(options.max_query_length);
    int max_context_tokens = options.max_length - static_cast<int>(query.size()) - 3;
    if (max_context_tokens < 1) {
      throw UsageError(str("--max-length ", options.max_length, " leaves no room for the context after a ",
                           query.size(), "-token question; raise it or lower --max-query-length"));
    }
    // Answer tokens (first answer) for the training targets.
    int answer_start = -1, answer_end = -1;
    if (!question.is_impossible && !question.answers.empty()) {
      const SquadAnswer& answer = question.answers.front();
      answer_start = first_token_ending_after(tokens, answer.byte_start);
      answer_end = last_token_starting_before(tokens, answer.byte_start + answer.text.size());
      if (answer_start < 0 || answer_end < answer_start) {
        ++features.answers_not_found;
        answer_start = answer_end = -1;
      }
    }
    // Window spans over the context tokens.
    std::vector<std::pair<int, int>> spans;  // (first token, count)
    int total = static_cast<int>(tokens.size());
    for (int start = 0;;) {
      int count = std::min(total - start, max_context_tokens);
      spans.emplace_back(start, count);
      if (start + count >= total) break;
      start += std::min(count, options.doc_stride);
    }
    for (size_t w = 0; w < spans.size(); ++w) {
      auto [first, count] = spans[w];
      SquadWindow window;
      window.question = q;
      window.first_token = first;
      window.token_count = count;
      Sequence& sequence = window.sequence;
      sequence.ids.push_back(SpecialTokens::kCls);
      sequence.ids.insert(sequence.ids.end(), query.begin(), query.end());
      sequence.ids.push_back(SpecialTokens::kSep);
      sequence.segments.assign(sequence.ids.size(), 0);
      window.context_offset = static_cast<int>(sequence.ids.size());
      for (int t = first; t < first + count; ++t) sequence.ids.push_back(tokens[t].id);
      sequence.ids.push_back(SpecialTokens::kSep);
      sequence.segments.resize(sequence.ids.size(), 1);
      // A token seen by several windows belongs to the one where it has the most context on its
      // shorter side (BERT's _check_is_max_context).
      window.max_context.resize(count);
      for (int t = first; t < first + count; ++t) {
        double best_score = -1;
        size_t best_window = 0;
        for (size_t v = 0; v < spans.size(); ++v) {
          auto [vf, vc] = spans[v];
          if (t < vf || t >= vf + vc) continue;
          double score = std::min(t - vf, vf + vc - 1 - t) + 0.01 * vc;
          if (score > best_score) {
            best_score = score;
            best_window = v;
          }
        }
        window.max_context[t - first] = best_window == w;
      }
      if (answer_start >= first && answer_end < first + count && answer_start >= 0) {
        window.start_position = window.context_offset + answer_start - first;
        window.end_position = window.context_offset + answer_end - first;
      }
      features.windows.push_back(std::move(window));
    }
  }
  return features;
}

std::vector<SpanPrediction> decode_squad(const SquadData& data, const SquadFeatures& features,
                                         const std::vector<std::vector<float>>& start_logits,
                                         const std::vector<std::vector<float>>& end_logits, const SquadOptions& options,
                                         bool version_2) {
  if (start_logits.size() != features.windows.size() || end_logits.size() != features.windows.size()) {
    throw Error(str("internal: expected logits for ", features.windows.size(), " windows, got ", start_logits.size()));
  }
  std::vector<SpanPrediction> predictions(data.questions.size());
  std::vector<bool> seen(data.questions.size(), false);
  struct Best {
    double score;
    size_t window;
    int start, end;
  };
  std::vector<Best> best(data.questions.size(), Best{0, 0, -1, -1});
  for (size_t w = 0; w < features.windows.size(); ++w) {
    const SquadWindow& window = features.windows[w];
    const auto& starts = start_logits[w];
    const auto& ends = end_logits[w];
    int length = static_cast<int>(window.sequence.ids.size());
    SpanPrediction& prediction = predictions[window.question];
    double null_score = starts[0] + ends[0];
    if (!seen[window.question] || null_score < prediction.null_score) prediction.null_score = null_score;
    seen[window.question] = true;
    int context_end = window.context_offset + window.token_count;  // exclusive
    for (int s : top_indices(starts, length, options.n_best)) {
      if (s < window.context_offset || s >= context_end) continue;
      if (!window.max_context[s - window.context_offset]) continue;
      for (int e : top_indices(ends, length, options.n_best)) {
        if (e < s || e >= context_end || e - s + 1 > options.max_answer_length) continue;
        double score = starts[s] + ends[e];
        Best& current = best[window.question];
        if (current.start < 0 || score > current.score) current = Best{score, w, s, e};
      }
    }
  }
  for (size_t q = 0; q < predictions.size(); ++q) {
    SpanPrediction& prediction = predictions[q];
    const Best& span = best[q];
    if (span.start < 0) continue;
    const SquadWindow& window = features.windows[span.window];
    const auto& tokens = features.context_tokens[data.questions[q].context_index];
    const ContextToken& first = tokens[window.first_token + span.start - window.context_offset];
    const ContextToken& last = tokens[window.first_token + span.end - window.context_offset];
    prediction.has_span = true;
    prediction.score = span.score;
    if (version_2 && prediction.null_score - span.score > options.null_threshold) continue;
    const std::string& context = data.contexts[data.questions[q].context_index];
    size_t end = std::max(last.byte_end, first.byte_begin);
    prediction.text = context.substr(first.byte_begin, end - first.byte_begin);
  }
  return predictions;
}

}  // namespace cabert::tasks
