// Translating a split with a trained encoder-decoder and scoring it: batches by token budget (sorted by
// length, results returned in the input order), greedy or beam search (lib/generate), SentencePiece
// detokenisation, then corpus BLEU and chrF as sacreBLEU computes them (translation_metrics.h). Used by
// `finetune --task translation` (dev) and `evaluate`.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "lib/data/seq2seq_batches.h"
#include "lib/eval/translation_metrics.h"
#include "lib/generate/search.h"
#include "lib/models/seq2seq_model.h"
#include "lib/text/tokenizer.h"

namespace cabert::eval {

struct TranslateOptions {
  generate::SearchOptions search;  // beam_size 1 = greedy; max_length is set per batch (below)
  // A hypothesis has at most max_len_a * (longest source of its batch) + max_len_b tokens before EOS
  // (fairseq's --max-len-a/--max-len-b), and never more than search.max_length.
  double max_len_a = 1.5;
  int64_t max_len_b = 10;
  int64_t max_tokens = 4096;  // source tokens x beams per generation batch
  torch::Device device = torch::kCPU;
  bool show_progress = true;
};

// What a translation of a split cost: the tokens generated (each hypothesis's, its EOS included) and the wall
// seconds of the search (batching, encoding and decoding; not the scoring).
struct DecodingCost {
  int64_t generated_tokens = 0;
  double seconds = 0;
  double tokens_per_second() const { return seconds > 0 ? static_cast<double>(generated_tokens) / seconds : 0; }
};

// One detokenised hypothesis per example, in the order of `examples`; `cost`, when given, receives what the
// decoding cost.
std::vector<std::string> translate_examples(models::Seq2SeqModel& model,
                                            const std::vector<data::Seq2SeqExample>& examples,
                                            const text::Tokenizer& tokenizer, const TranslateOptions& options,
                                            DecodingCost* cost = nullptr);

struct TranslationScores {
  BleuResult bleu;
  ChrfResult chrf;
};
TranslationScores score_translations(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references);

struct LoadedSeq2SeqModel {
  models::Seq2SeqModel model{nullptr};
  pb::CheckpointInfo info;
};
// A checkpoint of `finetune --task translation` (or any checkpoint of an encoder-decoder config); DataError
// naming the file when it holds another kind of model. The model is in eval mode on `device`.
LoadedSeq2SeqModel load_seq2seq_model(const std::string& path, torch::Device device);

}  // namespace cabert::eval
