// The tokenizer that goes with a checkpoint: the one a command names (--tokenizer) or else the one the checkpoint
// records, refused unless its pieces are the ones the model was trained on. Every command that reads a model
// (evaluate, export, finetune --init, translation --init) opens its tokenizer here.
#pragma once

#include <string>

#include "formats/checkpoint.pb.h"
#include "lib/text/tokenizer.h"

namespace cabert::eval {

// `given` when it is not empty, else the path the checkpoint records. UsageError when the checkpoint names no
// tokenizer or one that is not there (a model moved to another machine), naming both the checkpoint and what to
// pass; a missing `given` fails as any missing input file does. Then check_tokenizer_matches.
text::Tokenizer open_checkpoint_tokenizer(const pb::CheckpointInfo& info, const std::string& checkpoint_path,
                                          const std::string& given);

// Refuses (DataError) a tokenizer whose checksum differs from the checkpoint's, or, for a checkpoint without a
// checksum, one with more pieces than the model has ids.
void check_tokenizer_matches(const text::Tokenizer& tokenizer, const pb::CheckpointInfo& info,
                             const std::string& checkpoint_path);

}  // namespace cabert::eval
