// The reading side of config.json (torch-free, so that the import's refusals can be fuzzed without LibTorch):
// the ModelConfig a config.json describes, from its "cabert" block (a cabert export) or from Hugging Face's keys
// (BertConfig, ElectraConfig, ConvBertConfig: a model transformers wrote).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "formats/model.pb.h"

namespace cabert::interop {

struct ConfigReading {
  pb::ModelConfig config;
  std::string model_type;  // "bert", "electra", "convbert" or "cabert"
};

// Throws DataError "PATH: ..." naming the key for a model type cabert cannot import, a missing or mistyped key
// (a non-integer or out-of-range size), or a value cabert's models cannot compute (activation, segment count,
// position type, sizes the validation refuses).
ConfigReading read_model_config_json(const nlohmann::json& json, const std::string& path);

}  // namespace cabert::interop
