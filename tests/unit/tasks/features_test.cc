#include "lib/tasks/features.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "lib/core/errors.h"
#include "lib/tasks/squad_features.h"
#include "lib/tasks/table.h"
#include "lib/tasks/task_definition.h"
#include "lib/tasks/task_inputs.h"
#include "tests/test_paths.h"

namespace cabert::tasks {
namespace {

using text::SpecialTokens;

TEST(TaskFeatures, PairTruncationIsLongestFirst) {
  // Budget 10 - 3 = 7 tokens for a (6) + b (3): drop from a until 4 + 3.
  Sequence s = encode_pair({10, 11, 12, 13, 14, 15}, {20, 21, 22}, 10, true);
  EXPECT_EQ(s.ids, (std::vector<int64_t>{SpecialTokens::kCls, 10, 11, 12, 13, SpecialTokens::kSep, 20, 21, 22,
                                         SpecialTokens::kSep}));
  EXPECT_EQ(s.segments, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(s.truncated, 2u);
  // Equal lengths: alternate, a first on ties -> 3 + 3 from 5 + 5 with budget 6 (9 - 3).
  Sequence even = encode_pair({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, 9, true);
  EXPECT_EQ(even.ids, (std::vector<int64_t>{2, 1, 2, 3, 3, 6, 7, 8, 3}));
  // Single sentence: [CLS] a [SEP], b ignored.
  Sequence single = encode_pair({7, 8, 9}, {}, 4, false);
  EXPECT_EQ(single.ids, (std::vector<int64_t>{2, 7, 8, 3}));
  EXPECT_EQ(single.segments, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_THROW(encode_pair({1}, {2}, 4, true), UsageError);
}

TEST(TaskFeatures, LabelMapRefusesUnknownLabelsNamingFileAndLine) {
  LabelMap labels({"entailment", "not_entailment"});
  EXPECT_EQ(labels.index("not_entailment", "f.tsv", 3), 1);
  try {
    labels.index("neutral", "dev.tsv", 17);
    FAIL() << "expected DataError";
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()), "dev.tsv:17: expected a label in {entailment, not_entailment}, got 'neutral'");
  }
  EXPECT_THROW(parse_regression_label("4.x", "f", 1), DataError);
  EXPECT_FLOAT_EQ(parse_regression_label("3.800", "f", 1), 3.8f);
}

TEST(TaskFeatures, KnownTasksAndGenericLabelOrder) {
  TaskDefinition task;
  ASSERT_TRUE(known_task("sts-b", &task));
  EXPECT_EQ(task.name, "STS-B");
  EXPECT_EQ(task.kind, TaskKind::kRegression);
  ASSERT_TRUE(known_task("SQuAD2.0", &task));
  EXPECT_TRUE(task.squad_v2);
  EXPECT_EQ(task.kind, TaskKind::kSpan);
  EXPECT_FALSE(known_task("imdb", &task));
  tasks::TaskData train;
  train.path = "train.csv";
  for (const char* label : {"10", "2", "1", "2"}) train.examples.push_back({"", "x", "", label, 1});
  TaskDefinition generic = generic_task("trec", TaskKind::kClassification, false, {}, &train);
  EXPECT_EQ(generic.labels, (std::vector<std::string>{"1", "2", "10"}));  // numeric order
  tasks::TaskData one_label = train;
  for (auto& example : one_label.examples) example.label = "pos";
  EXPECT_THROW(generic_task("x", TaskKind::kClassification, false, {}, &one_label), DataError);
}

TEST(TaskFeatures, ClassificationFeaturesAndBatches) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  TaskDefinition task;
  ASSERT_TRUE(known_task("RTE", &task));
  tasks::TaskData data;
  data.path = "dev.tsv";
  data.examples = {{"0", "alice was beginning to get very tired", "alice was tired", "entailment", 2},
                   {"1", "the rabbit", "the queen of hearts shouted", "not_entailment", 3}};
  auto features = classification_features(data, task, tokenizer, 64);
  ASSERT_EQ(features.size(), 2u);
  EXPECT_EQ(features[0].label, 0);
  EXPECT_EQ(features[1].label, 1);
  std::vector<int> a = tokenizer.encode("alice was beginning to get very tired");
  EXPECT_EQ(features[0].sequence.ids[1], a[0]);
  Batch batch = collate(features, {1, 0}, TaskKind::kClassification);
  int64_t longest = std::max(features[0].sequence.ids.size(), features[1].sequence.ids.size());
  EXPECT_EQ(batch.ids.sizes(), (std::vector<int64_t>{2, longest}));
  EXPECT_EQ(batch.labels[0].item<int64_t>(), 1);
  EXPECT_EQ(batch.mask[1].sum().item<int64_t>(), static_cast<int64_t>(features[0].sequence.ids.size()));
  EXPECT_EQ(batch.ids[1][longest - 1].item<int64_t>(),
            features[0].sequence.ids.size() == size_t(longest) ? SpecialTokens::kSep : SpecialTokens::kPad);
  data.examples[1].label = "contradiction";
  EXPECT_THROW(classification_features(data, task, tokenizer, 64), DataError);
}

TEST(SquadFeatures, OffsetsCoverTheWordsTheyCameFrom) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  std::string text = "  The  Queen's croquet-ground, 1865!\tAlice";
  auto tokens = tokenize_with_offsets(text, tokenizer);
  ASSERT_FALSE(tokens.empty());
  std::string covered;
  size_t previous_end = 0;
  for (const auto& token : tokens) {
    EXPECT_LE(token.byte_begin, token.byte_end);
    EXPECT_GE(token.byte_begin, previous_end > 0 && token.byte_begin < previous_end ? token.byte_begin : 0u);
    if (token.byte_end > token.byte_begin && token.byte_begin >= previous_end) {
      covered += text.substr(token.byte_begin, token.byte_end - token.byte_begin) + "|";
      previous_end = token.byte_end;
    }
  }
  // Every non-space byte is covered exactly once, in order.
  std::string joined;
  for (char c : covered)
    if (c != '|') joined += c;
  EXPECT_EQ(joined, "TheQueen'scroquet-ground,1865!Alice");
  // Token ids equal encoding the words one by one.
  std::vector<int> expected;
  for (const char* word : {"The", "Queen's", "croquet-ground,", "1865!", "Alice"}) {
    auto ids = tokenizer.encode(word);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  std::vector<int> got;
  for (const auto& token : tokens) got.push_back(token.id);
  EXPECT_EQ(got, expected);
}

tasks::SquadData long_context_question(bool impossible) {
  tasks::SquadData data;
  data.version = impossible ? "v2.0" : "1.1";
  std::string context;
  for (int i = 0; i < 12; ++i) context += "alice sat by her sister on the bank and had nothing to do . ";
  size_t answer_byte = context.size();
  context += "the white rabbit ran close by her . ";
  for (int i = 0; i < 6; ++i) context += "the queen shouted off with her head . ";
  data.contexts = {context};
  tasks::SquadQuestion question;
  question.id = "q0";
  question.question = "who ran close by her?";
  question.context_index = 0;
  question.is_impossible = impossible;
  if (!impossible) question.answers = {{"white rabbit", 0, answer_byte + 4}};
  data.questions = {question};
  return data;
}

TEST(SquadFeatures, WindowsWithStrideCoverTheContextAndLocateTheAnswer) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  tasks::SquadData data = long_context_question(false);
  SquadOptions options;
  options.max_length = 48;
  options.doc_stride = 16;
  SquadFeatures features = squad_features(data, tokenizer, options);
  const auto& tokens = features.context_tokens[0];
  ASSERT_GT(tokens.size(), 48u);
  ASSERT_GT(features.windows.size(), 2u);
  // Consecutive windows start doc_stride tokens apart; the last one reaches the end; each token has exactly
  // one max-context window.
  std::vector<int> owners(tokens.size(), 0);
  int answered = 0;
  for (size_t w = 0; w < features.windows.size(); ++w) {
    const SquadWindow& window = features.windows[w];
    EXPECT_LE(window.sequence.ids.size(), 48u);
    EXPECT_EQ(window.first_token, static_cast<int>(w) * 16);
    EXPECT_EQ(window.sequence.ids[window.context_offset - 1], SpecialTokens::kSep);
    EXPECT_EQ(window.sequence.segments[window.context_offset], 1);
    for (int t = 0; t < window.token_count; ++t) {
      EXPECT_EQ(window.sequence.ids[window.context_offset + t], tokens[window.first_token + t].id);
      owners[window.first_token + t] += window.max_context[t];
    }
    if (window.start_position > 0) {
      ++answered;
      const auto& first = tokens[window.first_token + window.start_position - window.context_offset];
      const auto& last = tokens[window.first_token + window.end_position - window.context_offset];
      EXPECT_EQ(data.contexts[0].substr(first.byte_begin, last.byte_end - first.byte_begin), "white rabbit");
    } else {
      EXPECT_EQ(window.end_position, 0);
    }
  }
  EXPECT_EQ(features.windows.back().first_token + features.windows.back().token_count, static_cast<int>(tokens.size()));
  for (int count : owners) EXPECT_EQ(count, 1);
  EXPECT_GE(answered, 1);

