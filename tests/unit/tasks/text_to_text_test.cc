// Classification as text-to-text: the default and overridden verbalisers (T5's GLUE label texts), the errors
// that name what was expected, the T5-style input, the encoded examples, and the matching of generated
// outputs back to labels (an output matching no label text is counted wrong and reported).
#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/eval/text_to_text.h"
#include "lib/tasks/task_inputs.h"
#include "lib/tasks/text_to_text.h"
#include "lib/text/tokenizer.h"
#include "tests/test_paths.h"

namespace cabert::tasks {
namespace {

TaskDefinition glue(const std::string& name) {
  TaskDefinition definition;
  EXPECT_TRUE(known_task(name, &definition)) << name;
  return definition;
}

TaskDefinition generic(std::vector<std::string> labels) {
  TaskDefinition definition;
  definition.name = "TREC";
  definition.labels = std::move(labels);
  definition.metrics = {"accuracy", "macro_f1"};
  return definition;
}

text::Tokenizer tokenizer() {
  return text::Tokenizer(testing::source_dir() + "/tests/data/legacy_checkpoints/tok.model");  // lower-cases
}

TEST(Verbalizer, GlueDefaultsAreT5sLabelTexts) {
  EXPECT_EQ(make_verbalizer(glue("SST-2"), {}).texts, (std::vector<std::string>{"negative", "positive"}));
  EXPECT_EQ(make_verbalizer(glue("CoLA"), {}).texts, (std::vector<std::string>{"unacceptable", "acceptable"}));
  EXPECT_EQ(make_verbalizer(glue("MRPC"), {}).texts, (std::vector<std::string>{"not_equivalent", "equivalent"}));
  EXPECT_EQ(make_verbalizer(glue("RTE"), {}).texts, (std::vector<std::string>{"entailment", "not_entailment"}));
  EXPECT_EQ(make_verbalizer(glue("MNLI"), {}).texts,
            (std::vector<std::string>{"contradiction", "entailment", "neutral"}));
  // Generic tasks: the label strings themselves.
  EXPECT_EQ(make_verbalizer(generic({"DESC", "HUM"}), {}).texts, (std::vector<std::string>{"DESC", "HUM"}));
}

TEST(Verbalizer, OverridesAndTheirErrors) {
  EXPECT_EQ(make_verbalizer(glue("SST-2"), {"1=great", "0=awful"}).texts, (std::vector<std::string>{"awful", "great"}));
  EXPECT_EQ(make_verbalizer(generic({"DESC", "HUM"}), {"HUM=a person"}).texts,
            (std::vector<std::string>{"DESC", "a person"}));
  EXPECT_EQ(testing::usage_error_message([] { make_verbalizer(glue("SST-2"), {"positive"}); }),
            "--label-text: expected LABEL=TEXT, got 'positive'");
  EXPECT_EQ(testing::usage_error_message([] { make_verbalizer(glue("SST-2"), {"2=meh"}); }),
            "--label-text 2=meh: expected one of the labels of SST-2 (0, 1), got '2'");
  EXPECT_EQ(testing::usage_error_message([] { make_verbalizer(glue("SST-2"), {"1= "}); }),
            "--label-text 1= : expected a non-empty text");
  EXPECT_EQ(testing::usage_error_message([] { make_verbalizer(glue("SST-2"), {"1=negative"}); }),
            "SST-2: expected a different text for every label, got 'negative' twice (--label-text)");
  EXPECT_EQ(testing::usage_error_message([] { make_verbalizer(glue("STS-B"), {}); }),
            "STS-B is a regression task; an encoder-decoder fine-tunes classification tasks as text-to-text only");
}

TEST(Verbalizer, JsonRoundTrip) {
  Verbalizer verbalizer{{"not \"this\"", "that\tone"}};
  EXPECT_EQ(verbalizer_from_json(verbalizer_to_json(verbalizer)).texts, verbalizer.texts);
  EXPECT_THROW(verbalizer_from_json("{\"a\": 1}"), DataError);
}

TEST(TextToTextInput, T5StyleTaskPrefixAndFields) {
  TaskExample example{"7", "a fine film", "", "1", 3};
  EXPECT_EQ(text_to_text_input(glue("SST-2"), example), "sst2 sentence: a fine film");
  TaskExample pair{"8", "He left.", "He is gone.", "1", 4};
  EXPECT_EQ(text_to_text_input(glue("MRPC"), pair), "mrpc sentence1: He left. sentence2: He is gone.");
}

TEST(TextToTextExamples, SourcesEndWithEosTargetsAreTheLabelTexts) {
  text::Tokenizer tok = tokenizer();
  TaskData data;
  data.path = "train.tsv";
  data.examples = {{"1", "the cat sat on the mat", "", "0", 2}, {"2", "alice was tired", "", "1", 3}};
  Verbalizer verbalizer = make_verbalizer(glue("SST-2"), {});
  TextToTextStats stats;
  auto examples = text_to_text_examples(data, glue("SST-2"), verbalizer, tok, 6, &stats);
  ASSERT_EQ(examples.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_LE(examples[i].source.size(), 6u);
    EXPECT_EQ(examples[i].source.back(), text::SpecialTokens::kSep);
  }
  std::vector<int> negative = tok.encode("negative"), positive = tok.encode("positive");
  EXPECT_EQ(std::vector<int>(examples[0].target.begin(), examples[0].target.end()), negative);
  EXPECT_EQ(std::vector<int>(examples[1].target.begin(), examples[1].target.end()), positive);
  EXPECT_EQ(stats.examples, 2u);
  EXPECT_EQ(stats.truncated_examples, 2u);  // "sst2 sentence: ..." is longer than 5 pieces
  // A label outside the task's set names the file and line.
  data.examples[1].label = "5";
  std::string message =
      testing::data_error_message([&] { text_to_text_examples(data, glue("SST-2"), verbalizer, tok, 64); });
  EXPECT_EQ(message, "train.tsv:3: expected a label in {0, 1}, got '5'");
}

// --target-sentinel-prefix: the first sentinel starts every target, and decodes to no text, so the generated
// "<extra_id_0> positive" still reads as the label text.
TEST(TextToTextExamples, ASentinelPrefixStartsEveryTargetAndDecodesToNothing) {
  text::Tokenizer tok = tokenizer();
  ASSERT_GT(tok.num_sentinels(), 0);
  TaskData data;
  data.path = "train.tsv";
  data.examples = {{"1", "the cat sat on the mat", "", "0", 2}, {"2", "alice was tired", "", "1", 3}};
  Verbalizer verbalizer = make_verbalizer(glue("SST-2"), {});
  const int sentinel = tok.sentinel_id(0);
  auto examples = text_to_text_examples(data, glue("SST-2"), verbalizer, tok, 64, nullptr, sentinel);
  std::vector<int> positive = tok.encode("positive");
  positive.insert(positive.begin(), sentinel);
  EXPECT_EQ(std::vector<int>(examples[1].target.begin(), examples[1].target.end()), positive);
  EXPECT_EQ(examples[0].target.front(), sentinel);
  eval::LabelMatcher matcher(verbalizer, tok);
  EXPECT_EQ(matcher.match(tok.decode(positive)), 1);
}

TEST(LabelMatcher, MatchesThroughTheTokenizersNormalisation) {
  text::Tokenizer tok = tokenizer();
  eval::LabelMatcher matcher(make_verbalizer(generic({"DESC", "HUM"}), {}), tok);
  // The tokenizer lower-cases, so the model can only ever write "desc": that is DESC.
  EXPECT_EQ(matcher.match("desc"), 0);
  EXPECT_EQ(matcher.match("  hum \n"), 1);
  EXPECT_EQ(matcher.match("hum desc"), -1);
  EXPECT_EQ(matcher.match(""), -1);
  EXPECT_GE(matcher.longest_target_tokens(), 1);
  // Two texts the tokenizer makes equal cannot be told apart.
  EXPECT_NE(testing::usage_error_message([&] {
              eval::LabelMatcher(Verbalizer{{"Yes", "yes"}}, tok);
            }).find("both become 'yes'"),
            std::string::npos);
}

TEST(ScoreGenerated, AnOutputMatchingNoLabelIsWrongAndReported) {
  text::Tokenizer tok = tokenizer();
  TaskDefinition sst2 = glue("SST-2");
  eval::LabelMatcher matcher(make_verbalizer(sst2, {}), tok);
  TaskSplit split;
  split.path = "dev.tsv";
  split.metrics_task = "SST-2";
  split.data.path = "dev.tsv";
  split.data.examples = {
      {"a", "x", "", "1", 2}, {"b", "x", "", "0", 3}, {"c", "x", "", "1", 4}, {"d", "x", "", "0", 5}};
  // Right, right, unmatched (gold 1), wrong.
  eval::SplitPredictions out =
      eval::score_generated(sst2, matcher, split, {"positive", "negative", "posit", "positive"});
  EXPECT_EQ(out.predictions, (std::vector<std::string>{"1", "0", "posit", "1"}));
  EXPECT_EQ(out.golds, (std::vector<std::string>{"1", "0", "1", "0"}));
  EXPECT_DOUBLE_EQ(out.metrics.at("accuracy"), 0.5);
  EXPECT_DOUBLE_EQ(out.metrics.at("unmatched"), 0.25);
  EXPECT_DOUBLE_EQ(out.score, 50.0);
  // MRPC's F1 of class 1: tp 1 (a), fp 1 (d), fn 1 (c, unmatched) -> 2/4; the unmatched output is not a
  // "0" that would be right for another gold.
  TaskDefinition mrpc = glue("MRPC");
  eval::LabelMatcher mrpc_matcher(make_verbalizer(mrpc, {}), tok);
  split.metrics_task = "MRPC";
  // (What the model writes is the tokenizer's form of a label text: this one has no piece for "_".)
  const auto& forms = mrpc_matcher.forms();
  out = eval::score_generated(mrpc, mrpc_matcher, split, {forms[1], forms[0], "maybe", forms[1]});
  EXPECT_DOUBLE_EQ(out.metrics.at("f1"), 0.5);
  EXPECT_DOUBLE_EQ(out.metrics.at("accuracy"), 0.5);
  EXPECT_THROW(eval::score_generated(sst2, matcher, split, {"positive"}), Error);
}

// A submission (an unlabelled file's predictions) holds only the task's labels: an unmatched output is refused,
// or written as --unmatched-label.
TEST(MostFrequentOutputs, CountsFirstThenTextAndTheRestCounted) {
  using eval::most_frequent_outputs;
  EXPECT_EQ(most_frequent_outputs({"b", "desc desc", "", "desc desc", "a", "", "desc desc", "c"}, 3),
            "\"desc desc\" x3, \"\" x2, \"a\" x1, and 2 other outputs");
  EXPECT_EQ(most_frequent_outputs({"x"}, 3), "\"x\" x1");
  EXPECT_EQ(most_frequent_outputs({}, 3), "");
}

TEST(SubmissionLabelsOnly, AnUnmatchedOutputIsRefusedOrWrittenAsTheGivenLabel) {
  TaskDefinition sst2 = glue("SST-2");
  eval::SplitPredictions submission;
  submission.ids = {"0", "1", "2", "3"};
  submission.predictions = {"1", "half comedy", "0", ""};
  eval::SplitPredictions refused = submission;
  EXPECT_EQ(testing::data_error_message([&] { eval::submission_labels_only(&refused, sst2, "", "test.tsv"); }),
            "test.tsv: 2 of 4 outputs match no label text (the first, row 1: \"half comedy\"), and a submission "
            "holds only the task's labels; none written. --unmatched-label LABEL writes such rows as LABEL");
  eval::submission_labels_only(&submission, sst2, "0", "test.tsv");
  EXPECT_EQ(submission.predictions, (std::vector<std::string>{"1", "0", "0", "0"}));
  EXPECT_EQ(submission.ids, (std::vector<std::string>{"0", "1", "2", "3"}));
  // All matched: nothing changes, with or without a label.
  eval::SplitPredictions matched;
  matched.ids = {"0", "1"};
  matched.predictions = {"1", "0"};
  eval::submission_labels_only(&matched, sst2, "", "test.tsv");
  EXPECT_EQ(matched.predictions, (std::vector<std::string>{"1", "0"}));
}

}  // namespace
}  // namespace cabert::tasks
