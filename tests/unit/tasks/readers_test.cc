#include <gtest/gtest.h>

#include <map>

#include "lib/core/errors.h"
#include "lib/tasks/glue.h"
#include "lib/tasks/squad.h"
#include "lib/tasks/table.h"
#include "lib/tasks/task_definition.h"
#include "lib/text/text_source.h"
#include "tests/test_paths.h"

namespace cabert::tasks {
namespace {

using cabert::testing::data_error_message;
using cabert::testing::temp_dir;
using cabert::testing::write_text;

std::map<std::string, int> label_counts(const TaskData& data) {
  std::map<std::string, int> counts;
  for (const auto& example : data.examples) ++counts[example.label];
  return counts;
}

// Row counts and label counts as documented in ../shared/data/SOURCES.md.
TEST(GlueReader, ReadsEveryDistributionFileAsItIs) {
  CABERT_REQUIRE_SHARED_DATA(shared);
  std::string glue = shared + "/glue";
  struct Case {
    std::string task, file;
    size_t rows;
    bool labeled;
  };
  const Case cases[] = {
      {"CoLA", "train.tsv", 8551, true},   {"CoLA", "dev.tsv", 1043, true},   {"CoLA", "test.tsv", 1063, false},
      {"SST-2", "train.tsv", 67349, true}, {"SST-2", "dev.tsv", 872, true},   {"SST-2", "test.tsv", 1821, false},
      {"MRPC", "train.tsv", 3668, true},   {"MRPC", "dev.tsv", 408, true},    {"MRPC", "test.tsv", 1725, false},
      {"STS-B", "train.tsv", 5749, true},  {"STS-B", "dev.tsv", 1500, true},  {"STS-B", "test.tsv", 1379, false},
      {"RTE", "train.tsv", 2490, true},    {"RTE", "dev.tsv", 277, true},     {"RTE", "test.tsv", 3000, false},
      {"QNLI", "dev.tsv", 5463, true},     {"QNLI", "test.tsv", 5463, false}, {"WNLI", "dev.tsv", 71, true},
      {"WNLI", "train.tsv", 635, true},    {"WNLI", "test.tsv", 146, false},
  };
  for (const auto& c : cases) {
    TaskData data = read_glue(glue_task(c.task), glue + "/" + c.task + "/" + c.file);
    EXPECT_EQ(data.examples.size(), c.rows) << c.task << "/" << c.file;
    EXPECT_EQ(data.labeled, c.labeled) << c.task << "/" << c.file;
    EXPECT_EQ(data.skipped_rows, 0u);
    for (const auto& example : data.examples) {
      ASSERT_FALSE(example.text_a.empty()) << c.task << "/" << c.file << ":" << example.line;
      if (!glue_task(c.task).text_b.empty()) {
        ASSERT_FALSE(example.text_b.empty()) << c.task << ":" << example.line;
      }
    }
  }
  TaskData diagnostic = read_glue(glue_task("diagnostic"), glue + "/diagnostic/diagnostic.tsv");
  EXPECT_EQ(diagnostic.examples.size(), 1104u);
  EXPECT_FALSE(diagnostic.labeled);
}

TEST(GlueReader, LabelsAndTextsComeFromTheRightColumns) {
  CABERT_REQUIRE_SHARED_DATA(shared);
  std::string glue = shared + "/glue";
  EXPECT_EQ(label_counts(read_glue(glue_task("cola"), glue + "/CoLA/train.tsv")),
            (std::map<std::string, int>{{"0", 2528}, {"1", 6023}}));
  EXPECT_EQ(label_counts(read_glue(glue_task("sst2"), glue + "/SST-2/train.tsv")),
            (std::map<std::string, int>{{"0", 29780}, {"1", 37569}}));
  TaskData mrpc = read_glue(glue_task("MRPC"), glue + "/MRPC/train.tsv");  // header starts with a BOM
  EXPECT_EQ(label_counts(mrpc), (std::map<std::string, int>{{"0", 1194}, {"1", 2474}}));
  EXPECT_EQ(label_counts(read_glue(glue_task("RTE"), glue + "/RTE/train.tsv")),
            (std::map<std::string, int>{{"entailment", 1249}, {"not_entailment", 1241}}));
  TaskData cola_dev = read_glue(glue_task("CoLA"), glue + "/CoLA/dev.tsv");  // no final newline
  EXPECT_EQ(cola_dev.examples.front().text_a, "The sailors rode the breeze clear of the rocks.");
  TaskData stsb = read_glue(glue_task("STS-B"), glue + "/STS-B/dev.tsv");
  EXPECT_EQ(stsb.examples[0].text_a, "A man with a hard hat is dancing.");
  EXPECT_EQ(stsb.examples[0].text_b, "A man wearing a hard hat is dancing.");
  EXPECT_EQ(stsb.examples[0].label, "5.000");
  EXPECT_EQ(stsb.examples[0].id, "0");
  TaskData rte_test = read_glue(glue_task("RTE"), glue + "/RTE/test.tsv");
  EXPECT_EQ(rte_test.examples.back().id, "2999");
}

TEST(GlueReader, MalformedRowsNameFileLineAndProblem) {
  std::string dir = temp_dir();
  write_text(dir + "/short.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly one field\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("RTE"), dir + "/short.tsv"); }),
            dir + "/short.tsv:3: expected at least 4 tab-separated fields for RTE, got 2");
  // More fields than the header: the row's columns would be shifted (a piece of text read as the label).
  write_text(dir + "/long.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tc\tentailment\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("RTE"), dir + "/long.tsv"); }),
            dir + "/long.tsv:3: expected 4 tab-separated fields for RTE as the header has, got 5 (a tab inside a "
                  "text?)");
  write_text(dir + "/train.tsv", "gj04\t1\t\tA sentence.\ngj04\t0\t*\tA\tsentence.\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("CoLA"), dir + "/train.tsv"); }),
            dir + "/train.tsv:2: expected 4 tab-separated fields for CoLA (CoLA's source, label, mark, sentence), "
                  "got 5 (a tab inside a text?)");
  write_text(dir + "/label.tsv", "sentence\tlabel\ngood movie\t1\nbad movie\tpositive\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("SST-2"), dir + "/label.tsv"); }),
            dir + "/label.tsv:3: SST-2 label 'positive' is not one of {0, 1}");
  write_text(dir + "/score.tsv", "index\tsentence1\tsentence2\tscore\n0\ta\tb\t7.5\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("STS-B"), dir + "/score.tsv"); }),
            dir + "/score.tsv:2: STS-B label '7.5' is not a similarity score in [0, 5]");
  write_text(dir + "/columns.tsv", "id\ttext\tlabel\n0\thello\t1\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("QNLI"), dir + "/columns.tsv"); }),
            dir + "/columns.tsv:1: QNLI expects columns question, sentence (and label in labelled files); the "
                  "header has: id, text, label");
  ReadOptions skip;
  skip.skip_bad_rows = true;
  TaskData kept = read_glue(glue_task("SST-2"), dir + "/label.tsv", skip);
  EXPECT_EQ(kept.examples.size(), 1u);
  EXPECT_EQ(kept.skipped_rows, 1u);
}

TEST(GlueReader, UnknownTaskAndMissingSplitAreUsageErrors) {
  EXPECT_THROW(glue_task("SQuAD"), UsageError);
  EXPECT_EQ(glue_task("mnli-mm").name, "MNLI");
  EXPECT_EQ(glue_task("sts-b").name, "STS-B");
  EXPECT_THROW(glue_split_file(glue_task("MNLI"), temp_dir(), "dev"), UsageError);
}

TEST(SquadReader, ReadsXquadWithEveryAnswerCheckedAgainstItsContext) {
  CABERT_REQUIRE_SHARED_DATA(shared);
  SquadData data = read_squad(shared + "/squad/xquad/xquad.en.json");
  EXPECT_EQ(data.version, "1.1");
  EXPECT_EQ(data.contexts.size(), 240u);
  EXPECT_EQ(data.questions.size(), 1190u);
  for (const auto& question : data.questions) {
    ASSERT_FALSE(question.answers.empty());
    const auto& answer = question.answers[0];
    ASSERT_EQ(data.contexts[question.context_index].substr(answer.byte_start, answer.text.size()), answer.text);
  }
}

TEST(SquadReader, CountsCodePointsNotBytesAndReportsBadAnswers) {
  std::string dir = temp_dir();
  // "café" holds a 2-byte character: answer_start 5 (code points) is byte 6.
  write_text(dir + "/ok.json",
             R"({"version":"v2.0","data":[{"title":"T","paragraphs":[{"context":"café au lait","qas":[)"
             R"({"id":"q1","question":"what?","answers":[{"text":"au","answer_start":5}]},)"
             R"({"id":"q2","question":"none?","answers":[],"is_impossible":true}]}]}]})");
  SquadData data = read_squad(dir + "/ok.json");
  ASSERT_EQ(data.questions.size(), 2u);
  EXPECT_EQ(data.questions[0].answers[0].byte_start, 6u);
  EXPECT_TRUE(data.questions[1].is_impossible);
  write_text(dir + "/bad.json", R"({"data":[{"title":"T","paragraphs":[{"context":"abc def","qas":[)"
                                R"({"id":"q9","question":"?","answers":[{"text":"def","answer_start":3}]}]}]}]})");
  EXPECT_EQ(data_error_message([&] { read_squad(dir + "/bad.json"); }),
            dir + "/bad.json: data[0].paragraphs[0].qas[0] (id q9): answers[0]: answer_start 3 does not point at "
                  "\"def\" in the context");
  write_text(dir + "/broken.json", R"({"data": [ {"title": )");
  EXPECT_NE(data_error_message([&] { read_squad(dir + "/broken.json"); }).find("invalid JSON"), std::string::npos);
}

TEST(TableReader, CsvHonoursQuotesCommasAndMultiLineFields) {
  std::string path = temp_dir() + "/reviews.csv";
  write_text(path,
             "id,review,label\r\n1,\"great, really \"\"great\"\"\",pos\r\n2,\"two\nlines\",neg\r\n3,plain,pos\r\n");
  TableOptions table;
  table.text_column = "review";
  table.id_column = "id";
  TaskData data = read_table(path, table);
  ASSERT_EQ(data.examples.size(), 3u);
  EXPECT_EQ(data.examples[0].text_a, "great, really \"great\"");
  EXPECT_EQ(data.examples[1].text_a, "two\nlines");
  EXPECT_EQ(data.examples[1].label, "neg");
  EXPECT_EQ(data.examples[2].line, 5u);  // line numbers count the embedded newline
  EXPECT_EQ(data.examples[2].id, "3");
}

TEST(TableReader, TsvByIndexAndJsonlByKey) {
  std::string dir = temp_dir();
  write_text(dir + "/pairs.tsv", "q1\tq2\t1\nx\ty\t0\n");
  TableOptions tsv;
  tsv.format = TableFormat::kTsv;
  tsv.header = false;
  tsv.text_column = "0";
  tsv.text_pair_column = "1";
  tsv.label_column = "2";
  TaskData pairs = read_table(dir + "/pairs.tsv", tsv);
  ASSERT_EQ(pairs.examples.size(), 2u);
  EXPECT_EQ(pairs.examples[1].text_b, "y");
  EXPECT_EQ(pairs.examples[1].label, "0");
  write_text(dir + "/news.jsonl",
             "{\"text\": \"stocks rise\", \"label\": 2}\n\n{\"text\": \"team wins\", \"label\": 1}\n");
  TableOptions jsonl;
  jsonl.format = table_format_from_path(dir + "/news.jsonl");
  TaskData news = read_table(dir + "/news.jsonl", jsonl);
  ASSERT_EQ(news.examples.size(), 2u);
  EXPECT_EQ(news.examples[0].label, "2");
  EXPECT_EQ(news.examples[1].line, 3u);
}

TEST(TableReader, BadRowsNameFileLineAndProblem) {
  std::string dir = temp_dir();
  write_text(dir + "/x.jsonl", "{\"text\": \"a\", \"label\": 1}\n{\"txt\": \"b\", \"label\": 0}\n{oops\n");
  TableOptions jsonl;
  jsonl.format = TableFormat::kJsonl;
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/x.jsonl", jsonl); }),
            dir + "/x.jsonl:2: the object has no key \"text\"");
  ReadOptions skip;
  skip.skip_bad_rows = true;
  TaskData kept = read_table(dir + "/x.jsonl", jsonl, skip);
  EXPECT_EQ(kept.examples.size(), 1u);
  EXPECT_EQ(kept.skipped_rows, 2u);
  write_text(dir + "/x.csv", "text,label\n\"unterminated,1\n");
  TableOptions csv;
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/x.csv", csv); }),
            dir + "/x.csv:2: unterminated quoted field at the end of the file");
  TableOptions wrong;
  wrong.text_column = "sentence";
  write_text(dir + "/y.csv", "text,label\nhi,1\n");
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/y.csv", wrong); }),
            dir + "/y.csv:1: --text-column 'sentence' is not a column; the header has: text, label");
}

