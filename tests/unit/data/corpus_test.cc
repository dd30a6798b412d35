#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "formats/corpus.pb.h"
#include "lib/core/errors.h"
#include "lib/data/corpus_builder.h"
#include "lib/data/sentence_packer.h"
#include "lib/io/record_file.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::data {
namespace {

using cabert::testing::source_dir;
using cabert::testing::temp_dir;
using text::SpecialTokens;

// Sentence s of document d is a run of the (unique) token 1000 + 100 * d + s, so examples can be traced back.
struct SyntheticCorpus {
  std::vector<std::vector<std::vector<int>>> documents;
};

SyntheticCorpus make_corpus(uint64_t seed, int documents, int max_sentence) {
  std::mt19937_64 rng(seed);
  SyntheticCorpus corpus;
  for (int d = 0; d < documents; ++d) {
    int sentences = 1 + static_cast<int>(rng() % 12);
    corpus.documents.emplace_back();
    for (int s = 0; s < sentences; ++s) {
      int length = 1 + static_cast<int>(rng() % max_sentence);
      corpus.documents.back().push_back(std::vector<int>(length, 1000 + 100 * d + s));
    }
  }
  return corpus;
}

std::vector<pb::PretrainingExample> pack(const SyntheticCorpus& corpus, int max_length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<pb::PretrainingExample> out;
  SentencePacker packer(max_length, &rng, [&](pb::PretrainingExample&& e) { out.push_back(std::move(e)); });
  for (const auto& document : corpus.documents) {
    for (const auto& sentence : document) packer.add_sentence(sentence);
    packer.end_document();
  }
  return out;
}

TEST(SentencePacker, PacksEverySentenceOnceInOrderWithinMaxLength) {
  const int max_length = 32;
  SyntheticCorpus corpus = make_corpus(7, 60, 40);  // some sentences longer than the budget
  auto examples = pack(corpus, max_length, 1);
  std::map<uint64_t, std::vector<std::pair<uint32_t, uint32_t>>> spans;  // document -> (first, count)
  for (const auto& example : examples) {
    ASSERT_LE(example.token_ids_size(), max_length);
    ASSERT_EQ(example.token_ids(0), SpecialTokens::kCls);
    ASSERT_EQ(example.token_ids(example.segment_a_length() - 1), SpecialTokens::kSep);
    ASSERT_EQ(example.token_ids(example.token_ids_size() - 1), SpecialTokens::kSep);
    ASSERT_GE(example.sentences_a(), 1u);
    // Segment a holds sentences first..first+a-1, segment b the next ones: consecutive, same document.
    uint32_t total = example.sentences_a() + example.sentences_b();
    std::vector<int> expected = {SpecialTokens::kCls};
    int truncated = 0;
    for (uint32_t s = example.first_sentence(); s < example.first_sentence() + total; ++s) {
      const auto& sentence = corpus.documents.at(example.document()).at(s);
      int keep = std::min<int>(static_cast<int>(sentence.size()), max_length - 3);
      truncated += static_cast<int>(sentence.size()) - keep;
      expected.insert(expected.end(), sentence.begin(), sentence.begin() + keep);
      if (s + 1 == example.first_sentence() + example.sentences_a()) expected.push_back(SpecialTokens::kSep);
    }
    if (example.sentences_b() > 0) expected.push_back(SpecialTokens::kSep);
    ASSERT_EQ(std::vector<int>(example.token_ids().begin(), example.token_ids().end()), expected);
    ASSERT_EQ(example.truncated_tokens(), static_cast<uint32_t>(truncated));
    spans[example.document()].push_back({example.first_sentence(), total});
  }
  ASSERT_EQ(spans.size(), corpus.documents.size());
  for (auto& [document, list] : spans) {
    uint32_t next = 0;
    for (auto [first, count] : list) {  // emitted in order: chunks tile the document exactly
      EXPECT_EQ(first, next) << "document " << document;
      next = first + count;
    }
    EXPECT_EQ(next, corpus.documents[document].size());
  }
}

TEST(SentencePacker, ChunksAreGreedyAndSplitPointsFollowTheSeed) {
  SyntheticCorpus corpus = make_corpus(3, 40, 10);
  auto a = pack(corpus, 64, 5), b = pack(corpus, 64, 5), c = pack(corpus, 64, 6);
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].SerializeAsString(), b[i].SerializeAsString());
    differs |= i < c.size() && a[i].sentences_a() != c[i].sentences_a();
  }
  EXPECT_TRUE(differs) << "another seed should move some split points";
  // Greedy: the next sentence of the document would not have fitted.
  for (const auto& example : a) {
    uint32_t next = example.first_sentence() + example.sentences_a() + example.sentences_b();
    const auto& document = corpus.documents[example.document()];
    if (next < document.size()) {
      int used = example.token_ids_size() - (example.sentences_b() > 0 ? 3 : 2);
      EXPECT_GT(used + static_cast<int>(document[next].size()), 64 - 3);
    }
  }
}

TEST(SentencePacker, RefusesAMaxLengthWithNoRoom) {
  std::mt19937_64 rng(1);
  EXPECT_THROW(SentencePacker(4, &rng, [](pb::PretrainingExample&&) {}), UsageError);
}

std::vector<std::string> read_shard(const std::string& path) {
  io::RecordReader reader(path);
  reader.expect("cabert.pb.PretrainingExample");
  std::vector<std::string> out;
  std::string bytes;
  while (reader.next_bytes(&bytes)) out.push_back(bytes);
  return out;
}

