// `cabert export --from-hf`: Hugging Face models built in Python (tests/python/hf_reference.py make) come in
// with HF's outputs, and go out again with identical tensors; bad directories are refused naming the file and
// the tensor. The refusals and cabert's own (non-HF) exports need no Python.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/config/presets.h"
#include "lib/core/errors.h"
#include "lib/interop/export_model.h"
#include "lib/interop/import_model.h"
#include "lib/io/checkpoint_file.h"
#include "lib/io/safetensors_torch.h"
#include "lib/models/pretraining_models.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::interop {
namespace {

namespace fs = std::filesystem;
using testing::alice_tokenizer;
using testing::data_error_message;

std::map<std::string, torch::Tensor> read_all(const std::string& path) {
  io::SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& info : file.tensors()) out.emplace(info.name, io::read_tensor(file, info.name));
  return out;
}

class HfImport : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::temp_dir(); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A freshly initialised MLM model of `config` (its vocabulary set to the Alice tokenizer's) saved as a
  // pre-training checkpoint; returns its tensors.
  io::NamedTensors save_mlm(const std::string& file, pb::ModelConfig* config) {
    text::Tokenizer tokenizer(alice_tokenizer());
    config->set_vocab_size(tokenizer.vocab_size());
    models::MlmModel model(*config);
    pb::CheckpointInfo info;
    info.set_kind("pretrain");
    *info.mutable_model() = *config;
    info.set_tokenizer(tokenizer.path());
    info.set_tokenizer_checksum(tokenizer.checksum());
    io::NamedTensors tensors = io::module_tensors(*model);
    io::save_checkpoint(path(file), info, tensors);
    return tensors;
  }

  // A cabert MLM model (BERT family, E = H: HF's BertForMaskedLM) exported to <name>/.
  void export_bert(const std::string& name) {
    pb::ModelConfig config = config::preset_config("bert-tiny-absolute");
    config.set_embedding_size(config.hidden_size());
    save_mlm(name + ".cabert", &config);
    export_checkpoint({path(name + ".cabert"), path(name), ""});
  }
  std::string import_error(const std::string& name) {
    return data_error_message([&] { import_model({path(name), path(name + ".imported.cabert"), ""}); });
  }
  void rewrite_config(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json config = nlohmann::json::parse(testing::read_text(path(name + "/config.json")));
    edit(config);
    testing::write_text(path(name + "/config.json"), config.dump(2));
  }

  std::string dir_;
};

TEST_F(HfImport, ModelsBuiltByTransformersComeInWithTheirOutputsAndGoOutUnchanged) {
  std::string python = testing::python_with("transformers, safetensors, torch");
  if (python.empty()) GTEST_SKIP() << "the project's Python lacks transformers (run scripts/setup.sh): skipped";
  testing::run_python(python, testing::source_dir() + "/tests/python/hf_reference.py",
                      "make '" + dir_ + "' '" + alice_tokenizer() + "'");
  // Tied copies HF may store beside the tensor they are tied to (cabert keeps one).
  const std::set<std::string> tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias",
                                      "generator_lm_head.weight"};
  for (const std::string name : {"bert", "convbert", "electra", "electra-mlm"}) {
    SCOPED_TRACE(name);
    ImportSummary summary = import_model({path(name), path(name + ".cabert"), ""});
    EXPECT_EQ(summary.head, name == "electra" ? ModelHead::kElectra : ModelHead::kMlm);
    for (const auto& ignored : summary.ignored) EXPECT_TRUE(tied.count(ignored)) << ignored;

    // cabert computes what transformers computed.
    io::Checkpoint checkpoint = io::load_checkpoint(path(name + ".cabert"));
    EXPECT_EQ(checkpoint.info.tokenizer(), fs::absolute(path(name + ".tokenizer.model")).string());
    auto reference = read_all(path(name + "/reference.safetensors"));
    const pb::ModelConfig& config = checkpoint.info.model();
    torch::Tensor ids = reference["input_ids"], segments = reference["token_type_ids"];
    torch::Tensor mask = reference["attention_mask"].to(torch::kBool);
    torch::NoGradGuard no_grad;
    torch::Tensor hidden, logits;
    if (name == "electra") {
      models::ElectraModel model(config);
      io::restore_module(*model, checkpoint, "model/encoder.", "encoder.");
      io::restore_module(*model, checkpoint, "model/discriminator_", "discriminator_");
      model->eval();
      hidden = model->encoder->forward(ids, segments, mask);
      logits = model->discriminator_logits(ids, segments, mask);
    } else {
      models::MlmModel model(config);
      io::restore_module(*model, checkpoint);
      model->eval();
      hidden = model->encoder->forward(ids, segments, mask);
      logits = model->forward(ids, segments, mask, torch::ones_like(mask)).view(reference["logits"].sizes());
    }
    EXPECT_LT((hidden - reference["hidden"]).abs().max().item<double>(), 1e-4);
    EXPECT_LT((logits - reference["logits"]).abs().max().item<double>(), 1e-4);

    // Out again: the same tensors under the same names.
    export_checkpoint({path(name + ".cabert"), path(name + ".again"), ""});
    auto model_type = [&](const std::string& dir) {
      return nlohmann::json::parse(testing::read_text(path(dir + "/config.json")))["model_type"];
    };
    EXPECT_EQ(model_type(name + ".again"), model_type(name));
    auto original = read_all(path(name + "/model.safetensors"));
    auto again = read_all(path(name + ".again/model.safetensors"));
    for (const auto& [tensor_name, tensor] : original) {
      if (tied.count(tensor_name)) continue;
      ASSERT_TRUE(again.count(tensor_name)) << tensor_name << " lost on the way";
      EXPECT_TRUE(torch::equal(again[tensor_name], tensor)) << tensor_name;
    }
    for (const auto& entry : again) EXPECT_TRUE(original.count(entry.first)) << entry.first << " appeared";
  }
}

