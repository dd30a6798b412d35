// `cabert export` against Hugging Face transformers (tests/python/hf_reference.py): cabert's models exported
// and loaded with HF's own classes give cabert's hidden states and logits to 1e-4; HF models built in Python
// come in through the import, give HF's outputs in cabert and go out again with identical tensors. Skips when
// the project's Python lacks transformers (a clone without scripts/setup.sh).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/config/presets.h"
#include "lib/interop/export_model.h"
#include "lib/interop/import_model.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/task_model.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::interop {
namespace {

namespace fs = std::filesystem;
using testing::alice_tokenizer;

#define CABERT_REQUIRE_TRANSFORMERS(python)                                                \
  std::string python = ::cabert::testing::python_with("transformers, safetensors, torch"); \
  if (python.empty()) GTEST_SKIP() << "the project's Python lacks transformers (run scripts/setup.sh): skipped"

std::string reference_script() { return testing::source_dir() + "/tests/python/hf_reference.py"; }

pb::ModelConfig tiny(const std::string& preset, int embedding = 0) {
  pb::ModelConfig config = config::preset_config(preset);
  config.set_vocab_size(text::Tokenizer(alice_tokenizer()).vocab_size());
  if (embedding) config.set_embedding_size(embedding);
  return config;
}

// Default initialisation plus noise, so that LayerNorms and biases are not 1 and 0.
void perturb(torch::nn::Module& module, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& parameter : module.parameters()) parameter.add_(torch::randn_like(parameter) * 0.05);
  module.eval();
}

void save(const std::string& path, const pb::ModelConfig& config, const std::string& kind,
          const torch::nn::Module& module, std::map<std::string, std::string> metadata = {}) {
  pb::CheckpointInfo info;
  info.set_kind(kind);
  *info.mutable_model() = config;
  text::Tokenizer tokenizer(alice_tokenizer());
  info.set_tokenizer(tokenizer.path());
  info.set_tokenizer_checksum(tokenizer.checksum());
  for (auto& [key, value] : metadata) {
    if (!value.empty()) (*info.mutable_metadata())[key] = value;
  }
  io::save_checkpoint(path, info, io::module_tensors(module));
}

struct Inputs {
  torch::Tensor ids, segments, mask;
};

// [CLS] ... [SEP] rows of 12 tokens, the second half segment 1; `padded`: the last 4 of row 2 are [PAD].
Inputs fixed_inputs(int64_t vocab, bool padded) {
  torch::manual_seed(11);
  Inputs in;
  in.ids = torch::randint(5, vocab, {2, 12}, torch::kLong);
  in.ids.select(1, 0).fill_(2);
  in.ids.select(1, 11).fill_(3);
  in.segments = torch::zeros_like(in.ids);
  in.segments.narrow(1, 6, 6).fill_(1);
  in.mask = torch::ones_like(in.ids);
  if (padded) {
    in.ids[1].narrow(0, 8, 4).fill_(0);
    in.ids[1][7] = 3;
    in.mask[1].narrow(0, 8, 4).fill_(0);
    in.segments[1].narrow(0, 8, 4).fill_(0);
  }
  return in;
}

void write_outputs(const std::string& path, const Inputs& in,
                   std::vector<std::pair<std::string, torch::Tensor>> outputs) {
  outputs.insert(outputs.begin(),
                 {{"input_ids", in.ids}, {"token_type_ids", in.segments}, {"attention_mask", in.mask}});
  io::write_tensors_safetensors(path, outputs);
}

class HfExport : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::temp_dir(); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Exports `checkpoint` to <name>/ and expects the architecture.
  ExportSummary export_to(const std::string& checkpoint, const std::string& name, const std::string& architecture) {
    ExportSummary summary = export_checkpoint({checkpoint, path(name), ""});
    EXPECT_EQ(summary.architecture, architecture) << name;
    return summary;
  }
  void add_case(const std::string& name, const std::string& dir, const std::string& cls, bool tanh_pooler = false) {
    cases_.push_back({{"name", name},
                      {"dir", path(dir)},
                      {"class", cls},
                      {"outputs", path(name + ".outputs")},
                      {"tanh_pooler", tanh_pooler}});
  }
  void compare_in_python(const std::string& python) {
    testing::write_text(path("cases.json"), cases_.dump());
    std::string output = testing::run_python(python, reference_script(), "compare '" + path("cases.json") + "'");
    for (const auto& c : cases_) {
      EXPECT_NE(output.find(c["name"].get<std::string>() + ": " + c["class"].get<std::string>()), std::string::npos)
          << output;
    }
    EXPECT_EQ(output.find("FAIL"), std::string::npos) << output;
    std::cerr << output;
  }

  std::string dir_;
  nlohmann::json cases_ = nlohmann::json::array();
};

torch::Tensor all_positions(const Inputs& in) { return torch::ones_like(in.mask).to(torch::kBool); }

