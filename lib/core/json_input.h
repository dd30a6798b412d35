// JSON read from files (JSONL task data, SQuAD, Hugging Face configs) is input like any other. nlohmann's
// parser throws more than parse_error (a number beyond double's range is an out_of_range), and it parses
// nesting iteratively but prints and copies values recursively: a few hundred kilobytes of '[' parse fine
// and then overflow the stack when the value is printed in a message. parse_json_input bounds the nesting
// and turns every refusal into one exception that says where.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace cabert {

// serde_json's recursion limit (the reference safetensors reader): no real file comes near it.
inline constexpr int kMaxJsonDepth = 128;

class JsonInputError : public std::runtime_error {
 public:
  JsonInputError(const std::string& message, uint64_t byte) : std::runtime_error(message), byte_(byte) {}
  // 1-based position in the text where the parser stopped; 0 when unknown.
  uint64_t byte() const { return byte_; }

 private:
  uint64_t byte_;
};

// Throws JsonInputError for invalid JSON, a number out of range, or arrays and objects nested deeper than
// `max_depth`; the message is nlohmann's without its "[json.exception...]" prefix.
nlohmann::json parse_json_input(const std::string& text, int max_depth = kMaxJsonDepth);

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_error_detail(const nlohmann::json::exception& error);

}  // namespace cabert
