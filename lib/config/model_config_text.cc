#include "lib/config/model_config_text.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/files.h"

namespace cabert::config {
namespace {

// Protobuf text-format errors with file, line and column.
class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit CollectErrors(std::string file) : file_(std::move(file)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = str(file_, ":", line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, int, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string file_, first_;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

void apply_override(pb::ModelConfig* config, const std::string& assignment) {
  using google::protobuf::FieldDescriptor;
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) throw UsageError(str("--set expects key=value, got '", assignment, "'"));
  std::string key = trim(assignment.substr(0, eq)), value = trim(assignment.substr(eq + 1));
  google::protobuf::Message* message = config;
  std::stringstream path(key);
  std::string part;
  std::vector<std::string> parts;
  while (std::getline(path, part, '.')) parts.push_back(part);
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field = message->GetDescriptor()->FindFieldByName(parts[i]);
    if (field == nullptr) {
      std::string known;
      for (int f = 0; f < message->GetDescriptor()->field_count(); ++f) {
        known += (f ? ", " : "") + message->GetDescriptor()->field(f)->name();
      }
      throw UsageError(str("--set ", key, ": unknown field '", parts[i], "' in ", message->GetDescriptor()->name(),
                           " (fields: ", known, ")"));
    }
    bool last = i + 1 == parts.size();
    if (!last) {
      if (field->type() != FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) {
        throw UsageError(str("--set ", key, ": '", parts[i], "' is not a message"));
      }
      message = message->GetReflection()->MutableMessage(message, field);
      continue;
    }
    if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      throw UsageError(str("--set ", key, ": '", parts[i], "' is a message; set one of its fields (", key, ".x=...)"));
    }
    std::vector<std::string> values;
    if (field->is_repeated()) {
      std::string list = value;
      if (!list.empty() && list.front() == '[') list = list.substr(1);
      if (!list.empty() && list.back() == ']') list.pop_back();
      std::stringstream items(list);
      while (std::getline(items, part, ',')) {
        if (!trim(part).empty()) values.push_back(trim(part));
      }
      message->GetReflection()->ClearField(message, field);
    } else {
      values.push_back(value);
    }
    for (std::string item : values) {
      if (field->type() == FieldDescriptor::TYPE_ENUM) {
        for (auto& ch : item) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        for (auto& ch : item) ch = ch == '-' ? '_' : ch;
      } else if (field->type() == FieldDescriptor::TYPE_STRING && (item.empty() || item.front() != '"')) {
        item = str('"', item, '"');
      }
      google::protobuf::TextFormat::Parser parser;
      CollectErrors quiet(key);  // our message below says it better than protobuf's log line
      parser.RecordErrorsTo(&quiet);
      if (!parser.ParseFieldValueFromString(item, field, message)) {
        std::string expected = field->type_name();
        if (field->type() == FieldDescriptor::TYPE_ENUM) {
          expected = "one of";
          for (int v = 0; v < field->enum_type()->value_count(); ++v)
            expected += " " + field->enum_type()->value(v)->name();
        }
        throw UsageError(str("--set ", key, ": expected ", expected, ", got '", value, "'"));
      }
    }
  }
}

pb::ModelConfig parse_model_config_text(const std::string& text, const std::string& source) {
  pb::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors(source);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    throw UsageError(errors.first().empty() ? source + ": cannot parse the model config" : errors.first());
  }
  return config;
}

pb::ModelConfig load_model_config(const std::string& preset_or_path, const std::vector<std::string>& set_overrides) {
  pb::ModelConfig config;
  if (is_preset(preset_or_path)) {
    config = preset_config(preset_or_path);
  } else if (preset_or_path.find(".textproto") != std::string::npos || std::ifstream(preset_or_path).good()) {
    config = parse_model_config_text(read_file(preset_or_path), preset_or_path);
  } else {
    preset_config(preset_or_path);  // throws the unknown-preset message
  }
  for (const auto& assignment : set_overrides) apply_override(&config, assignment);
  validate_model_config(config);
  return config;
}

std::string config_to_text(const pb::ModelConfig& config) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetPrintMessageFieldsInIndexOrder(true);
  std::string out;
  printer.PrintToString(config, &out);
  return out;
}

}  // namespace cabert::config
