// `cabert build-corpus`: sentences (raw text, tokenized on the fly, or token records from `tokenize
// encode`) -> packed pre-training examples, shuffled with the seed through a bounded buffer and spread
// over shards (text is tokenized by several threads, see CorpusOptions::threads). Masking is not baked in: pre-training draws it at training time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/text/text_source.h"

namespace cabert::data {

struct CorpusOptions {
  std::vector<std::string> inputs;  // text files or token-record files; "-" = stdin (either kind)
  text::TextFormat input_format = text::TextFormat::kLines;
  std::string tokenizer_model;  // required for text inputs
  std::string output;           // a file, or with shards > 1 the prefix of OUT-0000i-of-0000N
  int max_length = 128;
  int shards = 1;
  uint32_t frame_records = 0;  // > 0: records per frame, the unit data-parallel ranks share (else ~1 MiB)
  size_t shuffle_buffer = 100000;
  uint64_t seed = 42;
  // Text inputs: one thread reads sentences, `threads` workers tokenize them in chunks of `chunk_sentences`
  // (a chunk also ends after 1 MiB of text), the packer takes them in input order: the shards are
  // byte-identical for any thread count. 1: everything on the calling thread.
  int threads = 1;
  size_t chunk_sentences = 4096;
};

struct CorpusStats {
  uint64_t documents = 0, sentences = 0, examples = 0, tokens = 0, truncated_sentences = 0;
  std::vector<std::string> outputs;
};

CorpusStats build_corpus(const CorpusOptions& options);

// OUT when shards == 1, else OUT-0000i-of-0000N.
std::string shard_path(const std::string& output, int shard, int shards);

}  // namespace cabert::data
