// The import's refusals before anything is allocated (lib/interop/import_plan.h): config.json's sizes bounded by
// the bytes of the weights file, and every tensor matched by name, shape and dtype from the header alone.
#include "lib/interop/import_plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lib/config/presets.h"
#include "lib/core/errors.h"
#include "lib/io/checkpoint_file.h"
#include "lib/models/encoder.h"
#include "lib/models/seq2seq_model.h"
#include "tests/test_paths.h"

namespace cabert::interop {
namespace {

using testing::data_error_message;

uint64_t least(const pb::ModelConfig& config) {
  uint64_t sum = 0;
  for (const auto& term : least_weights(config, "cabert")) sum += term.weights;
  return sum;
}

uint64_t actual(const pb::ModelConfig& config) {
  torch::NoGradGuard no_grad;
  uint64_t sum = 0;
  const io::NamedTensors tensors = config.has_seq2seq() ? io::module_tensors(*models::Seq2SeqModel(config), "")
                                                        : io::module_tensors(*models::Encoder(config), "");
  for (const auto& [name, tensor] : tensors) sum += tensor.numel();
  return sum;
}

// The bound refuses no real model (it is at most the weights of the model's encoder) and bounds what building
// the model allocates: at most 4 times the bound, so at most 8 times the file's bytes (float32 from F16). Every
// preset whose bound is at most 20M weights (larger ones take a minute to build).
TEST(ImportPlan, TheLeastWeightsBoundEveryPresetFromBelowWithinAFactorOfFour) {
  for (const std::string& name : config::preset_names()) {
    const pb::ModelConfig config = config::preset_config(name);
    const uint64_t bound = least(config);
    if (bound > 20'000'000) continue;
    const uint64_t weights = actual(config);
    EXPECT_LE(bound, weights) << name;
    EXPECT_LE(weights, 4 * bound) << name << ": " << weights << " weights, bound " << bound;
  }
}

nlohmann::json bert_config() {
  return {{"model_type", "bert"},       {"vocab_size", 100},          {"hidden_size", 8},
          {"num_hidden_layers", 2},     {"num_attention_heads", 2},   {"intermediate_size", 16},
          {"max_position_embeddings", 32}, {"dtype", "float32"}};
}

// The header of a BERT of bert_config()'s sizes as far as the tests need it: the tensors given, F32.
std::vector<io::SafeTensorInfo> header(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  std::vector<io::SafeTensorInfo> tensors;
  uint64_t offset = 0;
  for (const auto& [name, shape] : shapes) {
    io::SafeTensorInfo info;
    info.name = name;
    info.shape = shape;
    info.begin = offset;
    offset = info.end = offset + *io::safe_tensor_bytes(io::SafeDtype::kF32, shape);
    tensors.push_back(info);
  }
  return tensors;
}

// least_weights(bert_config()): 100 x 8 + 32 x 8 + 2 x 8 x (8 + 2 x 16) = 800 + 256 + 640 = 1696 weights.
TEST(ImportPlan, ConfigSizesAreComparedWithTheBytesTheFileHolds) {
  const ImportPlan plan = plan_import(bert_config().dump(), "d/config.json", {}, 1696 * 2, "d/model.safetensors");
  EXPECT_EQ(plan.model_type, "bert");
  EXPECT_EQ(plan.config_dtype, "F32");
  EXPECT_EQ(plan.least_bytes, 1696u * 2);
  EXPECT_EQ(plan.config.hidden_size(), 8);
  EXPECT_EQ(data_error_message([] { plan_import(bert_config().dump(), "d/config.json", {}, 1696 * 2 - 1, "w"); }),
            "d/config.json: its sizes need at least 1696 weights (3392 bytes even as F16/BF16; the largest part: "
            "vocab_size 100 x hidden_size 8), but w holds 3391 bytes of tensors (0 tensors)");
  nlohmann::json layers = bert_config();
  layers["num_hidden_layers"] = 1000000;
  EXPECT_EQ(data_error_message([&] { plan_import(layers.dump(), "c", {}, 1 << 20, "w"); }),
            "c: its sizes need at least 320001056 weights (640002112 bytes even as F16/BF16; the largest part: "
            "num_hidden_layers 1000000 x hidden_size 8 x (hidden_size 8 + 2 x intermediate_size 16)), but w holds "
            "1048576 bytes of tensors (0 tensors)");
}

TEST(ImportPlan, AbsurdOrMistypedSizesAreRefusedNamingTheKey) {
  auto refusal = [](const std::string& key, const nlohmann::json& value) {
    nlohmann::json config = bert_config();
    config[key] = value;
    return data_error_message([&] { plan_import(config.dump(), "c", {}, 1 << 20, "w"); });
  };
  EXPECT_EQ(refusal("hidden_size", 1e12), "c: 'hidden_size' must be a positive integer, got 1000000000000.0");
  EXPECT_EQ(refusal("vocab_size", int64_t{1} << 40), "c: 'vocab_size' must be a positive integer, got 1099511627776");
  EXPECT_EQ(refusal("num_hidden_layers", -3), "c: 'num_hidden_layers' must be a positive integer, got -3");
  EXPECT_EQ(refusal("intermediate_size", "16"), "c: 'intermediate_size' must be a positive integer, got \"16\"");
  EXPECT_EQ(refusal("num_attention_heads", 3),
            "c: model config 'hf-bert' expected hidden_size divisible by num_heads, got 8 and 3");
  EXPECT_EQ(refusal("type_vocab_size", 2.5), "c: 'type_vocab_size' must be an integer, got 2.5");
  EXPECT_EQ(refusal("dtype", "int8"), "c: 'dtype' is \"int8\"; cabert imports float32, float16, bfloat16 or float64 "
                                      "weights");
  EXPECT_EQ(data_error_message([] { plan_import("{\"model_type\": ", "c", {}, 0, "w"); }).rfind("c: not valid JSON", 0),
            0u);
}

TEST(ImportPlan, TensorsAreMatchedByNameShapeAndDtype) {
  const ImportPlan plan = plan_import(bert_config().dump(), "c", {}, 1 << 20, "w");
  const std::vector<ExpectedTensor> expected = {{"bert.embeddings.word_embeddings.weight", {100, 8}},
                                                {"bert.encoder.layer.0.intermediate.dense.weight", {16, 8}}};
  // A base model's names (no "bert." prefix) are found; heads beside the encoder are left for the caller.
  auto stored = match_tensors(plan, expected,
                              header({{"embeddings.word_embeddings.weight", {100, 8}},
                                      {"encoder.layer.0.intermediate.dense.weight", {16, 8}},
                                      {"embeddings.position_ids", {1, 32}},
                                      {"cls.predictions.bias", {100}}}),
                              "w", "c");
  EXPECT_EQ(stored, (std::vector<std::string>{"embeddings.word_embeddings.weight",
                                              "encoder.layer.0.intermediate.dense.weight"}));
  auto refusal = [&](std::vector<io::SafeTensorInfo> tensors) {
    return data_error_message([&] { match_tensors(plan, expected, tensors, "w", "c"); });
  };
  EXPECT_EQ(refusal(header({{"bert.embeddings.word_embeddings.weight", {100, 8}}})),
            "w: no tensor 'bert.encoder.layer.0.intermediate.dense.weight', which the model c describes needs");
  EXPECT_EQ(refusal(header({{"bert.embeddings.word_embeddings.weight", {100, 8}},
                            {"bert.encoder.layer.0.intermediate.dense.weight", {17, 8}}})),
            "w: tensor 'bert.encoder.layer.0.intermediate.dense.weight' has shape [17, 8] but c describes [16, 8]");
  EXPECT_EQ(refusal(header({{"bert.embeddings.word_embeddings.weight", {100, 8}},
                            {"bert.encoder.layer.0.intermediate.dense.weight", {16, 8}},
                            {"bert.encoder.layer.2.output.dense.weight", {8, 16}}})),
            "w: tensor 'bert.encoder.layer.2.output.dense.weight' [8, 16] is no part of the model c describes "
            "(num_hidden_layers 2)");
  auto typed = header({{"bert.embeddings.word_embeddings.weight", {100, 8}},
                       {"bert.encoder.layer.0.intermediate.dense.weight", {16, 8}}});
  typed[1].dtype = io::SafeDtype::kF16;
  EXPECT_EQ(refusal(typed), "w: tensor 'bert.encoder.layer.0.intermediate.dense.weight' has dtype F16 but c says "
                            "'dtype' F32");
  typed[1].dtype = io::SafeDtype::kI64;
  EXPECT_EQ(refusal(typed), "w: tensor 'bert.encoder.layer.0.intermediate.dense.weight' has dtype I64; expected "
                            "floating-point weights");
  typed[1].dtype = io::SafeDtype::kF8E4M3;
  EXPECT_EQ(refusal(typed), "w: tensor 'bert.encoder.layer.0.intermediate.dense.weight' has dtype F8_E4M3, which "
                            "cabert cannot read (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
}

}  // namespace
}  // namespace cabert::interop
