// `cabert export` of the models no transformers class computes: the directory carries cabert's own modelling
// code (configuration_cabert.py, modeling_cabert.py, registered in config.json's auto_map), and transformers'
// Auto classes with trust_remote_code=True load it and give cabert's hidden states and logits to 1e-5 on a
// padded batch (tests/python/hf_reference.py compares) for every encoder preset family: each Chang et al.
// attention variant of bert-tiny-*, ConvBERT's ablations, Wu et al.'s blocks; masked LM, a fine-tuned
// classifier ([CLS] and mean pooling), the span head and ELECTRA's discriminator and generator. The export reads
// back with --from-hf exactly. Skips when the project's Python lacks transformers.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/config/presets.h"
#include "lib/generate/seq2seq_generator.h"
#include "lib/interop/embedded_python.h"
#include "lib/interop/export_model.h"
#include "lib/interop/import_model.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/task_model.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"
#include "tests/unit/interop/hf_test_support.h"

namespace cabert::interop {
// A namespace of its own: the unity build can put this file beside hf_export_test.cc, whose test-local helpers
// could share names.
namespace remote_code_test {
namespace {

namespace fs = std::filesystem;
using testing::alice_tokenizer;
using namespace hf_test;  // NOLINT: the shared helpers read as this file's own

class HfRemoteCode : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::temp_dir(); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Exports <name>.cabert to <name>/ and checks the directory: the architecture, the code, auto_map.
  void export_and_check(const std::string& name, const std::string& architecture, const std::string& auto_class) {
    ExportSummary summary = export_checkpoint({path(name + ".cabert"), path(name), ""});
    EXPECT_EQ(summary.family, HfFamily::kNone) << name;
    EXPECT_EQ(summary.architecture, architecture) << name;
    check_directory(path(name), architecture, auto_class);
  }
  void check_directory(const std::string& dir, const std::string& architecture, const std::string& auto_class) {
    for (const auto& file : hf_python_sources()) {
      EXPECT_EQ(testing::read_text(dir + "/" + file.name), file.text) << dir << "/" << file.name;
    }
    nlohmann::json config = nlohmann::json::parse(testing::read_text(dir + "/config.json"));
    EXPECT_EQ(config["model_type"], "cabert");
    EXPECT_EQ(config["auto_map"]["AutoConfig"], "configuration_cabert.CabertConfig");
    EXPECT_EQ(config["auto_map"]["AutoModel"], "modeling_cabert.CabertModel");
    if (auto_class != "AutoModel") {
      EXPECT_EQ(config["auto_map"][auto_class], "modeling_cabert." + architecture);
    }
  }
  void write_outputs(const std::string& name, const Inputs& in, io::NamedTensors outputs) {
    hf_test::write_outputs(path(name + ".outputs"), in, std::move(outputs));
  }
  // `unused_prefixes`: the head tensors a base class (AutoModel) leaves unread in a directory with a head.
  void add_case(const std::string& name, const std::string& dir, const std::string& auto_class,
                const std::vector<std::string>& unused_prefixes = {}) {
    cases_.push_back({{"name", name},
                      {"dir", path(dir)},
                      {"class", auto_class},
                      {"outputs", path(name + ".outputs")},
                      {"remote_code", true},
                      {"tolerance", 1e-5},
                      {"unused_prefixes", unused_prefixes}});
  }
  // --from-hf reads the export back: the checkpoint's tensors are the exported model's, bit for bit.
  void expect_round_trip(const std::string& name, const torch::nn::Module& module, const std::string& prefix) {
    import_model({path(name), path(name + "-back.cabert"), ""});
    io::Checkpoint back = io::load_checkpoint(path(name + "-back.cabert"));
    std::map<std::string, torch::Tensor> tensors = model_tensors(back);
    size_t compared = 0;
    for (const auto& [tensor_name, tensor] : io::module_tensors(module, "")) {
      if (tensor_name.rfind(prefix, 0) != 0) continue;
      ASSERT_TRUE(tensors.count(tensor_name)) << name << ": " << tensor_name << " lost on the way back";
      EXPECT_TRUE(torch::equal(tensors[tensor_name], tensor)) << name << ": " << tensor_name;
      ++compared;
    }
    EXPECT_EQ(compared, tensors.size()) << name;
  }
  void compare_in_python(const std::string& python) { hf_test::compare_in_python(python, cases_, path("cases.json")); }

