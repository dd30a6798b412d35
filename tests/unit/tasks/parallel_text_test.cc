#include "lib/tasks/parallel_text.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <unistd.h>

#include "lib/core/errors.h"

// Self-contained on purpose (no tests/test_paths.h): the readers need neither LibTorch nor record files,
// so this test also builds with a bare g++ line against lib/core.

namespace cabert::tasks {
namespace {

namespace fs = std::filesystem;

std::string shared_data_dir() {
  const char* env = std::getenv("CABERT_SHARED_DATA");
  if (env && *env) return env;
#ifdef CABERT_SHARED_DATA_DEFAULT
  if (*CABERT_SHARED_DATA_DEFAULT) return CABERT_SHARED_DATA_DEFAULT;
#endif
  return CABERT_SOURCE_DIR "/../shared/data";
}

class ParallelTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("cabert-parallel-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string write_gz(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    gzFile out = gzopen(path.c_str(), "wb");
    EXPECT_NE(out, nullptr);
    EXPECT_EQ(gzwrite(out, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
    gzclose(out);
    return path;
  }

  fs::path dir_;
};

// The message of the DataError that `action` throws; a test failure (and "") when it throws none.
std::string data_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& error) {
    EXPECT_EQ(error.exit_code(), 3);
    return error.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

std::string usage_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const UsageError& error) {
    EXPECT_EQ(error.exit_code(), 2);
    return error.what();
  }
  ADD_FAILURE() << "expected a UsageError";
  return "";
}

TEST_F(ParallelTextTest, ReadsAlignedPlainFiles) {
  std::string de = write("train.de", "Ein Hund läuft.\nZwei Katzen.\nDrei Vögel singen.\n");
  std::string en = write("train.en", "A dog runs.\nTwo cats.\nThree birds sing.\n");
  ParallelData data = read_parallel_files(de, en);
  EXPECT_EQ(data.source_path, de);
  EXPECT_EQ(data.target_path, en);
  ASSERT_EQ(data.pairs.size(), 3u);
  EXPECT_EQ(data.pairs[0].source, "Ein Hund läuft.");
  EXPECT_EQ(data.pairs[0].target, "A dog runs.");
  EXPECT_EQ(data.pairs[0].line, 1u);
  EXPECT_EQ(data.pairs[2].source, "Drei Vögel singen.");
  EXPECT_EQ(data.pairs[2].target, "Three birds sing.");
  EXPECT_EQ(data.pairs[2].line, 3u);
  EXPECT_EQ(data.skipped_rows, 0u);
}

TEST_F(ParallelTextTest, ReadsGzipByContentNotByName) {
  // A gzip file without .gz, a plain file with .gz, and both mixed in one pair.
  std::string de = write_gz("train.de", "Ein Hund.\nZwei Katzen.");
  std::string en = write("train.en.gz", "A dog.\nTwo cats.\n");
  ParallelData data = read_parallel_files(de, en);
  ASSERT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.pairs[1].source, "Zwei Katzen.");
  EXPECT_EQ(data.pairs[1].target, "Two cats.");
}

TEST_F(ParallelTextTest, ReadsLongGzipFileAcrossBufferBoundaries) {
  std::string de, en;
  for (int i = 1; i <= 20000; ++i) {
    de += "Satz Nummer " + std::to_string(i) + " mit etwas Text, damit die Puffer sich füllen.\n";
    en += "Sentence number " + std::to_string(i) + "\r\n";
  }
  ParallelData data = read_parallel_files(write_gz("a.de.gz", de), write_gz("a.en.gz", en));
  ASSERT_EQ(data.pairs.size(), 20000u);
  EXPECT_EQ(data.pairs[12345].source, "Satz Nummer 12346 mit etwas Text, damit die Puffer sich füllen.");
  EXPECT_EQ(data.pairs[12345].target, "Sentence number 12346");
  EXPECT_EQ(data.pairs[19999].line, 20000u);
}

TEST_F(ParallelTextTest, MismatchedLineCountsNameBothFilesAndCounts) {
  std::string de = write("train.de", "eins\nzwei\ndrei\n");
  std::string en = write_gz("train.en", "one\ntwo\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en); }),
            de + " has 3 lines but " + en + " has 2; expected line-aligned files");
  EXPECT_EQ(data_error([&] { read_parallel_files(en, de); }),
            en + " has 2 lines but " + de + " has 3; expected line-aligned files");
  // A single line, and a trailing blank line that is a real (extra) line.
  std::string one = write("one.de", "eins");
  std::string extra = write("extra.en", "one\n\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(one, extra); }),
            one + " has 1 line but " + extra + " has 2; expected line-aligned files");
}

