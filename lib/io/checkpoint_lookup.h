// Finding checkpoint files on disk: the checkpoint-<step>.cabert files a pre-training writes into its model
// directory, and the checkpoint a user means by a path that may be a model directory. Used by training (which
// names, lists and prunes its checkpoints) and by every command that reads a model (evaluate, export, finetune
// --init), so that reading a model never depends on the training code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cabert::io {

// Checkpoint files in `dir` named checkpoint-<step>.cabert, sorted by step.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);
std::string checkpoint_path(const std::string& dir, int64_t step);

// A checkpoint argument as a user types it (`--model`, `--init`): a file is itself; a model directory stands
// for its best.cabert (a fine-tuning run) or else its newest checkpoint-<step>.cabert whose header reads back
// (a pre-training run; broken newer ones are skipped with a warning), and the choice is logged. A directory
// with neither is a UsageError naming `flag`; a path that does not exist is returned for the reader to report.
std::string resolve_checkpoint_argument(const std::string& path, const std::string& flag);

}  // namespace cabert::io