  std::string dir_;
  nlohmann::json cases_ = nlohmann::json::array();
};

// Every encoder preset no transformers class computes, at its tiny size.
std::vector<std::string> remote_code_presets() {
  std::vector<std::string> names;
  for (const auto& name : config::preset_names()) {
    if (name.find("-tiny") == std::string::npos) continue;
    pb::ModelConfig config = config::preset_config(name);
    if (config.has_seq2seq() || hf_target(config, ModelHead::kMlm).family != HfFamily::kNone) continue;
    names.push_back(name);
  }
  return names;
}

pb::ModelConfig convbert_ablation(pb::ConvBertConvKind kind, int kernel) {
  pb::ModelConfig config = tiny("convbert-tiny");
  config.mutable_convbert()->set_conv_kind(kind);
  config.mutable_convbert()->set_conv_kernel_size(kernel);
  return config;
}

TEST_F(HfRemoteCode, EveryEncoderPresetGivesCabertsMaskedLmOutputsInTransformers) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  std::vector<std::pair<std::string, pb::ModelConfig>> configs;
  for (const auto& name : remote_code_presets()) configs.emplace_back(name, tiny(name));
  // 13 bert-tiny variants (all but absolute, which BERT's class computes), lightconv and dynamicconv; convbert-tiny
  // goes to transformers' ConvBERT class (hf_export_test.cc), its ablations below come here.
  EXPECT_EQ(configs.size(), 15u) << "the bert-tiny variants, lightconv and dynamicconv";
  configs.emplace_back("convbert-even-kernel", convbert_ablation(pb::SDCONV, 4));
  configs.emplace_back("convbert-plain-dynamic", convbert_ablation(pb::PLAIN_DYNAMIC, 5));
  configs.emplace_back("convbert-depthwise-separable", convbert_ablation(pb::DEPTHWISE_SEPARABLE, 5));
  configs.emplace_back("convbert-no-conv", convbert_ablation(pb::NO_CONV, 5));
  pb::ModelConfig dilated = tiny("lightconv-tiny");  // Tay et al.'s dilated blocks as an encoder
  dilated.set_family(pb::DILATEDCONV);
  dilated.mutable_conv_block()->set_dilation_cycle(2);
  dilated.set_normalize_mixer_output(true);
  configs.emplace_back("dilatedconv-encoder", dilated);
  pb::ModelConfig relu = tiny("dynamicconv-tiny");  // fairseq's ReLU FFN (the wu-* presets' activation)
  relu.set_ffn_activation(pb::RELU);
  configs.emplace_back("dynamicconv-relu", relu);
  pb::ModelConfig relu_attention = tiny("bert-tiny-composite");
  relu_attention.set_ffn_activation(pb::RELU);
  configs.emplace_back("composite-relu", relu_attention);
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& [name, config] = configs[i];
    models::MlmModel model(config);
    perturb(*model, 300 + i);
    save(path(name + ".cabert"), config, "pretrain", *model, {{"objective", "mlm"}});
    export_and_check(name, "CabertForMaskedLM", "AutoModelForMaskedLM");
    Inputs in = fixed_inputs(config.vocab_size(), /*padded=*/true);
    torch::NoGradGuard no_grad;
    torch::Tensor mask = in.mask.to(torch::kBool);
    torch::Tensor hidden = model->encoder->forward(in.ids, in.segments, mask);
    torch::Tensor logits = model->forward(in.ids, in.segments, mask, torch::ones_like(mask)).view({2, 12, -1});
    write_outputs(name + ".mlm", in, {{"hidden", hidden}, {"logits", logits}});
    write_outputs(name + ".encoder", in, {{"hidden", hidden}});
    add_case(name + ".mlm", name, "AutoModelForMaskedLM");
    add_case(name + ".encoder", name, "AutoModel", {"mlm_head."});
    nlohmann::json written = nlohmann::json::parse(testing::read_text(path(name + "/config.json")));
    EXPECT_EQ(written["hidden_act"], config.ffn_activation() == pb::RELU ? "relu" : "gelu") << name;
    expect_round_trip(name, *model, "");
  }
  compare_in_python(python);
}

