#include "lib/tasks/features.h"

#include <algorithm>

#include "lib/core/errors.h"

namespace cabert::tasks {

using text::SpecialTokens;

Sequence encode_pair(std::vector<int> a, std::vector<int> b, int max_length, bool pair) {
  int specials = pair ? 3 : 2;
  if (max_length < specials + (pair ? 2 : 1)) {
    throw UsageError(str("--max-length: expected at least ", specials + (pair ? 2 : 1), " for ",
                         pair ? "sentence pairs" : "single sentences", ", got ", max_length));
  }
  Sequence sequence;
  size_t budget = static_cast<size_t>(max_length - specials);
  if (!pair) b.clear();
  while (a.size() + b.size() > budget) {
    std::vector<int>& longer = a.size() >= b.size() ? a : b;
    longer.pop_back();
    ++sequence.truncated;
  }
  sequence.ids.reserve(a.size() + b.size() + specials);
  sequence.ids.push_back(SpecialTokens::kCls);
  sequence.ids.insert(sequence.ids.end(), a.begin(), a.end());
  sequence.ids.push_back(SpecialTokens::kSep);
  sequence.segments.assign(sequence.ids.size(), 0);
  if (pair) {
    sequence.ids.insert(sequence.ids.end(), b.begin(), b.end());
    sequence.ids.push_back(SpecialTokens::kSep);
    sequence.segments.resize(sequence.ids.size(), 1);
  }
  return sequence;
}

std::vector<ClassificationFeature> classification_features(const TaskData& data, const TaskDefinition& task,
                                                           const text::Tokenizer& tokenizer, int max_length,
                                                           FeatureStats* stats) {
  if (task.kind == TaskKind::kSpan) throw Error("internal: classification_features called for a span task");
  LabelMap labels(task.labels);
  std::vector<ClassificationFeature> features;
  features.reserve(data.examples.size());
  FeatureStats local;
  for (size_t i = 0; i < data.examples.size(); ++i) {
    const TaskExample& example = data.examples[i];
    if (task.pair && example.text_b.empty() && !example.text_a.empty()) {
      // An empty second text is legal (rare GLUE rows); nothing to check.
    }
    ClassificationFeature feature;
    feature.example = i;
    feature.sequence =
        encode_pair(tokenizer.encode(example.text_a), task.pair ? tokenizer.encode(example.text_b) : std::vector<int>{},
                    max_length, task.pair);
    if (data.labeled) {
      if (task.kind == TaskKind::kClassification) {
        feature.label = labels.index(example.label, data.path, example.line);
      } else {
        feature.target = parse_regression_label(example.label, data.path, example.line);
      }
    }
    ++local.examples;
    if (feature.sequence.truncated > 0) {
      ++local.truncated_examples;
      local.truncated_tokens += feature.sequence.truncated;
    }
    features.push_back(std::move(feature));
  }
  if (stats) *stats = local;
  return features;
}

void pad_sequences(const std::vector<const Sequence*>& sequences, torch::Tensor* ids, torch::Tensor* segments,
                   torch::Tensor* mask) {
  int64_t rows = static_cast<int64_t>(sequences.size()), length = 0;
  for (const auto* sequence : sequences) length = std::max<int64_t>(length, sequence->ids.size());
  *ids = torch::full({rows, length}, SpecialTokens::kPad, torch::kInt64);
  *segments = torch::zeros({rows, length}, torch::kInt64);
  *mask = torch::zeros({rows, length}, torch::kBool);
  auto id_access = ids->accessor<int64_t, 2>();
  auto segment_access = segments->accessor<int64_t, 2>();
  auto mask_access = mask->accessor<bool, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    const Sequence& sequence = *sequences[r];
    for (size_t t = 0; t < sequence.ids.size(); ++t) {
      id_access[r][t] = sequence.ids[t];
      segment_access[r][t] = sequence.segments[t];
      mask_access[r][t] = true;
    }
  }
}

Batch collate(const std::vector<ClassificationFeature>& features, const std::vector<size_t>& indices, TaskKind kind) {
  Batch batch;
  std::vector<const Sequence*> sequences;
  for (size_t index : indices) sequences.push_back(&features.at(index).sequence);
  pad_sequences(sequences, &batch.ids, &batch.segments, &batch.mask);
  int64_t rows = static_cast<int64_t>(indices.size());
  if (kind == TaskKind::kRegression) {
    batch.labels = torch::empty({rows}, torch::kFloat32);
    for (int64_t r = 0; r < rows; ++r) batch.labels[r] = features[indices[r]].target;
  } else {
    batch.labels = torch::empty({rows}, torch::kInt64);
    auto access = batch.labels.accessor<int64_t, 1>();
    for (int64_t r = 0; r < rows; ++r) access[r] = features[indices[r]].label;
  }
  batch.examples = indices;
  return batch;
}

}  // namespace cabert::tasks
