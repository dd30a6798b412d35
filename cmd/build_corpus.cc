// cabert build-corpus: sentences -> packed, shuffled pre-training examples (see lib/data/corpus_builder.h).
#include "cmd/commands.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/data/corpus_builder.h"

namespace cabert::cmd {

void add_build_corpus(CLI::App& app) {
  auto options = std::make_shared<data::CorpusOptions>();
  auto input_format = std::make_shared<std::string>("lines");
  CLI::App* sub = app.add_subcommand(
      "build-corpus", "Pack consecutive sentences into [CLS] a [SEP] b [SEP] pre-training examples, shuffled");
  sub->add_option("-i,--input", options->inputs,
                  "Text (one sentence per line, blank line between documents) or token records from "
                  "`tokenize encode`; '-' = stdin")
      ->required();
  sub->add_option("--input-format", *input_format, "Text inputs: lines, paragraphs or gutenberg")
      ->capture_default_str();
  sub->add_option("-m,--model", options->tokenizer_model, "SentencePiece .model (needed for text inputs)");
  sub->add_option("-o,--output", options->output, "Output file; with --shards N, the prefix of OUT-0000i-of-0000N")
      ->required();
  sub->add_option("--max-length", options->max_length, "Tokens per example, [CLS]/[SEP] included")
      ->capture_default_str();
  sub->add_option("--shards", options->shards, "Number of output shards")->capture_default_str();
  sub->add_option("--frame-records", options->frame_records,
                  "Records per frame, the unit data-parallel ranks share (0: ~1 MiB frames)")
      ->capture_default_str();
  sub->add_option("--shuffle-buffer", options->shuffle_buffer, "Examples held for shuffling (bounds memory)")
      ->capture_default_str();
  sub->callback([sub, options, input_format] {
    record_options(*sub);
    options->inputs = expand_inputs(options->inputs);
    options->input_format = text::parse_text_format(*input_format);
    options->seed = global_options().seed;
    options->threads = at::get_num_threads();  // --threads, resolved by cmd/main.cc
    data::CorpusStats stats = data::build_corpus(*options);
    log_info("build-corpus: ", stats.documents, " documents, ", stats.sentences, " sentences -> ", stats.examples,
             " examples (", stats.tokens, " tokens, ", stats.truncated_sentences, " sentences truncated) in ",
             stats.outputs.size(), " shard(s)");
  });
}

}  // namespace cabert::cmd