TEST_F(HfRemoteCode, FineTunedHeadsPoolAsCabertDoes) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  tasks::TaskDefinition definition;
  definition.name = "MNLI";
  definition.kind = tasks::TaskKind::kClassification;
  definition.labels = {"contradiction", "entailment", "neutral"};
  definition.pair = true;
  const std::string task = tasks::definition_to_json(definition, tasks::TaskSource{});
  struct Case {
    std::string name, preset;
    tasks::TaskKind kind;
    models::Pooling pooling;
  };
  std::vector<Case> cases = {
      {"composite-cls", "bert-tiny-composite-conv-qkv", tasks::TaskKind::kClassification, models::Pooling::kCls},
      {"composite-key-mean", "bert-tiny-composite-key", tasks::TaskKind::kClassification, models::Pooling::kMean},
      {"dynamicconv-mean", "dynamicconv-tiny", tasks::TaskKind::kClassification, models::Pooling::kMean},
      {"depthwise-span", "bert-tiny-composite-depthwise", tasks::TaskKind::kSpan, models::Pooling::kCls},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    pb::ModelConfig config = tiny(c.preset);
    models::TaskModel model(config, c.kind, 3, c.pooling);
    perturb(*model, 400 + i);
    const bool span = c.kind == tasks::TaskKind::kSpan;
    save(path(c.name + ".cabert"), config, "finetune", *model,
         {{"task", span ? "" : task}, {"pooling", models::pooling_name(c.pooling)}});
    const std::string architecture = span ? "CabertForQuestionAnswering" : "CabertForSequenceClassification";
    const std::string auto_class = span ? "AutoModelForQuestionAnswering" : "AutoModelForSequenceClassification";
    export_and_check(c.name, architecture, auto_class);
    Inputs in = fixed_inputs(config.vocab_size(), /*padded=*/true);
    torch::NoGradGuard no_grad;
    torch::Tensor mask = in.mask.to(torch::kBool);
    torch::Tensor hidden = model->encoder->forward(in.ids, in.segments, mask);
    torch::Tensor out = model->forward(in.ids, in.segments, mask);
    if (span) {
      write_outputs(c.name, in,
                    {{"hidden", hidden}, {"start_logits", out.select(2, 0)}, {"end_logits", out.select(2, 1)}});
    } else {
      write_outputs(c.name, in, {{"hidden", hidden}, {"logits", out}});
    }
    add_case(c.name, c.name, auto_class);
  }
  nlohmann::json config = nlohmann::json::parse(testing::read_text(path("composite-key-mean/config.json")));
  EXPECT_EQ(config["cabert"]["pooling"], "mean");
  EXPECT_EQ(config["id2label"]["2"], "neutral");
  compare_in_python(python);
}

