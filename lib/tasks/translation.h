// Translation as a task: which files hold a split (a Multi30k-style directory of line-aligned SPLIT.LANG
// files, plain or gzipped, or one source<TAB>target TSV), and the sentence pairs turned into encoder-decoder
// examples with the joint SentencePiece vocabulary (Wu et al. use a joint BPE): source tokens + EOS, target
// tokens (BOS/EOS are added when batching).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/data/seq2seq_batches.h"
#include "lib/tasks/parallel_text.h"
#include "lib/text/tokenizer.h"

namespace cabert::tasks {

struct TranslationFiles {
  std::string source_lang = "de", target_lang = "en";
  ParallelReadOptions read;
};

// `path` is a directory (then `split` names SPLIT.SOURCE_LANG / SPLIT.TARGET_LANG in it) or a TSV file of
// pairs (split ignored). Errors as in parallel_text.h: UsageError for missing files, DataError for bad rows.
ParallelData read_translation_split(const std::string& path, const std::string& split, const TranslationFiles& files);

// "translation-de-en": the task name in metrics records.
std::string translation_task_name(const TranslationFiles& files);

struct EncodeStats {
  uint64_t truncated_sources = 0, truncated_targets = 0;
};

// Source: pieces truncated to max_source_tokens - 1, then EOS; target: pieces truncated to
// max_target_tokens - 1 (room for EOS). Refuses (UsageError) limits below 2.
std::vector<data::Seq2SeqExample> encode_pairs(const ParallelData& data, const text::Tokenizer& tokenizer,
                                               int max_source_tokens, int max_target_tokens,
                                               EncodeStats* stats = nullptr);

}  // namespace cabert::tasks
