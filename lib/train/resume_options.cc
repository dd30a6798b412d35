#include "lib/train/resume_options.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/core/run_context.h"
#include "lib/io/record_file.h"

namespace cabert::train {
namespace {

// How or where a run goes, not what it computes; also the options that only steer what a command prints.
const std::set<std::string>& operational_options() {
  static const std::set<std::string> names = {"allow-changed-options",
                                              "config",
                                              "device",
                                              "dist-timeout",
                                              "dry-run",
                                              "dump-config",
                                              "dump-options",
                                              "eval-every",
                                              "keep-checkpoints",
                                              "kernels",
                                              "list-presets",
                                              "log-every",
                                              "log-file",
                                              "log-format",
                                              "log-level",
                                              "max-line-bytes",
                                              "model-dir",
                                              "nproc",
                                              "quiet",
                                              "resume",
                                              "save-every",
                                              "tensorboard",
                                              "threads"};
  return names;
}

// How long the run goes: extending a finished run is what --resume is for, so these change with a message.
const std::set<std::string>& length_options() {
  static const std::set<std::string> names = {"steps", "epochs"};
  return names;
}

std::vector<std::string> comma_separated(const std::string& value) {
  std::vector<std::string> items;
  std::istringstream in(value);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

// Two spellings of one value: the same text, or (item by item of a comma-separated list) names of one existing
// file, such as `corpus`, `./corpus` and its absolute path.
bool same_value(const std::string& before, const std::string& after) {
  if (before == after) return true;
  const std::vector<std::string> old_items = comma_separated(before), new_items = comma_separated(after);
  if (old_items.size() != new_items.size()) return false;
  for (size_t i = 0; i < old_items.size(); ++i) {
    if (old_items[i] == new_items[i]) continue;
    std::error_code error;
    if (!std::filesystem::equivalent(old_items[i], new_items[i], error) || error) return false;
  }
  return true;
}

}  // namespace

std::vector<OptionChange> changed_run_options(const std::map<std::string, std::string>& before,
                                              const std::map<std::string, std::string>& after) {
  std::vector<OptionChange> changes;
  for (const auto& [name, old_value] : before) {
    if (operational_options().count(name)) continue;
    const auto now = after.find(name);
    if (now != after.end() && !same_value(old_value, now->second)) changes.push_back({name, old_value, now->second});
  }
  return changes;
}

std::string describe_changes(const std::vector<OptionChange>& changes) {
  std::string text;
  for (const auto& change : changes) {
    text += str(text.empty() ? "" : ", ", "--", change.name, " ", change.after.empty() ? "''" : change.after, " (was ",
                change.before.empty() ? "''" : change.before, ")");
  }
  return text;
}

std::vector<OptionChange> check_resume_options(const std::string& checkpoint_path, bool allow_changes,
                                               bool nothing_left_to_train) {
  io::RecordReader reader(checkpoint_path);
  const auto& recorded = reader.header().options();
  const std::map<std::string, std::string> before(recorded.begin(), recorded.end());
  std::vector<OptionChange> all = changed_run_options(before, run_context().options), changes;
  for (const auto& change : all) {
    if (length_options().count(change.name)) {
      log_info("--resume: --", change.name, " ", change.after, " (was ", change.before,
               "): the run continues to the new "
               "length (the learning-rate schedule follows it)");
    } else {
      changes.push_back(change);
    }
  }
  if (changes.empty()) return all;
  if (nothing_left_to_train) {
    log_warning("--resume: options differ from those that wrote ", checkpoint_path, ": ", describe_changes(changes),
                "; the run is finished, so they change nothing");
    return all;
  }
  if (!allow_changes) {
    throw UsageError(str("--resume: options differ from those that wrote ", checkpoint_path, ": ",
                         describe_changes(changes),
                         "; rerun with the same options, or pass --allow-changed-options "
                         "to continue with the new ones"));
  }
  log_warning("--resume: continuing with changed options (--allow-changed-options): ", describe_changes(changes),
              "; the model config stays the checkpoint's (a changed --preset or --set is not applied)");
  return all;
}

}  // namespace cabert::train
