#include "lib/data/corpus_builder.h"

#include <cstdio>
#include <algorithm>
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
#include "lib/core/ordered_pipeline.h"
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

// Sentences in input order, their ids filled by the pipeline's workers.
struct SentenceChunk {
  std::vector<text::Sentence> sentences;
  std::vector<std::vector<int>> ids;
  uint64_t bytes_read = 0;  // of the source, once this chunk was read
};

constexpr size_t kChunkBytes = size_t{1} << 20;

// One run of build_corpus: the packer, the shuffle buffer and the shard writers, fed input by input.
class CorpusBuild {
 public:
  explicit CorpusBuild(const CorpusOptions& options)
      : options_(options),
        pack_rng_(options.seed),
        shuffle_rng_(options.seed ^ 0x9e3779b97f4a7c15ULL),
        progress_("build-corpus", "bytes", total_bytes(options.inputs)),
        pick_shard_(0, options.shards - 1),
        shuffler_(options.shuffle_buffer, &shuffle_rng_, [this](pb::PretrainingExample&& example) { emit(example); }),
        packer_(options.max_length, &pack_rng_, [this](pb::PretrainingExample&& example) {
          ++stats_.examples;
          stats_.tokens += example.token_ids_size();
          shuffler_.push(std::move(example));
        }) {
    if (!options.tokenizer_model.empty()) tokenizer_.emplace(options.tokenizer_model);
    metadata_ = {{"max_length", std::to_string(options.max_length)},
                 {"seed", std::to_string(options.seed)},
                 {"shards", std::to_string(options.shards)}};
    if (tokenizer_) metadata_.merge(text::tokenizer_metadata(*tokenizer_));
  }

  void add_input(size_t index) {
    const std::string& path = options_.inputs[index];
    SniffedInput input = sniff(path);
    if (input.is_records) {
      add_records(index, std::move(input.stream));
      return;
    }
    if (!tokenizer_) {
      throw UsageError(str(display_name(path), " is text: pass --model to tokenize it (or pipe token records "
                                               "from `cabert tokenize encode`)"));
    }
    add_text(path, std::move(input.stream));
  }

  CorpusStats finish() {
    throw_if_interrupted();  // a signal that arrived during a blocking read must not yield a "complete" corpus
    shuffler_.flush();
    open_writers();
    for (auto& writer : writers_) writer->close();
    for (int shard = 0; shard < options_.shards; ++shard) {
      stats_.outputs.push_back(shard_path(options_.output, shard, options_.shards));
    }
    stats_.documents = packer_.documents();
    stats_.sentences = packer_.sentences();
    stats_.truncated_sentences = packer_.truncated_sentences();
    progress_.update(bytes_before_input_);
    progress_.finish(str(stats_.examples, " examples, ", stats_.tokens, " tokens"));
    return stats_;
  }

 private:
  static uint64_t total_bytes(const std::vector<std::string>& inputs) {
    uint64_t total = 0;
    for (const auto& input : inputs) total += file_size_or_zero(input);
    return total;
  }

  // Writers open lazily: the token-record header may supply the tokenizer facts first.
  void open_writers() {
    if (!writers_.empty()) return;
    io::WriterOptions writer_options;
    writer_options.frame_records = options_.frame_records;
    for (int shard = 0; shard < options_.shards; ++shard) {
      auto shard_metadata = metadata_;
      shard_metadata["shard"] = std::to_string(shard);
      writers_.push_back(std::make_unique<io::RecordWriter>(shard_path(options_.output, shard, options_.shards),
                                                            "cabert.pb.PretrainingExample", shard_metadata,
                                                            writer_options));
    }
  }

  void emit(const pb::PretrainingExample& example) {
    open_writers();
    int shard = options_.shards == 1 ? 0 : pick_shard_(shuffle_rng_);
    writers_[shard]->write(example);
  }

  // Checks a token-record file's tokenizer against -m or the first input's; returns the vocabulary size to
  // check ids against (0: unknown).
  int64_t check_record_header(size_t index, const io::RecordReader& reader) {
    const auto& header_metadata = reader.header().metadata();
    auto checksum = header_metadata.find("tokenizer_checksum");
    if (tokenizer_ && checksum != header_metadata.end() && checksum->second != tokenizer_->checksum()) {
      throw DataError(str(reader.name(), ": encoded with another tokenizer (checksum ", checksum->second, ", ",
                          options_.tokenizer_model, " has ", tokenizer_->checksum(), ")"));
    }
    if (!tokenizer_) {
      // Every token file must come from the tokenizer of the first: its metadata describes the corpus.
      auto recorded = metadata_.find("tokenizer_checksum");
      std::string checksum_here = checksum == header_metadata.end() ? "none" : checksum->second;
      if (index > 0 && checksum_here != (recorded == metadata_.end() ? "none" : recorded->second)) {
        throw DataError(str(reader.name(), ": encoded with another tokenizer (checksum ", checksum_here, ") than ",
                            options_.inputs[0], " (checksum ", recorded == metadata_.end() ? "none" : recorded->second,
                            "); give token files of one tokenizer, or pass -m to check them against it"));
      }
      for (const std::string& key : text::tokenizer_metadata_keys()) {
        auto found = header_metadata.find(key);
        if (found != header_metadata.end()) metadata_[key] = found->second;
      }
    }
    int64_t vocab_size = tokenizer_ ? tokenizer_->vocab_size() : 0;
    if (auto found = header_metadata.find("vocab_size"); !tokenizer_ && found != header_metadata.end()) {
      char* end = nullptr;
      vocab_size = std::strtoll(found->second.c_str(), &end, 10);
      if (*end != '\0' || vocab_size <= 0 || vocab_size > std::numeric_limits<int32_t>::max()) {
        throw DataError(str(reader.name(), ": header metadata vocab_size '", found->second,
                            "': expected a positive 32-bit integer"));
      }
    }
    return vocab_size;
  }

