// cabert inspect FILE [--json] [--limit N]: any cabert file's header, records and a summary.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "cmd/commands.h"
#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/io/record_file.h"
#include "lib/io/record_types.h"
#include "lib/text/tokenizer.h"

namespace cabert::cmd {
namespace {

struct InspectFlags {
  std::string input, tokenizer_model;
  bool json = false;
  bool config = false;
  int64_t limit = 5;
};

// inspect --config: the effective options the writing command recorded in the file's header.
void print_recorded_config(const std::string& path) {
  io::RecordReader reader(path);
  const pb::Header& header = reader.header();
  if (header.config().empty()) {
    std::string argv;
    for (const auto& arg : header.argv()) argv += (argv.empty() ? "" : " ") + arg;
    throw DataError(
        str(path, ": no recorded config (written by a cabert older than --config); its command line: ", argv));
  }
  std::cout << header.config();
}

std::string to_json(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) throw Error(str("JSON conversion failed: ", status.ToString()));
  return out;
}

class BytesBySize : public google::protobuf::TextFormat::FastFieldValuePrinter {
 public:
  void PrintBytes(const std::string& value, google::protobuf::TextFormat::BaseTextGenerator* generator) const override {
    generator->PrintString(str("<", value.size(), " bytes>"));
  }
};

// One line per record: scalar fields as name: value, repeated numbers as name: [a b c]; bytes (a checkpoint's
// tensor data) by their size, <4096 bytes>, not as kilobytes of escapes (--json keeps them whole).
std::string compact_text(const google::protobuf::Message& record) {
  using google::protobuf::FieldDescriptor;
  const auto* descriptor = record.GetDescriptor();
  const auto* reflection = record.GetReflection();
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.SetDefaultFieldValuePrinter(new BytesBySize());  // the printer owns it
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_map()) {
      // Every entry, sorted by key (a map's order is unspecified): values: {loss: 6.9, tokens: 437}
      const FieldDescriptor* key_field = field->message_type()->map_key();
      std::vector<std::pair<std::string, std::string>> entries;
      for (int k = 0; k < reflection->FieldSize(record, field); ++k) {
        const google::protobuf::Message& entry = reflection->GetRepeatedMessage(record, field, k);
        std::string key, value;
        if (key_field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          key = entry.GetReflection()->GetString(entry, key_field);  // unquoted, as the keys are names
        } else {
          printer.PrintFieldValueToString(entry, key_field, -1, &key);
        }
        printer.PrintFieldValueToString(entry, field->message_type()->map_value(), -1, &value);
        entries.emplace_back(key, value);
      }
      if (entries.empty()) continue;
      std::sort(entries.begin(), entries.end());
      out += field->name() + ": {";
      for (size_t k = 0; k < entries.size(); ++k) out += (k ? ", " : "") + entries[k].first + ": " + entries[k].second;
      out += "} ";
    } else if (field->is_repeated()) {
      // Every element: numbers space-separated (token ids: [2 57 3]), strings and messages comma-separated.
      const bool numbers =
          field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE && field->cpp_type() != FieldDescriptor::CPPTYPE_STRING;
      const int size = reflection->FieldSize(record, field);
      if (size == 0) continue;
      out += field->name() + ": [";
      for (int k = 0; k < size; ++k) {
        std::string value;
        printer.PrintFieldValueToString(record, field, k, &value);
        out += (k ? (numbers ? " " : ", ") : "") + value;
      }
      out += "] ";
    } else if (reflection->HasField(record, field)) {
      std::string value;
      printer.PrintFieldValueToString(record, field, -1, &value);
      out += field->name() + ": " + value + " ";
    }
  }
  return out;
}

// Ids of the first repeated integer field, for --model decoding.
std::vector<int> token_ids(const google::protobuf::Message& record) {
  using google::protobuf::FieldDescriptor;
  const auto* descriptor = record.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      std::vector<int> ids;
      for (int k = 0; k < record.GetReflection()->FieldSize(record, field); ++k) {
        ids.push_back(record.GetReflection()->GetRepeatedInt32(record, field, k));
      }
      return ids;
    }
  }
  return {};
}

// Length of the first repeated integer field ("ids", "token_ids"): what the histogram counts.
int token_count(const google::protobuf::Message& record) {
  const auto* descriptor = record.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (field->is_repeated() && (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT32 ||
                                 field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64)) {
      return record.GetReflection()->FieldSize(record, field);
    }
  }
  return -1;
}