TEST_F(HfRemoteCode, ElectraDiscriminatorAndGeneratorOfAVariantLoad) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  pb::ModelConfig config = tiny("bert-tiny-composite");
  models::ElectraModel model(config);
  perturb(*model, 500);
  save(path("electra.cabert"), config, "pretrain", *model, {{"objective", "electra"}});
  export_and_check("electra", "CabertForPreTraining", "AutoModelForPreTraining");
  check_directory(path("electra/generator"), "CabertForMaskedLM", "AutoModelForMaskedLM");
  Inputs in = fixed_inputs(config.vocab_size(), /*padded=*/true);
  torch::NoGradGuard no_grad;
  torch::Tensor mask = in.mask.to(torch::kBool);
  write_outputs("discriminator", in,
                {{"hidden", model->encoder->forward(in.ids, in.segments, mask)},
                 {"discriminator_logits", model->discriminator_logits(in.ids, in.segments, mask)}});
  torch::Tensor positions = torch::ones_like(mask);
  write_outputs("generator", in,
                {{"logits", model->generator_logits(in.ids, in.segments, mask, positions).view({2, 12, -1})}});
  add_case("discriminator", "electra", "AutoModelForPreTraining");
  add_case("generator", "electra/generator", "AutoModelForMaskedLM");
  compare_in_python(python);
}

// Every encoder-decoder preset family at its tiny size, and the switches the presets leave off: pre-norm, Tay et
// al.'s attention layer on top of the convolutions, separate source / target tables with an untied output; T5's
// relative position bias also with few buckets and a short maximum distance, so that these short rows reach the
// log-spaced buckets and the offsets beyond the distance (t5-tiny's 32 / 128 keep every offset here exact).
std::vector<std::pair<std::string, pb::ModelConfig>> seq2seq_configs() {
  std::vector<std::pair<std::string, pb::ModelConfig>> configs;
  for (const char* name : {"wu-lightconv-tiny", "wu-dynamicconv-tiny", "transformer-tiny", "tay-lightconv-tiny",
                           "tay-dynamicconv-tiny", "tay-dilatedconv-tiny", "t5-tiny"}) {
    configs.emplace_back(name, tiny(name));
  }
  pb::ModelConfig pre_norm = tiny("transformer-tiny");
  pre_norm.mutable_seq2seq()->set_normalize_before(true);
  configs.emplace_back("transformer-pre-norm", pre_norm);
  pb::ModelConfig conv_pre_norm = tiny("wu-dynamicconv-tiny");
  conv_pre_norm.mutable_seq2seq()->set_normalize_before(true);
  configs.emplace_back("wu-dynamicconv-pre-norm", conv_pre_norm);
  pb::ModelConfig top = tiny("tay-lightconv-tiny");
  top.mutable_seq2seq()->set_encoder_top_attention(true);
  top.mutable_seq2seq()->set_share_embeddings(false);
  top.mutable_seq2seq()->set_tie_output(false);
  configs.emplace_back("tay-lightconv-top-attention-untied", top);
  pb::ModelConfig few_buckets = tiny("t5-tiny");  // bidirectional: 2 exact, 2 log-spaced; causal: 4 and 4; D = 6
  few_buckets.mutable_seq2seq()->set_relative_buckets(8);
  few_buckets.mutable_seq2seq()->set_relative_max_distance(6);
  few_buckets.mutable_seq2seq()->set_share_embeddings(false);
  few_buckets.mutable_seq2seq()->set_tie_output(false);
  configs.emplace_back("t5-few-buckets-untied", few_buckets);
  return configs;
}

// Source rows of 9 ids ending with [SEP], the last 3 of row 2 [PAD]; decoder inputs of 7, [CLS] first, the last 2
// of row 1 [PAD].
struct Seq2SeqInputs {
  torch::Tensor source, source_mask, target_in, target_mask;
};
Seq2SeqInputs seq2seq_inputs(int64_t vocab) {
  torch::manual_seed(12);
  Seq2SeqInputs in;
  in.source = torch::randint(5, vocab, {3, 9}, torch::kLong);
  in.source.select(1, 8).fill_(3);
  in.source_mask = torch::ones({3, 9}, torch::kBool);
  in.source[2].narrow(0, 6, 3).fill_(0);
  in.source[2][5] = 3;
  in.source_mask[2].narrow(0, 6, 3).fill_(false);
  in.target_in = torch::randint(5, vocab, {3, 7}, torch::kLong);
  in.target_in.select(1, 0).fill_(2);
  in.target_mask = torch::ones({3, 7}, torch::kBool);
  in.target_in[1].narrow(0, 5, 2).fill_(0);
  in.target_mask[1].narrow(0, 5, 2).fill_(false);
  return in;
}

