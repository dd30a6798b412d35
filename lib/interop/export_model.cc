#include "lib/interop/export_model.h"

#include <filesystem>
#include <set>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/log.h"
#include "lib/eval/checkpoint_tokenizer.h"
#include "lib/interop/embedded_python.h"
#include "lib/interop/hf_config.h"
#include "lib/interop/tokenizer_files.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/pretraining_models.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"

namespace fs = std::filesystem;

namespace cabert::interop {

namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

ExportFacts export_facts(const io::Checkpoint& checkpoint, ModelHead head,
                         const std::map<std::string, torch::Tensor>& tensors) {
  const auto& info = checkpoint.info;
  ExportFacts facts;
  facts.head = head;
  facts.checkpoint_kind = info.kind();
  facts.step = info.step();
  // One the checkpoint does not record (a fine-tuned one) follows from the head, as its import derives it.
  auto objective = info.metadata().find("objective");
  facts.objective = objective != info.metadata().end() && !objective->second.empty() ? objective->second
                    : head == ModelHead::kMlm                                        ? "mlm"
                    : head == ModelHead::kElectra                                    ? "electra"
                                                                                     : "none";
  auto task = info.metadata().find("task");
  auto task_name = info.metadata().find("task_name");
  if (task != info.metadata().end() && task->second == "translation" && task_name != info.metadata().end()) {
    facts.task = task_name->second;  // a translation checkpoint names its task plainly ("translation-de-en")
  } else if (task != info.metadata().end()) {
    tasks::TaskSource source;
    tasks::TaskDefinition definition = tasks::definition_from_json(task->second, &source);
    facts.task = definition.name;
    if (head == ModelHead::kClassification) {
      facts.regression = definition.kind == tasks::TaskKind::kRegression;
      facts.labels = definition.labels;
    }
  }
  if (head == ModelHead::kClassification) {
    facts.num_labels = tensors.at("head.4.weight").size(0);
    auto pooling = info.metadata().find("pooling");
    facts.pooling = pooling != info.metadata().end() && !pooling->second.empty() ? pooling->second : "cls";
  }
  return facts;
}

// The tensors under HF names; every checkpoint tensor must be linked or be one of `elsewhere` (the generator).
Named rename_for_hf(const std::map<std::string, torch::Tensor>& tensors, const std::vector<TensorLink>& links,
                    const std::string& checkpoint_path) {
  Named out;
  for (const auto& link : links) {
    auto it = tensors.find(link.cabert);
    if (it == tensors.end()) {
      throw DataError(str(checkpoint_path, ": the model has no tensor 'model/", link.cabert, "'"));
    }
    out.emplace_back(link.hf, to_hf_layout(it->second, link.reshape));
  }
  return out;
}

void check_all_linked(const std::map<std::string, torch::Tensor>& tensors, const std::vector<TensorLink>& links,
                      const std::string& checkpoint_path) {
  std::set<std::string> linked;
  for (const auto& link : links) linked.insert(link.cabert);
  for (const auto& [name, tensor] : tensors) {
    if (!linked.count(name)) {
      throw Error(str(checkpoint_path, ": tensor 'model/", name, "' has no place in the export (cabert bug)"));
    }
  }
}

std::string loading_readme(HfFamily family, const std::string& architecture, const ExportFacts& facts,
                           const std::string& why_not, bool generator) {
  std::string text = "# A model exported by `cabert export`\n\n";
  text += "Files: `model.safetensors` (float32 tensors), `config.json`, `tokenizer.model` (SentencePiece) and\n"
          "`tokenizer_config.json` (special ids: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the sentinels).\n"
          "Inputs are framed as cabert frames them: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, segment ids 0 for\n"
          "`[CLS] a [SEP]` and 1 for `b [SEP]`.\n\n";
  const std::string tokenize = "import sentencepiece as spm, torch\n"
                               "sp = spm.SentencePieceProcessor(model_file=\"DIR/tokenizer.model\")\n"
                               "ids = torch.tensor([[2] + sp.encode(\"a sentence\") + [3]])\n";
  if (family != HfFamily::kNone) {
    text += str("Hugging Face transformers computes this model: `", architecture, "` (model_type `",
                hf_model_type(family), "`).\n\n```python\nfrom transformers import ", architecture, "\n", tokenize,
                "model = ", architecture, ".from_pretrained(\"DIR\").eval()\nout = model(input_ids=ids)\n```\n");
    if (family == HfFamily::kConvBert) {
      text += "\ncabert masks padding inside ConvBERT's convolutions; HF's ConvBERT does not, so batches with padding\n"
              "differ at the positions next to it. Unpadded inputs give cabert's outputs.\n";
    }
    if (facts.head == ModelHead::kClassification && family != HfFamily::kBert) {
      text +=
          "\nThe classification head is BERT's pooler, `out_proj(tanh(dense(h[CLS])))`, stored as `classifier.dense`\n"
          "and `classifier.out_proj`; HF's own head applies GELU instead of tanh. To get cabert's predictions:\n\n"
          "```python\nfrom transformers import " +
          std::string(family == HfFamily::kConvBert ? "ConvBert" : "Electra") +
          "ForSequenceClassification as Cls\nm = Cls.from_pretrained(\"DIR\").eval()\n"
          "m.classifier.forward = lambda h, **kw: m.classifier.out_proj(torch.tanh(m.classifier.dense(h[:, 0])))\n```\n";
    }
    if (facts.head == ModelHead::kElectra && family == HfFamily::kConvBert) {
      text += "\nHF has no ConvBERT pre-training class: `discriminator_predictions.*` hold the replaced-token head\n"
              "(dense, GELU, dense_prediction), which `ConvBertModel` ignores.\n";
    }
  } else if (architecture == "CabertForConditionalGeneration") {
    text += str("No class of transformers computes this model (", why_not,
                "); its code is here, `modeling_cabert.py` and `configuration_cabert.py` (plain PyTorch, cabert's own, "
                "the papers' equations named), which config.json's `auto_map` registers. `generate` searches as "
                "cabert's greedy decoder does (generation_config.json: decoder start [CLS], EOS [SEP], [PAD] never "
                "generated); cabert's limit of M tokens before EOS is `max_new_tokens=M + 1`:\n\n"
                "```python\nfrom transformers import AutoModelForSeq2SeqLM\nimport sentencepiece as spm, torch\n"
                "sp = spm.SentencePieceProcessor(model_file=\"DIR/tokenizer.model\")\n"
                "ids = torch.tensor([sp.encode(\"a sentence\") + [3]])  # the source: its pieces, then [SEP]\n"
                "model = AutoModelForSeq2SeqLM.from_pretrained(\"DIR\", trust_remote_code=True).eval()\n"
                "out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=41)\n"
                "print(sp.decode(out[0, 1:].tolist()))  # BOS first; EOS (3) and [PAD] (0) after the text\n```\n\n"
                "The tensors keep cabert's module names, and `config.json[\"cabert\"][\"model\"]` is the exact model "
                "config.\n");
  } else if (architecture.rfind("Cabert", 0) == 0) {
    const std::string auto_class = architecture == "CabertForMaskedLM" ? "AutoModelForMaskedLM"
                                   : architecture == "CabertForSequenceClassification"
                                       ? "AutoModelForSequenceClassification"
                                   : architecture == "CabertForQuestionAnswering" ? "AutoModelForQuestionAnswering"
                                   : architecture == "CabertForPreTraining"       ? "AutoModelForPreTraining"
                                                                                  : "AutoModel";
    text += str("No class of transformers computes this model (", why_not,
                "); its code is here, `modeling_cabert.py` and `configuration_cabert.py` (plain PyTorch, cabert's own, "
                "the papers' equations named), which config.json's `auto_map` registers:\n\n```python\nfrom "
                "transformers import ",
                auto_class, "\n", tokenize, "model = ", auto_class,
                ".from_pretrained(\"DIR\", trust_remote_code=True).eval()\n"
                "out = model(input_ids=ids, attention_mask=torch.ones_like(ids))\n```\n\n"
                "`AutoModel` gives the encoder's hidden states; the tensors keep cabert's module names, and\n"
                "`config.json[\"cabert\"][\"model\"]` is the exact model config.\n");
  } else {
    text += str(
        "No Hugging Face class computes this model: ", why_not,
        ".\nThe tensors keep cabert's module "
        "names (cabert's docs/export.md documents them); `config.json[\"cabert\"][\"model\"]` "
        "is the exact model config.\n\n```python\nfrom safetensors.torch import load_file\nimport json\n",
        "tensors = load_file(\"DIR/model.safetensors\")\nconfig = json.load(open(\"DIR/config.json\"))[\"cabert\"][\"model\"]\n```\n");
  }
  if (generator) text += "\n`generator/` holds the ELECTRA generator, a masked-LM model directory of its own.\n";
  return text;
}

void write_model_dir(const std::string& dir, const Named& tensors, const nlohmann::json& config,
                     const text::Tokenizer& tokenizer, int max_length, const std::string& readme) {
  create_output_directory(dir, "--output");
  // transformers' trust_remote_code loads these two when config.json's auto_map names them; an earlier
  // export's copies would belong to another model.
  for (const auto& file : hf_python_sources()) {
    const fs::path path = fs::path(dir) / file.name;
    if (config.contains("auto_map")) {
      write_file_atomically(path.string(), file.text);
    } else if (fs::exists(path)) {
      fs::remove(path);
    }
  }
  // generate()'s settings, for an encoder-decoder only (an earlier export's would belong to another model).
  const fs::path generation = fs::path(dir) / "generation_config.json";
  if (config.value("is_encoder_decoder", false)) {
    write_file_atomically(generation.string(), export_generation_config_json().dump(2) + "\n");
  } else if (fs::exists(generation)) {
    fs::remove(generation);
  }
  io::write_tensors_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), config.dump(2) + "\n");
  write_tokenizer_files(dir, tokenizer, max_length);
  write_file_atomically((fs::path(dir) / "README.md").string(), readme);
}

}  // namespace

