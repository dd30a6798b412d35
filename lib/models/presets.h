// Named model configurations shipped with the binary (registered explicitly in presets.cc), loading from
// .textproto files, `--set a.b=value` overrides and validation.
#pragma once

#include <string>
#include <vector>

#include "formats/model.pb.h"

namespace cabert::models {

// Throws UsageError naming the known presets when `name` is unknown.
pb::ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();
// One line per preset: name and a short description.
std::string describe_presets();

// `preset_or_path`: a preset name, or a protobuf text-format file holding a complete ModelConfig
// (`--dump-config` prints one to start from). Then applies each "a.b=value" override in order and
// validates the result.
pb::ModelConfig load_model_config(const std::string& preset_or_path,
                                  const std::vector<std::string>& set_overrides = {});

// Applies one "a.b=value" override (protobuf field names; enums by name; repeated fields as "1,2,3" or
// "[1,2,3]"). Throws UsageError for unknown fields or bad values.
void apply_override(pb::ModelConfig* config, const std::string& assignment);

// Throws UsageError when the sizes do not fit together (hidden not divisible by heads, ...).
void validate_model_config(const pb::ModelConfig& config);

// Protobuf text format of the config (what --dump-config prints).
std::string config_to_text(const pb::ModelConfig& config);

}  // namespace cabert::models
