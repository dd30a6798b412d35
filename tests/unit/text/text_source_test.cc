#include "lib/text/text_source.h"

#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "tests/test_paths.h"

namespace cabert::text {
namespace {

using cabert::testing::temp_dir;
using cabert::testing::write_text;

std::vector<Sentence> read_all(const std::vector<std::string>& inputs, TextFormat format) {
  SentenceSource source(inputs, format);
  std::vector<Sentence> out;
  Sentence sentence;
  while (source.next(&sentence)) out.push_back(sentence);
  return out;
}

std::string render(const std::vector<Sentence>& sentences) {
  std::string out;
  for (const auto& sentence : sentences) out += sentence.document_end ? std::string("|") : "[" + sentence.text + "]";
  return out;
}

TEST(TextSource, LinesFormatSplitsDocumentsAtBlankLinesAndStripsBomAndCrlf) {
  std::string path = temp_dir() + "/in.txt";
  write_text(path, "\xEF\xBB\xBFOne.\r\nTwo.\r\n\r\n\r\nThree.\nFour.");  // no final newline
  EXPECT_EQ(render(read_all({path}, TextFormat::kLines)), "[One.][Two.]|[Three.][Four.]|");
}

TEST(TextSource, EachInputEndsADocument) {
  std::string dir = temp_dir();
  write_text(dir + "/a.txt", "A1.\nA2.\n");
  write_text(dir + "/b.txt", "\nB1.\n\n");
  auto sentences = read_all({dir + "/a.txt", dir + "/b.txt"}, TextFormat::kLines);
  EXPECT_EQ(render(sentences), "[A1.][A2.]|[B1.]|");
  EXPECT_EQ(sentences[0].source, 0u);
  EXPECT_EQ(sentences[3].source, 1u);
  EXPECT_EQ(sentences[3].line, 2u);
}

TEST(TextSource, GutenbergKeepsOnlyTheBodyAndSplitsParagraphsIntoSentences) {
  std::string path = temp_dir() + "/book.txt";
  write_text(path, "\xEF\xBB\xBFThe Project Gutenberg eBook of Test\r\nLicence text. More licence.\r\n"
                   "*** START OF THE PROJECT GUTENBERG EBOOK TEST ***\r\n\r\n"
                   "It was a dark night. Mr. Smith walked\r\nhome slowly! Did he\r\nknow?\r\n\r\n"
                   "\"Yes,\" she said. \xE2\x80\x9CIndeed.\xE2\x80\x9D Then silence.\r\n"
                   "*** END OF THE PROJECT GUTENBERG EBOOK TEST ***\r\nMore licence. Donations.\r\n");
  EXPECT_EQ(render(read_all({path}, TextFormat::kGutenberg)),
            "[It was a dark night.][Mr. Smith walked home slowly!][Did he know?]"
            "[\"Yes,\" she said.][\xE2\x80\x9CIndeed.\xE2\x80\x9D][Then silence.]|");
}

// Older ebooks (e.g. #27942, in ../shared/data) write the markers without the space after the asterisks.
TEST(TextSource, GutenbergMarkersWithoutTheSpace) {
  std::string path = temp_dir() + "/old.txt";
  write_text(path, "The Project Gutenberg EBook of Logic\n\n***START OF THE PROJECT GUTENBERG EBOOK LOGIC ***\n\n"
                   "All men are mortal.\n\n***END OF THE PROJECT GUTENBERG EBOOK LOGIC ***\nLicence.\n");
  EXPECT_EQ(render(read_all({path}, TextFormat::kGutenberg)), "[All men are mortal.]|");
}

TEST(TextSource, GutenbergWithoutStartMarkerIsBadInput) {
  std::string path = temp_dir() + "/plain.txt";
  write_text(path, "Just text.\n");
  try {
    read_all({path}, TextFormat::kGutenberg);
    FAIL() << "expected DataError";
  } catch (const DataError& error) {
    EXPECT_EQ(std::string(error.what()),
              path + ": no '*** START OF' marker found; is this a Project Gutenberg file? (use --input-format "
                     "paragraphs for other prose)");
  }
}

// Bytes that are not UTF-8 (a Latin-1 file) are bad input at their line and column, in every format, not
// [UNK]s in the corpus.
TEST(TextSource, InvalidUtf8IsBadInputAtItsLineAndColumn) {
  std::string path = temp_dir() + "/latin1.txt";
  write_text(path, "hello world\nbad \xFF\xFE bytes\n");
  for (TextFormat format : {TextFormat::kLines, TextFormat::kParagraphs}) {
    EXPECT_EQ(testing::data_error_message([&] { read_all({path}, format); }),
              path + ":2: invalid UTF-8 at byte column 5 (0xff); expected UTF-8 text");
  }
}

TEST(TextSource, SentenceSplitterKeepsAbbreviationsAndInitials) {
  EXPECT_EQ(split_sentences("Dr. J. S. Mill wrote it. It sold well."),
            (std::vector<std::string>{"Dr. J. S. Mill wrote it.", "It sold well."}));
  EXPECT_EQ(split_sentences("Pi is 3.14 exactly. no split here? maybe"),
            (std::vector<std::string>{"Pi is 3.14 exactly. no split here? maybe"}));
  EXPECT_EQ(split_sentences("Wait... What happened? (Nothing.) Fine."),
            (std::vector<std::string>{"Wait...", "What happened?", "(Nothing.)", "Fine."}));
}

}  // namespace
}  // namespace cabert::text