// A row with more fields than the header is shifted (a separator inside a text): refused, not read as text "good"
// with label "film".
TEST(TableReader, RowsWithMoreFieldsThanTheHeaderAreRefused) {
  std::string dir = temp_dir();
  write_text(dir + "/x.tsv", "text\tlabel\nfine\tpos\ngood\tfilm\tneg\n");
  TableOptions tsv;
  tsv.format = TableFormat::kTsv;
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/x.tsv", tsv); }),
            dir + "/x.tsv:3: expected 2 fields as the header has, got 3 (a tab inside a text?)");
  write_text(dir + "/x.csv", "text,label\nfine,pos\n\"good, really\",pos\ngood, really,pos\n");
  TableOptions csv;
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/x.csv", csv); }),
            dir + "/x.csv:4: expected 2 fields as the header has, got 3 (a comma inside an unquoted text?)");
  ReadOptions skip;
  skip.skip_bad_rows = true;
  TaskData kept = read_table(dir + "/x.csv", csv, skip);
  ASSERT_EQ(kept.examples.size(), 2u);
  EXPECT_EQ(kept.examples[1].text_a, "good, really");
  EXPECT_EQ(kept.skipped_rows, 1u);
}

// Hostile and broken task files (issue 15): each is refused with the file, the line (or the JSON path) and
// the problem, before a long run starts; none crashes or reads a huge line whole.
TEST(TableReader, ColumnOptionsAreValidated) {
  std::string dir = temp_dir();
  write_text(dir + "/plain.tsv", "a\tb\t1\nc\td\t0\n");
  TableOptions tsv;
  tsv.format = TableFormat::kTsv;
  tsv.header = false;
  tsv.text_column = "";
  EXPECT_EQ(testing::usage_error_message([&] { read_table(dir + "/plain.tsv", tsv); }),
            "--text-column: expected a column name or index, got an empty string");
  tsv.text_column = "0";
  tsv.label_column = "7";
  EXPECT_EQ(testing::usage_error_message([&] { read_table(dir + "/plain.tsv", tsv); }),
            "--label-column 7: " + dir + "/plain.tsv:1: the first row has 3 fields (indices 0 to 2)");
  tsv.label_column = "99999999999999999999";
  EXPECT_EQ(testing::usage_error_message([&] { read_table(dir + "/plain.tsv", tsv); }),
            "--label-column '99999999999999999999': a file without a header needs a 0-based column index (0 to "
            "1048576)");
  tsv.label_column = "2";
  tsv.text_pair_column = " ";
  EXPECT_EQ(testing::usage_error_message([&] { read_table(dir + "/plain.tsv", tsv); }),
            "--text-pair-column: expected a column name or index, got ' '");
}

