#include "lib/data/text_encoder.h"

#include <algorithm>
#include <vector>

#include "formats/text.pb.h"
#include "lib/core/interrupt.h"
#include "lib/core/log.h"
#include "lib/core/ordered_pipeline.h"
#include "lib/core/progress.h"
#include "lib/io/record_file.h"
#include "lib/text/text_source.h"
#include "lib/text/tokenizer.h"

namespace cabert::data {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

struct LineChunk {
  uint64_t first_line = 0;
  std::vector<std::string> lines;
  std::vector<pb::TokenizedText> records;
};

}  // namespace

EncodeTextStats encode_text(const EncodeTextOptions& options) {
  text::Tokenizer tokenizer(options.model);
  text::LineReader reader(options.input);
  io::RecordWriter writer(options.output, "cabert.pb.TokenizedText", text::tokenizer_metadata(tokenizer));
  Progress progress("tokenize encode", "lines", 0);
  EncodeTextStats stats;
  const size_t chunk_lines = std::max<size_t>(options.chunk_lines, 1);
  auto read = [&](LineChunk* chunk) {
    chunk->first_line = reader.line_number() + 1;
    size_t bytes = 0;
    std::string line;
    while (chunk->lines.size() < chunk_lines && bytes < kChunkBytes && reader.next_utf8(&line)) {
      bytes += line.size();
      chunk->lines.push_back(std::move(line));
    }
    return !chunk->lines.empty();
  };
  auto encode = [&](LineChunk* chunk) {
    chunk->records.resize(chunk->lines.size());
    for (size_t i = 0; i < chunk->lines.size(); ++i) {
      pb::TokenizedText& record = chunk->records[i];
      record.set_line(chunk->first_line + i);
      for (int id : tokenizer.encode(chunk->lines[i])) record.add_ids(id);
    }
    chunk->lines.clear();
  };
  auto write = [&](LineChunk& chunk) {
    for (const pb::TokenizedText& record : chunk.records) {
      stats.tokens += record.ids_size();
      writer.write(record);
    }
    stats.lines = chunk.first_line + chunk.records.size() - 1;
    throw_if_interrupted();
    progress.update(stats.lines);
  };
  log_stage_times("tokenize encode", options.threads,
                  run_ordered_pipeline<LineChunk>(options.threads, 0, read, encode, write));
  throw_if_interrupted();
  writer.close();
  progress.update(reader.line_number());
  progress.finish(str(stats.tokens, " tokens"));
  return stats;
}

}  // namespace cabert::data
