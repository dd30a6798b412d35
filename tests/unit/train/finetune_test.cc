#include <gtest/gtest.h>

#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/eval/predict_split.h"
#include "lib/models/task_model.h"
#include "lib/tasks/task_inputs.h"
#include "lib/train/finetune.h"
#include "lib/train/losses.h"

namespace cabert::train {
namespace {

using eval::classification_metrics;
using eval::regression_metrics;
using models::TaskModel;
using tasks::TaskKind;

TEST(FinetuneDefaults, ChangTable5) {
  auto sst = task_defaults("SST-2", 256);
  EXPECT_DOUBLE_EQ(sst.lr, 3e-4);
  EXPECT_EQ(sst.batch_size, 32);
  EXPECT_EQ(sst.epochs, 3);
  auto mnli = task_defaults("MNLI", 256);
  EXPECT_EQ(mnli.batch_size, 128);
  EXPECT_EQ(mnli.epochs, 4);
  EXPECT_EQ(task_defaults("QQP", 256).batch_size, 128);
  EXPECT_EQ(task_defaults("RTE", 256).epochs, 10);
  EXPECT_EQ(task_defaults("STS-B", 256).epochs, 10);
  EXPECT_DOUBLE_EQ(task_defaults("QNLI", 256).lr, 1e-4);
  EXPECT_DOUBLE_EQ(task_defaults("CoLA", 768).lr, 1e-4);  // base size
  EXPECT_EQ(task_defaults("SQuAD1.1", 256).epochs, 2);
}

TEST(FinetuneDefinition, JsonRoundTripKeepsLabelsAndColumns) {
  tasks::TaskDefinition definition;
  definition.name = "news";
  definition.kind = TaskKind::kClassification;
  definition.labels = {"World", "Sports", "Business, Finance", "Sci/Tech"};
  definition.pair = true;
  definition.metrics = {"accuracy", "macro_f1"};
  tasks::TaskSource source;
  source.table.text_column = "title";
  source.table.text_pair_column = "body";
  source.table.label_column = "class";
  source.table.header = false;
  tasks::TaskSource restored_source;
  tasks::TaskDefinition restored =
      tasks::definition_from_json(tasks::definition_to_json(definition, source), &restored_source);
  EXPECT_EQ(restored.name, "news");
  EXPECT_EQ(restored.labels, definition.labels);
  EXPECT_TRUE(restored.pair);
  EXPECT_EQ(restored.metrics, definition.metrics);
  EXPECT_EQ(restored_source.table.text_pair_column, "body");
  EXPECT_EQ(restored_source.table.label_column, "class");
  EXPECT_FALSE(restored_source.table.header);
  EXPECT_THROW(tasks::definition_from_json("{\"name\": 1}", nullptr), DataError);
}

TEST(FinetuneMetrics, OnlyTheTasksMetrics) {
  tasks::TaskDefinition cola;
  ASSERT_TRUE(tasks::known_task("CoLA", &cola));
  auto metrics = classification_metrics(cola, {1, 1, 0, 0}, {1, 0, 0, 1});
  EXPECT_DOUBLE_EQ(metrics.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(metrics.at("mcc"), 0.0);
  EXPECT_EQ(metrics.count("f1"), 0u);
  tasks::TaskDefinition mrpc;
  ASSERT_TRUE(tasks::known_task("MRPC", &mrpc));
  metrics = classification_metrics(mrpc, {1, 1, 0, 0}, {1, 0, 0, 1});
  EXPECT_DOUBLE_EQ(metrics.at("f1"), 0.5);
}

// The three files `evaluate --predictions` writes, byte for byte.
TEST(FinetunePredictions, FilesAreTheOfficialFormats) {
  tasks::TaskDefinition sst;
  ASSERT_TRUE(tasks::known_task("SST-2", &sst));
  eval::SplitPredictions dev;
  dev.ids = {"0", "1"};
  dev.predictions = {"1", "0"};
  dev.golds = {"1", "1"};
  dev.scores = {{0.25f, 0.75f}, {0.875f, 0.125f}};
  EXPECT_EQ(eval::predictions_file_text(dev, sst),
            "id\tprediction\tgold\tscores\n0\t1\t1\t0.2500,0.7500\n1\t0\t1\t0.8750,0.1250\n");
  eval::SplitPredictions test = dev;  // GLUE's submission files: index and label only
  test.labeled = false;
  EXPECT_EQ(eval::predictions_file_text(test, sst), "index\tprediction\n0\t1\n1\t0\n");
  tasks::TaskDefinition squad;
  ASSERT_TRUE(tasks::known_task("SQuAD1.1", &squad));
  eval::SplitPredictions answers;
  answers.ids = {"q2", "q1"};  // in the order of the questions, as the official scripts' {id: answer}
  answers.predictions = {"the \"Queen\"", ""};
  EXPECT_EQ(eval::predictions_file_text(answers, squad), "{\n  \"q2\": \"the \\\"Queen\\\"\",\n  \"q1\": \"\"\n}\n");
}

pb::ModelConfig tiny_config() {
  pb::ModelConfig config = config::preset_config("bert-tiny-composite");
  config.set_vocab_size(50);
  return config;
}

TEST(FinetuneModel, HeadsHaveTheRightShapesAndPaddingDoesNotChangeOutputs) {
  torch::manual_seed(0);
  torch::Tensor ids = torch::tensor({{2, 10, 11, 12, 3, 0, 0}, {2, 13, 3, 14, 15, 16, 3}}, torch::kInt64);
  torch::Tensor segments = torch::tensor({{0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1, 1}}, torch::kInt64);
  torch::Tensor mask = ids != 0;
  mask[1] = torch::ones({7}, torch::kBool);
  for (TaskKind kind : {TaskKind::kClassification, TaskKind::kRegression, TaskKind::kSpan}) {
    TaskModel model(tiny_config(), kind, 3);
    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor batched = model->forward(ids, segments, mask);
    // The first row alone, without its padding, gives the same output.
    torch::Tensor alone = model->forward(ids.slice(0, 0, 1).slice(1, 0, 5), segments.slice(0, 0, 1).slice(1, 0, 5),
                                         mask.slice(0, 0, 1).slice(1, 0, 5));
    if (kind == TaskKind::kClassification) {
      EXPECT_EQ(batched.sizes(), (std::vector<int64_t>{2, 3}));
      EXPECT_TRUE(torch::allclose(batched[0], alone[0], 1e-5, 1e-5));
    } else if (kind == TaskKind::kRegression) {
      EXPECT_EQ(batched.sizes(), (std::vector<int64_t>{2}));
      EXPECT_TRUE(torch::allclose(batched[0], alone[0], 1e-5, 1e-5));
    } else {
      EXPECT_EQ(batched.sizes(), (std::vector<int64_t>{2, 7, 2}));
      EXPECT_TRUE(torch::allclose(batched[0].slice(0, 0, 5), alone[0], 1e-5, 1e-5));
      EXPECT_LE(batched[0][5][0].item<float>(), -1e3);  // padding is never a start or end
    }
  }
}

TEST(FinetuneModel, LossesMatchTheirDefinitions) {
  torch::Tensor logits = torch::tensor({{2.0, 0.0}, {0.0, 1.0}});
  torch::Tensor labels = torch::tensor({0, 0}, torch::kInt64);
  double expected = (-std::log(std::exp(2.0) / (std::exp(2.0) + 1)) - std::log(1 / (1 + std::exp(1.0)))) / 2;
  EXPECT_NEAR(task_loss(TaskKind::kClassification, logits, labels).item<double>(), expected, 1e-6);
  EXPECT_NEAR(task_loss(TaskKind::kRegression, torch::tensor({1.0f, 3.0f}), torch::tensor({2.0f, 3.0f})).item<double>(),
              0.5, 1e-6);
  // Span: [B=1, T=2, 2]; start target 1, end target 0: mean of the two cross-entropies.
  torch::Tensor span = torch::tensor({{{0.0, 1.0}, {1.0, 0.0}}});
  torch::Tensor targets = torch::tensor({{1, 0}}, torch::kInt64);
  double ce = -std::log(std::exp(1.0) / (std::exp(1.0) + 1));
  EXPECT_NEAR(task_loss(TaskKind::kSpan, span, targets).item<double>(), ce, 1e-6);
}

TEST(FinetuneModel, MeanPoolingAveragesTheNonPaddingPositionsOfTheLastLayer) {
  torch::manual_seed(0);
  torch::Tensor ids = torch::tensor({{2, 10, 11, 3, 0, 0}, {2, 13, 3, 14, 15, 3}}, torch::kInt64);
  torch::Tensor segments = torch::zeros_like(ids);
  torch::Tensor mask = ids != 0;
  TaskModel model(tiny_config(), TaskKind::kClassification, 3, models::Pooling::kMean);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor hidden = model->encoder->forward(ids, segments, mask);
  // By hand: row 0 averages its 4 tokens, row 1 all 6.
  torch::Tensor pooled = torch::stack({hidden[0].slice(0, 0, 4).mean(0), hidden[1].mean(0)});
  EXPECT_TRUE(torch::allclose(model->forward(ids, segments, mask), model->head->forward(pooled), 1e-5, 1e-6));
  // [CLS] pooling of the same weights differs: the option is not ignored.
  TaskModel cls(tiny_config(), TaskKind::kClassification, 3, models::Pooling::kCls);
  cls->encoder = model->encoder;
  cls->head = model->head;
  EXPECT_TRUE(
      torch::allclose(cls->forward(ids, segments, mask), model->head->forward(hidden.select(1, 0)), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(cls->forward(ids, segments, mask), model->forward(ids, segments, mask), 1e-3, 1e-3));
  EXPECT_EQ(models::parse_pooling("mean"), models::Pooling::kMean);
  EXPECT_STREQ(models::pooling_name(models::Pooling::kCls), "cls");
  EXPECT_THROW(models::parse_pooling("max"), UsageError);
}

TEST(FinetuneModel, EncoderTensorsAreNamedLikeThePretrainingModels) {
  TaskModel model(tiny_config(), TaskKind::kClassification, 2);
  bool encoder = false, head = false;
  for (const auto& item : model->named_parameters()) {
    encoder |= item.key().rfind("encoder.embeddings.", 0) == 0;
    head |= item.key().rfind("head.", 0) == 0;
  }
  EXPECT_TRUE(encoder);
  EXPECT_TRUE(head);
}

}  // namespace
}  // namespace cabert::train
