#include "lib/eval/checkpoint_tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lib/core/errors.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

using testing::alice_tokenizer;
using testing::data_error_message;
using testing::temp_dir;
using testing::usage_error_message;

// What a checkpoint trained with `tokenizer_path` records about it.
pb::CheckpointInfo info_for(const std::string& tokenizer_path, int vocab_size) {
  text::Tokenizer tokenizer(tokenizer_path);
  pb::CheckpointInfo info;
  info.set_tokenizer(tokenizer_path);
  info.set_tokenizer_checksum(tokenizer.checksum());
  info.mutable_model()->set_vocab_size(vocab_size);
  return info;
}

// A copy of the Alice tokenizer at another path: the same checksum, as after moving a run to another machine.
std::string alice_copy() {
  const std::string copy = temp_dir() + "/moved.model";
  std::filesystem::copy_file(alice_tokenizer(), copy);
  return copy;
}

TEST(CheckpointTokenizer, OpensTheTokenizerTheCheckpointRecords) {
  const pb::CheckpointInfo info = info_for(alice_tokenizer(), 600);
  const text::Tokenizer tokenizer = eval::open_checkpoint_tokenizer(info, "run/best.cabert", "");
  EXPECT_EQ(tokenizer.path(), alice_tokenizer());
  EXPECT_EQ(tokenizer.checksum(), info.tokenizer_checksum());
  EXPECT_EQ(tokenizer.vocab_size(), 600);
}

TEST(CheckpointTokenizer, AGivenTokenizerServesAModelWhoseRecordedOneIsGone) {
  pb::CheckpointInfo info = info_for(alice_tokenizer(), 600);
  info.set_tokenizer(temp_dir() + "/elsewhere/tok.model");
  const std::string copy = alice_copy();
  const text::Tokenizer tokenizer = eval::open_checkpoint_tokenizer(info, "run/best.cabert", copy);
  EXPECT_EQ(tokenizer.path(), copy);
  EXPECT_EQ(usage_error_message([&] { eval::open_checkpoint_tokenizer(info, "run/best.cabert", ""); }),
            "run/best.cabert names tokenizer '" + temp_dir() +
                "/elsewhere/tok.model', which is not there; pass --tokenizer MODEL");
}

TEST(CheckpointTokenizer, ACheckpointThatNamesNoTokenizerAsksForOne) {
  pb::CheckpointInfo info = info_for(alice_tokenizer(), 600);
  info.clear_tokenizer();
  EXPECT_EQ(usage_error_message([&] { eval::open_checkpoint_tokenizer(info, "imported.cabert", ""); }),
            "imported.cabert names no tokenizer; pass --tokenizer MODEL");
  EXPECT_EQ(eval::open_checkpoint_tokenizer(info, "imported.cabert", alice_tokenizer()).vocab_size(), 600);
}

// The file the user named is the one reported, not the one the checkpoint records.
TEST(CheckpointTokenizer, AGivenTokenizerThatIsNotThereIsReportedByItsOwnName) {
  const pb::CheckpointInfo info = info_for(alice_tokenizer(), 600);
  const std::string missing = temp_dir() + "/typo.model";
  EXPECT_EQ(usage_error_message([&] { eval::open_checkpoint_tokenizer(info, "run/best.cabert", missing); }),
            "cannot open input file " + missing + ": No such file or directory");
}

TEST(CheckpointTokenizer, RefusesATokenizerWithOtherPieces) {
  text::TokenizerTrainOptions options;
  options.inputs = {testing::source_dir() + "/tests/data/sentences.txt"};
  options.vocab_size = 200;
  options.model_prefix = temp_dir() + "/other";
  text::train_tokenizer(options);
  const std::string other = options.model_prefix + ".model";
  const text::Tokenizer other_tokenizer(other);
  const pb::CheckpointInfo info = info_for(alice_tokenizer(), 600);
  EXPECT_EQ(data_error_message([&] { eval::open_checkpoint_tokenizer(info, "run/best.cabert", other); }),
            "run/best.cabert: the checkpoint was trained with tokenizer " + alice_tokenizer() + " (checksum " +
                info.tokenizer_checksum() + "), but " + other + " has checksum " + other_tokenizer.checksum() +
                "; pass the tokenizer the model was pre-trained with");
  // Without a checksum (an older or imported checkpoint) only the vocabulary size can be checked: a tokenizer
  // with more pieces than the model has ids would index past its embeddings.
  pb::CheckpointInfo unchecked = info;
  unchecked.clear_tokenizer_checksum();
  unchecked.mutable_model()->set_vocab_size(150);
  EXPECT_EQ(data_error_message([&] { eval::open_checkpoint_tokenizer(unchecked, "old.cabert", other); }),
            "old.cabert: the model's vocabulary has 150 ids, but " + other +
                " has 200 pieces; pass the tokenizer the model was pre-trained with");
  unchecked.mutable_model()->set_vocab_size(200);
  EXPECT_EQ(eval::open_checkpoint_tokenizer(unchecked, "old.cabert", other).checksum(), other_tokenizer.checksum());
}

}  // namespace
}  // namespace cabert