  // Logits peaking at the labelled positions decode to the answer text.
  std::vector<std::vector<float>> starts, ends;
  for (const auto& window : features.windows) {
    std::vector<float> s(window.sequence.ids.size(), 0.f), e(window.sequence.ids.size(), 0.f);
    if (window.start_position > 0) {
      s[window.start_position] = 5;
      e[window.end_position] = 5;
    }
    starts.push_back(s);
    ends.push_back(e);
  }
  auto predictions = decode_squad(data, features, starts, ends, options, false);
  ASSERT_EQ(predictions.size(), 1u);
  EXPECT_EQ(predictions[0].text, "white rabbit");
  // An end before the start or a span longer than max_answer_length is never chosen.
  options.max_answer_length = 1;
  predictions = decode_squad(data, features, starts, ends, options, false);
  EXPECT_NE(predictions[0].text, "white rabbit");
}

TEST(SquadFeatures, VersionTwoNullThreshold) {
  text::Tokenizer tokenizer(testing::alice_tokenizer());
  tasks::SquadData data = long_context_question(true);
  SquadOptions options;
  options.max_length = 64;
  SquadFeatures features = squad_features(data, tokenizer, options);
  std::vector<std::vector<float>> starts, ends;
  for (const auto& window : features.windows) {
    EXPECT_EQ(window.start_position, 0);  // unanswerable: [CLS]
    std::vector<float> s(window.sequence.ids.size(), 0.f), e(window.sequence.ids.size(), 0.f);
    s[0] = 3;
    e[0] = 3;  // null score 6
    s[window.context_offset] = 2;
    e[window.context_offset] = 2;  // best span 4
    starts.push_back(s);
    ends.push_back(e);
  }
  auto predictions = decode_squad(data, features, starts, ends, options, true);
  EXPECT_EQ(predictions[0].text, "");
  EXPECT_DOUBLE_EQ(predictions[0].null_score, 6);
  options.null_threshold = 2.5;  // 6 - 4 = 2 <= 2.5: answer
  predictions = decode_squad(data, features, starts, ends, options, true);
  EXPECT_FALSE(predictions[0].text.empty());
}

}  // namespace
}  // namespace cabert::tasks