void run_inspect(const InspectFlags& flags) {
  io::RecordReader reader(flags.input);
  std::optional<text::Tokenizer> tokenizer;
  if (!flags.tokenizer_model.empty()) tokenizer.emplace(flags.tokenizer_model);
  const auto& header = reader.header();
  if (tokenizer) {
    // inspect shows whatever a file holds, so another tokenizer's pieces are shown, not refused; but said.
    auto checksum = header.metadata().find("tokenizer_checksum");
    if (checksum != header.metadata().end() && checksum->second != tokenizer->checksum()) {
      log_warning(reader.name(), ": encoded with a different tokenizer (checksum ", checksum->second, ", ",
                  flags.tokenizer_model, " has ", tokenizer->checksum(),
                  "): the pieces shown are that model's, not the text's");
    }
  }
  const io::RecordType* type = io::find_record_type(header.message_type());
  std::unique_ptr<google::protobuf::Message> record;
  if (type) record.reset(google::protobuf::MessageFactory::generated_factory()->GetPrototype(type->descriptor)->New());

  if (flags.json) {
    std::cout << "{\"header\":" << to_json(header) << "}\n";
  } else {
    std::string text;
    google::protobuf::TextFormat::PrintToString(header, &text);
    std::cout << "# " << reader.name() << ": " << io::describe_record_type(header.message_type()) << "\n" << text;
  }
  uint64_t records = 0, tokens = 0, bytes = 0;
  int max_length = 0;
  bool has_tokens = false;  // records with a token field (the summary's tokens and histogram mean nothing else)
  std::map<int, uint64_t> histogram;  // bucket lower bound -> count
  std::string raw;
  while (reader.next_bytes(&raw)) {
    ++records;
    bytes += raw.size();
    if (!record) continue;
    if (!record->ParseFromString(raw)) {
      throw DataError(str(reader.name(), ": record ", records, " is not a valid ", header.message_type()));
    }
    int length = token_count(*record);
    if (length >= 0) {
      has_tokens = true;
      tokens += static_cast<uint64_t>(length);
      max_length = std::max(max_length, length);
      int bucket = 1;
      while (bucket * 2 <= length) bucket *= 2;
      ++histogram[length == 0 ? 0 : bucket];
    }
    if (flags.limit < 0 || static_cast<int64_t>(records) <= flags.limit) {
      std::vector<std::string> pieces;
      if (tokenizer) {
        for (int id : token_ids(*record)) {
          try {
            pieces.push_back(tokenizer->id_to_piece(id));
          } catch (const DataError& error) {
            throw DataError(str(reader.name(), ": record ", records, ": ", error.what()));
          }
        }
      }
      if (flags.json) {
        if (tokenizer) {
          nlohmann::ordered_json object = nlohmann::ordered_json::parse(to_json(*record));
          object["pieces"] = pieces;
          std::cout << object.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
        } else {
          std::cout << to_json(*record) << "\n";
        }
      } else {
        std::cout << "record " << records << ": " << compact_text(*record) << "\n";
        if (tokenizer) {
          std::cout << "  pieces:";
          for (const auto& piece : pieces) std::cout << ' ' << piece;
          std::cout << "\n";
        }
      }
    }
  }
  if (flags.json) {
    std::cout << "{\"summary\":{\"records\":" << records << ",\"tokens\":" << tokens << ",\"record_bytes\":" << bytes
              << ",\"max_length\":" << max_length << ",\"complete\":" << (reader.unfinished() ? "false" : "true")
              << ",\"length_histogram\":{";
    bool first = true;
    for (const auto& [bucket, count] : histogram) {
      std::cout << (first ? "" : ",") << "\"" << bucket << "\":" << count;
      first = false;
    }
    std::cout << "}}}\n";
    return;
  }
  std::cout << "# summary: " << records << " records, " << (has_tokens ? str(tokens, " tokens, ") : std::string())
            << bytes << " record bytes" << (has_tokens ? str(", longest ", max_length) : std::string()) << "\n";
  if (reader.unfinished()) {
    std::cout << "# still being written (no footer yet, or its writer was killed): the records of its complete "
                 "frames\n";
  }
  if (!histogram.empty()) {
    std::cout << "# length histogram (tokens: records)\n";
    for (const auto& [bucket, count] : histogram) {
      std::cout << "#   " << (bucket == 0 ? std::string("0") : str(bucket, "-", bucket * 2 - 1)) << ": " << count
                << "\n";
    }
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* inspect = app.add_subcommand("inspect", "Print any cabert file's header, records and a summary");
  inspect->add_option("file", flags->input, "A cabert file ('-' = stdin)")->required();
  inspect->add_option("-m,--model", flags->tokenizer_model, "SentencePiece .model: also print each record's pieces");
  inspect->add_flag("--json", flags->json, "JSON lines: header, records, summary");
  inspect->add_option("--limit", flags->limit, "Records to print (-1 = all)")->capture_default_str();
  CLI::Option* config =
      inspect->add_flag("--config", flags->config,
                        "Print only the options of the command that wrote FILE, as a --config file that reruns it");
  config->excludes("--json")->excludes("--model")->excludes("--limit");
  inspect->callback([flags] {
    if (flags->limit < -1) throw UsageError(str("--limit: expected -1 (all) or a count, got ", flags->limit));
    if (flags->config) {
      print_recorded_config(flags->input);
      return;
    }
    run_inspect(*flags);
  });
}

}  // namespace cabert::cmd