TEST(TableReader, InvalidUtf8IsReportedWithFileLineAndColumn) {
  std::string dir = temp_dir();
  write_text(dir + "/bad.csv", "text,label\nfine,1\n\"caf\xe9\",0\n");
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/bad.csv", TableOptions{}); }),
            dir + "/bad.csv:3: invalid UTF-8 at byte column 5 (0xe9); expected UTF-8 text");
  write_text(dir + "/bad.jsonl", "{\"text\": \"ok\", \"label\": 1}\n{\"text\": \"\xff\", \"label\": 0}\n");
  TableOptions jsonl;
  jsonl.format = TableFormat::kJsonl;
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/bad.jsonl", jsonl); }),
            dir + "/bad.jsonl:2: invalid UTF-8 at byte column 11 (0xff); expected UTF-8 text");
  write_text(dir + "/train.tsv", "sentence\tlabel\ngood\t1\nbad \xc3\x28\t0\n");
  EXPECT_EQ(data_error_message([&] { read_glue(glue_task("SST-2"), dir + "/train.tsv"); }),
            dir + "/train.tsv:3: invalid UTF-8 at byte column 5 (0xc3); expected UTF-8 text");
  ReadOptions skip;
  skip.skip_bad_rows = true;
  EXPECT_EQ(read_glue(glue_task("SST-2"), dir + "/train.tsv", skip).skipped_rows, 1u);
}