std::map<std::string, torch::Tensor> model_tensors(const io::Checkpoint& checkpoint) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (name.rfind("model/", 0) == 0) out.emplace(name.substr(6), tensor);
  }
  return out;
}

ModelHead detect_head(const std::function<bool(const std::string&)>& has) {
  if (has("discriminator_out.weight")) return ModelHead::kElectra;
  if (has("mlm_head.bias")) return ModelHead::kMlm;
  if (has("head.4.weight")) return ModelHead::kClassification;
  if (has("head.0.weight")) return ModelHead::kSpan;
  return ModelHead::kEncoder;
}

ExportSummary export_checkpoint(const ExportOptions& options) {
  io::Checkpoint checkpoint = io::load_checkpoint(options.checkpoint);
  const pb::ModelConfig& config = checkpoint.info.model();
  const text::Tokenizer tokenizer =
      eval::open_checkpoint_tokenizer(checkpoint.info, options.checkpoint, options.tokenizer);

  std::map<std::string, torch::Tensor> tensors = model_tensors(checkpoint);
  ExportSummary summary;
  summary.head = config.has_seq2seq() ? ModelHead::kEncoder
                                      : detect_head([&](const std::string& name) { return tensors.count(name) > 0; });
  HfTarget target = hf_target(config, summary.head);
  // A model imported from ELECTRA's classes goes back to them (with E = H, BERT's would compute it too).
  auto imported = checkpoint.info.metadata().find("imported_model_type");
  if (target.family == HfFamily::kBert && imported != checkpoint.info.metadata().end() &&
      imported->second == "electra") {
    target.family = HfFamily::kElectra;
  }
  auto pooling = checkpoint.info.metadata().find("pooling");
  if (summary.head == ModelHead::kClassification && target.family != HfFamily::kNone &&
      pooling != checkpoint.info.metadata().end() && pooling->second != "cls") {
    target.family = HfFamily::kNone;
    target.why_not = "its head pools the mean of the last layer (`finetune --pooling mean`); Hugging Face's "
                     "*ForSequenceClassification classes pool [CLS]";
  }
  summary.family = target.family;
  summary.why_not = target.why_not;
  ExportFacts facts = export_facts(checkpoint, summary.head, tensors);
  nlohmann::json config_json = export_config_json(config, target.family, facts);
  summary.architecture = config_json["architectures"][0].get<std::string>();

  Named exported;
  std::map<std::string, torch::Tensor> generator;  // ELECTRA: exported on its own
  if (summary.head == ModelHead::kElectra) {
    for (auto it = tensors.begin(); it != tensors.end();) {
      if (it->first.rfind("generator.", 0) == 0 || it->first.rfind("generator_head.", 0) == 0) {
        generator.insert(*it);
        it = tensors.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (target.family != HfFamily::kNone) {
    std::vector<TensorLink> links = hf_links(config, target.family, summary.head);
    check_all_linked(tensors, links, options.checkpoint);
    exported = rename_for_hf(tensors, links, options.checkpoint);
  } else {
    for (const auto& [name, tensor] : tensors) exported.emplace_back(name, tensor);
  }
  summary.tensors = exported.size();
  write_model_dir(options.output_dir, exported, config_json, tokenizer, config.max_length(),
                  loading_readme(target.family, summary.architecture, facts, target.why_not, !generator.empty()));

  const fs::path generator_dir = fs::path(options.output_dir) / "generator";
  if (generator.empty() && fs::exists(generator_dir / "config.json")) {
    fs::remove_all(generator_dir);  // an earlier export's generator would belong to another model
  }
  if (!generator.empty()) {
    // The generator shares the discriminator's embeddings: the export copies them into its directory.
    for (const auto& [name, tensor] : tensors) {
      if (name.rfind("encoder.embeddings.", 0) == 0) generator.emplace(name, tensor);
    }
    const pb::ModelConfig g = models::generator_config(config);
    HfTarget g_target = hf_target(g, ModelHead::kMlm);
    ExportFacts g_facts = facts;
    g_facts.head = ModelHead::kMlm;
    Named g_exported;
    if (g_target.family != HfFamily::kNone) {
      std::vector<TensorLink> links = hf_generator_links(config, g_target.family);
      check_all_linked(generator, links, options.checkpoint);
      g_exported = rename_for_hf(generator, links, options.checkpoint);
    } else {
      // As a masked LM of its own (modeling_cabert.CabertForMaskedLM, MlmModel of the generator's config): its
      // stack and head take the encoder's and the MLM head's names.
      for (const auto& [name, tensor] : generator) {
        std::string renamed = name;
        if (name.rfind("generator.", 0) == 0) renamed = "encoder.stack." + name.substr(10);
        if (name.rfind("generator_head.", 0) == 0) renamed = "mlm_head." + name.substr(15);
        g_exported.emplace_back(renamed, tensor);
      }
    }
    nlohmann::json g_json = export_config_json(g, g_target.family, g_facts);
    write_model_dir(generator_dir.string(), g_exported, g_json, tokenizer, config.max_length(),
                    loading_readme(g_target.family, g_json["architectures"][0].get<std::string>(), g_facts,
                                   g_target.why_not, false));
    summary.generator = true;
  }
  return summary;
}

}  // namespace cabert::interop
