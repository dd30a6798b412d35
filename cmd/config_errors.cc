#include "cmd/config_errors.h"

#include <cctype>
#include <fstream>

#include "lib/text/text_source.h"

namespace cabert::cmd {
namespace {

std::string unquoted(const std::string& text) {
  if (text.size() >= 2 && (text.front() == '"' || text.front() == '\'') && text.back() == text.front()) {
    return text.substr(1, text.size() - 2);
  }
  return text;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The option a message is about: "--steps" from "--steps: ...", "Could not convert: --steps = abc" or "The value
// x is not an allowed value for --steps"; the key from "INI was not able to parse pretrain.stepz"; else "".
std::string subject_of(const std::string& message) {
  static const std::string kExtra = "INI was not able to parse ",
                           kConvert = "Could not convert: ", kAllowed = " is not an allowed value for ";
  if (starts_with(message, kExtra)) return message.substr(kExtra.size());
  std::string rest;
  if (starts_with(message, kConvert)) {
    rest = message.substr(kConvert.size());
  } else if (const size_t at = message.find(kAllowed); starts_with(message, "The value ") && at != std::string::npos) {
    rest = message.substr(at + kAllowed.size());
  } else {
    rest = message;
  }
  if (!starts_with(rest, "--")) return "";
  size_t end = 2;
  while (end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[end])) || rest[end] == '-')) ++end;
  return end > 2 ? rest.substr(0, end) : "";
}

}  // namespace

std::string config_file_of(const std::vector<std::string>& argv) {
  std::string file;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "--") break;
    if (argv[i] == "--config" && i + 1 < argv.size()) file = argv[i + 1];
    if (starts_with(argv[i], "--config=")) file = argv[i].substr(9);
  }
  return file;
}

std::string config_line_of(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  const bool option = starts_with(key, "--");
  const std::string name = option ? key.substr(2) : key;
  std::string section, line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string content = text::trim(line);
    if (content.empty() || content.front() == '#' || content.front() == ';') continue;
    if (!option && content == key) return path + ":" + std::to_string(number);
    if (content.front() == '[') {
      const size_t open = content.find_first_not_of('['), close = content.find(']');
      if (close != std::string::npos && open < close) section = text::trim(content.substr(open, close - open));
      if (section == "default") section.clear();
      continue;
    }
    const size_t equals = content.find('=');
    if (equals == std::string::npos) continue;
    const std::string written = unquoted(text::trim(content.substr(0, equals)));
    const std::string full = section.empty() ? written : section + "." + written;
    const size_t dot = full.rfind('.');
    const std::string last = dot == std::string::npos ? full : full.substr(dot + 1);
    if (option ? last == name : full == key) return path + ":" + std::to_string(number);
  }
  return "";
}

std::string locate_config_error(const std::string& message, const std::vector<std::string>& argv) {
  const std::string file = config_file_of(argv);
  if (file.empty()) return "";
  const std::string subject = subject_of(message);
  if (subject.empty()) return "";
  if (starts_with(subject, "--")) {
    for (const auto& arg : argv) {
      if (arg == subject || starts_with(arg, subject + "=")) return "";  // the command line's value
    }
  }
  const std::string where = config_line_of(file, subject);
  if (where.empty()) return "";
  if (!starts_with(subject, "--")) {
    return where + ": '" + subject + "' names no option of this command (--dump-options writes every key it takes)";
  }
  return where + ": " + message;
}

}  // namespace cabert::cmd
