#include "lib/interop/hf_config_reader.h"

#include <google/protobuf/util/json_util.h>

#include <vector>

#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"

namespace cabert::interop {

using nlohmann::json;

namespace {

const json& require(const json& j, const std::string& key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end()) throw DataError(str(path, ": missing key '", key, "'"));
  return *it;
}

int require_int(const json& j, const std::string& key, const std::string& path) {
  const json& value = require(j, key, path);
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > (1 << 30)) {
    throw DataError(str(path, ": '", key, "' must be a positive integer, got ", value.dump()));
  }
  return value.get<int>();
}

double number_or(const json& j, const std::string& key, double fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw DataError(str(path, ": '", key, "' must be a number, got ", it->dump()));
  return it->get<double>();
}

// An optional integer key: absent or null gives `fallback`; 2.5, "2" or a value beyond int32 is refused.
int integer_or(const json& j, const std::string& key, int fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < -(int64_t{1} << 30) || it->get<int64_t>() > (int64_t{1} << 30)) {
    throw DataError(str(path, ": '", key, "' must be an integer, got ", it->dump()));
  }
  return it->get<int>();
}

std::string string_or(const json& j, const std::string& key, const std::string& fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw DataError(str(path, ": '", key, "' must be a string, got ", it->dump()));
  return it->get<std::string>();
}

// config.json's hidden_act as cabert's FFN activation: "gelu" (the exact, erf one) or "relu" (what the export
// writes for ffn_activation RELU).
pb::FfnActivation ffn_activation(const std::string& act, const std::string& path) {
  if (act == "gelu") return pb::GELU;
  if (act == "relu") return pb::RELU;
  throw DataError(
      str(path, ": 'hidden_act' is '", act, "'; cabert's layers use the exact (erf) GELU, 'gelu', or ReLU, 'relu'"));
}

const char* hidden_act_name(pb::FfnActivation activation) { return activation == pb::RELU ? "relu" : "gelu"; }

pb::ModelConfig from_cabert_block(const json& block, const std::string& path) {
  pb::ModelConfig config;
  auto status = google::protobuf::util::JsonStringToMessage(require(block, "model", path).dump(), &config);
  if (!status.ok()) throw DataError(str(path, ": 'cabert.model' is not a cabert model config: ", status.ToString()));
  return config;
}

pb::ModelConfig from_hf_keys(const json& j, const std::string& type, const std::string& path) {
  pb::ModelConfig c = config::preset_config(type == "convbert" ? "convbert-base" : "bert-base-absolute");
  c.set_name("hf-" + type);
  c.set_vocab_size(require_int(j, "vocab_size", path));
  c.set_hidden_size(require_int(j, "hidden_size", path));
  c.set_embedding_size(type == "bert" ? c.hidden_size() : require_int(j, "embedding_size", path));
  c.set_num_layers(require_int(j, "num_hidden_layers", path));
  c.set_num_heads(require_int(j, "num_attention_heads", path));
  c.set_intermediate_size(require_int(j, "intermediate_size", path));
  c.set_max_length(require_int(j, "max_position_embeddings", path));
  c.set_dropout(static_cast<float>(number_or(j, "hidden_dropout_prob", 0.1, path)));
  c.set_attention_dropout(static_cast<float>(number_or(j, "attention_probs_dropout_prob", 0.1, path)));
  c.set_layer_norm_eps(static_cast<float>(number_or(j, "layer_norm_eps", 1e-12, path)));
  c.set_initializer_range(static_cast<float>(number_or(j, "initializer_range", 0.02, path)));
  c.set_ffn_activation(ffn_activation(string_or(j, "hidden_act", "gelu", path), path));
  const int segments = integer_or(j, "type_vocab_size", 2, path);
  if (segments != 2) {
    throw DataError(str(path, ": 'type_vocab_size' is ", segments, "; cabert's models have 2 segment embeddings"));
  }
  const std::string positions = string_or(j, "position_embedding_type", "absolute", path);
  if (positions != "absolute") {
    throw DataError(str(path, ": 'position_embedding_type' is '", positions, "'; cabert imports absolute positions"));
  }
  if (type == "convbert") {
    auto* cb = c.mutable_convbert();
    cb->set_head_ratio(require_int(j, "head_ratio", path));
    cb->set_conv_kernel_size(require_int(j, "conv_kernel_size", path));
    cb->set_ffn_groups(integer_or(j, "num_groups", 1, path));
  }
  return c;
}

// The Hugging Face keys of a cabert export that say another model than its "cabert" block: what transformers would
// build from the file is not what cabert imports from it.
std::vector<std::string> hf_keys_against_block(const json& j, const pb::ModelConfig& config, const std::string& type) {
  std::vector<std::string> differences;
  auto compare = [&](const char* key, int64_t block) {
    auto it = j.find(key);
    if (it != j.end() && !(it->is_number_integer() && it->get<int64_t>() == block)) {
      differences.push_back(str(key, " ", it->dump(), " (the block: ", block, ")"));
    }
  };
  compare("vocab_size", config.vocab_size());
  compare("hidden_size", config.hidden_size());
  compare("num_hidden_layers", config.num_layers());
  compare("num_attention_heads", config.num_heads());
  compare("intermediate_size", config.intermediate_size());
  compare("max_position_embeddings", config.max_length());
  if (type != "bert") compare("embedding_size", config.embedding_size());
  if (type == "convbert") {
    compare("head_ratio", config.convbert().head_ratio());
    compare("conv_kernel_size", config.convbert().conv_kernel_size());
  }
  const std::string act = hidden_act_name(config.ffn_activation());
  if (auto it = j.find("hidden_act"); it != j.end() && *it != act) {
    differences.push_back(str("hidden_act ", it->dump(), " (the block: \"", act, "\")"));
  }
  return differences;
}

}  // namespace

ConfigReading read_model_config_json(const json& j, const std::string& path) {
  if (!j.is_object()) throw DataError(str(path, ": expected a JSON object"));
  const std::string type = string_or(j, "model_type", "", path);
  if (type != "bert" && type != "electra" && type != "convbert" && type != "cabert") {
    throw DataError(str(path, ": model_type '", type,
                        "' cannot be imported; cabert imports bert, electra and "
                        "convbert (and its own exports)"));
  }
  auto block = j.find("cabert");
  if (type == "cabert" && block == j.end()) throw DataError(str(path, ": missing key 'cabert'"));
  pb::ModelConfig config = block != j.end() ? from_cabert_block(*block, path) : from_hf_keys(j, type, path);
  if (block != j.end() && type != "cabert") {
    if (const auto differences = hf_keys_against_block(j, config, type); !differences.empty()) {
      log_warning(path, ": its Hugging Face keys disagree with its \"cabert\" block: ", joined(differences),
                  "; imported as the block says (transformers would build another model from this file)");
    }
  }
  try {
    config::validate_model_config(config);
  } catch (const Error& error) {
    throw DataError(str(path, ": ", error.what()));
  }
  return {config, type};
}

}  // namespace cabert::interop
