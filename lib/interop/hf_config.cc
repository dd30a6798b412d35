#include "lib/interop/hf_config.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <cstdlib>

#include "lib/core/errors.h"
#include "lib/interop/hf_config_reader.h"

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

std::string cabert_python_class(const pb::ModelConfig& config, ModelHead head) {
  if (config.has_seq2seq()) return "CabertForConditionalGeneration";
  switch (head) {
    case ModelHead::kEncoder: return "CabertModel";
    case ModelHead::kMlm: return "CabertForMaskedLM";
    case ModelHead::kElectra: return "CabertForPreTraining";
    case ModelHead::kClassification: return "CabertForSequenceClassification";
    case ModelHead::kSpan: return "CabertForQuestionAnswering";
  }
  return "";
}

namespace {

// transformers' Auto classes -> modeling_cabert.py's: every head class loads the encoder (AutoModel) and its own.
json cabert_auto_map(const std::string& head_class) {
  json map;
  map["AutoConfig"] = "configuration_cabert.CabertConfig";
  // An encoder-decoder has no encoder-only class: AutoModel gives the whole model too.
  const bool seq2seq = head_class == "CabertForConditionalGeneration";
  map["AutoModel"] = seq2seq ? "modeling_cabert.CabertForConditionalGeneration" : "modeling_cabert.CabertModel";
  const char* auto_class = seq2seq                                           ? "AutoModelForSeq2SeqLM"
                           : head_class == "CabertForMaskedLM"               ? "AutoModelForMaskedLM"
                           : head_class == "CabertForSequenceClassification" ? "AutoModelForSequenceClassification"
                           : head_class == "CabertForQuestionAnswering"      ? "AutoModelForQuestionAnswering"
                           : head_class == "CabertForPreTraining"            ? "AutoModelForPreTraining"
                                                                             : nullptr;
  if (auto_class) map[auto_class] = "modeling_cabert." + head_class;
  return map;
}

}  // namespace

json export_config_json(const pb::ModelConfig& config, HfFamily family, const ExportFacts& facts) {
  json j;
  const std::string python_class = family == HfFamily::kNone ? cabert_python_class(config, facts.head) : "";
  j["architectures"] = {family != HfFamily::kNone ? hf_architecture(family, facts.head)
                        : python_class.empty()    ? str("cabert/", model_head_name(facts.head))
                                                  : python_class};
  if (!python_class.empty()) j["auto_map"] = cabert_auto_map(python_class);
  j["model_type"] = hf_model_type(family);
  j["vocab_size"] = config.vocab_size();
  j["hidden_size"] = config.hidden_size();
  j["num_hidden_layers"] = config.num_layers();
  j["num_attention_heads"] = config.num_heads();
  j["intermediate_size"] = config.intermediate_size();
  // The FFN's activation (ffn_activation; RELU in the wu-* and transformer-* presets). HF's own classes are only
  // chosen for GELU models (hf_target), since they apply hidden_act in their heads too.
  j["hidden_act"] = config.ffn_activation() == pb::RELU ? "relu" : "gelu";
  j["hidden_dropout_prob"] = decimal(config.dropout());
  j["attention_probs_dropout_prob"] = decimal(config.attention_dropout());
  j["max_position_embeddings"] = config.max_length();
  j["type_vocab_size"] = 2;
  j["initializer_range"] = decimal(config.initializer_range());
  j["layer_norm_eps"] = decimal(config.layer_norm_eps());
  j["pad_token_id"] = 0;
  j["tie_word_embeddings"] = !config.has_seq2seq() || config.seq2seq().tie_output();
  if (config.has_seq2seq()) {
    // transformers' generate() reads these (generation_config.json repeats them with the search settings).
    const SearchTokens tokens;
    j["is_encoder_decoder"] = true;
    j["decoder_start_token_id"] = tokens.bos;
    j["bos_token_id"] = tokens.bos;
    j["eos_token_id"] = tokens.eos;
    j["use_cache"] = false;  // modeling_cabert recomputes the decoder prefix at every step
  }
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
  if (!facts.pooling.empty()) block["pooling"] = facts.pooling;
  if (facts.head == ModelHead::kClassification && family != HfFamily::kBert) {
    block["classifier"] = "BERT pooler: out_proj(tanh(dense(h[CLS]))); HF's head applies GELU (cabert docs/export.md)";
  }
  if (family == HfFamily::kConvBert) {
    block["padding"] = "cabert masks padding in the convolutions, HF's ConvBERT does not (cabert docs/export.md)";
  }
  j["cabert"] = block;
  return j;
}

nlohmann::json export_generation_config_json() {
  const SearchTokens tokens;
  json j;
  j["decoder_start_token_id"] = tokens.bos;
  j["bos_token_id"] = tokens.bos;
  j["eos_token_id"] = tokens.eos;
  j["pad_token_id"] = tokens.pad;
  j["forced_eos_token_id"] = tokens.eos;  // cabert's search forces EOS after max_length tokens
  j["suppress_tokens"] = {tokens.pad};    // and never generates [PAD]
  j["max_length"] = 202;                  // BOS + cabert's default 200 tokens (generate::SearchOptions) + EOS
  j["num_beams"] = 1;
  j["do_sample"] = false;
  j["use_cache"] = false;
  return j;
}

pb::ModelConfig model_config_from_json(const json& j, const std::string& path, HfFamily* family) {
  ConfigReading reading = read_model_config_json(j, path);
  if (family) {
    *family = reading.model_type == "bert"       ? HfFamily::kBert
              : reading.model_type == "electra"  ? HfFamily::kElectra
              : reading.model_type == "convbert" ? HfFamily::kConvBert
                                                 : HfFamily::kNone;
  }
  return reading.config;
}

}  // namespace cabert::interop
