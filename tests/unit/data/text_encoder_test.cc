#include "lib/data/text_encoder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "formats/text.pb.h"
#include "lib/core/errors.h"
#include "lib/io/record_file.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::data {
namespace {

using cabert::testing::source_dir;
using cabert::testing::temp_dir;

// What a token-record file holds besides its header's creation time: the metadata, every record's bytes, the
// footer.
std::vector<std::string> contents(const std::string& path) {
  io::RecordReader reader(path);
  std::vector<std::string> out;
  std::map<std::string, std::string> metadata(reader.header().metadata().begin(), reader.header().metadata().end());
  for (const auto& [key, value] : metadata) out.push_back(key + "=" + value);
  std::string bytes;
  while (reader.next_bytes(&bytes)) out.push_back(bytes);
  out.push_back(reader.footer().SerializeAsString());
  return out;
}

EncodeTextOptions options(const std::string& input, const std::string& output, int threads, size_t chunk_lines) {
  EncodeTextOptions o;
  o.model = testing::alice_tokenizer();
  o.input = input;
  o.output = output;
  o.threads = threads;
  o.chunk_lines = chunk_lines;
  return o;
}

TEST(TextEncoder, OneTwoAndThreeThreadsWriteTheSameRecords) {
  const std::string input = source_dir() + "/recipes/quickstart/data/gutenberg/11-0.txt";
  const std::string dir = temp_dir();
  EncodeTextStats one = encode_text(options(input, dir + "/one", 1, 4096));
  auto expected = contents(dir + "/one");
  ASSERT_GT(one.lines, 3000u);
  EXPECT_GT(one.tokens, one.lines);
  for (int threads : {1, 2, 3}) {
    for (size_t chunk_lines : {size_t{7}, size_t{4096}}) {  // 7: hundreds of chunks, many in flight at once
      std::string output = dir + "/t" + std::to_string(threads) + "c" + std::to_string(chunk_lines);
      EncodeTextStats stats = encode_text(options(input, output, threads, chunk_lines));
      EXPECT_EQ(stats.lines, one.lines);
      EXPECT_EQ(stats.tokens, one.tokens);
      EXPECT_EQ(contents(output), expected) << threads << " threads, chunks of " << chunk_lines << " lines";
    }
  }
  // One record per line, numbered, encoded as the tokenizer encodes the line alone.
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  io::RecordReader reader(dir + "/t3c7");
  std::ifstream text(input);
  std::string line;
  pb::TokenizedText record;
  for (uint64_t number = 1; number <= 200 && std::getline(text, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    ASSERT_TRUE(reader.next(&record));
    EXPECT_EQ(record.line(), number);
    EXPECT_EQ(std::vector<int>(record.ids().begin(), record.ids().end()), tokenizer.encode(line)) << line;
  }
}

TEST(TextEncoder, InvalidUtf8IsReportedAtItsLineForAnyThreadCount) {
  const std::string dir = temp_dir();
  const std::string input = dir + "/latin1.txt";
  {
    std::ofstream out(input, std::ios::binary);
    for (int i = 1; i < 500; ++i) out << "Line " << i << " of plain text.\n";
    out << "caf\xE9 au lait\n";  // line 500, Latin-1
    for (int i = 0; i < 100; ++i) out << "more text\n";
  }
  std::vector<std::string> messages;
  for (int threads : {1, 2, 3}) {
    std::string output = dir + "/out" + std::to_string(threads);
    try {
      encode_text(options(input, output, threads, 16));
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const DataError& error) {
      messages.push_back(error.what());
    }
    EXPECT_FALSE(std::ifstream(output).good()) << "nothing is written under the output's name";
  }
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_NE(messages[0].find("latin1.txt:500: invalid UTF-8 at byte column 4"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_EQ(messages[2], messages[0]);
}

}  // namespace
}  // namespace cabert::data