TEST_F(ParallelTextTest, MismatchIsCheckedPastMaxPairsAndReportedBeforeEarlierBadRows) {
  std::string de = write("a.de", "eins\n\ndrei\nvier\n");
  std::string en = write("a.en", "one\ntwo\nthree\n");
  ParallelReadOptions options;
  options.max_pairs = 1;
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en, options); }),
            de + " has 4 lines but " + en + " has 3; expected line-aligned files");
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en); }),
            de + " has 4 lines but " + en + " has 3; expected line-aligned files");
}

TEST_F(ParallelTextTest, EmptySideIsADataErrorWithFileAndLine) {
  std::string de = write("a.de", "eins\nzwei\ndrei\n");
  std::string en = write("a.en", "one\n \t\nthree\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en); }), en + ":2: expected a sentence, got a blank line");
  std::string blank_de = write("b.de", "eins\n\n");
  std::string en2 = write("b.en", "one\ntwo\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(blank_de, en2); }),
            blank_de + ":2: expected a sentence, got a blank line");
}

TEST_F(ParallelTextTest, InvalidUtf8NamesFileLineAndByteColumn) {
  std::string de = write("a.de", "eins\nzw\xC3\xA4i \xFF\n");
  std::string en = write("a.en", "one\ntwo\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en); }),
            de + ":2: invalid UTF-8 at byte column 7 (0xff); expected UTF-8 text");
  // Latin-1 text (a common mistake) in a gzip file on the target side.
  std::string latin1 = write_gz("b.en", "one\nM\xE4nner\n");
  EXPECT_EQ(data_error([&] { read_parallel_files(en, latin1); }),
            latin1 + ":2: invalid UTF-8 at byte column 2 (0xe4); expected UTF-8 text");
}

TEST_F(ParallelTextTest, StripsBomAndCrlfAndAcceptsMissingFinalNewline) {
  std::string de = write("a.de", "\xEF\xBB\xBF"
                                 "eins\r\nzwei\r\ndrei");
  std::string en = write_gz("a.en", "\xEF\xBB\xBF"
                                    "one\ntwo\r\nthree\r\n");
  ParallelData data = read_parallel_files(de, en);
  ASSERT_EQ(data.pairs.size(), 3u);
  EXPECT_EQ(data.pairs[0].source, "eins");
  EXPECT_EQ(data.pairs[0].target, "one");
  EXPECT_EQ(data.pairs[1].source, "zwei");
  EXPECT_EQ(data.pairs[1].target, "two");
  EXPECT_EQ(data.pairs[2].source, "drei");
  EXPECT_EQ(data.pairs[2].target, "three");
}

TEST_F(ParallelTextTest, SkipBadRowsCountsThem) {
  std::string de = write("a.de", "eins\n\ndrei\nvier \xFF\nf\xC3\xBCnf\n");
  std::string en = write("a.en", "one\ntwo\n  \nfour\nfive\n");
  ParallelReadOptions options;
  options.skip_bad_rows = true;
  ParallelData data = read_parallel_files(de, en, options);
  EXPECT_EQ(data.skipped_rows, 3u);
  ASSERT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.pairs[0].source, "eins");
  EXPECT_EQ(data.pairs[1].source, "fünf");
  EXPECT_EQ(data.pairs[1].target, "five");
  EXPECT_EQ(data.pairs[1].line, 5u);
}

TEST_F(ParallelTextTest, MaxPairsKeepsTheFirstGoodPairs) {
  std::string de = write("a.de", "eins\n\ndrei\nvier\nfünf\n");
  std::string en = write("a.en", "one\ntwo\nthree\nfour\nfive\n");
  ParallelReadOptions options;
  options.max_pairs = 2;
  options.skip_bad_rows = true;
  ParallelData data = read_parallel_files(de, en, options);
  ASSERT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.pairs[1].target, "three");
  EXPECT_EQ(data.skipped_rows, 1u);
  options.max_pairs = 0;
  EXPECT_EQ(read_parallel_files(de, en, options).pairs.size(), 4u);
}

TEST_F(ParallelTextTest, OverlongLinesAreBadRows) {
  std::string de = write("a.de", "eins\n" + std::string(100, 'x') + "\ndrei\n");
  std::string en = write("a.en", "one\ntwo\nthree\n");
  ParallelReadOptions options;
  options.max_line_bytes = 64;
  EXPECT_EQ(data_error([&] { read_parallel_files(de, en, options); }),
            de + ":2: expected a line of at most 64 bytes, got a longer one");
  options.skip_bad_rows = true;
  ParallelData data = read_parallel_files(de, en, options);
  EXPECT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.skipped_rows, 1u);
  EXPECT_EQ(data.pairs[1].source, "drei");
}

