#include "lib/interop/hf_config.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <cstdlib>

#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"

namespace cabert::interop {

using nlohmann::json;

namespace {

// A float config value as the decimal it was written as (0.1, not 0.10000000149011612): the shortest one that reads
// back as the same float.
double decimal(float value) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return std::strtod(text, nullptr);
}

}  // namespace

std::string model_config_to_json(const pb::ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(config, &out, options);
  if (!status.ok()) throw Error(str("model config to JSON: ", status.ToString()));
  return out;
}

json export_config_json(const pb::ModelConfig& config, HfFamily family, const ExportFacts& facts) {
  json j;
  j["architectures"] = {family == HfFamily::kNone ? str("cabert/", model_head_name(facts.head))
                                                  : hf_architecture(family, facts.head)};
  j["model_type"] = hf_model_type(family);
  j["vocab_size"] = config.vocab_size();
  j["hidden_size"] = config.hidden_size();
  j["num_hidden_layers"] = config.num_layers();
  j["num_attention_heads"] = config.num_heads();
  j["intermediate_size"] = config.intermediate_size();
  j["hidden_act"] = "gelu";
  j["hidden_dropout_prob"] = decimal(config.dropout());
  j["attention_probs_dropout_prob"] = decimal(config.attention_dropout());
  j["max_position_embeddings"] = config.max_length();
  j["type_vocab_size"] = 2;
  j["initializer_range"] = decimal(config.initializer_range());
  j["layer_norm_eps"] = decimal(config.layer_norm_eps());
  j["pad_token_id"] = 0;
  j["tie_word_embeddings"] = true;
  j["dtype"] = "float32";
  if (family == HfFamily::kBert) j["position_embedding_type"] = "absolute";
  if (family != HfFamily::kBert) j["embedding_size"] = config.embedding_size();
  if (family == HfFamily::kConvBert) {
    j["head_ratio"] = config.convbert().head_ratio();
    j["conv_kernel_size"] = config.convbert().conv_kernel_size();
    j["num_groups"] = std::max(1, config.convbert().ffn_groups());
  }
  if (facts.head == ModelHead::kClassification) {
    j["num_labels"] = facts.num_labels;
    j["problem_type"] = facts.regression ? "regression" : "single_label_classification";
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < facts.labels.size(); ++i) {
      id2label[std::to_string(i)] = facts.labels[i];
      label2id[facts.labels[i]] = i;
    }
    if (!facts.labels.empty()) j["id2label"] = id2label, j["label2id"] = label2id;
  }
  json block;
  block["model"] = json::parse(model_config_to_json(config));
  block["head"] = model_head_name(facts.head);
  block["checkpoint_kind"] = facts.checkpoint_kind;
  block["objective"] = facts.objective;
  block["step"] = facts.step;
  if (!facts.task.empty()) block["task"] = facts.task;
  if (facts.head == ModelHead::kClassification && family != HfFamily::kBert) {
    block["classifier"] = "BERT pooler: out_proj(tanh(dense(h[CLS]))); HF's head applies GELU (cabert docs/export.md)";
  }
  if (family == HfFamily::kConvBert) {
    block["padding"] = "cabert masks padding in the convolutions, HF's ConvBERT does not (cabert docs/export.md)";
  }
  j["cabert"] = block;
  return j;
}

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

std::string string_or(const json& j, const std::string& key, const std::string& fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) throw DataError(str(path, ": '", key, "' must be a string, got ", it->dump()));
  return it->get<std::string>();
}

pb::ModelConfig from_cabert_block(const json& block, const std::string& path) {
  pb::ModelConfig config;
  auto status = google::protobuf::util::JsonStringToMessage(require(block, "model", path).dump(), &config);
  if (!status.ok()) throw DataError(str(path, ": 'cabert.model' is not a cabert model config: ", status.ToString()));
  return config;
}

