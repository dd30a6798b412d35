// `--resume` with options that differ from the run's (issue 17): the options a checkpoint's header recorded
// (every file cabert writes records its command's resolved options) against the resuming command's. Options
// that only say how or where to run (threads, device, kernels, logging, checkpoint cadence, the launcher) may
// change freely; the run's length (--steps, --epochs) changes with a message (extending a run is what --resume
// is for; the schedule follows the new length); any other difference is refused unless --allow-changed-options,
// which continues with the new values and says which. The model config always stays the checkpoint's: a changed
// --preset or --set is reported, never applied.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cabert::train {

struct OptionChange {
  std::string name, before, after;
};

// Differences among the options that define a run. An option only one side knows (one a newer cabert added,
// recorded with its default from then on) is not a change, nor is another name of the same file (`./corpus` for
// `corpus`; item by item in comma-separated lists).
std::vector<OptionChange> changed_run_options(const std::map<std::string, std::string>& before,
                                              const std::map<std::string, std::string>& after);

// "--lr 0.001 (was 0.0003), --steps 200 (was 100)".
std::string describe_changes(const std::vector<OptionChange>& changes);

// Reads the checkpoint's recorded options and compares them with this run's (run_context().options): throws
// a UsageError naming every change but the length unless `allow_changes`, in which case it warns; returns
// every change.
// A finished run (`nothing_left_to_train`) only warns: resuming it trains nothing, so no option takes effect.
std::vector<OptionChange> check_resume_options(const std::string& checkpoint_path, bool allow_changes,
                                               bool nothing_left_to_train = false);

}  // namespace cabert::train