TEST_F(HfImport, CabertOnlyModelsKeepTheirNamesAndComeBackExactly) {
  pb::ModelConfig config = config::preset_config("bert-tiny-composite");
  io::NamedTensors tensors = save_mlm("composite.cabert", &config);
  text::Tokenizer tokenizer(alice_tokenizer());
  testing::write_text(path("composite/generator/config.json"), "{}");  // an earlier ELECTRA export's generator
  ExportSummary summary = export_checkpoint({path("composite.cabert"), path("composite"), ""});
  EXPECT_EQ(summary.family, HfFamily::kNone);
  EXPECT_EQ(summary.architecture, "CabertForMaskedLM");
  EXPECT_FALSE(fs::exists(path("composite/generator"))) << "a stale generator/ stayed beside another model";
  EXPECT_NE(summary.why_not.find("'composite'"), std::string::npos) << summary.why_not;

  auto exported = read_all(path("composite/model.safetensors"));
  EXPECT_EQ(exported.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    const std::string bare = name.substr(6);  // "model/" off
    ASSERT_TRUE(exported.count(bare)) << bare;
    EXPECT_TRUE(torch::equal(exported[bare], tensor)) << bare;
  }
  EXPECT_TRUE(exported.count("encoder.stack.layers.0.attention.relative_beta"));
  nlohmann::json json = nlohmann::json::parse(testing::read_text(path("composite/config.json")));
  EXPECT_EQ(json["model_type"], "cabert");
  EXPECT_EQ(json["cabert"]["model"]["attention"]["relative_radius"], 3);
  nlohmann::json tok = nlohmann::json::parse(testing::read_text(path("composite/tokenizer_config.json")));
  EXPECT_EQ(tok["special_ids"]["[MASK]"], 4);
  EXPECT_EQ(tok["sentinels"][0]["id"], 5);
  EXPECT_EQ(testing::read_text(path("composite/tokenizer.model")), testing::read_text(alice_tokenizer()));

  import_model({path("composite"), path("back.cabert"), ""});
  io::Checkpoint back = io::load_checkpoint(path("back.cabert"));
  EXPECT_EQ(back.info.model().SerializeAsString(), config.SerializeAsString());
  EXPECT_EQ(back.info.tokenizer_checksum(), tokenizer.checksum());
  EXPECT_EQ(back.info.metadata().at("objective"), "mlm");
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(back.tensors.count(name)) << name;
    EXPECT_TRUE(torch::equal(back.tensors[name], tensor)) << name;
  }
}

