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
#include "tests/unit/interop/hf_test_support.h"

namespace cabert::interop {
namespace {

namespace fs = std::filesystem;
using testing::alice_tokenizer;
using namespace hf_test;  // NOLINT: the shared helpers read as this file's own

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
  void compare_in_python(const std::string& python) { hf_test::compare_in_python(python, cases_, path("cases.json")); }

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