TEST(TableReader, UnterminatedQuoteIsReportedWhereItOpens) {
  std::string dir = temp_dir();
  write_text(dir + "/q.csv", "text,label\nfine,1\nalso fine,0\nx,\"1\nmore\nand more\n");
  EXPECT_EQ(data_error_message([&] { read_table(dir + "/q.csv", TableOptions{}); }),
            dir + "/q.csv:4: unterminated quoted field at the end of the file (the quote opens at column 3)");
}

TEST(TableReader, LinesPastTheBoundAreRefusedNotReadWhole) {
  std::string dir = temp_dir();
  const size_t bound = text::max_line_bytes();
  text::set_max_line_bytes(64);
  write_text(dir + "/long.tsv", "sentence\tlabel\nshort\t1\n" + std::string(100, 'x') + "\t0\n");
  std::string message = data_error_message([&] { read_glue(glue_task("SST-2"), dir + "/long.tsv"); });
  // A quote never closed cannot pull the rest of the file into one record either.
  write_text(dir + "/open.csv", "text,label\n\"" + std::string(40, 'y') + "\n" + std::string(40, 'z') + "\n");
  std::string open = data_error_message([&] { read_table(dir + "/open.csv", TableOptions{}); });
  text::set_max_line_bytes(bound);
  EXPECT_EQ(message, dir + "/long.tsv:3: the line is longer than 64 bytes (the bound is --max-line-bytes)");
  EXPECT_EQ(open, dir + "/open.csv:2: the quoted field opened at column 1 runs past 64 bytes (--max-line-bytes); "
                        "is its quote never closed?");
}

