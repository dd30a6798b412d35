// config.json of an exported model: the keys Hugging Face's family reads (BertConfig, ElectraConfig,
// ConvBertConfig), or cabert's own for the families HF lacks, and a "cabert" block with the exact ModelConfig
// (protobuf JSON), the checkpoint kind, head and task labels, so that an import restores the model exactly.
// Reading a config written by transformers (no "cabert" block) rebuilds the ModelConfig from HF's keys.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "formats/model.pb.h"
#include "lib/interop/hf_layout.h"

namespace cabert::interop {

// What config.json says about the checkpoint beyond the architecture.
struct ExportFacts {
  ModelHead head = ModelHead::kEncoder;
  std::string checkpoint_kind;  // "pretrain" / "finetune"
  std::string objective;        // "mlm", "electra", "span-corruption", ... ("" if unknown)
  uint64_t step = 0;
  std::string task;                 // fine-tuned: the task name
  std::vector<std::string> labels;  // classification labels in class order; empty for regression and spans
  bool regression = false;
  int64_t num_labels = 0;  // classification: labels, regression: 1
  std::string pooling;     // classification: "cls" or "mean" (finetune --pooling)
};

// Models no transformers class computes: the class of modeling_cabert.py (written beside the weights,
// lib/interop/embedded_python.h) for the head; CabertForConditionalGeneration for the encoder-decoders.
std::string cabert_python_class(const pb::ModelConfig& config, ModelHead head);

// cabert's special ids as its search uses them (generate::SearchOptions' defaults).
struct SearchTokens {
  int bos = 2, eos = 3, pad = 0;
};

nlohmann::json export_config_json(const pb::ModelConfig& config, HfFamily family, const ExportFacts& facts);

// generation_config.json of an encoder-decoder export: transformers' generate() then searches as cabert's greedy
// search does (decoder start [CLS], EOS [SEP], [PAD] never generated, EOS forced at max_length).
nlohmann::json export_generation_config_json();

// The ModelConfig a config.json describes. Throws DataError "PATH: ..." naming the key for a model type cabert
// cannot import, a missing or mistyped key, or a value cabert's models cannot compute (activation, segment
// count, position type). `family` receives the HF family (kNone for a cabert-only export).
pb::ModelConfig model_config_from_json(const nlohmann::json& json, const std::string& path, HfFamily* family);

std::string model_config_to_json(const pb::ModelConfig& config);

}  // namespace cabert::interop