class CorpusBuilderTest : public ::testing::Test {
 protected:
  CorpusOptions options(const std::string& output, uint64_t seed, int shards) {
    CorpusOptions o;
    o.inputs = {source_dir() + "/recipes/quickstart/data/gutenberg/11-0.txt"};
    o.input_format = text::TextFormat::kGutenberg;
    o.tokenizer_model = testing::alice_tokenizer();
    o.output = output;
    o.max_length = 64;
    o.seed = seed;
    o.shards = shards;
    o.shuffle_buffer = 50;  // smaller than the corpus: exercises the bounded buffer
    return o;
  }
};

TEST_F(CorpusBuilderTest, SameSeedSameShardsAndShardsPartitionTheExamples) {
  std::string dir = temp_dir();
  CorpusStats one = build_corpus(options(dir + "/one", 11, 1));
  CorpusStats again = build_corpus(options(dir + "/again", 11, 1));
  CorpusStats other = build_corpus(options(dir + "/other", 12, 1));
  CorpusStats sharded = build_corpus(options(dir + "/sharded", 11, 3));
  auto a = read_shard(one.outputs[0]);
  EXPECT_EQ(a.size(), one.examples);
  EXPECT_GT(a.size(), 100u);
  EXPECT_EQ(a, read_shard(again.outputs[0]));
  EXPECT_NE(a, read_shard(other.outputs[0]));
  ASSERT_EQ(sharded.outputs.size(), 3u);
  EXPECT_EQ(sharded.outputs[1], dir + "/sharded-00001-of-00003");
  std::multiset<std::string> union_of_shards;
  for (const auto& shard : sharded.outputs) {
    auto records = read_shard(shard);
    EXPECT_GT(records.size(), 0u);
    union_of_shards.insert(records.begin(), records.end());
  }
  EXPECT_EQ(union_of_shards, std::multiset<std::string>(a.begin(), a.end()));
  // Shuffled: not in document order.
  pb::PretrainingExample first, second;
  first.ParseFromString(a[0]);
  second.ParseFromString(a[1]);
  EXPECT_FALSE(first.document() == 0 && first.first_sentence() == 0 && second.first_sentence() > 0 &&
               second.document() == 0);
}

TEST_F(CorpusBuilderTest, OneTwoAndThreeThreadsWriteTheSameShards) {
  std::string dir = temp_dir();
  auto run = [&](const std::string& name, int threads, size_t chunk_sentences) {
    CorpusOptions o = options(dir + "/" + name, 5, 3);
    o.inputs.push_back(source_dir() + "/recipes/quickstart/data/gutenberg/pg1232.txt");
    o.threads = threads;
    o.chunk_sentences = chunk_sentences;
    CorpusStats stats = build_corpus(o);
    std::vector<std::vector<std::string>> shards;
    for (const auto& shard : stats.outputs) shards.push_back(read_shard(shard));
    EXPECT_EQ(stats.documents, 2u);
    return std::make_pair(stats.examples, shards);
  };
  auto expected = run("one", 1, 4096);
  EXPECT_GT(expected.first, 300u);
  for (int threads : {1, 2, 3}) {
    for (size_t chunk : {size_t{5}, size_t{4096}}) {  // 5: hundreds of chunks, many in flight at once
      EXPECT_EQ(run(str("t", threads, "c", chunk), threads, chunk), expected)
          << threads << " threads, chunks of " << chunk << " sentences";
    }
  }
}

TEST_F(CorpusBuilderTest, AnInvalidUtf8LineIsReportedAtItsLineForAnyThreadCount) {
  std::string dir = temp_dir();
  {
    std::ofstream out(dir + "/latin1.txt", std::ios::binary);
    for (int i = 1; i < 300; ++i) out << "Sentence " << i << ".\n";
    out << "caf\xE9 au lait\n";  // line 300, Latin-1
  }
  std::vector<std::string> messages;
  for (int threads : {1, 2, 3}) {
    CorpusOptions o = options(dir + "/c" + std::to_string(threads), 5, 1);
    o.inputs = {dir + "/latin1.txt"};
    o.input_format = text::TextFormat::kLines;
    o.threads = threads;
    o.chunk_sentences = 8;
    try {
      build_corpus(o);
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const DataError& error) {
      messages.push_back(error.what());
    }
    EXPECT_FALSE(std::filesystem::exists(o.output));
  }
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_NE(messages[0].find("latin1.txt:300: invalid UTF-8"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_EQ(messages[2], messages[0]);
}

TEST_F(CorpusBuilderTest, HeaderRecordsTheTokenizerAndTheSettings) {
  CorpusStats stats = build_corpus(options(temp_dir() + "/c", 3, 1));
  io::RecordReader reader(stats.outputs[0]);
  const auto& metadata = reader.header().metadata();
  EXPECT_EQ(metadata.at("max_length"), "64");
  EXPECT_EQ(metadata.at("seed"), "3");
  EXPECT_EQ(metadata.at("vocab_size"), "600");
  EXPECT_EQ(metadata.at("tokenizer_checksum"), text::Tokenizer(testing::alice_tokenizer()).checksum());
}

TEST_F(CorpusBuilderTest, TextInputWithoutTokenizerIsAUsageError) {
  auto o = options(temp_dir() + "/c", 3, 1);
  o.tokenizer_model.clear();
  EXPECT_THROW(build_corpus(o), UsageError);
}

}  // namespace
}  // namespace cabert::data
