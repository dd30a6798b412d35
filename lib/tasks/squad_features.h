// SQuAD span extraction: question + context windows ([CLS] question [SEP] context-window [SEP]) with a
// document stride for contexts longer than a window, answer positions per window, and best-span decoding
// back to context text (n-best start/end candidates, maximum answer length, the max-context rule for tokens
// seen by several windows, and for v2.0 the null-score threshold).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/tasks/features.h"
#include "lib/tasks/squad.h"
#include "lib/text/tokenizer.h"

namespace cabert::tasks {

// One SentencePiece token of a context and the bytes of the context it covers. Pieces are aligned inside each
// whitespace-separated word; when a word's pieces do not spell it byte for byte (normalisation, [UNK]) every
// piece of the word covers the whole word.
struct ContextToken {
  int id = 0;
  size_t byte_begin = 0, byte_end = 0;
};
std::vector<ContextToken> tokenize_with_offsets(const std::string& text, const text::Tokenizer& tokenizer);

struct SquadOptions {
  int max_length = 384;        // window length, specials included
  int doc_stride = 128;        // context tokens between the starts of consecutive windows
  int max_query_length = 64;   // question tokens kept
  int max_answer_length = 30;  // tokens
  int n_best = 20;             // start and end candidates per window
  double null_threshold = 0;   // v2.0: predict no answer when null score - best span score > threshold
};

struct SquadWindow {
  Sequence sequence;
  size_t question = 0;                       // index into SquadData::questions
  int context_offset = 0;                    // position of the first context token in the sequence
  int first_token = 0;                       // index of that token among the context's tokens
  int token_count = 0;                       // context tokens in this window
  int start_position = 0, end_position = 0;  // training targets; 0 ([CLS]) = no answer in this window
  std::vector<uint8_t> max_context;          // per context token of the window
};

struct SquadFeatures {
  std::vector<std::vector<ContextToken>> context_tokens;  // per SquadData context
  std::vector<SquadWindow> windows;                       // grouped by question, in question order
  uint64_t answers_not_found = 0;                         // answers whose bytes map to no token
};

SquadFeatures squad_features(const SquadData& data, const text::Tokenizer& tokenizer, const SquadOptions& options);

struct SpanPrediction {
  std::string text;       // "" = no answer
  double score = 0;       // best span's start + end logit
  double null_score = 0;  // smallest [CLS] start + end logit over the question's windows
  bool has_span = false;
};

// start_logits[w] / end_logits[w] hold the logits of window w (at least its sequence length). Returns one
// prediction per question.
std::vector<SpanPrediction> decode_squad(const SquadData& data, const SquadFeatures& features,
                                         const std::vector<std::vector<float>>& start_logits,
                                         const std::vector<std::vector<float>>& end_logits, const SquadOptions& options,
                                         bool version_2);

}  // namespace cabert::tasks
