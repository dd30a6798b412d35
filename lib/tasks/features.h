// Task examples -> model inputs: [CLS] a [SEP] (b [SEP]) token ids with segment ids (0 up to and including
// the first [SEP], 1 after), truncated to the model's maximum length, and padded batches for the encoder.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"
#include "lib/text/tokenizer.h"

namespace cabert::tasks {

struct Sequence {
  std::vector<int64_t> ids, segments;
  uint32_t truncated = 0;  // tokens dropped to fit max_length
};

// [CLS] a [SEP] when b is empty, else [CLS] a [SEP] b [SEP]. Over-long input is cut longest-first: one token
// at a time from the end of whichever of a and b is longer (a on ties), as BERT's _truncate_seq_pair does.
// max_length counts the special tokens; throws UsageError when it cannot hold them plus one token per text.
Sequence encode_pair(std::vector<int> a, std::vector<int> b, int max_length, bool pair);

struct ClassificationFeature {
  Sequence sequence;
  int label = -1;      // class index (classification); -1 when unlabelled
  float target = 0;    // regression target
  size_t example = 0;  // index into the TaskData examples
};

struct FeatureStats {
  uint64_t examples = 0, truncated_examples = 0, truncated_tokens = 0;
};

// Tokenises every example; labels are checked against the task (DataError naming file and line).
std::vector<ClassificationFeature> classification_features(const TaskData& data, const TaskDefinition& task,
                                                           const text::Tokenizer& tokenizer, int max_length,
                                                           FeatureStats* stats = nullptr);

struct Batch {
  torch::Tensor ids, segments, mask;  // int64 / int64 / bool [B, T], T = longest sequence in the batch
  torch::Tensor labels;               // int64 [B] (classification) or float [B] (regression)
  std::vector<size_t> examples;       // feature indices of the rows
};

// Pads the chosen features with [PAD] to the longest among them.
Batch collate(const std::vector<ClassificationFeature>& features, const std::vector<size_t>& indices, TaskKind kind);
// Pads sequences; helper for SQuAD and for collate().
void pad_sequences(const std::vector<const Sequence*>& sequences, torch::Tensor* ids, torch::Tensor* segments,
                   torch::Tensor* mask);

}  // namespace cabert::tasks