TEST_F(HfRemoteCode, EncoderDecodersGenerateWhatCabertsGreedySearchGenerates) {
  CABERT_REQUIRE_TRANSFORMERS(python);
  const auto configs = seq2seq_configs();
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& [name, config] = configs[i];
    models::Seq2SeqModel model(config);
    perturb(*model, 600 + i);
    save(path(name + ".cabert"), config, "finetune", *model,
         {{"task", "translation"}, {"task_name", "translation-de-en"}});
    ExportSummary summary = export_checkpoint({path(name + ".cabert"), path(name), ""});
    EXPECT_EQ(summary.family, HfFamily::kNone) << name;
    EXPECT_EQ(summary.architecture, "CabertForConditionalGeneration") << name;
    nlohmann::json written = nlohmann::json::parse(testing::read_text(path(name + "/config.json")));
    EXPECT_EQ(written["auto_map"]["AutoModelForSeq2SeqLM"], "modeling_cabert.CabertForConditionalGeneration");
    EXPECT_EQ(written["is_encoder_decoder"], true);
    EXPECT_EQ(written["hidden_act"], config.ffn_activation() == pb::RELU ? "relu" : "gelu") << name;
    EXPECT_TRUE(fs::exists(path(name + "/generation_config.json"))) << name;
    for (const auto& file : hf_python_sources()) {
      EXPECT_EQ(testing::read_text(path(name + "/" + file.name)), file.text) << name << "/" << file.name;
    }

    Seq2SeqInputs in = seq2seq_inputs(config.vocab_size());
    generate::SearchOptions search;
    search.beam_size = 1;
    search.max_length = 10;
    std::vector<generate::Hypothesis> best = generate::generate_batch(model, in.source, in.source_mask, search);
    torch::NoGradGuard no_grad;
    torch::Tensor memory = model->encode(in.source, in.source_mask);
    torch::Tensor logits = model->decode(in.target_in, in.target_mask, memory, in.source_mask);
    torch::Tensor generated = torch::zeros({3, search.max_length + 1}, torch::kLong);
    for (size_t row = 0; row < best.size(); ++row) {
      ASSERT_EQ(best[row].tokens.back(), 3) << name;
      for (size_t t = 0; t < best[row].tokens.size(); ++t) generated[row][t] = best[row].tokens[t];
    }
    io::write_tensors_safetensors(path(name + ".outputs"), {{"input_ids", in.source},
                                                             {"attention_mask", in.source_mask.to(torch::kLong)},
                                                             {"decoder_input_ids", in.target_in},
                                                             {"decoder_attention_mask", in.target_mask.to(torch::kLong)},
                                                             {"memory", memory},
                                                             {"logits", logits},
                                                             {"generated", generated}});
    add_case(name, name, "AutoModelForSeq2SeqLM");
    cases_.back()["seq2seq"] = true;
    cases_.back()["max_new_tokens"] = search.max_length + 1;  // cabert's M tokens before EOS, then EOS
    expect_round_trip(name, *model, "");
    if (config.seq2seq().relative_buckets() > 0) {  // the two shared tables, under cabert's names, once each
      io::SafetensorsFile file(path(name + "/model.safetensors"));
      size_t tables = 0;
      for (const auto& info : file.tensors()) tables += info.name.find("position_bias") != std::string::npos;
      EXPECT_EQ(tables, 2u) << name;
      EXPECT_TRUE(torch::equal(io::read_tensor(file, "encoder_position_bias.table"),
                               model->encoder_position_bias->table)) << name;
      EXPECT_TRUE(torch::equal(io::read_tensor(file, "decoder_position_bias.table"),
                               model->decoder_position_bias->table)) << name;
    }
  }
  compare_in_python(python);
}

}  // namespace
}  // namespace remote_code_test
}  // namespace cabert::interop
