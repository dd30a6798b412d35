// Model configs as text: a preset name or a protobuf text-format (.textproto) file, `--set a.b=value`
// overrides (protobuf field names; enums by name; repeated fields as "1,2,3" or "[1,2,3]") and the text
// that `--dump-config` prints.
#pragma once

#include <string>
#include <vector>

#include "formats/model.pb.h"

namespace cabert::config {

// `preset_or_path`: a preset name, or a text-format file holding a complete ModelConfig. Then applies each
// override in order and validates the result (UsageError naming the file, line and column, the field or
// the expected value).
pb::ModelConfig load_model_config(const std::string& preset_or_path,
                                  const std::vector<std::string>& set_overrides = {});

// Parses a text-format ModelConfig; `source` names it in errors ("FILE:LINE:COLUMN: message").
pb::ModelConfig parse_model_config_text(const std::string& text, const std::string& source);

// Applies one "a.b=value" override. Throws UsageError for unknown fields or bad values.
void apply_override(pb::ModelConfig* config, const std::string& assignment);

// Protobuf text format of the config (what --dump-config prints; load_model_config reads it back).
std::string config_to_text(const pb::ModelConfig& config);

}  // namespace cabert::config
