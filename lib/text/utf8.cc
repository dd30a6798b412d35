#include "lib/text/utf8.h"

namespace cabert::text {

size_t decode_utf8_at(std::string_view text, size_t pos, char32_t* code_point) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    *code_point = lead;
    return 1;
  }
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (pos + length > text.size()) return 0;
  char32_t value = lead & (0xFF >> (length + 1));
  for (size_t i = 1; i < length; ++i) {
    const unsigned char next = byte(pos + i);
    if (next < (i == 1 ? low : 0x80) || next > (i == 1 ? high : 0xBF)) return 0;
    value = (value << 6) | (next & 0x3F);
  }
  *code_point = value;
  return length;
}

size_t find_invalid_utf8(std::string_view text) {
  char32_t ignored;
  for (size_t pos = 0, length = 0; pos < text.size(); pos += length) {
    length = decode_utf8_at(text, pos, &ignored);
    if (length == 0) return pos;
  }
  return std::string_view::npos;
}

std::string utf8_problem(std::string_view text) {
  const size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return "";
  const char* digits = "0123456789abcdef";
  const auto byte = static_cast<unsigned char>(text[bad]);
  return "invalid UTF-8 at byte column " + std::to_string(bad + 1) + " (0x" + digits[byte >> 4] + digits[byte & 15] +
         "); expected UTF-8 text";
}

}  // namespace cabert::text
