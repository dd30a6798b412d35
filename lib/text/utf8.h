// UTF-8 as Python's strict decoder reads it (overlong forms, surrogates, code points above U+10FFFF and cut-off
// sequences are malformed), shared by every reader and metric that must say where a text stops being UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cabert::text {

// Decodes the code point starting at text[pos] into *code_point and returns its length in bytes, or 0 when
// the bytes there are not well-formed UTF-8.
size_t decode_utf8_at(std::string_view text, size_t pos, char32_t* code_point);

// Byte index of the first byte that starts no valid UTF-8 sequence, or std::string_view::npos when `text`
// is valid UTF-8.
size_t find_invalid_utf8(std::string_view text);

// "" when `text` is valid UTF-8, else "invalid UTF-8 at byte column N (0xHH); expected UTF-8 text" (N 1-based):
// the one wording every reader uses.
std::string utf8_problem(std::string_view text);

}  // namespace cabert::text