TEST_F(HfImport, RefusesBrokenWeightsNamingFileAndTensor) {
  export_bert("m");
  const std::string weights = path("m/model.safetensors");
  std::string bytes = testing::read_text(weights);

  // A header length past the end of the file.
  std::string past = bytes.substr(0, 64);
  uint64_t huge = bytes.size() * 2;
  std::memcpy(past.data(), &huge, 8);
  testing::write_text(weights, past);
  EXPECT_EQ(import_error("m"), weights + ": at byte offset 0: header length " + std::to_string(huge) +
                                   " runs past the end of the file (64 bytes): truncated or not a safetensors file");

  // Overlapping offsets.
  export_bert("m");
  float values[4] = {1, 2, 3, 4};
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  std::string overlap(8, '\0');
  uint64_t length = header.size();
  std::memcpy(overlap.data(), &length, 8);
  overlap += header + std::string(reinterpret_cast<const char*>(values), 12);
  testing::write_text(weights, overlap);
  EXPECT_EQ(import_error("m"), weights + ": tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8]");

  // A dtype cabert cannot read, where a weight should be.
  export_bert("m");
  {
    auto tensors = read_all(weights);
    std::vector<io::SafeTensorView> views;
    std::string fp8(tensors["bert.embeddings.word_embeddings.weight"].numel(), '\x38');
    for (const auto& [name, tensor] : tensors) {
      if (name == "bert.embeddings.word_embeddings.weight") {
        views.push_back({name, io::SafeDtype::kF8E4M3, tensor.sizes().vec(), fp8.data(), fp8.size()});
      } else {
        views.push_back({name, io::SafeDtype::kF32, tensor.sizes().vec(), tensor.data_ptr(), size_t(tensor.nbytes())});
      }
    }
    io::write_safetensors(weights, views);
  }
  EXPECT_EQ(import_error("m"), weights + ": tensor 'bert.embeddings.word_embeddings.weight' has dtype F8_E4M3, which "
                                         "cabert cannot read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
  EXPECT_FALSE(fs::exists(path("m.imported.cabert")));

  // A NaN in a weight (it imported, and showed later as NaN losses).
  export_bert("m");
  {
    auto tensors = read_all(weights);
    tensors["bert.encoder.layer.0.output.dense.weight"].view(-1)[3] = std::nanf("");
    std::vector<io::SafeTensorView> views;
    for (const auto& [name, tensor] : tensors) {
      views.push_back({name, io::SafeDtype::kF32, tensor.sizes().vec(), tensor.data_ptr(), size_t(tensor.nbytes())});
    }
    io::write_safetensors(weights, views);
  }
  EXPECT_EQ(import_error("m"), weights + ": tensor 'bert.encoder.layer.0.output.dense.weight' holds non-finite values "
                                         "(NaN or infinity); expected finite weights");
  EXPECT_FALSE(fs::exists(path("m.imported.cabert")));
}

// A cabert export's "cabert" block restores the config exactly; Hugging Face keys edited to say another model are
// named in a warning (they were ignored silently).
TEST_F(HfImport, HfKeysThatDisagreeWithTheCabertBlockAreNamed) {
  export_bert("m");
  ::testing::internal::CaptureStderr();
  import_model({path("m"), path("m.imported.cabert"), ""});
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("disagree"), std::string::npos);
  rewrite_config("m", [](nlohmann::json& j) { j["hidden_act"] = "gelu_new", j["hidden_size"] = 128; });
  ::testing::internal::CaptureStderr();
  import_model({path("m"), path("m.imported.cabert"), ""});
  EXPECT_NE(
      ::testing::internal::GetCapturedStderr().find(
          path("m/config.json") + ": its Hugging Face keys disagree with its \"cabert\" block: hidden_size 128 "
                                  "(the block: 64), hidden_act \"gelu_new\" (the block: \"gelu\"); imported "
                                  "as the block says"),
      std::string::npos);
  EXPECT_EQ(io::load_checkpoint(path("m.imported.cabert")).info.model().hidden_size(), 64);
}

TEST_F(HfImport, RefusesConfigsTheTensorsOrCabertDisagreeWith) {
  export_bert("m");
  const std::string config = path("m/config.json");
  // Without the "cabert" block the import reads HF's keys, as for a model transformers wrote.
  rewrite_config("m", [](nlohmann::json& j) { j.erase("cabert"), j["intermediate_size"] = 100; });
  EXPECT_EQ(import_error("m"), path("m/model.safetensors") +
                                   ": tensor 'bert.encoder.layer.0.intermediate.dense.weight' "
                                   "has shape [128, 64] but " +
                                   config + " describes [100, 64]");
  rewrite_config("m", [](nlohmann::json& j) { j["intermediate_size"] = 128, j["hidden_act"] = "gelu_new"; });
  EXPECT_EQ(import_error("m"), config + ": 'hidden_act' is 'gelu_new'; cabert's layers use the exact (erf) GELU, "
                                        "'gelu', or ReLU, 'relu'");
  // ReLU reads as cabert's ffn_activation RELU; HF's BERT heads would apply it too, so this model is refused.
  rewrite_config("m", [](nlohmann::json& j) { j["hidden_act"] = "relu"; });
  EXPECT_EQ(import_error("m"), config + ": cabert cannot compute this bert model: the FFN activation is ReLU "
                                        "(ffn_activation RELU), and transformers' BERT, ELECTRA and ConvBERT classes "
                                        "apply hidden_act in their heads too, where cabert's heads apply GELU");
  rewrite_config("m", [](nlohmann::json& j) { j["hidden_act"] = "gelu", j["model_type"] = "roberta"; });
  EXPECT_EQ(import_error("m"), config + ": model_type 'roberta' cannot be imported; cabert imports bert, electra and "
                                        "convbert (and its own exports)");
  rewrite_config("m", [](nlohmann::json& j) { j["model_type"] = "bert", j.erase("num_hidden_layers"); });
  EXPECT_EQ(import_error("m"), config + ": missing key 'num_hidden_layers'");

  // A WordPiece vocabulary instead of a SentencePiece model.
  export_bert("w");
  fs::remove(path("w/tokenizer.model"));
  testing::write_text(path("w/vocab.txt"), "[PAD]\n[UNK]\n");
  EXPECT_EQ(import_error("w"), path("w") + ": the tokenizer is a WordPiece vocabulary (vocab.txt); cabert tokenises "
                                           "with SentencePiece only and cannot reproduce WordPiece ids. Pass "
                                           "--tokenizer MODEL (a SentencePiece model whose ids match the embeddings) "
                                           "to import anyway");
  EXPECT_FALSE(fs::exists(path("w.imported.cabert")));
}

}  // namespace
}  // namespace cabert::interop
