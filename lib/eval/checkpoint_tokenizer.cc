#include "lib/eval/checkpoint_tokenizer.h"

#include <filesystem>

#include "lib/core/errors.h"

namespace cabert::eval {

text::Tokenizer open_checkpoint_tokenizer(const pb::CheckpointInfo& info, const std::string& checkpoint_path,
                                          const std::string& given) {
  if (given.empty()) {
    if (info.tokenizer().empty()) {
      throw UsageError(str(checkpoint_path, " names no tokenizer; pass --tokenizer MODEL"));
    }
    std::error_code ec;
    if (!std::filesystem::exists(info.tokenizer(), ec)) {
      throw UsageError(str(checkpoint_path, " names tokenizer '", info.tokenizer(),
                           "', which is not there; pass --tokenizer MODEL"));
    }
  }
  text::Tokenizer tokenizer(given.empty() ? info.tokenizer() : given);
  check_tokenizer_matches(tokenizer, info, checkpoint_path);
  return tokenizer;
}

void check_tokenizer_matches(const text::Tokenizer& tokenizer, const pb::CheckpointInfo& info,
                             const std::string& checkpoint_path) {
  if (!info.tokenizer_checksum().empty() && info.tokenizer_checksum() != tokenizer.checksum()) {
    throw DataError(str(checkpoint_path, ": the checkpoint was trained with tokenizer ", info.tokenizer(),
                        " (checksum ", info.tokenizer_checksum(), "), but ", tokenizer.path(), " has checksum ",
                        tokenizer.checksum(), "; pass the tokenizer the model was pre-trained with"));
  }
  // An older checkpoint without a checksum, or one imported from elsewhere: the ids must still fit.
  if (info.has_model() && tokenizer.vocab_size() > info.model().vocab_size()) {
    throw DataError(str(checkpoint_path, ": the model's vocabulary has ", info.model().vocab_size(), " ids, but ",
                        tokenizer.path(), " has ", tokenizer.vocab_size(),
                        " pieces; pass the tokenizer the model was pre-trained with"));
  }
}

}  // namespace cabert::eval
