#include "lib/tasks/text_to_text.h"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/tasks/glue.h"

namespace cabert::tasks {
namespace {

// T5's verbalisers (t5/data/glue_utils.py label names) for the GLUE tasks whose labels are numbers.
const std::map<std::string, std::vector<std::string>>& glue_label_texts() {
  static const std::map<std::string, std::vector<std::string>> texts = {
      {"CoLA", {"unacceptable", "acceptable"}},   {"SST-2", {"negative", "positive"}},
      {"MRPC", {"not_equivalent", "equivalent"}}, {"QQP", {"not_duplicate", "duplicate"}},
      {"WNLI", {"not_entailment", "entailment"}},
  };
  return texts;
}

}  // namespace

Verbalizer make_verbalizer(const TaskDefinition& definition, const std::vector<std::string>& assignments) {
  if (definition.kind != TaskKind::kClassification) {
    throw UsageError(str(definition.name, " is a ", task_kind_name(definition.kind),
                         " task; an encoder-decoder fine-tunes classification tasks as text-to-text only"));
  }
  Verbalizer verbalizer;
  verbalizer.texts = definition.labels;
  auto found = glue_label_texts().find(definition.name);
  if (definition.glue && found != glue_label_texts().end() && found->second.size() == definition.labels.size()) {
    verbalizer.texts = found->second;
  }
  for (const auto& assignment : assignments) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos) {
      throw UsageError(str("--label-text: expected LABEL=TEXT, got '", assignment, "'"));
    }
    const std::string label = assignment.substr(0, equals), text = assignment.substr(equals + 1);
    size_t index = 0;
    while (index < definition.labels.size() && definition.labels[index] != label) ++index;
    if (index == definition.labels.size()) {
      throw UsageError(str("--label-text ", assignment, ": expected one of the labels of ", definition.name, " (",
                           joined(definition.labels), "), got '", label, "'"));
    }
    if (text.find_first_not_of(" \t") == std::string::npos) {
      throw UsageError(str("--label-text ", assignment, ": expected a non-empty text"));
    }
    verbalizer.texts[index] = text;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < verbalizer.texts.size(); ++i) {
    if (verbalizer.texts[i].empty()) {
      throw UsageError(str(definition.name, ": label '", definition.labels[i],
                           "' has an empty text; give one with --label-text ", definition.labels[i], "=TEXT"));
    }
    if (!seen.insert(verbalizer.texts[i]).second) {
      throw UsageError(str(definition.name, ": expected a different text for every label, got '", verbalizer.texts[i],
                           "' twice (--label-text)"));
    }
  }
  return verbalizer;
}

std::string text_to_text_input(const TaskDefinition& definition, const TaskExample& example) {
  const std::string task = canonical_task_name(definition.name);
  if (!definition.pair) return str(task, " sentence: ", example.text_a);
  return str(task, " sentence1: ", example.text_a, " sentence2: ", example.text_b);
}

std::vector<data::Seq2SeqExample> text_to_text_examples(const TaskData& data, const TaskDefinition& definition,
                                                        const Verbalizer& verbalizer, const text::Tokenizer& tokenizer,
                                                        int max_source_tokens, TextToTextStats* stats,
                                                        int target_prefix) {
  if (max_source_tokens < 2) {
    throw UsageError(str("text-to-text: expected a maximum input length >= 2 tokens, got ", max_source_tokens));
  }
  LabelMap labels(definition.labels);
  std::vector<std::vector<int>> targets(verbalizer.texts.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    targets[i] = tokenizer.encode(verbalizer.texts[i]);
    if (target_prefix >= 0) targets[i].insert(targets[i].begin(), target_prefix);
  }
  std::vector<data::Seq2SeqExample> examples;
  examples.reserve(data.examples.size());
  for (const auto& example : data.examples) {
    data::Seq2SeqExample encoded;
    std::vector<int> source = tokenizer.encode(text_to_text_input(definition, example));
    if (source.size() > static_cast<size_t>(max_source_tokens - 1)) {
      source.resize(static_cast<size_t>(max_source_tokens - 1));
      if (stats) ++stats->truncated_examples;
    }
    encoded.source.assign(source.begin(), source.end());
    encoded.source.push_back(text::SpecialTokens::kSep);
    if (data.labeled) {
      const auto& target = targets[static_cast<size_t>(labels.index(example.label, data.path, example.line))];
      encoded.target.assign(target.begin(), target.end());
    }
    examples.push_back(std::move(encoded));
    if (stats) ++stats->examples;
  }
  return examples;
}

std::string verbalizer_to_json(const Verbalizer& verbalizer) { return nlohmann::json(verbalizer.texts).dump(); }

Verbalizer verbalizer_from_json(const std::string& json) {
  Verbalizer verbalizer;
  try {
    verbalizer.texts = nlohmann::json::parse(json).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& error) {
    throw DataError(
        str("text-to-text label texts: expected a JSON array of strings, got '", json, "' (", error.what(), ")"));
  }
  return verbalizer;
}

}  // namespace cabert::tasks
