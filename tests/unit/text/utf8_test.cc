// The shared UTF-8 check (moved from the parallel-text tests with lib/text/utf8.h, assertions unchanged), and
// decoding of code points.
#include <gtest/gtest.h>

#include <string_view>

#include "lib/text/utf8.h"

namespace cabert::text {
namespace {

TEST(Utf8, ValidatorRejectsOverlongSurrogatesAndTruncation) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("Gr\xC3\xBC\xC3\x9F Gott \xE2\x82\xAC \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("ab\xC0\xAF"), 2u);         // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xED\xA0\x80"), 1u);      // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("a\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("abc\xE2\x82"), 3u);        // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\x80"), 0u);               // lone continuation byte
}

TEST(Utf8, DecodesCodePointsWithTheirLengths) {
  char32_t c = 0;
  EXPECT_EQ(decode_utf8_at("a", 0, &c), 1u);
  EXPECT_EQ(c, U'a');
  EXPECT_EQ(decode_utf8_at("x\xC3\xA9", 1, &c), 2u);  // U+00E9
  EXPECT_EQ(c, U'\u00E9');
  EXPECT_EQ(decode_utf8_at("\xE2\x82\xAC", 0, &c), 3u);  // U+20AC
  EXPECT_EQ(c, U'\u20AC');
  EXPECT_EQ(decode_utf8_at("\xF0\x9F\x98\x80", 0, &c), 4u);  // U+1F600
  EXPECT_EQ(c, U'\U0001F600');
  EXPECT_EQ(decode_utf8_at("\xE0\x80\x80", 0, &c), 0u);  // overlong NUL
}

}  // namespace
}  // namespace cabert::text
