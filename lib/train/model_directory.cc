#include "lib/train/model_directory.h"

#include <algorithm>
#include <exception>
#include <regex>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/checkpoint_lookup.h"

namespace fs = std::filesystem;

namespace cabert::train {
namespace {

const char* run_noun(DirectoryRun run) {
  switch (run) {
    case DirectoryRun::kPretraining: return "pre-training";
    case DirectoryRun::kFinetuning: return "fine-tuning";
    case DirectoryRun::kTranslation: return "translation fine-tuning";
    case DirectoryRun::kNone: break;
  }
  return "run";
}

// The prefix of the command's log lines.
const char* log_prefix(DirectoryRun run) {
  if (run == DirectoryRun::kTranslation) return "translation";
  return run == DirectoryRun::kPretraining ? "pretrain" : "finetune";
}

// DIR's entries whose names match `pattern` and that hold `inside` (a file in a subdirectory; empty: the entry
// itself is the file).
std::vector<fs::path> matching_files(const std::string& dir, const std::regex& pattern, const std::string& inside) {
  std::vector<fs::path> found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    if (!std::regex_match(it->path().filename().string(), pattern)) continue;
    const fs::path file = inside.empty() ? it->path() : it->path() / inside;
    std::error_code missing;
    if (fs::is_regular_file(file, missing)) found.push_back(file);
  }
  return found;
}

bool holds(const std::string& dir, const char* name) {
  std::error_code error;
  return fs::exists(fs::path(dir) / name, error);
}

// A translation fine-tuning's best.cabert (one stopped before it wrote last.cabert); one whose header does not read
// back counts as a fine-tuning's.
bool is_translation(const fs::path& checkpoint) {
  try {
    const pb::CheckpointInfo info = io::read_checkpoint_info(checkpoint.string());
    const auto task = info.metadata().find("task");
    return task != info.metadata().end() && task->second == "translation";
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

DirectoryContents inspect_model_directory(const std::string& dir) {
  DirectoryContents contents;
  const auto pretraining = io::list_checkpoints(dir);
  if (!pretraining.empty()) {
    contents.run = DirectoryRun::kPretraining;
    contents.evidence = fs::path(pretraining.back().second).filename().string();
  } else if (holds(dir, "last.cabert") && is_translation(fs::path(dir) / "last.cabert")) {
    // Both fine-tunings resume from last.cabert; its task tells them apart.
    contents.run = DirectoryRun::kTranslation;
    contents.evidence = "last.cabert";
  } else if (auto finetuning = finetuning_checkpoints(dir); !finetuning.empty()) {
    contents.run = is_translation(finetuning.front()) ? DirectoryRun::kTranslation : DirectoryRun::kFinetuning;
    contents.evidence = finetuning.front().lexically_relative(dir).string();
  }
  return contents;
}

std::vector<fs::path> finetuning_checkpoints(const std::string& dir) {
  std::vector<fs::path> found = matching_files(dir, std::regex("run-[0-9]+"), "best.cabert");
  for (const char* name : {"best.cabert", "last.cabert"}) {
    if (holds(dir, name)) found.push_back(fs::path(dir) / name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<fs::path> translation_checkpoints(const std::string& dir) {
  std::vector<fs::path> found = matching_files(dir, std::regex("epoch-[0-9]+\\.cabert"), "");
  for (const char* name : {"last.cabert", "best.cabert", "averaged.cabert"}) {
    if (holds(dir, name)) found.push_back(fs::path(dir) / name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

void refuse_other_run(const std::string& dir, DirectoryRun mine) {
  const DirectoryContents contents = inspect_model_directory(dir);
  if (contents.run == DirectoryRun::kNone || contents.run == mine) return;
  throw UsageError(str("--model-dir ", dir, ": holds a ", run_noun(contents.run), " (", contents.evidence,
                       ") whose metrics.cabert this ", run_noun(mine), " would replace; give it its own directory"));
}

void refuse_fresh_start(const std::string& dir, const std::vector<fs::path>& outputs) {
  std::vector<std::string> found;
  for (const fs::path& path : outputs) found.push_back(path.lexically_relative(dir).string());
  if (holds(dir, "metrics.cabert")) found.push_back("metrics.cabert");
  if (found.empty()) return;
  std::string names = found.front();
  if (found.size() > 1) names += str(", ", found.size() > 2 ? "..., " : "", found.back());
  throw UsageError(str("--model-dir ", dir, ": holds an earlier run (", names,
                       "); continue it with --resume, or give a new or empty directory"));
}

void refuse_start_among_outputs(const std::string& dir, DirectoryRun mine, const std::string& start,
                                const std::vector<fs::path>& outputs) {
  if (start.empty()) return;
  std::error_code error;
  for (const fs::path& path : outputs) {
    if (fs::equivalent(path, start, error)) {
      throw UsageError(str("--model-dir ", dir, ": this ", run_noun(mine), " replaces ", path.string(),
                           ", which it starts from; give it another directory"));
    }
  }
}

void remove_earlier_outputs(const std::string& dir, DirectoryRun mine, const std::vector<fs::path>& outputs) {
  const char* who = log_prefix(mine);
  std::error_code error;
  for (const fs::path& path : outputs) {
    if (!fs::remove(path, error) && error) {
      throw Error(
          str(who, ": cannot remove ", path.string(), " (an earlier ", run_noun(mine), "'s): ", error.message()));
    }
    if (path.parent_path() != fs::path(dir)) fs::remove(path.parent_path(), error);  // only when empty
    log_info(who, ": removed ", path.string(), " (an earlier ", run_noun(mine), "'s; this one starts afresh)");
  }
}

}  // namespace cabert::train
