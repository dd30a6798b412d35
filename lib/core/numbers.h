// Numbers read from files (checkpoint metadata, record headers, task labels) are input like any other:
// parsed whole, range-checked, and refused with a DataError that says where they came from. std::stoi and
// friends would accept "12abc", throw exceptions without context, or wrap around.
#pragma once

#include <cstdint>
#include <string>

namespace cabert {

// The whole of `text` as a base-10 integer in [min, max], or DataError "WHERE: expected an integer in
// [min, max], got 'text'".
int64_t parse_integer(const std::string& text, int64_t min, int64_t max, const std::string& where);

// The whole of `text` as a finite number, or DataError "WHERE: expected a finite number, got 'text'".
double parse_finite(const std::string& text, const std::string& where);

// `value` in the fewest digits that parse back to the same double ("%.17g" at most): for numbers a resumed run
// must read back exactly (str() keeps 6 significant digits).
std::string exact_number(double value);

}  // namespace cabert
