#include "lib/core/json_input.h"

#include "lib/core/errors.h"

namespace cabert {
namespace {

struct TooDeep {};

}  // namespace

std::string json_error_detail(const nlohmann::json::exception& error) {
  std::string what = error.what();
  auto bracket = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos ? what.substr(bracket + 2) : what;
}

nlohmann::json parse_json_input(const std::string& text, int max_depth) {
  // `depth` counts the arrays and objects around the one that starts.
  auto bound = [max_depth](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, bound);
  } catch (const TooDeep&) {
    throw JsonInputError(str("arrays and objects nested deeper than ", max_depth, " levels"), 0);
  } catch (const nlohmann::json::parse_error& error) {
    throw JsonInputError(json_error_detail(error), error.byte);
  } catch (const nlohmann::json::out_of_range& error) {  // "1e400": no position given
    throw JsonInputError(json_error_detail(error), 0);
  }
}

}  // namespace cabert
