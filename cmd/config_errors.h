// Where in a --config file a bad value or key is. CLI11 reports a key that names no option ("INI was not able to
// parse pretrain.stepz") and a value that does not convert ("Could not convert: --steps = abc") without the
// file or line, and cabert's own checks name the option ("--steps: expected a positive count") whether its value
// came from the command line or the file. These say FILE:LINE when the key or the option's value is the file's.
#pragma once

#include <string>
#include <vector>

namespace cabert::cmd {

// The FILE of `--config FILE` (or `--config=FILE`) in `argv`; "" when there is none.
std::string config_file_of(const std::vector<std::string>& argv);

// "FILE:LINE" of the line that sets `key` in the config file at `path`: `key` as written in the file (a dotted
// "pretrain.stepz", or the whole text of a line CLI11 could not read), or an option's name ("--steps") matched
// against the last part of each key. "" when no line sets it (or the file cannot be read).
std::string config_line_of(const std::string& path, const std::string& key);

// For a message about a key or an option (CLI11's or cabert's, see above) whose value came from the config file
// (the option is not on the command line `argv`): the message prefixed with "FILE:LINE: ". Otherwise "".
std::string locate_config_error(const std::string& message, const std::vector<std::string>& argv);

}  // namespace cabert::cmd