pb::ModelConfig from_hf_keys(const json& j, HfFamily family, const std::string& path) {
  pb::ModelConfig c = config::preset_config(family == HfFamily::kConvBert ? "convbert-base" : "bert-base-absolute");
  c.set_name(str("hf-", hf_model_type(family)));
  c.set_vocab_size(require_int(j, "vocab_size", path));
  c.set_hidden_size(require_int(j, "hidden_size", path));
  c.set_embedding_size(family == HfFamily::kBert ? c.hidden_size() : require_int(j, "embedding_size", path));
  c.set_num_layers(require_int(j, "num_hidden_layers", path));
  c.set_num_heads(require_int(j, "num_attention_heads", path));
  c.set_intermediate_size(require_int(j, "intermediate_size", path));
  c.set_max_length(require_int(j, "max_position_embeddings", path));
  c.set_dropout(static_cast<float>(number_or(j, "hidden_dropout_prob", 0.1, path)));
  c.set_attention_dropout(static_cast<float>(number_or(j, "attention_probs_dropout_prob", 0.1, path)));
  c.set_layer_norm_eps(static_cast<float>(number_or(j, "layer_norm_eps", 1e-12, path)));
  c.set_initializer_range(static_cast<float>(number_or(j, "initializer_range", 0.02, path)));
  const std::string act = string_or(j, "hidden_act", "gelu", path);
  if (act != "gelu") {
    throw DataError(str(path, ": 'hidden_act' is '", act, "'; cabert's layers use the exact (erf) GELU, 'gelu'"));
  }
  const int segments = static_cast<int>(number_or(j, "type_vocab_size", 2, path));
  if (segments != 2) {
    throw DataError(str(path, ": 'type_vocab_size' is ", segments, "; cabert's models have 2 segment embeddings"));
  }
  const std::string positions = string_or(j, "position_embedding_type", "absolute", path);
  if (positions != "absolute") {
    throw DataError(str(path, ": 'position_embedding_type' is '", positions, "'; cabert imports absolute positions"));
  }
  if (family == HfFamily::kConvBert) {
    auto* cb = c.mutable_convbert();
    cb->set_head_ratio(require_int(j, "head_ratio", path));
    cb->set_conv_kernel_size(require_int(j, "conv_kernel_size", path));
    cb->set_ffn_groups(static_cast<int>(number_or(j, "num_groups", 1, path)));
  }
  return c;
}

// The Hugging Face keys of a cabert export that say another model than its "cabert" block: what transformers would
// build from the file is not what cabert imports from it.
std::vector<std::string> hf_keys_against_block(const json& j, const pb::ModelConfig& config, HfFamily family) {
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
  if (family != HfFamily::kBert) compare("embedding_size", config.embedding_size());
  if (family == HfFamily::kConvBert) {
    compare("head_ratio", config.convbert().head_ratio());
    compare("conv_kernel_size", config.convbert().conv_kernel_size());
  }
  if (auto act = j.find("hidden_act"); act != j.end() && *act != "gelu") {
    differences.push_back(str("hidden_act ", act->dump(), " (cabert's layers: \"gelu\")"));
  }
  return differences;
}

}  // namespace

pb::ModelConfig model_config_from_json(const json& j, const std::string& path, HfFamily* family) {
  if (!j.is_object()) throw DataError(str(path, ": expected a JSON object"));
  const std::string type = string_or(j, "model_type", "", path);
  HfFamily f = HfFamily::kNone;
  if (type == "bert")
    f = HfFamily::kBert;
  else if (type == "electra")
    f = HfFamily::kElectra;
  else if (type == "convbert")
    f = HfFamily::kConvBert;
  else if (type != "cabert") {
    throw DataError(str(path, ": model_type '", type,
                        "' cannot be imported; cabert imports bert, electra and "
                        "convbert (and its own exports)"));
  }
  auto block = j.find("cabert");
  if (f == HfFamily::kNone && block == j.end()) throw DataError(str(path, ": missing key 'cabert'"));
  pb::ModelConfig config = block != j.end() ? from_cabert_block(*block, path) : from_hf_keys(j, f, path);
  if (block != j.end() && f != HfFamily::kNone) {
    if (const auto differences = hf_keys_against_block(j, config, f); !differences.empty()) {
      log_warning(path, ": its Hugging Face keys disagree with its \"cabert\" block: ", joined(differences),
                  "; imported as the block says (transformers would build another model from this file)");
    }
  }
  try {
    config::validate_model_config(config);
  } catch (const Error& error) {
    throw DataError(str(path, ": ", error.what()));
  }
  if (family) *family = f;
  return config;
}

}  // namespace cabert::interop
