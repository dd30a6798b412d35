// `cabert tokenize encode`: text lines -> one cabert.pb.TokenizedText record per line. Lines are read in chunks
// by one thread, encoded by `threads` workers and written in input order, so the file is byte-identical for
// any thread count; memory holds a bounded number of chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cabert::data {

struct EncodeTextOptions {
  std::string model;          // SentencePiece .model
  std::string input = "-";    // text, '-' = stdin
  std::string output = "-";   // token records, '-' = stdout
  int threads = 1;            // encoding workers; 1: everything on the calling thread
  size_t chunk_lines = 4096;  // lines per chunk (a chunk also ends after 1 MiB of text)
};

struct EncodeTextStats {
  uint64_t lines = 0, tokens = 0;
};

// Reports progress as "tokenize encode"; an invalid UTF-8 line is a DataError "FILE:LINE: ...".
EncodeTextStats encode_text(const EncodeTextOptions& options);

}  // namespace cabert::data