TEST_F(HfExport, MaskedLanguageModelsGiveCabertsOutputsInTransformers) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  struct Case {
    std::string name;
    pb::ModelConfig config;
    bool padded;
    std::string architecture;
  };
  pb::ModelConfig grouped = tiny("convbert-tiny");
  grouped.mutable_convbert()->set_ffn_groups(2);
  std::vector<Case> cases = {
      {"bert", tiny("bert-tiny-absolute", 64), true, "BertForMaskedLM"},
      {"bert-projected", tiny("bert-tiny-absolute"), true, "ElectraForMaskedLM"},  // E 32 -> H 64
      {"convbert", grouped, false, "ConvBertForMaskedLM"},                         // HF does not mask padding
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    models::MlmModel model(c.config);
    perturb(*model, 100 + i);
    save(path(c.name + ".cabert"), c.config, "pretrain", *model, {{"objective", "mlm"}});
    export_to(path(c.name + ".cabert"), c.name, c.architecture);
    Inputs in = fixed_inputs(c.config.vocab_size(), c.padded);
    torch::NoGradGuard no_grad;
    torch::Tensor mask = in.mask.to(torch::kBool);
    torch::Tensor hidden = model->encoder->forward(in.ids, in.segments, mask);
    torch::Tensor logits = model->forward(in.ids, in.segments, mask, all_positions(in)).view({2, 12, -1});
    write_outputs(path(c.name + ".outputs"), in, {{"hidden", hidden}, {"logits", logits}});
    add_case(c.name, c.name, c.architecture);
  }
  compare_in_python(python);
}

TEST_F(HfExport, ElectraDiscriminatorAndGeneratorGoToTheirClasses) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  pb::ModelConfig config = tiny("bert-tiny-absolute", 64);
  models::ElectraModel model(config);
  perturb(*model, 7);
  save(path("electra.cabert"), config, "pretrain", *model, {{"objective", "electra"}});
  ExportSummary summary = export_to(path("electra.cabert"), "electra", "ElectraForPreTraining");
  EXPECT_TRUE(summary.generator);
  Inputs in = fixed_inputs(config.vocab_size(), true);
  torch::NoGradGuard no_grad;
  torch::Tensor mask = in.mask.to(torch::kBool);
  write_outputs(path("discriminator.outputs"), in,
                {{"hidden", model->encoder->forward(in.ids, in.segments, mask)},
                 {"logits", model->discriminator_logits(in.ids, in.segments, mask)}});
  write_outputs(path("generator.outputs"), in,
                {{"logits", model->generator_logits(in.ids, in.segments, mask, all_positions(in)).view({2, 12, -1})}});
  add_case("discriminator", "electra", "ElectraForPreTraining");
  add_case("generator", "electra/generator", "ElectraForMaskedLM");
  compare_in_python(python);
}

TEST_F(HfExport, FineTunedHeadsExportWithTheirTask) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  tasks::TaskDefinition definition;
  definition.name = "MNLI";
  definition.kind = tasks::TaskKind::kClassification;
  definition.labels = {"contradiction", "entailment", "neutral"};
  definition.pair = true;
  const std::string task = tasks::definition_to_json(definition, tasks::TaskSource{});
  struct Case {
    std::string name;
    pb::ModelConfig config;
    tasks::TaskKind kind;
    bool padded;
    std::string architecture, python_class;
    bool tanh_pooler;
  };
  std::vector<Case> cases = {
      {"bert-mnli", tiny("bert-tiny-absolute", 64), tasks::TaskKind::kClassification, true,
       "BertForSequenceClassification", "BertForSequenceClassification", false},
      // HF's ConvBERT head applies GELU where cabert's pooler applies tanh: the base class, and the recipe.
      {"convbert-mnli", tiny("convbert-tiny"), tasks::TaskKind::kClassification, false, "ConvBertModel",
       "ConvBertForSequenceClassification", true},
      {"bert-squad", tiny("bert-tiny-absolute", 64), tasks::TaskKind::kSpan, true, "BertForQuestionAnswering",
       "BertForQuestionAnswering", false},
      {"electra-squad", tiny("bert-tiny-absolute"), tasks::TaskKind::kSpan, true, "ElectraForQuestionAnswering",
       "ElectraForQuestionAnswering", false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    models::TaskModel model(c.config, c.kind, 3);
    perturb(*model, 200 + i);
    save(path(c.name + ".cabert"), c.config, "finetune", *model,
         {{"task", c.kind == tasks::TaskKind::kSpan ? "" : task}});
    export_to(path(c.name + ".cabert"), c.name, c.architecture);
    Inputs in = fixed_inputs(c.config.vocab_size(), c.padded);
    torch::NoGradGuard no_grad;
    torch::Tensor mask = in.mask.to(torch::kBool);
    torch::Tensor hidden = model->encoder->forward(in.ids, in.segments, mask);
    torch::Tensor out = model->forward(in.ids, in.segments, mask);
    if (c.kind == tasks::TaskKind::kSpan) {
      write_outputs(path(c.name + ".outputs"), in,
                    {{"hidden", hidden}, {"start_logits", out.select(2, 0)}, {"end_logits", out.select(2, 1)}});
    } else {
      write_outputs(path(c.name + ".outputs"), in, {{"hidden", hidden}, {"logits", out}});
    }
    add_case(c.name, c.name, c.python_class, c.tanh_pooler);
  }
  nlohmann::json config = nlohmann::json::parse(testing::read_text(path("bert-mnli/config.json")));
  EXPECT_EQ(config["id2label"]["1"], "entailment");
  EXPECT_EQ(config["num_labels"], 3);
  EXPECT_EQ(config["cabert"]["task"], "MNLI");
  compare_in_python(python);
}

}  // namespace
}  // namespace cabert::interop
