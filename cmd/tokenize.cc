// cabert tokenize train | encode | decode
#include <iostream>

#include "cmd/commands.h"
#include "formats/text.pb.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/progress.h"
#include "lib/data/text_encoder.h"
#include "lib/io/record_file.h"
#include "lib/text/text_source.h"
#include "lib/text/tokenizer.h"

namespace cabert::cmd {
namespace {

struct TrainFlags {
  std::vector<std::string> inputs;
  std::string input_format = "lines";
  text::TokenizerTrainOptions options;
};

struct EncodeFlags {
  std::string model, input = "-", output = "-";
};

void run_train(TrainFlags& flags) {
  flags.options.inputs = expand_inputs(flags.inputs);
  flags.options.input_format = text::parse_text_format(flags.input_format);
  flags.options.seed = global_options().seed;
  flags.options.threads = at::get_num_threads();
  text::train_tokenizer(flags.options);
}

void run_encode(const EncodeFlags& flags) {
  data::EncodeTextOptions options;
  options.model = flags.model;
  options.input = flags.input;
  options.output = flags.output;
  options.threads = at::get_num_threads();  // --threads, resolved by cmd/main.cc
  data::encode_text(options);
}

void run_decode(const EncodeFlags& flags) {
  text::Tokenizer tokenizer(flags.model);
  io::RecordReader reader(flags.input);
  reader.expect("cabert.pb.TokenizedText");
  const auto& metadata = reader.header().metadata();
  auto checksum = metadata.find("tokenizer_checksum");
  if (checksum != metadata.end() && checksum->second != tokenizer.checksum()) {
    throw DataError(str(reader.name(), ": encoded with a different tokenizer (checksum ", checksum->second, ", ",
                        flags.model, " has ", tokenizer.checksum(), ")"));
  }
  AtomicOutput out(flags.output);
  pb::TokenizedText record;
  std::vector<int> ids;
  while (reader.next(&record)) {
    ids.assign(record.ids().begin(), record.ids().end());
    out.stream() << tokenizer.decode(ids) << '\n';
    if ((reader.records_read() & 1023) == 0) throw_if_interrupted();
  }
  throw_if_interrupted();
  out.commit();
}

}  // namespace

void add_tokenize(CLI::App& app) {
  CLI::App* tokenize = app.add_subcommand("tokenize", "Train a SentencePiece tokenizer; encode/decode text");
  tokenize->require_subcommand(1);

  auto train_flags = std::make_shared<TrainFlags>();
  CLI::App* train = tokenize->add_subcommand(
      "train", "Train a SentencePiece model with cabert's special tokens ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 "
               "[MASK]=4, sentinels <extra_id_k>=5+k)");
  train->add_option("-i,--input", train_flags->inputs, "Text files or directories ('-' = stdin)")->required();
  train->add_option("--input-format", train_flags->input_format, "lines, paragraphs or gutenberg")
      ->capture_default_str();
  train->add_option("--vocab-size", train_flags->options.vocab_size, "Vocabulary size, specials included")
      ->capture_default_str();
  train->add_option("--model-prefix", train_flags->options.model_prefix, "Writes PREFIX.model and PREFIX.vocab")
      ->required();
  train->add_option("--model-type", train_flags->options.model_type, "unigram or bpe")->capture_default_str();
  train->add_flag("--lowercase", train_flags->options.lowercase, "Case-fold while normalising (uncased model)");
  train->add_flag("--byte-fallback", train_flags->options.byte_fallback,
                  "Unknown characters become byte pieces instead of [UNK] (lossless round trip)");
  train->add_option("--sentinels", train_flags->options.num_sentinels, "Sentinel tokens for span corruption")
      ->capture_default_str();
  train->add_option("--character-coverage", train_flags->options.character_coverage)->capture_default_str();
  train
      ->add_option("--max-sentences", train_flags->options.max_sentences,
                   "Sentences sampled for training (bounds memory)")
      ->capture_default_str();
  train->callback([train, train_flags] {
    record_options(*train);
    run_train(*train_flags);
  });

  auto encode_flags = std::make_shared<EncodeFlags>();
  CLI::App* encode = tokenize->add_subcommand(
      "encode", "Text lines -> token records (one record per line; --threads workers, output the same for any count)");
  encode->add_option("-m,--model", encode_flags->model, "SentencePiece .model")->required();
  encode->add_option("-i,--input", encode_flags->input, "Text ('-' = stdin)")->capture_default_str();
  encode->add_option("-o,--output", encode_flags->output, "Token records ('-' = stdout)")->capture_default_str();
  encode->callback([encode, encode_flags] {
    record_options(*encode);
    run_encode(*encode_flags);
  });

  auto decode_flags = std::make_shared<EncodeFlags>();
  CLI::App* decode = tokenize->add_subcommand("decode", "Token records -> text lines");
  decode->add_option("-m,--model", decode_flags->model, "SentencePiece .model")->required();
  decode->add_option("-i,--input", decode_flags->input, "Token records ('-' = stdin)")->capture_default_str();
  decode->add_option("-o,--output", decode_flags->output, "Text ('-' = stdout)")->capture_default_str();
  decode->callback([decode_flags] { run_decode(*decode_flags); });
}

}  // namespace cabert::cmd
