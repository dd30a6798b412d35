#include "lib/tasks/translation.h"

#include <filesystem>

#include "lib/core/errors.h"

namespace fs = std::filesystem;

namespace cabert::tasks {

ParallelData read_translation_split(const std::string& path, const std::string& split, const TranslationFiles& files) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    ParallelSplitFiles found = find_parallel_split(path, split, files.source_lang, files.target_lang);
    return read_parallel_files(found.source_path, found.target_path, files.read);
  }
  return read_parallel_tsv(path, files.read);
}

std::string translation_task_name(const TranslationFiles& files) {
  return str("translation-", files.source_lang, "-", files.target_lang);
}

std::vector<data::Seq2SeqExample> encode_pairs(const ParallelData& data, const text::Tokenizer& tokenizer,
                                               int max_source_tokens, int max_target_tokens, EncodeStats* stats) {
  if (max_source_tokens < 2 || max_target_tokens < 2) {
    throw UsageError(str("translation: expected maximum source and target lengths >= 2 tokens, got ", max_source_tokens,
                         " and ", max_target_tokens));
  }
  std::vector<data::Seq2SeqExample> examples;
  examples.reserve(data.pairs.size());
  for (const auto& pair : data.pairs) {
    data::Seq2SeqExample example;
    std::vector<int> source = tokenizer.encode(pair.source), target = tokenizer.encode(pair.target);
    if (source.size() > static_cast<size_t>(max_source_tokens - 1)) {
      source.resize(max_source_tokens - 1);
      if (stats) ++stats->truncated_sources;
    }
    if (target.size() > static_cast<size_t>(max_target_tokens - 1)) {
      target.resize(max_target_tokens - 1);
      if (stats) ++stats->truncated_targets;
    }
    example.source.assign(source.begin(), source.end());
    example.source.push_back(text::SpecialTokens::kSep);
    example.target.assign(target.begin(), target.end());
    examples.push_back(std::move(example));
  }
  return examples;
}

}  // namespace cabert::tasks
