#include "lib/eval/text_to_text.h"

#include <algorithm>
#include <map>
#include <set>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/core/numbers.h"
#include "lib/eval/translation.h"

namespace cabert::eval {
namespace {

}  // namespace

std::string most_frequent_outputs(const std::vector<std::string>& outputs, size_t shown) {
  std::map<std::string, size_t> counts;
  for (const auto& output : outputs) ++counts[output];
  std::vector<std::pair<std::string, size_t>> ranked(counts.begin(), counts.end());
  // By count, then by text: the same outputs are described alike in every run.
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (size_t i = 0; i < std::min(shown, ranked.size()); ++i) {
    text += str(i > 0 ? ", " : "", "\"", ranked[i].first, "\" x", ranked[i].second);
  }
  if (ranked.size() > shown) text += str(", and ", ranked.size() - shown, " other outputs");
  return text;
}

namespace {

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

}  // namespace

LabelMatcher::LabelMatcher(const tasks::Verbalizer& verbalizer, const text::Tokenizer& tokenizer) {
  for (size_t i = 0; i < verbalizer.texts.size(); ++i) {
    const std::vector<int> ids = tokenizer.encode(verbalizer.texts[i]);
    longest_ = std::max<int64_t>(longest_, static_cast<int64_t>(ids.size()));
    std::string form = trimmed(tokenizer.decode(ids));
    for (size_t j = 0; j < forms_.size(); ++j) {
      if (forms_[j] == form) {
        throw UsageError(str("text-to-text: the label texts '", verbalizer.texts[j], "' and '", verbalizer.texts[i],
                             "' both become '", form, "' through the tokenizer; give distinct ones with --label-text"));
      }
    }
    forms_.push_back(std::move(form));
  }
}

int LabelMatcher::match(const std::string& generated) const {
  const std::string text = trimmed(generated);
  for (size_t i = 0; i < forms_.size(); ++i) {
    if (forms_[i] == text) return static_cast<int>(i);
  }
  return -1;
}

SplitPredictions predict_text_to_text(models::Seq2SeqModel& model, const tasks::TaskDefinition& definition,
                                      const tasks::Verbalizer& verbalizer, const tasks::TaskSplit& split,
                                      const text::Tokenizer& tokenizer, const PredictOptions& options) {
  tasks::TextToTextStats stats;
  const tasks::TaskData* data = &split.data;
  tasks::TaskData unlabeled;  // a test file: no targets
  if (!split.labeled && split.data.labeled) {
    unlabeled = split.data;
    unlabeled.labeled = false;
    data = &unlabeled;
  }
  std::vector<data::Seq2SeqExample> examples =
      tasks::text_to_text_examples(*data, definition, verbalizer, tokenizer, options.max_length, &stats);
  LabelMatcher matcher(verbalizer, tokenizer);
  TranslateOptions generation;
  generation.search.beam_size = 1;
  generation.max_len_a = 0;
  generation.max_len_b = matcher.longest_target_tokens() + 1;
  generation.max_tokens = std::max<int64_t>(4096, static_cast<int64_t>(options.batch_size) * options.max_length);
  generation.device = options.device;
  generation.show_progress = false;
  const bool was_training = model->is_training();
  model->eval();
  std::vector<std::string> generated = translate_examples(model, examples, tokenizer, generation);
  if (was_training) model->train();

  SplitPredictions out = score_generated(definition, matcher, split, generated);
  out.truncated_examples = stats.truncated_examples;
  return out;
}

SplitPredictions score_generated(const tasks::TaskDefinition& definition, const LabelMatcher& matcher,
                                 const tasks::TaskSplit& split, const std::vector<std::string>& generated) {
  if (generated.size() != split.data.examples.size()) {
    throw Error(str("text-to-text: expected one output per example of ", split.path, " (", split.data.examples.size(),
                    "), got ", generated.size()));
  }
  SplitPredictions out;
  out.labeled = split.labeled;
  const size_t count = generated.size();
  tasks::LabelMap labels(definition.labels);
  std::vector<int> predicted, gold;
  uint64_t unmatched = 0;
  std::vector<std::string> unmatched_outputs;
  for (size_t i = 0; i < count; ++i) {
    const tasks::TaskExample& example = split.data.examples[i];
    const int cls = matcher.match(generated[i]);
    out.ids.push_back(example.id);
    out.predictions.push_back(cls >= 0 ? definition.labels[static_cast<size_t>(cls)] : generated[i]);
    out.golds.push_back(split.labeled ? example.label : "");
    out.scores.emplace_back();
    if (cls < 0) ++unmatched, unmatched_outputs.push_back(generated[i]);
    predicted.push_back(cls);
    if (split.labeled) gold.push_back(labels.index(example.label, split.path, example.line));
  }
  if (unmatched > 0) {
    log_info("text-to-text: ", unmatched, " of ", count, " outputs of ", split.path,
             " match no label text (counted wrong); the decoder generated ", most_frequent_outputs(unmatched_outputs, 3));
  }
  if (split.labeled) {
    out.metrics = classification_metrics(definition, predicted, gold);
    out.metrics["unmatched"] = count == 0 ? 0.0 : static_cast<double>(unmatched) / static_cast<double>(count);
    out.score = task_score(split.metrics_task, out.metrics);
  }
  return out;
}

void submission_labels_only(SplitPredictions* predictions, const tasks::TaskDefinition& definition,
                            const std::string& unmatched_label, const std::string& path) {
  const std::set<std::string> labels(definition.labels.begin(), definition.labels.end());
  size_t unmatched = 0, first = 0;
  for (size_t i = 0; i < predictions->predictions.size(); ++i) {
    if (labels.count(predictions->predictions[i]) == 0 && unmatched++ == 0) first = i;
  }
  if (unmatched == 0) return;
  if (unmatched_label.empty()) {
    throw DataError(str(path, ": ", unmatched, " of ", predictions->predictions.size(),
                        " outputs match no label text (the first, row ", predictions->ids[first], ": \"",
                        predictions->predictions[first],
                        "\"), and a submission holds only the task's labels; none written. --unmatched-label LABEL "
                        "writes such rows as LABEL"));
  }
  for (auto& prediction : predictions->predictions) {
    if (labels.count(prediction) == 0) prediction = unmatched_label;
  }
  log_warning("evaluate: ", path, ": ", unmatched, " of ", predictions->predictions.size(),
              " outputs match no label text; written as --unmatched-label ", unmatched_label, " in the submission");
}

bool is_text_to_text(const pb::CheckpointInfo& info) {
  auto found = info.metadata().find("text_to_text");
  return found != info.metadata().end() && found->second == "true";
}

LoadedTextToTextModel load_text_to_text_model(const std::string& path, torch::Device device) {
  LoadedSeq2SeqModel seq2seq = load_seq2seq_model(path, device);
  if (seq2seq.info.kind() != "finetune" || !is_text_to_text(seq2seq.info)) {
    throw DataError(str(path,
                        ": expected a text-to-text fine-tuned checkpoint (from `cabert finetune` of an "
                        "encoder-decoder on a classification task), got a '",
                        seq2seq.info.kind(), "' checkpoint"));
  }
  const auto& metadata = seq2seq.info.metadata();
  auto get = [&](const std::string& key) {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw DataError(str(path, ": the checkpoint lacks the '", key, "' entry"));
    return it->second;
  };
  LoadedTextToTextModel loaded;
  loaded.info = seq2seq.info;
  loaded.model = seq2seq.model;
  loaded.definition = tasks::definition_from_json(get("task"), &loaded.source);
  loaded.verbalizer = tasks::verbalizer_from_json(get("label_texts"));
  if (loaded.verbalizer.texts.size() != loaded.definition.labels.size()) {
    throw DataError(str(path, ": expected ", loaded.definition.labels.size(), " label texts, got ",
                        loaded.verbalizer.texts.size()));
  }
  loaded.max_length =
      static_cast<int>(parse_integer(get("max_length"), 1, 1 << 20, str(path, ": metadata 'max_length'")));
  return loaded;
}

}  // namespace cabert::eval