TEST_F(ParallelTextTest, EmptyFilesGiveNoPairs) {
  ParallelData data = read_parallel_files(write("a.de", ""), write_gz("a.en", ""));
  EXPECT_TRUE(data.pairs.empty());
}

TEST_F(ParallelTextTest, CorruptOrForeignCompressionIsADataError) {
  std::string good = write("ok.en", "one\ntwo\n");
  std::string whole;
  {
    std::string gz = write_gz("full.gz", std::string(5000, 'a') + "\nb\n");
    std::ifstream in(gz, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string truncated = write("truncated.de", whole.substr(0, whole.size() / 2));
  EXPECT_EQ(data_error([&] { read_parallel_files(truncated, good); }),
            truncated + ": corrupt or truncated gzip data: unexpected end of file");
  std::string xz = write("a.de.xz", std::string("\xFD"
                                                "7zXZ\0rest",
                                                10));
  EXPECT_EQ(data_error([&] { read_parallel_files(xz, good); }),
            xz + ": expected plain or gzip-compressed text, got a xz-compressed file");
}

TEST_F(ParallelTextTest, MissingFileIsAUsageError) {
  std::string good = write("ok.en", "one\n");
  std::string missing = (dir_ / "nope.de").string();
  EXPECT_EQ(usage_error([&] { read_parallel_files(missing, good); }),
            "cannot open input file " + missing + ": No such file or directory");
}

TEST_F(ParallelTextTest, ReadsTsvWithAndWithoutHeader) {
  std::string tsv = write("pairs.tsv", "\xEF\xBB\xBF"
                                       "Ein Hund.\tA dog.\r\nZwei Katzen.\tTwo cats.");
  ParallelData data = read_parallel_tsv(tsv);
  EXPECT_EQ(data.source_path, tsv);
  EXPECT_EQ(data.target_path, tsv);
  ASSERT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.pairs[0].source, "Ein Hund.");
  EXPECT_EQ(data.pairs[0].target, "A dog.");
  EXPECT_EQ(data.pairs[1].target, "Two cats.");
  EXPECT_EQ(data.pairs[1].line, 2u);

  ParallelReadOptions options;
  options.header = true;
  std::string with_header = write_gz("header.tsv", "de\ten\nEin Hund.\tA dog.\n");
  data = read_parallel_tsv(with_header, options);
  ASSERT_EQ(data.pairs.size(), 1u);
  EXPECT_EQ(data.pairs[0].source, "Ein Hund.");
  EXPECT_EQ(data.pairs[0].line, 2u);
  std::string empty = write("empty.tsv", "");
  EXPECT_EQ(data_error([&] { read_parallel_tsv(empty, options); }), empty + ": empty file, expected a header row");
}

TEST_F(ParallelTextTest, TsvRowProblems) {
  std::string three = write("three.tsv", "a\tb\nc\td\te\n");
  EXPECT_EQ(data_error([&] { read_parallel_tsv(three); }), three + ":2: expected 2 tab-separated fields, got 3");
  std::string one = write("one.tsv", "a\tb\nno tab here\n");
  EXPECT_EQ(data_error([&] { read_parallel_tsv(one); }), one + ":2: expected 2 tab-separated fields, got 1");
  std::string blank = write("blank.tsv", "a\t \n");
  EXPECT_EQ(data_error([&] { read_parallel_tsv(blank); }),
            blank + ":1: expected a target sentence in field 2, got a blank field");
  std::string bad = write("bad.tsv", "a\tb\nc\td\xC3\n");
  EXPECT_EQ(data_error([&] { read_parallel_tsv(bad); }),
            bad + ":2: invalid UTF-8 at byte column 4 (0xc3); expected UTF-8 text");

  std::string mixed = write("mixed.tsv", "a\tb\n\tx\nc\td\te\ng\th\ni\tj\n");
  ParallelReadOptions options;
  options.skip_bad_rows = true;
  ParallelData data = read_parallel_tsv(mixed, options);
  EXPECT_EQ(data.skipped_rows, 2u);
  ASSERT_EQ(data.pairs.size(), 3u);
  EXPECT_EQ(data.pairs[1].source, "g");
  EXPECT_EQ(data.pairs[1].line, 4u);
  options.max_pairs = 2;
  data = read_parallel_tsv(mixed, options);
  ASSERT_EQ(data.pairs.size(), 2u);
  EXPECT_EQ(data.pairs[1].target, "h");
}

TEST_F(ParallelTextTest, FindsSplitFilesPlainOrGzipped) {
  write_gz("train.de.gz", "x\n");
  write("train.en", "y\n");
  write_gz("val.de.gz", "x\n");
  write_gz("val.en.gz", "y\n");
  write("test_2016_flickr.de", "x\n");
  write("test_2016_flickr.en", "y\n");
  write("only.de", "x\n");
  std::string dir = dir_.string();
  ParallelSplitFiles files = find_parallel_split(dir, "train", "de", "en");
  EXPECT_EQ(files.source_path, (dir_ / "train.de.gz").string());
  EXPECT_EQ(files.target_path, (dir_ / "train.en").string());
  files = find_parallel_split(dir, "val", "en", "de");
  EXPECT_EQ(files.source_path, (dir_ / "val.en.gz").string());
  EXPECT_EQ(files.target_path, (dir_ / "val.de.gz").string());

  EXPECT_EQ(usage_error([&] { find_parallel_split(dir, "test", "de", "en"); }),
            "no test split for de-en in " + dir + ": looked for " + dir + "/test.de[.gz] and " + dir +
                "/test.en[.gz]; splits there: test_2016_flickr, train, val");
  EXPECT_EQ(usage_error([&] { find_parallel_split(dir, "only", "de", "fr"); }),
            "no only split for de-fr in " + dir + ": looked for " + dir + "/only.de[.gz] and " + dir +
                "/only.fr[.gz]; no split of that language pair is there");
  write("val.en", "y\n");
  EXPECT_EQ(usage_error([&] { find_parallel_split(dir, "val", "de", "en"); }),
            "both " + dir + "/val.en and " + dir + "/val.en.gz exist; expected one (they may differ)");
  EXPECT_EQ(usage_error([&] { find_parallel_split(dir + "/absent", "val", "de", "en"); }),
            dir + "/absent: no such directory, expected one holding val.de[.gz] and val.en[.gz]");
}

TEST_F(ParallelTextTest, ReadsMulti30k) {
  std::string dir = shared_data_dir() + "/mt/multi30k";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " is absent (user clone): skipped";
  ParallelSplitFiles train = find_parallel_split(dir, "train", "de", "en");
  EXPECT_EQ(fs::path(train.source_path).filename(), "train.de.gz");
  ParallelData data = read_parallel_files(train.source_path, train.target_path);
  ASSERT_EQ(data.pairs.size(), 29000u);
  EXPECT_EQ(data.skipped_rows, 0u);
  EXPECT_EQ(data.pairs[0].source, "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.");
  EXPECT_EQ(data.pairs[0].target, "Two young, White males are outside near many bushes.");
  EXPECT_EQ(data.pairs.back().line, 29000u);

  ParallelSplitFiles test = find_parallel_split(dir, "test_2016_flickr", "de", "en");
  data = read_parallel_files(test.source_path, test.target_path);
  ASSERT_EQ(data.pairs.size(), 1000u);
  EXPECT_EQ(data.pairs[0].source, "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.");
  EXPECT_EQ(data.pairs[0].target, "A man in an orange hat starring at something.");
  EXPECT_EQ(read_parallel_files(dir + "/val.de.gz", dir + "/val.en.gz").pairs.size(), 1014u);
}

TEST_F(ParallelTextTest, ShippedMulti30kSliceMatchesItsSource) {
  std::string slice = CABERT_SOURCE_DIR "/tests/data/mt/multi30k-slice";
  ParallelData train = read_parallel_files(slice + "/train.de", slice + "/train.en");
  ParallelData test = read_parallel_files(slice + "/test.de", slice + "/test.en");
  ASSERT_EQ(train.pairs.size(), 200u);
  ASSERT_EQ(test.pairs.size(), 100u);
  EXPECT_EQ(train.pairs[0].target, "Two young, White males are outside near many bushes.");
  EXPECT_EQ(test.pairs[0].target, "A man in an orange hat starring at something.");
  std::string dir = shared_data_dir() + "/mt/multi30k";
  if (!fs::is_directory(dir)) return;
  ParallelReadOptions first;
  first.max_pairs = 200;
  ParallelData full = read_parallel_files(dir + "/train.de.gz", dir + "/train.en.gz", first);
  for (size_t i = 0; i < 200; ++i) {
    EXPECT_EQ(train.pairs[i].source, full.pairs[i].source) << i;
    EXPECT_EQ(train.pairs[i].target, full.pairs[i].target) << i;
  }
}

}  // namespace
}  // namespace cabert::tasks
