#include "lib/interop/import_model.h"

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/json_input.h"
#include "lib/core/log.h"
#include "lib/interop/export_model.h"
#include "lib/interop/hf_config.h"
#include "lib/interop/import_plan.h"
#include "lib/interop/tokenizer_files.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/seq2seq_model.h"
#include "lib/text/tokenizer.h"

namespace fs = std::filesystem;

namespace cabert::interop {

namespace {

std::string weights_path(const fs::path& dir) {
  fs::path path = dir / "model.safetensors";
  if (fs::exists(path)) return path.string();
  if (fs::exists(dir / "model.safetensors.index.json")) {
    throw DataError(str(dir.string(), ": the weights are sharded (model.safetensors.index.json); cabert imports one "
                                      "model.safetensors (save with max_shard_size larger than the model)"));
  }
  if (fs::exists(dir / "pytorch_model.bin")) {
    throw DataError(str(dir.string(), ": the weights are a pickled pytorch_model.bin; cabert reads safetensors only "
                                      "(save_pretrained(..., safe_serialization=True) writes model.safetensors)"));
  }
  throw DataError(str(dir.string(), ": no model.safetensors"));
}

ModelHead hf_head(const StoredNames& names) {
  if (names.has("discriminator_predictions.dense_prediction.weight")) return ModelHead::kElectra;
  if (names.has("cls.predictions.bias") || names.has("generator_lm_head.bias")) return ModelHead::kMlm;
  return ModelHead::kEncoder;
}

// The tensors cabert's model for `head` has: names without "model/", with their shapes.
io::NamedTensors expected_tensors(const pb::ModelConfig& config, ModelHead head, bool with_generator) {
  torch::NoGradGuard no_grad;
  if (config.has_seq2seq()) return io::module_tensors(*models::Seq2SeqModel(config), "");
  switch (head) {
    case ModelHead::kMlm: return io::module_tensors(*models::MlmModel(config), "");
    case ModelHead::kElectra: {
      io::NamedTensors all = io::module_tensors(*models::ElectraModel(config), ""), kept;
      for (auto& entry : all) {
        const bool generator = entry.first.rfind("generator", 0) == 0;
        if (with_generator || !generator) kept.push_back(std::move(entry));
      }
      return kept;
    }
    default: return io::module_tensors(*models::Encoder(config), "encoder.");
  }
}

// A tied output embedding stored anyway must equal what it is tied to.
void check_tied(const io::SafetensorsFile& file, const StoredNames& names, const std::string& copy,
                const std::string& original) {
  const std::string stored = names.find(copy), source = names.find(original);
  if (stored.empty() || source.empty()) return;
  if (!torch::equal(io::read_tensor(file, stored), io::read_tensor(file, source))) {
    throw DataError(str(file.path(), ": tensor '", stored, "' differs from '", source,
                        "'; cabert ties the output embedding to the input embedding and cannot import untied ones"));
  }
}

}  // namespace

std::string imported_tokenizer_path(const std::string& checkpoint) {
  fs::path path(checkpoint);
  if (path.extension() == ".cabert") path.replace_extension();
  return path.string() + ".tokenizer.model";
}

ImportSummary import_model(const ImportOptions& options) {
  const fs::path dir(options.hf_dir);
  if (!fs::is_directory(dir)) throw UsageError(str("--from-hf ", options.hf_dir, ": not a directory"));
  const std::string config_path = (dir / "config.json").string();
  if (!fs::exists(config_path)) throw DataError(str(options.hf_dir, ": no config.json"));
  if (fs::file_size(config_path) > kMaxConfigJsonBytes) {
    throw DataError(str(config_path, ": ", fs::file_size(config_path), " bytes, over the ", kMaxConfigJsonBytes,
                        "-byte limit of a config.json"));
  }
  const std::string config_text = read_file(config_path);
  io::SafetensorsFile file(weights_path(dir));  // the header alone: its sizes checked against the file's
  const uint64_t data_bytes = fs::file_size(file.path()) - file.data_start();
  // Everything the files claim is checked against what they hold before a tensor is allocated.
  ImportPlan plan = plan_import(config_text, config_path, file.tensors(), data_bytes, file.path());
  const nlohmann::json config_json = parse_json_input(config_text);  // valid: plan_import read it
  ImportSummary summary;
  summary.family = plan.model_type == "bert"       ? HfFamily::kBert
                   : plan.model_type == "electra"  ? HfFamily::kElectra
                   : plan.model_type == "convbert" ? HfFamily::kConvBert
                                                   : HfFamily::kNone;
  const pb::ModelConfig& config = plan.config;
  StoredNames names(file.tensors(), stored_base_prefix(plan.model_type));

  std::vector<TensorLink> links;
  if (summary.family != HfFamily::kNone) {
    summary.head = hf_head(names);
    HfTarget target = hf_target(config, summary.head);
    // An ELECTRA with E = H computes what BERT computes: it keeps ELECTRA's names.
    const bool same_maths = summary.family == HfFamily::kElectra && target.family == HfFamily::kBert;
    if (target.family != summary.family && !same_maths) {
      throw DataError(
          str(config_path, ": cabert cannot compute this ", hf_model_type(summary.family), " model: ",
              target.family == HfFamily::kNone ? target.why_not : str("it maps to ", hf_model_type(target.family))));
    }
    links = hf_links(config, summary.family, summary.head);
  } else {
    if (!config.has_seq2seq()) {
      summary.head = detect_head([&](const std::string& name) { return names.has(name); });
    }
    if (summary.head == ModelHead::kClassification || summary.head == ModelHead::kSpan)
      summary.head = ModelHead::kEncoder;
  }
  std::map<std::string, TensorLink> link_of;
  for (const auto& link : links) link_of[link.cabert] = link;

  const bool with_generator = summary.family == HfFamily::kNone && names.has("generator_head.bias");
  // The model's tensors (its size bounded by the file's now) under their names in the file, matched against the
  // header before any is read.
  std::vector<std::pair<std::string, TensorLink>> wanted;  // cabert's name, link
  std::vector<ExpectedTensor> expected;
  std::vector<torch::ScalarType> dtypes;
  for (const auto& [name, module_tensor] : expected_tensors(config, summary.head, with_generator)) {
    TensorLink link{name, name, Reshape::kSame};
    if (summary.family != HfFamily::kNone) {
      auto it = link_of.find(name);
      if (it == link_of.end()) continue;  // not part of the HF model (cannot happen for the encoder)
      link = it->second;
    }
    wanted.emplace_back(name, link);
    expected.push_back({link.hf, hf_shape(module_tensor.sizes().vec(), link.reshape)});
    dtypes.push_back(module_tensor.scalar_type());
  }
  const std::vector<std::string> stored_names = match_tensors(plan, expected, file.tensors(), file.path(), config_path);

  io::NamedTensors tensors;
  std::set<std::string> used(stored_names.begin(), stored_names.end());
  for (size_t i = 0; i < wanted.size(); ++i) {
    const std::string& stored = stored_names[i];
    torch::Tensor tensor = io::read_tensor(file, stored);
    // A NaN or infinity would only show later, as a NaN loss or prediction far from its cause.
    if (!torch::isfinite(tensor).all().item<bool>()) {
      throw DataError(str(file.path(), ": tensor '", stored,
                          "' holds non-finite values (NaN or infinity); expected finite weights"));
    }
    tensors.emplace_back("model/" + wanted[i].first,
                         from_hf_layout(tensor.to(dtypes[i]), wanted[i].second.reshape).contiguous());
  }
  if (summary.family == HfFamily::kBert) {
    check_tied(file, names, "cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight");
    check_tied(file, names, "cls.predictions.decoder.bias", "cls.predictions.bias");
  } else if (summary.family != HfFamily::kNone) {
    check_tied(file, names, "generator_lm_head.weight",
               hf_base_prefix(summary.family) + "embeddings.word_embeddings.weight");
  }
  for (const auto& name : names.all()) {
    if (!used.count(name)) summary.ignored.push_back(name);
  }
  summary.tensors = tensors.size();

  // The tokenizer: checked (cabert's special ids, the model's vocabulary size) before anything is written.
  const std::string source = options.tokenizer.empty() ? find_sentencepiece_model(options.hf_dir) : options.tokenizer;
  {
    text::Tokenizer check(source);
    if (check.vocab_size() != config.vocab_size()) {
      throw DataError(str(source, ": the tokenizer has ", check.vocab_size(), " pieces, ", config_path,
                          " says vocab_size ", config.vocab_size()));
    }
  }
  summary.tokenizer = fs::absolute(imported_tokenizer_path(options.output)).string();
  write_file_atomically(summary.tokenizer, read_file(source));
  text::Tokenizer tokenizer(summary.tokenizer);

  pb::CheckpointInfo info;
  info.set_kind("pretrain");
  *info.mutable_model() = config;
  info.set_tokenizer(summary.tokenizer);
  info.set_tokenizer_checksum(tokenizer.checksum());
  auto block = config_json.find("cabert");
  if (block != config_json.end() && block->contains("step") && (*block)["step"].is_number_unsigned()) {
    info.set_step((*block)["step"].get<uint64_t>());
  }
  auto& meta = *info.mutable_metadata();
  meta["objective"] = summary.head == ModelHead::kMlm       ? "mlm"
                      : summary.head == ModelHead::kElectra ? "electra"
                                                            : "none";
  if (block != config_json.end() && block->contains("objective") && (*block)["objective"].is_string() &&
      !(*block)["objective"].get<std::string>().empty()) {
    meta["objective"] = (*block)["objective"].get<std::string>();
  }
  meta["imported_from"] = fs::absolute(dir).lexically_normal().string();
  meta["imported_model_type"] = hf_model_type(summary.family);
  io::save_checkpoint(options.output, info, tensors);
  return summary;
}

}  // namespace cabert::interop
