// One validation for every model config, wherever it comes from: a preset with `--set` overrides, a
// .textproto file, or a checkpoint written by any cabert (a model must never be built from sizes that do
// not fit, e.g. num_heads 0 would divide by zero).
#pragma once

#include <string>

#include "formats/model.pb.h"

namespace cabert::config {

// The first problem found, as "expected ..., got ..." (empty when the config is valid).
std::string model_config_problem(const pb::ModelConfig& config);

// Throws UsageError "model config 'NAME' expected ..." (a config the user gave).
void validate_model_config(const pb::ModelConfig& config);

// Throws DataError "SOURCE: the model config in the file is invalid: expected ..." (a config read from a
// file cabert wrote or should have written: checkpoints).
void validate_stored_model_config(const pb::ModelConfig& config, const std::string& source);

}  // namespace cabert::config
