#include "lib/text/tokenizer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "lib/core/errors.h"
#include "tests/test_paths.h"

namespace cabert::text {
namespace {

using cabert::testing::alice_tokenizer;
using cabert::testing::source_dir;
using cabert::testing::temp_dir;
using cabert::testing::write_text;

TEST(Tokenizer, SpecialTokensSitAtTheirDocumentedIds) {
  Tokenizer tokenizer(alice_tokenizer());
  EXPECT_EQ(tokenizer.id_to_piece(SpecialTokens::kPad), "[PAD]");
  EXPECT_EQ(tokenizer.id_to_piece(SpecialTokens::kUnk), "[UNK]");
  EXPECT_EQ(tokenizer.id_to_piece(SpecialTokens::kCls), "[CLS]");
  EXPECT_EQ(tokenizer.id_to_piece(SpecialTokens::kSep), "[SEP]");
  EXPECT_EQ(tokenizer.id_to_piece(SpecialTokens::kMask), "[MASK]");
  EXPECT_EQ(tokenizer.num_sentinels(), 8);
  EXPECT_EQ(tokenizer.id_to_piece(tokenizer.sentinel_id(7)), "<extra_id_7>");
  EXPECT_EQ(tokenizer.vocab_size(), 600);
  // Text never produces control tokens: "[MASK]" typed in text becomes ordinary pieces (or [UNK] for the
  // brackets, which Alice never uses).
  for (int id : tokenizer.encode("a [MASK] b [CLS]")) {
    EXPECT_TRUE(id == SpecialTokens::kUnk || id >= 5 + 8) << id;
  }
}

TEST(Tokenizer, RoundTripGivesTheNormalisedText) {
  Tokenizer tokenizer(alice_tokenizer());
  // Lower-cased (nmt_nfkc_cf), whitespace collapsed and trimmed, full-width letters folded by NFKC.
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("  Alice   was VERY tired  ")), "alice was very tired");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("\xEF\xBC\xA1lice")), "alice");  // U+FF21 full-width A
  for (const std::string text :
       {"Down the Rabbit-Hole.", "\xE2\x80\x9C Curiouser and curiouser!\xE2\x80\x9D cried Alice", "Who are YOU?",
        "it\xE2\x80\x99s the Queen, isn\xE2\x80\x99t it"}) {
    std::string once = tokenizer.decode(tokenizer.encode(text));
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(once)), once) << text;  // normalisation is idempotent
  }
}

TEST(Tokenizer, UnknownCharactersBecomeUnkOrBytesWithByteFallback) {
  Tokenizer tokenizer(alice_tokenizer());
  std::vector<int> ids = tokenizer.encode("alice \xE2\x98\x83");  // U+2603 SNOWMAN, not in Alice
  EXPECT_NE(std::find(ids.begin(), ids.end(), SpecialTokens::kUnk), ids.end());
  TokenizerTrainOptions options;
  options.inputs = {source_dir() + "/tests/data/sentences.txt"};
  options.vocab_size = 400;
  options.num_sentinels = 2;
  options.byte_fallback = true;
  options.model_prefix = temp_dir() + "/bytes";
  train_tokenizer(options);
  Tokenizer bytes(options.model_prefix + ".model");
  std::string text = "caf\xC3\xA9 \xE2\x98\x83 42";
  EXPECT_EQ(bytes.decode(bytes.encode(text)), text);
}

TEST(Tokenizer, ChecksumIdentifiesTheModelFile) {
  Tokenizer tokenizer(alice_tokenizer());
  EXPECT_EQ(tokenizer.checksum().size(), 16u);
  EXPECT_EQ(fnv1a64_hex(""), "cbf29ce484222325");   // FNV-1a 64 offset basis
  EXPECT_EQ(fnv1a64_hex("a"), "af63dc4c8601ec8c");  // published FNV-1a test vector
}

TEST(Tokenizer, RefusesAFileThatIsNotAModel) {
  std::string path = temp_dir() + "/bad.model";
  write_text(path, "not a model");
  EXPECT_THROW(Tokenizer tokenizer(path), DataError);
}

TEST(Tokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
  Tokenizer tokenizer(alice_tokenizer());
  try {
    tokenizer.decode({5, 600});
    FAIL() << "expected DataError";
  } catch (const DataError& error) {
    EXPECT_NE(std::string(error.what()).find("token id 600 is outside the vocabulary"), std::string::npos);
  }
}

TEST(Tokenizer, VocabularyTooSmallForTheSpecialsIsAUsageError) {
  TokenizerTrainOptions options;
  options.inputs = {source_dir() + "/tests/data/sentences.txt"};
  options.vocab_size = 50;
  options.model_prefix = temp_dir() + "/m";
  EXPECT_THROW(train_tokenizer(options), UsageError);
}

// SentencePiece's option ranges are cabert's usage errors, and an empty input is bad input, both in cabert's
// words (they were SentencePiece's internal assertions, exit 1).
TEST(Tokenizer, OptionsOutsideSentencePiecesRangesAndAnEmptyInputAreRefusedInCabertsWords) {
  TokenizerTrainOptions options;
  options.inputs = {source_dir() + "/tests/data/sentences.txt"};
  options.vocab_size = 200;
  options.num_sentinels = 0;
  options.model_prefix = temp_dir() + "/ranges";
  TokenizerTrainOptions bad = options;
  bad.num_sentinels = -1;
  EXPECT_EQ(testing::usage_error_message([&] { train_tokenizer(bad); }), "--sentinels: expected 0 or more, got -1");
  bad = options;
  bad.character_coverage = 0.9;
  EXPECT_EQ(testing::usage_error_message([&] { train_tokenizer(bad); }),
            "--character-coverage 0.9: expected a value in [0.98, 1] (SentencePiece's range)");
  bad = options;
  bad.max_sentences = 50;
  EXPECT_EQ(testing::usage_error_message([&] { train_tokenizer(bad); }),
            "--max-sentences 50: expected 0 (all) or more than 100");
  bad = options;
  bad.inputs = {temp_dir() + "/empty.txt"};
  write_text(bad.inputs[0], "");
  EXPECT_EQ(testing::data_error_message([&] { train_tokenizer(bad); }), "tokenize train: the inputs hold no text");
  EXPECT_FALSE(std::filesystem::exists(options.model_prefix + ".model"));
}

}  // namespace
}  // namespace cabert::text