TEST(TableReader, NonFiniteRegressionLabelsAreRefused) {
  EXPECT_EQ(data_error_message([&] { parse_regression_label("nan", "f.tsv", 4); }),
            "f.tsv:4: expected a finite regression label, got 'nan'");
  EXPECT_EQ(data_error_message([&] { parse_regression_label("-inf", "f.tsv", 5); }),
            "f.tsv:5: expected a finite regression label, got '-inf'");
  EXPECT_EQ(data_error_message([&] { parse_regression_label("1e300", "f.tsv", 6); }),
            "f.tsv:6: expected a finite regression label, got '1e300'");
  EXPECT_FLOAT_EQ(parse_regression_label("2.5", "f.tsv", 7), 2.5f);
}

TEST(SquadReader, StructureProblemsNameTheJsonPath) {
  std::string dir = temp_dir();
  write_text(dir + "/a.json", R"({"data": [{"title": "t", "paragraphs": {"context": "x"}}]})");
  EXPECT_EQ(data_error_message([&] { read_squad(dir + "/a.json"); }),
            dir + "/a.json: data[0].paragraphs: expected an array, got object");
  write_text(
      dir + "/b.json",
      R"({"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "q1", "question": "?", "answers": "abc"}]}]}]})");
  EXPECT_EQ(data_error_message([&] { read_squad(dir + "/b.json"); }),
            dir + "/b.json: data[0].paragraphs[0].qas[0] (id q1).answers: expected an array, got string");
  write_text(dir + "/c.json", R"([1, 2])");
  EXPECT_EQ(data_error_message([&] { read_squad(dir + "/c.json"); }),
            dir + "/c.json: top level: expected an object, got array");
  write_text(dir + "/d.json", R"({"data": [{"paragraphs": [{"context": [5], "qas": []}]}]})");
  EXPECT_EQ(data_error_message([&] { read_squad(dir + "/d.json"); }),
            dir + "/d.json: data[0].paragraphs[0].context: expected a string, got array");
}

}  // namespace
}  // namespace cabert::tasks