  void add_records(size_t index, std::unique_ptr<std::istream> stream) {
    io::RecordReader reader(display_name(options_.inputs[index]), std::move(stream));
    reader.expect("cabert.pb.TokenizedText");
    const int64_t vocab_size = check_record_header(index, reader);
    pb::TokenizedText record;
    std::vector<int> ids;
    while (reader.next(&record)) {
      if (record.ids_size() == 0) {
        packer_.end_document();
      } else {
        for (int32_t id : record.ids()) {
          if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
            throw DataError(str(reader.name(), ": record ", reader.records_read(), ": token id ", id,
                                " is outside the vocabulary of ", vocab_size, " ids"));
          }
        }
        ids.assign(record.ids().begin(), record.ids().end());
        packer_.add_sentence(ids);
      }
      if ((reader.records_read() & 4095) == 0) {
        throw_if_interrupted();
        progress_.update(bytes_before_input_ + reader.offset());
      }
    }
    bytes_before_input_ += reader.offset();
    packer_.end_document();
  }

  // Text: one thread reads sentences, options_.threads workers tokenize them, the packer takes them in order.
  void add_text(const std::string& path, std::unique_ptr<std::istream> stream) {
    text::SentenceSource source(std::move(stream), {path}, options_.input_format);
    const size_t chunk_sentences = std::max<size_t>(options_.chunk_sentences, 1);
    auto read = [&](SentenceChunk* chunk) {
      size_t bytes = 0;
      text::Sentence sentence;
      while (chunk->sentences.size() < chunk_sentences && bytes < kChunkBytes && source.next(&sentence)) {
        bytes += sentence.text.size();
        chunk->sentences.push_back(std::move(sentence));
      }
      chunk->bytes_read = source.bytes_read();
      return !chunk->sentences.empty();
    };
    auto tokenize = [&](SentenceChunk* chunk) {
      chunk->ids.resize(chunk->sentences.size());
      for (size_t i = 0; i < chunk->sentences.size(); ++i) {
        if (!chunk->sentences[i].document_end) chunk->ids[i] = tokenizer_->encode(chunk->sentences[i].text);
      }
    };
    auto pack = [&](SentenceChunk& chunk) {
      for (size_t i = 0; i < chunk.sentences.size(); ++i) {
        if (chunk.sentences[i].document_end) {
          packer_.end_document();
        } else {
          packer_.add_sentence(chunk.ids[i]);
        }
      }
      throw_if_interrupted();
      progress_.update(bytes_before_input_ + chunk.bytes_read);
    };
    log_stage_times(str("build-corpus: ", display_name(path)), options_.threads,
                    run_ordered_pipeline<SentenceChunk>(options_.threads, 0, read, tokenize, pack));
    bytes_before_input_ += source.bytes_read();
    packer_.end_document();
  }

  const CorpusOptions& options_;
  std::optional<text::Tokenizer> tokenizer_;
  std::map<std::string, std::string> metadata_;
  std::mt19937_64 pack_rng_, shuffle_rng_;
  Progress progress_;
  uint64_t bytes_before_input_ = 0;
  CorpusStats stats_;
  std::vector<std::unique_ptr<io::RecordWriter>> writers_;
  std::uniform_int_distribution<int> pick_shard_;
  ShuffleBuffer<pb::PretrainingExample> shuffler_;
  SentencePacker packer_;
};

}  // namespace

CorpusStats build_corpus(const CorpusOptions& options) {
  if (options.shards < 1) throw UsageError("--shards must be at least 1");
  if (options.shards > 1 && is_stdio(options.output)) throw UsageError("--shards > 1 needs a file output, not '-'");
  if (options.inputs.empty()) throw UsageError("build-corpus: no input");
  CorpusBuild build(options);
  for (size_t index = 0; index < options.inputs.size(); ++index) build.add_input(index);
  return build.finish();
}

}  // namespace cabert::data
