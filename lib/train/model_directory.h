// What a training command's --model-dir already holds, judged by the files each kind of run writes there:
// checkpoint-<step>.cabert (pretrain); last.cabert, which both fine-tunings resume from (its task metadata tells
// translation from the others); best.cabert or run-<k>/best.cabert (fine-tuning). Every kind writes the directory's metrics.cabert, so a
// run refuses a directory holding another kind, and the checkpoint it starts from; a fresh run removes an earlier
// run's checkpoints of its own kind, so that none is taken for its own.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cabert::train {

enum class DirectoryRun { kNone, kPretraining, kFinetuning, kTranslation };

struct DirectoryContents {
  DirectoryRun run = DirectoryRun::kNone;
  std::string evidence;  // the file that shows it, relative to the directory: "checkpoint-00000009.cabert"
};

DirectoryContents inspect_model_directory(const std::string& dir);

// The checkpoints each fine-tuning writes into DIR, sorted: best.cabert, last.cabert and run-<k>/best.cabert (also
// those of an earlier fine-tuning with more runs); and last.cabert, best.cabert, averaged.cabert, epoch-<n>.cabert.
std::vector<std::filesystem::path> finetuning_checkpoints(const std::string& dir);
std::vector<std::filesystem::path> translation_checkpoints(const std::string& dir);

// A UsageError when DIR holds a run of another kind than `mine`: "--model-dir DIR: holds a pre-training
// (checkpoint-00000009.cabert) whose metrics.cabert this fine-tuning would replace; give it its own directory".
void refuse_other_run(const std::string& dir, DirectoryRun mine);

// A UsageError when a fresh run (no --resume) of a kind that resumes would start over an earlier one in DIR,
// whose `outputs` or metrics.cabert are there: "--model-dir DIR: holds an earlier run (checkpoint-00000004.cabert,
// ..., metrics.cabert); continue it with --resume, or give a new or empty directory".
void refuse_fresh_start(const std::string& dir, const std::vector<std::filesystem::path>& outputs);

// A UsageError when `start` (the checkpoint the run starts from; empty for none) is one of `outputs`, which
// the run writes over: "--model-dir DIR: this fine-tuning replaces DIR/best.cabert, which it starts from; give it
// another directory".
void refuse_start_among_outputs(const std::string& dir, DirectoryRun mine, const std::string& start,
                                const std::vector<std::filesystem::path>& outputs);

// Removes an earlier run's `outputs` from DIR (and a subdirectory of DIR left empty), logging each as
// "finetune: removed PATH (an earlier fine-tuning's; this one starts afresh)"; one that cannot go is a cabert Error.
void remove_earlier_outputs(const std::string& dir, DirectoryRun mine,
                            const std::vector<std::filesystem::path>& outputs);

}  // namespace cabert::train
