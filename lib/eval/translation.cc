#include "lib/eval/translation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>

#include "lib/core/errors.h"
#include "lib/core/progress.h"
#include "lib/generate/seq2seq_generator.h"
#include "lib/io/checkpoint_file.h"

namespace cabert::eval {

std::vector<std::string> translate_examples(models::Seq2SeqModel& model,
                                            const std::vector<data::Seq2SeqExample>& examples,
                                            const text::Tokenizer& tokenizer, const TranslateOptions& options,
                                            DecodingCost* cost) {
  generate::check_options(options.search);
  const auto started = std::chrono::steady_clock::now();
  int64_t generated_tokens = 0;
  const int64_t beams = options.search.beam_size;
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return examples[a].source.size() < examples[b].source.size(); });
  std::vector<std::string> hypotheses(examples.size());
  std::unique_ptr<Progress> progress;
  if (options.show_progress) progress = std::make_unique<Progress>("translate", "sentences", examples.size());
  size_t done = 0;
  for (size_t begin = 0; begin < order.size();) {
    // Sorted by length: the batch grows until its longest (last) source times rows exceeds the budget.
    size_t end = begin + 1;
    while (end < order.size() &&
           static_cast<int64_t>((end + 1 - begin) * examples[order[end]].source.size()) * beams <= options.max_tokens) {
      ++end;
    }
    std::vector<size_t> rows(order.begin() + begin, order.begin() + end);
    data::Seq2SeqBatch batch = data::make_seq2seq_batch(examples, rows);
    generate::SearchOptions search = options.search;
    const int64_t longest = batch.source.size(1);
    search.max_length = std::min<int64_t>(
        search.max_length, static_cast<int64_t>(std::floor(options.max_len_a * longest)) + options.max_len_b);
    search.max_length = std::max(search.max_length, search.min_length);
    std::vector<generate::Hypothesis> best =
        generate::generate_batch(model, batch.source.to(options.device), batch.source_mask.to(options.device), search);
    for (size_t r = 0; r < rows.size(); ++r) {
      generated_tokens += static_cast<int64_t>(best[r].tokens.size());
      std::vector<int> ids;
      for (int64_t token : best[r].tokens) {
        if (token != search.eos_id) ids.push_back(static_cast<int>(token));
      }
      hypotheses[rows[r]] = tokenizer.decode(ids);
    }
    done += rows.size();
    if (progress) progress->update(done);
    begin = end;
  }
  if (progress) progress->finish();
  if (cost) {
    cost->generated_tokens = generated_tokens;
    cost->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  return hypotheses;
}

TranslationScores score_translations(const std::vector<std::string>& hypotheses,
                                     const std::vector<std::string>& references) {
  return {corpus_bleu(hypotheses, {references}), corpus_chrf(hypotheses, {references})};
}

LoadedSeq2SeqModel load_seq2seq_model(const std::string& path, torch::Device device) {
  io::Checkpoint checkpoint = io::load_checkpoint(path);
  if (!checkpoint.info.model().has_seq2seq()) {
    throw DataError(str(path,
                        ": expected an encoder-decoder checkpoint (from `cabert finetune --task translation`), "
                        "got a '",
                        checkpoint.info.kind(), "' checkpoint of the encoder '", checkpoint.info.model().name(), "'"));
  }
  LoadedSeq2SeqModel loaded;
  loaded.info = checkpoint.info;
  loaded.model = models::Seq2SeqModel(checkpoint.info.model());
  io::restore_module(*loaded.model, checkpoint, "model/", "");
  loaded.model->to(device);
  loaded.model->eval();
  return loaded;
}

}  // namespace cabert::eval
