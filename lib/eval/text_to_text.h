// Scoring an encoder-decoder fine-tuned text-to-text (lib/tasks/text_to_text.h): greedy generation of at
// most the longest label text's length + 1 tokens, then matching the detokenised output against each label
// text as the tokenizer normalises it (detokenise(tokenise(text)), so a lower-casing tokenizer still matches
// "DESC"), whitespace at both ends ignored, otherwise exact. An output that matches no label counts as wrong:
// it is scored as a class of its own (as sklearn scores T5's -1 label), and the fraction of such outputs is
// reported as the metric "unmatched". Shared by `finetune` (dev after each epoch) and `evaluate`.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "formats/checkpoint.pb.h"
#include "lib/eval/predict_split.h"
#include "lib/models/seq2seq_model.h"
#include "lib/tasks/task_inputs.h"
#include "lib/tasks/text_to_text.h"
#include "lib/text/tokenizer.h"

namespace cabert::eval {

class LabelMatcher {
 public:
  // UsageError when two label texts become the same after the tokenizer's normalisation.
  LabelMatcher(const tasks::Verbalizer& verbalizer, const text::Tokenizer& tokenizer);
  // The class whose text the output is, or -1.
  int match(const std::string& generated) const;
  const std::vector<std::string>& forms() const { return forms_; }  // what each class's text decodes to
  int64_t longest_target_tokens() const { return longest_; }

 private:
  std::vector<std::string> forms_;
  int64_t longest_ = 1;
};

// The `shown` most frequent of `outputs` with their counts, most frequent first (ties by text):
// "\"desc desc\" x40, \"\" x10, and 3 other outputs". What the log says the decoder generated when it matched
// no label text.
std::string most_frequent_outputs(const std::vector<std::string>& outputs, size_t shown);

// The predictions and metrics of generated outputs (one per example of `split`, in order). Exposed for tests.
SplitPredictions score_generated(const tasks::TaskDefinition& definition, const LabelMatcher& matcher,
                                 const tasks::TaskSplit& split, const std::vector<std::string>& generated);

// Predictions are the matched label strings (the generated text itself when it matches none), so that
// prediction files and GLUE submissions keep the task's labels. `metrics` adds "unmatched".
SplitPredictions predict_text_to_text(models::Seq2SeqModel& model, const tasks::TaskDefinition& definition,
                                      const tasks::Verbalizer& verbalizer, const tasks::TaskSplit& split,
                                      const text::Tokenizer& tokenizer, const PredictOptions& options);

// A submission (the predictions of an unlabelled file) holds only the task's labels, which GLUE's server checks:
// every prediction that is not one (a generated text that matched none) becomes `unmatched_label`, with a
// warning; without one, a DataError naming `path`, the count and the first such row.
void submission_labels_only(SplitPredictions* predictions, const tasks::TaskDefinition& definition,
                            const std::string& unmatched_label, const std::string& path);

// Checkpoint metadata of a text-to-text fine-tuning: "text_to_text" = "true", "label_texts" = the verbaliser.
bool is_text_to_text(const pb::CheckpointInfo& info);

struct LoadedTextToTextModel {
  models::Seq2SeqModel model{nullptr};
  tasks::TaskDefinition definition;
  tasks::TaskSource source;  // table options the model was trained with
  tasks::Verbalizer verbalizer;
  pb::CheckpointInfo info;
  int max_length = 128;
};
// DataError naming the file when it is not a text-to-text fine-tuned checkpoint. Eval mode, on `device`.
LoadedTextToTextModel load_text_to_text_model(const std::string& path, torch::Device device);

}  // namespace cabert::eval
