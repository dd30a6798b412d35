#include "lib/eval/control_score.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/tasks/task_inputs.h"

namespace cabert::eval {
namespace {

tasks::TaskDefinition definition(const std::string& name) {
  tasks::TaskDefinition out;
  EXPECT_TRUE(tasks::known_task(name, &out)) << name;
  return out;
}

// A split of labelled examples "label" one per line, named `metrics_task` in the records.
tasks::TaskSplit split(const std::string& metrics_task, const std::vector<std::string>& labels) {
  tasks::TaskSplit out;
  out.path = metrics_task + ".tsv";
  out.metrics_task = metrics_task;
  for (size_t i = 0; i < labels.size(); ++i) {
    out.data.examples.push_back({std::to_string(i), "a sentence", "", labels[i], i + 1});
  }
  return out;
}

std::vector<std::string> repeated(std::vector<std::pair<std::string, int>> runs) {
  std::vector<std::string> out;
  for (const auto& [label, count] : runs) out.insert(out.end(), count, label);
  return out;
}

TEST(ControlScore, MajorityClassTakesTheMostFrequentAndTheLowestOnTies) {
  EXPECT_EQ(majority_class({0, 1, 1, 2, 1, 0}), 1);
  EXPECT_EQ(majority_class({2, 0, 2, 0}), 0);  // 2 each: the lowest index
  EXPECT_EQ(majority_class({3}), 3);
  EXPECT_EQ(majority_class({}), -1);
}

// MRPC's control is the all-positive prediction when "1" is the training majority: on a dev set of 7 positives and
// 3 negatives, accuracy 7/10, F1 = 2*7 / (2*7 + 3 false positives + 0 false negatives) = 14/17, score their mean.
TEST(ControlScore, MrpcAllPositiveIsTheMeanOfF1AndAccuracy) {
  const auto train = split("MRPC", repeated({{"1", 6}, {"0", 4}}));
  const auto dev = split("MRPC", repeated({{"0", 3}, {"1", 7}}));
  ControlScore control = control_score(definition("MRPC"), train, 0, dev);
  ASSERT_TRUE(control.defined);
  EXPECT_NEAR(control.metrics.at("accuracy"), 0.7, 1e-12);
  EXPECT_NEAR(control.metrics.at("f1"), 14.0 / 17, 1e-12);
  EXPECT_NEAR(control.score, 100 * (0.7 + 14.0 / 17) / 2, 1e-9);
  EXPECT_EQ(control.rule, "the majority training label '1' (6 of 10) everywhere");
  // GLUE's MRPC dev set (279 of 408 paraphrases): 74.8, the figure of the committed chang2021 table.
  const auto glue_dev = split("MRPC", repeated({{"1", 279}, {"0", 129}}));
  EXPECT_NEAR(control_score(definition("MRPC"), train, 0, glue_dev).score,
              100 * (279.0 / 408 + 2.0 * 279 / (2.0 * 279 + 129)) / 2, 1e-9);
}

TEST(ControlScore, AccuracyOfTheTrainingMajorityNotTheDevMajority) {
  // Training majority "0" (3 of 5); dev holds 1 zero in 4, so the control is 25, below the dev majority's 75.
  const auto train = split("SST-2", {"0", "1", "0", "0", "1"});
  const auto dev = split("SST-2", {"1", "1", "0", "1"});
  ControlScore control = control_score(definition("SST-2"), train, 0, dev);
  EXPECT_NEAR(control.score, 25.0, 1e-9);
  // --max-train-examples 2 on a training set whose first two are "1": the majority of those two is "1" (75), of
  // all five "0" (3 of 5; 25).
  const auto ones_first = split("SST-2", {"1", "1", "0", "0", "0"});
  EXPECT_NEAR(control_score(definition("SST-2"), ones_first, 2, dev).score, 75.0, 1e-9);
  EXPECT_NEAR(control_score(definition("SST-2"), ones_first, 0, dev).score, 25.0, 1e-9);
}

TEST(ControlScore, ColaMccOfAConstantIsZero) {
  const auto train = split("CoLA", repeated({{"1", 7}, {"0", 3}}));
  const auto dev = split("CoLA", repeated({{"1", 5}, {"0", 5}}));
  ControlScore control = control_score(definition("CoLA"), train, 0, dev);
  ASSERT_TRUE(control.defined);
  EXPECT_EQ(control.score, 0.0);
  EXPECT_NEAR(control.metrics.at("accuracy"), 0.5, 1e-12);
}

TEST(ControlScore, RegressionConstantScoresZero) {
  const auto train = split("STS-B", {"1.0", "2.0", "4.5"});
  const auto dev = split("STS-B", {"0.5", "3.0", "5.0", "2.2"});
  ControlScore control = control_score(definition("STS-B"), train, 0, dev);
  ASSERT_TRUE(control.defined);
  EXPECT_EQ(control.score, 0.0);
  EXPECT_EQ(control.metrics.at("pearson"), 0.0);
  EXPECT_EQ(control.metrics.at("spearman"), 0.0);
  EXPECT_NE(control.rule.find("the training mean 2.5 everywhere"), std::string::npos) << control.rule;
}

TEST(ControlScore, SquadNoAnswerScoresTheShareOfUnanswerableQuestions) {
  tasks::TaskSplit dev;
  dev.metrics_task = "SQuAD2.0";
  for (int q = 0; q < 5; ++q) {
    tasks::SquadQuestion question;
    question.id = std::to_string(q);
    if (q < 3) question.answers.push_back({"an answer", 0});
    question.is_impossible = q >= 3;
    dev.squad.questions.push_back(question);
  }
  ControlScore control = control_score(definition("squad2.0"), tasks::TaskSplit{}, 0, dev);
  ASSERT_TRUE(control.defined);
  EXPECT_NEAR(control.score, 40.0, 1e-9);  // 2 unanswerable of 5, each right with no answer
}

TEST(ControlScore, UnlabelledDevHasNone) {
  auto dev = split("SST-2", {"", ""});
  dev.labeled = false;
  EXPECT_FALSE(control_score(definition("SST-2"), split("SST-2", {"1"}), 0, dev).defined);
}

}  // namespace
}  // namespace cabert::eval
