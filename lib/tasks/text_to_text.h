// Classification as text-to-text (T5; Tay et al. 2021): every class label is verbalised as a target text
// (SST-2: 0 -> "negative", 1 -> "positive"), the input is the task name and its fields written as text
// ("sst2 sentence: ..."; pairs: "mrpc sentence1: ... sentence2: ..."), and an encoder-decoder is trained to
// generate the target. Evaluation generates and maps the output back to a class (lib/eval/text_to_text.h).
//
// Default verbalisers: T5's for the GLUE tasks (CoLA unacceptable/acceptable, SST-2 negative/positive, MRPC
// not_equivalent/equivalent, QQP not_duplicate/duplicate, WNLI not_entailment/entailment; MNLI, QNLI and RTE
// already have text labels), the label string itself for generic tasks (TREC's "DESC", AG News' "World").
// `--label-text LABEL=TEXT` (repeatable) replaces any of them. Regression (STS-B) and span tasks (SQuAD) are
// outside this phrasing by design (T5 would round STS-B to 0.2 steps and generate SQuAD answers): UsageError.
#pragma once

#include <string>
#include <vector>

#include "lib/data/seq2seq_batches.h"
#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"
#include "lib/text/tokenizer.h"

namespace cabert::tasks {

struct Verbalizer {
  std::vector<std::string> texts;  // class index -> target text
};

// The defaults above, then the LABEL=TEXT assignments. UsageError for a regression or span task, an
// assignment without '=', an unknown label (the message lists the task's labels), an empty text, or two
// labels given the same text.
Verbalizer make_verbalizer(const TaskDefinition& definition, const std::vector<std::string>& assignments);

// "<task> sentence: A" or "<task> sentence1: A sentence2: B", <task> = the canonical task name (sst2, trec).
std::string text_to_text_input(const TaskDefinition& definition, const TaskExample& example);

struct TextToTextStats {
  uint64_t examples = 0, truncated_examples = 0;
};

// Encoder inputs (truncated to max_source_tokens, EOS last) and targets (the label's text; empty for an
// unlabelled file). Labels outside the task's set are a DataError naming the file and line. target_prefix >= 0:
// that token id starts every target (finetune --target-sentinel-prefix puts <extra_id_0> there, the first target
// token of every span-corruption example; generated text is matched without it, since a sentinel decodes to no
// text).
std::vector<data::Seq2SeqExample> text_to_text_examples(const TaskData& data, const TaskDefinition& definition,
                                                        const Verbalizer& verbalizer, const text::Tokenizer& tokenizer,
                                                        int max_source_tokens, TextToTextStats* stats = nullptr,
                                                        int target_prefix = -1);

// JSON array of the texts, stored in fine-tuned checkpoints, and back.
std::string verbalizer_to_json(const Verbalizer& verbalizer);
Verbalizer verbalizer_from_json(const std::string& json);

}  // namespace cabert::tasks
