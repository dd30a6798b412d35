// Greedy and beam search over a step callback, independent of any model: a decoder implements StepModel
// (next-token log-probabilities for every live row, and reordering of its own incremental state) and the
// search does the rest, for a whole batch at once, on whatever device the log-probabilities come on.
//
// Semantics follow fairseq's SequenceGenerator + search.BeamSearch:
//  * lengths count generated tokens before EOS: a hypothesis has between min_length and max_length tokens,
//    then EOS. Step t (0-based) predicts generated token t; EOS is forbidden (-inf) while t < min_length and
//    forced (every other token -inf, EOS keeps its own log-probability) at t == max_length, so the model is
//    called at most max_length + 1 times.
//  * PAD is never generated. no_repeat_ngram = n > 0 bans any token that would complete an n-gram already
//    present among the generated tokens (BOS is not part of the hypothesis).
//  * a finished hypothesis ends with EOS and is scored log_prob / length^length_penalty, length counting EOS
//    (length_penalty 0: raw log-probability; > 0 favours longer hypotheses, since log_prob <= 0).
//  * beam search: each step takes the top 2*beam_size continuations of all beams of an example (one topk over
//    beam_size * V); EOS among the first beam_size of them are finalised (at most beam_size per example, best
//    raw log_prob first), the best beam_size non-EOS ones carry on. An example is done when it has beam_size
//    finalised hypotheses or at max_length; its n-best list (best normalised score first) can be shorter than
//    beam_size only when fewer hypotheses of finite log-probability exist.
//
// Rows: the model sees N rows, example-major (row = example * beams + beam, beams = 1 for greedy), over the
// examples not yet finished, in their original order. After a step the search calls reorder(rows) with the
// rows to keep, in their new order: beams fork (a row repeated), die (a row dropped), and finished examples
// leave (N shrinks). Between two log_probs calls there is at most one reorder call; there is none after the
// last step. One small device -> host copy per step tells the search which hypotheses finished.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace cabert::generate {

struct SearchOptions {
  int64_t beam_size = 4;        // hypotheses kept (and returned) per example; greedy ignores it
  int64_t max_length = 200;     // generated tokens before EOS, at most (EOS forced after them)
  int64_t min_length = 0;       // generated tokens before EOS, at least
  double length_penalty = 1.0;  // score = log_prob / length^length_penalty
  int64_t no_repeat_ngram = 0;  // 0: off; n: never repeat an n-gram of generated tokens
  int64_t bos_id = 2;           // fed at step 0 ([CLS] in cabert's vocabularies)
  int64_t eos_id = 3;           // ends a hypothesis ([SEP])
  int64_t pad_id = 0;           // never generated ([PAD])
};

// UsageError ("beam_size: expected >= 1, got 0", ...) when the options cannot describe a search.
void check_options(const SearchOptions& options);

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens, ending with EOS; BOS not included
  double score = 0;             // log_prob / tokens.size()^length_penalty
  double log_prob = 0;          // sum of the log-probabilities of the tokens
};

// The decoder side of the search. It keeps whatever incremental state it needs (encoder output and its mask,
// KV caches, convolution buffers, one row per hypothesis) and answers one step at a time.
class StepModel {
 public:
  virtual ~StepModel() = default;
  // Where the rows live: the search keeps its own tensors (tokens, scores) there and passes last_tokens and
  // reorder's rows there; log_probs must answer there too.
  virtual torch::Device device() const = 0;
  // last_tokens int64 [N] (BOS at step 0, then the token each row generated last) -> log-probabilities
  // [N, V] (floating point, normalised over the vocabulary) of the token at position `step` of every row.
  virtual torch::Tensor log_probs(const torch::Tensor& last_tokens, int64_t step) = 0;
  // rows int64 [N'] on the same device: row i of every per-row state becomes old row rows[i] (index_select
  // on the row dimension). N' may be smaller than N (finished examples leave) and rows may repeat.
  virtual void reorder(const torch::Tensor& rows) = 0;
};

// One hypothesis per example: the most likely token at every step, under the same constraints as beam
// search (min/max length, PAD, no-repeat n-gram). Equals beam search with beam_size 1, except that a row
// whose every token is -inf still ends (with score -inf) where beam search would return no hypothesis. It
// calls reorder only when examples finish and leave.
std::vector<Hypothesis> greedy_search(StepModel& model, int64_t batch, const SearchOptions& options);

// Up to beam_size hypotheses per example, best score first.
std::vector<std::vector<Hypothesis>> beam_search(StepModel& model, int64_t batch, const SearchOptions& options);

// The tokens of `history` [N, T] (generated tokens, oldest first) that would repeat one of its n-grams if
// generated next: bool [N, vocab_size], true = banned. Exposed for tests and for sampling-based search.
torch::Tensor repeated_ngram_mask(const torch::Tensor& history, int64_t n, int64_t vocab_size);

}  // namespace cabert::generate
