#include "lib/data/corpus_builder.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <random>

#include "formats/corpus.pb.h"
#include "formats/text.pb.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/interrupt.h"
#include "lib/core/progress.h"
#include "lib/data/sentence_packer.h"
#include "lib/data/shuffle_buffer.h"
#include "lib/io/record_file.h"
#include "lib/text/tokenizer.h"

namespace cabert::data {

std::string shard_path(const std::string& output, int shard, int shards) {
  if (shards == 1) return output;
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d", shard, shards);
  return output + suffix;
}

namespace {

// Opens an input and tells token records from text by the cabert magic (works on pipes).
struct SniffedInput {
  std::unique_ptr<std::istream> stream;
  bool is_records = false;
};

SniffedInput sniff(const std::string& path) {
  auto in = open_input(path);
  std::string prefix(io::kMagicSize, '\0');
  in->read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  prefix.resize(static_cast<size_t>(in->gcount()));
  SniffedInput result;
  result.is_records = io::starts_with_record_magic(prefix);
  result.stream = io::prepend(std::move(prefix), std::move(in));
  return result;
}

}  // namespace

CorpusStats build_corpus(const CorpusOptions& options) {
  if (options.shards < 1) throw UsageError("--shards must be at least 1");
  if (options.shards > 1 && is_stdio(options.output)) throw UsageError("--shards > 1 needs a file output, not '-'");
  if (options.inputs.empty()) throw UsageError("build-corpus: no input");
  std::optional<text::Tokenizer> tokenizer;
  if (!options.tokenizer_model.empty()) tokenizer.emplace(options.tokenizer_model);

  std::mt19937_64 pack_rng(options.seed), shuffle_rng(options.seed ^ 0x9e3779b97f4a7c15ULL);
  std::map<std::string, std::string> metadata = {{"max_length", std::to_string(options.max_length)},
                                                 {"seed", std::to_string(options.seed)},
                                                 {"shards", std::to_string(options.shards)}};
  if (tokenizer) metadata.merge(text::tokenizer_metadata(*tokenizer));

  CorpusStats stats;
  uint64_t total_bytes = 0;
  for (const auto& input : options.inputs) total_bytes += file_size_or_zero(input);
  Progress progress("build-corpus", "bytes", total_bytes);
  uint64_t bytes_before_input = 0;

  // Writers open lazily: the token-record header may supply the tokenizer facts first.
  std::vector<std::unique_ptr<io::RecordWriter>> writers;
  io::WriterOptions writer_options;
  writer_options.frame_records = options.frame_records;
  auto open_writers = [&] {
    if (!writers.empty()) return;
    for (int shard = 0; shard < options.shards; ++shard) {
      auto shard_metadata = metadata;
      shard_metadata["shard"] = std::to_string(shard);
      writers.push_back(std::make_unique<io::RecordWriter>(shard_path(options.output, shard, options.shards),
                                                           "cabert.pb.PretrainingExample", shard_metadata,
                                                           writer_options));
    }
  };
  std::uniform_int_distribution<int> pick_shard(0, options.shards - 1);
  ShuffleBuffer<pb::PretrainingExample> shuffler(options.shuffle_buffer, &shuffle_rng,
                                                 [&](pb::PretrainingExample&& example) {
                                                   open_writers();
                                                   int shard = options.shards == 1 ? 0 : pick_shard(shuffle_rng);
                                                   writers[shard]->write(example);
                                                 });
  SentencePacker packer(options.max_length, &pack_rng, [&](pb::PretrainingExample&& example) {
    ++stats.examples;
    stats.tokens += example.token_ids_size();
    shuffler.push(std::move(example));
  });

  std::vector<int> ids;
  for (size_t index = 0; index < options.inputs.size(); ++index) {
    const std::string& path = options.inputs[index];
    SniffedInput input = sniff(path);
    if (input.is_records) {
      io::RecordReader reader(display_name(path), std::move(input.stream));
      reader.expect("cabert.pb.TokenizedText");
      const auto& header_metadata = reader.header().metadata();
      auto checksum = header_metadata.find("tokenizer_checksum");
      if (tokenizer && checksum != header_metadata.end() && checksum->second != tokenizer->checksum()) {
        throw DataError(str(reader.name(), ": encoded with another tokenizer (checksum ", checksum->second, ", ",
                            options.tokenizer_model, " has ", tokenizer->checksum(), ")"));
      }
      if (!tokenizer) {
        // Every token file must come from the tokenizer of the first: its metadata describes the corpus.
        auto recorded = metadata.find("tokenizer_checksum");
        std::string checksum_here = checksum == header_metadata.end() ? "none" : checksum->second;
        if (index > 0 && checksum_here != (recorded == metadata.end() ? "none" : recorded->second)) {
          throw DataError(str(reader.name(), ": encoded with another tokenizer (checksum ", checksum_here, ") than ",
                              options.inputs[0], " (checksum ",
                              recorded == metadata.end() ? "none" : recorded->second,
                              "); give token files of one tokenizer, or pass -m to check them against it"));
        }
        for (const std::string& key : text::tokenizer_metadata_keys()) {
          auto found = header_metadata.find(key);
          if (found != header_metadata.end()) metadata[key] = found->second;
        }
      }
      int64_t vocab_size = tokenizer ? tokenizer->vocab_size() : 0;
      if (auto found = header_metadata.find("vocab_size"); !tokenizer && found != header_metadata.end()) {
        char* end = nullptr;
        vocab_size = std::strtoll(found->second.c_str(), &end, 10);
        if (*end != '\0' || vocab_size <= 0 || vocab_size > std::numeric_limits<int32_t>::max()) {
          throw DataError(str(reader.name(), ": header metadata vocab_size '", found->second,
                              "': expected a positive 32-bit integer"));
        }
      }
      pb::TokenizedText record;
      while (reader.next(&record)) {
        if (record.ids_size() == 0) {
          packer.end_document();
        } else {
          for (int32_t id : record.ids()) {
            if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
              throw DataError(str(reader.name(), ": record ", reader.records_read(), ": token id ", id,
                                  " is outside the vocabulary of ", vocab_size, " ids"));
            }
          }
          ids.assign(record.ids().begin(), record.ids().end());
          packer.add_sentence(ids);
        }
        if ((reader.records_read() & 4095) == 0) {
          throw_if_interrupted();
          progress.update(bytes_before_input + reader.offset());
        }
      }
      bytes_before_input += reader.offset();
      packer.end_document();
      continue;
    }
    if (!tokenizer) {
      throw UsageError(str(display_name(path), " is text: pass --model to tokenize it (or pipe token records "
                                               "from `cabert tokenize encode`)"));
    }
    text::SentenceSource source(std::move(input.stream), {path}, options.input_format);
    text::Sentence sentence;
    uint64_t count = 0;
    while (source.next(&sentence)) {
      if (sentence.document_end) {
        packer.end_document();
      } else {
        packer.add_sentence(tokenizer->encode(sentence.text));
      }
      if ((++count & 1023) == 0) {
        throw_if_interrupted();
        progress.update(bytes_before_input + source.bytes_read());
      }
    }
    bytes_before_input += source.bytes_read();
    packer.end_document();
  }
  throw_if_interrupted();  // a signal that arrived during a blocking read must not yield a "complete" corpus
  shuffler.flush();
  open_writers();
  for (auto& writer : writers) writer->close();
  for (int shard = 0; shard < options.shards; ++shard) {
    stats.outputs.push_back(shard_path(options.output, shard, options.shards));
  }
  stats.documents = packer.documents();
  stats.sentences = packer.sentences();
  stats.truncated_sentences = packer.truncated_sentences();
  progress.update(bytes_before_input);
  progress.finish(str(stats.examples, " examples, ", stats.tokens, " tokens"));
  return stats;
}

}  // namespace cabert::data
